"""The Stash releases we claim (``stash/releases.py``), checked against each release's own
schema and hooks (``shared/stash-schema/versions/<tag>/``: that tag's ``graphql/schema/``
and ``pkg/plugin/hook/hooks.go``, read by ``tests/emulators/stash_releases.py``).

- Every GraphQL operation the plugin can send (the query texts in ``stash/``, the UI's
  ``gql`` texts, and every request stashapi and our client really send, with their
  variables) parses, validates and coerces in every supported release (graphql-core).
- The hooks we register cover every change in every supported release.
- The emulator plays each release: its schema, version, hooks and date rules.
- A Stash older than the minimum gets one clear error per run, no dead letter, no write.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import re
import time

import pytest
import requests
import yaml
from graphql import GraphQLSchema, OperationDefinitionNode, build_ast_schema, parse, validate
from graphql.execution.values import get_variable_values

import stash as stash_package
from stash.client import StashClient
from stash.releases import GROUPS_SINCE, MIN_STASH_VERSION, NEWEST_TESTED, PARTIAL_DATES_SINCE, spelled
from tests import reference
from tests.emulators import stash_releases
from tests.emulators.stash_emulator import StashEmulator
from tests.emulators.stash_releases import releases, stored_date, triggers, version_of
from tests.runner import REPO
from validation.document import ENTITY_HOOKS, HOOK_TRIGGERS, SCENE_HOOKS
from validation.plugin_input import ServerConnection

reference.need("stash-schema/versions", "Stash's schemas per release")
SUPPORTED = [tag for tag in releases() if MIN_STASH_VERSION <= version_of(tag)]
MIN_RELEASE = SUPPORTED[0]


@functools.cache
def _schema(tag: str) -> GraphQLSchema:
    return build_ast_schema(stash_releases.schema_document(tag))  # checked: the emulator assumes it valid


def _problems(schema: GraphQLSchema, query: str, variables: dict | None = None) -> list[str]:
    """graphql-core's verdict on one request: parse, validate, coerce its variables (when given)."""
    document = parse(query)
    errors = validate(schema, document)
    if errors:
        return [e.message for e in errors]
    problems: list[str] = []
    for operation in document.definitions:
        if isinstance(operation, OperationDefinitionNode) and variables is not None:
            coerced = get_variable_values(schema, operation.variable_definitions or (), variables)
            problems += [e.message for e in coerced] if isinstance(coerced, list) else []
    return problems


def _plugin_operations() -> dict[str, str]:
    """Every operation text in the code: the string constants of ``stash/`` that are
    GraphQL operations, and the UI's ``gql`` literals (``ui/stash2plex.js``)."""
    found: dict[str, str] = {}
    for info in pkgutil.iter_modules(stash_package.__path__):
        module = importlib.import_module(f"stash.{info.name}")
        for name, value in vars(module).items():
            if isinstance(value, str) and re.match(r"\s*(query|mutation)\s+\w+", value):
                found[f"stash.{info.name}.{name}"] = value
    script = (REPO / "ui" / "stash2plex.js").read_text(encoding="utf-8")
    for n, text in enumerate(re.findall(r"gql`([^`]*)`", script)):
        found[f"ui/stash2plex.js gql #{n + 1}"] = text
    return found


def test_the_supported_range_is_covered_by_the_releases_we_hold():
    tags = [version_of(t) for t in SUPPORTED]
    assert tags[0] == MIN_STASH_VERSION and tags[-1] == NEWEST_TESTED, SUPPORTED
    for since in (GROUPS_SINCE, PARTIAL_DATES_SINCE):  # each difference is tested on both sides
        assert any(v < since for v in tags) and any(v >= since for v in tags)


@pytest.mark.parametrize("tag", SUPPORTED)
def test_every_operation_in_the_code_is_valid_in_every_supported_release(tag):
    operations = _plugin_operations()
    assert len(operations) >= 10 and any(name.startswith("ui/") for name in operations)
    schema = _schema(tag)
    problems = {
        name: p for name, text in operations.items() if (p := _problems(schema, spelled(text, version_of(tag))))
    }
    assert problems == {}, f"Stash {tag} refuses: {problems}"


def _connect(emu: StashEmulator) -> StashClient:
    return StashClient(ServerConnection.model_validate(emu.server_connection("/tmp/stash/plugins/Stash2Plex")))


# Every public method of StashClient, called with arguments that send each variant of its
# request. A new method fails the coverage assertion until it is added here.
CALLS = {
    "read_photos": lambda c, sid: c.read_photos(True),  # first: every scene query then sent as written
    "plugin_settings": lambda c, sid: c.plugin_settings(),
    "scenes_by_id": lambda c, sid: c.scenes_by_id([sid, sid + 1000]),  # the missing id is dropped and asked again
    "scenes_after": lambda c, sid: (c.scenes_after(0, 10), c.scenes_after(0, 10, "2020-01-01T00:00:00Z")),
    "newest_updated_at": lambda c, sid: c.newest_updated_at(),
    "scene_pages": lambda c, sid: (list(c.scene_pages(10)), list(c.scene_pages(10, "2020-01-01T00:00:00Z"))),
    "tag_parents": lambda c, sid: c.tag_parents(),
    "tag_tree": lambda c, sid: c.tag_tree(),
    "version": lambda c, sid: c.version(),
    "needs_login": lambda c, sid: c.needs_login(),
    "image": lambda c, sid: c.image(c.scenes_by_id([sid])[sid]["paths"]["screenshot"]),
    "own_url": lambda c, sid: c.own_url("http://elsewhere.invalid/scene/1/screenshot"),
    "play_history": lambda c, sid: c.play_history(sid),
    "add_play": lambda c, sid: c.add_play(sid, "2024-05-01T20:00:00Z"),
    "scene_state": lambda c, sid: c.scene_state(sid),
    "save_resume": lambda c, sid: c.save_resume(sid, 12.5),
    "set_rating": lambda c, sid: c.set_rating(sid, 80),
}


@pytest.mark.parametrize("tag", SUPPORTED)
def test_every_request_the_client_sends_is_valid_in_every_supported_release(tag):
    with StashEmulator(release=tag) as emu:
        emu.auth_required = False
        sid = emu.add_scene(title="A", studio="S", tags=["Child"], performers=["P"], groups=["Series G"])
        emu.set_tag_parents("Child", ["Parent"])
        emu.plugin_settings = {"Stash2Plex": {"plex_url": "http://plex.invalid"}}
        client = _connect(emu)
        public = {n for n, _ in inspect.getmembers(StashClient, callable) if not n.startswith("_")}
        assert public == set(CALLS), f"add a call to CALLS for {public - set(CALLS)} (remove {set(CALLS) - public})"
        for call in CALLS.values():
            call(client, sid)
        scene = client.scenes_by_id([sid])[sid]
        assert scene["groups"] == [{"group": {"id": str(emu.entity_id("group", "Series G")), "name": "Series G"}}]
        assert client.version() == tag

        sent = [r for r in emu.requests if r["query"]]
        schema = _schema(tag)
        refused = {
            r["operation"] or r["query"][:60]: p for r in sent if (p := _problems(schema, r["query"], r["variables"]))
        }
        assert refused == {}
        assert {"StashVersion", "getApiKey"} <= {r["operation"] for r in sent}  # stashapi's own, when it connects
        texts = {r["query"] for r in sent}
        ours = {n: spelled(q, version_of(tag)) for n, q in _plugin_operations().items() if n.startswith("stash.")}
        assert {n for n, q in ours.items() if q not in texts} == set()  # every query of the client was sent

        newest = _plugin_operations()["stash.client._FIND_BY_IDS"]
        answer = requests.post(
            f"{emu.url}/graphql", json={"query": newest, "variables": {"ids": [str(sid)]}}, timeout=5
        )
        if version_of(tag) < GROUPS_SINCE:  # the emulator is as strict as the release it plays
            assert answer.status_code == 422
            assert answer.json()["errors"][0]["message"] == "Cannot query field 'groups' on type 'Scene'."
        else:
            assert answer.status_code == 200 and answer.json()["data"]["findScenes"]["count"] == 1


# -- hooks --------------------------------------------------------------------------------
def _registered() -> set[str]:
    config = yaml.safe_load((REPO / "Stash2Plex.yml").read_text(encoding="utf-8"))
    return {t for hook in config["hooks"] for t in hook["triggeredBy"]}


def test_the_hooks_we_register_follow_every_change_in_every_supported_release():
    registered = _registered()
    assert registered == set(HOOK_TRIGGERS)
    for tag in SUPPORTED:
        fired = triggers(tag)
        assert set(SCENE_HOOKS) <= fired, tag
        kinds = {ENTITY_HOOKS[t] for t in registered & fired if t in ENTITY_HOOKS}
        assert kinds == set(ENTITY_HOOKS.values()), (
            f"Stash {tag} fires nothing we register for {set(ENTITY_HOOKS.values()) - kinds}"
        )
    assert registered <= set().union(*(triggers(t) for t in SUPPORTED))  # each fires in some release


@pytest.mark.parametrize("tag", SUPPORTED)
def test_a_group_change_fires_what_the_release_fires(tag):
    version = version_of(tag)
    expected = ("Movie",) if version < (0, 27, 0) else ("Group", "Movie")
    assert stash_releases.group_hook_kinds(version, triggers(tag)) == expected  # from hooks.go
    assert stash_releases.group_hook_kinds(version) == expected  # the rule without a release's files


# -- dates ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value, before_v030, from_v030",
    [
        ("2021-03-15", "2021-03-15", "2021-03-15"),
        ("2021-03-15T23:30:00-05:00", "2021-03-15", "2021-03-15"),  # RFC3339: the day as written
        ("2021-03-15 10:00:00", "2021-03-15", "2021-03-15"),
        ("", None, None),
        (None, None, None),
        ("2021-03", "ParseDateStringAsTime failed", "2021-03"),
        ("2021", "ParseDateStringAsTime failed", "2021"),
        ("2021-13", "ParseDateStringAsTime failed", "failed to parse date"),
        ("2021-02-30", "ParseDateStringAsTime failed", "failed to parse date"),
        ("2021-3-5", "ParseDateStringAsTime failed", "failed to parse date"),
        ("March 2021", "ParseDateStringAsTime failed", "failed to parse date"),
    ],
)
def test_stored_dates_follow_the_release(value, before_v030, from_v030):
    for version, expected in (((0, 29, 3), before_v030), ((0, 30, 0), from_v030)):
        if expected is None or re.fullmatch(r"[\d-]+", expected):
            assert stored_date(value, version) == expected
        else:
            with pytest.raises(ValueError, match=expected):
                stored_date(value, version)


@pytest.mark.parametrize("tag, partial", [("v0.29.3", False), ("v0.30.1", True)])
def test_the_emulator_stores_partial_dates_only_from_v0_30(tag, partial):
    with StashEmulator(release=tag) as emu:
        emu.auth_required = False
        sid = emu.add_scene(title="A", date="2020-01-02")
        mutation = "mutation U($input: SceneUpdateInput!) { sceneUpdate(input: $input) { date } }"
        body = {"query": mutation, "variables": {"input": {"id": str(sid), "date": "2021-03"}}}
        answer = requests.post(f"{emu.url}/graphql", json=body, timeout=5).json()
        if partial:
            assert answer == {"data": {"sceneUpdate": {"date": "2021-03"}}} and emu.scene(sid)["date"] == "2021-03"
        else:
            assert answer["data"] == {"sceneUpdate": None} and emu.scene(sid)["date"] == "2020-01-02"
            assert (
                answer["errors"][0]["message"] == "converting date: ParseDateStringAsTime failed: dateString <2021-03>"
            )
            with pytest.raises(ValueError, match="stores no partial dates"):
                emu.add_scene(title="B", date="2021")


# -- a server older than the minimum ---------------------------------------------------------
def test_an_older_stash_gets_one_clear_error_per_run_no_dead_letters_no_writes(plugin):
    sid, _ = plugin.add_scene(1)
    plugin.stash.version = "v0.24.3"
    plugin.plex.clear_requests()
    message = "Stash2Plex needs Stash 0.25.0 or later; this server is 0.24.3"
    run = plugin.hook(plugin.stash.update_scene(sid, title="Edited"))
    assert run.error is None and run.output == f"scene {sid} queued"
    deadline = time.monotonic() + 15
    while "drainer stopped" not in plugin.drainer_log() or plugin.drainer_busy():  # at once, saying why
        assert time.monotonic() < deadline, plugin.drainer_log()[-3000:]
        time.sleep(0.05)
    assert plugin.drainer_log().count(message) == 1
    task = plugin.task("all")
    assert task.error and task.error.count(message) == 1
    assert [m for m in task.messages() if message in m] == [task.error]  # one error line, the reply's
    status = plugin.status()
    assert (status["pending"], status["dlq"]) == (1, 0)  # the edit waits for a Stash that can answer
    assert not [r for r in plugin.stash.requests if "findScenes" in r["query"]]
    assert plugin.plex.edit_requests() == [] and plugin.plex.upload_requests() == []


@pytest.mark.parametrize("stash, version", [(MIN_RELEASE, "v0.24.3"), (MIN_RELEASE, MIN_RELEASE)], indirect=["stash"])
def test_health_check_names_a_stash_too_old_and_passes_the_oldest_supported(plugin, version):
    plugin.add_scene(1)
    plugin.stash.version = version
    run = plugin.task("health_check")
    problems = run.output["problems"]
    if version == MIN_RELEASE:
        assert problems == [] and run.output["stash"]["version"] == version
    else:
        assert problems == [
            "Stash2Plex needs Stash 0.25.0 or later; this server is 0.24.3. Update Stash to 0.25.0 or later "
            "(Settings → About shows its version); until then nothing is synced and queued jobs wait."
        ]

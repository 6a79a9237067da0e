"""Hostile input, table driven: stdin documents, hook contexts, settings, scene data, and
a Stash that answers garbage.

Every case must produce a clear message at the right level (asserted: level and a
substring), lose nothing that was queued, and leave the worker able to go on: a good
scene is queued next to every bad one and must reach Plex.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from core.platform import HeldLock
from tests.runner import PluginRun, create_context, run_plugin


@dataclass(frozen=True)
class Case:
    id: str
    kind: str  # stdin | hook | settings | scene | stash
    level: str  # the level the message is logged at
    text: str  # a substring of that message
    make: Callable[..., Any] | None = None  # builds the stdin/context/settings/scene for the case
    error: bool = False  # the reply carries an error
    outcome: str = "synced"  # scene cases: synced | dlq | gone | waiting
    extra: dict[str, Any] = field(default_factory=dict)


def _conn(p) -> dict:
    return p.connection


def _doc(p, **args) -> str:
    return json.dumps({"server_connection": _conn(p), "args": args})


STDIN_CASES = [
    Case("stdin-empty", "stdin", "error", "stdin is empty", lambda p: "", error=True),
    Case("stdin-not-json", "stdin", "error", "stdin is not JSON", lambda p: "{mode: all", error=True),
    Case("stdin-array", "stdin", "error", "must be a JSON object, got list", lambda p: "[1, 2]", error=True),
    Case(
        "stdin-number-too-long",  # Python reads at most 4,300 digits of an int (a ValueError, not a JSONDecodeError)
        "stdin",
        "error",
        "a number in it has more digits",
        lambda p: '{"server_connection": %s, "args": {"mode": %s}}' % (json.dumps(_conn(p)), "9" * 5000),
        error=True,
    ),
    Case(
        "stdin-no-connection",
        "stdin",
        "error",
        "server_connection is missing",
        lambda p: json.dumps({"args": {"mode": "all"}}),
        error=True,
    ),
    Case(
        "stdin-port-text",
        "stdin",
        "error",
        "server_connection.Port",
        lambda p: json.dumps({"server_connection": {**_conn(p), "Port": "nine"}, "args": {"mode": "queue_status"}}),
        error=True,
    ),
    Case(
        "stdin-unknown-mode",
        "stdin",
        "error",
        "'sync_everything' is not a Stash2Plex mode",
        lambda p: _doc(p, mode="sync_everything"),
        error=True,
    ),
    Case(
        "stdin-long-mode",  # named, cut to 60 characters: a reply never echoes a whole value back
        "stdin",
        "error",
        "args.mode '" + "x" * 58 + "… is not",
        lambda p: _doc(p, mode="x" * 10_000),
        error=True,
    ),
    Case("stdin-no-mode", "stdin", "error", "args.mode is missing", lambda p: _doc(p), error=True),
    # text int() cannot read although str.isdigit() says digits: a clear error, not a crash
    *(
        Case(f"stdin-scene-id-{name}", "stdin", "error", "args.scene_id must be a Stash scene id", make, error=True)
        for name, make in (
            ("superscript", lambda p: _doc(p, mode="ui_scene", scene_id="²")),
            ("5000-digits", lambda p: _doc(p, mode="ui_scene", scene_id="9" * 5000)),
        )
    ),
    Case(
        "stdin-not-utf8",
        "stdin",
        "error",
        "stdin is not JSON",
        lambda p: b'{"server_connection": \xff\xfe\x00 garbage',
        error=True,
    ),
]

HOOK_CASES = [
    Case(
        "hook-id-zero",
        "hook",
        "error",
        "hookContext.id",
        lambda p: {"id": 0, "type": "Scene.Update.Post", "input": None},
        error=True,
    ),
    Case(
        "hook-id-text",
        "hook",
        "error",
        "hookContext.id",
        lambda p: {"id": "forty-two", "type": "Scene.Update.Post", "input": None},
        error=True,
    ),
    Case(
        "hook-gallery",
        "hook",
        "error",
        "handles only Scene.Update.Post",
        lambda p: {"id": 3, "type": "Gallery.Update.Post", "input": {}},
        error=True,
    ),
    Case(
        "hook-only-play-count",
        "hook",
        "debug",
        "which Plex does not show",
        lambda p: {
            "id": 1,
            "type": "Scene.Update.Post",
            "input": {"id": "1", "play_count": 4},
            "inputFields": ["id", "play_count"],
        },
    ),
    Case(
        "hook-unknown-scene",
        "hook",
        "info",
        "no longer exists in Stash",
        lambda p: create_context(987654),
        outcome="gone",
    ),
]

SETTINGS_CASES = [
    Case(
        "settings-no-url", "settings", "error", "setting plex_url is not set", lambda p: {"plex_url": None}, error=True
    ),
    Case(
        "settings-url-no-scheme",
        "settings",
        "error",
        "must start with http:// or https://",
        lambda p: {"plex_url": p.plex.url.removeprefix("http://")},
        error=True,
    ),
    Case(
        "settings-token-spaces",
        "settings",
        "error",
        "plex_token: must be your Plex token without spaces",
        lambda p: {"plex_token": "abc def ghi"},
        error=True,
    ),
    Case(
        "settings-path-map-no-eq",
        "settings",
        "error",
        "path_map rule 1 'nonsense' has no '='",
        lambda p: {"path_map": "nonsense"},
        error=True,
    ),
    Case(
        "settings-path-map-repeat",
        "settings",
        "error",
        "repeats the Stash prefix",
        lambda p: {"path_map": "/stash/media=/plex/media;/stash/media=/elsewhere"},
        error=True,
    ),
    Case(
        "settings-tags-as-text",
        "settings",
        "error",
        "setting tags_as: must be one of genres, labels, both, got 'lots'",
        lambda p: {"tags_as": "lots"},
        error=True,
    ),
    Case(
        "settings-loose-maybe",
        "settings",
        "error",
        "loose_matching: must be true or false, got 'maybe'",
        lambda p: {"loose_matching": "maybe"},
        error=True,
    ),
    Case(
        "settings-old-strict-maybe",
        "settings",
        "error",
        "setting strict_matching: must be true or false, got 'maybe'",
        lambda p: {"strict_matching": "maybe"},
        error=True,
    ),
    Case(
        "settings-unknown-library",
        "settings",
        "error",
        "plex_libraries names 'Nope'",
        lambda p: {"plex_libraries": "Nope"},
        error=True,
    ),
]


def _scene(**kw):
    """A bad scene (with its Plex item) built by ``add_scene`` with these overrides."""
    return lambda p: p.add_scene(900, **kw)


SCENE_CASES = [
    Case(
        "scene-100kb-details",
        "scene",
        "warning",
        "details are 100000 characters; cut to 20000",
        _scene(details="x" * 100_000),
    ),
    Case("scene-control-title", "scene", "info", "'Bad Title [31m'", _scene(title="Bad\x00\x07Title\x1b[31m")),
    Case("scene-10k-title", "scene", "info", "'" + "T" * 255 + "'", _scene(title="T" * 10_000)),
    Case("scene-bad-date", "scene", "warning", "date '2024-13-45' is not YYYY-MM-DD", _scene(date="2024-13-45")),
    Case(
        "scene-3000-tags",
        "scene",
        "warning",
        "3000 tags; only the first 500 are written",
        _scene(tags=[f"tag {i}" for i in range(3000)]),
    ),
    Case("scene-odd-path", "scene", "info", "→ Plex item", _scene(name="odd \ufffd n\u00e4me #1 %20 & ? [x].mp4")),
    Case(
        "scene-no-files",
        "scene",
        "error",
        "has no files",
        lambda p: (p.stash.add_scene(title="Fileless", files=[]), None),
        outcome="dlq",
    ),
    Case(
        "scene-deleted-after-hook",
        "scene",
        "info",
        "no longer exists in Stash",
        _scene(),
        outcome="gone",
        extra={"delete": True},
    ),
    Case(
        "scene-not-in-plex",
        "scene",
        "warning",
        "retry 1 in",
        lambda p: (
            p.stash.add_scene(
                title="Nowhere", files=[{"path": "/stash/media/missing.mp4", "size": 5, "duration": 1.0}]
            ),
            None,
        ),
        outcome="waiting",
    ),
]

STASH_CASES = [
    Case(
        "stash-graphql-errors",
        "stash",
        "error",
        "Stash answered with GraphQL errors: database is locked",
        None,
        error=True,
        extra={"switch": "fail_graphql_errors"},
    ),
    Case(
        "stash-html",
        "stash",
        "error",
        "Stash answered 200 with text/html instead of GraphQL",
        None,
        error=True,
        extra={"switch": "fail_html"},
    ),
    Case(
        "stash-401",
        "stash",
        "error",
        "Stash refused the plugin's session (401)",
        None,
        error=True,
        extra={"switch": "fail_401"},
    ),
]

CASES = STDIN_CASES + HOOK_CASES + SETTINGS_CASES + SCENE_CASES + STASH_CASES


def test_the_table_is_broad_enough():
    assert len(CASES) >= 25
    assert len({c.id for c in CASES}) == len(CASES)


# -- helpers ----------------------------------------------------------------------------
def logged(run: PluginRun, level: str, text: str) -> bool:
    return any(text in message for message in run.messages(level))


def queue_while_held(plugin, contexts: list[dict]) -> None:
    """Queue through real hooks while the test holds the drainer lock (no drainer starts)."""
    lock = HeldLock(plugin.data_dir / "drainer.lock")
    assert lock.acquire()
    try:
        for context in contexts:
            run = plugin.hook(context)
            assert run.error is None, run.stderr
    finally:
        lock.release()


def pending(plugin) -> int:
    return plugin.status()["pending"]


def synced(plugin, sid: int, rk: int) -> bool:
    return plugin.plex.item(rk)["fields"]["title"] == plugin.stash.scene(sid)["title"]


def assert_message(run: PluginRun, case: Case) -> None:
    assert logged(run, case.level, case.text), f"{case.id}: no {case.level} message with {case.text!r}:\n{run.logs}"
    if case.error:
        assert run.error and case.text in run.error, f"{case.id}: reply error {run.error!r}"
        assert run.returncode == 1
    else:
        assert run.error is None, f"{case.id}: {run.error}"


def drain_and_check_good(plugin, good: tuple[int, int]) -> PluginRun:
    run = plugin.task("process_queue")
    assert run.error is None, run.stderr[-3000:]
    assert synced(plugin, *good), f"the good scene did not sync:\n{run.stderr[-3000:]}"
    return run


# -- the tests ------------------------------------------------------------------------------
# Cases that cannot touch the queue (bad stdin, bad settings) share one good scene and one
# final drain: each case is still checked on its own, with its id in the message.
ONE_BY_ONE = [c for c in CASES if c.kind not in ("stdin", "settings")]


@pytest.mark.parametrize("case", ONE_BY_ONE, ids=[c.id for c in ONE_BY_ONE])
def test_hostile_input(plugin, case: Case):
    good = plugin.add_scene(1, title="Good scene")
    good_context = plugin.stash.update_scene(good[0], title="Good scene, edited")
    RUNS[case.kind](plugin, case, good, good_context)


def test_hostile_stdin_documents(plugin):
    good = plugin.add_scene(1, title="Good scene")
    queue_while_held(plugin, [plugin.stash.update_scene(good[0], title="Good scene, edited")])
    for case in STDIN_CASES:
        raw = case.make(plugin)
        run = run_plugin(raw.encode() if isinstance(raw, str) else raw, env=plugin.env)
        assert_message(run, case)
        assert json.loads(run.stdout) == {"output": None, "error": run.error}, f"{case.id}: not one JSON object"
        assert pending(plugin) == 1, case.id
    drain_and_check_good(plugin, good)


def test_hostile_settings(plugin):
    good = plugin.add_scene(1, title="Good scene")
    queue_while_held(plugin, [plugin.stash.update_scene(good[0], title="Good scene, edited")])
    for i, case in enumerate(SETTINGS_CASES):
        plugin.configure(**case.make(plugin))
        # both tasks read the settings first (app.settings()); the cases take turns between them
        assert_message(plugin.task(("process_queue", "all")[i % 2]), case)
        # the queued job waits for the settings to be fixed (``all`` may have queued the scene once more)
        assert pending(plugin) >= 1, case.id
    plugin.configure()
    drain_and_check_good(plugin, good)
    assert pending(plugin) == 0


def _hook(plugin, case, good, good_context):
    lock = HeldLock(plugin.data_dir / "drainer.lock")
    assert lock.acquire()
    try:
        run = plugin.hook(case.make(plugin))
        assert plugin.hook(good_context).error is None
    finally:
        lock.release()
    if case.outcome == "gone":  # the hook queues; the worker finds nothing in Stash
        assert run.error is None
        run = drain_and_check_good(plugin, good)
    else:
        drain_and_check_good(plugin, good)
    assert_message(run, case)
    assert pending(plugin) == 0


def _scene_case(plugin, case, good, good_context):
    bad_sid, bad_rk = case.make(plugin)
    queue_while_held(
        plugin, [plugin.stash.update_scene(bad_sid, title=plugin.stash.scene(bad_sid)["title"]), good_context]
    )
    if case.extra.get("delete"):
        plugin.stash.delete_scene(bad_sid)
    run = drain_and_check_good(plugin, good)
    assert_message(run, case)
    report = plugin.status()
    if case.outcome == "synced":
        assert bad_rk is not None and synced_clean(plugin, bad_sid, bad_rk)
        assert report["pending"] == 0 and report["dlq"] == 0
    elif case.outcome == "dlq":
        assert report["dlq"] == 1 and report["dlq_newest"][0]["scene_id"] == bad_sid
        assert report["pending"] == 0
    elif case.outcome == "gone":
        assert report["pending"] == 0 and report["dlq"] == 0
    else:  # waiting for a retry: still queued, with its error on the job
        assert report["pending"] == 1 and report["retrying"] == 1 and report["dlq"] == 0
        assert run.output["waiting"] == 1


def synced_clean(plugin, sid: int, rk: int) -> bool:
    """The item shows the scene's title as Stash2Plex cleans it (control characters out, capped)."""
    from validation.metadata import MAX_TITLE, clean_line

    return plugin.plex.item(rk)["fields"]["title"] == clean_line(plugin.stash.scene(sid)["title"], MAX_TITLE)


def _stash(plugin, case, good, good_context):
    queue_while_held(plugin, [good_context])
    setattr(plugin.stash, case.extra["switch"], True)
    for mode in ("process_queue", "all"):
        run = plugin.task(mode)
        assert_message(run, case)
        assert "Traceback" not in run.stderr
    health = plugin.task("health_check")
    assert any(case.text in problem for problem in health.output["problems"]), health.output
    # the hook never talks to Stash: it still queues
    queue_while_held(plugin, [plugin.stash.update_scene(good[0], title="Edited while Stash is broken")])
    assert pending(plugin) == 1
    setattr(plugin.stash, case.extra["switch"], False)
    drain_and_check_good(plugin, good)


RUNS = {"hook": _hook, "scene": _scene_case, "stash": _stash}

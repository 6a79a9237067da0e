"""Stash2Plex.yml loads in Stash and agrees with the code.

Stash decodes the file with yaml.v2 ``SetStrict(true)`` into the Go struct ``Config``
of pkg/plugin/config.go (``loadPluginFromYAML``): an unknown key at any depth, or a duplicate
key, makes the whole plugin fail to load. The validator below mirrors that struct.
It is stricter than Go on one point: yaml.v2 would turn ``mode: 5`` into the string
"5", but we want every string field to be a string in the file, so what Stash passes
is exactly what the YAML shows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from tests.runner import REPO
from validation.config import DEFAULTS, Settings
from validation.document import HOOK_TRIGGERS, SCENE_HOOKS
from validation.modes import COMMAND, MODES, OPERATION, TASK, TASK_MODES, function

YML = REPO / "Stash2Plex.yml"


@dataclass(frozen=True)
class Str:
    pass


@dataclass(frozen=True)
class Enum:
    values: tuple[str, ...]


@dataclass(frozen=True)
class ListOf:
    item: Any


@dataclass(frozen=True)
class MapOf:
    value: Any


@dataclass(frozen=True)
class Struct:
    fields: dict


STR, STRS = Str(), ListOf(Str())
_OPERATION = {"name": STR, "description": STR, "execArgs": STRS, "defaultArgs": MapOf(STR)}
CONFIG = Struct(
    {
        "name": STR,
        "description": STR,
        "url": STR,
        "version": STR,
        "exec": STRS,
        "interface": Enum(("raw", "rpc", "js")),
        "errLog": Enum(("trace", "debug", "info", "warning", "error", "progress", "none")),
        "tasks": ListOf(Struct(_OPERATION)),
        "hooks": ListOf(Struct({**_OPERATION, "triggeredBy": STRS})),
        "settings": MapOf(
            Struct({"displayName": STR, "description": STR, "type": Enum(("STRING", "NUMBER", "BOOLEAN"))})
        ),
        "ui": Struct(
            {
                "requires": STRS,
                "javascript": STRS,
                "css": STRS,
                "assets": MapOf(STR),
                "csp": Struct({"script-src": STRS, "style-src": STRS, "connect-src": STRS}),
            }
        ),
    }
)


class _StrictLoader(yaml.SafeLoader):
    """Safe loading plus yaml.v2's strict-mode check for duplicate mapping keys."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} already set in map", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def check(value: Any, spec: Any, where: str = "") -> None:
    """Raise ValueError naming the path of the first value ``spec`` rejects.

    ``null`` is accepted anywhere: yaml.v2 leaves the Go zero value.
    """
    if value is None:
        return
    if isinstance(spec, Str):
        if not isinstance(value, str):
            raise ValueError(f"{where}: expected a string, got {type(value).__name__} {value!r}")
    elif isinstance(spec, Enum):
        if value not in spec.values:
            raise ValueError(f"{where}: {value!r} is not one of {', '.join(spec.values)}")
    elif isinstance(spec, ListOf):
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected a list, got {type(value).__name__}")
        for i, item in enumerate(value):
            check(item, spec.item, f"{where}[{i}]")
    elif isinstance(spec, MapOf):
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected a mapping, got {type(value).__name__}")
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where}: key {key!r} is not a string")
            check(item, spec.value, f"{where}.{key}")
    elif isinstance(spec, Struct):
        if not isinstance(value, dict):
            raise ValueError(f"{where or 'document'}: expected a mapping, got {type(value).__name__}")
        for key, item in value.items():
            if key not in spec.fields:
                raise ValueError(f"{where or 'document'}: field {key!r} not found in type")
            check(item, spec.fields[key], f"{where}.{key}" if where else str(key))
    else:  # pragma: no cover - a mistake in CONFIG itself
        raise TypeError(spec)


def load_strict(text: str) -> dict:
    """Load plugin YAML as Stash does; raise ValueError or a YAML error when Stash would refuse it."""
    document = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    if document is None:
        document = {}
    check(document, CONFIG)
    return document


@pytest.fixture(scope="module")
def text() -> str:
    return YML.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def config(text) -> dict:
    return load_strict(text)


# -- the validator can fail ------------------------------------------------------------


def _insert_after(text: str, anchor: str, addition: str) -> str:
    assert anchor in text, anchor
    return text.replace(anchor, anchor + addition, 1)


BROKEN = {
    "a default under a setting": (
        lambda t: _insert_after(t, "  loose_matching:\n", "    default: true\n"),
        "settings.loose_matching",
        "default",
    ),
    "a top-level requires": (lambda t: t + "requires: OtherPlugin\n", "document", "requires"),
    "an int defaultArg": (
        lambda t: _insert_after(t, "      mode: all\n", "      limit: 5\n"),
        "tasks[1].defaultArgs.limit",
        "int",
    ),
    "a bool defaultArg": (
        lambda t: _insert_after(t, "      mode: all\n", "      dry_run: true\n"),
        "tasks[1].defaultArgs.dry_run",
        "bool",
    ),
    "an unknown key in a task": (
        lambda t: _insert_after(t, "      mode: all\n", "    timeout: 30\n"),
        "tasks[1]",
        "timeout",
    ),
    "an unknown key in a hook": (
        lambda t: _insert_after(t, "      - Scene.Create.Post\n", "    priority: high\n"),
        "hooks[0]",
        "priority",
    ),
    "an unknown setting type": (
        lambda t: t.replace("    type: NUMBER\n", "    type: INTEGER\n", 1),
        "settings.plex_concurrency.type",
        "INTEGER",
    ),
    "exec as one string": (
        lambda t: re.sub(r"exec:\n(  - .*\n)+", 'exec: "python {pluginDir}/Stash2Plex.py"\n', t),
        "exec",
        "list",
    ),
    "an unknown interface": (lambda t: t.replace("interface: raw", "interface: python"), "interface", "python"),
    "an unknown key under ui": (lambda t: t.replace("\n  css:\n", "\n  scripts:\n", 1), "ui", "scripts"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_validator_rejects(text, case):
    mutate, where, detail = BROKEN[case]
    broken = mutate(text)
    assert broken != text
    with pytest.raises(ValueError, match=re.escape(where)) as caught:
        load_strict(broken)
    assert detail in str(caught.value)


def test_validator_rejects_a_duplicate_key(text):
    broken = _insert_after(text, "  plex_url:\n", "    type: STRING\n")
    with pytest.raises(yaml.YAMLError, match="already set"):
        load_strict(broken)


def test_validator_accepts_a_full_ui_block(text):
    ui = (
        "ui:\n  requires: [CommunityScriptsUILibrary]\n  javascript: [a.js]\n  css: [a.css]\n"
        "  assets:\n    /img: img\n  csp:\n    script-src: [https://x]\n    connect-src: []\n"
    )
    without_ui = re.sub(r"^ui:\n(  .*\n)+", "", text, flags=re.M)
    assert load_strict(without_ui + ui)["ui"]["assets"] == {"/img": "img"}


# -- the shipped file ------------------------------------------------------------------


def test_plugin_yml_loads_strictly(config):
    assert config["name"] == "Stash2Plex"
    assert config.get("interface", "raw") == "raw"


def test_exec_runs_the_entry_script_through_a_resolved_python(config, text):
    assert config["exec"][0] in ("python", "python3")  # only these get Stash's interpreter resolution
    # -S: a hook starts without site-packages' .pth files (it imports no package)
    # (app/bootstrap.py); everything else turns site on first.
    assert config["exec"][1:] == ["-S", "{pluginDir}/Stash2Plex.py"]
    # Unquoted, a scalar starting with "{" is a flow mapping.
    assert re.search(r"""^\s*-\s*(["'])\{pluginDir\}/Stash2Plex\.py\1\s*$""", text, re.MULTILINE)


def test_hooks_trigger_on_scene_and_entity_changes_only(config):
    triggers = [t for hook in config["hooks"] for t in hook["triggeredBy"]]
    assert set(SCENE_HOOKS) <= set(triggers)
    assert sorted(triggers) == sorted(HOOK_TRIGGERS)  # any other trigger would be refused by the plugin
    # Movie.* is how Stash before v0.27 announces a group's change (tests/test_stash_releases.py)
    # Each trigger is one Stash really fires (pkg/plugin/hook/hooks.go); there is no Scene/Performer merge hook.
    assert "Performer.Merge.Post" not in triggers and "Scene.Merge.Post" not in triggers
    for hook in config["hooks"]:
        assert hook.get("name") and hook.get("description")
        assert "mode" not in (hook.get("defaultArgs") or {})  # hookContext decides


def test_one_task_per_mode_with_unique_names(config):
    tasks = config["tasks"]
    runs = [
        ((task.get("defaultArgs") or {}).get("mode"), (task.get("defaultArgs") or {}).get("dry_run")) for task in tasks
    ]
    assert sorted({mode for mode, _ in runs}) == sorted(TASK_MODES)  # the menu has every task of the registry
    assert len(runs) == len(set(runs))
    for mode, dry_run in runs:
        assert dry_run in (None, "true") and (dry_run is None or MODES[mode].dry_run), (mode, dry_run)
    assert ("all", "true") in runs  # "Preview sync (no writes)"
    names = [task.get("name") for task in tasks]
    assert all(names) and len(set(names)) == len(names)
    assert tasks[0]["defaultArgs"] == {"mode": "health_check"}  # first in Stash's list: what a new user runs
    for task in tasks:
        assert (task.get("description") or "").strip(), task["name"]
        assert not task.get("execArgs"), "drain/demo are not tasks"


def test_every_mode_runs_a_function():
    for mode in MODES.values():
        for run in filter(None, (mode.run, mode.plan, mode.lines)):
            assert callable(function(run)), (mode.id, run)
        assert mode.kind in (TASK, OPERATION, COMMAND), mode.id


def _yaml_type(annotation: Any) -> str:
    if annotation is bool:
        return "BOOLEAN"
    if annotation in (int, float, float | None):  # Stash keeps a NUMBER as a JSON number (None: a bad value's fallback)
        return "NUMBER"
    return "STRING"


def _default_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value == "" or value is None:
        return "empty"
    return str(value)


def test_every_setting_is_declared_with_its_type(config):
    declared = config["settings"]
    assert set(declared) == set(Settings.model_fields)
    for name, field in Settings.model_fields.items():
        assert declared[name].get("type", "STRING") == _yaml_type(field.annotation), name
        assert (declared[name].get("displayName") or "").strip(), name


def test_setting_descriptions_state_the_defaults_of_the_code(config):
    declared = config["settings"]
    for name, field in Settings.model_fields.items():
        description = declared[name].get("description") or ""
        if field.is_required():
            assert name not in DEFAULTS
            assert "Required" in description, name
            assert "Default:" not in description, name
        else:
            assert name in DEFAULTS, f"{name} has a default in Settings but none in DEFAULTS"
            expected = f"Default: {_default_text(DEFAULTS[name])}"
            assert re.search(re.escape(expected) + r"(?!\w)", description), (
                f"{name}: {description!r} lacks {expected!r}"
            )
    assert set(DEFAULTS) <= set(Settings.model_fields)


def test_required_settings_are_the_plex_connection():
    required = {name for name, field in Settings.model_fields.items() if field.is_required()}
    assert required == {"plex_url", "plex_token"}

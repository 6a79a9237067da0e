"""Settings as Stash's UI shows them, old names, and 0/empty meaning the default.

Stash's settings page draws a setting that was never saved from nothing but its type
(ui/v2.5/src/components/Settings/SettingsPluginsPanel.tsx ``PluginSetting``):
``value ?? false`` for BOOLEAN, ``value ?? 0`` for NUMBER, an empty box for STRING; the
first click (or confirming the editor) saves exactly what was shown. So what the page
shows for an unsaved setting must BE its effective default.
"""

from __future__ import annotations

import pytest
import yaml

from tests.runner import REPO
from validation.config import DEFAULTS, load_settings
from validation.pathmap import PathMap

REQUIRED = {"plex_url": "http://plex:32400", "plex_token": "tok"}
SHOWN_WHEN_UNSAVED = {"BOOLEAN": False, "NUMBER": 0, "STRING": ""}


def declared() -> dict[str, dict]:
    return yaml.safe_load((REPO / "Stash2Plex.yml").read_text(encoding="utf-8"))["settings"]


def test_every_unsaved_setting_is_shown_as_what_it_does():
    """Saving each setting exactly as the page draws it unsaved changes nothing."""
    defaults = load_settings(REQUIRED)
    for name, setting in declared().items():
        if name in REQUIRED:
            continue
        shown = SHOWN_WHEN_UNSAVED[setting.get("type", "STRING")]
        saved = load_settings({**REQUIRED, name: shown})
        assert getattr(saved, name) == getattr(defaults, name), f"{name}: shown as {shown!r}"
        assert saved == defaults, name


def test_all_unsaved_settings_saved_at_once_are_the_defaults():
    shown = {n: SHOWN_WHEN_UNSAVED[s.get("type", "STRING")] for n, s in declared().items() if n not in REQUIRED}
    assert load_settings({**REQUIRED, **shown}) == load_settings(REQUIRED)


def test_every_switch_defaults_to_false():
    switches = [n for n, s in declared().items() if s.get("type") == "BOOLEAN"]
    assert switches and all(DEFAULTS[n] is False for n in switches)


def test_a_number_saved_as_zero_means_its_default():
    assert load_settings({**REQUIRED, "plex_concurrency": 0}).plex_concurrency == DEFAULTS["plex_concurrency"]
    assert load_settings({**REQUIRED, "plex_concurrency": "0"}).plex_concurrency == DEFAULTS["plex_concurrency"]
    assert load_settings({**REQUIRED, "plex_concurrency": 3}).plex_concurrency == 3
    assert load_settings({**REQUIRED, "plex_concurrency": -2}).problem("plex_concurrency") == (
        "setting plex_concurrency: must be a whole number from 1 to 16, got '-2'; the default, 6, is used"
    )


@pytest.mark.parametrize(
    ("saved", "expected"),
    [
        ({}, PathMap()),
        ({"case_insensitive_paths": True}, PathMap(case_insensitive=True)),  # the case rule without rules
        ({"path_map": "/A=/b", "case_insensitive_paths": "true"}, PathMap.parse("/A=/b", case_insensitive=True)),
        ({"path_map": "/A=/b"}, PathMap.parse("/A=/b")),
    ],
)
def test_the_path_map_carries_its_case_rule(saved, expected):
    path_map = load_settings({**REQUIRED, **saved}).path_map
    assert path_map == expected
    assert path_map.map("/a/x.mp4") == ("/b/x.mp4" if expected.rules and expected.case_insensitive else "/a/x.mp4")


@pytest.mark.parametrize(("saved", "loose"), [(True, False), (False, True), ("false", True), ("0", True)])
def test_the_old_strict_matching_is_read_inverted_with_a_warning(saved, loose):
    settings = load_settings({**REQUIRED, "strict_matching": saved})
    assert settings.loose_matching is loose
    (warning,) = settings.adopted.warnings
    assert warning.startswith("setting strict_matching (renamed in 0.3") and "save loose_matching instead" in warning
    assert settings.adopted.taken_over == (f"strict_matching → loose_matching = {'true' if loose else 'false'}",)


def test_the_new_name_wins_over_the_old_one():
    settings = load_settings({**REQUIRED, "strict_matching": False, "loose_matching": False})
    assert settings.loose_matching is False
    assert settings.adopted.taken_over == () and settings.adopted.warnings == ()
    assert settings.adopted.ignored == ("strict_matching (ignored: loose_matching is set)",)


def test_the_public_plugins_settings_are_taken_over_or_listed_as_ignored():
    saved = {**REQUIRED, "plex_library": "Adult, Movies", "max_retries": 5, "debug_logging": True, "enabled": True}
    settings = load_settings(saved)
    assert settings.plex_libraries == ("Adult", "Movies")
    assert settings.adopted.taken_over == ("plex_library → plex_libraries = 'Adult, Movies'",)
    assert settings.adopted.ignored == ("max_retries", "debug_logging", "enabled")


def test_plex_libraries_wins_over_the_public_plugins_plex_library():
    settings = load_settings({**REQUIRED, "plex_library": "Adult", "plex_libraries": "Stash"})
    assert settings.plex_libraries == ("Stash",)
    assert settings.adopted.ignored == ("plex_library (ignored: plex_libraries is set)",)


def test_health_check_shows_the_effective_settings_and_the_old_names(plugin):
    """Through the real plugin: a switch from the public plugin (same id, its saved settings)."""
    plugin.configure(plex_library="Stash", strict_matching=False, poll_interval=30, plex_concurrency=0)
    run = plugin.task("health_check")
    out = run.output
    assert out["ok"], out
    assert out["settings"]["plex_libraries"] == "Stash" and out["settings"]["loose_matching"] is True
    assert out["settings"]["plex_concurrency"] == DEFAULTS["plex_concurrency"]
    assert out["settings"]["plex_token"] == "(set, hidden)"
    assert out["old_settings"] == {
        "taken_over": ["strict_matching → loose_matching = true", "plex_library → plex_libraries = 'Stash'"],
        "ignored": ["poll_interval"],
    }
    warnings = run.messages("warning")
    assert any("setting strict_matching" in w and "save loose_matching instead" in w for w in warnings), warnings
    assert any("setting plex_library" in w and "save plex_libraries instead" in w for w in warnings), warnings


def test_an_old_name_on_the_command_line_beats_the_new_one_saved():
    from validation.legacy import merge

    assert merge({"loose_matching": False, "tags_as": "labels"}, {"strict_matching": "false"}) == {
        "tags_as": "labels",
        "strict_matching": "false",
    }
    assert merge({"loose_matching": False}, {"strict_matching": "false", "loose_matching": "false"}) == {
        "loose_matching": "false",
        "strict_matching": "false",
    }


def test_new_settings_and_old_names_on_the_command_line(plugin):
    from tests.test_cli import cli

    plugin.configure(loose_matching=False)
    done = cli(plugin, "health_check", "--json", "--strict-matching", "false", STASH2PLEX_TAGS_AS="labels")
    settings = done.json()["settings"]
    assert settings["loose_matching"] is True and settings["tags_as"] == "labels", done.stdout
    assert "setting strict_matching (renamed in 0.3" in done.stderr


def test_health_check_names_a_tag_filter_stash_does_not_have(plugin):
    plugin.stash.add_scene(title="x", tags=["Private"], files=[])
    plugin.configure(skip_tags="private", hide_tags="Intrenal")
    out = plugin.task("health_check").output
    assert out["ok"] is False and out["settings"]["hide_tags"] == "Intrenal"
    assert out["problems"] == ["setting hide_tags names 'Intrenal', which Stash does not have"], out


def test_the_performer_photo_address_carries_no_credential():
    """Plex stores and shows every photo URL made from it: a login or key in it is refused (photos
    off, the rest syncs: validation/config.py OPTIONAL), and the reason does not repeat them."""
    given = {**REQUIRED, "performer_photos": True, "performer_photo_base_url": " http://stash.lan:9999/ "}
    assert load_settings(given).performer_photo_base_url == "http://stash.lan:9999"
    assert load_settings({**given, "performer_photo_base_url": "https://h/stash/"}).performer_photo_base_url == (
        "https://h/stash"
    )
    refused = {
        "http://admin:hunter2@stash.lan:9999": "must not carry a user name or password",
        "http://stash.lan:9999/?apikey=k3y": "must be an address without ?… or #…",
        "stash.lan:9999": "must start with http:// or https:// (e.g. http://192.168.1.20:9999)",
        "http://stash.lan:99999": "has a port that is not a number from 1 to 65535 (Stash listens on 9999)",
        # each refused for another reason first: the message still repeats no login and no query
        "admin:hunter2@stash.lan:9999": "must start with http:// or https://",
        "stash.lan:9999/performer?apikey=k3y": "must start with http:// or https://",
        "http://admin:hunter2@stash.lan:99999/?apikey=k3y": "has a port that is not a number",
        "http://:9/?apikey=k3y#k3y": "has no host name",
    }
    for value, reason in refused.items():
        settings = load_settings({**given, "performer_photo_base_url": value})
        problem = settings.problem("performer_photo_base_url") or ""
        assert problem.startswith(f"setting performer_photo_base_url: {reason}"), problem
        assert problem.endswith("performer photos are not written until it is fixed")
        assert "hunter2" not in problem and "k3y" not in problem, problem
        assert (settings.performer_photos, settings.performer_photo_base_url) == (False, "")


def test_resume_points_on_with_the_owner_left_out_of_plays_accounts_is_named():
    """Plex shows the token the owner's resume points only: ``import_resume`` with accounts that
    leave the owner out brings nothing, and the user is told (Health check, the page, the log)."""
    left_out = load_settings({**REQUIRED, "import_resume": True, "plays_accounts": "7"})
    assert not left_out.resume_on and left_out.import_resume  # the value itself is good
    assert left_out.problems == (
        "setting import_resume: on, but plays_accounts (7) leaves out the server owner (1), the only "
        "account whose resume points Plex shows the plugin; add 1 to plays_accounts or turn import_resume "
        "off; resume points are not brought to Stash until it is fixed",
    )
    assert left_out.summary()["import_resume"] is True
    for fine in ({"plays_accounts": "7,1"}, {"plays_accounts": ""}, {"import_resume": False}):
        assert load_settings({**REQUIRED, "import_resume": True, "plays_accounts": "7", **fine}).problems == ()

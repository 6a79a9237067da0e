"""Background failures surface where the user looks, in the words of that place.

* A hook reads the drainer's last outcome (sync_health.json, no network) and, while
  background sync fails, logs one warning in Stash's log with the reason and the fix,
  at most once a minute.
* A Stash-side failure logs one line of ours; stashapi's own lines go to debug.
* A missing setting is explained as Stash's settings page in Stash and as a flag or
  variable on the command line.
"""

from __future__ import annotations

import os
import time

from tests.runner import create_context
from tests.test_cli import cli

STASHAPI_NOISE = ("GRAPHQL_ERROR", "GQL data response is null", "query failed", "database is locked")


def wait_idle(plugin, before: int | None = None, timeout: float = 60.0) -> None:
    """Until a drainer has ended since ``before`` drainers had (it logs one final line)."""
    deadline = time.monotonic() + timeout
    before = getattr(plugin, "ends_before", None) if before is None else before
    want = (_ends(plugin) if before is None else before) + 1
    while plugin.drainer_busy() or _ends(plugin) < want:
        assert time.monotonic() < deadline, plugin.drainer_log()[-3000:]
        time.sleep(0.05)


def _ends(plugin) -> int:
    return sum(
        1 for line in plugin.drainer_log().splitlines() if "drainer stopped" in line or "drainer finished" in line
    )


def hook_warnings(plugin, context) -> list[str]:
    plugin.ends_before = _ends(plugin)  # the drainer this hook starts may end before we look
    run = plugin.hook(context)
    assert run.error is None and run.returncode == 0
    return [m for m in run.messages("warning") if "background sync" in m]


def rewind_warned(plugin, seconds: float = 61.0) -> None:
    marker = plugin.data_dir / "warned.at"
    past = time.time() - seconds
    os.utime(marker, (past, past))


def test_a_failing_background_sync_is_warned_in_the_next_hook_once_a_minute(plugin):
    plugin.configure(plex_url=None)
    sid, rk = plugin.add_scene(1)
    assert hook_warnings(plugin, plugin.stash.update_scene(sid, title="First")) == []  # nothing known yet
    wait_idle(plugin)
    assert "setting plex_url is not set" in plugin.drainer_log()

    warned = hook_warnings(plugin, plugin.stash.update_scene(sid, title="Second"))
    assert len(warned) == 1, warned
    assert warned[0].startswith("background sync is failing (last try ")
    assert "setting plex_url is not set: open Settings → Plugins → Stash2Plex and fill it in" in warned[0]
    wait_idle(plugin)
    assert hook_warnings(plugin, plugin.stash.update_scene(sid, title="Third")) == []  # within the minute
    wait_idle(plugin)

    rewind_warned(plugin)
    plugin.configure(plex_token="wrong-token-123")
    assert len(hook_warnings(plugin, plugin.stash.update_scene(sid, title="Fourth"))) == 1  # a minute later
    wait_idle(plugin)
    rewind_warned(plugin)
    warned = hook_warnings(plugin, plugin.stash.update_scene(sid, title="Fifth"))
    assert len(warned) == 1 and "Plex rejected the token" in warned[0], warned
    assert warned[0].endswith("— check plex_token: Settings → Plugins → Stash2Plex"), warned[0]
    wait_idle(plugin)

    plugin.configure()  # fixed: the next drainer succeeds and the warnings stop
    before = _ends(plugin)
    plugin.task("retry_dlq")
    wait_idle(plugin, before)
    rewind_warned(plugin)
    before = _ends(plugin)
    assert hook_warnings(plugin, plugin.stash.update_scene(sid, title="Sixth")) == []
    wait_idle(plugin, before)
    assert plugin.plex.item(rk)["fields"]["title"] == "Sixth"


def test_a_stash_failure_logs_one_line_of_ours_and_none_of_stashapis(plugin):
    plugin.add_scene(1)
    plugin.stash.fail_graphql_errors = True
    run = plugin.task("all")
    loud = [m for level, m in run.logs if level in ("warning", "error")]
    assert loud == ["Stash answered with GraphQL errors: database is locked (while connecting)"], run.logs
    assert run.error == loud[0]
    quiet = " ".join(run.messages("debug"))
    assert "[stashapi]" in quiet and "query failed" in quiet  # still there for --verbose / debug logs

    plugin.stash.fail_graphql_errors = False
    sid = plugin.add_scene(2)[0]
    plugin.stash.fail_graphql_errors = True
    before = _ends(plugin)
    plugin.hook(create_context(sid))
    wait_idle(plugin, before)
    loud = [line for line in plugin.drainer_log().splitlines() if " ERROR " in line or " WARNING " in line]
    assert len(loud) == 1 and "Stash answered with GraphQL errors" in loud[0], loud
    assert not any(noise in line for line in loud for noise in STASHAPI_NOISE[:3]), loud


def test_a_missing_setting_is_explained_for_where_the_user_is(plugin):
    plugin.configure(plex_url=None)
    in_stash = plugin.task("all")
    assert in_stash.error == "setting plex_url is not set: open Settings → Plugins → Stash2Plex and fill it in"
    shell = cli(plugin, "all")
    assert shell.returncode == 1
    assert "setting plex_url is not set: give it with --plex-url or STASH2PLEX_PLEX_URL" in shell.stderr
    assert "Settings → Plugins" not in shell.stderr


def test_every_piece_of_page_advice_names_settings_that_exist_as_the_settings_page_shows_them():
    """The page's advice (tasks/ui.py DEAD_LETTERS) names each setting by Stash's label and its key:
    a renamed setting (``strict_matching`` became ``loose_matching``) must not linger."""
    import re

    import yaml

    from tasks.ui import DEAD_LETTERS, UNKNOWN
    from tests.runner import REPO
    from validation.config import Settings

    labels = {k: v["displayName"] for k, v in yaml.safe_load((REPO / "Stash2Plex.yml").read_text())["settings"].items()}
    named = set()
    for text in [advice for _, advice in (*DEAD_LETTERS.values(), UNKNOWN)]:
        for key in re.findall(r"\b[a-z]+(?:_[a-z]+)+\b", text):
            assert key in Settings.model_fields, f"{key!r} is not a setting: {text}"
            assert f"{labels[key]} ({key})" in text, f"{key} without its label {labels[key]!r}: {text}"
            named.add(key)
        assert "Strict matching" not in text
    assert {"path_map", "loose_matching", "plex_token"} <= named


def test_no_message_names_a_setting_that_is_gone():
    """Old setting names (validation/legacy.py) appear only where they are read and in the
    settings page's note on what a setting replaces; every other text names today's."""
    import re

    from tests.runner import REPO
    from validation.legacy import FIELD_SWITCHES, RENAMED, RENAMED_INVERTED

    old = re.compile(
        r"\b(" + "|".join(sorted({*RENAMED, *RENAMED_INVERTED, *FIELD_SWITCHES})) + r")\b|strict matching", re.I
    )
    files = [p for p in REPO.glob("*/*.py") if p.parts[-2] not in ("tests", "validation")]
    files += [*REPO.glob("validation/*.py"), *REPO.glob("ui/*.js"), REPO / "Stash2Plex.yml"]
    found = []
    for path in files:
        if path.name == "legacy.py":
            continue
        for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if old.search(text) and "Replaces " not in text:
                found.append(f"{path.relative_to(REPO)}:{n}: {text.strip()[:100]}")
    assert found == []

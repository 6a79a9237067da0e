"""Bad settings: a bad optional value turns only its feature off, and every run decides alike.

Every run (the hook's drainer, a task, the command line, ``watch``) reads the settings through
``validation/config.py`` ``load_settings``. A bad value of a setting in ``OPTIONAL`` is named
(health check, the page's status, the run's log) and its feature is off; scenes still sync.
Any other bad value stops the sync in the drainer and in ``process_queue`` alike, the job kept.
"""

from __future__ import annotations

import io
import time

import pytest

from core.errors import ConfigError
from core.log import Redactor, StashLog
from tests.conftest import POLL_S
from tests.runner import drainer_lock_held
from validation.config import DEFAULTS, MAX_ACCOUNT_ID, OPTIONAL, load_settings

REQUIRED = {"plex_url": "http://plex:32400", "plex_token": "abc"}
TOO_BIG = str(10**30)

# (setting, bad value, the words that name it)
OPTIONAL_BAD = [
    ("plays_accounts", "bob", "setting plays_accounts: must be Plex account ids"),
    ("plays_accounts", TOO_BIG, "setting plays_accounts: must be Plex account ids (whole numbers from 1 to 2^63-1)"),
    ("notify_plex_down_minutes", -5, "setting notify_plex_down_minutes: must be a number of minutes above 0"),
    ("title_template", "{title", "setting title_template: is not a valid template"),
    (
        "performer_photo_base_url",
        "http://admin:pw@stash.lan:9999",
        "setting performer_photo_base_url: must not carry a user name or password",
    ),
    ("plex_concurrency", -3, "setting plex_concurrency: must be a whole number from 1 to 16, got '-3'"),
    ("plex_concurrency", 10**6, "setting plex_concurrency: must be a whole number from 1 to 16, got '1000000'"),
    ("plex_concurrency", 2.5, "setting plex_concurrency: must be a whole number from 1 to 16, got '2.5'"),
]
FATAL_BAD = [
    ("tags_as", "garbage", "setting tags_as: must be one of genres, labels, both, got 'garbage'"),
    ("collections", "garbage", "setting collections: 'garbage' is not a collection source"),
]


# -- pure: what load_settings decides ---------------------------------------------------------
@pytest.mark.parametrize(("name", "value", "says"), OPTIONAL_BAD)
def test_a_bad_optional_value_takes_its_fallback_and_is_named(name, value, says):
    settings = load_settings({**REQUIRED, "import_plays": True, "import_resume": True, name: value})
    fallback = OPTIONAL[name]
    assert getattr(settings, name) == fallback.value
    (problem,) = settings.problems
    assert problem.startswith(says) and problem.endswith(fallback.consequence), problem
    assert settings.problem(name) == problem and settings.summary()[name] == "(bad value: not used)"
    assert settings.import_plays is (name != "plays_accounts")  # whose plays is unknown: none are read
    assert settings.resume_on is (name != "plays_accounts")  # nor whose resume points


@pytest.mark.parametrize(("name", "value", "says"), FATAL_BAD)
def test_a_bad_value_of_what_is_written_stops_the_sync(name, value, says):
    with pytest.raises(ConfigError, match="^" + __import__("re").escape(says)):
        load_settings({**REQUIRED, name: value})


def test_a_bad_optional_value_beside_a_fatal_one_still_stops_the_sync():
    with pytest.raises(ConfigError, match="tags_as"):
        load_settings({**REQUIRED, "tags_as": "x", "plex_concurrency": -3})


def test_plays_accounts_bounds_and_zero():
    assert load_settings({**REQUIRED, "plays_accounts": f"1, {MAX_ACCOUNT_ID}"}).plays_accounts == (1, MAX_ACCOUNT_ID)
    assert load_settings({**REQUIRED, "plays_accounts": "0"}).play_accounts == (1,)  # Stash's unsaved 0: default
    assert load_settings({**REQUIRED, "plays_accounts": str(MAX_ACCOUNT_ID + 1)}).problem("plays_accounts")
    assert load_settings({**REQUIRED, "plays_accounts": "²"}).problem("plays_accounts")  # a digit int() refuses


def test_numbers_saved_as_zero_or_text_are_read_alike():
    for value, expected in ((0, DEFAULTS["plex_concurrency"]), ("0", 6), ("3", 3), (3.0, 3), (16, 16)):
        settings = load_settings({**REQUIRED, "plex_concurrency": value})
        assert settings.plex_concurrency == expected and settings.problems == (), value
    assert load_settings({**REQUIRED, "notify_plex_down_minutes": 0}).notify_plex_down_minutes == 10
    assert load_settings({**REQUIRED, "notify_plex_down_minutes": "2.5"}).notify_plex_down_minutes == 2.5
    assert load_settings({**REQUIRED, "notify_plex_down_minutes": float("nan")}).notify_plex_down_minutes is None


# -- end to end -------------------------------------------------------------------------------
def _edit(plugin, sid: int, title: str) -> dict:
    return plugin.stash.update_scene(sid, title=title)


def _until(plugin, done, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, plugin.drainer_log()
        time.sleep(POLL_S)


@pytest.mark.parametrize(("name", "value", "says"), OPTIONAL_BAD, ids=[f"{n}={v}" for n, v, _ in OPTIONAL_BAD])
def test_one_bad_optional_value_scenes_still_sync_and_it_is_named(plugin, name, value, says):
    """The drainer a hook starts and ``process_queue`` both sync; the drainer's log names the
    value once; health check and the page's status name it."""
    plugin.configure(import_plays=True, **{name: value})
    sid, rk = plugin.add_scene(1)
    assert plugin.hook(_edit(plugin, sid, "By the drainer")).error is None
    plugin.wait_drained(timeout=30)
    assert plugin.plex.item(rk)["fields"]["title"] == "By the drainer", plugin.drainer_log()
    assert plugin.drainer_log().count(says) == 1, plugin.drainer_log()
    with drainer_lock_held(plugin.data_dir):
        assert plugin.hook(_edit(plugin, sid, "By process_queue")).error is None
    run = plugin.task("process_queue")
    assert run.error is None and run.output["synced"] == 1, run.stderr[-2000:]
    assert plugin.plex.item(rk)["fields"]["title"] == "By process_queue"
    assert sum(says in m for m in run.messages("warning")) == 1, run.messages()
    health = plugin.task("health_check").output
    assert [p for p in health["problems"] if says in p] and health["settings"][name] == "(bad value: not used)"
    assert [p for p in plugin.task("ui_status").output["settings_problems"] if says in p]


def test_a_bad_plays_accounts_is_named_by_import_plays_without_a_traceback(plugin):
    plugin.configure(import_plays=True, plays_accounts=TOO_BIG)
    run = plugin.task("import_plays")
    assert run.error and run.error.startswith("setting plays_accounts: must be Plex account ids"), run.error
    assert "Traceback" not in run.stderr and "OverflowError" not in run.stderr


@pytest.mark.parametrize(("name", "value", "says"), FATAL_BAD, ids=[n for n, _, _ in FATAL_BAD])
def test_the_drainer_and_process_queue_refuse_alike(plugin, name, value, says):
    """A drainer lingering with good settings when a bad value is saved: the next edit is not
    written with the old settings (it waited for a settings check); both runs refuse, the job stays.

    A hook that reaches a drainer still in its run may have its job taken before the drainer
    next compares the settings ("soon after a nudge", docs/architecture.md): so the bad value
    is saved only once the drainer says it lingers, and the linger outlasts a loaded host."""
    plugin.env["STASH2PLEX_DRAINER_LINGER_S"] = "30"
    sid, rk = plugin.add_scene(1)
    assert plugin.hook(_edit(plugin, sid, "Good settings")).error is None
    _until(plugin, lambda: "the drainer waits up to 30 s for more" in plugin.drainer_log())
    assert plugin.plex.item(rk)["fields"]["title"] == "Good settings" and plugin.drainer_busy()
    plugin.configure(**{name: value})
    assert plugin.hook(_edit(plugin, sid, "Bad settings")).error is None
    stopped = f"drainer stopped: ConfigError: {says}"  # it starts over with the bad value, then stops
    _until(plugin, lambda: stopped in plugin.drainer_log())
    assert plugin.plex.item(rk)["fields"]["title"] == "Good settings", plugin.drainer_log()
    assert says in plugin.status()["last_drainer_error"]["error"]  # the health file's record, as hooks read it
    run = plugin.task("process_queue")
    assert run.error and run.error.startswith(says), run.error
    assert plugin.plex.item(rk)["fields"]["title"] == "Good settings"
    assert plugin.status()["pending"] == 1


def test_a_job_that_came_as_the_drainer_left_goes_by_the_settings_saved_since(tmp_path, monkeypatch):
    """Its hook found the lock still held and only nudged. The drainer drains again (app/drainer.py
    ``_rounds``) and compares the settings first, as a lingering one does: the job is not written
    with the old ones. (The moment is a few milliseconds wide: played here with an App of what
    ``_rounds`` reads.)"""
    from app import drainer

    apps: list = []
    rounds: list[str] = []

    class App:
        lock_path = tmp_path / "drainer.lock"

        def __init__(self) -> None:
            self.settings, self.closed = "new" if apps else "old", False  # saved in Stash during the first round
            apps.append(self)

        def take_over(self, start_drainer: bool) -> None:
            pass

        def handover_requested(self) -> bool:
            return False

        def producer_queue(self) -> App:
            return self

        def pending(self) -> int:
            return 1 if len(rounds) == 1 else 0  # the hook's job, queued as the first round ended

        def settings_changed(self) -> bool:
            return self.settings == "old"

        def close(self) -> None:
            self.closed = True

    def drain_once(app, log, lock) -> bool:
        rounds.append(app.settings)
        lock.release()
        return True

    monkeypatch.setattr(drainer, "drain_once", drain_once)
    out = io.StringIO()
    assert drainer._rounds(App, StashLog(out, Redactor(), plain=True)) == 0
    assert rounds == ["old", "new"] and all(app.closed for app in apps), rounds
    assert drainer.STARTS_OVER in out.getvalue()


def test_the_command_line_decides_as_the_plugin_does(plugin):
    """A flag is read by the same function: a bad optional value syncs (named), a bad value of
    what is written stops before Plex (the job kept)."""
    from tests.test_cli import cli

    sid, rk = plugin.add_scene(1)
    with drainer_lock_held(plugin.data_dir):
        assert plugin.hook(_edit(plugin, sid, "By the command line")).error is None
    refused = cli(plugin, "process_queue", "--tags-as", "garbage")
    assert refused.returncode == 1 and FATAL_BAD[0][2] in refused.stderr, refused.stderr
    assert plugin.status()["pending"] == 1
    done = cli(plugin, "process_queue", "--json", STASH2PLEX_PLEX_CONCURRENCY="2.5")
    assert done.returncode == 0 and done.json()["synced"] == 1, done.stderr
    assert done.stderr.count(OPTIONAL_BAD[-1][2]) == 1, done.stderr
    assert plugin.plex.item(rk)["fields"]["title"] == "By the command line"

"""The standalone command line (app/cli.py), run as a user runs it from a shell.

Every command runs ``python Stash2Plex.py <command>`` as a process of its own against the
emulators, configured by flags and environment variables, with Stash reached by its API
key: forked by the suite's fork server (tests/runner.py ``run_command``), and started anew
where a terminal is involved (the progress bar on a real pseudo-terminal, Ctrl-C) and in
tests/test_cli_native.py.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest

from app.cli import PROCESSES, command_help, setting_help, setting_names
from app.terminal import TerminalLog, render_bar
from tests.conftest import PLEX_TOKEN, SECRETS, STASH_API_KEY
from tests.runner import REPO, drainer_lock_held, run_command, start_command
from validation.modes import COMMAND_LINE_MODES

ENTRY = str(REPO / "Stash2Plex.py")


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)


def cli(plugin, *args: str, tty: bool = False, timeout: float = 120, **env: str) -> Done:
    """Run the command line with the plugin's data dir, Stash's URL and API key in the environment."""
    full = {
        **os.environ,
        **plugin.env,
        "STASH2PLEX_STASH_URL": plugin.stash.url,
        "STASH2PLEX_STASH_API_KEY": STASH_API_KEY,
        **env,
    }
    full = {k: v for k, v in full.items() if v is not None}
    if tty:
        done = _run_on_pty([sys.executable, ENTRY, *args], full, timeout)
    else:
        done = Done(*run_command([sys.executable, ENTRY, *args], full, timeout))
    for secret in SECRETS:
        assert secret not in done.stdout and secret not in done.stderr, "a secret leaked into the output"
    return done


def _run_on_pty(argv: list[str], env: dict, timeout: float) -> Done:
    """stderr on a pseudo-terminal (so the bar is drawn), stdout on a pipe."""
    main_fd, child_fd = pty.openpty()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=child_fd, stdin=subprocess.DEVNULL, text=True)
    os.close(child_fd)
    chunks = []
    while True:
        try:
            data = os.read(main_fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    out = proc.stdout.read()
    proc.wait(timeout)
    os.close(main_fd)
    return Done(proc.returncode, out, b"".join(chunks).decode("utf-8", "replace"))


def _saved_nothing(plugin) -> None:
    plugin.stash.plugin_settings = {}


# -- usage ----------------------------------------------------------------------------------
def test_help_lists_every_command_setting_and_variable(plugin):
    commands = command_help()
    assert set(commands) == set(COMMAND_LINE_MODES) | set(PROCESSES) | {"status"}
    assert {"all", "inspect", "pin", "health_check", "watch", "demo"} <= set(commands)
    done = cli(plugin, "--help")
    assert done.returncode == 0
    for command in commands:
        assert f"  {command} " in done.stdout, command
    flat = " ".join(done.stdout.split())
    described = setting_help(REPO)
    assert set(described) == set(setting_names())  # every setting's description, from Stash2Plex.yml
    for name in setting_names():
        assert f"--{name.replace('_', '-')} VALUE {described[name]} [STASH2PLEX_{name.upper()}]" in flat, name
    for variable in ("STASH2PLEX_STASH_URL", "STASH2PLEX_STASH_API_KEY", "STASH2PLEX_DATA_DIR"):
        assert variable in done.stdout


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["frobnicate"], 2, "invalid choice: 'frobnicate'"),
        ([], None, None),  # no arguments is the plugin protocol (stdin), not the command line
        (
            ["all", "--stash-url", "ftp://stash"],
            2,
            "--stash-url must look like http://localhost:9999, got 'ftp://stash'",
        ),
        (["all", "--stash-url", "http://stash:9999/graphql"], 2, "--stash-url must be Stash's address without a path"),
        (["all", "--tags-as", "tags"], 1, "setting tags_as: must be one of genres, labels, both, got 'tags'"),
        (["all", "--loose-matching", "maybe"], 1, "setting loose_matching: must be true or false, got 'maybe'"),
    ],
)
def test_bad_command_lines_say_what_is_wrong(plugin, args, code, says):
    if not args:
        proc = subprocess.run(
            [sys.executable, ENTRY],
            input="",
            capture_output=True,
            text=True,
            env={**os.environ, **plugin.env},
            timeout=60,
        )
        assert json.loads(proc.stdout)["error"].startswith("stdin is empty")
        return
    done = cli(plugin, *args)
    assert done.returncode == code
    assert says in done.stderr, done.stderr
    assert done.stdout == ""


def test_watch_names_a_poll_interval_that_is_not_seconds(plugin):
    done = cli(plugin, "watch", STASH2PLEX_WATCH_POLL_S="soon", timeout=60)
    assert done.returncode == 1
    says = "environment variable STASH2PLEX_WATCH_POLL_S must be a number of seconds (e.g. 60), got 'soon'"
    assert says in done.stderr, done.stderr


def test_without_an_api_key_stash_says_what_to_give(plugin):
    plugin.stash.auth_required = True
    done = cli(plugin, "all", STASH2PLEX_STASH_API_KEY=None)
    assert done.returncode == 1
    assert "Stash asks for credentials (401)" in done.stderr and "--stash-api-key" in done.stderr, done.stderr
    wrong = cli(plugin, "all", STASH2PLEX_STASH_API_KEY="not-the-key")
    assert wrong.returncode == 1 and "Stash refused the API key (401)" in wrong.stderr, wrong.stderr


# -- the sync commands -------------------------------------------------------------------------
def test_all_from_flags_and_variables_draws_a_bar_then_resync_writes_nothing(plugin):
    _saved_nothing(plugin)
    scenes = [plugin.add_scene(n, tags=[f"T{n % 3}"]) for n in range(40)]
    args = ("all", "--plex-url", plugin.plex.url, "--path-map", "/stash/media=/plex/media")
    done = cli(plugin, *args, tty=True, STASH2PLEX_PLEX_TOKEN=PLEX_TOKEN)
    assert done.returncode == 0, done.stderr
    assert "checked: 40" in done.stdout and "synced: 40" in done.stdout, done.stdout
    assert f"[{'#' * 30}] 100%" in done.stderr, done.stderr
    for sid, rk in scenes:
        assert plugin.plex.item(rk)["fields"]["title"] == plugin.stash.scene(sid)["title"]
    plugin.plex.clear_requests()
    again = cli(plugin, *args, "--json", STASH2PLEX_PLEX_TOKEN=PLEX_TOKEN)
    assert again.returncode == 0 and again.json()["synced"] == 0
    assert "\x1b[K" not in again.stderr and "] 100%" not in again.stderr  # not a terminal: no bar
    assert plugin.plex.edit_requests() == [] and plugin.plex.upload_requests() == []


def test_recent_syncs_only_what_changed_since_the_last_sync(plugin):
    scenes = [plugin.add_scene(n) for n in range(4)]
    assert plugin.task("all").output["synced"] == 4  # from Stash; the command line's recent follows it
    # updated_at has whole seconds: the edit must land in a later second than the sync's start
    plugin.stash.clock = lambda: time.time() + 1
    sid, rk = scenes[2]
    plugin.stash.update_scene(sid, title="Changed for recent")
    plugin.plex.clear_requests()
    plan = cli(plugin, "recent", "--dry-run", "--json").json()  # the plan of recent, not of all
    assert (plan["mode"], plan["checked"], [s["scene_id"] for s in plan["scenes"]]) == ("recent", 1, [sid])
    done = cli(plugin, "recent", "--json")
    assert done.returncode == 0, done.stderr
    assert done.json()["checked"] == 1 and done.json()["synced"] == 1, done.stdout
    assert len(plugin.plex.edit_requests()) == 1
    assert plugin.plex.item(rk)["fields"]["title"] == "Changed for recent"


def test_settings_precedence_flag_then_variable_then_saved(plugin):
    plugin.configure(path_map="/saved=/saved")
    plugin.add_scene(1)  # a wrong path_map then finds nothing: health_check exits 1

    def rules(*args, **env):
        done = cli(plugin, "health_check", "--json", *args, **env)
        return done.returncode, done.json()["path_map"]["rules"]

    assert rules() == (1, "/saved=/saved")
    assert rules(STASH2PLEX_PATH_MAP="/from/env=/env") == (1, "/from/env=/env")
    assert rules("--path-map", "/from/flag=/flag", STASH2PLEX_PATH_MAP="/from/env=/env") == (1, "/from/flag=/flag")
    assert rules("--path-map", "/stash/media=/plex/media") == (0, "/stash/media=/plex/media")  # healthy: exit 0


def test_process_queue_and_clear_queue_work_on_the_plugins_queue(plugin):
    scenes = [plugin.add_scene(n) for n in range(5)]
    with drainer_lock_held(plugin.data_dir):  # hooks only enqueue
        for sid, _ in scenes:
            assert plugin.hook(plugin.stash.update_scene(sid, title=f"Queued {sid}")).error is None
        status = cli(plugin, "status", "--json").json()
        assert status["pending"] == 5 and status["drainer_running"] is True
    assert cli(plugin, "clear_queue").stdout.strip() == "removed 5 pending jobs"
    with drainer_lock_held(plugin.data_dir):
        for sid, _ in scenes[:2]:
            plugin.hook(plugin.stash.update_scene(sid, title=f"Again {sid}"))
    done = cli(plugin, "process_queue", "--json")
    assert done.returncode == 0 and done.json()["synced"] == 2, done.stderr
    assert [plugin.plex.item(rk)["fields"]["title"] for _, rk in scenes[:3]] == [
        f"Again {scenes[0][0]}",
        f"Again {scenes[1][0]}",
        "scene-00002",
    ]  # the cleared job never ran


def test_status_is_local_and_readable(plugin):
    plugin.add_scene(1)
    assert cli(plugin, "all").returncode == 0
    done = cli(plugin, "status", "--stash-url", "http://127.0.0.1:1")  # Stash is not needed
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "0 pending (0 waiting for a retry), 0 in the dead-letter queue"
    assert "synced 1," in done.stdout and "avg Plex" in done.stdout
    assert done.stderr == ""  # the lines are on stdout, not repeated as log lines
    assert cli(plugin, "queue_status", "--json").json()["stats"]["synced"] == 1


@pytest.mark.parametrize("culprit", ["queue/inbox.spool", "drainer.lock"])
def test_a_damaged_data_folder_is_named_on_the_command_line_without_a_traceback(tmp_path, culprit):
    """A folder where the plugin keeps a file (the hooks' spool, the drainer's lock): the
    command line names the path and what to do, as a hook's and a task's reply do, not an
    unexpected error (tests/test_hook_inbox.py, the same damage through a hook)."""
    data = tmp_path / "data"
    (data / culprit).mkdir(parents=True)
    env = {**os.environ, "STASH2PLEX_DATA_DIR": str(data), "STASH2PLEX_STASH_URL": "http://127.0.0.1:1"}
    code, out, err = run_command([sys.executable, ENTRY, "status"], env, timeout=60)
    assert code == 1 and out == "", err
    assert "unexpected" not in err and "Traceback" not in err, err
    assert f"{data / culprit} is a folder where Stash2Plex keeps a file" in err and "Move it" in err, err


def test_ctrl_c_stops_cleanly_and_loses_nothing(plugin, tmp_path):
    scenes = [plugin.add_scene(n) for n in range(60)]
    plugin.plex.latency = 0.1  # slow enough to interrupt mid-run
    env = {**plugin.env, "STASH2PLEX_STASH_URL": plugin.stash.url, "STASH2PLEX_STASH_API_KEY": STASH_API_KEY}
    proc = start_command(["all"], env, tmp_path / "all.stderr", tmp_path / "all.stdout")
    deadline = time.monotonic() + 60
    while not plugin.plex.edit_requests() and time.monotonic() < deadline:
        time.sleep(0.05)
    # Plex slows down: the run cannot finish before the signal lands, however late this
    # thread runs, and Ctrl-C must not wait for the syncs handed ahead (20 s of them here).
    plugin.plex.latency = 2.0
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = (tmp_path / "all.stderr").read_text()
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted; nothing is lost" in err and "Traceback" not in err, err[-2000:]
    assert (tmp_path / "all.stdout").read_text() == ""
    plugin.plex.latency = 0
    assert cli(plugin, "all").returncode == 0
    assert all(plugin.plex.item(rk)["fields"]["title"] == f"Scene {n}" for n, (_, rk) in enumerate(scenes))


# -- the dead-letter queue commands ------------------------------------------------------------
def test_retry_dlq_starts_a_drainer_that_carries_the_command_lines_settings(plugin):
    # (grouping, purge and clear of the dead-letter queue: test_reliability.py, through the tasks)
    _saved_nothing(plugin)
    _, rk = plugin.add_scene(1)
    flags = ("--plex-url", plugin.plex.url, "--path-map", "/stash/media=/plex/media")
    bad = cli(plugin, "all", *flags, STASH2PLEX_PLEX_TOKEN="wrong-token-123")
    assert bad.returncode == 1 and "Plex rejected the token" in bad.stderr, bad.stderr
    assert cli(plugin, "status", "--json").json()["dlq_by_reason"] == {"PlexAuthError": 1}
    done = cli(plugin, "retry_dlq", *flags, STASH2PLEX_PLEX_TOKEN=PLEX_TOKEN)
    assert done.returncode == 0 and done.stdout.strip() == "1 dead-letter entries queued again"
    plugin.wait_drained()
    assert plugin.plex.item(rk)["fields"]["title"] == "Scene 1"
    assert plugin.status()["dlq"] == 0


# -- identity, demo, the bar ------------------------------------------------------------------
def test_every_plex_request_carries_one_persistent_client_identity(plugin):
    scenes = [plugin.add_scene(n) for n in range(2)]
    plugin.hook(plugin.stash.update_scene(scenes[0][0], title="From a hook"))
    plugin.wait_drained()
    assert cli(plugin, "all").returncode == 0
    plugin.task("health_check")
    requests = plugin.plex.requests
    assert len(requests) > 3
    identifiers = {r["headers"].get("X-Plex-Client-Identifier") for r in requests}
    products = {r["headers"].get("X-Plex-Product") for r in requests}
    with sqlite3.connect(plugin.data_dir / "state.db") as conn:
        stored = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'client_id'").fetchone()[0])
    assert identifiers == {stored} and products == {"Stash2Plex"}
    assert stored != "stash2plex-tests"  # ours, not plexapi's environment default


def test_bar_text_and_log_lines_above_it():
    assert render_bar(0.0, 0.0) == f"[{'-' * 30}]   0%  0s"
    assert render_bar(0.5, 10.0) == f"[{'#' * 15}{'-' * 15}]  50%  10s, ~10s left"
    assert render_bar(1.0, 12.4) == f"[{'#' * 30}] 100%  12s"

    class Screen:
        text = ""

        def write(self, s):
            self.text += s

        def flush(self):
            pass

        def isatty(self):
            return True

    now = [100.0]
    screen = Screen()
    log = TerminalLog(screen, clock=lambda: now[0])
    now[0] = 104.0
    log.progress(0.8)
    log.info("a line")
    log.debug("hidden")
    log.warning("careful")
    log.finish()
    bar = f"[{'#' * 24}{'-' * 6}]  80%  4s, ~1s left"
    assert screen.text == f"{bar}\r\x1b[Ka line\n{bar}\r\x1b[Kwarning: careful\n{bar}\n"


def test_reports_print_once_on_a_terminal(plugin):
    """A report goes to stdout; stderr (a terminal here) keeps progress, warnings and errors,
    not the same lines again."""
    plugin.add_scene(1)
    plugin.stash.add_scene("Lost", files=[{"path": "/elsewhere/lost.mp4"}])  # no Plex item: unmatched
    for args in (["all", "--dry-run"], ["reconcile", "--dry-run"], ["unmatched"], ["health_check"]):
        done = cli(plugin, *args, "--no-progress", tty=True)
        out = {line.strip() for line in done.stdout.splitlines() if line.strip()}
        err = {line.strip().removeprefix("warning: ") for line in done.stderr.splitlines() if line.strip()}
        assert out, (args, done.stderr)
        assert not out & err, (args, sorted(out & err))
        if "--dry-run" in args:  # the plan's table, as docs/configuration.md says
            assert done.stdout.startswith(f"dry run of '{args[0]}': nothing was written"), done.stdout


def test_a_mistyped_flag_leaves_no_drainer_that_keeps_it(plugin):
    """A flag that differs from a saved setting is this run's only: the drainer it leaves
    behind serves every hook with what is saved in Stash (and clears the Plex-down status)."""
    from sync_queue import health
    from tests.test_ui_modes import closed_port

    _, rk = plugin.add_scene(1)  # the settings saved in Stash name the right Plex
    done = cli(plugin, "all", "--plex-url", f"http://127.0.0.1:{closed_port()}", "--no-progress")
    assert "Plex" in done.stderr, done.stderr
    plugin.wait_drained()
    assert plugin.plex.item(rk)["fields"]["title"] == "Scene 1"  # written with the saved URL
    assert not health.read(plugin.data_dir).get("plex_down"), health.read(plugin.data_dir)


def test_a_flag_for_a_setting_saved_under_its_old_name_leaves_no_drainer_that_keeps_it(plugin):
    """The public plugin's ``plex_library`` is a saved value of ``plex_libraries``: a flag
    for it is this run's only, as for a setting saved under today's name."""
    plugin.plex.add_section("Other", ["/plex/other"], key=2)
    plugin.configure(plex_library="Stash")  # saved by the public plugin, taken over
    _, rk = plugin.add_scene(1)
    cli(plugin, "all", "--plex-libraries", "Other", "--no-progress")
    plugin.wait_drained()
    assert plugin.plex.item(rk)["fields"]["title"] == "Scene 1", plugin.drainer_log()[-2000:]

"""The suite's forked plugin runs (tests/forkserver.py) behave as new interpreters do: the
same reply, logs and exit status, and a drainer detached in a session of its own."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from tests.runner import drainer_lock_held, hook_document, run_command, run_plugin, task_document

FRESH = "S2P_TEST_FRESH_PROCESSES"


def _both(monkeypatch, run):
    """``run()`` forked, then in a new interpreter."""
    monkeypatch.delenv(FRESH, raising=False)
    forked = run()
    monkeypatch.setenv(FRESH, "1")
    fresh = run()
    monkeypatch.delenv(FRESH)
    return forked, fresh


def _same(forked, fresh) -> None:
    assert (forked.returncode, forked.reply, forked.logs, forked.progress) == (
        fresh.returncode,
        fresh.reply,
        fresh.logs,
        fresh.progress,
    )


@pytest.mark.parametrize("stdin", [b"", b"{not json", '{"args": {"mode": "queue_status"}}'.encode()])
def test_bad_stdin_is_answered_alike(plugin, monkeypatch, stdin):
    _same(*_both(monkeypatch, lambda: run_plugin(stdin, env=plugin.env)))


def test_hooks_and_tasks_are_answered_alike(plugin, monkeypatch, tmp_path):
    sid, _ = plugin.add_scene(1)
    context = plugin.stash.update_scene(sid, title="Forked or not")
    folders = iter([tmp_path / "forked", tmp_path / "fresh"])

    def hook_then_status():
        env = {**plugin.env, "STASH2PLEX_DATA_DIR": str(next(folders))}
        with drainer_lock_held(env["STASH2PLEX_DATA_DIR"]):  # the hook only enqueues
            hook = run_plugin(hook_document(plugin.connection, context), env=env)
            status = run_plugin(task_document(plugin.connection, "queue_status"), env=env)
        return hook, status

    (forked_hook, forked_status), (fresh_hook, fresh_status) = _both(monkeypatch, hook_then_status)
    assert forked_hook.output == f"scene {sid} queued"
    _same(forked_hook, fresh_hook)
    _same(forked_status, fresh_status)


@pytest.mark.parametrize("fresh", [False, True], ids=["forked", "new interpreter"])
def test_the_drainer_a_hook_starts_runs_in_its_own_session_and_syncs(plugin, monkeypatch, fresh):
    if fresh:
        monkeypatch.setenv(FRESH, "1")
    sid, rk = plugin.add_scene(1)
    plugin.plex.latency = 0.3  # the drainer is still at work when we look at it
    run = plugin.hook(plugin.stash.update_scene(sid, title="Detached"))
    assert run.error is None, run.stderr
    deadline = time.monotonic() + 15
    pid = 0
    while time.monotonic() < deadline and pid <= 0:
        text = (plugin.data_dir / "drainer.lock").read_text().strip() if plugin.drainer_busy() else ""
        pid = int(text) if text.isdigit() else 0
        time.sleep(0.02)
    assert pid > 0, plugin.drainer_log()
    assert os.getsid(pid) == pid  # a session leader: Stash stopping the hook's group leaves it alone
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.exists():  # Linux: which way it was started
        assert ("forkserver.py" in cmdline.read_text()) is not fresh
    plugin.wait_drained()
    assert plugin.plex.item(rk)["fields"]["title"] == "Detached"


@pytest.mark.fresh
def test_a_fresh_marked_test_runs_new_interpreters(plugin):
    """``@pytest.mark.fresh`` tests start every plugin run as Stash does (tests/conftest.py)."""
    from tests.forkserver_client import FORK_SERVER
    from tests.runner import build_argv

    assert not FORK_SERVER.possible(build_argv(), {**os.environ, **plugin.env})


@pytest.mark.parametrize(
    ("ending", "status"),
    [("sys.exit(3)", 3), ("sys.exit('stopped: a message')", 1), ("raise ValueError('boom')", 1), ("pass", 0)],
)
def test_a_forked_program_ends_as_a_new_interpreter_does(tmp_path, monkeypatch, ending, status):
    """Exit status, messages, non-daemon threads and atexit handlers, as ``_run_as_main``
    promises (it skips only the module teardown)."""
    script = tmp_path / "program.py"
    script.write_text(
        "import atexit, sys, threading, time\n"
        "atexit.register(lambda: print('atexit ran', file=sys.stderr))\n"
        "threading.Thread(target=lambda: (time.sleep(0.2), print('thread done'))).start()\n"
        f"{ending}\n"
    )
    argv, env = [sys.executable, str(script)], dict(os.environ)
    forked, fresh = _both(monkeypatch, lambda: run_command(argv, env, 30))
    assert forked[0] == fresh[0] == status
    assert forked[1] == fresh[1] == "thread done\n"
    assert forked[2].endswith("atexit ran\n") and fresh[2].endswith("atexit ran\n")
    assert forked[2].splitlines()[-2:] == fresh[2].splitlines()[-2:]

"""The suite's forked plugin runs (tests/forkserver.py) behave as new interpreters do: the
same reply, logs and exit status, and a drainer detached in a session of its own."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.runner import drainer_lock_held, hook_document, run_plugin, task_document

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

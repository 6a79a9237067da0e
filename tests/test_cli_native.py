"""The command line behaves like the tools its users know (PlexTraktSync, Kometa).

``--version``, help per command, dashed command names beside the task names,
readable output (``--json`` for scripts), usage instead of a silent wait when run
bare in a terminal, and Stash's raw log protocol never written to a terminal. Each
runs ``python Stash2Plex.py`` as a subprocess against the emulators.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time

from tests.runner import REPO, drainer_lock_held, task_document
from tests.test_cli import ENTRY, cli


def _version_in_yml() -> str:
    return re.search(r"^version:\s*(\S+)", (REPO / "Stash2Plex.yml").read_text(), re.M).group(1)


def test_version_is_the_one_stash_shows(plugin):
    done = cli(plugin, "--version")
    assert done.returncode == 0 and done.stdout.strip() == f"Stash2Plex {_version_in_yml()}"


def test_help_per_command(plugin):
    done = cli(plugin, "all", "--help")
    assert done.returncode == 0
    assert done.stdout.startswith("usage: Stash2Plex.py all [options]"), done.stdout[:200]
    assert "sync every scene that differs" in done.stdout and "--plex-url" in done.stdout
    assert "health_check" not in done.stdout  # not the global list of commands
    dashed = cli(plugin, "health-check", "--help")
    assert dashed.returncode == 0 and dashed.stdout.startswith("usage: Stash2Plex.py health-check [options]")


def test_dashed_names_and_options_before_or_after_the_command(plugin):
    scenes = [plugin.add_scene(n) for n in range(2)]
    with drainer_lock_held(plugin.data_dir):  # hooks only enqueue
        for sid, _ in scenes:
            plugin.hook(plugin.stash.update_scene(sid, title=f"Dashed {sid}"))
    assert cli(plugin, "queue-status", "--json").json()["pending"] == 2
    done = cli(plugin, "--json", "process-queue")
    assert done.returncode == 0 and done.json()["synced"] == 2, done.stderr
    assert [plugin.plex.item(rk)["fields"]["title"] for _, rk in scenes] == [f"Dashed {sid}" for sid, _ in scenes]


def test_output_is_readable_and_json_is_for_scripts(plugin):
    plugin.add_scene(1)
    done = cli(plugin, "all")
    assert done.returncode == 0, done.stderr
    assert "synced: 1" in done.stdout
    assert "done: 1 synced" in done.stderr, done.stderr  # the log line, not a Python dict
    plugin.configure(path_map="/wrong=/plex/media")
    health = cli(plugin, "health-check")
    assert health.returncode == 1
    lines = health.stdout.splitlines()
    assert lines[0] == "health check: 1 problem(s)" and lines[1].startswith("  - "), health.stdout
    assert "reachable: yes" in health.stdout
    for repr_text in ("True", "False", "None", "{'", "['"):
        assert repr_text not in health.stdout + done.stdout, (repr_text, health.stdout)
    data = cli(plugin, "health-check", "--json").json()
    assert data["ok"] is False and data["stash"]["reachable"] is True


def _on_pty(argv, env, stdin_data: bytes | None, timeout: float = 60):
    """stderr (and stdin, unless data is piped) on a pseudo-terminal; stdout on a pipe."""
    main_fd, child_fd = pty.openpty()
    stdin = child_fd if stdin_data is None else subprocess.PIPE
    proc = subprocess.Popen(argv, env=env, stdin=stdin, stdout=subprocess.PIPE, stderr=child_fd)
    os.close(child_fd)
    if stdin_data is not None:
        proc.stdin.write(stdin_data)
        proc.stdin.close()
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main_fd], [], [], 0.1)
        if ready:
            try:
                data = os.read(main_fd, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    else:
        proc.kill()
        raise AssertionError("still waiting: " + b"".join(chunks).decode(errors="replace"))
    out = proc.stdout.read()
    code = proc.wait(10)
    os.close(main_fd)
    return code, out.decode(), b"".join(chunks).decode("utf-8", "replace")


def test_bare_in_a_terminal_prints_usage_instead_of_waiting(plugin):
    code, out, err = _on_pty([sys.executable, ENTRY], {**os.environ, **plugin.env}, None, timeout=30)
    assert code == 2
    assert "give a command" in err and "usage: Stash2Plex.py" in out + err and "health_check" in out + err


def test_the_log_protocol_never_reaches_a_terminal(plugin):
    plugin.add_scene(1)
    document = json.dumps(task_document(plugin.connection, "health_check")).encode()
    code, out, err = _on_pty([sys.executable, ENTRY], {**os.environ, **plugin.env}, document)
    assert code == 0 and json.loads(out)["error"] is None
    assert "Stash is reachable" in err and "\x01" not in err and "\x02" not in err, repr(err[:500])
    # Stash itself (stderr a pipe) still gets the protocol
    piped = plugin.task("health_check")
    assert any(line.startswith("\x01i\x02") for line in piped.stderr.splitlines())

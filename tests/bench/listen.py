"""Listening to Plex: how soon a file Plex has just added is written, and what a resident
``watch`` costs while nothing happens.

* **Event → edit**: N scenes are saved in Stash before Plex has their files (each hook
  run as Stash runs it); the drainer parks them, not found. Then Plex adds the N items at
  once, and each item's delay is the time from Plex finishing it (the emulator's timeline
  event) to our edit request reaching Plex. Baseline, same run: the same with Plex's
  websocket refused (the timed retries alone, ``NOT_FOUND``'s first window is 30 s).
* **Resident watch**: ``python Stash2Plex.py watch`` with plays, resume points and
  ratings on, idle for a window: its resident memory (``VmRSS``, and the high-water mark)
  and CPU (user + system from ``/proc/<pid>/stat``) over the window. Baseline: a Python
  that imports what ``watch`` imports (plexapi, websocket-client, requests, stashapi,
  pydantic) and sleeps.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tests.runner import create_context


def _edit_times(plex, keys: dict[int, int]) -> dict[int, float]:
    first: dict[int, float] = {}
    for r in plex.edit_requests():
        last = r["path"].rstrip("/").rsplit("/", 1)[-1]
        ids = r["query"].get("id", [""])[0] if last == "all" else last  # a section edit names its items in id=
        for rk in (int(x) for x in ids.split(",") if x.isdigit()):
            if rk in keys and rk not in first:
                first[rk] = r["time"]
    return first


def _delays(lab_class, hook_runs, n: int, listen: bool, timeout: float) -> list[float]:
    lab = lab_class(0)
    try:
        lab.plex.notifications.refuse = not listen
        lab.env["STASH2PLEX_DRAINER_LINGER_S"] = "0"
        paths = [f"studio/new-{i:03d}.mp4" for i in range(n)]
        for i, rel in enumerate(paths):
            sid = lab.stash.add_scene(
                title=f"New {i}", files=[{"path": f"/stash/media/{rel}", "size": 5000 + i, "duration": 60.0}]
            )
            run = lab.hook(create_context(sid if isinstance(sid, int) else int(sid["id"])))
            assert run.error is None, run.stderr[-2000:]
        hook_runs.append(n)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # every job tried once and parked
            status = lab.task("queue_status", sample_every=None).output
            if status and status.get("retrying") == n and (not listen or lab.plex.notifications.listening):
                break
            time.sleep(0.5)
        added: dict[int, float] = {}
        for i, rel in enumerate(paths):
            rk = lab.plex.add_item(1, f"/plex/media/{rel}", size=5000 + i, duration_ms=60000)
            added[rk] = time.time()  # the state-5 event left with add_item
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(_edit_times(lab.plex, added)) < n:
            time.sleep(0.1)
        edits = _edit_times(lab.plex, added)
        return [edits[rk] - added[rk] if rk in edits else float("inf") for rk in added]
    finally:
        lab.close()


def _s(seconds: float) -> str:
    return "> 180 s" if seconds == float("inf") else f"{seconds:.2f} s"


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _memory_kb(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for row in status:
            if row.startswith(key + ":"):
                return int(row.split()[1])
    return 0


def _idle(argv: list[str], env: dict, window: float, ready) -> tuple[float, int, int]:
    """(CPU seconds over ``window`` once ``ready()``, VmRSS KB, VmHWM KB) of one process."""
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not ready() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(2)  # start-up done (the first reads of Plex and Stash)
        if proc.poll() is not None:
            raise RuntimeError(f"{argv[-1]} stopped: {proc.stderr.read().decode(errors='replace')[-2000:]}")
        before = _cpu_s(proc.pid)
        time.sleep(window)
        return _cpu_s(proc.pid) - before, _memory_kb(proc.pid, "VmRSS"), _memory_kb(proc.pid, "VmHWM")
    finally:
        proc.terminate()
        proc.wait(10)


BASELINE = (
    "import sys, plexapi.server, websocket, requests, stashapi.stashapp, pydantic, time; "
    "open(sys.argv[1], 'w').close(); time.sleep(3600)"
)


def bench_listen(lab_class, line, repo, n: int = 50, window: float = 60.0) -> None:
    print(f"\nListening to Plex: {n} files Plex adds while their scenes wait; a resident watch idle {window:.0f} s")
    hooks: list[int] = []
    event = sorted(_delays(lab_class, hooks, n, listen=True, timeout=60))
    timed = sorted(_delays(lab_class, hooks, n, listen=False, timeout=180))
    ev_med, tm_med = statistics.median(event), statistics.median(timed)
    line("event -> edit, median", f"{ev_med:.2f} s", f"{tm_med:.2f} s timed retries", f"{ev_med / tm_med:.3f}x")
    line(
        "event -> edit, worst",
        f"{event[-1]:.2f} s",
        f"{timed[-1]:.2f} s timed retries",
        f"{event[-1] / timed[-1]:.3f}x",
    )

    lab = lab_class(20)
    try:
        lab.stash.set_plugin_settings(
            {
                "Stash2Plex": {
                    "plex_url": lab.plex.url,
                    "plex_token": lab.plex.token,
                    "path_map": "/stash/media=/plex/media",
                    "import_plays": True,
                    "import_resume": True,
                    "import_ratings": True,
                }
            }
        )
        assert lab.task("all").error is None
        lab.stash.set_api_key("bench-api-key")
        env = {**lab.env, "STASH2PLEX_STASH_URL": lab.stash.get_url(), "STASH2PLEX_STASH_API_KEY": "bench-api-key"}
        notes = lab.plex.notifications
        cpu, rss, hwm = _idle(
            [sys.executable, str(repo / "Stash2Plex.py"), "watch"], env, window, lambda: notes.listening == 1
        )
        flag = Path(lab.data_dir).with_name("baseline-ready")
        base_cpu, base_rss, _ = _idle([sys.executable, "-c", BASELINE, str(flag)], env, window, flag.exists)
    finally:
        lab.close()
    line(
        "watch: resident memory (VmRSS)",
        f"{rss / 1024:.1f} MB",
        f"{base_rss / 1024:.1f} MB imports",
        f"{rss / base_rss:.2f}x",
    )
    line("watch: peak memory (VmHWM)", f"{hwm / 1024:.1f} MB", "", "")
    line(
        f"watch: CPU over {window:.0f} s idle",
        f"{cpu:.2f} s ({100 * cpu / window:.2f}%)",
        f"{base_cpu:.2f} s sleeping",
        "",
        "polls every 60 s",
    )

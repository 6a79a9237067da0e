"""Stash2Plex benchmarks: the real plugin, run as Stash runs it, against the emulators.

    python -m tests.bench.bench                 # everything (about 10 minutes)
    python -m tests.bench.bench hook bulk       # chosen sections: hook bulk resync scale queue entity reconcile

Every figure is printed with a baseline measured in the same run and the ratio
between them, because these machines are shared and noisy. See docs/performance.md.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.emulators.plex_emulator import PlexEmulator
from tests.emulators.stash_emulator import StashEmulator
from tests.runner import REPO, drainer_lock_held, hook_document, run_plugin, task_document

LATENCY_S = 0.010


def line(name: str, value: str, baseline: str = "", ratio: str = "", target: str = "") -> None:
    print(f"  {name:<44} {value:>14} {baseline:>16} {ratio:>9}  {target}")


def timed(cmd: list[str], stdin: bytes = b"", env: dict | None = None) -> tuple[float, int]:
    """Wall seconds and peak RSS (KB) of one process, timed the same way for every command."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.communicate(stdin)
    wall = time.perf_counter() - started
    return wall, 0


class Lab:
    """Both emulators with a library of n scenes whose paths differ by a prefix."""

    def __init__(self, scenes: int, latency: float = LATENCY_S, common_tag: str | None = None) -> None:
        self.stash = StashEmulator().start()
        self.plex = PlexEmulator().start()
        self.plex.add_section("Stash", ["/plex/media"], key=1)
        for n in range(scenes):
            name = f"studio-{n % 20}/scene-{n:06d}.mp4"
            self.stash.add_scene(
                title=f"Scene {n}",
                details=f"Details of scene {n}",
                date="2024-01-02",
                studio=f"Studio {n % 20}",
                performers=[f"P{n % 50}", f"P{(n + 7) % 50}"],
                tags=[f"T{n % 30}", f"T{(n + 3) % 30}"] + ([common_tag] if common_tag else []),
                files=[{"path": f"/stash/media/{name}", "size": 1000 + n, "duration": 60.0}],
            )
            self.plex.add_item(1, f"/plex/media/{name}", size=1000 + n, duration_ms=60000)
        self.stash.plugin_settings = {
            "Stash2Plex": {
                "plex_url": self.plex.url,
                "plex_token": self.plex.token,
                "path_map": "/stash/media=/plex/media",
            }
        }
        self.plex.latency = latency
        self.tmp = tempfile.TemporaryDirectory()
        self.env = {"STASH2PLEX_DATA_DIR": str(Path(self.tmp.name) / "data")}
        self.connection = self.stash.server_connection(str(REPO))

    def task(self, mode: str):
        return run_plugin(task_document(self.connection, mode), env=self.env, timeout=3600)

    def hook(self, context: dict):
        return run_plugin(hook_document(self.connection, context), env=self.env)

    def close(self) -> None:
        self.stash.stop()
        self.plex.stop()
        self.tmp.cleanup()


def bench_hook(runs: int = 15) -> None:
    print("\nHook cost (median of %d cold processes)" % runs)
    lab = Lab(5, latency=0)
    try:
        holder = drainer_lock_held(lab.env["STASH2PLEX_DATA_DIR"])  # a drainer "is running"
        holder.__enter__()
        baseline = [timed([sys.executable, "-c", "import persistqueue, pydantic"])[0] for _ in range(runs)]
        walls, rss = [], []
        for i in range(runs):
            context = lab.stash.update_scene(1 + i % 5, title=f"edit {i}")
            run = lab.hook(context)
            assert run.error is None, run.stderr
            walls.append(run.wall)
            rss.append(run.peak_rss_kb or 0)
        holder.__exit__(None, None, None)
        base, med = statistics.median(baseline), statistics.median(walls)
        line(
            "hook wall time (median)",
            f"{med * 1000:.0f} ms",
            f"{base * 1000:.0f} ms",
            f"{med / base:.2f}x",
            "<= 1.3x of import persistqueue, pydantic",
        )
        line("hook peak RSS (max)", f"{max(rss) / 1024:.1f} MB", "", "", "< 50 MB")
    finally:
        lab.close()


def baseline_paging(lab: Lab) -> float:
    """Just paging through Stash's scenes and Plex's listing, with the same clients and page size."""
    script = r"""
import json, sys
from stashapi.stashapp import StashInterface
from plexapi.server import PlexServer
conn, plex_url, token = json.loads(sys.stdin.read())
stash = StashInterface(conn)
q = "query($f: FindFilterType){ findScenes(filter: $f){ count scenes { id title details date updated_at studio{name} performers{name} tags{name} files{path size duration} paths{screenshot} } } }"
page, seen = 1, 0
while True:
    r = stash.call_GQL(q, {"f": {"page": page, "per_page": 500, "sort": "id"}})["findScenes"]
    seen += len(r["scenes"])
    if seen >= r["count"] or not r["scenes"]: break
    page += 1
plex = PlexServer(plex_url, token)
start, total = 0, 1
while start < total:
    root = plex.query("/library/sections/1/all?type=1", headers={"X-Plex-Container-Start": str(start), "X-Plex-Container-Size": "500"})
    total = int(root.attrib["totalSize"]); start += 500
"""
    payload = json.dumps([lab.connection | {"Host": "127.0.0.1"}, lab.plex.url, lab.plex.token]).encode()
    return timed([sys.executable, "-c", script], payload)[0]


def bench_bulk(scenes: int = 2000) -> dict:
    print(f"\nBulk sync: 'all' over {scenes} scenes, Plex latency {LATENCY_S * 1000:.0f} ms per request")
    lab = Lab(scenes)
    try:
        lab.plex.clear_requests()
        run = lab.task("all")
        assert run.error is None, run.stderr[-2000:]
        edits = len(lab.plex.edit_requests())
        synced = run.output["synced"]
        rate = synced / run.wall
        pages = len(lab.stash.graphql_requests("S2PScenesPage"))
        by_id = len(lab.stash.graphql_requests("S2PScenesById"))
        floor = scenes * LATENCY_S  # one edit request per changed scene, one at a time
        line(
            "scenes synced per second",
            f"{rate:.1f}/s",
            f"{1 / LATENCY_S:.0f}/s serial floor",
            f"{rate * LATENCY_S:.2f}x",
            ">= 50/s",
        )
        line("wall time", f"{run.wall:.1f} s", f"{floor:.1f} s", f"{run.wall / floor:.2f}x")
        line("edit requests per changed scene", f"{edits / max(synced, 1):.2f}", "", "", "<= 1")
        line("Stash requests (pages / by id)", f"{pages} / {by_id}", f"{-(-scenes // 500)} pages", "")
        line("task peak RSS", f"{(run.peak_rss_kb or 0) / 1024:.0f} MB", "", "", "< 150 MB")
        base = baseline_paging(lab)
        lab.plex.clear_requests()
        again = lab.task("all")
        writes = len(lab.plex.edit_requests()) + len(lab.plex.upload_requests())
        line(
            "no-change resync wall time",
            f"{again.wall:.2f} s",
            f"{base:.2f} s paging",
            f"{again.wall / base:.2f}x",
            "<= 1.5x of paging Stash + Plex",
        )
        line("no-change resync Plex writes", f"{writes}", "", "", "0")
        return {"wall": run.wall, "rate": rate}
    finally:
        lab.close()


def bench_scale(scenes: int = 20000, small: dict | None = None) -> None:
    small = small or bench_bulk(2000)
    print(f"\nScale: 'all' over {scenes} scenes, and a user's edit while it runs")
    lab = Lab(scenes)
    try:
        result: dict = {}
        worker = threading.Thread(target=lambda: result.setdefault("run", lab.task("all")))
        worker.start()
        time.sleep(15)
        sid = scenes - 5  # the last page: without priority it would wait for the whole backlog
        edited_at = time.perf_counter()
        hook = lab.hook(lab.stash.update_scene(sid, title="Edited while all runs"))
        assert hook.error is None
        rk = next(i["ratingKey"] for i in lab.plex.items() if i["files"][0].endswith(f"scene-{sid - 1:06d}.mp4"))
        while lab.plex.item(rk)["fields"]["title"] != "Edited while all runs" and worker.is_alive():
            time.sleep(0.05)
        latency = time.perf_counter() - edited_at
        worker.join()
        run = result["run"]
        assert run.error is None, run.stderr[-2000:]
        line("edit reaches Plex during bulk", f"{latency:.2f} s", f"{run.wall:.0f} s backlog", "", "a few seconds")
        line(
            "wall time",
            f"{run.wall:.0f} s",
            f"{small['wall']:.1f} s @2k",
            f"{run.wall / small['wall']:.1f}x",
            "<= 12x of 2,000",
        )
        line("task peak RSS", f"{(run.peak_rss_kb or 0) / 1024:.0f} MB", "", "", "< 150 MB")
    finally:
        lab.close()


def bench_queue(jobs: int = 10000) -> None:
    print(f"\nQueue cost: {jobs} jobs enqueued and drained through the queue adapter (no Plex)")
    from sync_queue.job import BULK, Job
    from sync_queue.queue import JobQueue

    with tempfile.TemporaryDirectory() as tmp:
        queue = JobQueue(Path(tmp), consumer=True)
        started = time.perf_counter()
        queue.put_many(Job(scene_id=i + 1, priority=BULK) for i in range(jobs))
        put_s = time.perf_counter() - started
        started = time.perf_counter()
        while batch := queue.take(50):
            for item in batch:
                queue.ack(item)
        drain_s = time.perf_counter() - started
        queue.close()
    per_job = (put_s + drain_s) / jobs
    line(
        "queue overhead per job (put+take+ack)",
        f"{per_job * 1e6:.0f} µs",
        f"{LATENCY_S * 1e3:.0f} ms network",
        f"{per_job / LATENCY_S:.3f}x",
        "well below the network cost",
    )
    line("enqueue rate", f"{jobs / put_s:.0f}/s", "", "")
    line("take+ack rate", f"{jobs / drain_s:.0f}/s", "", "")


def _queue_counts(lab: Lab) -> dict:
    from sync_queue.queue import JobQueue

    queue = JobQueue(Path(lab.env["STASH2PLEX_DATA_DIR"]) / "queue")
    try:
        return queue.counts()
    finally:
        queue.close()


def bench_entity(scenes: int = 5000, runs: int = 9) -> None:
    """A tag on every scene renamed: the hook's cost, the queue's size, and the fan-out against 'all'."""
    print(f"\nEntity change: a tag carried by all {scenes} scenes renamed, Plex latency {LATENCY_S * 1000:.0f} ms")
    lab = Lab(scenes, common_tag="Everywhere")
    try:
        assert lab.task("all").error is None
        tag = lab.stash.entity_id("tag", "Everywhere")
        with drainer_lock_held(lab.env["STASH2PLEX_DATA_DIR"]):  # a drainer "is running": hooks only record
            scene_walls = [lab.hook(lab.stash.update_scene(1 + i, title=f"edit {i}")).wall for i in range(runs)]
            entity_walls = []
            for i in range(runs):
                run = lab.hook(lab.stash.rename_entity("tag", tag, f"Everywhere {i}"))
                assert run.error is None, run.stderr
                entity_walls.append(run.wall)
            counts = _queue_counts(lab)
        scene_med, entity_med = statistics.median(scene_walls), statistics.median(entity_walls)
        line(
            "entity hook wall time (median)",
            f"{entity_med * 1000:.0f} ms",
            f"{scene_med * 1000:.0f} ms scene hook",
            f"{entity_med / scene_med:.2f}x",
            "<= 1.1x of a scene hook",
        )
        line(f"queue rows after {runs} renames", f"{counts['entity_events']} event", f"{scenes} scenes", "", "1 row")
        peak = {"bulk": 0}
        done = threading.Event()

        def watch() -> None:
            while not done.wait(0.25):
                peak["bulk"] = max(peak["bulk"], _queue_counts(lab)["bulk"])

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        lab.plex.clear_requests()
        fan = lab.task("process_queue")
        done.set()
        watcher.join()
        assert fan.error is None, fan.stderr[-2000:]
        fan_edits = len(lab.plex.edit_requests())
        lab.stash.rename_entity("tag", tag, "Everywhere again")  # the same change, without the hook
        lab.plex.clear_requests()
        full = lab.task("all")
        line(
            "fan-out of one rename, drained",
            f"{fan.wall:.1f} s",
            f"{full.wall:.1f} s 'all'",
            f"{fan.wall / full.wall:.2f}x",
            "about 'all' doing the same writes",
        )
        line("edits (fan-out / 'all')", f"{fan_edits} / {len(lab.plex.edit_requests())}", "", "", f"{scenes} each")
        line("bulk jobs queued at once (peak)", f"{peak['bulk']}", f"{scenes} scenes", "", "<= one batch or two")
    finally:
        lab.close()


def bench_reconcile(scenes: int = 2000) -> None:
    print(f"\nReconcile: {scenes} unchanged scenes checked against Plex, latency {LATENCY_S * 1000:.0f} ms")
    lab = Lab(scenes)
    try:
        assert lab.task("all").error is None
        base = baseline_paging(lab)
        lab.plex.clear_requests()
        run = lab.task("reconcile")
        assert run.error is None, run.stderr[-2000:]
        reads = len([r for r in lab.plex.requests if r["path"].startswith("/library/metadata/")])
        writes = len(lab.plex.edit_requests()) + len(lab.plex.upload_requests())
        line(
            "reconcile wall time",
            f"{run.wall:.2f} s",
            f"{base:.2f} s paging",
            f"{run.wall / base:.2f}x",
            "listing + Stash paging + 1 read per 50",
        )
        line("Plex detail reads / writes", f"{reads} / {writes}", f"{scenes / 50:.0f} reads", "", "~1 per 50, 0 writes")
    finally:
        lab.close()


def main(argv: list[str]) -> int:
    sections = argv or ["hook", "queue", "bulk", "scale"]
    print(f"Stash2Plex benchmarks on {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} cores")
    line("figure", "value", "baseline", "ratio", "target")
    small = None
    for section in sections:
        if section == "hook":
            bench_hook()
        elif section == "queue":
            bench_queue()
        elif section in ("bulk", "resync"):
            small = bench_bulk()
        elif section == "scale":
            bench_scale(small=small)
        elif section == "entity":
            bench_entity()
        elif section == "reconcile":
            bench_reconcile()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""A realistic Plex: a server of a few worker threads, whose latency grows with its load.

The Plex emulator gets a ``LoadModel`` (4 workers, 40 ms a write, 10 ms a read; requests
beyond 4 wait their turn). Three measurements, each against a baseline of the same run:

* ``all`` over N scenes with the plugin's defaults (no tuning) against the best
  fixed-concurrency floor: the edit+poster loop of bench.py swept over concurrencies
  1-16 on a slice of the scenes, then run over all N at the best one, before and after.
* A viewer (someone browsing Plex: a GET of an item every 200 ms) during each sweep point
  and during ``all``: its p95 against its time on an idle Plex.
* Plex's service time changed mid-run (40 -> 200 -> 40 ms a write, reads alike): the
  plugin's concurrency limit over time, read from its debug log as it runs, beside what
  Plex sees (requests waiting or served, scenes/s).
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import threading
import time

from tests.bench.bench import FLOOR, REPO, Lab, line, python, ratio
from tests.emulators.plex_emulator import LoadModel
from tests.runner import build_argv, task_document

SWEEP = (1, 2, 3, 4, 6, 8, 12, 16)
VIEW_EVERY_S = 0.2
LIMIT_LINE = re.compile(r"Plex concurrency (\d+) -> (\d+)")


class CountedLoad(LoadModel):
    """The load model of this section, whose service time can change mid-run."""

    def __init__(self) -> None:
        super().__init__(workers=4, write_s=0.040, read_s=0.010)

    def slow_down(self, factor: float) -> None:
        self.write_s, self.read_s = 0.040 * factor, 0.010 * factor


VIEWER = r"""
import http.client, json, sys, threading, time
host, port, path, token, every = json.loads(sys.stdin.readline())
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
conn, times, due = http.client.HTTPConnection(host, port, timeout=30), [], time.perf_counter()
while not stop.is_set():
    started = time.perf_counter()
    conn.request("GET", path, headers={"X-Plex-Token": token, "Accept": "application/xml"})
    reply = conn.getresponse(); reply.read()
    assert reply.status == 200, reply.status
    times.append(time.perf_counter() - started)
    due += every
    stop.wait(max(0.0, due - time.perf_counter()))
print(json.dumps(times))
"""


class Viewer:
    """Someone browsing Plex: a GET of one item every ``VIEW_EVERY_S``, each timed, from a
    process of its own (a client's time is not the benchmark's interpreter lock)."""

    def __init__(self, lab: Lab) -> None:
        host, port = lab.plex.url.removeprefix("http://").split(":")
        path = f"/library/metadata/{lab.rating_keys[0]}"
        self._setup = json.dumps([host, int(port), path, lab.plex.token, VIEW_EVERY_S]) + "\n"
        self.times: list[float] = []
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> Viewer:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", VIEWER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self._proc.stdin
        self._proc.stdin.write(self._setup)
        self._proc.stdin.flush()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._proc
        out, _ = self._proc.communicate("")
        self.times = json.loads(out)[1:]  # the first pays the connection and the interpreter's warm-up

    def p95(self) -> float:
        return p95(self.times)


def p95(values: list[float]) -> float:
    return sorted(values)[int(0.95 * (len(values) - 1))] if values else 0.0


def idle_view(lab: Lab, seconds: float = 8.0) -> list[float]:
    with Viewer(lab) as viewer:
        time.sleep(seconds)
    return viewer.times


def floor(lab: Lab, concurrency: int, scenes: int):
    """bench.py's edit+poster loop over the first ``scenes`` items at ``concurrency``."""
    image = lab.stash.screenshot_bytes(1).decode("latin-1")
    keys = lab.rating_keys[:scenes]
    payload = json.dumps([lab.plex.url, lab.plex.token, keys, image, concurrency, None]).encode()
    run = python(FLOOR, payload)
    assert run.returncode == 0, run.stderr[-2000:]
    return run


def sweep(lab: Lab, scenes: int) -> dict[int, tuple[float, float]]:
    """{concurrency: (seconds per scene, the viewer's p95)} for each point of ``SWEEP``."""
    points = {}
    for concurrency in SWEEP:
        with Viewer(lab) as viewer:
            run = floor(lab, concurrency, scenes)
        points[concurrency] = (run.wall / scenes, viewer.p95())
        line(
            f"  floor at concurrency {concurrency:>2}", f"{run.wall:.1f} s", f"viewer p95 {viewer.p95() * 1000:.0f} ms"
        )
    return points


class StreamedTask:
    """The ``all`` task run as Stash runs it, its stderr read line by line as it comes."""

    def __init__(self, lab: Lab, mode: str = "all") -> None:
        document = json.dumps(task_document(lab.connection, mode)).encode()
        self.started, self.epoch = time.perf_counter(), time.time()
        self.proc = subprocess.Popen(
            build_argv(REPO), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=lab.env
        )
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(document)
        self.proc.stdin.close()
        self.lines: list[tuple[float, str]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr
        for raw in self.proc.stderr:
            self.lines.append((time.perf_counter() - self.started, raw.decode("utf-8", "replace")))

    def wait(self) -> float:
        reply = self.proc.stdout.read() if self.proc.stdout else b""
        self.proc.wait()
        wall = time.perf_counter() - self.started
        self._reader.join()
        assert self.proc.returncode == 0 and b'"error": null' in reply, self.stderr()[-2000:]
        return wall

    def stderr(self) -> str:
        return "".join(text for _, text in self.lines)

    def limits(self) -> list[tuple[float, int]]:
        return [(t, int(m.group(2))) for t, text in self.lines if (m := LIMIT_LINE.search(text))]


def bench_realistic(scenes: int = 2000, sweep_scenes: int = 500) -> None:
    print(
        f"\nRealistic Plex: 4 workers, 40 ms a write, 10 ms a read; 'all' over {scenes} scenes with the defaults, "
        f"against the best fixed concurrency (swept over {sweep_scenes} scenes), a viewer every 200 ms"
    )
    lab = Lab(scenes, latency=0.0)
    load = lab.plex.load = CountedLoad()
    try:
        idle_times = idle_view(lab)
        idle = statistics.median(idle_times)
        line("viewer on an idle Plex (median)", f"{idle * 1000:.1f} ms", f"p95 {p95(idle_times) * 1000:.1f} ms", "")
        points = sweep(lab, sweep_scenes)
        best = min(points, key=lambda c: points[c][0])
        before = floor(lab, best, scenes)
        lab.plex.clear_requests()
        with Viewer(lab) as viewer:
            task = StreamedTask(lab)
            wall = task.wait()
        first_edit = min(r["time"] for r in lab.plex.edit_requests()) - task.epoch
        lab.next_round(1)
        session = lab.plex.start_playback(lab.rating_keys[0])  # someone plays a video the whole run
        with Viewer(lab) as watched:
            watched_wall = StreamedTask(lab).wait()
        lab.plex.stop_playback(session, 0)
        after = floor(lab, best, scenes)
        base = (before.wall + after.wall) / 2
        _report_all(wall, base, best, scenes, points, viewer.p95(), idle, task)
        line("  first edit after the task started", f"{first_edit:.2f} s", "", "", "(start-up: imports, paging)")
        _report_watched(watched_wall, base, best, watched.p95(), idle)
        lab.next_round(2)
        _session_mid_run(lab)
        lab.next_round(3)
        _changing_service_time(lab, load)
    finally:
        lab.close()


def _report_all(wall, base, best, scenes, points, viewer_p95, idle, task) -> None:
    line("'all', nobody playing", f"{wall:.1f} s", f"{base:.1f} s floor at {best}", ratio(wall, base), "<= 1.15x")
    line("  scenes per second", f"{scenes / wall:.0f}/s", f"{scenes / base:.0f}/s floor", "")
    limits = [limit for _, limit in task.limits()]
    if limits:
        settled = statistics.median(limits[len(limits) // 2 :])
        line("  the plugin's limit (changes, settled at)", f"{len(limits)}, {settled:.0f}", f"floor's best {best}", "")
    line(
        "  viewer's GETs during 'all' (p95)",
        f"{viewer_p95 * 1000:.1f} ms",
        f"{idle * 1000:.1f} ms idle",
        ratio(viewer_p95, idle),
        "(no session: throughput first)",
    )
    line(
        "  viewer during the best floor (p95)",
        f"{points[best][1] * 1000:.1f} ms",
        f"{idle * 1000:.1f} ms idle",
        ratio(points[best][1], idle),
    )
    fits = [c for c in SWEEP if points[c][1] <= 2 * idle]
    if fits:
        c = max(fits, key=lambda c: -points[c][0])
        line(
            "  fastest floor with the viewer <= 2x",
            f"concurrency {c}",
            f"best {best}",
            ratio(points[c][0], points[best][0]),
            "(its time per scene vs the best)",
        )


def _report_watched(wall, base, best, viewer_p95, idle) -> None:
    line(
        "'all', a session playing the whole run",
        f"{wall:.1f} s",
        f"{base:.1f} s floor at {best}",
        ratio(wall, base),
        "<= 1.5x",
    )
    line(
        "  viewer during it (p95)",
        f"{viewer_p95 * 1000:.1f} ms",
        f"{idle * 1000:.1f} ms idle",
        ratio(viewer_p95, idle),
        "<= 2.0x",
    )


def _session_mid_run(lab: Lab) -> None:
    """A session starts when a third of the posters are up: seconds until the plugin's
    debug line says it leaves Plex a worker (lines come at most a second apart: an upper bound)."""
    lab.plex.clear_requests()
    task = StreamedTask(lab)
    while len(lab.plex.upload_requests()) < lab.scenes // 3 and task.proc.poll() is None:
        time.sleep(0.02)
    started = time.perf_counter() - task.started
    session = lab.plex.start_playback(lab.rating_keys[0])
    task.wait()
    lab.plex.stop_playback(session, 0)
    seen = [t for t, text in task.lines if "someone is watching" in text and t >= started]
    took = f"{seen[0] - started:.2f} s" if seen else "never"
    line("  a session starting mid-run takes effect", took, f"session at {started:.1f} s", "", "<= 3 s")


def _changing_service_time(lab: Lab, load: CountedLoad, fast_s: float = 15.0, slow_s: float = 30.0) -> None:
    print(f"  Plex's service time 40 ms a write for {fast_s:.0f} s, 200 ms for {slow_s:.0f} s, 40 ms again", flush=True)
    lab.plex.clear_requests()
    samples: list[tuple[float, float, int]] = []  # (t, requests at Plex, uploads so far)
    task = StreamedTask(lab)
    phases = ((fast_s, 5.0), (fast_s + slow_s, 1.0))
    while task.proc.poll() is None:
        t = time.perf_counter() - task.started
        for at, factor in phases:
            if t >= at and load.write_s != 0.040 * factor:
                load.slow_down(factor)
        samples.append((t, load.at_plex, len(lab.plex.upload_requests())))
        time.sleep(0.1)
    wall = task.wait()
    load.slow_down(1.0)
    _timeline(task.limits(), samples, fast_s, slow_s, wall)


def _timeline(limits, samples, fast_s, slow_s, wall, every: float = 3.0) -> None:
    line("  t (s)  write ms  limit  at Plex  scenes/s", "", "", "")
    limit, n, uploads_before = 1, 0, 0
    t = 0.0
    while t < wall:
        end = t + every
        limit = next((lim for at, lim in reversed(limits) if at < end), limit)
        window = [s for s in samples if t <= s[0] < end]
        if window:
            at_plex = statistics.mean(s[1] for s in window)
            uploads = window[-1][2]
            rate = (uploads - uploads_before) / every
            uploads_before = uploads
            write = 200 if fast_s <= t < fast_s + slow_s else 40
            print(f"  {t:6.0f} {write:9d} {limit:6d} {at_plex:8.1f} {rate:9.1f}", flush=True)
        n += 1
        t = end

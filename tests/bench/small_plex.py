"""A small Plex: 1, 2 and 4 worker threads, 0.3 s a request; does the latency limit queue at it?

For each server, the edit+poster loop of bench.py at fixed concurrencies (workers to workers + 2,
on half the scenes: fewer play the loop's start and end) against ``all`` over every scene with the defaults. Figures, each beside
its baseline from the same run: ``all``'s scenes per second between its first and last write
against the best fixed concurrency's (measured the same way), the mean number of our requests
*waiting* for a Plex worker (the emulator's own count, time-weighted) against 1, and the
plugin's debug line (``about N waiting at Plex``) against the emulator's mean over the 2 s
before the line.
"""

from __future__ import annotations

import re
import statistics
import threading
import time

from tests.bench.bench import Lab, line, ratio
from tests.bench.realistic import StreamedTask, floor
from tests.emulators.plex_emulator import LoadModel

SERVICE_S = 0.3
WAITING_LINE = re.compile(r"about (\d+\.\d) waiting at Plex")


def _rate(lab: Lab, scenes: int) -> float:
    """Scenes per second between the first and the last write the emulator received."""
    times = sorted(r["time"] for r in lab.plex.edit_requests() + lab.plex.upload_requests())
    return scenes / (times[-1] - times[0]) if len(times) > 1 else 0.0


def _fixed(lab: Lab, workers: int, scenes: int) -> dict[int, float]:
    rates = {}
    for concurrency in range(workers, workers + 3):
        lab.plex.clear_requests()
        floor(lab, concurrency, scenes)
        rates[concurrency] = _rate(lab, scenes)
    return rates


class Sampler:
    """The emulator's count of requests waiting for a worker, every 50 ms."""

    def __init__(self, load: LoadModel) -> None:
        self.load, self.samples = load, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.samples.append((time.perf_counter(), self.load.waiting))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def mean(self, start: float, end: float) -> float | None:
        window = [n for t, n in self.samples if start <= t < end]
        return statistics.mean(window) if window else None


def _said_vs_seen(task: StreamedTask, sampler: Sampler) -> list[float]:
    """|the debug line's figure − the emulator's mean waiting over the 2 s before it|."""
    gaps = []
    for t, text in task.lines:
        match = WAITING_LINE.search(text)
        seen = sampler.mean(task.started + t - 2.0, task.started + t) if match else None
        if match and seen is not None:
            gaps.append(abs(float(match.group(1)) - seen))
    return gaps


def one_server(workers: int, scenes: int, sweep_scenes: int) -> None:
    lab = Lab(scenes, latency=0.0)
    load = lab.plex.load = LoadModel(workers=workers, write_s=SERVICE_S, read_s=SERVICE_S)
    try:
        rates = _fixed(lab, workers, sweep_scenes)
        best = max(rates, key=lambda c: rates[c])
        lab.plex.clear_requests()
        lab.plex.on_request = load.measure_from_first_write()
        sampler = Sampler(load)
        task = StreamedTask(lab)
        task.wait()
        sampler.stop()
        lab.plex.on_request = None
        waiting, rate = load.mean_waiting(), _rate(lab, scenes)
        gaps = _said_vs_seen(task, sampler)
        line(
            f"{workers} worker(s): 'all' scenes/s",
            f"{rate:.2f}/s",
            f"{rates[best]:.2f}/s fixed at {best}",
            ratio(rates[best], rate),
            "<= 1.15x",
        )
        line("  our requests waiting at Plex (mean)", f"{waiting:.2f}", f"peak {load.peak_waiting}", "", "<= 1")
        said = f"max {max(gaps):.2f}" if gaps else "no line"
        line("  debug line's 'waiting' vs the emulator's", said, f"{len(gaps)} line(s)", "", "within 1")
        fixed = " ".join(f"{c}: {r:.2f}/s" for c, r in rates.items())
        line("  fixed concurrency (scenes/s)", fixed, "", "")
    finally:
        lab.close()


def bench_small_plex(scenes: int = 80) -> None:
    print(
        f"\nA small Plex: 1, 2 and 4 workers, {SERVICE_S * 1000:.0f} ms a request; 'all' over {scenes} changed "
        f"scenes against fixed concurrencies workers to workers + 2 ({scenes // 2} scenes each)"
    )
    for workers in (1, 2, 4):
        one_server(workers, scenes, scenes // 2)

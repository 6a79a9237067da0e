"""Pacing against a Plex of few workers (the emulator's ``LoadModel``), end to end: ``all``
as Stash runs it, judged by Plex's own count of our requests there (waiting for a worker or
being served) as each request arrived: counts, not time-weighted means, which a loaded machine
stretches (docs/performance.md has the figures, from benchmarks).

A one-worker Plex gets no queue from us; a session that starts playing in the middle of
``all`` leaves Plex a worker once the plugin has seen it in ``/status/sessions`` (no listener runs).
"""

from __future__ import annotations

import math
import time

from tests.emulators.plex_emulator import LoadModel

# Uploads after the plugin's look that found the session, before the means start afresh: the look's
# answer is read at the next round's end (it comes on a thread of its own), the bound is set then,
# and the syncs in flight leave Plex.
SETTLE_UPLOADS = 20


def _scenes(plugin, count: int) -> None:
    for n in range(count):
        plugin.add_scene(n)


def test_a_one_worker_plex_gets_no_queue_from_all(plugin):
    _scenes(plugin, 30)
    load = plugin.plex.load = LoadModel(workers=1, write_s=0.04, read_s=0.01)
    plugin.plex.on_request = load.measure_from_first_write()
    run = plugin.task("all")
    plugin.plex.on_request = None
    assert run.error is None and run.output["synced"] == 30, run.stderr[-3000:]
    found = [ahead for method, ahead in load.arrivals if method != "GET"]  # per write: ours at Plex
    # The limit settles at the workers + 1 (one of ours served, the next waiting); the slow start
    # may overshoot to 4 for a round before it. Over the run's second half, a write that finds
    # two of ours waiting already is rare: with the limit grown to plex_concurrency (or held by
    # thresholds of 2 and 4 waiting) most writes do.
    later = found[len(found) // 2 :]
    queued = sum(ahead >= 3 for ahead in later)
    assert len(later) >= 20 and queued <= len(later) // 4, (queued, len(later), found)


def test_a_session_that_starts_playing_mid_run_leaves_plex_a_worker(plugin):
    scenes = 130
    _scenes(plugin, scenes)
    load = plugin.plex.load = LoadModel(workers=2, write_s=0.04, read_s=0.01)
    marks: dict[str, float] = {}
    uploads = [0]
    before: list[int] = []  # per request from the 8th upload to the session: ours at Plex

    def script(record: dict) -> None:
        if record["path"] == "/status/sessions" and record["time"] >= marks.get("playing", math.inf):
            marks.setdefault("seen", uploads[0])  # a look begun after the session began: it found it
        if record["method"] != "POST":
            return
        uploads[0] += 1
        if uploads[0] == 8:
            load.measure()  # past the start: the limit has found Plex's workers
        if uploads[0] == 30:
            before.extend(ahead for _, ahead in load.arrivals)
            plugin.plex.start_playback(rk)
            marks["playing"] = time.time()
        if "measured" not in marks and uploads[0] >= marks.get("seen", math.inf) + SETTLE_UPLOADS:
            marks["measured"] = uploads[0]
            load.measure()  # the arrivals afresh, with the bound in force

    rk = plugin.plex.add_item(1, "/plex/media/watched.mp4")
    plugin.plex.on_request = script
    run = plugin.task("all")
    plugin.plex.on_request = None
    assert run.error is None and run.output["synced"] == scenes, run.stderr[-3000:]
    assert "measured" in marks, f"the run ended too soon after the plugin saw the session: {marks}"
    after = [ahead for _, ahead in load.arrivals]
    # two workers: before, three of ours at Plex keep both busy (a request often finds two there);
    # with someone watching, one of ours at most, so none ever finds another of ours at Plex
    assert sum(ahead >= 2 for ahead in before) >= len(before) // 4, (before, marks)
    assert len(after) >= 10 and max(after) == 0, (after, marks)

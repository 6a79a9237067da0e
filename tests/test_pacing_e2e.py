"""Pacing against a Plex of few workers (the emulator's ``LoadModel``), end to end: ``all``
as Stash runs it, Plex's own count of the requests waiting for a worker or being served.

A one-worker Plex gets no queue from us; a session that starts playing in the middle of
``all`` leaves Plex a worker within 3 s (read from ``/status/sessions``: no listener runs).
"""

from __future__ import annotations

import threading

from tests.emulators.plex_emulator import LoadModel

EFFECT_S = 3.0  # a session that starts mid-run takes effect within this


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
    # about one of ours waits while the other is served, never the queue of 3-4 of a limit grown to 6
    assert load.mean_waiting() <= 1.0, (load.mean_waiting(), load.peak_waiting)


def test_a_session_that_starts_playing_mid_run_leaves_plex_a_worker(plugin):
    scenes = 130
    _scenes(plugin, scenes)
    load = plugin.plex.load = LoadModel(workers=2, write_s=0.04, read_s=0.01)
    marks: dict[str, float] = {}
    uploads = [0]
    settled = threading.Timer(EFFECT_S, load.measure)  # the means afresh, 3 s after the session began

    def script(record: dict) -> None:
        if record["method"] != "POST":
            return
        uploads[0] += 1
        if uploads[0] == 8:
            load.measure()  # past the start: the limit has found Plex's workers
        if uploads[0] == 30:
            marks["before"] = load.mean_at_plex()
            plugin.plex.start_playback(rk)
            settled.start()

    rk = plugin.plex.add_item(1, "/plex/media/watched.mp4")
    plugin.plex.on_request = script
    run = plugin.task("all")
    plugin.plex.on_request = None
    assert run.error is None and run.output["synced"] == scenes, run.stderr[-3000:]
    assert settled.finished.is_set(), "the run ended within 3 s of the session's start"
    before, after = marks["before"], load.mean_at_plex()
    # two workers: three of ours at Plex keep both busy; with someone watching, one of ours at most
    assert before >= 2.0, (before, after)
    assert after <= 1.25, (before, after)

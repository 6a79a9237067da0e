"""The worker's pipeline (worker/pipeline.py) and the progress a user watches (worker/progress.py).

Pure parts with exact values; end to end, ``all`` against the emulators: the task bar
moves with the scenes (not page by page), and Plex never has more writes in flight
than ``plex_concurrency`` allows while the pipeline keeps it busy.
"""

from __future__ import annotations

from core.errors import PlexNotFound, PlexUnavailable, StashUnavailable
from worker.pipeline import Pacer
from worker.progress import ProgressReporter, rate_text


def test_pacer_halves_once_per_burst_and_grows_back_after_clean_work():
    pacer = Pacer(6, grow_after=3)
    trouble = PlexUnavailable("Plex did not answer")
    assert [pacer.outcome(trouble) for _ in range(4)] == [3, 3, 3, 3]  # one burst: one cut
    assert pacer.outcome(trouble) == 1  # more than a round of 3 later: cut again
    assert [pacer.outcome(None) for _ in range(7)] == [1, 1, 2, 2, 2, 3, 3]
    # A file Plex has not scanned yet and Stash trouble say nothing about Plex's load: clean.
    assert pacer.outcome(PlexNotFound("no item")) == 3
    assert pacer.outcome(StashUnavailable("Stash down")) == 4


def test_rate_text_counts_rate_and_time_left():
    assert rate_text(900, 2000, 12.0, "scenes") == "900/2,000 scenes, 75.0/s, ~15s left"
    assert rate_text(0, 2000, 0.0, "scenes") == "0/2,000 scenes, 0.0/s"
    assert rate_text(2000, 2000, 20.0, "scenes") == "2,000/2,000 scenes, 100.0/s"


class _Log:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def progress(self, fraction, detail=""):
        self.calls.append(("bar", fraction, detail))

    def info(self, message):
        self.calls.append(("info", message))


def test_progress_reports_the_bar_at_most_every_quarter_second_and_a_line_every_five():
    now = [0.0]
    log = _Log()
    reporter = ProgressReporter(log, 100, "scenes", clock=lambda: now[0])
    for t, done in ((0.1, 1), (0.2, 2), (0.4, 3), (0.5, 4), (5.0, 50), (10.0, 100)):
        now[0] = t
        reporter.update(done)
    reporter.update(100, final=True)
    assert log.calls == [
        ("bar", 0.01, "1/100 scenes, 10.0/s, ~10s left"),
        ("bar", 0.03, "3/100 scenes, 7.5/s, ~13s left"),
        ("bar", 0.5, "50/100 scenes, 10.0/s, ~5s left"),
        ("info", "50/100 scenes, 10.0/s, ~5s left"),
        ("bar", 1.0, "100/100 scenes, 10.0/s"),
        ("info", "100/100 scenes, 10.0/s"),
        ("bar", 1.0, "100/100 scenes, 10.0/s"),
    ]


def test_all_moves_the_task_bar_scene_by_scene_and_respects_the_concurrency(plugin):
    plugin.configure(plex_concurrency=2)
    for n in range(24):
        plugin.add_scene(n)
    plugin.plex.latency = 0.05  # about 2.5 s of work: one page, which used to be one jump to 100%
    plugin.plex.clear_requests()
    run = plugin.task("all")
    assert run.error is None and run.output["synced"] == 24, run.stderr[-3000:]
    steps = [p for p in run.progress if p < 1.0]
    assert len(set(steps)) >= 4 and steps == sorted(steps), run.progress
    assert run.progress[-1] == 1.0
    writes = plugin.plex.edit_requests() + plugin.plex.upload_requests()
    starts = sorted(r["time"] for r in writes)
    # every request waits 50 ms in the emulator before it is answered: overlapping windows
    in_flight = max(sum(1 for s in starts if t <= s < t + 0.05) for t in starts)
    assert in_flight <= 2


def test_all_queues_a_slice_at_a_time_and_starts_with_a_small_page(plugin):
    """The queue never holds a whole page of the task's jobs waiting to be taken: a slice
    is queued when fewer than LOW_WATER wait (the thread that queues them is the one
    that feeds the writers)."""
    import sqlite3

    from tasks.sync_all import FIRST_PAGE_SIZE, LOW_WATER, PAGE_SIZE, SLICE

    plugin.configure(skip_fields="poster")  # one Plex request per scene is enough here
    scenes = FIRST_PAGE_SIZE + 300  # a second page larger than LOW_WATER + SLICE
    for n in range(scenes):
        plugin.add_scene(n)
    waiting: list[int] = []

    def count_waiting(record: dict) -> None:
        if record["method"] == "PUT":
            db = sqlite3.connect(f"file:{plugin.data_dir / 'queue' / 'data.db'}?mode=ro", uri=True)
            try:
                waiting.append(db.execute("SELECT COUNT(*) FROM ack_queue_bulk WHERE status < 2").fetchone()[0])
            finally:
                db.close()

    plugin.plex.on_request = count_waiting
    plugin.stash.requests.clear()
    run = plugin.task("all")
    plugin.plex.on_request = None
    assert run.error is None and run.output["synced"] == scenes, run.stderr[-3000:]
    assert len(waiting) == scenes
    assert max(waiting) <= LOW_WATER + SLICE < scenes - FIRST_PAGE_SIZE, max(waiting)
    pages = plugin.stash.graphql_requests("S2PScenesAfter")
    assert [r["variables"]["filter"]["per_page"] for r in pages] == [FIRST_PAGE_SIZE, PAGE_SIZE]

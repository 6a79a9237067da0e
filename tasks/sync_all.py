"""``all`` and ``recent``: page through Stash, queue what may differ, drain in the foreground.

A reader thread fetches and sorts the next page (by ``id > last id seen``: no scene slips
past) while the worker writes, the page's scenes handed over as prefetched data; unchanged
scenes are only counted, the changed queued a slice at a time (:meth:`PageFeed.refill`), at
most four pages in memory. ``recent`` starts from the previous run's newest ``updated_at``
(``stash/timestamps.py``). A kill loses nothing: queued jobs stay for ``process_queue``.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from queue import Full, Queue
from typing import Any

from stash.client import PAGE_SIZE
from sync_queue.job import BULK, Job
from sync_queue.ledger import ALL_CHECKED_AT
from sync_queue.queue import JobQueue
from sync_queue.stats import Delta
from tasks.context import Context, recent_start
from worker.pipeline import work
from worker.progress import ProgressReporter, finish, sum_done
from worker.verdict import sort_scenes
from worker.worker import READ_AT

FIRST_PAGE_SIZE = 100  # Stash answers a small page sooner: the first writes start while the next page is read
SLICE = 100  # jobs queued at once (a put is a SQLite transaction each)
LOW_WATER = 150  # queued jobs of ours not taken yet: below this the next slice is queued


_END = object()


class PageFeed:
    """Stash's scenes, page by page, read one page ahead in a thread and queued a slice at a time.

    Only the caller's thread touches the queue: the reader thread only fetches pages
    and works out which scenes may differ (``sort_scenes``).
    """

    def __init__(self, app: Context, queue: JobQueue, updated_after: str | None) -> None:
        self.app, self.queue = app, queue
        self.updated_after = updated_after
        self.prefetched: dict[int, dict] = {}  # scene data of queued bulk jobs, until taken
        self._unqueued: list[tuple[int, dict | None]] = []  # the current page's changed scenes not queued yet
        self._ids: set[int] = set()  # every scene a page showed (``all``: the ledger's others are gone)
        self.total = self.seen = self.skipped = self.queued = self.out_of_scope = 0
        self._done = False
        self._pages: Queue = Queue(maxsize=1)
        self._stop = threading.Event()
        self.syncer, self.ledger = app.syncer(), app.ledger()  # built here: the reader thread only uses them
        self._reader = threading.Thread(target=self._read, name="stash-pages", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        pages = self.app.stash().scene_pages(PAGE_SIZE, self.updated_after, first=FIRST_PAGE_SIZE)
        # The next page is asked for while this one is sorted (hashing is CPU here, the
        # page is Stash's work): one page in flight, one being sorted, one handed over.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="stash-page") as fetcher:
            try:
                asked = time.time()  # a page's age, against entity events (worker.READ_AT)
                pending = fetcher.submit(next, pages, None)
                while not self._stop.is_set():
                    page, read_at = pending.result(), asked
                    if page is None:
                        break
                    asked = time.time()
                    pending = fetcher.submit(next, pages, None)
                    total, scenes = page
                    for scene in scenes:
                        scene[READ_AT] = read_at
                    self._put((total, scenes, *sort_scenes(self.syncer, self.ledger, scenes, note_skipped=True)))
            except BaseException as exc:  # handed to the caller's thread, which raises it
                self._put(exc)
                return
        self._put(_END)

    def _put(self, item: object) -> None:
        while not self._stop.is_set():
            try:
                self._pages.put(item, timeout=0.2)
                return
            except Full:
                continue

    def refill(self, force: bool) -> bool:
        """Queue the next slice of changed scenes when fewer than ``LOW_WATER`` of ours are
        still waiting (``force``: the queue ran dry); False when every page is done.

        A slice of ``SLICE`` jobs at a time: the thread that queues them is the one that
        feeds the writers, and a whole page at once (500 transactions) kept it from them
        longer than their stock of work lasts. A task killed before a page is all queued
        leaves its other scenes to the next ``all`` or ``recent`` (``last_sync_at`` moves
        only when a run completes); every job queued stays for ``process_queue``.
        """
        if not force and len(self.prefetched) >= LOW_WATER:
            return True
        if force:
            self.prefetched.clear()  # the queue ran dry: what is left here collapsed into other jobs
        if not self._unqueued and not self._next_page():
            return False
        now = time.time()
        chosen, self._unqueued = self._unqueued[:SLICE], self._unqueued[SLICE:]
        self.prefetched.update((sid, raw) for sid, raw in chosen if raw is not None)
        self.queued += self.queue.put_many(Job(scene_id=sid, priority=BULK, enqueued_at=now) for sid, _ in chosen)
        return True

    def _next_page(self) -> bool:
        """The next page from the reader thread, counted; False when every page is done."""
        if self._done:
            return False
        item = self._pages.get()
        if item is _END:
            self._done = True
            self._unqueued = [(sid, None) for sid in self._gone()]
            return bool(self._unqueued)
        if isinstance(item, BaseException):
            self._done = True
            raise item
        self.total, scenes, changed, out_of_scope = item
        self.out_of_scope += out_of_scope
        wanted = set(changed)
        self._unqueued = [(int(s["id"]), s) for s in scenes if int(s["id"]) in wanted]
        self._ids.update(int(s["id"]) for s in scenes)
        self.seen += len(scenes)
        self.skipped += len(scenes) - len(changed)
        unchanged = Delta()  # scenes not queued because nothing changed: counted like the worker's skips
        unchanged.unchanged(time.time(), len(scenes) - len(changed) - out_of_scope)
        self.app.stats().record(unchanged)
        return True

    def _gone(self) -> list[int]:
        """After the last page of ``all``: the scenes with a record that no page showed.
        Each is queued like a deletion's hook: its job asks Stash for the scene again and,
        only when Stash no longer has it, releases the items written for it that no scene
        holds now (worker/release.py ``release_gone``)."""
        if self.updated_after is not None:
            return []  # ``recent`` sees only the changed scenes
        return sorted(self.app.ledger().scene_ids() - self._ids)

    def close(self) -> None:
        self._stop.set()
        self._reader.join(timeout=5)


def _list_plex_meanwhile(app: Context) -> None:
    """Start Plex's library listing (needed before the first write: a few requests per
    500 files) in a thread, so that it runs while Stash's first page is read and queued."""
    index = app.syncer().index  # the app's parts are built in this thread, not in two at once
    threading.Thread(target=index.warm, name="plex-index", daemon=True).start()


def run(app: Context) -> dict[str, Any]:
    """``all`` or ``recent`` (``app.options["mode"]``)."""
    label = app.options["mode"]
    app.settings()
    _list_plex_meanwhile(app)
    marker = app.stash().newest_updated_at()  # read first: whatever changes during the run is newer
    updated_after = None
    if label == "recent":
        updated_after = recent_start(app, marker)
    with app.consumer() as queue:
        worker = app.worker(queue, probe_now=True)
        reporter = ProgressReporter(app.log, 0, "scenes")
        feed = PageFeed(app, queue, updated_after)

        def refill(force: bool) -> bool:
            more = feed.refill(force)
            reporter.update(feed.skipped + sum_done(worker.run_counts()), feed.total)  # unchanged pages move it too
            return more

        try:
            work(
                worker,
                prefetched=feed.prefetched,
                refill=refill,
                progress=lambda stats: reporter.update(feed.skipped + sum_done(stats), feed.total),
            )
        finally:
            feed.close()
        reporter.update(feed.skipped + sum_done(worker.stats), feed.total, final=True)
        left = queue.parked_count()
    scope = f", {feed.out_of_scope} out of scope (left as they are in Plex)" if feed.out_of_scope else ""
    app.log.info(f"{label}: {feed.seen} scenes checked, {feed.queued} queued{scope}")
    result = finish(worker, left, app.ensure_drainer)
    if worker.abort_error is None and marker:
        app.ledger().set_meta("last_sync_at", marker)
    if worker.abort_error is None and label == "all" and feed.seen >= feed.total:
        app.ledger().set_meta(ALL_CHECKED_AT, time.time())  # the page's inbox and counts are true from now
    return {"checked": feed.seen, "queued": feed.queued, "out_of_scope": feed.out_of_scope, **result}

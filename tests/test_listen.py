"""The listener's supervision and the waiting jobs' registry (pure parts: fake listener
threads, waits recorded instead of slept; the real websocket is in test_listener_e2e)."""

from __future__ import annotations

import io
import random
import threading

from core.backoff import probe_wait
from core.errors import PlexUnavailable
from core.log import StashLog
from plex.notifications import ItemProcessed
from validation.pathmap import PathMap
from worker.breaker import BreakerState, State
from worker.listen import STABLE_S, PlexListener
from worker.waits import PlexWaits


class FakeConnection:
    """A connection's thread that opens (or not) and ends when told."""

    def __init__(self, opens: bool, handler) -> None:
        self.ended = threading.Event()
        self.stopped = False
        if opens:
            handler.on_open()

    def start(self) -> None:
        pass

    def is_alive(self) -> bool:
        return not self.ended.is_set()

    def join(self, timeout: float) -> None:
        self.ended.wait(timeout)

    def stop(self) -> None:
        self.stopped = True
        self.ended.set()


class Script:
    """Each start either raises, or opens a connection that ends ``STABLE_S`` later ("open") or
    at once ("brief"), or one that never opens ("silent"), or one that stays open; ``now`` is
    the listener's clock."""

    def __init__(self, steps: list[str]) -> None:
        self.steps, self.started, self.done = list(steps), 0, threading.Event()
        self.open: FakeConnection | None = None
        self.now = 0.0

    def __call__(self, handler):
        self.started += 1
        step = self.steps.pop(0) if self.steps else "stay"
        if step == "refused":
            raise PlexUnavailable("Plex refused the connection")
        conn = FakeConnection(step != "silent", handler)
        if step == "stay":
            self.open = conn
            self.done.set()
        else:
            self.now += STABLE_S if step == "open" else 0.0
            conn.ended.set()  # closed by Plex
        return conn


def run_until_stays(script: Script, breaker=None, log=None) -> tuple[PlexListener, list[float]]:
    waits: list[float] = []
    listener = PlexListener(
        script,
        lambda e: None,
        log or StashLog(io.StringIO()),
        breaker,
        sleep=waits.append,
        clock=lambda: script.now,
        rng=random.Random(7),
    )
    listener.ensure_started()
    assert script.done.wait(5)
    return listener, waits


def test_failed_or_short_connections_back_off_and_a_long_one_that_closed_reconnects_at_once():
    """A connection Plex closed as it opened counts as a failure (a reconnect loop otherwise);
    one open ``STABLE_S`` was healthy: at once, and the failures start again from none."""
    script = Script(["refused", "refused", "open", "brief", "brief", "silent", "stay"])
    out = io.StringIO()
    listener, waits = run_until_stays(script, log=StashLog(out))
    listener.close()
    jitter = random.Random(7)  # the waits: 2, 4, at once, 2, 4, 8 s, each drawn from its upper half
    assert waits == [probe_wait(n, rng=jitter) for n in (0, 1)] + [0.0] + [probe_wait(n, rng=jitter) for n in (0, 1, 2)]
    assert [round(w, 3) for w in waits] == [1.324, 2.302, 0.0, 1.651, 2.145, 6.144]
    assert script.started == 7 and script.open is not None and script.open.stopped
    assert listener.status.connects == 4 and listener.status.connected is False
    assert out.getvalue().count("Plex closed the notification websocket 0.0 s after opening it") == 2


class OpenBreaker:
    def __init__(self, opens_for: int) -> None:
        self.looks = 0
        self.opens_for = opens_for

    def state(self) -> BreakerState:
        self.looks += 1
        return BreakerState(State.OPEN if self.looks <= self.opens_for else State.CLOSED)

    def seconds_until_probe(self) -> float:
        return 7.5


def test_the_listener_waits_for_the_breakers_probe_while_plex_is_down():
    script = Script(["stay"])
    listener, waits = run_until_stays(script, OpenBreaker(opens_for=2))
    listener.close()
    assert waits == [7.5, 7.5] and script.started == 1


def test_events_are_handled_on_their_own_thread_in_order():
    seen: list = []
    done = threading.Event()

    def handle(event):
        if isinstance(event, ItemProcessed):
            seen.append((event, threading.current_thread().name))
        if len(seen) == 2:
            done.set()

    listener = PlexListener(Script([]), handle, StashLog(io.StringIO()), sleep=lambda s: None)
    listener.ensure_started()
    entries = [
        {"identifier": "com.plexapp.plugins.library", "itemID": str(k), "sectionID": "1", "state": 5} for k in (7, 8)
    ]
    listener.on_message({"type": "timeline", "size": 2, "TimelineEntry": entries})
    assert done.wait(5)
    listener.close()
    assert seen == [(ItemProcessed(7, 1), "s2p-plex-events"), (ItemProcessed(8, 1), "s2p-plex-events")]


def test_waits_wake_only_the_jobs_looking_for_that_path_and_forget_taken_ones():
    started = []
    waits = PlexWaits(PathMap(case_insensitive=True), on_wait=lambda: started.append(1))
    waits.wait_for(("interactive", 1), ["/plex/A.mp4", "/plex/a-copy.mp4"])
    waits.wait_for(("bulk", 2), ["/plex/b.mp4"])
    assert waits.wake(["/PLEX/a.mp4", "/plex/other.mp4"]) == 1
    assert waits.woken(("interactive", 1)) and not waits.woken(("bulk", 2))
    waits.forget(("interactive", 1))
    assert not waits.woken(("interactive", 1)) and len(waits) == 1 and started == [1, 1]
    assert waits.wake(["/plex/A.mp4"]) == 0


def test_a_flood_for_one_item_is_two_looks_and_news_of_anything_else_passes_it():
    from plex.notifications import LibraryScanned, PlaybackState
    from worker.coalesce import Coalescer

    c, handled = Coalescer(window=1.0), []
    for i in range(10_000):  # 0.5 s of frames for item 7, its updatedAt rising
        c.offer(ItemProcessed(7, 1, i), now=i * 0.00005)
        handled += c.take(i * 0.00005)
    c.offer(PlaybackState(7, "playing", "5"), now=0.5)
    c.offer(PlaybackState(7, "stopped", "5"), now=0.5)  # the session's report before it is moot
    c.offer(LibraryScanned(1), now=0.5)
    handled += c.take(0.5)
    assert handled == [ItemProcessed(7, 1, 0), PlaybackState(7, "stopped", "5"), LibraryScanned(1)]
    assert c.wait(0.5) == 0.5 and c.take(0.99) == []
    assert c.take(1.0) == [ItemProcessed(7, 1, 9_999)] and c.wait(1.0) is None
    c.offer(ItemProcessed(7, 1, 10_000), now=1.5)  # within a second of the last look: held
    assert c.take(1.5) == [] and c.take(2.0) == [ItemProcessed(7, 1, 10_000)]
    c.offer(ItemProcessed(7, 1, 10_001), now=3.5)  # a second after: at once
    assert c.take(3.5) == [ItemProcessed(7, 1, 10_001)]


def test_a_scan_of_many_items_is_one_look_at_the_section_a_second_for_a_handler_that_reads_sections():
    from plex.notifications import LibraryScanned
    from worker.coalesce import Coalescer

    c, handled = Coalescer(window=1.0, fold_at=3), []
    for n in range(10):  # ten new items of section 1 in 0.1 s, then one of section 2
        c.offer(ItemProcessed(100 + n, 1), now=n / 100)
        handled += c.take(n / 100)
    c.offer(ItemProcessed(200, 2), now=0.1)
    handled += c.take(0.1)
    assert handled == [*(ItemProcessed(rk, 1) for rk in (100, 101, 102)), LibraryScanned(1), ItemProcessed(200, 2)]
    assert c.take(1.0) == [] and c.take(1.03) == [LibraryScanned(1)]  # the rest: one more look
    c.offer(ItemProcessed(300, 1), now=1.5)  # a new second: items one by one again
    assert c.take(1.5) == [ItemProcessed(300, 1)]

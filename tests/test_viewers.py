"""Whether someone watches Plex (worker/viewers.py): from a listener's ``playing`` frames,
else from ``/status/sessions`` read through the real client against the Plex emulator."""

from __future__ import annotations

from functools import partial

from plex.client import PlexClient
from plex.notifications import ItemProcessed, PlaybackState, read_notifications
from plex.sessions import playing_sessions
from tests.emulators import plex_notify
from worker.viewers import POLL_COST, POLL_S, QUIET_S, Viewers


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _frame(session: str, state: str, rating_key: int = 7) -> list:
    container = plex_notify.playing(session, rating_key, 1000, state)["NotificationContainer"]
    return read_notifications(container)


def test_frames_say_who_plays_and_a_silent_session_ends():
    clock = Clock()
    viewers = Viewers(lambda: {}, listening=lambda: True, clock=clock)
    assert not viewers.watching()
    for event in _frame("3", "playing"):
        viewers.saw(event)
    viewers.saw(ItemProcessed(7, 1))  # not a playback: ignored
    assert viewers.watching()
    for event in _frame("4", "buffering") + _frame("3", "paused"):
        viewers.saw(event)
    assert viewers.watching()  # session 4 buffers: it plays
    for event in _frame("4", "stopped"):
        viewers.saw(event)
    assert not viewers.watching()  # 3 paused, 4 stopped
    viewers.saw(PlaybackState(9, "playing", "5"))
    clock.now += QUIET_S  # no word of it since: the client went away
    assert not viewers.watching()


def test_without_a_listener_a_bulk_run_reads_plexs_sessions_every_few_seconds(plex):
    clock = Clock()
    rk = plex.add_item(1, "/plex/media/a.mp4")
    client = PlexClient(plex.url, plex.token, "test-client")
    viewers = Viewers(partial(playing_sessions, client), clock=clock)

    def asked(poll: bool = True) -> bool:
        answer = viewers.watching(poll)
        viewers.looked()  # the look, in a thread of its own, finished
        return viewers.watching(False) if poll else answer

    assert not asked()
    key = plex.start_playback(rk)
    assert not asked(poll=False)  # an interactive job does not look
    clock.now += POLL_S - 0.1
    assert not asked()  # looked at less than POLL_S ago
    clock.now += 0.1
    assert asked()
    plex.report_playback(key, 0, "paused")
    clock.now += POLL_S
    assert not asked()
    plex.report_playback(key, 0)
    clock.now += POLL_S
    assert asked()
    plex.stop_playback(key, 0)
    clock.now += POLL_S
    assert not asked()
    sessions = [r for r in plex.requests if r["path"] == "/status/sessions"]
    assert len(sessions) == 5


def test_a_token_that_may_not_read_sessions_leaves_the_frames_only(plex):
    client = PlexClient(plex.url, plex.token, "test-client")
    plex.fail_401 = True
    viewers = Viewers(partial(playing_sessions, client))
    viewers.watching(poll=True)
    viewers.looked()
    plex.fail_401 = False
    plex.clear_requests()
    assert not viewers.watching(poll=True)
    assert plex.requests == []


def test_a_plex_slow_to_answer_is_looked_at_less_often():
    clock, looks = Clock(), []

    def slow_sessions() -> dict[str, str]:
        looks.append(clock.now)
        clock.now += 0.5  # Plex took half a second to answer
        return {"1": "playing"}

    viewers = Viewers(slow_sessions, clock=clock)
    viewers.watching(poll=True)
    viewers.looked()
    assert viewers.watching()
    clock.now += POLL_COST * 0.5 - 0.1
    viewers.watching(poll=True)
    viewers.looked()
    assert len(looks) == 1  # 20 × 0.5 s after the last answer: not yet
    clock.now += 0.1
    viewers.watching(poll=True)
    viewers.looked()
    assert looks == [100.0, 110.5]


def test_the_bound_keeps_our_requests_at_plex_and_its_wait_is_not_counted_as_plexs(plex):
    import threading
    import time

    from tests.emulators.plex_emulator import LoadModel

    rk = plex.add_item(1, "/plex/media/a.mp4")
    client = PlexClient(plex.url, plex.token, "test-client")
    assert client.version()  # connected before the load model counts
    load = plex.load = LoadModel(workers=4, write_s=0.05, read_s=0.8)
    client.requests.bound(1)  # someone watches a two-worker Plex
    waited: dict[str, float] = {}
    took: dict[str, float] = {}

    def read(name: str) -> None:
        client.requests.waited()
        started = time.perf_counter()
        client.item_state(rk)
        took[name] = time.perf_counter() - started
        waited[name] = client.requests.waited()

    first = threading.Thread(target=read, args=("first",))
    first.start()
    deadline = time.monotonic() + 10
    while load.at_plex == 0 and time.monotonic() < deadline:  # the first read is at Plex
        time.sleep(0.005)
    load.read_s = 0.01  # the second read is quick at Plex, after queueing at our bound for the first's
    second = threading.Thread(target=read, args=("second",))
    second.start()
    first.join()
    second.join()
    client.requests.bound(None)
    assert load.peak_busy == 1 and load.peak_waiting == 0  # the queue was ours, never Plex's
    assert waited["first"] >= 0.8, waited  # Plex's 0.8 s is counted
    # the second spent most of its time at our bound: not counted (ratios, not a timed bound)
    assert waited["second"] < took["second"] / 2, (waited, took)

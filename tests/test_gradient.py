"""The latency-driven concurrency limit (worker/gradient.py) and how Pacer combines it
with the error limit (worker/pipeline.py): pure, times passed in, exact values.

Sync times are powers of two (0.125, 0.25, 0.5 s) so every ratio is exact. A sync "alone"
ran with no other of ours in flight: only those tell Plex's unloaded time.
"""

from __future__ import annotations

import pytest

from core.errors import PlexUnavailable
from worker.gradient import GradientPolicy, LatencyLimit
from worker.pipeline import Pacer


def feed(limit: LatencyLimit, seconds: float, count: int, start: float = 0.0, kind: str = "uploaded") -> list[int]:
    return [limit.observe(seconds, kind, start + i * 0.01) for i in range(count)]


def probed(limit: LatencyLimit, seconds: float, kind: str = "uploaded", at: float = 0.0) -> int:
    """The first probe: a sync alone (one at a time till then)."""
    assert limit.limit == 1
    return limit.observe(seconds, kind, at, alone=True)


def test_starts_with_a_sync_alone_then_doubles_each_round_until_plex_queues():
    limit = LatencyLimit(6)
    assert (limit.limit, limit.probing) == (1, True)
    assert probed(limit, 0.125) == 2
    # rounds of 2, then 4: doubled while no queue shows, up to the maximum
    assert feed(limit, 0.125, 2 + 4 + 6, start=0.1) == [2, 4, 4, 4, 4, 6] + [6] * 5 + [6]
    assert limit.waiting == 0.0
    assert limit.workers == 6  # the maximum served without a queue


def test_a_one_worker_plex_holds_two_of_ours_with_about_one_waiting():
    limit = LatencyLimit(6)
    assert probed(limit, 0.5) == 2
    # two at once: each waits for the other's requests, twice as slow: 2 × (1 − 1/2) = 1 waited
    assert feed(limit, 1.0, 6, start=0.1) == [2] * 6
    assert (limit.waiting, limit.workers) == (1.0, 1)


def test_past_the_workers_it_shrinks_to_where_nothing_waits_then_grows_by_one():
    limit = LatencyLimit(6)
    probed(limit, 0.25)
    assert feed(limit, 0.25, 2, start=0.1) == [2, 4]
    # four at once on a two-worker Plex: twice as slow, 2 waited -> back to 2 (4 − 2)
    assert feed(limit, 0.5, 4, start=0.2) == [4, 4, 4, 2]
    assert (limit.waiting, limit.workers) == (2.0, 2)
    # at 2 nothing waits: one more (no doubling once Plex has queued), and 3 holds with 1 waiting
    assert feed(limit, 0.25, 2, start=0.3) == [2, 3]
    assert feed(limit, 0.375, 6, start=0.4) == [3] * 6
    assert limit.waiting == 1.0


def test_a_sync_beside_others_never_becomes_the_unloaded_time():
    limit = LatencyLimit(6, GradientPolicy(window_s=10.0))
    assert probed(limit, 0.25) == 2
    # nine seconds at 2 with twice the time: still read against the sync alone (1 waiting)
    assert feed(limit, 0.5, 4, start=9.0) == [2] * 4
    assert limit.waiting == 1.0


def test_without_a_sync_alone_for_the_window_it_probes_at_one_and_learns_plex_anew():
    limit = LatencyLimit(6, GradientPolicy(start=4, window_s=10.0))
    probed(limit, 0.125)
    feed(limit, 0.125, 4, start=0.1)  # a round at 4 with no queue: doubled, to the maximum
    assert limit.limit == 6
    # Plex four times slower for everyone; past the window no sync ran alone: one at a time
    assert feed(limit, 0.5, 3, start=10.5) == [1, 1, 1]  # the syncs draining count in no round
    assert limit.probing
    # a sync alone ends the probe; the fast syncs are older than the window: 0.5 s is the
    # unloaded time now, and nothing waits at 6
    assert limit.observe(0.5, "uploaded", 10.6, alone=True) == 6
    assert feed(limit, 0.5, 12, start=10.7) == [6] * 12
    assert limit.waiting == 0.0


def test_each_kind_of_sync_is_compared_with_its_own_unloaded_time():
    limit = LatencyLimit(6)
    limit.observe(0.25, "uploaded", 0.0, alone=True)  # edit and poster alone
    limit.observe(0.125, "unchanged", 0.0, alone=True)  # an edit alone: half the requests
    assert [limit.observe(s, k, 0.1) for s, k in [(0.25, "uploaded"), (0.125, "unchanged")] * 3] == [4, 4, 4, 4, 6, 6]


def test_while_someone_watches_it_leaves_plex_a_worker_and_takes_it_back_after():
    limit = LatencyLimit(6, GradientPolicy(start=5))
    probed(limit, 0.25)
    feed(limit, 0.3125, 5, start=0.1)  # 5 at once, 1.25 times as slow: 1 waited, Plex has 4 workers
    assert (limit.limit, limit.workers) == (5, 4)
    limit.viewing = True
    assert limit.limit == 3  # 4 workers − 1
    # at 3 nothing waits; the limit stays where the viewer keeps a worker
    assert feed(limit, 0.25, 9, start=0.2) == [3] * 9
    limit.viewing = False
    assert limit.limit == 4  # one round back at once, then the usual growth
    assert feed(limit, 0.25, 4, start=0.3) == [4, 4, 4, 5]


def test_someone_watching_before_the_workers_are_known_lets_it_find_them_first():
    limit = LatencyLimit(6)
    limit.viewing = True
    probed(limit, 0.25)
    assert feed(limit, 0.25, 2, start=0.1) == [2, 4]
    # four at once on a three-worker Plex (the viewer's requests beside ours): 4/3 as slow
    assert feed(limit, 1 / 3, 4, start=0.2) == [4, 4, 4, 2]
    assert limit.workers == 3  # 4 − 1 waiting; the viewer keeps one of them: 2


def test_bounds_and_bad_policies():
    limit = LatencyLimit(1)
    assert probed(limit, 0.125) == 1
    assert feed(limit, 1.0, 3, start=0.1) == [1, 1, 1]
    with pytest.raises(ValueError, match="maximum must be at least 1"):
        LatencyLimit(0)
    with pytest.raises(ValueError, match="alpha <= beta"):
        GradientPolicy(alpha=3, beta=2)


def test_pacer_takes_the_lower_of_the_error_and_latency_limits():
    pacer = Pacer(6, grow_after=3, latency=LatencyLimit(6, GradientPolicy(start=4)))
    assert pacer.limit == 1  # probing first
    assert pacer.outcome(None, 0.125, "uploaded", 0.0, alone=True) == 4
    assert [pacer.outcome(None, 0.125, "uploaded", 0.0) for _ in range(4)] == [4, 4, 4, 6]
    # a Plex error halves the limit in force (6 -> 3); its time says nothing about latency
    assert pacer.outcome(PlexUnavailable("Plex did not answer"), 30.0, "", 0.1) == 3
    assert pacer.cap == 3 and pacer.latency is not None and pacer.latency.limit == 6
    # clean syncs grow the cap back by one per 3 (grow_after), latency permitting
    assert [pacer.outcome(None, 0.125, "uploaded", 0.2) for _ in range(6)] == [3, 3, 4, 4, 4, 5]
    pacer.viewing(True)  # Plex served 6 without a queue: one of them left for the viewer
    assert pacer.limit == 5


def test_our_own_cpu_is_not_read_as_a_queue_at_plex():
    limit = LatencyLimit(6)
    probed(limit, 0.25)
    # syncs twice as long as alone, but Plex answered as fast as then: our CPU, not Plex's queue
    assert [limit.observe(0.5, "uploaded", 0.1, answered=0.25) for _ in range(2)] == [2, 4]
    assert limit.waiting == 0.0
    # of each 0.5 s, 0.125 s queued at Plex: 4 × 0.125 / 0.5 = 1 of ours waited: hold
    assert [limit.observe(0.5, "uploaded", 0.2, answered=0.375) for _ in range(4)] == [4] * 4
    assert limit.waiting == 1.0

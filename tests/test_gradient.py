"""The latency-driven concurrency limit (worker/gradient.py) and how Pacer combines it
with the error limit (worker/pipeline.py): pure, times passed in, exact values.

Sync times are powers of two (0.125, 0.25, 0.5 s) so every figure is exact. A sync "alone"
ran with no other of ours in flight: only those tell Plex's unloaded time. ``rounds`` plays
``n`` rounds of syncs in flight together, ending together every ``seconds``: Little's law then
sees that many at once.
"""

from __future__ import annotations

import pytest

from core.errors import PlexUnavailable
from worker.gradient import GradientPolicy, LatencyLimit
from worker.pipeline import Pacer


def probed(limit: LatencyLimit, seconds: float, at: float = 0.0, kind: str = "uploaded") -> int:
    """The first probe: a sync alone (one at a time till then)."""
    assert limit.limit == 1
    return limit.observe(seconds, kind, at, alone=True)


def rounds(
    limit: LatencyLimit, together: int, seconds: float, n: int, start: float, answered: float | None = None
) -> list[int]:
    return [
        limit.observe(seconds, "uploaded", start + (r + 1) * seconds, answered=answered)
        for r in range(n)
        for _ in range(together)
    ]


def test_starts_with_a_sync_alone_then_doubles_each_round_until_plex_queues():
    limit = LatencyLimit(6)
    assert (limit.limit, limit.probing) == (1, True)
    assert probed(limit, 0.125) == 2
    assert rounds(limit, 2, 0.125, 1, 0.0) == [2, 4]
    assert rounds(limit, 4, 0.125, 1, 0.125) == [4, 4, 4, 6]
    assert rounds(limit, 6, 0.125, 2, 0.25) == [6] * 12  # the maximum
    assert (limit.waiting, limit.workers) == (0.0, None)  # Plex never queued: its workers are not known


def test_a_one_worker_plex_holds_two_of_ours_with_one_waiting():
    limit = LatencyLimit(6)
    assert probed(limit, 0.5) == 2
    # two at once, each waits for the other's requests: 0.5 s of each 1 s queued, 1 waiting;
    # after three such rounds Plex is known to serve one of ours at a time
    assert rounds(limit, 2, 1.0, 2, 0.0) == [2] * 4
    assert (limit.waiting, limit.workers) == (1.0, None)
    assert rounds(limit, 2, 1.0, 1, 2.0) == [2] * 2
    assert (limit.waiting, limit.workers) == (1.0, 1)


def test_past_the_workers_it_shrinks_to_where_nothing_waits_then_grows_by_one():
    limit = LatencyLimit(6)
    probed(limit, 0.25)
    assert rounds(limit, 2, 0.25, 1, 0.0) == [2, 4]
    # four at once on a two-worker Plex: twice as slow, 2 waiting, 2 served -> back to 2
    assert rounds(limit, 4, 0.5, 1, 0.25) == [4, 4, 4, 2]
    assert limit.waiting == 2.0
    # at 2 nothing waits: one more (no doubling once Plex has queued); 3 holds with 1 waiting
    assert rounds(limit, 2, 0.25, 1, 0.75) == [2, 3]
    assert rounds(limit, 3, 0.375, 2, 1.0) == [3] * 6
    assert (limit.waiting, limit.workers) == (1.0, 2)  # served 2 in each of the three rounds with a queue


def test_a_sync_beside_others_never_becomes_the_unloaded_time():
    limit = LatencyLimit(6, GradientPolicy(window_s=10.0))
    assert probed(limit, 0.25) == 2
    # nine and a half seconds at 2, each twice as long as alone: read against the sync alone
    assert rounds(limit, 2, 0.5, 19, 0.0) == [2] * 38
    assert limit.waiting == 1.0


def test_without_a_sync_alone_for_the_window_it_probes_at_one_and_learns_plex_anew():
    limit = LatencyLimit(6, GradientPolicy(start=4, window_s=10.0))
    probed(limit, 0.125)
    assert rounds(limit, 4, 0.125, 1, 0.0)[-1] == 6
    # Plex four times slower for everyone; no sync ran alone for the window: one at a time
    assert rounds(limit, 3, 0.5, 1, 10.0) == [1, 1, 1]  # the syncs draining count in no round
    assert limit.probing
    assert limit.observe(0.5, "uploaded", 10.6, alone=True) == 6
    # against the fast syncs alone remembered, 6 at once read as 4.5 waiting: down to 2, then 1
    assert rounds(limit, 6, 0.5, 1, 10.6) == [6] * 5 + [2]
    assert rounds(limit, 2, 0.5, 1, 11.1) == [2, 1]
    # one at a time, every sync runs alone: once the last three alone are slow, 0.5 s is the
    # unloaded time, and the limit grows again
    assert [limit.observe(0.5, "uploaded", 11.6 + 0.5 * i, alone=True) for i in range(3)] == [1, 1, 2]
    assert rounds(limit, 2, 0.5, 1, 13.1) == [2, 3]
    assert limit.waiting == 0.0


def test_each_kind_of_sync_is_compared_with_its_own_unloaded_time():
    limit = LatencyLimit(6)
    limit.observe(0.25, "uploaded", 0.0, alone=True)  # edit and poster alone
    limit.observe(0.125, "unchanged", 0.125, alone=True)  # an edit alone: half the requests
    # the round of 2 ends with an upload as fast as alone: nothing waited
    assert limit.observe(0.25, "uploaded", 0.25) == 4
    assert [limit.observe(s, k, 0.5) for s, k in [(0.25, "uploaded"), (0.125, "unchanged")] * 2] == [4, 4, 4, 6]
    assert limit.waiting == 0.0


def test_while_someone_watches_it_leaves_plex_a_worker_and_takes_it_back_after():
    limit = LatencyLimit(6, GradientPolicy(start=5))
    probed(limit, 0.25)
    # 5 at once, 1.25 times as slow: 1 waiting, 4 served (three rounds: the workers are known)
    assert rounds(limit, 5, 0.3125, 3, 0.0) == [5] * 15
    assert (limit.waiting, limit.workers, limit.headroom) == (1.0, 4, None)
    limit.viewing = True
    assert (limit.headroom, limit.limit) == (3, 5)  # 3 of our requests at Plex; the syncs as they were
    limit.viewing = False
    assert limit.headroom is None


def test_someone_watching_before_the_workers_are_known_bounds_nothing_until_plex_queues():
    limit = LatencyLimit(6)
    limit.viewing = True
    probed(limit, 0.25)
    assert rounds(limit, 2, 0.25, 1, 0.0) == [2, 4]
    assert limit.headroom is None
    # four at once on a three-worker Plex (the viewer's requests beside ours): 3 served, 1 waiting
    assert rounds(limit, 4, 1 / 3, 2, 0.25) == [4] * 8
    assert limit.headroom is None  # two rounds with a queue: not yet
    assert rounds(limit, 4, 1 / 3, 1, 0.25 + 2 / 3) == [4] * 4
    assert (limit.workers, limit.headroom) == (3, 2)


def test_our_own_cpu_is_not_read_as_a_queue_at_plex():
    limit = LatencyLimit(6)
    probed(limit, 0.25)
    # syncs twice as long as alone, but Plex answered as fast as then: our CPU, not Plex's queue
    assert rounds(limit, 2, 0.5, 1, 0.0, answered=0.25) == [2, 4]
    assert limit.waiting == 0.0
    # of each 0.5 s, 0.125 s queued at Plex: 4 × 0.125 / 0.5 = 1 of ours waiting: hold
    assert rounds(limit, 4, 0.5, 1, 0.5, answered=0.375) == [4] * 4
    assert limit.waiting == 1.0


def test_syncs_settled_together_close_no_round_until_half_a_sync_time_has_passed():
    limit = LatencyLimit(6)
    probed(limit, 0.25)
    assert [limit.observe(0.25, "uploaded", 0.25) for _ in range(2)] == [2, 4]
    # four more settled a millisecond later: a rate over 1 ms would read 0.25 s as 250 waiting
    assert [limit.observe(0.5, "uploaded", 0.251) for _ in range(4)] == [4] * 4
    assert limit.waiting == 0.0
    # the round goes on until it spans half a sync's time: 5 syncs queued 0.25 s each over 0.5 s
    assert limit.observe(0.5, "uploaded", 0.75) == 2
    assert limit.waiting == 2.5


def test_bounds_and_bad_policies():
    limit = LatencyLimit(1)
    assert probed(limit, 0.125) == 1
    assert rounds(limit, 1, 1.0, 3, 0.0) == [1, 1, 1]
    with pytest.raises(ValueError, match="maximum must be at least 1"):
        LatencyLimit(0)
    with pytest.raises(ValueError, match="alpha <= beta"):
        GradientPolicy(alpha=3, beta=2)


def test_pacer_takes_the_lower_of_the_error_and_latency_limits():
    pacer = Pacer(6, grow_after=3, latency=LatencyLimit(6, GradientPolicy(start=4)))
    assert pacer.limit == 1  # probing first
    assert pacer.outcome(None, 0.125, "uploaded", 0.0, alone=True) == 4
    assert [pacer.outcome(None, 0.125, "uploaded", 0.125) for _ in range(4)] == [4, 4, 4, 6]
    # a Plex error halves the limit in force (6 -> 3); its time says nothing about latency
    assert pacer.outcome(PlexUnavailable("Plex did not answer"), 30.0, "", 0.2) == 3
    assert pacer.cap == 3 and pacer.latency is not None and pacer.latency.limit == 6
    # clean syncs grow the cap back by one per 3 (grow_after), latency permitting
    assert [pacer.outcome(None, 0.125, "uploaded", 0.3) for _ in range(6)] == [3, 3, 4, 4, 4, 5]
    pacer.latency.viewing = True
    assert pacer.latency.headroom is None  # Plex never queued: its workers are not known

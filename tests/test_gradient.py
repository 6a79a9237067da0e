"""The latency-driven concurrency limit (worker/gradient.py) and how Pacer combines it
with the error limit (worker/pipeline.py): pure, times passed in, exact values.

Sync times are powers of two (0.125, 0.25, 0.5 s) so every ratio is exact.
"""

from __future__ import annotations

import pytest

from core.errors import PlexUnavailable
from worker.gradient import GradientPolicy, LatencyLimit
from worker.pipeline import Pacer

TIGHT = GradientPolicy(alpha=1.0, beta=2.0)  # small thresholds, so small limits show each rule


def feed(limit: LatencyLimit, seconds: float, count: int, kind: str = "uploaded", start: float = 0.0) -> list[int]:
    return [limit.observe(seconds, kind, start + i * 0.01) for i in range(count)]


def test_starts_at_one_and_grows_a_round_at_a_time_while_plex_answers_as_fast_as_unloaded():
    limit = LatencyLimit(4, TIGHT)
    assert limit.limit == 1
    # a round is as many syncs as the limit: 1, then 2, then 3, then 4 (the maximum)
    assert feed(limit, 0.125, 10) == [2, 2, 3, 3, 3, 4, 4, 4, 4, 4]
    assert limit.waiting == 0.0


def test_holds_while_about_alpha_to_beta_syncs_wait_and_shrinks_beyond():
    limit = LatencyLimit(6, GradientPolicy(alpha=1.0, beta=2.0, start=4))
    feed(limit, 0.125, 4)  # unloaded: 0.125 s; one round at 4 -> 5
    assert limit.limit == 5
    # twice as slow at 5 at once: 5 × (1 − 1/2) = 2.5 of ours waited -> one fewer
    assert feed(limit, 0.25, 5, start=1.0) == [5, 5, 5, 5, 4]
    assert limit.waiting == 2.5
    # at 4, twice as slow: 2.0 waiting, within [alpha, beta]: hold
    assert feed(limit, 0.25, 8, start=2.0) == [4] * 8
    assert limit.waiting == 2.0
    # 4 × (1 − 0.125/0.5) = 3 waiting: one fewer each round
    assert feed(limit, 0.5, 4 + 3, start=3.0) == [4, 4, 4, 3, 3, 3, 2]


def test_each_kind_of_sync_is_compared_with_its_own_unloaded_time():
    limit = LatencyLimit(6, GradientPolicy(alpha=1.0, beta=2.0, start=2))
    assert limit.observe(0.125, "unchanged", 0.0) == 2  # an edit alone
    assert limit.observe(0.25, "uploaded", 0.0) == 3  # edit and poster: twice the requests, no queue
    assert [limit.observe(s, k, 0.1) for s, k in [(0.125, "unchanged"), (0.25, "uploaded"), (0.25, "uploaded")]] == [
        3,
        3,
        4,
    ]


def test_a_plex_slower_for_everyone_is_learnt_anew_after_the_window():
    limit = LatencyLimit(6, GradientPolicy(alpha=1.0, beta=2.0, start=4, window_s=10.0))
    feed(limit, 0.125, 4)  # unloaded 0.125 s -> 5
    # Plex's service time quadruples: read as a queue while the fast syncs are remembered
    assert feed(limit, 0.5, 5 + 4 + 3 + 2, start=1.0)[-1] == 2
    assert limit.waiting == 2 * (1 - 0.25)  # 1.5: a queue this small is not told apart at 2
    # ten seconds after the last fast sync, 0.5 s is the unloaded time: growth again
    assert feed(limit, 0.5, 2 + 3 + 4, start=10.5) == [2, 3, 3, 3, 4, 4, 4, 4, 5]


def test_the_limit_stays_within_the_maximum_and_latency_alone_stops_at_two():
    limit = LatencyLimit(3, TIGHT)
    assert feed(limit, 0.125, 9) == [2, 2, 3, 3, 3, 3, 3, 3, 3]
    # eight times as slow: 3 × 7/8 waiting -> 2; at 2, 1.75 < beta: a lone sync cannot
    # show a queue of ours (at 1, nothing of ours waits), so latency holds 2; errors go lower
    assert feed(limit, 1.0, 3 + 6, start=1.0) == [3, 3, 2, 2, 2, 2, 2, 2, 2]
    with pytest.raises(ValueError, match="maximum must be at least 1"):
        LatencyLimit(0)
    with pytest.raises(ValueError, match="alpha <= beta"):
        GradientPolicy(alpha=3, beta=2)


def test_pacer_takes_the_lower_of_the_error_and_latency_limits():
    pacer = Pacer(6, grow_after=3, latency=LatencyLimit(6, GradientPolicy(alpha=1.0, beta=2.0, start=4)))
    assert pacer.limit == 4
    assert [pacer.outcome(None, 0.125, "uploaded", 0.0) for _ in range(4)] == [4, 4, 4, 5]
    # a Plex error halves the limit in force (5 -> 2); its time says nothing about latency
    assert pacer.outcome(PlexUnavailable("Plex did not answer"), 30.0, "", 0.1) == 2
    assert pacer.cap == 2 and pacer.latency is not None and pacer.latency.limit == 5
    # clean syncs grow the cap back by one per 3 (grow_after), latency permitting
    assert [pacer.outcome(None, 0.125, "uploaded", 0.2) for _ in range(6)] == [2, 2, 3, 3, 3, 4]


def test_the_default_policy_holds_at_four_while_two_to_four_wait():
    limit = LatencyLimit(6, GradientPolicy(start=4))
    feed(limit, 0.125, 4)  # 4 -> 5
    assert feed(limit, 0.25, 5, start=1.0) == [5] * 5  # 2.5 waiting: hold
    assert limit.waiting == 2.5
    assert feed(limit, 1.0, 5 + 4, start=2.0) == [5] * 4 + [4, 4, 4, 4, 4]  # 4.375 -> 4, then 3.5: hold
    assert limit.waiting == 3.5

from __future__ import annotations

import random

import pytest

from core.backoff import (
    NOT_FOUND,
    TRANSIENT,
    RetryPolicy,
    next_delay,
    schedule,
    window,
)


def _expected(seed: int, bounds: list[float]) -> list[float]:
    """The full-jitter formula computed independently: one uniform draw per bound."""
    rng = random.Random(seed)
    return [rng.uniform(0, bound) for bound in bounds]


def test_transient_delays_for_seed_42_exactly() -> None:
    """One full-jitter draw per window (5, 10, 20, 40, 80, then capped), as literal values."""
    assert [window(n, TRANSIENT) for n in range(6)] == [5.0, 10.0, 20.0, 40.0, 80.0, 80.0]
    rng = random.Random(42)
    got = [next_delay(n, TRANSIENT, rng) for n in range(6)]
    assert got == _expected(42, [5.0, 10.0, 20.0, 40.0, 80.0, 80.0])
    assert got == [
        3.1971339922894186,
        0.25010755222666936,
        5.500586367382385,
        8.928429525952911,
        58.917697133120996,
        54.1359589938329,
    ]


def test_not_found_windows_grow_from_30_to_600_cap() -> None:
    assert [window(n, NOT_FOUND) for n in range(7)] == [
        30.0,
        60.0,
        120.0,
        240.0,
        480.0,
        600.0,
        600.0,
    ]


def test_not_found_delays_follow_formula_with_other_seed() -> None:
    rng = random.Random(7)
    got = [next_delay(n, NOT_FOUND, rng) for n in range(12)]
    bounds = [min(600.0, 30.0 * 2**n) for n in range(12)]
    assert got == _expected(7, bounds)


def test_delay_never_exceeds_cap_over_many_draws() -> None:
    rng = random.Random(1)
    delays = [next_delay(n % 40, TRANSIENT, rng) for n in range(5000)]
    assert max(delays) <= 80.0
    assert min(delays) >= 0.0


def test_cap_is_reachable_when_rng_returns_one() -> None:
    class Top(random.Random):
        def random(self) -> float:
            return 1.0

    assert next_delay(20, TRANSIENT, Top()) == 80.0


@pytest.mark.parametrize("attempt", [1000, 1024, 5000, 10**12])
def test_huge_attempt_does_not_overflow(attempt: int) -> None:
    assert window(attempt, NOT_FOUND) == 600.0
    assert next_delay(attempt, NOT_FOUND, random.Random(42)) == random.Random(42).uniform(0, 600.0)


def test_negative_attempt_is_rejected() -> None:
    with pytest.raises(ValueError, match="attempt must be >= 0"):
        next_delay(-1, TRANSIENT, random.Random(0))


def test_schedule_first_retry_is_now_plus_first_window_draw() -> None:
    assert schedule(1, TRANSIENT, 1000.0, random.Random(42)) == 1000.0 + 3.1971339922894186


def test_schedule_uses_attempt_minus_one_as_exponent() -> None:
    got = schedule(4, TRANSIENT, 50.0, random.Random(3))
    assert got == 50.0 + random.Random(3).uniform(0, 40.0)


def test_schedule_gives_up_exactly_at_budget() -> None:
    rng = random.Random(0)
    assert schedule(4, TRANSIENT, 0.0, rng) is not None
    assert schedule(5, TRANSIENT, 0.0, rng) is None
    assert schedule(6, TRANSIENT, 0.0, rng) is None
    assert schedule(11, NOT_FOUND, 0.0, rng) is not None
    assert schedule(12, NOT_FOUND, 0.0, rng) is None


def test_schedule_does_not_consume_rng_when_giving_up() -> None:
    rng = random.Random(42)
    assert schedule(5, TRANSIENT, 0.0, rng) is None
    assert rng.random() == random.Random(42).random()


def test_schedule_rejects_zero_failures() -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        schedule(0, TRANSIENT, 0.0, random.Random(0))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base": -1.0, "cap": 10.0, "max_attempts": 3}, "finite base >= 0"),
        ({"base": 1.0, "cap": float("inf"), "max_attempts": 3}, "finite base >= 0"),
        ({"base": float("nan"), "cap": 10.0, "max_attempts": 3}, "finite base >= 0"),
        ({"base": 1.0, "cap": 10.0, "max_attempts": 0}, "max_attempts must be >= 1"),
    ],
)
def test_invalid_policies_are_rejected(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_probe_wait_with_an_rng_draws_from_the_upper_half_of_each_wait() -> None:
    """Equal jitter: listeners that lost Plex together spread out, none sooner than half the wait."""
    from core.backoff import probe_wait

    rng = random.Random(3)
    assert [round(probe_wait(n, rng=rng), 3) for n in range(7)] == [1.238, 3.088, 5.48, 12.831, 26.012, 31.966, 30.395]
    rng = random.Random(5)
    for n in range(40):
        assert probe_wait(n) / 2 <= probe_wait(n, rng=rng) <= probe_wait(n)

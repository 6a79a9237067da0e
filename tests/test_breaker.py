from __future__ import annotations

import json
import multiprocessing
from dataclasses import replace
from pathlib import Path

import pytest

from worker.breaker import (
    BreakerPolicy,
    BreakerState,
    BreakerStore,
    CircuitBreaker,
    State,
    admit,
    force_probe,
    next_probe_at,
    on_failure,
    on_success,
)

POLICY = BreakerPolicy(first_probe=60.0)  # a fixed 60 s wait: the growth has its own tests
OPEN_AT_100 = BreakerState(State.OPEN, failures=5, opened_at=100.0)
PROBING_SINCE_160 = BreakerState(State.HALF_OPEN, failures=5, opened_at=100.0, probe_started_at=160.0)


def _fail(s: BreakerState, times: list[float]) -> BreakerState:
    for now in times:
        s = on_failure(s, now, POLICY)
    return s


# --- pure transitions -------------------------------------------------------------


def test_four_failures_stay_closed() -> None:
    assert _fail(BreakerState(), [1.0, 2.0, 3.0, 4.0]) == BreakerState(State.CLOSED, failures=4)


def test_fifth_failure_opens_at_its_time() -> None:
    assert _fail(BreakerState(), [1.0, 2.0, 3.0, 4.0, 100.0]) == OPEN_AT_100


def test_success_resets_count_so_failures_must_be_consecutive() -> None:
    s = _fail(BreakerState(), [1.0, 2.0, 3.0, 4.0])
    s = on_success(s, 5.0)
    assert s == BreakerState()
    assert _fail(s, [6.0, 7.0, 8.0, 9.0]) == BreakerState(State.CLOSED, failures=4)


def test_failure_while_open_keeps_opened_at() -> None:
    assert on_failure(OPEN_AT_100, 130.0, POLICY) == replace(OPEN_AT_100, failures=6)


def test_custom_threshold() -> None:
    s = on_failure(BreakerState(), 7.0, BreakerPolicy(threshold=1))
    assert s == BreakerState(State.OPEN, failures=1, opened_at=7.0)


def test_closed_admits_and_is_unchanged() -> None:
    s = BreakerState(State.CLOSED, failures=3)
    assert admit(s, 50.0, POLICY) == (True, s)


@pytest.mark.parametrize("now", [100.0, 130.0, 159.999])
def test_open_refuses_before_recovery(now: float) -> None:
    assert admit(OPEN_AT_100, now, POLICY) == (False, OPEN_AT_100)


def test_open_admits_one_probe_at_exactly_opened_at_plus_60() -> None:
    assert admit(OPEN_AT_100, 160.0, POLICY) == (True, PROBING_SINCE_160)


def test_half_open_refuses_everyone_else_until_probe_timeout() -> None:
    for now in (160.0, 161.0, 279.999):
        assert admit(PROBING_SINCE_160, now, POLICY) == (False, PROBING_SINCE_160)


def test_stale_probe_slot_is_given_to_next_caller_at_probe_timeout() -> None:
    admitted, s = admit(PROBING_SINCE_160, 280.0, POLICY)
    assert admitted is True
    assert s == replace(PROBING_SINCE_160, probe_started_at=280.0)
    assert admit(s, 281.0, POLICY) == (False, s)


def test_probe_success_closes() -> None:
    assert on_success(PROBING_SINCE_160, 161.0) == BreakerState()


def test_probe_failure_reopens_for_another_full_recovery() -> None:
    s = on_failure(PROBING_SINCE_160, 161.0, POLICY)
    assert s == BreakerState(State.OPEN, failures=6, opened_at=161.0, probes=1)
    assert admit(s, 220.999, POLICY) == (False, s)
    assert admit(s, 221.0, POLICY)[0] is True


def test_the_probe_wait_grows_2_4_8_up_to_60_s_while_the_outage_lasts() -> None:
    policy = BreakerPolicy()  # the defaults: first probe after 2 s, at most 60 s apart
    s = _fail(BreakerState(), [1.0, 2.0, 3.0, 4.0, 10.0])
    waits = []
    for _ in range(7):
        due = next_probe_at(s, policy)
        waits.append(due - s.opened_at)
        assert admit(s, due - 0.001, policy)[0] is False
        admitted, s = admit(s, due, policy)
        assert admitted and s.state is State.HALF_OPEN
        s = on_failure(s, due, policy)  # the probe failed
    assert waits == [2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    assert on_success(s, 500.0) == BreakerState()  # one success ends the outage and the growth


def test_a_users_task_probes_at_once_whatever_the_breaker_says() -> None:
    assert force_probe(BreakerState(), 5.0) == (False, BreakerState())
    assert force_probe(OPEN_AT_100, 101.0) == (
        True,
        replace(OPEN_AT_100, state=State.HALF_OPEN, probe_started_at=101.0),
    )
    assert force_probe(PROBING_SINCE_160, 170.0) == (True, replace(PROBING_SINCE_160, probe_started_at=170.0))


def test_a_state_recorded_for_another_plex_is_reset(tmp_path: Path) -> None:
    store = BreakerStore(tmp_path / "breaker.json")
    assert store.bind("plex-a") is False  # no file yet
    store.update(lambda s: OPEN_AT_100)
    assert json.loads(store.path.read_text())["target"] == "plex-a"
    assert BreakerStore(store.path).bind("plex-a") is False and store.load() == OPEN_AT_100
    assert BreakerStore(store.path).bind("plex-b") is True  # plex_url or plex_token changed
    assert store.load() == BreakerState()
    assert json.loads(store.path.read_text())["target"] == "plex-b"


def test_clock_jumping_backwards_restarts_the_wait_from_now() -> None:
    assert admit(OPEN_AT_100, 40.0, POLICY) == (
        False,
        replace(OPEN_AT_100, opened_at=40.0),
    )
    assert admit(PROBING_SINCE_160, 10.0, POLICY) == (
        False,
        replace(PROBING_SINCE_160, probe_started_at=10.0),
    )


def test_next_probe_at() -> None:
    assert next_probe_at(BreakerState(State.CLOSED, failures=2), POLICY) is None
    assert next_probe_at(OPEN_AT_100, POLICY) == 160.0
    assert next_probe_at(PROBING_SINCE_160, POLICY) == 280.0


# --- store ------------------------------------------------------------------------


def test_missing_file_loads_closed_without_warning(tmp_path: Path) -> None:
    store = BreakerStore(tmp_path / "breaker.json")
    assert store.load() == BreakerState()
    assert store.warning is None


def test_store_round_trip(tmp_path: Path) -> None:
    store = BreakerStore(tmp_path / "breaker.json")
    assert store.update(lambda _: PROBING_SINCE_160) == PROBING_SINCE_160
    assert BreakerStore(tmp_path / "breaker.json").load() == PROBING_SINCE_160
    assert json.loads((tmp_path / "breaker.json").read_text()) == {
        "state": "half_open",
        "failures": 5,
        "opened_at": 100.0,
        "probe_started_at": 160.0,
        "probes": 0,
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "breaker.json",
        "breaker.json.lock",
    ]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"{not json", "corrupt"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"state": "ajar"}', "'ajar' is not a valid State"),
        (
            b'{"state": "open", "failures": -1}',
            "failures must be a non-negative integer",
        ),
        (
            b'{"state": "open", "failures": true}',
            "failures must be a non-negative integer",
        ),
        (
            b'{"state": "open", "opened_at": "soon"}',
            "opened_at must be a finite number",
        ),
        (b'{"state": "open", "opened_at": NaN}', "opened_at must be a finite number"),
        (b"\xff\xfe\x00garbage", "unreadable"),
        (b"", "corrupt"),
    ],
)
def test_corrupt_file_loads_closed_with_warning(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "breaker.json"
    path.write_bytes(content)
    store = BreakerStore(path)
    assert store.load() == BreakerState()
    assert store.warning is not None
    assert str(path) in store.warning
    assert reason in store.warning


def test_update_over_corrupt_file_starts_from_closed_and_repairs_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "breaker.json"
    path.write_text("{garbage")
    store = BreakerStore(path)
    assert store.update(lambda s: on_failure(s, 1.0, POLICY)) == BreakerState(State.CLOSED, failures=1)
    assert "corrupt" in (store.warning or "")
    assert store.load() == BreakerState(State.CLOSED, failures=1)
    assert store.warning is None


def test_update_does_not_rewrite_unchanged_state(tmp_path: Path) -> None:
    path = tmp_path / "breaker.json"
    store = BreakerStore(path)
    store.update(lambda s: s)
    assert not path.exists()


def _add_failures(path: str, count: int) -> None:
    store = BreakerStore(Path(path))
    for _ in range(count):
        store.update(lambda s: replace(s, failures=s.failures + 1))


def test_two_processes_lose_no_update(tmp_path: Path) -> None:
    path = tmp_path / "breaker.json"
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_add_failures, args=(str(path), 50)) for _ in range(2)]
    for worker in workers:
        worker.start()
    _add_failures(str(path), 50)
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    assert BreakerStore(path).load().failures == 150


# --- bound breaker with an injected clock -----------------------------------------


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_circuit_breaker_full_cycle(tmp_path: Path) -> None:
    clock = Clock(100.0)
    breaker = CircuitBreaker(BreakerStore(tmp_path / "breaker.json"), POLICY, clock=clock)
    for _ in range(5):
        assert breaker.allow() is True
        breaker.record_failure()
    assert breaker.state() == OPEN_AT_100
    assert breaker.allow() is False
    assert breaker.seconds_until_probe() == 60.0
    clock.now = 159.5
    assert breaker.allow() is False
    assert breaker.seconds_until_probe() == 0.5
    clock.now = 160.0
    assert breaker.allow() is True
    assert breaker.allow() is False
    assert breaker.state() == PROBING_SINCE_160
    clock.now = 161.0
    breaker.record_failure()
    assert breaker.state() == BreakerState(State.OPEN, failures=6, opened_at=161.0, probes=1)
    clock.now = 221.0
    assert breaker.allow() is True
    breaker.record_success()
    assert breaker.state() == BreakerState()
    assert breaker.seconds_until_probe() == 0.0


def test_two_breakers_on_one_file_share_the_probe_slot(tmp_path: Path) -> None:
    path = tmp_path / "breaker.json"
    BreakerStore(path).update(lambda _: OPEN_AT_100)
    clock = Clock(160.0)
    first = CircuitBreaker(BreakerStore(path), POLICY, clock=clock)
    second = CircuitBreaker(BreakerStore(path), POLICY, clock=clock)
    assert [first.allow(), second.allow(), first.allow()] == [True, False, False]

"""The settle decision (worker/settle.py): a pure function of job, error, time and rng,
asserted with exact values."""

from __future__ import annotations

import random

import pytest

from core.errors import (
    AmbiguousMatch,
    ConfigError,
    InvalidMetadata,
    PlexNotFound,
    PlexUnavailable,
    RunStopped,
    StashRefused,
    StashUnavailable,
    TransientError,
)
from sync_queue.job import Job
from tasks.context import one_scene
from worker.settle import (
    STASH_RECHECK_S,
    UNAVAILABLE_RECHECK_S,
    Action,
    Decision,
    decide,
)

NOW = 1_800_000_000.0
JOB = Job(scene_id=7, enqueued_at=NOW - 10)


def rng() -> random.Random:
    return random.Random(5)


def test_success_acks_the_job_as_it_is():
    assert decide(JOB, None, NOW, rng()) == Decision(Action.ACK, JOB)


@pytest.mark.parametrize(
    "error", [ConfigError("plex_url is missing"), RunStopped("not tried: 401"), StashRefused("session refused (401)")]
)
def test_a_setting_a_refused_session_or_a_stopping_run_holds_the_job_with_its_budget(error):
    assert decide(JOB, error, NOW, rng()) == Decision(Action.HOLD, JOB, NOW, str(error))


@pytest.mark.parametrize(
    ("probe_at", "until"),
    [(NOW + 42.5, NOW + 42.5), (None, NOW + UNAVAILABLE_RECHECK_S), (NOW, NOW + UNAVAILABLE_RECHECK_S)],
)
def test_plex_unavailable_postpones_until_the_probe_without_spending_the_budget(probe_at, until):
    decision = decide(JOB, PlexUnavailable("refused"), NOW, rng(), probe_at)
    assert decision == Decision(Action.POSTPONE, JOB, until, f"Plex unavailable; waiting until {until:.0f}")


def test_permanent_errors_go_to_the_dead_letter_queue_at_once():
    ambiguous = decide(JOB, AmbiguousMatch("two Plex items hold a.mp4"), NOW, rng())
    assert ambiguous == Decision(
        Action.DLQ,
        JOB,
        None,
        (
            "two Plex items hold a.mp4 An item chosen in the inbox syncs at once; after a fix in path_map or Plex, "
            "run 'Retry dead-letter queue'."
        ),
    )
    invalid = decide(JOB, InvalidMetadata("the scene has no files"), NOW, rng())
    assert invalid == Decision(Action.DLQ, JOB, None, "the scene has no files")


def test_a_stash_outage_makes_the_job_wait_with_its_budget():
    decision = decide(JOB, StashUnavailable("Stash did not answer"), NOW, rng())
    assert decision == Decision(Action.WAIT_STASH, JOB, NOW + STASH_RECHECK_S, "Stash did not answer")


def test_a_bug_of_ours_is_dead_lettered_at_once_not_retried():
    decision = decide(JOB, TypeError("'NoneType' object is not subscriptable"), NOW, rng())
    assert decision == Decision(
        Action.DLQ,
        JOB,
        None,
        "Stash2Plex hit a bug (TypeError: 'NoneType' object is not subscriptable); the traceback is in the log. "
        "Please report it; after an update, run 'Retry dead-letter queue'.",
    )


def test_a_transient_failure_is_retried_after_a_full_jitter_draw():
    error = TransientError("Plex read timed out")
    decision = decide(JOB, error, NOW, rng())
    next_at = NOW + random.Random(5).uniform(0.0, 5.0)  # the first window of TRANSIENT
    assert next_at == 1_800_000_003.1145084
    expected = Job(
        scene_id=7,
        enqueued_at=NOW - 10,
        attempt=1,
        next_attempt_at=next_at,
        last_error="Plex read timed out",
        error_class="TransientError",
    )
    assert decision == Decision(Action.RETRY, expected, next_at, "TransientError: Plex read timed out")


def test_the_fifth_transient_failure_dead_letters_without_drawing():
    job = Job(scene_id=7, attempt=4)
    generator = rng()
    state = generator.getstate()
    decision = decide(job, TransientError("read timed out"), NOW, generator)
    assert decision == Decision(Action.DLQ, job, None, "gave up after 5 attempts: TransientError: read timed out")
    assert generator.getstate() == state


def test_not_found_waits_on_the_slow_schedule_and_remembers_since_when_and_the_scan():
    error = PlexNotFound("no Plex item holds /plex/a.mp4", looked_for=("/plex/a.mp4",), scan_requested=True)
    decision = decide(JOB, error, NOW, rng())
    next_at = NOW + random.Random(5).uniform(0.0, 30.0)
    assert decision.action == Action.RETRY and decision.until == next_at == 1_800_000_018.6870508
    assert (decision.job.attempt, decision.job.not_found_since, decision.job.scan_requested) == (1, NOW, True)
    # later failures keep the first time it was missing, and a scan asked for once stays asked for
    later = decide(decision.job, PlexNotFound("still missing"), NOW + 100, rng())
    assert (later.job.attempt, later.job.not_found_since, later.job.scan_requested) == (2, NOW, True)
    assert later.until == NOW + 100 + random.Random(5).uniform(0.0, 60.0)


def test_not_found_gives_up_on_the_twelfth_failure_naming_the_paths():
    job = Job(scene_id=7, attempt=11, not_found_since=NOW - 3600)
    error = PlexNotFound("missing", looked_for=("/plex/a.mp4", "/plex/b.mp4"))
    decision = decide(job, error, NOW, rng())
    assert decision == Decision(
        Action.DLQ,
        job,
        None,
        "not in Plex after 12 attempts: no Plex item holds /plex/a.mp4, /plex/b.mp4. Check that Plex has "
        "scanned the file and that path_map maps Stash paths to Plex paths; then run 'Retry dead-letter queue'.",
    )


def test_other_transient_failures_do_not_start_the_not_found_clock():
    decision = decide(JOB, TransientError("reset"), NOW, rng())
    assert decision.job.not_found_since is None and decision.job.scan_requested is False


def test_a_bulk_tasks_scene_fails_alone_unless_its_error_fails_every_scene():
    """tasks/context.py ``one_scene``: preview's and reconcile's step for one scene."""

    def fails(error: Exception) -> None:
        raise error

    assert one_scene(int, "7") == (7, None)
    missing = PlexNotFound("no item")
    assert one_scene(fails, missing) == (None, missing)
    for every in (PlexUnavailable("down"), ConfigError("bad")):
        with pytest.raises(type(every)):
            one_scene(fails, every)
    with pytest.raises(KeyError):  # not ours: a bug, not a failed scene
        one_scene(fails, KeyError("x"))

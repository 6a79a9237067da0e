"""Circuit breaker that stops every process from hammering a Plex that is down.

Pure transitions of ``(state, now)``; ``BreakerStore`` shares the state in a JSON file;
``CircuitBreaker`` binds store, policy and clock. CLOSED → OPEN after ``threshold`` failures in a
row; OPEN → HALF_OPEN when the probe wait passed (one caller probes with a request of its own) or a
user's task forces it; HALF_OPEN → CLOSED when Plex answers the probe (a 4xx too), → OPEN on a
refusal, silence or 5xx, the wait doubling from ``first_probe`` up to ``recovery``; a probe silent
for ``probe_timeout`` (its process died) passes to the next caller. A changed plex_url or token
resets the state; a corrupt file is reset to CLOSED with a warning.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from core.backoff import probe_wait
from core.errors import Stash2PlexError
from core.platform import file_lock, write_whole

if TYPE_CHECKING:
    from core.log import StashLog


class State(str, Enum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True)
class BreakerState:
    """One snapshot. ``failures`` counts consecutive failures; times are epoch seconds."""

    state: State = State.CLOSED
    failures: int = 0
    opened_at: float = 0.0
    probe_started_at: float = 0.0
    probes: int = 0  # failed probes since the breaker opened: the next wait doubles with each


@dataclass(frozen=True)
class BreakerPolicy:
    """``threshold`` failures in a row open the breaker. The first probe is due
    ``first_probe`` seconds later; each failed probe doubles the wait, up to ``recovery``.

    ``probe_timeout`` frees the probe slot when the admitted probe never reported back
    (its process was killed); it should exceed the longest Plex request timeout.
    """

    threshold: int = 5
    recovery: float = 60.0
    probe_timeout: float = 120.0
    first_probe: float = 2.0

    def probe_wait(self, probes: int) -> float:
        """Seconds from opening (or from the last failed probe) to the next probe."""
        return probe_wait(probes, min(self.first_probe, self.recovery), self.recovery)


CLOSED = BreakerState()


def on_success(s: BreakerState, now: float) -> BreakerState:
    """Any success proves Plex answers: the breaker closes and the count resets.

    This includes a late success from a request admitted before the breaker opened.
    """
    return CLOSED


def on_failure(s: BreakerState, now: float, policy: BreakerPolicy) -> BreakerState:
    """Count one failure.

    CLOSED opens on the ``threshold``-th consecutive failure (``opened_at = now``).
    HALF_OPEN (the probe failed) re-opens from ``now`` with one more failed probe
    counted (so the next wait is twice as long, up to ``policy.recovery``).
    OPEN stays open with its ``opened_at`` unchanged: late failures of requests that
    were already in flight must not push the probe further away.
    """
    failures = s.failures + 1
    if s.state is State.OPEN:
        return replace(s, failures=failures)
    if s.state is State.HALF_OPEN:
        return BreakerState(State.OPEN, failures, opened_at=now, probes=s.probes + 1)
    if failures >= policy.threshold:
        return BreakerState(State.OPEN, failures, opened_at=now)
    return replace(s, failures=failures)


def admit(s: BreakerState, now: float, policy: BreakerPolicy) -> tuple[bool, BreakerState]:
    """Decide whether one request may go to Plex at ``now``; return it and the new state.

    CLOSED admits everyone. OPEN refuses until ``opened_at + probe_wait`` (inclusive),
    then admits this caller as the single probe (HALF_OPEN, ``probe_started_at = now``).
    HALF_OPEN refuses others until the probe reports or ``probe_timeout`` passes.
    If the clock went backwards past the recorded time, the wait restarts from ``now``
    instead of lasting as long as the jump.
    """
    if s.state is State.CLOSED:
        return True, s
    if s.state is State.OPEN:
        if now < s.opened_at:
            return False, replace(s, opened_at=now)
        if now >= s.opened_at + policy.probe_wait(s.probes):
            return True, replace(s, state=State.HALF_OPEN, probe_started_at=now)
        return False, s
    if now < s.probe_started_at:
        return False, replace(s, probe_started_at=now)
    if now >= s.probe_started_at + policy.probe_timeout:
        return True, replace(s, probe_started_at=now)
    return False, s


def next_probe_at(s: BreakerState, policy: BreakerPolicy) -> float | None:
    """When the next probe can be admitted; ``None`` when CLOSED (no wait at all).

    For HALF_OPEN this is when a silent probe's slot frees (``probe_started_at +
    probe_timeout``); the probe normally reports earlier.
    """
    if s.state is State.CLOSED:
        return None
    if s.state is State.OPEN:
        return s.opened_at + policy.probe_wait(s.probes)
    return s.probe_started_at + policy.probe_timeout


def force_probe(s: BreakerState, now: float) -> tuple[bool, BreakerState]:
    """A task the user started probes at once, whatever the breaker says: not CLOSED
    becomes HALF_OPEN with this caller as the probe. (False, unchanged) when CLOSED."""
    if s.state is State.CLOSED:
        return False, s
    return True, replace(s, state=State.HALF_OPEN, probe_started_at=now)


def _from_json(text: str) -> BreakerState:
    """Parse the file's text; ``ValueError`` or ``TypeError`` when malformed."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise TypeError("not a JSON object")
    for key in ("failures", "probes"):
        if type(value := data.get(key, 0)) is not int or value < 0:
            raise ValueError(f"{key} must be a non-negative integer, got {value!r}")
    for key in ("opened_at", "probe_started_at"):
        if type(value := data.get(key, 0.0)) not in (int, float) or not math.isfinite(value):
            raise ValueError(f"{key} must be a finite number, got {value!r}")
    times = (float(data.get("opened_at", 0.0)), float(data.get("probe_started_at", 0.0)))
    return BreakerState(State(data.get("state", "closed")), data.get("failures", 0), *times, data.get("probes", 0))


class BreakerStore:
    """The breaker state in a JSON file, shared between processes.

    Reads and writes hold an exclusive lock on ``<path>.lock`` (not on the data file:
    ``os.replace`` swaps the data file's inode, which would orphan a lock taken on it).
    Writes go to a temp file in the same directory, then ``os.replace``, so readers see
    the old or the new state, never half of one.

    ``warning`` is ``None`` after a clean read, or a sentence saying why the last read
    fell back to CLOSED.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.warning: str | None = None
        self.target: str | None = None  # which Plex the state is about (a hash of URL and token)

    def bind(self, target: str) -> bool:
        """Tie the state to one Plex (``target``): a state recorded for another plex_url or
        plex_token is reset to CLOSED. Returns True when it was reset."""
        self.target = target
        with file_lock(self.lock_path):
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                return False
            except (OSError, ValueError):
                data = {}
            if isinstance(data, dict) and data.get("target") == target:
                return False
            was_closed = isinstance(data, dict) and data.get("state", "closed") == "closed"
            self._write(CLOSED)
            return not was_closed

    def load(self) -> BreakerState:
        """Return the stored state; CLOSED when the file is missing or unusable. Never raises."""
        if not self.path.exists():
            self.warning = None
            return CLOSED
        try:
            with file_lock(self.lock_path):
                return self._read()
        except OSError as exc:
            return self._unusable(f"unreadable ({exc}); treated as closed")

    def update(self, fn: Callable[[BreakerState], BreakerState]) -> BreakerState:
        """Apply ``fn`` to the stored state under the lock and store the result.

        ``fn`` must be pure (it runs while other processes wait). The file is only
        rewritten when the state changed. Raises ``OSError`` when the lock cannot be
        taken or the file cannot be written; an unreadable file counts as CLOSED.
        """
        with file_lock(self.lock_path):
            old = self._read()
            new = fn(old)
            if new != old or self.warning is not None:
                self._write(new)
            return new

    def _read(self) -> BreakerState:
        self.warning = None
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return CLOSED
        except (OSError, UnicodeDecodeError) as exc:
            return self._unusable(f"unreadable ({exc}); treated as closed")
        try:
            return _from_json(text)
        except (ValueError, TypeError) as exc:
            return self._unusable(f"is corrupt ({exc}); reset to closed")

    def _unusable(self, why: str) -> BreakerState:
        self.warning = f"circuit breaker state {self.path} {why}"
        return CLOSED

    def _write(self, s: BreakerState) -> None:
        target = {} if self.target is None else {"target": self.target}
        write_whole(str(self.path), json.dumps({**asdict(s), "state": s.state.value, **target}, sort_keys=True))


@dataclass
class CircuitBreaker:
    """A breaker bound to its store, policy and clock; every call reads the shared file.
    A folder that refuses the write (full, read-only, no permission) raises DataFileError
    naming the folder and the remedy."""

    store: BreakerStore
    policy: BreakerPolicy = BreakerPolicy()
    clock: Callable[[], float] = time.time

    def allow(self) -> bool:
        """May one request go to Plex now? A True in HALF_OPEN makes the caller the probe,
        so it must report back with ``record_success`` or ``record_failure``."""
        now = self.clock()
        return self._decide(lambda s: admit(s, now, self.policy))

    def force_probe(self) -> bool:
        """Make this caller the probe now (a task the user started); False when CLOSED."""
        now = self.clock()
        return self._decide(lambda s: force_probe(s, now))

    def _decide(self, rule: Callable[[BreakerState], tuple[bool, BreakerState]]) -> bool:
        """Apply a transition that also answers yes or no; its answer."""
        answers: list[bool] = []

        def step(s: BreakerState) -> BreakerState:
            answer, new = rule(s)
            answers.append(answer)
            return new

        self._update(step)
        return answers[-1]

    def _update(self, fn: Callable[[BreakerState], BreakerState]) -> BreakerState:
        try:
            return self.store.update(fn)
        except OSError as exc:
            from sync_queue.sqlite import os_error

            raise os_error(self.store.path, exc) from None

    def record_success(self) -> None:
        now = self.clock()
        self._update(lambda s: on_success(s, now))

    def record_failure(self) -> None:
        now = self.clock()
        self._update(lambda s: on_failure(s, now, self.policy))

    def state(self) -> BreakerState:
        return self.store.load()

    def seconds_until_probe(self) -> float:
        """Seconds until a probe can be admitted; 0.0 when CLOSED or already due."""
        at = next_probe_at(self.state(), self.policy)
        return 0.0 if at is None else max(0.0, at - self.clock())


def plex_answered(breaker: Callable[[], CircuitBreaker], log: StashLog) -> None:
    """Close the circuit: Plex answered a task the user started (Health check, reconcile),
    so every process waiting for Plex (a drainer between probes) may go ahead now."""
    try:
        breaker().record_success()
    except (OSError, Stash2PlexError) as exc:
        log.warning(f"could not record that Plex answers in the circuit breaker's file: {exc}")

"""A sync job: which scene to sync, how urgently, and its retry state.

Stored as a plain JSON object with a schema version (never pickle): a job written by
one plugin version must load in the next. Retry state lives on the job.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from sync_queue.priority import BULK, INTERACTIVE, PRIORITIES

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Job:
    scene_id: int
    priority: str = INTERACTIVE
    enqueued_at: float = 0.0
    attempt: int = 0  # failures so far
    next_attempt_at: float = 0.0
    last_error: str | None = None
    error_class: str | None = None
    scan_requested: bool = False
    not_found_since: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """What ``dataclasses.asdict`` gives (every field is a scalar), without its recursive
        deep copy, which cost more than the put itself."""
        data = {name: getattr(self, name) for name in _FIELD_NAMES}
        data["v"] = SCHEMA_VERSION
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Job:
        """Load a stored job; raises ValueError naming what is wrong. Keys it no longer has
        are left out (``event`` and ``fields``, stored by earlier versions, were never read)."""
        if not isinstance(data, dict) or data.get("v") != SCHEMA_VERSION:
            raise ValueError(f"not a Stash2Plex v{SCHEMA_VERSION} job: {str(data)[:120]!r}")
        values = {k: v for k, v in data.items() if k in _FIELD_NAMES}
        job = cls(**values)
        if not isinstance(job.scene_id, int) or job.scene_id < 1:
            raise ValueError(f"job has an invalid scene_id {job.scene_id!r}")
        if job.priority not in PRIORITIES:
            raise ValueError(f"job has an unknown priority {job.priority!r}")
        return job

    def retry(self, next_at: float, error: BaseException, **changes: Any) -> Job:
        return dataclasses.replace(
            self,
            attempt=self.attempt + 1,
            next_attempt_at=next_at,
            last_error=str(error)[:2000],
            error_class=type(error).__name__,
            **changes,
        )

    def fresh(self) -> Job:
        """The same job with a new retry budget (used by retry_dlq)."""
        return Job(self.scene_id, self.priority, self.enqueued_at)


_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(Job))


@dataclass(frozen=True)
class EntityEvent:
    """A tag, performer, studio or group changed (renamed, merged, deleted).

    One row per entity, whatever number of scenes carry it: the drainer expands it
    into scene jobs a batch at a time (``after_scene`` is how far it has got), from
    the ledger's record of which scenes show the entity in Plex.
    """

    kind: str
    entity_id: int
    event: str
    queued_at: float
    after_scene: int = 0


@dataclass
class Taken:
    """A job handed out by the queue, with the row id needed to settle it."""

    job: Job
    pqid: int
    table: str


__all__ = ["BULK", "INTERACTIVE", "PRIORITIES", "EntityEvent", "Job", "Taken"]

"""Does Plex already show this scene as Stash has it? The one answer to it.

The worker (what a job needs), ``all``/``recent`` and every preview (what to queue or plan),
``reconcile`` (what to check), ``inspect`` and the scene panel in Stash's UI all ask here:

- ``out_of_scope``: the settings (``skip_tags``, ``organized_only``) or the user's answer in
  the inbox leave the scene out; its Plex item is left as it is.
- ``unchanged``: what was last written (the ledger's state hash) is what Stash wants now,
  nothing was written to that item for another scene since, and Plex's listing still shows
  the item at the path written. No Plex request is needed.
- ``stale``: anything else; ``why`` says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sync_queue.ledger import SceneRecord
    from validation.metadata import SceneMetadata
    from worker.sync import Syncer

OUT_OF_SCOPE, UNCHANGED, STALE = "out_of_scope", "unchanged", "stale"


@dataclass(frozen=True)
class Verdict:
    kind: str  # OUT_OF_SCOPE | UNCHANGED | STALE
    why: str


def verdict(syncer: Syncer, scene: SceneMetadata, record: SceneRecord | None) -> Verdict:
    """The scene's verdict from its ledger ``record`` (None: never written)."""
    why = syncer.out_of_scope(scene)
    if why is not None:
        return Verdict(OUT_OF_SCOPE, why)
    if record is None or record.state_hash is None:
        return Verdict(STALE, "never written to Plex")
    if record.state_hash != syncer.state_hash(scene):
        return Verdict(STALE, "changed in Stash (or in the settings) since the last write")
    why = syncer.link_problem(record)
    if why is not None:
        return Verdict(STALE, why)
    return Verdict(UNCHANGED, f"Plex item {record.rating_key} shows what was last written")

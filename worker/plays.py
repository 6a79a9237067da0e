"""Plex plays into Stash's play history, each exactly once.

``sceneAddPlay`` adds a row per call, so each history entry of an item Stash2Plex wrote takes
three steps under one OS lock for every process (``plays.lock``); plays from before
``import_plays`` was on are left to ``from_start``:

1. skip it when the journal (sync_queue/plays.py) has its ``historyKey``;
2. when Stash holds more plays at that second than the journal applied there (our write landed,
   then the process died), only record it; else add the play at Plex's time, then record it.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from core.clock import rfc3339
from core.platform import file_lock
from plex.history import Play, read_history
from sync_queue.ledger import NO_OWNER, owner_at

if TYPE_CHECKING:
    from core.log import StashLog
    from plex.client import PlexClient
    from stash.client import StashClient
    from sync_queue.ledger import Ledger
    from sync_queue.plays import PlayJournal

OVERLAP_S = 300  # each read starts this much before the newest play seen (late rows; inclusive or not)
# A play this close after an owner change is the new owner's: Plex dates a play to the whole
# second, and its clock is known to us from Date headers, to about a second.
OWNER_GRACE_S = 2.0


def stash_time(epoch: int) -> str:
    """Plex's ``viewedAt`` as the RFC3339 text ``sceneAddPlay`` takes (UTC, whole seconds).

    >>> stash_time(1700000000)
    '2023-11-14T22:13:20Z'
    """
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _epochs(history: list[str]) -> Counter[int]:
    found: Counter[int] = Counter()
    for text in history:
        value = rfc3339(text)
        if value is not None:
            found[int(value.timestamp())] += 1
    return found


@dataclass
class PlayImport:
    plex: PlexClient
    stash: StashClient
    ledger: Ledger
    journal: PlayJournal
    lock_path: Path
    log: StashLog

    def run(self, accounts: tuple[int, ...], from_start: bool = False, dry_run: bool = False) -> Counter[str]:
        """One pass over the accounts' history. ``from_start``: all of it (the explicit task),
        else from where the last pass got to; the first pass only notes where to start. Plays
        kept for an item not linked then are tried again first (``from_start`` reads them anyway)."""
        counts: Counter[str] = Counter()
        with file_lock(self.lock_path):
            server = self.plex.machine_id
            self.journal.claim(server)
            if not from_start:
                kept = [Play(*p) for p in self.journal.pending(server) if p[3] in accounts]
                counts += self._apply(server, kept, dry_run, keep=False)
            for account in accounts:
                counts += self._account(server, account, from_start, dry_run)
        if counts["plays_added"]:
            self.log.info(f"{counts['plays_added']} Plex play(s) added to Stash's play history")
        return counts

    def _account(self, server: str, account: int, from_start: bool, dry_run: bool) -> Counter[str]:
        mark = self.journal.since(server, account)
        if from_start:
            plays = read_history(self.plex, account, None)
        elif mark is None:
            now = int(self.plex.now())  # Plex's clock: viewedAt is
            self.journal.set_since(server, account, now, now)  # plays from now on; older ones are the task's
            self.log.info(
                f"Plex plays of account {account} go to Stash from now on "
                "(older ones: the task 'Import Plex watch history')"
            )
            return Counter()
        else:
            newest, floor = mark
            plays = [p for p in read_history(self.plex, account, newest - OVERLAP_S) if p.viewed_at >= floor]
        counts = self._apply(server, plays, dry_run, keep=not from_start)
        if mark is not None and plays and not dry_run:
            self.journal.set_since(server, account, max([p.viewed_at for p in plays] + [mark[0]]), mark[1])
        return counts

    def _durations(self, keys: list[int]) -> dict[int, float]:
        """Each item's duration in seconds: the cached index's, else Plex's detail view (items
        gone from Plex have none: their rows are not merged)."""
        found = self.ledger.durations(keys)
        missing = [k for k in keys if k not in found]
        for start in range(0, len(missing), 100):
            for key, state in self.plex.item_states(missing[start : start + 100]).items():
                longest = max((ms or 0 for _, _, ms in state.parts), default=0)
                if longest:
                    found[key] = longest / 1000
        return found

    def _apply(self, server: str, plays: list[Play], dry_run: bool, keep: bool) -> Counter[str]:
        """Each play to the scene that held its item when it was played (``owner_at``); a play of
        an item no scene holds yet is kept (``keep``) for when one does."""
        counts: Counter[str] = Counter()
        done = self.journal.applied(server, [p.history_key for p in plays])
        keys = sorted({p.rating_key for p in plays})
        owners = self.ledger.owners(keys)
        durations = self._durations([k for k in keys if k in owners])
        in_stash: dict[int, Counter[int] | None] = {}
        unlinked: list[Play] = []
        for play in plays:
            if play.history_key in done:
                counts["plays_known"] += 1
                continue
            if play.rating_key not in owners:
                unlinked.append(play)
                counts["plays_not_synced"] += 1
                continue
            scene = owner_at(owners[play.rating_key], self.plex.clock.to_ours(play.viewed_at + OWNER_GRACE_S))
            if scene == NO_OWNER:
                counts["plays_no_scene"] += 1
                continue
            duration = durations.get(play.rating_key, 0.0)
            if self.journal.viewing_near(server, play.rating_key, play.account_id, play.viewed_at, duration):
                counts["plays_same_viewing"] += 1
                if not dry_run:
                    self._record(server, play, scene, False, duplicate=True)
                continue
            if scene not in in_stash:
                history = self.stash.play_history(scene)
                in_stash[scene] = None if history is None else _epochs(history)
            plays_there = in_stash[scene]
            if plays_there is None:  # the scene was deleted in Stash: nothing to add the play to
                counts["plays_scene_gone"] += 1
                continue
            written = plays_there[play.viewed_at] <= self.journal.count_at(scene, play.viewed_at)
            if dry_run:
                counts["plays_to_add" if written else "plays_in_stash"] += 1
                continue
            if written:
                self.stash.add_play(scene, stash_time(play.viewed_at))
                plays_there[play.viewed_at] += 1
            self._record(server, play, scene, written)
            done.add(play.history_key)
            counts["plays_added" if written else "plays_in_stash"] += 1
        if keep and unlinked and not dry_run:
            self.journal.keep(server, [(p.history_key, p.rating_key, p.viewed_at, p.account_id) for p in unlinked])
        return counts

    def _record(self, server: str, play: Play, scene: int, written: bool, duplicate: bool = False) -> None:
        self.journal.record(
            server, play.history_key, scene, play.rating_key, play.viewed_at, play.account_id, written, duplicate
        )

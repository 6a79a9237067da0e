"""The path → Plex item index of the configured libraries, cached in the ledger.

Built from one paged listing per section (it carries every Part's file path: no per-scene
searches), kept in a cache the caller provides (the ledger's SQLite), reloaded only for a section
whose ``scannedAt`` changed (files enter, move and leave Plex only through scans; our
own edits do not move it). A scene that is not found triggers a stamp check (one
request) at most every ``min_refresh_s`` seconds, and relists a section this process
has not listed for ``STALE_S``.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol

from core.errors import ConfigError
from plex.client import PlexClient, SectionInfo
from plex.matcher import PathIndex, PlexFile
from validation.pathmap import AS_IS, PathMap

IndexRow = tuple[int, str, int | None, int | None]  # rating_key, file path, size, duration in ms


class IndexCache(Protocol):
    """Where the listing of each section is kept between processes (the ledger provides it)."""

    def meta(self, key: str, default: Any = None) -> Any: ...

    def index_rows(self, section_id: int) -> list[IndexRow]: ...

    def replace_index(self, section_id: int, stamp: str, rows: list[IndexRow]) -> None: ...


VIDEO_SECTION_TYPES = ("movie",)
_KIND = {"show": "a TV show library", "artist": "a music library", "photo": "a photo library"}
STALE_S = 30.0


def missing_sections(available: list[SectionInfo], wanted: tuple[str, ...]) -> list[str]:
    """The names in ``wanted`` that no section has (titles compared trimmed, in any case)."""
    titles = {s.title.strip().lower() for s in available}
    return [name for name in wanted if name.strip().lower() not in titles]


def pick_sections(available: list[SectionInfo], wanted: tuple[str, ...]) -> list[SectionInfo]:
    """The configured sections (all movie/video sections when none are named)."""
    if not wanted:
        return [s for s in available if s.type in VIDEO_SECTION_TYPES]
    by_title = {s.title.strip().lower(): s for s in available}
    missing = missing_sections(available, wanted)
    if missing:
        names = ", ".join(repr(s.title) for s in available) or "none"
        raise ConfigError(
            f"setting plex_libraries names {', '.join(map(repr, missing))}, which Plex does not have. "
            f"Plex libraries: {names}."
        )
    chosen = [by_title[name.strip().lower()] for name in wanted]
    others = [s for s in chosen if s.type not in VIDEO_SECTION_TYPES]
    if others:
        kinds = ", ".join(f"{s.title!r} ({_KIND.get(s.type, s.type)})" for s in others)
        raise ConfigError(
            f'setting plex_libraries names {kinds}: only movie or video libraries (Plex\'s "Movies" or '
            '"Other Videos") hold scenes. Remove it from plex_libraries.'
        )
    return chosen


class LibraryIndex:
    def __init__(
        self,
        client: PlexClient,
        cache: IndexCache,
        libraries: tuple[str, ...],
        paths: PathMap = AS_IS,
        min_refresh_s: float = 5.0,
        clock=time.monotonic,
    ) -> None:
        self.client, self.cache, self.libraries, self.paths = client, cache, libraries, paths
        self.min_refresh_s, self.clock = min_refresh_s, clock
        self._sections: list[SectionInfo] = []
        self._index: PathIndex | None = None
        self._checked_at = float("-inf")
        self._listed_at: dict[int, float] = {}
        # Threads share one index (the page reader, the writers, a warm-up): one listing
        # at a time, and those who waited for a first listing that failed get its error
        # rather than each asking a Plex that just failed (or hung) once more.
        self._lock = threading.RLock()
        self._attempts = 0
        self._failure: BaseException | None = None
        # While the first listing of a single library runs: the index it builds page by page
        # (then the index itself), so a scene already listed is written before the rest
        # arrives (``early``).
        self._early: PathIndex | None = None
        self._early_lock = threading.Lock()

    @property
    def sections(self) -> list[SectionInfo]:
        """The configured sections as last read: one request when none were, never a listing
        (the scene panel and a pin ask which library an item is in, not what it holds)."""
        if not self._sections:
            with self._lock:  # a listing that runs names them first
                if not self._sections:
                    self._sections = pick_sections(self.client.sections(), self.libraries)
        return self._sections

    @property
    def listing(self) -> bool:
        """Whether the first listing of a single library runs now (``early`` can answer)."""
        return self._early is not None and self._index is None

    def early(self, path: str) -> list[PlexFile]:
        """The files at exactly ``path`` that the first listing has read so far, while it
        runs and only one library is configured (there a path is one item's); otherwise
        none: the caller waits for the whole index."""
        with self._early_lock:
            return self._early.by_path(path) if self._early is not None and self._index is None else []

    def _listed_early(self, section: SectionInfo, rows: list[IndexRow]) -> None:
        with self._early_lock:
            if self._early is None:
                return
            for rating_key, path, size, duration in rows:
                self._early.add(PlexFile(rating_key, section.key, path, size, duration))

    def index(self) -> PathIndex:
        arrived = self._attempts
        with self._lock:
            if self._index is None:
                if self._attempts != arrived and self._failure is not None:
                    raise self._failure
                try:
                    self.refresh(force=True)
                    self._failure = None
                except Exception as exc:
                    self._failure = exc
                    raise
                finally:
                    self._attempts += 1
            assert self._index is not None
            return self._index

    def warm(self) -> None:
        """Build the index now (a task's thread, while Stash is read); a failure is left
        to the callers waiting for it (``index``), who report it as their own."""
        try:
            self.index()
        except Exception:  # raised again to the callers that waited for this listing
            pass

    def refresh(self, force: bool = False, missing: bool = False, relist: bool = False) -> bool:
        """Re-check the sections' stamps; reload the changed ones. True if anything changed.

        ``missing``: a scene's file was not found. Then a section not listed by this
        process for ``STALE_S`` is listed again even with an unchanged stamp (a scan
        that ended within the same second as our last listing leaves scannedAt equal).
        ``relist``: every section is listed again, whatever its stamp (``reload``).
        """
        with self._lock:
            return self._refresh(force, missing, relist)

    def _refresh(self, force: bool, missing: bool, relist: bool) -> bool:
        now = self.clock()
        if not force and now - self._checked_at < self.min_refresh_s:
            return False
        self._checked_at = now
        sections = pick_sections(self.client.sections(), self.libraries)
        changed = self._index is None or [s.stamp for s in sections] != [s.stamp for s in self._sections]
        first = self._index is None and len(sections) == 1
        listed = False
        if first:
            self._sections = sections  # no index yet: a failed listing leaves nothing to compare
            with self._early_lock:
                self._early = PathIndex((), self.paths)
        try:
            for section in sections:
                stale = relist or (missing and now - self._listed_at.get(section.key, float("-inf")) > STALE_S)
                if stale or self.cache.meta(f"index_stamp:{section.key}") != section.stamp:
                    on_page = (lambda rows, s=section: self._listed_early(s, rows)) if first else None
                    self.cache.replace_index(section.key, section.stamp, self.client.list_files(section.key, on_page))
                    self._listed_at[section.key] = now
                    changed = listed = True
            self._sections = sections
            if changed:
                # the first listing's own index when it built one (not read back from the cache)
                built = self._early if first and listed else None
                self._index = built or PathIndex(self._files(sections), self.paths)
        finally:
            if first:
                with self._early_lock:
                    self._early = None
        return changed

    def expect(self, section_key: int) -> None:
        """Plex announced a new item in this section: the next look for a scene not found
        checks the stamps at once and lists this section again, however recent its listing."""
        with self._lock:
            self._checked_at = float("-inf")
            self._listed_at.pop(section_key, None)

    def reload(self) -> None:
        """List every configured section afresh, whatever its stamp says (``reconcile``:
        Plex is the truth, and a restored database can carry an old ``scannedAt``)."""
        self.refresh(force=True, relist=True)

    def _files(self, sections: list[SectionInfo]):
        for section in sections:
            for rating_key, path, size, duration in self.cache.index_rows(section.key):
                yield PlexFile(rating_key, section.key, path, size, duration)

    def section_for(self, plex_path: str) -> SectionInfo | None:
        """The configured section whose location holds ``plex_path`` (for folder scans)."""
        roots = [(location.rstrip("/\\"), section) for section in self.sections for location in section.locations]
        held = [(len(root), section) for root, section in roots if plex_path.startswith((root + "/", root + "\\"))]
        return max(held, key=lambda found: found[0])[1] if held else None

"""Find the Plex item that holds a Stash scene's file, and decide whether to trust it.

``match_scene`` only looks (a ``Match`` graded HIGH/MEDIUM/LOW/NONE); ``choose`` applies
``loose_matching`` (``strict`` is its opposite) and returns a ``Choice`` or raises
``AmbiguousMatch`` / ``PlexNotFound`` saying what was found and what the user can do. Writing
to the wrong Plex item is worse than writing nothing: nothing here takes the first of several.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import NamedTuple, Union

from core.errors import AmbiguousMatch, PlexNotFound
from validation.pathmap import AS_IS, PathMap, basename

DURATION_TOLERANCE_S = 1.0
_FOLDED = PathMap(case_insensitive=True)  # how ``_best_of`` compares trailing folders
# What settles a scene the matcher will not decide, in every message that says so.
CHOOSE = "choose its item in the match inbox on the Stash2Plex page (or run 'python Stash2Plex.py pin <scene> <item>')"


class PlexFile(NamedTuple):
    """One media part in Plex. A multi-part item has one ``PlexFile`` per part. A tuple, not
    a dataclass: the index holds one per file of the library (a third of the memory)."""

    rating_key: int
    section_id: int
    path: str
    size: int | None = None
    duration_ms: int | None = None


@dataclass(frozen=True)
class SceneFile:
    """One file of a Stash scene, as Stash sees it (before path mapping)."""

    path: str
    size: int | None = None
    duration_s: float | None = None

    @classmethod
    def of(cls, files) -> list[SceneFile]:
        """From a Stash scene's files (validation/metadata.py: ``path``, ``size``, ``duration`` in s)."""
        return [cls(path=f.path, size=f.size, duration_s=f.duration) for f in files]


class Confidence(str, Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    NONE = "none"


@dataclass(frozen=True)
class Match:
    """What ``match_scene`` found.

    ``item`` is set for HIGH and MEDIUM. ``candidates`` holds one ``PlexFile`` per
    distinct Plex item. ``looked_for`` holds the mapped path of every scene file.
    ``scene_index`` is the position in ``files`` (the scene's) of the file the candidates were
    found for (``None`` for NONE); ``choose`` compares size and duration with it (``scene_file``).
    """

    confidence: Confidence
    item: PlexFile | None
    candidates: tuple[PlexFile, ...]
    looked_for: tuple[str, ...]
    reason: str
    scene_index: int | None = None
    files: tuple[SceneFile, ...] = ()

    @property
    def scene_file(self) -> SceneFile | None:
        i = self.scene_index
        return self.files[i] if i is not None and i < len(self.files) else None


@dataclass(frozen=True)
class Choice:
    """The Plex file to write to and why it was accepted (for the log)."""

    item: PlexFile
    reason: str


# One file, or a list of several: most paths and names are held by one file, and a list
# per key would double the index's memory (100,000 files: tests/bench/bench.py scale --huge).
_Slot = Union[PlexFile, list[PlexFile]]


def _add(table: dict[str, _Slot], key: str, file: PlexFile) -> None:
    have = table.get(key)
    if have is None:
        table[key] = file
    elif isinstance(have, list):
        have.append(file)
    else:
        table[key] = [have, file]


def _listed(slot: _Slot | None) -> list[PlexFile]:
    if slot is None:
        return []
    return list(slot) if isinstance(slot, list) else [slot]


class PathIndex:
    """Plex files by full path and by file name, compared by ``paths.key``; ``paths`` also
    maps a scene's files onto it (``match_scene``)."""

    def __init__(self, files: Iterable[PlexFile], paths: PathMap = AS_IS) -> None:
        self.paths = paths
        self._by_path: dict[str, _Slot] = {}
        self._by_name: dict[str, _Slot] = {}
        self._count = 0
        for file in files:
            self.add(file)

    def add(self, file: PlexFile) -> None:
        _add(self._by_path, self.paths.key(file.path), file)
        _add(self._by_name, self.paths.key(basename(file.path)), file)
        self._count += 1

    def by_path(self, path: str) -> list[PlexFile]:
        """Every Plex file whose path equals ``path`` (after normalization)."""
        return _listed(self._by_path.get(self.paths.key(path)))

    def by_name(self, name: str) -> list[PlexFile]:
        """Every Plex file whose file name equals ``name`` (a bare name or a path's last part)."""
        return _listed(self._by_name.get(self.paths.key(basename(name) or name)))

    def files(self) -> Iterable[PlexFile]:
        """Every file the index holds."""
        for slot in self._by_path.values():
            yield from _listed(slot)

    def rating_keys(self) -> set[int]:
        """Every item the index holds."""
        return {f.rating_key for f in self.files()}

    def __len__(self) -> int:
        return self._count


def distinct_items(files: Iterable[PlexFile]) -> tuple[PlexFile, ...]:
    """One file per Plex item: the parts of one multi-part item are one candidate."""
    seen: dict[int, PlexFile] = {}
    for file in files:
        seen.setdefault(file.rating_key, file)
    return tuple(seen.values())


def _paths(files: Iterable[PlexFile]) -> str:
    return ", ".join(f"{f.path} (item {f.rating_key}, section {f.section_id})" for f in files)


def match_scene(files: Sequence[SceneFile], index: PathIndex) -> Match:
    """Grade how well the index holds the scene's files.

    Every scene file is tried in order (primary first); the first file with an exact
    path hit decides. HIGH: it is held by exactly one Plex item. LOW: by several. With
    no exact hit for any file, the first file whose name appears in the index decides:
    MEDIUM for one item, LOW for several. NONE when neither finds anything. The files
    are mapped with the index's ``PathMap``.
    """
    files = tuple(files)
    looked_for = tuple(index.paths.map(f.path) for f in files)
    for i, path in enumerate(looked_for):
        items = distinct_items(index.by_path(path))
        if len(items) == 1:
            return Match(Confidence.HIGH, items[0], items, looked_for, f"exact path {path}", i, files)
        if items:
            reason = f"{len(items)} Plex items hold {path}: {_paths(items)}"
            return Match(Confidence.LOW, None, items, looked_for, reason, i, files)
    for i, path in enumerate(looked_for):
        items = distinct_items(index.by_name(path))
        name = basename(path)
        if len(items) == 1:
            reason = f"no Plex item at {path}; only file named '{name}' is {items[0].path}"
            return Match(Confidence.MEDIUM, items[0], items, looked_for, reason, i, files)
        if items:
            reason = f"no Plex item at {path}; {len(items)} items have a file named '{name}': {_paths(items)}"
            return Match(Confidence.LOW, None, items, looked_for, reason, i, files)
    return Match(Confidence.NONE, None, (), looked_for, f"no Plex item at {', '.join(looked_for)}", None, files)


def size_agrees(plex: PlexFile, scene: SceneFile) -> bool | None:
    """True/False when both sides report a size, ``None`` when one does not."""
    return None if plex.size is None or scene.size is None else plex.size == scene.size


def duration_agrees(plex: PlexFile, scene: SceneFile) -> bool | None:
    """True/False (within 1 s) when both sides report a duration, else ``None``."""
    if plex.duration_ms is None or scene.duration_s is None:
        return None
    return abs(plex.duration_ms / 1000.0 - scene.duration_s) <= DURATION_TOLERANCE_S


def contradicted(plex: PlexFile, scene: SceneFile) -> bool:
    """True when a size or duration both sides report disagrees."""
    return size_agrees(plex, scene) is False or duration_agrees(plex, scene) is False


def _evidence(plex: PlexFile, scene: SceneFile) -> str:
    """Both sides' size and duration, for messages, in the units a person reads
    (exact bytes when the rounded sizes would look the same but differ)."""
    exact = plex.size != scene.size and _size_text(plex.size) == _size_text(scene.size)

    def size(value: int | None) -> str:
        return "size unknown" if value is None else f"{value:,} bytes" if exact else _size_text(value)

    plex_s = None if plex.duration_ms is None else plex.duration_ms / 1000.0
    return (
        f"in Plex {size(plex.size)}, {_duration_text(plex_s)}; "
        f"in Stash {size(scene.size)}, {_duration_text(scene.duration_s)}"
    )


def _size_text(value: int | None) -> str:
    """A size in user's words.

    >>> _size_text(512_000_000), _size_text(900)
    ('488.3 MB', '900 bytes')
    """
    if value is None:
        return "unknown"
    amount, unit = float(value), "bytes"
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if amount < 1024 or unit == "TB":
            break
        amount /= 1024
    return f"{value} bytes" if unit == "bytes" else f"{amount:.1f} {unit}"


def _duration_text(seconds: float | None) -> str:
    """A length in user's words.

    >>> _duration_text(900.0), _duration_text(3723.4), _duration_text(None)
    ('15:00 long', '1:02:03.4 long', 'length unknown')
    """
    if seconds is None:
        return "length unknown"
    tenths = round(seconds * 10)
    hours, left = divmod(tenths // 10, 3600)
    minutes, secs = divmod(left, 60)
    text = f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
    return text + (f".{tenths % 10}" if tenths % 10 else "") + " long"


def choose(match: Match, strict: bool = True) -> Choice:
    """Accept a match under ``loose_matching`` (``strict`` = not loose), or raise saying why not.

    HIGH is always accepted; NONE raises ``PlexNotFound`` (the retry waits for a scan). MEDIUM:
    strict accepts it only when size or duration (within 1 s) confirms it, loose unless evidence
    contradicts. LOW: strict refuses, loose accepts one clearly best candidate (``_best_of``). A
    differing size or duration vetoes a name match in either mode. Refusals raise
    ``AmbiguousMatch`` naming every candidate path.
    """
    if match.confidence is Confidence.NONE:
        raise PlexNotFound(
            f"No Plex item has the scene's file; looked for {', '.join(match.looked_for)}. "
            "If Plex has not scanned it yet this resolves itself; otherwise check path_map.",
            looked_for=match.looked_for,
        )
    scene = match.scene_file
    if match.confidence is Confidence.HIGH and match.item is not None:
        return Choice(match.item, match.reason)
    if match.confidence is Confidence.MEDIUM and match.item is not None:
        return _choose_medium(match, match.item, scene, strict)
    if not strict and scene is not None:
        best = _best_of(match.candidates, scene, match.looked_for[match.scene_index or 0])
        if best is not None:
            return best
    raise _ambiguous(match)


def _choose_medium(match: Match, item: PlexFile, scene: SceneFile | None, strict: bool) -> Choice:
    if scene is not None and contradicted(item, scene):
        raise AmbiguousMatch(
            f"{match.reason}, but it is another video ({_evidence(item, scene)}). "
            f"Fix path_map so the scene's path equals the Plex path, or {CHOOSE}.",
            candidates=(item.path,),
        )
    if not strict:
        return Choice(item, f"{match.reason}; accepted by file name (loose_matching on)")
    if scene is not None and (size_agrees(item, scene) or duration_agrees(item, scene)):
        return Choice(item, f"{match.reason}; {_evidence(item, scene)}")
    evidence = _evidence(item, scene) if scene is not None else "no scene file to compare"
    raise AmbiguousMatch(
        f"{match.reason}, but it is not confirmed ({evidence}). "
        f"{CHOOSE[0].upper()}{CHOOSE[1:]}, fix path_map so the scene's path equals the Plex path, or turn loose_matching on.",
        candidates=(item.path,),
    )


def _ambiguous(match: Match) -> AmbiguousMatch:
    return AmbiguousMatch(
        f"{match.reason}. None is clearly the scene's file: {CHOOSE}, remove the duplicates "
        "in Plex, or fix path_map so the scene's path equals exactly one Plex path.",
        candidates=tuple(c.path for c in match.candidates),
    )


def _best_of(candidates: Sequence[PlexFile], scene: SceneFile, mapped: str) -> Choice | None:
    """The one clearly best candidate, or ``None``.

    First: the only candidate whose size AND duration both agree. Otherwise: the only
    candidate sharing the most trailing path components with the mapped scene path,
    unless its size or duration contradicts the scene's.
    """
    agreeing = [c for c in candidates if size_agrees(c, scene) and duration_agrees(c, scene)]
    if len(agreeing) == 1:
        return Choice(agreeing[0], f"only candidate whose size and duration agree, of: {_paths(candidates)}")
    scores = {c.rating_key: _FOLDED.shared_tail(c.path, mapped) for c in candidates}
    top = max(scores.values(), default=0)
    winners = [c for c in candidates if scores[c.rating_key] == top]
    if len(winners) == 1 and not contradicted(winners[0], scene):
        return Choice(
            winners[0], f"only candidate sharing {top} trailing path components with {mapped}, of: {_paths(candidates)}"
        )
    return None


# -- the diagnosis ------------------------------------------------------------------------
class Candidate(NamedTuple):
    """An item one of the scene's files could be, and the evidence for and against it."""

    rating_key: int
    path: str
    section_id: int
    by: str  # exact path | same file name
    size_agrees: bool | None
    duration_agrees: bool | None


@dataclass(frozen=True)
class Diagnosis:
    """Where a scene's files lead in the index and what ``choose`` makes of it: the one answer
    to "which item is this scene's, and if none, why?" that a sync and a preview (``chosen``
    raises the refusal), ``inspect``, ``unmatched`` with Health check's count and the inbox's
    candidates give."""

    match: Match
    choice: Choice | None
    problem: PlexNotFound | AmbiguousMatch | None
    index: PathIndex = field(repr=False, compare=False)

    def chosen(self) -> Choice:
        """The item accepted, or the refusal raised (``PlexNotFound``, ``AmbiguousMatch``)."""
        if self.choice is None:
            assert self.problem is not None
            raise self.problem
        return self.choice

    @property
    def decision(self) -> str:
        if self.choice is not None:
            return f"item {self.choice.item.rating_key}: {self.choice.reason}"
        return f"no item: {self.problem}"

    @cached_property
    def candidates(self) -> tuple[Candidate, ...]:
        """Every item a mapped path or its file name finds, once, with the evidence of the scene
        file it was found for."""
        seen: dict[int, Candidate] = {}
        for scene, path in zip(self.match.files, self.match.looked_for):
            for by, hits in (("exact path", self.index.by_path(path)), ("same file name", self.index.by_name(path))):
                for hit in hits:
                    if hit.rating_key not in seen:
                        evidence = size_agrees(hit, scene), duration_agrees(hit, scene)
                        seen[hit.rating_key] = Candidate(hit.rating_key, hit.path, hit.section_id, by, *evidence)
        return tuple(seen.values())


def diagnose(files: Sequence[SceneFile], index: PathIndex, strict: bool = True) -> Diagnosis:
    """``match_scene`` and ``choose`` (``strict`` = not ``loose_matching``) as one answer."""
    match = match_scene(files, index)
    try:
        return Diagnosis(match, choose(match, strict), None, index)
    except (PlexNotFound, AmbiguousMatch) as exc:
        return Diagnosis(match, None, exc, index)

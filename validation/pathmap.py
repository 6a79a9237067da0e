"""Translate Stash file paths into the paths Plex sees, and compare paths: ``PathMap``.

``path_map`` lists prefix rules (``/data=/media/stash;C:\\Videos=/mnt/videos``) for files mounted
at different places (Docker volumes, a Windows share seen from Linux). A path is an *anchor*
(``/`` POSIX, ``C:`` drive, ``//`` UNC ``\\\\server\\share``) plus components. Windows-style paths
accept ``\\`` and ``/`` as separators, POSIX paths only ``/`` (a backslash is legal in a POSIX name).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import takewhile

__all__ = ["AS_IS", "PathMap", "PathRule", "basename", "parent", "parse_path_map"]

_FORM = "write stash_prefix=plex_prefix, rules separated by ';' (e.g. /data=/media/stash)"
_DRIVE = re.compile(r"^[A-Za-z]:(?=[\\/]|$)")
_UNC = re.compile(r"^[\\/]{2}(?=[^\\/])")


@dataclass(frozen=True)
class PathRule:
    """Paths under ``stash_prefix`` in Stash are under ``plex_prefix`` in Plex."""

    stash_prefix: str
    plex_prefix: str


def parse_path_map(text: str | None) -> tuple[PathRule, ...]:
    """Parse the ``path_map`` setting; empty or ``None`` means no rules (identity).

    Whitespace around rules and prefixes is trimmed and empty rules (``a=b;;``) are
    skipped. Raises ``ValueError`` naming the rule (counted from 1 among non-empty
    rules) when it has no ``=``, an empty side, or repeats an earlier Stash prefix.

    >>> parse_path_map(" /data = /media ; ")
    (PathRule(stash_prefix='/data', plex_prefix='/media'),)
    """
    rules: list[PathRule] = []
    seen: dict[tuple[str, ...], int] = {}
    pieces = [piece.strip() for piece in (text or "").split(";")]
    for number, piece in enumerate((p for p in pieces if p), start=1):
        rule = _parse_rule(number, piece)
        key = _split(rule.stash_prefix)
        if key in seen:
            raise ValueError(
                f"path_map rule {number} '{piece}' repeats the Stash prefix of rule {seen[key]}; "
                "keep one rule per Stash prefix"
            )
        seen[key] = number
        rules.append(rule)
    return tuple(rules)


def _parse_rule(number: int, piece: str) -> PathRule:
    stash, eq, plex = (part.strip() for part in piece.partition("="))
    if not eq:
        raise ValueError(f"path_map rule {number} '{piece}' has no '='; {_FORM}")
    for side, value in (("Stash", stash), ("Plex", plex)):
        if not value:
            raise ValueError(f"path_map rule {number} '{piece}' has an empty {side} prefix; {_FORM}")
    return PathRule(stash, plex)


def is_windows_path(path: str) -> bool:
    """True for drive paths (``C:\\x``, ``C:/x``, ``C:``) and UNC paths (``\\\\server\\share``)."""
    return bool(_DRIVE.match(path) or _UNC.match(path))


def _split(path: str) -> tuple[str, ...]:
    """Anchor plus non-empty components; duplicate and trailing separators vanish.

    The anchor is ``'/'``, an upper-cased drive such as ``'C:'``, ``'//'`` for UNC, or
    ``''`` for a relative path.
    """
    if is_windows_path(path):
        drive = _DRIVE.match(path)
        anchor = drive.group(0).upper() if drive else "//"
        rest = path[len(anchor) :] if drive else path[2:]
        parts = re.split(r"[\\/]+", rest)
    else:
        anchor = "/" if path.startswith("/") else ""
        parts = path.split("/")
    return (anchor, *(part for part in parts if part))


def _key(parts: tuple[str, ...], case_insensitive: bool) -> tuple[str, ...]:
    parts = tuple(unicodedata.normalize("NFC", part) for part in parts)
    return tuple(part.casefold() for part in parts) if case_insensitive else parts


def _join(prefix: str, rest: tuple[str, ...]) -> str:
    """Append ``rest`` to ``prefix`` with the prefix's own separator style."""
    windows = is_windows_path(prefix)
    sep = "/" if not windows or ("/" in prefix and "\\" not in prefix) else "\\"
    base = prefix.rstrip("/\\" if windows else "/") or prefix
    if not rest or base.endswith(("/", "\\")):
        return base + sep.join(rest)
    return base + sep + sep.join(rest)


@dataclass(frozen=True)
class PathMap:
    """The ``path_map`` rules and the case rule (``case_insensitive_paths``), one value built
    with the settings: how a Stash path becomes Plex's (``map``), the key two paths compare
    by (``key``), a rule suggested from file pairs (``suggest``).

    >>> str(PathMap.parse("C:\\\\Videos=/data; /x=/y"))
    'C:\\\\Videos=/data; /x=/y'
    """

    rules: tuple[PathRule, ...] = ()
    case_insensitive: bool = False

    @classmethod
    def parse(cls, text: str | None, case_insensitive: bool = False) -> PathMap:
        return cls(parse_path_map(text), case_insensitive)

    def __str__(self) -> str:
        return "; ".join(f"{r.stash_prefix}={r.plex_prefix}" for r in self.rules)

    def plus(self, rule: str) -> PathMap:
        """These rules with ``rule`` (``stash_prefix=plex_prefix``) in front."""
        return PathMap(parse_path_map(rule) + self.rules, self.case_insensitive)

    def map(self, path: str) -> str:
        """The Plex path of a Stash path; unchanged when no rule matches.

        A rule matches the path's leading components (``/data`` matches ``/data/x``, not
        ``/database/x``); the rule with the most components wins; trailing separators do not
        matter. The rest is joined with the Plex prefix's separator. Drive letters compare
        case-insensitively, the rest only with ``case_insensitive``.

        >>> PathMap.parse("C:\\\\Videos=/data").map("C:\\\\Videos\\\\a.mp4")
        '/data/a.mp4'
        """
        parts = _split(path)
        key = _key(parts, self.case_insensitive)
        prefixes = ((_key(_split(rule.stash_prefix), self.case_insensitive), rule) for rule in self.rules)
        held = [(len(prefix), rule) for prefix, rule in prefixes if key[: len(prefix)] == prefix]
        if not held:
            return path
        size, rule = max(held, key=lambda found: found[0])
        return _join(rule.plex_prefix, parts[size:])

    def key(self, path: str) -> str:
        """The key two paths are compared by.

        Separators become ``/``, duplicate and trailing separators go, the drive letter is
        upper-cased, Unicode is NFC (macOS stores decomposed names) and, when
        ``case_insensitive``, the text is casefolded. UNC keeps its leading ``//``.

        >>> PathMap().key("c:\\\\Videos\\\\\\\\Sub\\\\")
        'C:/Videos/Sub'
        """
        anchor, *parts = _key(_split(path), self.case_insensitive)
        return (anchor if anchor in ("", "/", "//") else anchor + "/") + "/".join(parts)

    def suggest(self, pairs: Sequence[tuple[str, str]]) -> str | None:
        """A ``stash_prefix=plex_prefix`` rule explaining the most (Stash path, Plex path) pairs.

        Each pair is a Stash and a Plex file of one name; its candidate rule swaps the leading
        folders where they differ. The candidate mapping the most distinct Stash paths onto a
        paired Plex path wins (ties: more pairs, then the shorter Stash prefix). ``None`` when
        no pair yields a rule.

        >>> PathMap().suggest([("/mnt/nas/videos/a/x.mp4", "/plex/media/a/x.mp4"),
        ...                    ("/mnt/nas/videos/y.mp4", "/plex/media/y.mp4")])
        '/mnt/nas/videos=/plex/media'
        """
        targets: dict[str, set[str]] = {}
        for stash, plex in pairs:
            targets.setdefault(stash, set()).add(self.key(plex))
        derived = Counter(rule for s, p in pairs if (rule := self._derive(s, p)) is not None)
        if not derived:
            return None

        def explained(rule: PathRule) -> int:
            one = PathMap((rule,), self.case_insensitive)
            return sum(self.key(one.map(s)) in plex for s, plex in targets.items())

        best = max(derived, key=lambda r: (explained(r), derived[r], -len(_split(r.stash_prefix))))
        return f"{best.stash_prefix}={best.plex_prefix}" if explained(best) else None

    def shared_tail(self, a: str, b: str) -> int:
        """How many trailing components (folders and the file name) ``a`` and ``b`` share."""
        left, right = _key(_split(a)[1:], self.case_insensitive), _key(_split(b)[1:], self.case_insensitive)
        return sum(1 for _ in takewhile(lambda pair: pair[0] == pair[1], zip(reversed(left), reversed(right))))

    def _derive(self, stash: str, plex: str) -> PathRule | None:
        """The rule that maps ``stash`` onto ``plex`` by replacing only their differing leading folders."""
        s_parts, p_parts = _split(stash)[1:], _split(plex)[1:]
        common = self.shared_tail(stash, plex)
        if common == 0:
            return None
        s_prefix, p_prefix = _prefix(stash, len(s_parts) - common), _prefix(plex, len(p_parts) - common)
        if not s_prefix or not p_prefix or self.key(s_prefix) == self.key(p_prefix):
            return None
        return PathRule(s_prefix, p_prefix) if _writable(s_prefix, p_prefix) else None


def _writable(stash_prefix: str, plex_prefix: str) -> bool:
    """Whether the ``path_map`` setting can hold this rule (a folder named with ';', or '='
    before the Plex side, would read as other rules: the suggestion would not do what it says)."""
    try:
        return parse_path_map(f"{stash_prefix}={plex_prefix}") == (PathRule(stash_prefix, plex_prefix),)
    except ValueError:
        return False


def basename(path: str) -> str:
    """The last component of a POSIX or Windows-style path (``''`` for a bare root)."""
    parts = _split(path)
    return parts[-1] if len(parts) > 1 else ""


def parent(path: str) -> str:
    """The folder ``path`` is in, written with its own anchor and separators."""
    return _prefix(path, len(_split(path)) - 2)


def _prefix(path: str, keep: int) -> str:
    """``path`` up to its first ``keep`` components, written with its own anchor and separators."""
    anchor, *parts = _split(path)
    sep = "\\" if is_windows_path(path) and "\\" in path else "/"
    anchor = path[:2] if anchor == "//" else anchor + sep if _DRIVE.match(anchor) else anchor
    return anchor + sep.join(parts[:keep])


AS_IS = PathMap()  # no rules, case counts: paths compared as they are

"""The Stash releases Stash2Plex supports, and what differs between them (the one place).

v0.25.0 (``MIN_STASH_VERSION``) to ``NEWEST_TESTED``, each query checked against every release's
schema (tests/test_stash_releases.py); older is refused (``refusal``), newer used as the newest.
From stashapp/stash's tags: ``findScenes(ids:)`` and ``plugins(include:)`` since v0.25.0
(graphql/schema/schema.graphql); ``Scene.groups`` since v0.27.0, ``Scene.movies`` before, same
ids (pkg/sqlite/migrations/65_movie_group_rename.up.sql); from v0.27.0 a group change fires
``Group.*.Post`` then ``Movie.*.Post`` (internal/api/resolver_mutation_group.go ``GroupUpdate``,
pkg/plugin/hook/hooks.go); from v0.30.0 a date may be partial (pkg/models/date.go ``ParseDate``).
"""

from __future__ import annotations

import re

Version = tuple[int, int, int]

MIN_STASH_VERSION: Version = (0, 25, 0)
NEWEST_TESTED: Version = (0, 30, 1)
GROUPS_SINCE: Version = (0, 27, 0)
PARTIAL_DATES_SINCE: Version = (0, 30, 0)

# The one selection of a scene's groups, and how releases before GROUPS_SINCE spell it.
GROUPS_SELECTION = "groups { group { id name } }"
MOVIES_SELECTION = "movies { movie { id name } }"
_VERSION_RE = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> Version | None:
    """``"v0.27.2-0-gabc"`` → ``(0, 27, 2)``; None when the text names no version.

    >>> parse_version("v0.25.0"), parse_version("0.30"), parse_version("unknown")
    ((0, 25, 0), (0, 30, 0), None)
    """
    match = _VERSION_RE.match(text.strip())
    if match is None:
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def dotted(version: Version) -> str:
    """``(0, 25, 0)`` → ``"0.25.0"``."""
    return ".".join(map(str, version))


def refusal(found: Version) -> str | None:
    """Why this server cannot be used (None when it can): its version and what to do.

    A build that does not say its version (``(0, 0, 0)``) is used: the queries decide.

    >>> refusal((0, 24, 3))
    'Stash2Plex needs Stash 0.25.0 or later; this server is 0.24.3. Update Stash to 0.25.0 or later (Settings → About shows its version); until then nothing is synced and queued jobs wait.'
    >>> refusal((0, 25, 0)) is None and refusal((0, 0, 0)) is None
    True
    """
    if found == (0, 0, 0) or found >= MIN_STASH_VERSION:
        return None
    return (
        f"Stash2Plex needs Stash {dotted(MIN_STASH_VERSION)} or later; this server is {dotted(found)}. "
        f"Update Stash to {dotted(MIN_STASH_VERSION)} or later (Settings → About shows its version); "
        "until then nothing is synced and queued jobs wait."
    )


def spelled(query: str, found: Version) -> str:
    """``query`` as this release spells it (a scene's groups were its movies before v0.27).

    >>> spelled("scenes { " + GROUPS_SELECTION + " }", (0, 26, 2))
    'scenes { movies { movie { id name } } }'
    """
    if found != (0, 0, 0) and found < GROUPS_SINCE:
        return query.replace(GROUPS_SELECTION, MOVIES_SELECTION)
    return query


def as_groups(scene: dict) -> dict:
    """A scene read with ``MOVIES_SELECTION``, shaped as ``GROUPS_SELECTION`` answers.

    >>> as_groups({"id": "1", "movies": [{"movie": {"id": "4", "name": "M"}, "scene_index": 2}]})
    {'id': '1', 'groups': [{'scene_index': 2, 'group': {'id': '4', 'name': 'M'}}]}
    """
    if "movies" not in scene:
        return scene
    shaped = {k: v for k, v in scene.items() if k != "movies"}
    shaped["groups"] = [
        {**{k: v for k, v in m.items() if k != "movie"}, "group": m.get("movie")}
        for m in scene.get("movies") or []
        if isinstance(m, dict)
    ]
    return shaped

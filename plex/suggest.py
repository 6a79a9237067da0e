"""The ``path_map`` rule to suggest for scenes Plex holds under another folder, and what it
would match: the one copy behind the page's inbox, ``unmatched`` and ``health_check``.

A scene is a source only when no Plex item is at its mapped path and exactly one item has a
file of its name, which size and duration do not contradict (``PathMap.suggest`` derives the
rule from those pairs). A scene several items fit is never a source: choosing between them
is the user's (the inbox). The rule is suggested only when it would match at least
``MIN_AGREEING`` of the given scenes exactly, each to one item, and none of them a scene
several items fit or another video (a wrong item written for good is worse than none).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from core.errors import InvalidMetadata
from plex.matcher import PathIndex, PlexFile, SceneFile, contradicted, distinct_items
from validation.metadata import scene_from_stash

MIN_AGREEING = 2  # one scene's pair is no evidence that a whole folder moved


class Unsettled(NamedTuple):
    """A scene's primary file, as the suggestion reads it."""

    scene_id: int
    title: str
    file: SceneFile


@dataclass(frozen=True)
class RuleSuggestion:
    rule: str  # stash_prefix=plex_prefix
    matches: tuple[tuple[Unsettled, PlexFile], ...]  # the given scenes it would match exactly, each to one item

    def as_dict(self) -> list[dict[str, Any]]:
        return [
            {
                "scene_id": scene.scene_id,
                "title": scene.title,
                "stash_path": scene.file.path,
                "plex_path": item.path,
                "rating_key": item.rating_key,
            }
            for scene, item in self.matches
        ]


def unsettled(raws: Iterable[dict[str, Any]]) -> list[Unsettled]:
    """Stash scenes (GraphQL dicts) as the suggestion reads them; scenes without a file or with
    invalid metadata are left out."""
    found = []
    for raw in raws:
        try:
            scene = scene_from_stash(raw)
        except InvalidMetadata:
            continue
        if scene.files:
            found.append(Unsettled(scene.id, scene.title, SceneFile.of(scene.files[:1])[0]))
    return found


def suggest_rule(scenes: Sequence[Unsettled], index: PathIndex) -> RuleSuggestion | None:
    """The rule in front of the index's ``PathMap``, with every scene of ``scenes`` it would
    match; None when no rule is safe."""
    paths, pairs, several = index.paths, [], set()
    unheld = [scene for scene in scenes if not index.by_path(paths.map(scene.file.path))]
    for scene in unheld:
        named = distinct_items(index.by_name(paths.map(scene.file.path)))
        if len(named) > 1:
            several.add(scene.scene_id)
        elif named and not contradicted(named[0], scene.file):
            pairs.append((scene.file.path, named[0].path))
    rule = paths.suggest(pairs)
    if rule is None:
        return None
    combined = paths.plus(rule)
    matches = []
    for scene in unheld:
        held = distinct_items(index.by_path(combined.map(scene.file.path)))
        if not held:
            continue
        if scene.scene_id in several or len(held) > 1 or contradicted(held[0], scene.file):
            return None  # it would settle a choice that is the user's, or write to another video
        matches.append((scene, held[0]))
    return RuleSuggestion(rule, tuple(matches)) if len(matches) >= MIN_AGREEING else None

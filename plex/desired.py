"""What a scene should look like in Plex under the user's choices (``Desired``).

One value function per Plex field and tag type of the synced fields' table (validation/fields.py
``SYNCED``), reading the scene and the settings; ``desired_for`` leaves out what ``skip_fields``
names. Everything that shapes a write is in the value, so its digest (the ledger's state hash)
changes exactly for the scenes a changed setting affects.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from plex.plan import Desired
from validation.config import Settings
from validation.fields import FIELD, RATING, SYNCED, TAGS, rating_text, render_template
from validation.metadata import MAX_TITLE, SceneMetadata

T = TypeVar("T")


@dataclass(frozen=True)
class Choices:
    """The settings that shape what is written and synced, plus the tags of ``hide_tags`` and
    ``skip_tags`` with all their descendants (case-folded)."""

    settings: Settings
    hidden: frozenset[str] = field(default_factory=frozenset)
    skipped: frozenset[str] = field(default_factory=frozenset)
    # tag id → the ids of all its ancestors, read with the filters (empty without them)
    ancestors: dict[int, frozenset[int]] = field(default_factory=dict)
    # where Plex fetches performer photos (worker/photos.py ``photo_base``); None: no photos
    photo_base: str | None = None

    @classmethod
    def from_tree(
        cls, settings: Settings, tree: dict[int, tuple[str, tuple[int, ...]]] | None, photo_base: str | None = None
    ) -> Choices:
        """``tree``: every Stash tag, id → (name, parent ids) (``StashClient.tag_tree``)."""
        tree = tree or {}
        parents = {name: [tree[p][0] for p in ids if p in tree] for name, ids in tree.values()}
        ancestors = ancestors_of({t: ids for t, (_, ids) in tree.items()})
        return dataclasses.replace(cls.build(settings, parents), ancestors=ancestors, photo_base=photo_base)

    def depends_on(self, scene: SceneMetadata) -> dict[str, tuple[int, ...]]:
        """The entities a scene's item depends on, kind → ids: the scene's own (its studio's
        parent included) and, while tag filters are set, its tags' ancestors, whose move in
        the tree can hide or skip the scene's tags."""
        entities = dict(scene.entities)
        tags = entities.get("tag", ())
        if self.ancestors and tags:
            entities["tag"] = tuple(sorted(set(tags).union(*(self.ancestors.get(t, ()) for t in tags))))
        return entities

    @classmethod
    def build(cls, settings: Settings, tag_parents: dict[str, list[str]] | None = None) -> Choices:
        """``tag_parents``: every Stash tag's name and its parents' names (``StashClient.tag_parents``)."""
        parents = tag_parents or {}
        return cls(
            settings, with_descendants(settings.hide_tags, parents), with_descendants(settings.skip_tags, parents)
        )


def _reached(starts: Iterable[T], edges: Mapping[T, Iterable[T]]) -> set[T]:
    """Every node reached from ``starts`` along ``edges`` (cycles are harmless)."""
    found: set[T] = set()
    todo = list(starts)
    while todo:
        for following in edges.get(todo.pop(), ()):
            if following not in found:
                found.add(following)
                todo.append(following)
    return found


def with_descendants(names: tuple[str, ...], tag_parents: dict[str, list[str]]) -> frozenset[str]:
    """``names`` and every tag below them in Stash's tag tree, case-folded."""
    children: dict[str, set[str]] = {}
    for child, parents in tag_parents.items():
        for parent in parents:
            children.setdefault(parent.casefold(), set()).add(child.casefold())
    found = {n.casefold() for n in names}
    return frozenset(found | _reached(found, children))


def ancestors_of(parents: dict[int, tuple[int, ...]]) -> dict[int, frozenset[int]]:
    """Each tag's ancestors from each tag's parents.

    >>> ancestors_of({1: (), 2: (1,), 3: (2,), 4: (3, 1)})[4] == {1, 2, 3}
    True
    """
    return {tag: frozenset(_reached([tag], parents) - {tag}) for tag in parents}


def plex_rating(rating100: int | None) -> str:
    """Stash's 1-100 as Plex's 0-10 rating, to the nearest 0.5 (73 → 7.5; empty for none).

    Plex takes any rating from 0 to 10 (plexapi ``rate``) and keeps 7.5 as given, so 75
    comes back to Stash; its apps draw five stars in halves (a half star is 1.0), so they
    show such a value rounded to a half star.
    """
    return "" if rating100 is None else rating_text(round(rating100 / 5) / 2)


def file_stem(scene: SceneMetadata) -> str:
    name = re.split(r"[\\/]", scene.files[0].path)[-1] if scene.files else ""
    return posixpath.splitext(name)[0]


def template_values(scene: SceneMetadata) -> dict[str, str]:
    return {
        "title": scene.title or file_stem(scene),
        "studio": scene.studio,
        "parent_studio": scene.parent_studio,
        "date": scene.date,
        "year": scene.date[:4],
        "code": scene.code,
        "director": scene.director,
        "performers": ", ".join(scene.performers),
        "file_name": file_stem(scene),
    }


def _collections(scene: SceneMetadata, sources: tuple[str, ...]) -> tuple[str, ...]:
    found = {"studio": (scene.studio,), "parent_studio": (scene.parent_studio,), "groups": scene.groups}
    names = [n for source in sources for n in found[source] if n]
    return tuple(dict.fromkeys(names))


def _templated(template: str, scene: SceneMetadata) -> str | None:
    """The template filled in with the scene's values; None without a template or when it comes out empty."""
    return (render_template(template, template_values(scene))[:MAX_TITLE] or None) if template else None


def _title(scene: SceneMetadata, choices: Choices) -> str | None:
    template = choices.settings.title_template
    return _templated(template, scene) if template else scene.title or None


def _tags_as(scene: SceneMetadata, choices: Choices, kind: str) -> tuple[str, ...]:
    if choices.settings.tags_as not in (kind, "both"):
        return ()
    return tuple(t for t in scene.tags if t.casefold() not in choices.hidden)


# Plex field → its value (None: Stash2Plex leaves the field alone; "": Stash has nothing).
# A month or a year (Stash v0.30+ partial dates) is a year and no day: Plex's date is then
# what Stash has nothing for (the day Stash2Plex wrote before is cleared, one the user put
# in Plex stays), never a made-up first of the month.
FIELD_VALUES: dict[str, Callable[[SceneMetadata, Choices], str | None]] = {
    "title": _title,
    "titleSort": lambda scene, choices: _templated(choices.settings.sort_title_template, scene),
    "summary": lambda scene, _: scene.details,
    "tagline": lambda scene, choices: scene.code if choices.settings.tagline_from_code else None,
    "originallyAvailableAt": lambda scene, _: scene.date if len(scene.date) == len("YYYY-MM-DD") else "",
    "year": lambda scene, _: scene.date[:4],
    "studio": lambda scene, _: scene.studio,
    "contentRating": lambda _, choices: choices.settings.content_rating or None,
    RATING: lambda scene, _: plex_rating(scene.rating100),
}
# Plex tag type → the tags it should hold.
TAG_VALUES: dict[str, Callable[[SceneMetadata, Choices], tuple[str, ...]]] = {
    "actor": lambda scene, _: scene.performers,
    "director": lambda scene, _: tuple(dict.fromkeys(d.strip() for d in scene.director.split(",") if d.strip())),
    "genre": lambda scene, choices: _tags_as(scene, choices, "genres"),
    "label": lambda scene, choices: _tags_as(scene, choices, "labels"),
    "collection": lambda scene, choices: _collections(scene, choices.settings.collections),
}


def photos(scene: SceneMetadata, choices: Choices) -> dict[str, str]:
    """Performer name → the URL Plex fetches its photo from: Stash's image route on
    ``photo_base``, for the performers with an image of their own (``performer_photos``)."""
    if choices.photo_base is None or not choices.settings.writes("performers"):
        return {}
    return {name: choices.photo_base + route for name, route in scene.performer_images.items()}


def desired_for(scene: SceneMetadata, choices: Choices) -> Desired:
    """The Plex item this scene should show under ``choices``."""
    writes = choices.settings.writes
    return Desired(
        fields={
            row.plex: FIELD_VALUES[row.plex](scene, choices) if writes(row.name) else None
            for row in SYNCED
            if row.kind == FIELD
        },
        tags={
            row.plex: TAG_VALUES[row.plex](scene, choices) for row in SYNCED if row.kind == TAGS and writes(row.name)
        },
        poster_url=scene.screenshot if writes("poster") else None,
        photos=photos(scene, choices),
    )

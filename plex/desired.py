"""What a scene should look like in Plex under the user's choices (``Desired``).

``desired_from`` (plex/plan.py) maps a scene to the fields Stash2Plex always had;
this module applies the settings on top: the fields left out (``skip_fields``), the
rating, director, content rating and tagline, tags as genres or labels minus hidden
tags, the collection sources, and the title templates. Everything that shapes what
is written is in the returned value, so its digest (the ledger's state hash) changes
exactly for the scenes a changed setting affects.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from plex.client import RATING, rating_text
from plex.plan import Desired, desired_from
from validation.config import Settings
from validation.fields import render_template
from validation.metadata import MAX_TITLE, SceneMetadata

# skip_fields name -> the Plex field or tag type it covers
_FIELD_KEYS = {
    "title": "title",
    "sort_title": "titleSort",
    "summary": "summary",
    "tagline": "tagline",
    "date": "originallyAvailableAt",
    "studio": "studio",
    "content_rating": "contentRating",
    "rating": RATING,
}
_TAG_KEYS = {"performers": ("actor",), "director": ("director",), "tags": ("genre", "label")}


@dataclass(frozen=True)
class Choices:
    """The settings that shape what is written and synced, plus the tags of ``hide_tags`` and
    ``skip_tags`` with all their descendants (case-folded)."""

    settings: Settings
    hidden: frozenset[str] = field(default_factory=frozenset)
    skipped: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def build(cls, settings: Settings, tag_parents: dict[str, list[str]] | None = None) -> Choices:
        """``tag_parents``: every Stash tag's name and its parents' names (``StashClient.tag_parents``)."""
        parents = tag_parents or {}
        return cls(
            settings, with_descendants(settings.hide_tags, parents), with_descendants(settings.skip_tags, parents)
        )


def with_descendants(names: tuple[str, ...], tag_parents: dict[str, list[str]]) -> frozenset[str]:
    """``names`` and every tag below them in Stash's tag tree, case-folded (cycles are harmless)."""
    children: dict[str, set[str]] = {}
    for child, parents in tag_parents.items():
        for parent in parents:
            children.setdefault(parent.casefold(), set()).add(child.casefold())
    found = {n.casefold() for n in names}
    todo = list(found)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return frozenset(found)


def half_stars(rating100: int | None) -> str:
    """Stash's 1-100 as Plex's 0-10, rounded to a half star (73 → 7.5); empty for none."""
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
    found = {
        "studio": (scene.studio,),
        "parent_studio": (scene.parent_studio,),
        "groups": scene.groups,
    }
    names = [n for source in sources for n in found[source] if n]
    return tuple(dict.fromkeys(names))


def _fields(scene: SceneMetadata, settings: Settings, base: dict[str, str | None]) -> dict[str, str | None]:
    values = template_values(scene)
    out = dict(base)
    if settings.title_template:
        out["title"] = render_template(settings.title_template, values)[:MAX_TITLE] or None
    out["titleSort"] = (
        render_template(settings.sort_title_template, values)[:MAX_TITLE] or None
        if settings.sort_title_template
        else None
    )
    out["tagline"] = scene.code if settings.tagline_from_code else None
    out["contentRating"] = settings.content_rating or None
    out[RATING] = half_stars(scene.rating100)
    for name, key in _FIELD_KEYS.items():
        if not settings.writes(name):
            out[key] = None
    return out


def _tags(scene: SceneMetadata, choices: Choices, base: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    settings = choices.settings
    tags = tuple(t for t in scene.tags if t.casefold() not in choices.hidden)
    out = {
        "genre": tags if settings.tags_as in ("genres", "both") else (),
        "label": tags if settings.tags_as in ("labels", "both") else (),
        "actor": base["actor"],
        "director": tuple(dict.fromkeys(d.strip() for d in scene.director.split(",") if d.strip())),
        "collection": _collections(scene, settings.collections),
    }
    if not settings.writes("collections"):
        del out["collection"]
    for name, keys in _TAG_KEYS.items():
        if not settings.writes(name):
            for key in keys:
                del out[key]
    return out


def desired_for(scene: SceneMetadata, choices: Choices) -> Desired:
    """The Plex item this scene should show under ``choices``."""
    base = desired_from(scene)
    poster = base.poster_url if choices.settings.writes("poster") else None
    return Desired(
        fields=_fields(scene, choices.settings, base.fields),
        tags=_tags(scene, choices, base.tags),
        poster_url=poster,
    )

"""What Stash2Plex writes to Plex, and the settings that choose it, checked once.

``SYNCED`` is the one table of what is written: per row the ``skip_fields`` name, the Plex field
or tag type, the page's label, the Stash fields it reads and the ``SceneUpdateInput`` keys that
can alter it. The Stash query, the hook's field filter, the planner's Plex keys, the reader of
Plex's state and the page's labels derive from it; values are computed in ``plex/desired.py``.
Title templates (``{studio} - {title}``) may use ``TEMPLATE_FIELDS``. Imported by the hook: the
standard library only.
"""

from __future__ import annotations

import re
from collections import namedtuple

FIELD, TAGS, POSTER = "field", "tags", "poster"
RATING = "userRating"  # Plex takes it through plexapi's rate(), not edit()
STUDIO = "studio { id name parent_studio { id name } }"
FILES = "files { path size duration }"
# Read only with performer_photos on: Stash looks each performer's image up to answer it
# (internal/api/resolver_model_performer.go ``ImagePath``), a query per performer per scene.
PHOTO_ONLY = "image_path"
PERFORMERS = f"performers {{ id name {PHOTO_ONLY} }}"


# One thing written to a Plex item: its skip_fields name; the Plex field (edit key) or tag type
# ("poster" for the poster); what the page in Stash's UI calls it; the scene's GraphQL
# selections its value reads; the SceneUpdateInput keys whose change can alter it; its kind.
# A namedtuple: the hook imports this table, and ``collections`` comes with ``re`` already.
Synced = namedtuple("Synced", "name plex label stash inputs kind", defaults=((), (), FIELD))


SYNCED = (
    Synced("title", "title", "Title", ("title",), ("title",)),
    Synced("sort_title", "titleSort", "Sort title"),  # from sort_title_template: TEMPLATE_SOURCES
    Synced("summary", "summary", "Details", ("details",), ("details",)),
    Synced("tagline", "tagline", "Tagline", ("code",), ("code",)),
    Synced("date", "originallyAvailableAt", "Date", ("date",), ("date",)),
    Synced("year", "year", "Year", ("date",), ("date",)),
    Synced("studio", "studio", "Studio", (STUDIO,), ("studio_id",)),
    Synced("content_rating", "contentRating", "Content rating"),  # a setting, the same for every scene
    Synced("rating", RATING, "Rating", ("rating100",), ("rating100",)),
    Synced("performers", "actor", "Performers", (PERFORMERS,), ("performer_ids",), TAGS),
    Synced("director", "director", "Directors", ("director",), ("director",), TAGS),
    Synced("tags", "genre", "Genres", ("tags { id name }",), ("tag_ids",), TAGS),
    Synced("tags", "label", "Labels", ("tags { id name }",), ("tag_ids",), TAGS),
    Synced(
        "collections",
        "collection",
        "Collections",
        (STUDIO, "groups { group { id name } }"),
        ("studio_id", "groups", "movies"),
        TAGS,
    ),
    Synced("poster", "poster", "Poster", ("paths { screenshot }",), ("cover_image",), POSTER),
)
# Template name → (the GraphQL selection it reads, the SceneUpdateInput key that changes it)
TEMPLATE_SOURCES = {
    "title": ("title", "title"),
    "studio": (STUDIO, "studio_id"),
    "parent_studio": (STUDIO, "studio_id"),
    "date": ("date", "date"),
    "year": ("date", "date"),
    "code": ("code", "code"),
    "director": ("director", "director"),
    "performers": (PERFORMERS, "performer_ids"),
    "file_name": (FILES, "primary_file_id"),
}
# What decides whether and where a scene is synced: its files (and which is primary),
# organized_only, skip_tags (its tags), and when Stash last changed it.
SCOPE_SOURCES = ("id", "updated_at", "organized", FILES, "tags { id name }")
SCOPE_INPUTS = ("primary_file_id", "organized", "tag_ids")

FIELDS = tuple(dict.fromkeys(row.name for row in SYNCED))  # the names skip_fields accepts
TEMPLATE_FIELDS = tuple(TEMPLATE_SOURCES)
PLEX_FIELDS = tuple(row.plex for row in SYNCED if row.kind == FIELD)
TAG_TYPES = tuple(row.plex for row in SYNCED if row.kind == TAGS)
LABELS = {row.plex: row.label for row in SYNCED}
# The scene's GraphQL selection: everything any row, template or scope rule reads.
SCENE_SELECTION = " ".join(
    dict.fromkeys(
        (*SCOPE_SOURCES, *(s for row in SYNCED for s in row.stash), *(s for s, _ in TEMPLATE_SOURCES.values()))
    )
)


def scene_selection(photos: bool) -> str:
    """``SCENE_SELECTION`` as the settings need it: without ``PHOTO_ONLY`` when photos are off."""
    return SCENE_SELECTION if photos else SCENE_SELECTION.replace(f" {PHOTO_ONLY} ", " ")


# SceneUpdateInput keys whose change can alter what Plex shows (the hook's filter).
SYNCED_INPUTS = frozenset(
    (*SCOPE_INPUTS, *(k for row in SYNCED for k in row.inputs), *(k for _, k in TEMPLATE_SOURCES.values()))
)


def rating_text(value: float | None) -> str:
    """A Plex user rating (0-10) as the text plans compare; empty for none."""
    return "" if value is None else f"{float(value):.1f}"


TAGS_AS = ("genres", "labels", "both")
COLLECTION_SOURCES = ("studio", "parent_studio", "groups")
NO_COLLECTIONS = "none"
_EMPTY_BRACKETS = re.compile(r"\(\s*\)|\[\s*\]|\{\s*\}")
_EDGE = " -–—|:,;/·"


def names(text: str) -> tuple[str, ...]:
    """Comma-separated names, trimmed, empty ones dropped, repeats removed."""
    return tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))


def _chosen(text: str, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    """The names in ``text`` (lower case), each one of ``allowed``; ValueError naming the others."""
    chosen = tuple(n.lower() for n in names(text))
    unknown = [n for n in chosen if n not in allowed]
    if unknown:
        raise ValueError(f"{', '.join(repr(n) for n in unknown)} is not {what}")
    return chosen


def check_fields(text: str) -> tuple[str, ...]:
    return _chosen(text, FIELDS, f"a field Stash2Plex writes; known fields: {', '.join(FIELDS)}")


def check_choice(text: str, allowed: tuple[str, ...]) -> str:
    value = text.strip().lower()
    if value not in allowed:
        raise ValueError(f"must be one of {', '.join(allowed)}, got {text!r}")
    return value


def check_collections(text: str) -> tuple[str, ...]:
    if tuple(n.lower() for n in names(text)) == (NO_COLLECTIONS,):
        return ()
    sources = ", ".join(COLLECTION_SOURCES)
    return _chosen(
        text, COLLECTION_SOURCES, f"a collection source; use any of {sources} separated by commas, or {NO_COLLECTIONS}"
    )


def check_template(text: str) -> str:
    """A template (trimmed) whose every ``{name}`` is a known field (no formats, no attributes)."""
    import string  # here: the hook imports this module and never checks a template

    text = text.strip()
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise ValueError(
            f"is not a valid template ({exc}); write names in braces, e.g. '{{studio}} - {{title}}'"
        ) from None
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if name not in TEMPLATE_FIELDS or spec or conversion:
            shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            raise ValueError(
                f"{shown} is not a field a template can use; known fields: "
                + ", ".join("{" + f + "}" for f in TEMPLATE_FIELDS)
            )
    return text


def render_template(template: str, values: dict[str, str]) -> str:
    """The template filled in; separators and brackets left empty by a missing value are dropped."""
    text = template.format_map({name: values.get(name, "") for name in TEMPLATE_FIELDS})
    text = " ".join(_EMPTY_BRACKETS.sub("", text).split())
    while text and (text[0] in _EDGE or text[-1] in _EDGE):
        text = text.strip(_EDGE)
    return text

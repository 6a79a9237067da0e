"""What one Stash release does differently, for the emulator to play it.

``StashEmulator(release="v0.25.0")`` answers with that release's real schema (read from
``stash-schema/versions/<tag>/`` of the reference data, tests/reference.py, never copied
into the project), its ``version``, the hooks it fires (that tag's
``pkg/plugin/hook/hooks.go``) and its date rules. Each rule below names the upstream
code it follows (stashapp/stash at the tag).
"""

from __future__ import annotations

import functools
import re
from datetime import date
from pathlib import Path

from graphql import DocumentNode, parse

Version = tuple[int, int, int]

# from v0.27.0 a scene's groups are Scene.groups and SceneUpdateInput has a `groups` key
# beside the deprecated `movies` (graphql/schema/types/scene.graphql, pkg/models/scene.go)
GROUPS_SINCE: Version = (0, 27, 0)
# from v0.30.0 a date may be a year or a month (pkg/models/date.go `ParseDate`, #6359)
PARTIAL_DATES_SINCE: Version = (0, 30, 0)
NEWEST: Version = (0, 30, 1)  # what the emulator plays without a release (its subset schema)
_VERSION_RE = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")
_TRIGGER_RE = re.compile(r'TriggerEnum\s*=\s*"([A-Za-z]+\.[A-Za-z]+\.Post)"')


def versions_dir() -> Path:
    from tests import reference

    return reference.path("stash-schema/versions")


def version_of(text: str) -> Version:
    """``"v0.27.2"`` → ``(0, 27, 2)``; a text naming no version plays the newest."""
    match = _VERSION_RE.match(text.strip())
    if match is None:
        return NEWEST
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def releases() -> list[str]:
    """Every release whose schema and hooks are available, oldest first."""
    if not versions_dir().is_dir():
        return []
    tags = [p.name for p in versions_dir().iterdir() if (p / "schema.graphql").is_file()]
    return sorted(tags, key=version_of)


def release_dir(tag: str) -> Path:
    folder = versions_dir() / tag
    if not (folder / "schema.graphql").is_file():
        raise ValueError(f"no Stash release {tag!r} in {versions_dir()} (there are: {', '.join(releases())})")
    return folder


def schema_sdl(tag: str) -> str:
    """The release's ``graphql/schema/``: ``schema.graphql`` and every ``types/*.graphql``."""
    folder = release_dir(tag)
    parts = [(folder / "schema.graphql").read_text(encoding="utf-8")]
    parts += [p.read_text(encoding="utf-8") for p in sorted((folder / "types").glob("*.graphql"))]
    return "\n".join(parts)


@functools.cache
def schema_document(tag: str) -> DocumentNode:
    """The release's schema, parsed once per process (Stash's own SDL: built with
    ``assume_valid_sdl``; tests/test_stash_releases.py builds each one checked once)."""
    return parse(schema_sdl(tag))


@functools.cache
def triggers(tag: str) -> frozenset[str]:
    """The hook triggers the release can fire (its pkg/plugin/hook/hooks.go ``TriggerEnum``s)."""
    return frozenset(_TRIGGER_RE.findall((release_dir(tag) / "hooks.go").read_text(encoding="utf-8")))


def group_hook_kinds(version: Version, fired: frozenset[str] | None = None) -> tuple[str, ...]:
    """The hook kinds a group's (a movie's) change fires, in order.

    Before v0.27 only ``Movie.*`` (internal/api/resolver_mutation_movie.go
    ``MovieUpdate``); from v0.27 ``Group.*`` and then ``Movie.*`` with the same id and
    input (internal/api/resolver_mutation_group.go ``GroupUpdate``: two
    ``ExecutePostHooks`` calls). ``fired`` (a release's triggers) overrides the version rule.
    """
    if fired is not None:
        return tuple(k for k in ("Group", "Movie") if f"{k}.Update.Post" in fired)
    return ("Group", "Movie") if version >= GROUPS_SINCE else ("Movie",)


def hook_input_keys(keys: tuple[str, ...], version: Version) -> tuple[str, ...]:
    """SceneUpdateInput's JSON keys in this release: no ``groups`` before v0.27
    (pkg/models/scene.go ``SceneUpdateInput`` at v0.25.0 and v0.26.2)."""
    return keys if version >= GROUPS_SINCE else tuple(k for k in keys if k != "groups")


_DAY_FORMS = (
    # utils.ParseDateStringAsTime (pkg/utils/date.go, the same in every release): RFC3339,
    # then "2006-01-02", then "2006-01-02 15:04:05"; Go's layouts take fixed-width digits.
    re.compile(r"(\d{4}-\d{2}-\d{2})T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})"),
    re.compile(r"(\d{4}-\d{2}-\d{2})"),
    re.compile(r"(\d{4}-\d{2}-\d{2}) \d{2}:\d{2}:\d{2}"),
)
_PARTIAL_FORMS = (re.compile(r"(\d{4})-(\d{2})"), re.compile(r"(\d{4})"))


def _day(text: str) -> str | None:
    for form in _DAY_FORMS:
        match = form.fullmatch(text)
        if match is not None:
            try:
                date.fromisoformat(match.group(1))  # Go checks the month and the day in the month
            except ValueError:
                return None
            return match.group(1)  # models.Date.String(): "2006-01-02"
    return None


def is_partial(text: str) -> bool:
    return any(form.fullmatch(text) for form in _PARTIAL_FORMS)


def stored_date(value: str | None, version: Version) -> str | None:
    """What Stash stores (and then answers) for a date a mutation sends; ValueError with
    Stash's message when it refuses it.

    ``changesetTranslator.optionalDate`` (internal/api/changeset_translator.go): null or
    ``""`` clears the date; anything else goes through ``models.ParseDate`` and comes back
    as ``Date.String()``: a day before v0.30.0; from v0.30.0 also a month (``2021-03``) or
    a year (``2021``), answered at that precision (pkg/models/date.go, ``date_precision``
    in pkg/sqlite/scene.go).
    """
    if value is None or value == "":
        return None
    day = _day(value)
    if day is not None:
        return day
    if version < PARTIAL_DATES_SINCE:
        raise ValueError(f"converting date: ParseDateStringAsTime failed: dateString <{value}>")
    for form in _PARTIAL_FORMS:
        match = form.fullmatch(value)
        if match is not None and (len(match.groups()) == 1 or 1 <= int(match.group(2)) <= 12):
            return value
    raise ValueError(f'converting date: failed to parse date "{value}"')


def partial_date_refused(value: str | None, version: Version) -> str | None:
    """Why a scene row cannot hold this date in this release (None when it can): before
    v0.30.0 there is no ``date_precision`` column, so no stored date is partial."""
    if value and version < PARTIAL_DATES_SINCE and is_partial(value):
        return f"Stash {'.'.join(map(str, version))} stores no partial dates ({value!r}); they start with 0.30.0"
    return None

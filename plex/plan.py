"""What to change on a Plex item, computed as a value before anything is written.

``plan_item`` compares what Plex shows, what Stash wants and what Stash2Plex wrote last
(``Written``), per field and tag type; ``edit_params`` makes the plan ONE plexapi ``edit()``.
Tag identity ignores case, as in Plex. Each request fits ``EDIT_URL_BUDGET``: ``edit_batches``
splits, ``fit_plan`` shortens only the summary, ``cut_tags`` serves a proxy's lower limit.
Tag lists mean the same whether Plex replaces or adds (the wanted list with indices, ``-=`` for
tags we wrote that Stash dropped). Rules: docs/architecture.md, write-time invariants 7 and 8.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from core.log import ELLIPSIS, shortened
from plex.client import PlexItemState
from validation.fields import RATING, TAG_TYPES

# Bytes of one edit's request target (path and query, as sent). PMS's own limit is not
# documented; the reverse proxies in front of it refuse a request line (method, target,
# version) above 8,190 bytes by default: Apache's LimitRequestLine, and nginx's
# large_client_header_buffers (4 × 8k, the line and its CRLF in one buffer), answer 414.
REQUEST_LINE_LIMIT = 8190
EDIT_URL_BUDGET = REQUEST_LINE_LIMIT - len("PUT  HTTP/1.1")


@dataclass(frozen=True)
class Desired:
    """What Stash wants the item to show (None, or a tag type absent: Stash2Plex leaves it alone)."""

    fields: dict[str, str | None]
    tags: dict[str, tuple[str, ...]]
    poster_url: str | None
    photos: dict[str, str] = field(default_factory=dict)  # actor → the photo URL Plex fetches

    def digest(self, extra: Any = None) -> str:
        """A hash of everything that shapes a write. The same bytes as hashing
        ``dataclasses.asdict(self)`` (tuples serialise as lists), without its deep copy,
        which cost more than the hash: ``all`` hashes every scene of the library. Without
        photos, the hash is what it was before photos existed (nothing is synced again)."""
        state: dict[str, Any] = {"fields": self.fields, "tags": self.tags, "poster_url": self.poster_url}
        if self.photos:
            state["photos"] = self.photos
        blob = json.dumps([state, extra], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class FieldChange:
    name: str
    plex: str
    stash: str


@dataclass(frozen=True)
class TagChange:
    tag_type: str
    plex: tuple[str, ...]
    result: tuple[str, ...]
    removed: tuple[str, ...]
    photos: dict[str, str] = field(default_factory=dict)  # actor (case-folded) → the photo URL sent with it

    @property
    def added(self) -> list[str]:
        """The tags Plex does not show yet (whatever their letter case)."""
        had = {_key(t) for t in self.plex}
        return [t for t in self.result if _key(t) not in had]

    @property
    def photographed(self) -> list[str]:
        return [t for t in self.result if _key(t) in self.photos]


@dataclass(frozen=True)
class ItemPlan:
    rating_key: int
    fields: tuple[FieldChange, ...]
    tags: tuple[TagChange, ...]
    written_fields: dict[str, str]
    written_tags: dict[str, list[str]]

    @property
    def empty(self) -> bool:
        return not self.fields and not self.tags

    def describe(self) -> list[str]:
        lines = [f"{c.name}: {c.plex!r} → {c.stash!r}" for c in self.fields]
        for change in self.tags:
            parts = {"+": change.added, "-": change.removed, "photo: ": change.photographed}
            lines += [f"{change.tag_type} {sign}{', '.join(names)}" for sign, names in parts.items() if names]
        return lines


def _field_change(name: str, want: str, plex: str, wrote: str | None, preserve: bool) -> FieldChange | None:
    if want == "" and wrote in (None, ""):
        return None  # Stash has nothing and never had: leave Plex's value alone
    if want == "" and plex != wrote:
        return None  # the user changed it in Plex since we wrote it: not ours to clear
    if plex == want or (preserve and plex not in ("", wrote)):
        return None
    return FieldChange(name, plex, want)


def _key(tag: str) -> str:
    """A tag's identity in Plex: its name whatever the letter case."""
    return tag.casefold()


def _tag_change(
    tag_type: str,
    want: tuple[str, ...],
    plex: tuple[str, ...],
    wrote: list[str],
    preserve: bool,
    photos: dict[str, str] | None = None,
) -> TagChange | None:
    """``photos``: sent with the list, so an unchanged list is sent again for them."""
    ours = {_key(t) for t in wrote}
    wanted = {_key(t) for t in want}
    if preserve and plex and not {_key(t) for t in plex} <= ours:
        return None  # Plex holds tags the user put there: fill-only mode leaves them
    removed = tuple(t for t in plex if _key(t) in ours and _key(t) not in wanted)
    gone = {_key(t) for t in removed}
    result = tuple(want) + tuple(t for t in plex if _key(t) not in wanted and _key(t) not in gone)
    if not removed and not photos and {_key(t) for t in result} == {_key(t) for t in plex}:
        return None  # also a case-only rename: Plex keeps one spelling per tag
    return TagChange(tag_type, plex, result, removed, photos or {})


def _photos(desired: Desired, plex: PlexItemState, sent: dict[str, str]) -> dict[str, str]:
    """actor (case-folded) → the photo URL to send with the item's actor list: what Stash wants
    that Plex does not show on this item. Plex keeps one photo per actor for the whole library
    (the last one written wins), so a photo this process sent already (``sent``) is not sent
    again for another item read before it."""
    wanted = {_key(name): url for name, url in desired.photos.items()}
    return {name: url for name, url in wanted.items() if plex.photos.get(name) != url and sent.get(name) != url}


@dataclass(frozen=True)
class Written:
    """What Stash2Plex wrote to the item last time (empty for an item it never wrote)."""

    fields: dict[str, str] = field(default_factory=dict)
    tags: dict[str, list[str]] = field(default_factory=dict)


def plan_item(
    desired: Desired,
    plex: PlexItemState,
    written: Written | None,
    preserve: bool,
    relock: bool = False,
    sent: dict[str, str] | None = None,
) -> ItemPlan:
    """``relock`` (``reconcile``): a field or tag list already showing what Stash wants
    but no longer locked is sent again, locked, so a Plex refresh cannot undo it; also
    when what Stash wants is nothing and Plex shows nothing, or a refresh could fill it.
    ``sent``: the performer photos this process wrote already (``_photos``)."""
    written = written or Written()
    fields, written_fields = [], dict(written.fields)
    for name, want in desired.fields.items():
        if want is None:
            continue  # a field not written (skip_fields)
        shown = plex.fields.get(name, "")
        change = _field_change(name, want, shown, written.fields.get(name), preserve)
        if change is None and relock and shown == want and name not in plex.locked | {RATING}:
            change = FieldChange(name, want, want)
        if change:
            fields.append(change)
        if change or shown == want:
            written_fields[name] = want
    tags, written_tags = [], {k: list(v) for k, v in written.tags.items()}
    for tag_type in TAG_TYPES:
        if tag_type not in desired.tags:
            continue  # a tag type not written (skip_fields): left as it is, ours or not
        wanted, on_plex, wrote = desired.tags[tag_type], plex.tags.get(tag_type, ()), written.tags.get(tag_type, [])
        held = {_key(t) for t in wanted} <= {_key(t) for t in on_plex}
        tag_change = _tag_change(tag_type, wanted, on_plex, wrote, preserve)
        if tag_change is None and relock and (wanted or not on_plex) and tag_type not in plex.locked and held:
            tag_change = TagChange(tag_type, on_plex, on_plex, ())
        photos = _photos(desired, plex, sent or {}) if tag_type == "actor" else {}
        if photos:  # on the change planned, else on the list sent again for them
            tag_change = (
                dataclasses.replace(tag_change, photos=photos)
                if tag_change
                else _tag_change(tag_type, wanted, on_plex, wrote, preserve, photos)
            )
        if tag_change:
            tags.append(tag_change)
        if tag_change or held:
            written_tags[tag_type] = list(wanted)
    return ItemPlan(plex.rating_key, tuple(fields), tuple(tags), written_fields, written_tags)


def release_plan(plex: PlexItemState, written: Written, title: str, preserve: bool) -> ItemPlan:
    """What takes off the item everything Stash2Plex wrote there, when no scene owns the
    item any more (docs/architecture.md, write-time invariant 11): a field still showing
    what was written goes back to Plex's own value (the title to ``title``, the file's name,
    as Plex's scanner names a personal video; every other field to empty), the tags written
    are removed; what the user changed or added in Plex since stays, as in an owner change
    (``_tag_change``: in fill-only mode a tag list holding the user's tags is left as it is).
    ``edit_params(plan, locked=False)`` sends it with the locks released."""
    fields = []
    for name, wrote in written.fields.items():
        shown = plex.fields.get(name, "")
        back = title if name == "title" else ""
        if wrote and shown == wrote and shown != back:
            fields.append(FieldChange(name, shown, back))
    tags = (_tag_change(kind, (), plex.tags.get(kind, ()), wrote, preserve) for kind, wrote in written.tags.items())
    return ItemPlan(plex.rating_key, tuple(fields), tuple(t for t in tags if t is not None), {}, {})


def rating_change(plan: ItemPlan) -> tuple[bool, float | None]:
    """(whether the rating changes, the new rating or None to clear it)."""
    for change in plan.fields:
        if change.name == RATING:
            return True, float(change.stash) if change.stash else None
    return False, None


def edit_params(plan: ItemPlan, locked: bool = True) -> dict[str, Any]:
    """The plexapi ``edit()`` keyword arguments for the whole plan, each field and tag type
    locked (``locked=False``: unlocked, Plex's again, as ``editField(…, locked=False)`` sends).

    The user rating is not part of it: Plex takes it through ``rate()`` (``rating_change``)."""
    params: dict[str, Any] = {}
    lock = int(locked)
    for change in plan.fields:
        if change.name == RATING:
            continue
        if change.stash or change.plex:  # a lock alone for an empty field (an empty date is no date)
            params[f"{change.name}.value"] = change.stash
        params[f"{change.name}.locked"] = lock
    for tag in plan.tags:
        params[f"{tag.tag_type}.locked"] = lock
        for i, name in enumerate(tag.result):
            params[f"{tag.tag_type}[{i}].tag.tag"] = name
            if _key(name) in tag.photos:  # plexapi maintainers' form (python-plexapi#462, PR #510)
                params[f"{tag.tag_type}[{i}].tag.thumb"] = tag.photos[_key(name)]
        if tag.removed:
            params[f"{tag.tag_type}[].tag.tag-"] = ",".join(quote(t, safe="") for t in tag.removed)
    return params


def fit_plan(
    desired: Desired,
    plex: PlexItemState,
    written: Written | None,
    preserve: bool,
    length: Callable[[dict[str, Any]], int],
    budget: int = EDIT_URL_BUDGET,
    relock: bool = False,
    sent: dict[str, str] | None = None,
) -> tuple[ItemPlan, int | None]:
    """The plan, with the summary shortened when the fields' request (``edit_batches``
    sends them apart from the tags when the whole edit does not fit) would not fit
    ``budget``: a summary is never shortened to fit tags that go in requests of their own.

    ``length(params)`` is the request target's size in bytes for those edit parameters.
    Returns the plan and the summary's new length in characters (None: not shortened).
    The longest prefix that fits is found by bisection (about 15 plans for 20,000 characters).
    """

    def fields_length(plan: ItemPlan) -> int:
        return length(edit_params(dataclasses.replace(plan, tags=())))

    def planned(summary: str | None = None) -> ItemPlan:
        fields = desired.fields if summary is None else {**desired.fields, "summary": summary}
        return plan_item(dataclasses.replace(desired, fields=fields), plex, written, preserve, relock, sent)

    plan = planned()
    summary = desired.fields.get("summary") or ""
    if not any(c.name == "summary" for c in plan.fields) or fields_length(plan) <= budget:
        return plan, None
    best: tuple[ItemPlan, int] | None = None
    low, high = 0, len(summary) - 1
    while low <= high:
        middle = (low + high) // 2
        cut = shortened(summary, middle + 1)
        trial = planned(cut)
        if fields_length(trial) <= budget:
            best, low = (trial, len(cut)), middle + 1
        else:
            high = middle - 1
    if best is None:  # the other fields alone are too long: keep the shortest summary, split later
        return planned(ELLIPSIS), 1
    return best


def edit_batches(
    plan: ItemPlan,
    length: Callable[[dict[str, Any]], int],
    budget: int = EDIT_URL_BUDGET,
    cut_tags: bool = False,
    locked: bool = True,
) -> list[dict[str, Any]]:
    """The plan's edit parameters as few requests as fit ``budget``: one when it fits,
    else the fields first, each tag type joining the first request it still fits in,
    else starting one of its own. A tag type's request that still does not fit is
    sent as it is (Plex itself may take it), or with ``cut_tags`` (it was refused as too
    long) with the first of its tags that fit: a tag list must go in one request, since an
    indexed list replaces the item's list of that type."""
    whole = edit_params(plan, locked)
    if length(whole) <= budget:
        return [whole]
    parts = [dataclasses.replace(plan, tags=())]
    for tags in plan.tags:
        for n, part in enumerate(parts):
            joined = dataclasses.replace(part, tags=(*part.tags, tags))
            if length(edit_params(joined, locked)) <= budget:
                parts[n] = joined
                break
        else:
            parts.append(dataclasses.replace(plan, fields=(), tags=(tags,)))
    batches = [edit_params(p, locked) for p in parts if not p.empty]
    if cut_tags:
        batches = [b if length(b) <= budget else _cut_tags(b, length, budget) for b in batches]
    return batches


def _cut_tags(params: dict[str, Any], length: Callable[[dict[str, Any]], int], budget: int) -> dict[str, Any]:
    """``params`` of one tag type without its last indexed tags, until it fits ``budget``
    (or no indexed tag is left)."""
    indexed = [k for k in params if "[" in k and not k.endswith("[].tag.tag-")]  # a photo goes before its tag
    cut = dict(params)
    while indexed and length(cut) > budget:
        cut.pop(indexed.pop())
    return cut


def cut_count(sent: list[dict[str, Any]], plan: ItemPlan) -> int:
    """How many of the plan's tags ``sent`` left out (``edit_batches`` with ``cut_tags``)."""
    planned = sum(len(t.result) for t in plan.tags)
    return planned - sum(1 for params in sent for k in params if k.endswith("].tag.tag") and "[]" not in k)


def split_removals(
    params: dict[str, Any], length: Callable[[dict[str, Any]], int], budget: int = EDIT_URL_BUDGET
) -> list[dict[str, Any]]:
    """``params`` as requests within ``budget`` when only a long removal list (``-=``, one
    tag type: ``edit_batches`` gives such a type a request of its own) makes it too long:
    the names go in as many requests as they need, each with the type's lock, the first
    with the other parameters. Removing a name twice, or one not there, changes nothing."""
    key = next((k for k in params if k.endswith("[].tag.tag-")), None)
    if key is None or length(params) <= budget:
        return [params]
    lock = key[: -len("[].tag.tag-")] + ".locked"
    requests = [{k: v for k, v in params.items() if k != key}]
    for name in params[key].split(","):
        last = requests[-1]
        if key in last and length({**last, key: f"{last[key]},{name}"}) > budget:
            requests.append({lock: params.get(lock, 1), key: name})
        else:
            last[key] = f"{last[key]},{name}" if key in last else name
    return requests

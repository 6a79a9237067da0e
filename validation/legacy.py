"""Settings saved under names Stash2Plex no longer uses, translated or set aside.

Our own renames (a boolean defaults to false, as Stash draws a never-saved switch off:
``strict_matching`` became ``loose_matching``), and the public Stash2Plex plugin's settings
(github.com/trek-e/Stash2Plex, same plugin id): ``plex_library`` is taken over, its
``sync_*`` switches saved off become ``skip_fields``, the rest (``IGNORED``) is reported and
not used. A new name always wins; every old name is reported (``health_check``) and each
one taken over is logged naming the new one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.errors import ConfigError

OWN_ORIGIN = "renamed in 0.3; the old name is read until 0.4"
PUBLIC_ORIGIN = "from the public Stash2Plex plugin"
# old name -> new name; the value is inverted (old switches were on by default)
RENAMED_INVERTED = {"strict_matching": "loose_matching"}
# the public plugin's names read under ours
RENAMED = {"plex_library": "plex_libraries"}
# the public plugin's field switches: saved as false -> that field is not written
FIELD_SWITCHES = {
    "sync_master": "*",
    "sync_studio": "studio",
    "sync_summary": "summary",
    "sync_tagline": "tagline",
    "sync_date": "date",
    "sync_performers": "performers",
    "sync_tags": "tags",
    "sync_poster": "poster",
    "sync_collection": "collections",
}
# the public plugin's settings with no counterpart here
IGNORED = (
    "enabled",
    "max_retries",
    "poll_interval",
    "connect_timeout",
    "read_timeout",
    "max_tags",
    "sync_background",
    "debug_logging",
    "obfuscate_paths",
    "reconcile_interval",
    "reconcile_scope",
    "reconcile_missing",
)
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def parse_bool(name: str, value: Any) -> bool:
    """A switch's value as Stash (or a command line) may send it; ConfigError otherwise."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    text = value.strip().lower() if isinstance(value, str) else None
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise ConfigError(f"setting {name}: must be true or false, got {value!r}")


@dataclass(frozen=True)
class Adopted:
    """What happened to the old names found among the saved settings."""

    taken_over: tuple[str, ...] = ()  # "old → new" descriptions
    ignored: tuple[str, ...] = ()  # old names with no effect
    warnings: tuple[str, ...] = ()  # one per old name taken over: says the new name

    def summary(self) -> dict[str, list[str]]:
        return {"taken_over": list(self.taken_over), "ignored": list(self.ignored)}


@dataclass
class _Work:
    values: dict[str, Any]
    taken: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def take(self, old: str, new: str, value: Any, shown: str, origin: str) -> None:
        if new in self.values:
            self.ignored.append(f"{old} (ignored: {new} is set)")
            return
        self.values[new] = value
        self.taken.append(f"{old} → {new} = {shown}")
        self.warnings.append(f"setting {old} ({origin}) is read as {new} = {shown}; save {new} instead")


def merge(saved: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Saved settings under command-line overrides; an old name on the command line
    beats the new name saved in Stash (the flag wins, as for every other setting)."""
    merged = {**saved, **overrides}
    for old, new in {**RENAMED_INVERTED, **RENAMED}.items():
        if old in overrides and new not in overrides:
            merged.pop(new, None)
    return merged


def new_name(name: str) -> str:
    """Today's name of a setting saved under ``name`` (itself when it is today's).

    >>> new_name("plex_library"), new_name("sync_studio"), new_name("path_map")
    ('plex_libraries', 'skip_fields', 'path_map')
    """
    if name in FIELD_SWITCHES:
        return "skip_fields"
    return {**RENAMED_INVERTED, **RENAMED}.get(name, name)


def saved_names(saved: dict[str, Any]) -> set[str]:
    """Today's names of the settings ``saved`` holds a value for, under that name or an old one."""
    return {new_name(name) for name, value in saved.items() if value not in (None, "")}


def translate(saved: dict[str, Any], known: set[str]) -> tuple[dict[str, Any], Adopted]:
    """The saved values under today's names, and a report of the old names found."""
    work = _Work({k: v for k, v in saved.items() if k in known})
    for old, new in RENAMED_INVERTED.items():
        if old in saved:
            loose = not parse_bool(old, saved[old])
            work.take(old, new, loose, "true" if loose else "false", OWN_ORIGIN)
    for old, new in RENAMED.items():
        if old in saved:
            work.take(old, new, saved[old], repr(saved[old]), PUBLIC_ORIGIN)
    _field_switches(saved, work)
    for name in saved:
        if name in IGNORED or (name not in known and name not in _handled()):
            work.ignored.append(name)
    return work.values, Adopted(tuple(work.taken), tuple(work.ignored), tuple(work.warnings))


def _handled() -> set[str]:
    return set(RENAMED_INVERTED) | set(RENAMED) | set(FIELD_SWITCHES)


def _field_switches(saved: dict[str, Any], work: _Work) -> None:
    """The public plugin's switches saved as false, as one ``skip_fields`` value."""
    from validation.fields import FIELDS

    off: list[str] = []
    olds: list[str] = []
    for old, target in FIELD_SWITCHES.items():
        if old not in saved:
            continue
        if parse_bool(old, saved[old]):
            work.ignored.append(f"{old} (true: written, as by default)")
            continue
        olds.append(old)
        off.extend(FIELDS if target == "*" else (target,))
    if off:
        value = ", ".join(dict.fromkeys(off))
        work.take(", ".join(olds), "skip_fields", value, repr(value), PUBLIC_ORIGIN)

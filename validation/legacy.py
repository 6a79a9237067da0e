"""Settings saved under names Stash2Plex no longer uses, translated or set aside.

Our own renames (a boolean defaults to false, as Stash draws a never-saved switch off:
``strict_matching`` became ``loose_matching``), and the public Stash2Plex plugin's settings
(github.com/trek-e/Stash2Plex, same plugin id): ``plex_library`` is taken over, its
``sync_*`` switches saved off become ``skip_fields``, the rest (``IGNORED``) is reported and
not used. A new name always wins; every old name is reported (``health_check``) and each
one taken over is logged naming the new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.errors import ConfigError

OWN_ORIGIN = "renamed in 0.3; the old name is read until 0.4"
PUBLIC_ORIGIN = "from the public Stash2Plex plugin"
# old name -> new name; the value is inverted (old switches were on by default)
RENAMED_INVERTED = {"strict_matching": "loose_matching"}
# the public plugin's names read under ours
RENAMED = {"plex_library": "plex_libraries"}
RENAMES = {**RENAMED_INVERTED, **RENAMED}
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


def merge(saved: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Saved settings under command-line overrides; an old name on the command line
    beats the new name saved in Stash (the flag wins, as for every other setting)."""
    merged = {**saved, **overrides}
    for old, new in RENAMES.items():
        if old in overrides and new not in overrides:
            merged.pop(new, None)
    return merged


def new_name(name: str) -> str:
    """Today's name of a setting saved under ``name`` (itself when it is today's).

    >>> new_name("plex_library"), new_name("sync_studio"), new_name("path_map")
    ('plex_libraries', 'skip_fields', 'path_map')
    """
    return "skip_fields" if name in FIELD_SWITCHES else RENAMES.get(name, name)


def saved_names(saved: dict[str, Any]) -> set[str]:
    """Today's names of the settings ``saved`` holds a value for, under that name or an old one."""
    return {new_name(name) for name, value in saved.items() if value not in (None, "")}


def translate(saved: dict[str, Any], known: set[str]) -> tuple[dict[str, Any], Adopted]:
    """The saved values under today's names, and a report of the old names found."""
    values = {k: v for k, v in saved.items() if k in known}
    taken: list[str] = []
    ignored: list[str] = []
    warnings: list[str] = []
    for old, new, value, shown, origin in _old_values(saved, ignored):
        if new in values:
            ignored.append(f"{old} (ignored: {new} is set)")
            continue
        values[new] = value
        taken.append(f"{old} → {new} = {shown}")
        warnings.append(f"setting {old} ({origin}) is read as {new} = {shown}; save {new} instead")
    ignored += [name for name in saved if name in IGNORED or (name not in known and new_name(name) == name)]
    return values, Adopted(tuple(taken), tuple(ignored), tuple(warnings))


def _old_values(saved: dict[str, Any], ignored: list[str]) -> list[tuple[str, str, Any, str, str]]:
    """(old name, new name, value, value shown, origin) of each old name to take over; a
    public field switch saved true is noted in ``ignored`` (its field is written anyway)."""
    from validation.fields import FIELDS

    found: list[tuple[str, str, Any, str, str]] = []
    for old, new in RENAMED_INVERTED.items():
        if old in saved:
            loose = not parse_bool(old, saved[old])
            found.append((old, new, loose, "true" if loose else "false", OWN_ORIGIN))
    found += [(old, new, saved[old], repr(saved[old]), PUBLIC_ORIGIN) for old, new in RENAMED.items() if old in saved]
    off: list[str] = []
    olds: list[str] = []
    for old, target in FIELD_SWITCHES.items():
        if old in saved and parse_bool(old, saved[old]):
            ignored.append(f"{old} (true: written, as by default)")
        elif old in saved:
            olds.append(old)
            off.extend(FIELDS if target == "*" else (target,))
    if off:  # the public plugin's switches saved as false, as one ``skip_fields`` value
        value = ", ".join(dict.fromkeys(off))
        found.append((", ".join(olds), "skip_fields", value, repr(value), PUBLIC_ORIGIN))
    return found

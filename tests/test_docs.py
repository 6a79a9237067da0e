"""The documentation agrees with the code and its links lead somewhere.

* Every setting of Stash2Plex.yml has a row in docs/configuration.md's settings table
  (with the default ``validation.config`` really uses) and a section of its own.
* Every error class that ``worker.settle.decide`` can route to the dead-letter queue
  has a section in docs/troubleshooting.md; the classes it never dead-letters are
  named there too.
* Every relative link in README.md, CHANGELOG.md and docs/*.md points to a file that
  exists and, for a ``#fragment`` into a Markdown file, to a heading of that file.

The checks are functions of a folder, so the last test runs them on a broken copy
and sees each one fail.
"""

from __future__ import annotations

import inspect
import random
import re
import shutil
from pathlib import Path

import pytest
import yaml

import core.errors
from core.errors import PermanentError, Stash2PlexError, TransientError
from sync_queue.job import Job
from validation.config import DEFAULTS, Settings
from worker.settle import Action, decide

REPO = Path(__file__).resolve().parent.parent
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


# -- helpers ----------------------------------------------------------------------------
def _strip_code(text: str) -> str:
    """Markdown without fenced blocks, indented blocks and inline code (no links live there)."""
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.M | re.S)
    text = re.sub(r"^(?: {4}|\t).*$", "", text, flags=re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def _headings(text: str) -> list[str]:
    plain = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.M | re.S)
    return [m.group(1).strip() for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", plain, re.M)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for heading in _headings(text):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def _table_rows(text: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.lstrip().startswith("|")
    ]


def _render_default(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value == "":
        return "empty"
    return str(value)


def dlq_routes() -> tuple[list[str], list[str]]:
    """(classes ``decide`` dead-letters once the budget is spent, classes it never does),
    among the error classes of core/errors.py that a sync can meet."""
    dead, kept = [], []
    job = Job(scene_id=1, attempt=1000)
    for name, cls in inspect.getmembers(core.errors, inspect.isclass):
        if cls.__module__ != core.errors.__name__ or not issubclass(cls, Stash2PlexError):
            continue
        if cls is PermanentError or cls is Stash2PlexError:
            continue  # abstract roots, never raised as such
        decision = decide(job, cls("x"), 1000.0, random.Random(0))
        routed = dead if decision.action == Action.DLQ else kept
        if issubclass(cls, (PermanentError, TransientError)) or decision.action != Action.DLQ:
            routed.append(name)
    return sorted(dead), sorted(kept)


# -- the checks (functions of a folder, so a broken copy can be checked too) --------------
def settings_problems(root: Path) -> list[str]:
    config = (root / "docs" / "configuration.md").read_text(encoding="utf-8")
    keys = list(yaml.safe_load((root / "Stash2Plex.yml").read_text(encoding="utf-8"))["settings"])
    rows = _table_rows(config)
    header = next((r for r in rows if r[:1] == ["setting"] and "default" in r), None)
    if header is None:
        return ["docs/configuration.md has no settings table with a 'default' column"]
    column = header.index("default")
    by_key = {r[0]: r for r in rows if len(r) > column}
    headings = set(_headings(config))
    problems = []
    for key in keys:
        row = by_key.get(f"`{key}`")
        if row is None:
            problems.append(f"`{key}` has no row in the settings table")
            continue
        cell = row[column].replace("`", "").strip()
        if key in DEFAULTS:
            want = _render_default(DEFAULTS[key])
            if not cell.startswith(want):
                problems.append(f"`{key}`: the table says default {cell!r}, validation/config.py says {want!r}")
        elif Settings.model_fields[key].is_required():
            if not cell.startswith("required"):
                problems.append(f"`{key}` is required but the table says default {cell!r}")
        else:
            problems.append(f"`{key}` has no default in validation.config.DEFAULTS")
        if f"`{key}`" not in headings:
            problems.append(f"`{key}` has no section (### `{key}`) in docs/configuration.md")
    return problems


def dlq_problems(root: Path) -> list[str]:
    text = (root / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    headings = " ".join(_headings(text))
    dead, kept = dlq_routes()
    problems = [
        f"dead-letter class `{name}` has no section in docs/troubleshooting.md"
        for name in dead
        if f"`{name}`" not in headings
    ]
    problems += [
        f"`{name}` (never dead-lettered) is not named in docs/troubleshooting.md"
        for name in kept
        if f"`{name}`" not in text
    ]
    return problems


def link_problems(root: Path) -> list[str]:
    files = [root / "README.md", root / "CHANGELOG.md", *sorted((root / "docs").glob("*.md"))]
    problems = []
    for source in files:
        if not source.exists():
            continue
        text = source.read_text(encoding="utf-8")
        plain = _strip_code(text)
        targets = _LINK.findall(plain) + _IMAGE.findall(plain) + _REFERENCE.findall(plain)
        for target in targets:
            if _SCHEME.match(target):
                continue
            path, _, fragment = target.partition("#")
            where = (source.parent / path).resolve() if path else source
            name = source.relative_to(root)
            if not where.exists():
                problems.append(f"{name}: link {target!r} points to a missing file")
            elif fragment and where.suffix == ".md" and fragment not in anchors(where.read_text(encoding="utf-8")):
                problems.append(f"{name}: link {target!r}: no heading #{fragment} in {where.name}")
    return problems


USER_DOCS = ("README.md", "CHANGELOG.md", "docs/usage.md", "docs/configuration.md", "docs/troubleshooting.md")
# and the contributors' docs: figures stand with their commands, not with the commits they were measured at
DOCS = (*USER_DOCS, "docs/architecture.md", "docs/performance.md")
_TRACKER = re.compile(
    r"\b[Ii]ssues? #?\d+(?:\.\d+)?\b"  # our tracker's issue numbers
    r"|(?<![\w<-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w>-])"  # a commit hash
)


def tracker_problems(root: Path) -> list[str]:
    """The docs name no issue numbers and no commit hashes (they speak to users and contributors)."""
    problems = []
    for name in DOCS:
        path = root / name
        if path.exists():
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                problems += [f"{name}:{number}: {m.group(0)!r}" for m in _TRACKER.finditer(line)]
    return problems


# -- the tests ------------------------------------------------------------------------------
def test_every_setting_is_documented_with_its_default():
    assert settings_problems(REPO) == []


def test_every_dead_letter_reason_is_documented():
    dead, kept = dlq_routes()
    assert {"InvalidMetadata", "PlexAuthError", "PlexBadRequest", "AmbiguousMatch", "PlexNotFound"} <= set(dead)
    assert "PlexUnavailable" in kept
    assert dlq_problems(REPO) == []


def test_relative_links_lead_to_existing_files_and_headings():
    assert link_problems(REPO) == []


def test_docs_name_no_issue_numbers_or_commit_hashes():
    assert tracker_problems(REPO) == []


def test_slug_follows_github():
    assert slug("`path_map` in detail") == "path_map-in-detail"
    assert slug("Command line (outside Stash)") == "command-line-outside-stash"
    assert slug("Stash session and API key") == "stash-session-and-api-key"


@pytest.mark.parametrize(
    "damage, check, expected",
    [
        (
            (
                "docs/configuration.md",
                "| `loose_matching` | switch | `false` |",
                "| `loose_matching` | switch | `true` |",
            ),
            settings_problems,
            "`loose_matching`: the table says default 'true'",
        ),
        (
            ("docs/configuration.md", "### `plex_concurrency`", "### Concurrency"),
            settings_problems,
            "`plex_concurrency` has no section",
        ),
        (
            ("docs/troubleshooting.md", "### `PlexBadRequest`", "### Bad requests"),
            dlq_problems,
            "`PlexBadRequest` has no section",
        ),
        (
            ("docs/troubleshooting.md", "[Plex is down](#plex-is-down)", "[Plex is down](#plex-is-gone)"),
            link_problems,
            "no heading #plex-is-gone",
        ),
        (
            ("docs/troubleshooting.md", "[configuration.md](configuration.md)", "[configuration.md](config.md)"),
            link_problems,
            "'config.md' points to a missing file",
        ),
        (
            ("CHANGELOG.md", "- The queue: its rules", "- The queue (issue 28.4): its rules"),
            tracker_problems,
            "issue 28.4",
        ),
        (("README.md", "# Stash2Plex", "# Stash2Plex (since 0a5a0f2)"), tracker_problems, "'0a5a0f2'"),
    ],
)
def test_checks_catch_a_broken_copy(tmp_path, damage, check, expected):
    for name in ("README.md", "CHANGELOG.md", "Stash2Plex.yml"):
        if (REPO / name).exists():
            shutil.copy(REPO / name, tmp_path / name)
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    path, old, new = damage
    text = (tmp_path / path).read_text(encoding="utf-8")
    assert old in text, f"{path} no longer contains {old!r}; update this test"
    (tmp_path / path).write_text(text.replace(old, new, 1), encoding="utf-8")
    problems = check(tmp_path)
    assert any(expected in p for p in problems), problems

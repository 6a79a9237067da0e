"""Where the tests find Stash's reference data, by one rule.

Stash's schema per release (``stash-schema/versions/<tag>/``: that tag's ``graphql/schema/``
and ``pkg/plugin/hook/hooks.go``) and its prebuilt web UI (``stash-ui/<tag>/build``) come from
Stash's repository (github.com/stashapp/stash) at each release tag. They are never copied
into this project: they live in ``$STASH2PLEX_SHARED`` when that is set, else in ``shared/``
beside the checkout (``../shared``). When a piece is absent, the tests that need it are
skipped with one line naming it; every other test runs.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "STASH2PLEX_SHARED"
REPO = Path(__file__).resolve().parent.parent
ORIGIN = "Stash's repository (github.com/stashapp/stash) at each release tag"


def shared() -> Path:
    """The folder of reference data: ``$STASH2PLEX_SHARED``, else ``../shared`` beside the checkout."""
    value = os.environ.get(ENV)
    return Path(value) if value else REPO.parent / "shared"


def path(tail: str) -> Path:
    return shared() / tail


def missing(what: str, where: Path) -> str:
    """The one line a skipped test gives: what is missing, where it was looked for, where it comes from."""
    return f"{what} not found at {where} (reference data from {ORIGIN}; put it in ../shared or set {ENV})"


def need(tail: str, what: str) -> Path:
    """``path(tail)``, or the test is skipped (at module level when called while collecting)."""
    import pytest

    found = path(tail)
    if not found.exists():
        pytest.skip(missing(what, found), allow_module_level=True)
    return found

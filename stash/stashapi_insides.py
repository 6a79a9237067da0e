"""Every place we lean on stashapi's insides (pinned by tests/test_stashapi_insides.py), one module.

Everything else uses ``StashInterface``'s documented API (``call_GQL``, ``s``, ``url``,
``version``); what it does not offer is here: :func:`interface`, its class with

* no schema introspection: its constructor fetches Stash's whole schema to build fragments
  for its own query helpers (``GQLWrapper._get_fragments_introspection``, called by
  ``StashInterface.__init__``), and every query we send is complete (no fragment of
  stashapi's), so that reply (the largest Stash gives) would cost each drainer and task start
  for nothing;
* its Session handed over before the constructor's first request (``GQLWrapper.__init__``
  makes it as ``self.s``; a class between ``StashInterface`` and ``GQLWrapper`` in the MRO runs
  right after it), so that what the client sets on it (timeouts, reply hooks, the environment
  ignored) holds for the constructor's own requests too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PACKAGE = "stashapp-tools"  # import name: stashapi
REQUIREMENT = "stashapp-tools>=0.2.59,<0.3"  # requirements.txt; the test checks the facts above against it


def interface(prepare: Callable[[Any], None]) -> Any:
    """``StashInterface`` without its introspection, its Session given to ``prepare`` first."""
    from stashapi.classes import GQLWrapper
    from stashapi.stashapp import StashInterface

    class _Prepared(GQLWrapper):
        def __init__(self) -> None:
            super().__init__()
            prepare(self.s)

    class _Interface(StashInterface, _Prepared):
        def _get_fragments_introspection(self, fragment_overrides, attribute_overrides=None) -> dict:
            return {}

    return _Interface

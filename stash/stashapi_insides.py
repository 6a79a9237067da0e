"""Every place we lean on stashapi's insides (pinned by tests/test_stashapi_insides.py), one module.

Everything else uses ``StashInterface``'s documented API (``call_GQL``, ``s``, ``url``,
``version``); what it does not offer is here: :func:`interface`, its class with

* no schema introspection: its constructor fetches Stash's whole schema to build fragments
  for its own query helpers (``GQLWrapper._get_fragments_introspection``, called by
  ``StashInterface.__init__``), and every query we send is complete (no fragment of
  stashapi's), so that reply (the largest Stash gives) would cost each drainer and task start
  for nothing;
* without verification, a Session that ignores the environment from its first request:
  requests lets ``REQUESTS_CA_BUNDLE`` (set on many systems) override a Session's
  ``verify=False`` while ``trust_env`` is on (``Session.merge_environment_settings``), and
  the constructor sends requests before we see its Session. ``GQLWrapper.__init__`` makes the
  Session (``self.s``); a class between ``StashInterface`` and ``GQLWrapper`` in the MRO runs
  right after it, before the constructor's first request.
"""

from __future__ import annotations

from typing import Any

PACKAGE = "stashapp-tools"  # import name: stashapi
REQUIREMENT = "stashapp-tools>=0.2.59,<0.3"  # requirements.txt; the test checks the facts above against it


def interface(verify: bool) -> Any:
    """``StashInterface`` without its introspection; without ``verify``, also untrusting."""
    from stashapi.classes import GQLWrapper
    from stashapi.stashapp import StashInterface

    class _NoFragments(StashInterface):
        def _get_fragments_introspection(self, fragment_overrides, attribute_overrides=None) -> dict:
            return {}

    if verify:
        return _NoFragments

    class _Untrusting(GQLWrapper):
        def __init__(self) -> None:
            super().__init__()
            self.s.trust_env = False  # core/http.py fixed_environment_session sets the proxies later

    class _Interface(_NoFragments, _Untrusting):
        pass

    return _Interface

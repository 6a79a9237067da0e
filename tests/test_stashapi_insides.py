"""What stash/stashapi_insides.py relies on in stashapi, checked against the version installed
(within requirements.txt's range): a release that renames or reshapes any of it fails here first,
with the fact it broke."""

from __future__ import annotations

import inspect
from importlib.metadata import version

import pytest
import requests
from packaging.requirements import Requirement
from stashapi.classes import GQLWrapper
from stashapi.stashapp import StashInterface

from stash import stashapi_insides
from tests.emulators.stash_emulator import StashEmulator
from tests.runner import REPO


def test_the_requirement_is_requirements_txts_and_the_installed_version_meets_it():
    pins = [line.split("#")[0].strip() for line in (REPO / "requirements.txt").read_text().splitlines()]
    assert stashapi_insides.REQUIREMENT in pins, "requirements.txt and stashapi_insides.REQUIREMENT differ"
    installed = version(stashapi_insides.PACKAGE)
    assert Requirement(stashapi_insides.REQUIREMENT).specifier.contains(installed), installed


def test_the_constructor_builds_its_fragments_by_the_method_we_replace():
    source = inspect.getsource(StashInterface.__init__)
    assert "self.fragments = self._get_fragments_introspection(" in source, (
        "StashInterface.__init__ no longer calls _get_fragments_introspection: interface() would introspect"
    )
    params = list(inspect.signature(GQLWrapper._get_fragments_introspection).parameters)
    assert params == ["self", "fragment_overrides", "attribute_overrides"], params


def test_the_session_is_made_by_the_class_right_after_stash_interface():
    assert StashInterface.__mro__[1] is GQLWrapper, "a class between StashInterface and GQLWrapper moved"
    assert isinstance(GQLWrapper().s, requests.Session), "GQLWrapper.__init__ no longer makes the Session as .s"


@pytest.mark.parametrize("verify", [True, False])
def test_the_interface_connects_with_two_small_queries_and_no_introspection(verify):
    with StashEmulator() as emu:
        api = stashapi_insides.interface(lambda session: None)(emu.server_connection("/tmp/s2p"), verify_ssl=verify)
        sent = [r["query"] for r in emu.requests]
    assert api.fragments == {} and len(sent) == 2 and not any("__schema" in q for q in sent), sent


def test_the_session_is_handed_over_before_the_first_request(monkeypatch):
    """What the hand-over sets holds for the constructor's own requests: with ``trust_env``
    turned off there (as the client does without verification, ``StashClient._prepare``),
    the environment's (dead) proxy is never used; a Session left as it is uses it."""
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # the discard port: nothing listens
    handed: list[requests.Session] = []

    def untrust(session: requests.Session) -> None:
        session.trust_env = False
        handed.append(session)

    with StashEmulator() as emu:
        conn = emu.server_connection("/tmp/s2p")
        with pytest.raises(requests.exceptions.ProxyError):
            stashapi_insides.interface(lambda session: None)(conn, verify_ssl=True)
        api = stashapi_insides.interface(untrust)(conn, verify_ssl=False)
    assert handed == [api.s] and api.s.trust_env is False and api.version is not None

"""The ways the plugin reaches Stash: threads sharing one client, https, session cookies."""

from __future__ import annotations

import threading

from stash.client import StashClient
from tests.runner import REPO
from validation.plugin_input import ServerConnection


class _GateLog:
    """stashapi's log, holding the thread that logs ``gate_on`` until released."""

    def __init__(self, gate_on: str) -> None:
        self.gate_on, self.reached, self.release = gate_on, threading.Event(), threading.Event()

    def debug(self, message: object) -> None:
        if self.gate_on in str(message) and not self.reached.is_set():
            self.reached.set()
            self.release.wait(10)


def test_a_failed_call_is_explained_by_its_own_reply_not_another_threads(stash):
    """A deleted scene fails ``findScenes(ids:)`` as a whole and is dropped by the id its
    error names; another thread's good reply arriving meanwhile must not hide that error."""
    kept = stash.add_scene(title="Kept")
    log = _GateLog("scene with id 999 not found")
    client = StashClient(ServerConnection.model_validate(stash.server_connection(str(REPO))), logger=log)
    found: dict = {}
    worker = threading.Thread(target=lambda: found.update(client.scenes_by_id([kept, 999])))
    worker.start()
    assert log.reached.wait(10)  # its reply is in, stashapi is logging the error before it raises
    assert client.version() == "v0.30.1"  # another thread's reply lands meanwhile
    log.release.set()
    worker.join(10)
    assert list(found) == [kept]

"""Shared fixtures: the two emulators, a plugin environment, and the secrets guard."""

from __future__ import annotations

import io
import logging
import os
import sys
import time
from pathlib import Path

import pytest

from core.log import StashLog
from core.platform import is_locked
from stash.releases import MIN_STASH_VERSION, NEWEST_TESTED
from tests import reference
from tests.emulators.plex_emulator import PlexEmulator
from tests.emulators.stash_emulator import StashEmulator
from tests.runner import REPO, compile_plugin, hook_document, kill_lock_holder, run_plugin, task_document
from validation.plugin_input import ServerConnection

PLEX_TOKEN = "plexTOKEN-s3cr3t-9f8e7d"
STASH_COOKIE = "MTcwMDAwMDAwMHxTdGFzaENvb2tpZVNlY3JldHw="
STASH_API_KEY = "eyJhbGciOiJIUzI1NiJ9.stash-api-key-s3cr3t"
SECRETS = (PLEX_TOKEN, STASH_COOKIE, STASH_API_KEY)
POLL_S = 0.02  # how often a wait looks again (each look is a few cheap reads in this process)


@pytest.fixture
def plex():
    with PlexEmulator(token=PLEX_TOKEN) as emulator:
        emulator.add_section("Stash", ["/plex/media"], key=1)
        yield emulator


# The oldest and the newest Stash release the plugin supports (stash/releases.py): the
# end-to-end core runs against both with ``@pytest.mark.parametrize("stash", EDGE_RELEASES,
# indirect=True)``; tests/test_stash_releases.py covers every release between.
EDGE_RELEASES = tuple(f"v{'.'.join(map(str, v))}" for v in (MIN_STASH_VERSION, NEWEST_TESTED))


@pytest.fixture
def stash(request):
    """The Stash emulator; as a given release (``stash-schema/versions/<tag>`` of the
    reference data, tests/reference.py) when parametrized indirectly with its tag."""
    release = getattr(request, "param", None)
    if release is not None:
        reference.need(f"stash-schema/versions/{release}", f"Stash {release}'s schema")
    with StashEmulator(session_cookie=STASH_COOKIE, api_key=STASH_API_KEY, release=release) as emulator:
        yield emulator


class Plugin:
    """The plugin as Stash would run it against the emulators, with helpers."""

    def __init__(self, stash: StashEmulator, plex: PlexEmulator, data_dir: Path, env: dict[str, str]) -> None:
        self.stash, self.plex, self.data_dir, self.env = stash, plex, data_dir, env

    @property
    def connection(self) -> dict:
        return self.stash.server_connection(str(REPO))

    def configure(self, **settings) -> None:
        base = {"plex_url": self.plex.url, "plex_token": self.plex.token, "path_map": "/stash/media=/plex/media"}
        base.update(settings)
        self.stash.plugin_settings = {"Stash2Plex": {k: v for k, v in base.items() if v is not None}}

    def hook(self, context: dict, **kw):
        return _checked(run_plugin(hook_document(self.connection, context), env=self.env, **kw))

    def task(self, mode: str, **kw):
        return _checked(run_plugin(task_document(self.connection, mode), env=self.env, **kw))

    def drainer_busy(self) -> bool:
        return is_locked(self.data_dir / "drainer.lock")

    def status(self) -> dict:
        """The ``queue_status`` reply, read in this process: polling must not start a plugin
        process each time (tests that check the task itself run it with ``task``)."""
        from app.root import App
        from tasks import queue_status

        connection = ServerConnection.model_validate(self.connection)
        app = App(connection, self.env, StashLog(io.StringIO()), data_dir=self.data_dir)
        try:
            return queue_status.run(app)
        finally:
            app.close()

    def wait_drained(self, timeout: float = 60.0) -> None:
        """Wait until no drainer runs and nothing is pending.

        A drainer that stopped on an error since the wait began fails the wait at once; an
        older error is left alone (the drainer a hook just started may not hold the lock yet).
        """
        since = time.time()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.drainer_busy():
                status = self.status()
                if status["pending"] == 0 and not self.drainer_busy():
                    return
                error = status.get("last_drainer_error")
                if error and error["at"] >= since and not self.drainer_busy():
                    raise AssertionError(f"drainer failed: {error}\n{self.drainer_log()}")
            time.sleep(POLL_S)
        raise AssertionError(
            f"queue not drained within {timeout} s: {self.status()}\ndrainer log:\n{self.drainer_log()[-4000:]}"
        )

    def drainer_log(self) -> str:
        path = self.data_dir / "drainer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def add_scene(self, n: int, **kw) -> tuple[int, int]:
        """A scene in Stash at /stash/media/… and its item in Plex at /plex/media/…"""
        name = kw.pop("name", f"scene-{n:05d}.mp4")
        sid = self.stash.add_scene(
            title=kw.pop("title", f"Scene {n}"),
            files=[{"path": f"/stash/media/{name}", "size": 1000 + n, "duration": 60.0}],
            **kw,
        )
        rk = self.plex.add_item(1, f"/plex/media/{name}", size=1000 + n, duration_ms=60000)
        return sid, rk


class Installed(Plugin):
    """The ``Plugin`` helpers, run from another copy of the plugin (and, optionally,
    another interpreter: the Python that Stash would resolve)."""

    def __init__(self, base: Plugin, plugin_dir: Path, python: str | None = None) -> None:
        # bytecode on: the __pycache__ it leaves shows which copy was imported
        super().__init__(base.stash, base.plex, base.data_dir, {**base.env, "PYTHONDONTWRITEBYTECODE": ""})
        self.plugin_dir = plugin_dir
        self.python = python

    @property
    def connection(self) -> dict:
        return self.stash.server_connection(str(self.plugin_dir))

    def hook(self, context: dict, **kw):
        return super().hook(context, plugin_dir=self.plugin_dir, python=self.python, **kw)

    def task(self, mode: str, **kw):
        return super().task(mode, plugin_dir=self.plugin_dir, python=self.python, **kw)


@pytest.fixture
def plugin(stash, plex, tmp_path, request):
    data_dir = tmp_path / "data"
    env = {"STASH2PLEX_DATA_DIR": str(data_dir), "STASH2PLEX_BREAKER_RECOVERY_S": "2"}
    if request.node.get_closest_marker("fresh"):
        # What Stash runs, in every suite run: import order and lazy imports of our own
        # modules fail here if they are wrong (a forked run has them imported already).
        env["S2P_TEST_FRESH_PROCESSES"] = "1"
    p = Plugin(stash, plex, data_dir, env)
    p.configure()
    yield p
    _stop_drainers(data_dir)
    _assert_no_secrets(tmp_path)


def _stop_drainers(data_dir: Path) -> None:
    """Kill a drainer still holding this test's lock (its pid is in the lock file)."""
    lock = data_dir / "drainer.lock"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not is_locked(lock):
            return
        kill_lock_holder(lock)
        time.sleep(POLL_S)


def _checked(run):
    for secret in SECRETS:
        assert secret not in run.stdout and secret not in run.stderr, "a secret leaked into the plugin's output"
    return run


def _assert_no_secrets(root: Path) -> None:
    """The Plex token and the Stash cookie never reach a file the plugin wrote."""
    for path in root.rglob("*"):
        if path.is_file():
            try:
                blob = path.read_bytes()
            except FileNotFoundError:
                continue  # a process of the test's still finishing (SQLite's -wal file) took it away
            for secret in SECRETS:
                assert secret.encode() not in blob, f"a secret leaked into {path}"


@pytest.fixture(autouse=True)
def _no_secrets_in_output(request, capfd):
    """Every test: nothing printed to our stdout/stderr carries a secret."""
    yield
    out, err = capfd.readouterr()
    for secret in SECRETS:
        assert secret not in out and secret not in err, "a secret leaked into test output"


class _CurrentStderr:
    """stashapi.log binds sys.stderr at import; pytest swaps it per test. Follow the swap."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _rewrite_tests_once() -> None:
    """Let pytest rewrite the test modules' asserts here, once, into its cache (their
    ``__pycache__``): each xdist worker then reads them instead of rewriting them all again
    (a few seconds of CPU a worker), even where ``PYTHONDONTWRITEBYTECODE`` is set."""
    import importlib

    dont_write, sys.dont_write_bytecode = sys.dont_write_bytecode, False
    try:
        for path in sorted(Path(__file__).parent.glob("test_*.py")):
            importlib.import_module(f"tests.{path.stem}")
    finally:
        sys.dont_write_bytecode = dont_write


def pytest_ignore_collect(collection_path, config):
    """Folders no test of this stage is in, left unimported: ``--doctest-modules`` would
    import every module of them in every xdist worker (they hold no doctests): the benches
    (scripts, ``tests/bench``) and the browser stage's tests (Playwright; ``-m browser``,
    ``python -m tests.browser``). A second of CPU a worker."""
    here = Path(__file__).parent
    if collection_path == here / "bench":
        return True
    if collection_path == here / "browser" and config.getoption("markexpr") == "not browser":
        return True
    return None


def pytest_collection_finish(session):
    """What collection imported (modules, the collected tests) is moved out of the cyclic
    collector's way, and it runs less often: the emulators allocate a lot per request (the
    plugin's forked runs get the same freeze from the fork server; docs/architecture.md)."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(20000, 20, 20)


def pytest_configure(config):
    os.environ.setdefault("PLEXAPI_HEADER_IDENTIFIER", "stash2plex-tests")
    # Drainers exit as soon as the queue is empty (tests wait for that); tests of the
    # linger itself set their own value.
    os.environ.setdefault("STASH2PLEX_DRAINER_LINGER_S", "0")
    # A drainer stopped by a wrong setting exits at once instead of waiting for the fix.
    os.environ.setdefault("STASH2PLEX_DRAINER_FIX_WAIT_S", "0")
    if not hasattr(config, "workerinput"):  # once, in the controller (pytest-xdist workers skip it)
        compile_plugin()
        if config.getoption("numprocesses", None):
            _rewrite_tests_once()
    import stashapi.log  # noqa: F401 - installs its handler on the StashLogger logger

    for handler in logging.getLogger("StashLogger").handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.stream = _CurrentStderr()

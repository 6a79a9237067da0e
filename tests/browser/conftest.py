"""Browser tests: the plugin's UI inside Stash's real web UI, in Debian's Chromium.

The Stash emulator serves Stash's prebuilt UI of a release against that release's full
schema (reference data found by tests/reference.py; without it every browser test is
skipped with one line saying what is missing) and runs the real plugin for
``runPluginOperation`` / ``runPluginTask``. See tests/browser/README.md. Every test fails on a browser console error,
a page error or a GraphQL error, and leaves a screenshot in ``tests/browser/failures/``
when it fails. Run with ``python -m tests.browser`` (installs Chromium when missing).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests import reference
from tests.conftest import PLEX_TOKEN, STASH_API_KEY, STASH_COOKIE, Plugin, _stop_drainers
from tests.emulators.plex_emulator import PlexEmulator
from tests.emulators.stash_emulator import StashEmulator
from tests.runner import REPO

FAILURES = Path(__file__).resolve().parent / "failures"
CHROMIUM = os.environ.get("STASH2PLEX_CHROMIUM", "/usr/bin/chromium")
SLOW_MS = 30_000  # the longest wait for one thing to show (a plugin run under load included)


def pytest_collection_modifyitems(items):
    here = Path(__file__).resolve().parent
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(here):
            item.add_marker(pytest.mark.browser)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    reference.need("stash-ui", "Stash's prebuilt web UIs")  # skipped before asking for a browser
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"Chromium not found at {CHROMIUM}: run `python -m tests.browser` (installs Debian's chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield browser
        browser.close()


class StashUIPlugin(Plugin):
    """The ``Plugin`` helpers, with the emulator also serving Stash's UI."""

    @property
    def ui(self):
        return self.stash.ui


def release_ui(release: str | None) -> tuple[Path, Path]:
    """The prebuilt UI and full schema of a Stash release (``stash-ui/<tag>/build``,
    ``stash-schema/versions/<tag>`` of the reference data); the development build without
    one. The test is skipped when they are absent."""
    tag = f"Stash {release}'s" if release else "Stash's"
    ui = "stash-ui/build" if release is None else f"stash-ui/{release}/build"
    schema = "stash-schema" if release is None else f"stash-schema/versions/{release}"
    return reference.need(ui, f"{tag} prebuilt web UI"), reference.need(schema, f"{tag} schema")


@pytest.fixture
def stash_ui(request, tmp_path):
    """Stash (UI + GraphQL, no login as in a default install) and Plex, the plugin installed;
    a given release's UI and schema when parametrized indirectly with its tag (EDGE_RELEASES)."""
    release = getattr(request, "param", None)
    build, schema = release_ui(release)
    with (
        StashEmulator(session_cookie=STASH_COOKIE, api_key=STASH_API_KEY, release=release) as stash,
        PlexEmulator(token=PLEX_TOKEN) as plex,
    ):
        plex.add_section("Stash", ["/plex/media"], key=1)
        stash.auth_required = False
        ui = stash.serve_ui(build, schema)
        data_dir = tmp_path / "data"
        env = {"STASH2PLEX_DATA_DIR": str(data_dir), "STASH2PLEX_BREAKER_RECOVERY_S": "2"}
        ui.install_plugin(REPO, env)
        plugin = StashUIPlugin(stash, plex, data_dir, env)
        plugin.configure()
        yield plugin
        ui.wait_runs_finished()
        _stop_drainers(data_dir)


class Watched:
    """A page whose console errors, page errors and GraphQL errors are collected."""

    def __init__(self, page, base_url: str) -> None:
        self.page = page
        self.base_url = base_url
        self.problems: list[str] = []
        self.expected: list[str] = []  # GraphQL errors a test provokes on purpose (a refusal it checks)
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        page.on("response", self._response)

    def _console(self, message) -> None:
        if message.type == "error":
            self.problems.append(f"console error: {message.text}")

    def _response(self, response) -> None:
        if "/graphql" not in response.url or response.request.method != "POST":
            return
        from playwright.sync_api import Error as PlaywrightError

        try:
            raw = response.body()
        except PlaywrightError:  # the page went away before the body arrived: nothing to judge
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self.problems.append(f"GraphQL answer is not JSON (HTTP {response.status}): {raw[:200]!r}")
            return
        if response.status != 200 or body.get("errors"):
            name = (response.request.post_data_json or {}).get("operationName")
            messages = [str(e.get("message")) for e in body.get("errors") or []]
            if messages and all(any(x in m for x in self.expected) for m in messages):
                return
            self.problems.append(f"GraphQL error in {name}: {body.get('errors')}")

    def goto(self, path: str) -> None:
        self.page.goto(self.base_url + path, wait_until="domcontentloaded")

    def navigate(self, path: str) -> None:
        """Go to ``path`` inside the loaded app, as a click on one of its links does (the
        router follows the browser history), without reloading the whole UI."""
        self.page.evaluate(
            "(path) => { window.history.pushState({}, '', path);"
            " window.dispatchEvent(new PopStateEvent('popstate', { state: {} })); }",
            path,
        )
        self.page.wait_for_url(f"**{path}")


@pytest.fixture
def ui_page(request, browser, stash_ui):
    """A fresh browser page on the emulated Stash; external hosts answer empty (no network here)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(SLOW_MS)
    context.route(re.compile(r"^https?://(?!127\.0\.0\.1)"), lambda route: route.fulfill(status=200, body=""))
    page = context.new_page()
    watched = Watched(page, stash_ui.stash.url)
    yield watched
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    shot = FAILURES / f"{request.node.name}.png"
    if failed or watched.problems:
        FAILURES.mkdir(exist_ok=True)
        page.screenshot(path=str(shot), full_page=True)
    context.close()
    assert not watched.problems, "\n".join(watched.problems) + f"\n(screenshot: {shot})"


def pytest_sessionstart(session):
    shutil.rmtree(FAILURES, ignore_errors=True)

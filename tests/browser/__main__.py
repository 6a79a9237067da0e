"""The browser stage of the test command: ``python -m tests.browser [pytest options]``.

Makes sure Debian's Chromium is installed (``apt-get install chromium``; a no-op when
it is; Playwright's own browser download is not used) and Playwright for Python is
importable (from requirements-test.txt), then runs the tests marked ``browser``. Without
Stash's prebuilt UIs (tests/reference.py) no browser is installed and every test skips.
See tests/browser/README.md.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHROMIUM = os.environ.get("STASH2PLEX_CHROMIUM", "/usr/bin/chromium")


def _apt(*args: str) -> int:
    sudo = [] if os.geteuid() == 0 else (["sudo", "-n"] if shutil.which("sudo") else [])
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run([*sudo, "apt-get", *args], env=env).returncode


def ensure_chromium() -> None:
    if Path(CHROMIUM).is_file():
        return
    if not shutil.which("apt-get"):
        sys.exit(
            f"Chromium is missing at {CHROMIUM} and apt-get is not available: install chromium, or set STASH2PLEX_CHROMIUM"
        )
    started = time.monotonic()
    if _apt("install", "-y", "--no-install-recommends", "chromium") != 0:
        if _apt("update") != 0 or _apt("install", "-y", "--no-install-recommends", "chromium") != 0:
            sys.exit("apt-get could not install chromium (run as root, or install it yourself)")
    print(f"chromium installed in {time.monotonic() - started:.0f} s", flush=True)


def ensure_playwright() -> None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        sys.exit("Playwright for Python is missing: pip install -r requirements-test.txt")


def main(argv: list[str]) -> int:
    from tests import reference

    ui = reference.path("stash-ui")
    if ui.is_dir():
        ensure_chromium()
    else:  # every browser test skips: no browser to install
        print(reference.missing("Stash's prebuilt web UIs", ui), flush=True)
    ensure_playwright()
    import pytest

    return pytest.main(["-q", "-m", "browser", str(HERE), *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The README's commands hold on a clean clone anywhere.

The README has two set-up commands (the demo and the tests) and CI runs the second verbatim
(``.ci/run``). On a copy of the checkout with no reference data beside it (tests/reference.py),
the test command's pytest part collects every test and passes, the tests that need Stash's
data skipped with one line saying what is missing and where it comes from.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from tests import reference
from tests.runner import REPO

# Tests that need the reference data (skipped on the copy) beside one that does not.
SUBSET = [
    "tests/test_stash_releases.py",
    "tests/test_stash_ui_server.py",
    "tests/test_scene_changes.py::test_every_scene_update_key_of_every_release_queues_a_job_unless_plex_never_shows_it",
    "tests/test_docs.py::test_slug_follows_github",
]
_LEFT_OUT = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".*_cache", "failures")


def _ignored(folder: str, names: list[str]) -> set[str]:
    """What a clone would not hold: caches anywhere, and the plugin's own data, deps and dist."""
    top = {"data", "deps", "dist"} if Path(folder) == REPO else set()
    return set(_LEFT_OUT(folder, names)) | (top & set(names))


def setup_commands(readme: str) -> list[str]:
    """The README's set-up commands: its indented lines that install the test requirements."""
    return [
        line.strip() for line in readme.splitlines() if re.match(r"^ {4}pip install -r requirements-test\.txt", line)
    ]


def pytest_part(command: str) -> list[str]:
    """The ``pytest …`` step of a command chained with ``&&``."""
    step = next(s.strip() for s in command.split("&&") if s.strip().startswith("pytest"))
    return shlex.split(step)[1:]


def test_the_readme_has_two_setup_commands_and_ci_runs_the_test_one_verbatim():
    commands = setup_commands((REPO / "README.md").read_text(encoding="utf-8"))
    assert len(commands) == 2, commands
    assert "Stash2Plex.py demo" in commands[0]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    assert ci[-1] == commands[1]


def test_the_test_command_passes_on_a_clone_without_the_reference_data(tmp_path):
    clone = tmp_path / "clone"  # nothing named shared beside it
    shutil.copytree(REPO, clone, ignore=_ignored)
    env = {k: v for k, v in os.environ.items() if k != reference.ENV and not k.startswith("PYTEST_")}
    args = pytest_part(setup_commands((REPO / "README.md").read_text(encoding="utf-8"))[1])

    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q"], cwd=clone, env=env, capture_output=True, text=True
    )
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]

    run = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "-n", "0", "-rs", *SUBSET],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    skips = [line for line in run.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skips and re.search(r"\d+ passed, \d+ skipped", run.stdout), run.stdout[-2000:]
    missing = tmp_path / "shared" / "stash-schema" / "versions"
    assert any(reference.missing("Stash's schemas per release", missing) in line for line in skips), skips
    assert all("github.com/stashapp/stash" in line for line in skips), skips

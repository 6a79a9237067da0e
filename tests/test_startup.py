"""Python started as Stash2Plex.yml says (``python -S``): a hook whose packages are in the
plugin-local folder never runs ``site``; every other run turns it on and works as before.

``site`` imports ``sitecustomize`` (from ``PYTHONPATH`` here) when it runs, which leaves a
marker file: what each fresh interpreter did is visible from outside.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import persistqueue
import pytest

from tests.conftest import Installed
from tests.runner import drainer_lock_held
from tests.test_bootstrap import PY, _copy_plugin

SITECUSTOMIZE = "import os\nopen(os.environ['S2P_SITE_MARKER'], 'a').close()\n"


@pytest.fixture
def installed(plugin, tmp_path) -> Installed:
    custom = tmp_path / "custom"
    custom.mkdir()
    (custom / "sitecustomize.py").write_text(SITECUSTOMIZE)
    copy = Installed(plugin, _copy_plugin(tmp_path / "plugins"), sys.executable)
    copy.env.update(
        S2P_TEST_FRESH_PROCESSES="1",  # a new interpreter, as Stash starts it
        S2P_SITE_MARKER=str(tmp_path / "site-ran"),
        PYTHONPATH=str(custom),
    )
    return copy


def _with_hook_packages_in_deps(plugin_dir: Path) -> None:
    deps = plugin_dir / "deps" / PY
    deps.mkdir(parents=True)
    os.symlink(Path(persistqueue.__file__).parent, deps / "persistqueue", target_is_directory=True)


def test_a_hook_with_its_packages_in_deps_skips_site(installed, tmp_path):
    _with_hook_packages_in_deps(installed.plugin_dir)
    sid, _ = installed.add_scene(1)
    with drainer_lock_held(installed.data_dir):  # a drainer "is running": the hook only enqueues
        run = installed.hook(installed.stash.update_scene(sid, title="Fast start"))
    assert run.error is None and run.output == f"scene {sid} queued", run.stderr[-2000:]
    assert not (tmp_path / "site-ran").exists(), "site ran for a hook whose packages are in deps/"


def test_without_deps_a_hook_turns_site_on_and_syncs(installed, tmp_path):
    sid, rk = installed.add_scene(1)
    run = installed.hook(installed.stash.update_scene(sid, title="Packages from site-packages"))
    assert run.error is None and run.output == f"scene {sid} queued", run.stderr[-2000:]
    assert (tmp_path / "site-ran").exists()
    installed.wait_drained()
    assert installed.plex.item(rk)["fields"]["title"] == "Packages from site-packages"


def test_a_task_always_turns_site_on(installed, tmp_path):
    _with_hook_packages_in_deps(installed.plugin_dir)  # only the hook's package: tasks need site
    run = installed.task("queue_status")
    assert run.error is None, run.stderr[-2000:]
    assert (tmp_path / "site-ran").exists()

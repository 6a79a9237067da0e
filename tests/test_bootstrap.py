"""The dependency bootstrap (app/bootstrap.py).

End to end: a copy of the plugin run, as Stash runs it, by a fresh virtual
environment's Python that has none of the requirements. The bootstrap installs them
(from a local wheel directory, through the real pip) into the plugin-local folder,
and the hook, the drainer it starts and a task then work against the emulators.
When installing is impossible the reply names the exact command. Stash's
PythonDepManager plugin is used when it is present. The parsing and version checks
are tested directly with exact values.
"""

from __future__ import annotations

import ensurepip
import hashlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import venv
import zipfile
from pathlib import Path

import pytest

from app.bootstrap import Bootstrap, DependencyError, _dep_manager_spec, parse_requirements, satisfies, version_tuple
from core.log import Redactor, StashLog
from core.platform import shell_command
from sync_queue import spool
from tests.conftest import Installed
from tests.runner import REPO

PY = f"py{sys.version_info.major}{sys.version_info.minor}"


def _runtime_files() -> list[str]:
    spec = importlib.util.spec_from_file_location("build_plugin_source", REPO / "tools" / "build_plugin_source.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.runtime_files(REPO)


def _copy_plugin(plugins: Path) -> Path:
    target = plugins / "Stash2Plex"
    for name in _runtime_files():
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target / name)
    return target


def _venv(path: Path, with_pip: bool) -> str:
    """A new virtual environment without the requirements; ``with_pip``: with pip in it.

    pip comes from the wheel ensurepip bundles, unpacked into the environment's
    site-packages: what ``python -m pip`` needs, without ensurepip's own pip run (which
    installs setuptools too: 4.5 s of CPU, more than the rest of this test's set-up)."""
    venv.EnvBuilder(with_pip=False, clear=True).create(path)
    python = path / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    if with_pip:
        purelib = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        bundled = Path(ensurepip.__file__).with_name("_bundled")
        with zipfile.ZipFile(next(bundled.glob("pip-*.whl"))) as wheel:
            wheel.extractall(purelib)
    probe = subprocess.run([str(python), "-c", "import plexapi"], capture_output=True)
    assert probe.returncode != 0, "the fresh environment must not have the requirements"
    return str(python)


@pytest.fixture(scope="module")
def wheelhouse() -> Path:
    """The requirements as wheels: downloaded once per requirements list and interpreter
    into the user's cache folder (as pip caches what it downloads), then reused."""
    key = hashlib.sha256(
        (REPO / "requirements.txt").read_bytes() + f"{sys.version}|{sysconfig.get_platform()}".encode()
    ).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "stash2plex-tests"
    folder = cache / f"wheels-{key}"
    if (folder / "complete").is_file():
        return folder
    cache.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix="wheels-", dir=cache))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
            str(REPO / "requirements.txt"),
            "-d",
            str(partial),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (partial / "complete").write_text("")
    try:
        partial.rename(folder)  # atomic: a parallel run either sees it all or downloads its own
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
    return folder if (folder / "complete").is_file() else partial


# -- end to end -------------------------------------------------------------------------
def test_fresh_python_installs_locally_then_works(plugin, tmp_path, wheelhouse):
    python = _venv(tmp_path / "venv", with_pip=True)
    plugin_dir = _copy_plugin(tmp_path / "plugins")
    installed = Installed(plugin, plugin_dir, python)
    sid, rk = installed.add_scene(1)

    # No index and an empty wheel folder: installing is impossible, the reply says what to run.
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    installed.env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(empty))
    run = installed.task("queue_status")
    command = shell_command(
        [
            python,
            "-m",
            "pip",
            "install",
            "--target",
            str(plugin_dir / "deps" / PY),
            "-r",
            str(plugin_dir / "requirements.txt"),
        ]
    )
    assert run.returncode == 1 and run.output is None
    assert "could not install them" in run.error and "pip failed" in run.error, run.error
    assert command in run.error, run.error
    assert not (plugin_dir / "deps" / PY).exists()  # nothing half-installed left behind

    # With the wheels: three hooks arrive together on the fresh install. One runs pip; the
    # others wait for its install lock, then re-check and use what it installed (stashapi
    # is a namespace package: its spec has no origin). The drainer a hook starts syncs.
    installed.env["PIP_FIND_LINKS"] = str(wheelhouse)
    others = [installed.add_scene(n) for n in (2, 3)]
    contexts = [installed.stash.update_scene(s, title="Installed and synced") for s in [sid, *[o[0] for o in others]]]
    runs: list = [None] * 3
    threads = [threading.Thread(target=lambda i=i: runs.__setitem__(i, installed.hook(contexts[i]))) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    for run, context in zip(runs, contexts):
        assert run.error is None and run.output == f"scene {context['id']} queued", run.stderr[-3000:]
    pip_runs = [r for r in runs if any("installed the Python packages into" in m for m in r.messages("info"))]
    assert len(pip_runs) == 1, [r.messages("info") for r in runs]  # pip ran once, not once per hook
    for run in runs:
        if run is not pip_runs[0] and any("installing" in m for m in run.messages("info")):
            assert any("another Stash2Plex process installed the packages" in m for m in run.messages("info"))
    assert (plugin_dir / "deps" / PY / "plexapi" / "__init__.py").is_file()
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True
    ).stdout.strip()
    assert not (Path(site) / "plexapi").exists()  # the interpreter's own environment is untouched
    installed.wait_drained()
    assert installed.plex.item(rk)["fields"]["title"] == "Installed and synced"
    assert all(installed.plex.item(o[1])["fields"]["title"] == "Installed and synced" for o in others)

    # From then on the check is nearly free: nothing is installed again.
    again = installed.hook(installed.stash.update_scene(sid, title="Second edit"))
    assert again.error is None and not any("installing" in m for m in again.messages()), again.logs
    installed.wait_drained()
    assert installed.plex.item(rk)["fields"]["title"] == "Second edit"


def test_without_pip_the_error_gives_the_exact_commands(plugin, tmp_path):
    python = _venv(tmp_path / "venv", with_pip=False)
    plugin_dir = _copy_plugin(tmp_path / "plugins")
    installed = Installed(plugin, plugin_dir, python)
    sid, _ = installed.add_scene(1)
    run = installed.hook(installed.stash.update_scene(sid, title="x"))
    assert run.returncode == 1
    assert "pip is not available" in run.error and shell_command([python, "-m", "ensurepip"]) in run.error, run.error
    assert f"-m pip install --target {plugin_dir / 'deps' / PY}" in run.error
    assert run.messages("error") == [run.error]
    spool_file = plugin.data_dir / "queue" / "inbox.spool"  # the edit waits for the packages, kept
    assert [r["scene"] for r in spool.read(str(spool_file))[0]] == [sid] and not (
        plugin.data_dir / "queue" / "data.db"
    ).exists()


def test_an_unwritable_plugin_folder_or_a_missing_list_is_explained(plugin, tmp_path):
    python = _venv(tmp_path / "venv", with_pip=False)
    plugin_dir = _copy_plugin(tmp_path / "plugins")
    installed = Installed(plugin, plugin_dir, python)
    (plugin_dir / "deps").write_text("a file where the folder should be")  # as root, chmod would not stop us
    run = installed.task("queue_status")
    assert run.returncode == 1 and f"cannot write {plugin_dir / 'deps'}" in run.error, run.error
    into_stash = shell_command([python, "-m", "pip", "install", "-r", str(plugin_dir / "requirements.txt")])
    assert into_stash in run.error, run.error
    (plugin_dir / "requirements.txt").unlink()
    run = installed.task("queue_status")
    assert run.error.startswith(f"cannot read {plugin_dir / 'requirements.txt'}") and "reinstall" in run.error


def test_python_dep_manager_is_used_when_present(plugin, tmp_path):
    """A stand-in for Stash's PythonDepManager plugin (CommunityScripts): same import
    name and ``ensure_import(*specs)`` signature; it records the specs and makes them
    importable from this test run's own site-packages instead of downloading."""
    python = _venv(tmp_path / "venv", with_pip=False)  # no pip: our own install could not work
    plugins = tmp_path / "plugins"
    plugin_dir = _copy_plugin(plugins)
    record = tmp_path / "ensure_import.json"
    (plugins / "PythonDepManager").mkdir()
    (plugins / "PythonDepManager" / "__init__.py").write_text(
        "import json, sys\n"
        "def ensure_import(*specs):\n"
        f"    open({str(record)!r}, 'w').write(json.dumps(specs))\n"
        f"    sys.path.append({sysconfig.get_paths()['purelib']!r})\n"
    )
    installed = Installed(plugin, plugin_dir, python)
    sid, rk = installed.add_scene(1)
    run = installed.hook(installed.stash.update_scene(sid, title="Through PythonDepManager"))
    assert run.error is None, run.stderr[-3000:]
    assert json.loads(record.read_text()) == [
        "stashapi:stashapp-tools>=0.2.59",
        "plexapi:plexapi>=4.18",
        "persistqueue:persist-queue==1.1.0",
        "pydantic:pydantic>=2.6",
        "tenacity:tenacity>=8.2",
        "requests:requests>=2.31",
        "apprise:apprise>=2.2",
        "websocket:websocket-client>=1.6",
    ]
    assert not (plugin_dir / "deps" / PY).exists()
    installed.wait_drained()
    assert installed.plex.item(rk)["fields"]["title"] == "Through PythonDepManager"


# -- pure parts ------------------------------------------------------------------------------
def test_requirements_file_is_read_with_import_names():
    reqs = parse_requirements((REPO / "requirements.txt").read_text())
    assert [(r.dist, r.spec, r.module) for r in reqs] == [
        ("stashapp-tools", ">=0.2.59,<0.3", "stashapi"),
        ("plexapi", ">=4.18,<5", "plexapi"),
        ("persist-queue", "==1.1.0", "persistqueue"),
        ("pydantic", ">=2.6,<3", "pydantic"),
        ("tenacity", ">=8.2,<10", "tenacity"),
        ("requests", ">=2.31,<3", "requests"),
        ("apprise", ">=2.2,<3", "apprise"),
        ("websocket-client", ">=1.6,<2", "websocket"),
    ]


def test_a_line_that_cannot_be_read_is_named():
    with pytest.raises(DependencyError, match="cannot read the line '@@@'"):
        parse_requirements("requests>=2\n@@@\n")


@pytest.mark.parametrize(
    ("version", "spec", "ok"),
    [
        ("2.11.7", ">=2.6,<3", True),
        ("1.10.2", ">=2.6,<3", False),
        ("3.0", ">=2.6,<3", False),
        ("1.1.0", "==1.1.0", True),
        ("1.1", "==1.1.0", True),
        ("1.1.1", "==1.1.0", False),
        ("0.2.59", ">=0.2.59,<0.3", True),
        ("0.3.0", ">=0.2.59,<0.3", False),
        ("4.18.3", ">=4.18,<5", True),
        ("2.0rc1", ">=2", True),
        ("9.2.1", "", True),
        ("1.0", "~=1.0", True),
        ("1.0", "!=1.0", False),
    ],
)
def test_version_specifiers(version, spec, ok):
    assert satisfies(version, spec) is ok


def test_version_tuple_and_dep_manager_spec():
    assert version_tuple("2.11.7") == (2, 11, 7)
    assert version_tuple("1.0rc1") == (1, 0)
    assert version_tuple("2026.10.19.post1") == (2026, 10, 19)
    assert _dep_manager_spec(">=4.18,<5") == ">=4.18"
    assert _dep_manager_spec("==1.1.0") == "==1.1.0"
    assert _dep_manager_spec("<3") == ""


def test_a_version_too_old_counts_as_missing_and_the_check_is_remembered(tmp_path, monkeypatch):
    (tmp_path / "requirements.txt").write_text("requests>=999\ntenacity>=8\n")
    stream = io.StringIO()
    log = StashLog(stream, Redactor())
    assert [r.dist for r in Bootstrap(tmp_path, log).missing()] == ["requests"]
    assert "is installed but Stash2Plex needs requests>=999" in stream.getvalue()
    assert not (tmp_path / "deps" / "checked.json").exists()
    (tmp_path / "requirements.txt").write_text("requests>=2\ntenacity>=8\n")
    assert Bootstrap(tmp_path, log).missing() == []
    assert (tmp_path / "deps" / "checked.json").is_file()  # the next run skips the version check
    looked: list[str] = []
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: looked.append(name) or real(name, *a))
    assert Bootstrap(tmp_path, log).missing() == []
    assert sorted(looked) == ["requests", "tenacity"]  # once each: the stamp is made of the same lookups

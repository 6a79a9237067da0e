"""The plugin source (tools/build_plugin_source.py) as Stash's plugin manager uses it.

The source is built by running the script; ``index.yml`` is checked against the
fields Stash's ``RemotePackage`` reads (stashapp/stash ``pkg/pkg/pkg.go``); the zip is
installed the way ``Manager.installPackage`` does it (each entry to
``<plugins>/<id>/<name>`` with the entry's mode, then a ``manifest`` file) into an
empty plugins folder, and that copy runs the hook → drainer → Plex path and the
``all`` task against the emulators.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from tests.conftest import Installed
from tests.runner import REPO, build_argv, plugin_config

SCRIPT = REPO / "tools" / "build_plugin_source.py"
# Every package of the plugin: each top-level folder with an __init__.py, except the tests.
PACKAGES = tuple(sorted(p.parent.name for p in REPO.glob("*/__init__.py") if p.parent.name != "tests"))
FIELDS = {"id", "name", "metadata", "version", "date", "path", "sha256", "requires"}
STASH_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"  # pkg.TimeFormat, UTC


def _build(out: Path) -> dict:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    index = yaml.safe_load((out / "index.yml").read_text(encoding="utf-8"))
    assert isinstance(index, list) and len(index) == 1, index
    return index[0]


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("source") / "dist"
    return out, _build(out)


def test_index_has_the_fields_stash_reads(source):
    out, entry = source
    config = plugin_config()
    assert set(entry) == FIELDS
    assert entry["id"] == "Stash2Plex" and entry["name"] == config["name"]
    assert entry["metadata"] == {"description": config["description"]}
    assert entry["version"] == str(config["version"])
    assert entry["path"] == "Stash2Plex.zip"  # relative: resolved against the index URL
    assert entry["requires"] == []
    assert entry["sha256"] == hashlib.sha256((out / entry["path"]).read_bytes()).hexdigest()
    assert isinstance(entry["date"], str)
    datetime.strptime(entry["date"], STASH_TIME_FORMAT)
    head = subprocess.run(["git", "-C", str(REPO), "log", "-1", "--format=%ct"], capture_output=True, text=True)
    if head.returncode == 0:
        expected = datetime.fromtimestamp(int(head.stdout), timezone.utc).strftime(STASH_TIME_FORMAT)
        assert entry["date"] == expected


def test_building_twice_gives_the_same_zip(source, tmp_path):
    out, entry = source
    again = _build(tmp_path / "again")
    assert again["sha256"] == entry["sha256"]
    assert (tmp_path / "again" / "Stash2Plex.zip").read_bytes() == (out / "Stash2Plex.zip").read_bytes()


def _runtime_files() -> set[str]:
    ui = plugin_config()["ui"]
    names = {"Stash2Plex.py", "Stash2Plex.yml", "requirements.txt", *ui["javascript"], *ui["css"]}
    assert {"ui/stash2plex.js", "ui/stash2plex.css"} <= names  # the page and scene panel in Stash's UI
    for package in PACKAGES:
        names |= {
            p.relative_to(REPO).as_posix() for p in (REPO / package).rglob("*.py") if "__pycache__" not in p.parts
        }
    return names


def test_zip_holds_the_runtime_files_and_nothing_else(source):
    out, entry = source
    with zipfile.ZipFile(out / entry["path"]) as archive:
        infos = archive.infolist()
    names = [info.filename for info in infos]
    assert names == sorted(names) and len(names) == len(set(names))
    assert _runtime_files() <= set(names)
    assert set(names) - _runtime_files() <= {"README.md"}
    for name in names:
        assert name.split("/")[0] not in {"tests", "docs", "tools", ".ci", "data", "deps", "dist"}, name
        assert "__pycache__" not in name and not name.endswith(".pyc") and "bench" not in name, name
    assert [n for n in names if n.endswith((".yml", ".yaml"))] == ["Stash2Plex.yml"]  # Stash loads every .yml
    for info in infos:
        assert info.date_time == (1980, 1, 1, 0, 0, 0) and info.compress_type == zipfile.ZIP_STORED
        assert info.external_attr >> 16 == 0o100644, (info.filename, oct(info.external_attr >> 16))


def _install_like_stash(out: Path, entry: dict, plugins: Path) -> Path:
    """Stash's installPackage with an empty local path: entries to <plugins>/<id>/, then the manifest."""
    target = plugins / entry["id"]
    files = []
    with zipfile.ZipFile(out / entry["path"]) as archive:
        for info in archive.infolist():
            dest = target / info.filename
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(archive.read(info))
            dest.chmod((info.external_attr >> 16) & 0o7777)
            files.append(info.filename)
    manifest = {k: entry[k] for k in ("id", "name", "metadata", "version", "date")}
    manifest.update(source_repository=(out / "index.yml").as_uri(), files=files)
    (target / "manifest").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    return target


def test_installed_from_the_zip_the_plugin_syncs_end_to_end(source, plugin, tmp_path):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    installed = Installed(plugin, _install_like_stash(*source, plugins))
    assert build_argv(installed.plugin_dir)[-1] == str(plugins / "Stash2Plex" / "Stash2Plex.py")
    scenes = [installed.add_scene(n, studio=f"Studio {n % 2}", tags=[f"Tag {n}"]) for n in range(1, 6)]
    installed.configure()  # plex_url, plex_token, path_map saved in the emulated Stash

    sid, rk = scenes[0]
    run = installed.hook(installed.stash.update_scene(sid, title="Edited in Stash", tags=["Travel"]))
    assert run.error is None and run.output == f"scene {sid} queued", run.stderr
    installed.wait_drained()
    assert installed.plex.item(rk)["fields"]["title"] == "Edited in Stash"
    assert installed.plex.item(rk)["tags"]["genre"] == ["Travel"]

    run = installed.task("all")
    assert run.error is None, run.stderr[-3000:]
    for sid, rk in scenes:
        assert installed.plex.item(rk)["fields"]["title"] == installed.stash.scene(sid)["title"]
    installed.plex.clear_requests()
    again = installed.task("all")
    assert again.error is None and installed.plex.edit_requests() == [] and installed.plex.upload_requests() == []

    for package in ("core", "hooks", "tasks", "worker", "plex"):  # imported from the installed copy
        assert (installed.plugin_dir / package / "__pycache__").is_dir(), package
    assert (installed.data_dir / "state.db").is_file()

"""Build a Stash plugin source: ``index.yml`` plus ``Stash2Plex.zip``.

    python tools/build_plugin_source.py [--out DIR]      (default: dist/)

Stash's plugin manager (Settings → Plugins → Available Plugins → Add Source) reads a
YAML list from the source URL and installs a package by downloading the zip its
``path`` names, checking the zip's ``sha256`` and unpacking it into
``<plugins>/<source's local path>/<id>/``. Publish the output folder on any static
host (or point Stash at it with a ``file://`` URL) and Stash can install and update
the plugin itself. Choices, each following what Stash reads (stashapp/stash
``pkg/pkg/pkg.go`` ``RemotePackage``, ``pkg/pkg/manager.go`` ``installPackage``)
and how the official index is built (stashapp/CommunityScripts ``build_site.sh``):

* Fields: ``id`` (the yml's base name, which is the plugin id Stash stores settings
  under and the folder it installs into), ``name``, ``metadata.description``,
  ``version`` (Stash2Plex.yml's), ``date``, ``path``, ``sha256``, ``requires``.
* ``date`` is HEAD's commit time in UTC as ``YYYY-MM-DD HH:MM:SS`` (``pkg.TimeFormat``;
  the time now when git is unavailable). Stash offers an update when the source's
  date is later than the installed one, so the date, not the version, drives updates.
* ``path`` is relative (``Stash2Plex.zip``): Stash resolves it against the index URL.
* ``sha256`` is lowercase hex of the zip bytes, compared as is by Stash.
* Files sit at the zip's root (Stash writes each entry to ``<id>/<entry name>``),
  and only what runs: the entry script, its yml, requirements.txt, the README,
  every ``.py`` of the runtime packages and the UI files the yml lists under
  ``ui: javascript/css`` (Stash serves them from the plugin folder). No tests, docs, tools, caches: a second
  ``.yml`` would even be loaded by Stash as another plugin.
* Reproducible: entries sorted, every timestamp 1980-01-01, stored uncompressed
  (deflate output varies between zlib builds; CommunityScripts uses ``zip -0 -X``),
  no extra fields, Unix attributes fixed to regular file 0644. The mode matters:
  Stash creates each file with the entry's mode, and a zip entry without one would
  leave files nobody can read.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import subprocess
import sys
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
PLUGIN_ID = "Stash2Plex"
TOP_FILES = ("Stash2Plex.py", "Stash2Plex.yml", "requirements.txt", "README.md")
PACKAGES = ("app", "core", "hooks", "plex", "stash", "sync_queue", "tasks", "validation", "worker")
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
FILE_MODE = 0o100644  # regular file, rw-r--r--
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"  # Stash's pkg.TimeFormat, UTC


def runtime_files(root: Path = REPO) -> list[str]:
    """The zip's entry names (POSIX, relative to the plugin folder), sorted."""
    names = [name for name in TOP_FILES if (root / name).is_file()]
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            if "__pycache__" not in path.parts:
                names.append(path.relative_to(root).as_posix())
    names += ui_files(root)
    return sorted(names)


def ui_files(root: Path = REPO) -> list[str]:
    """The files Stash2Plex.yml lists under ``ui: javascript`` and ``ui: css``."""
    ui = yaml.safe_load((root / f"{PLUGIN_ID}.yml").read_text(encoding="utf-8")).get("ui") or {}
    listed = [*(ui.get("javascript") or []), *(ui.get("css") or [])]
    missing = [name for name in listed if not (root / name).is_file()]
    if missing:
        raise SystemExit(f"{PLUGIN_ID}.yml lists UI files that do not exist: {', '.join(missing)}")
    return listed


def build_zip(root: Path, names: list[str]) -> bytes:
    """The zip's bytes: the same files give the same bytes on any machine."""
    target = io.BytesIO()
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in names:
            info = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
            info.create_system = 3  # Unix, so external_attr carries the mode
            info.external_attr = FILE_MODE << 16
            archive.writestr(info, (root / name).read_bytes())
    return target.getvalue()


def commit_date(root: Path) -> str:
    """HEAD's commit time in UTC in Stash's format; now when git cannot tell."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "log", "-1", "--format=%ct", "HEAD"], capture_output=True, text=True, timeout=30
        )
        stamp = int(done.stdout.strip()) if done.returncode == 0 else None
    except (OSError, ValueError, subprocess.SubprocessError):
        stamp = None
    moment = datetime.fromtimestamp(stamp, timezone.utc) if stamp is not None else datetime.now(timezone.utc)
    return moment.strftime(TIME_FORMAT)


def index_entry(config: dict, zip_bytes: bytes, date: str) -> dict:
    """One package of the index, with the fields Stash's ``RemotePackage`` reads."""
    return {
        "id": PLUGIN_ID,
        "name": str(config.get("name") or PLUGIN_ID),
        "metadata": {"description": str(config.get("description") or "")},
        "version": str(config["version"]),
        "date": date,
        "path": f"{PLUGIN_ID}.zip",
        "sha256": hashlib.sha256(zip_bytes).hexdigest(),
        "requires": [],
    }


def build(out: Path, root: Path = REPO) -> dict:
    """Write ``<out>/Stash2Plex.zip`` and ``<out>/index.yml``; return the index entry."""
    config = yaml.safe_load((root / f"{PLUGIN_ID}.yml").read_text(encoding="utf-8"))
    zip_bytes = build_zip(root, runtime_files(root))
    entry = index_entry(config, zip_bytes, commit_date(root))
    out.mkdir(parents=True, exist_ok=True)
    (out / entry["path"]).write_bytes(zip_bytes)
    text = yaml.safe_dump([entry], sort_keys=False, allow_unicode=True, default_flow_style=False, width=1000)
    (out / "index.yml").write_text(text, encoding="utf-8")
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the Stash plugin source (index.yml + zip).")
    parser.add_argument("--out", type=Path, default=REPO / "dist", help="output folder (default: dist/)")
    args = parser.parse_args(argv)
    entry = build(args.out)
    print(f"{args.out / entry['path']}: version {entry['version']}, date {entry['date']}, sha256 {entry['sha256']}")
    print(f"{args.out / 'index.yml'}: publish this folder and add the URL of index.yml as a plugin source in Stash")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Build a Stash plugin source: ``index.yml`` plus ``Stash2Plex.zip``.

    python tools/build_plugin_source.py [--out DIR]      (default: dist/)

Publish the output folder on any static host (or a ``file://`` URL) and Stash's plugin
manager installs and updates the plugin. The index follows what Stash reads (stashapp/stash
``pkg/pkg/pkg.go`` ``RemotePackage``, ``pkg/pkg/manager.go`` ``installPackage``) and the
zip is reproducible; docs/architecture.md ("Plugin source") gives each field's rule.
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


def _config(root: Path) -> dict:
    return yaml.safe_load((root / f"{PLUGIN_ID}.yml").read_text(encoding="utf-8"))


def runtime_files(root: Path = REPO) -> list[str]:
    """The zip's entry names (POSIX, relative to the plugin folder), sorted: the top files,
    the packages' modules and the files Stash2Plex.yml lists under ``ui: javascript`` and ``ui: css``."""
    names = [name for name in TOP_FILES if (root / name).is_file()]
    for package in PACKAGES:
        names += [path.relative_to(root).as_posix() for path in (root / package).rglob("*.py")]
    ui = _config(root).get("ui") or {}
    listed = [*(ui.get("javascript") or []), *(ui.get("css") or [])]
    missing = [name for name in listed if not (root / name).is_file()]
    if missing:
        raise SystemExit(f"{PLUGIN_ID}.yml lists UI files that do not exist: {', '.join(missing)}")
    return sorted(names + listed)


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
    config = _config(root)
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

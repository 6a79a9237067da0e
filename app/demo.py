"""``python Stash2Plex.py demo``: the whole product against the bundled emulators.

Starts a Stash emulator and a Plex emulator on 127.0.0.1 with a sample library
whose Stash and Plex paths differ by a prefix (/stash/media vs /plex/media), saves
the plugin settings in the emulated Stash, then runs the real plugin exactly as
Stash does: a few hook events (users editing scenes), then the ``all`` task. It
prints what changed in Plex, per scene and field. Needs the test requirements
(graphql-core, pyyaml): ``pip install -r requirements-test.txt``.
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from core.platform import is_locked
from sync_queue.queue import JobQueue

SCENES = 40
STUDIOS = ["Northern Lights", "Blue Harbor", "Redwood Films"]
PERFORMERS = ["Ava Stone", "Ben Hart", "Cleo Park", "Dan Moss", "Eve Lane", "Finn Cole"]
TAGS = ["Outdoor", "Interview", "Behind the Scenes", "4K", "Classic", "Drama", "Travel"]
WATCHED = ("title", "summary", "studio", "originallyAvailableAt")


def _seed(stash: Any, plex: Any, rng: random.Random) -> list[int]:
    plex.add_section("Stash", ["/plex/media"], key=1)
    ids = []
    for n in range(1, SCENES + 1):
        name = f"{STUDIOS[n % 3].lower().replace(' ', '-')}/scene-{n:03d}.mp4"
        sid = stash.add_scene(
            title=f"Scene {n}: {rng.choice(['Sunrise', 'Harbor', 'Forest', 'Night Drive'])}",
            details=f"Sample scene {n}.\nSecond line of details.",
            date=f"2024-{1 + n % 12:02d}-{1 + n % 28:02d}",
            studio=STUDIOS[n % 3],
            performers=rng.sample(PERFORMERS, 2),
            tags=rng.sample(TAGS, 3),
            files=[{"path": f"/stash/media/{name}", "size": 10_000_000 + n, "duration": 600.0 + n}],
        )
        plex.add_item(1, f"/plex/media/{name}", size=10_000_000 + n, duration_ms=(600 + n) * 1000)
        ids.append(sid)
    return ids


def _snapshot(plex: Any) -> dict[int, dict]:
    return {item["ratingKey"]: item for item in plex.items()}


def _diff(before: dict, after: dict) -> list[str]:
    lines = []
    for field in WATCHED:
        old, new = before["fields"].get(field), after["fields"].get(field)
        if old != new:
            lines.append(f"    {field}: {old!r} → {new!r}")
    for tag_type in ("genre", "actor", "collection"):
        old, new = before["tags"].get(tag_type, []), after["tags"].get(tag_type, [])
        if sorted(old) != sorted(new):
            lines.append(f"    {tag_type}: {sorted(old)} → {sorted(new)}")
    if after.get("uploads", 0) != before.get("uploads", 0):
        lines.append(f"    poster: uploaded ({after['uploads'] - before.get('uploads', 0)} new)")
    return lines


def _report(out: TextIO, before: dict, after: dict) -> int:
    changed = 0
    for key in sorted(after):
        lines = _diff(before.get(key, after[key]), after[key])
        if lines:
            changed += 1
            out.write(f"  Plex item {key} ({after[key]['files'][0]}):\n" + "\n".join(lines) + "\n")
    return changed


def _wait_drained(data_dir: Path, timeout: float = 60.0) -> None:
    """Until no drainer runs and nothing is pending, looking at the lock and the queue from
    here (a plugin process per look would cost more than the work it waits for)."""
    lock = data_dir / "drainer.lock"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_locked(lock):
            queue = JobQueue(data_dir / "queue")
            try:
                pending = queue.counts()["pending"]
            finally:
                queue.close()
            if pending == 0 and not is_locked(lock):
                return
        time.sleep(0.05)


CHECKOUT = Path(__file__).resolve().parent.parent


def main(stdout: TextIO, stderr: TextIO, env: dict[str, str], argv: list[str]) -> int:
    if not (CHECKOUT / "tests" / "emulators").is_dir():
        stderr.write(
            "the demo needs a source checkout of Stash2Plex (its tests/ folder holds the emulators); "
            "an installed plugin leaves it out. Clone the repository and run: "
            "pip install -r requirements-test.txt && python Stash2Plex.py demo\n"
        )
        return 1
    try:
        from tests.emulators.plex_emulator import PlexEmulator
        from tests.emulators.stash_emulator import StashEmulator
        from tests.runner import hook_document, run_plugin, task_document
    except ImportError as exc:
        stderr.write(f"the demo needs the test requirements ({exc}); run: pip install -r requirements-test.txt\n")
        return 1
    rng = random.Random(7)
    with StashEmulator() as stash, PlexEmulator() as plex, tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        plugin_env = {**env, "STASH2PLEX_DATA_DIR": str(data_dir)}
        ids = _seed(stash, plex, rng)
        stash.plugin_settings = {
            "Stash2Plex": {"plex_url": plex.url, "plex_token": plex.token, "path_map": "/stash/media=/plex/media"}
        }
        connection = stash.server_connection(str(CHECKOUT))

        def task(mode: str) -> Any:
            return run_plugin(task_document(connection, mode), env=plugin_env)

        stdout.write(f"Stash emulator {stash.url}, Plex emulator {plex.url}, {len(ids)} scenes\n")
        stdout.write("Stash paths /stash/media/… map to Plex paths /plex/media/… (path_map)\n\n")
        before = _snapshot(plex)
        stdout.write("1. A user edits three scenes in Stash; each edit fires the Scene.Update.Post hook:\n")
        edits: list[dict[str, Any]] = [
            dict(title="Harbor at Dawn (Director's Cut)", tags=["Travel", "4K"]),
            dict(details="Rewritten description.\nWith two lines.", performers=["Cleo Park"]),
            dict(studio="Blue Harbor", date="2023-07-14"),
        ]
        for sid, change in zip(ids[:3], edits):
            run = run_plugin(hook_document(connection, stash.update_scene(sid, **change)), env=plugin_env)
            stdout.write(f"   hook for scene {sid} answered in {run.wall * 1000:.0f} ms: {run.output or run.error}\n")
        _wait_drained(data_dir)
        stdout.write("   the background drainer wrote them to Plex:\n")
        _report(stdout, before, _snapshot(plex))
        middle = _snapshot(plex)
        stdout.write("\n2. The 'Sync all scenes' task:\n")
        run = task("all")
        stdout.write(f"   {run.output if run.error is None else 'error: ' + run.error} in {run.wall:.1f} s\n")
        changed = _report(stdout, middle, _snapshot(plex))
        stdout.write(f"   {changed} Plex items changed\n")
        stdout.write("\n3. 'Sync all scenes' again on the unchanged library:\n")
        plex.clear_requests()
        run = task("all")
        stdout.write(
            f"   {run.output if run.error is None else 'error: ' + run.error}; "
            f"{len(plex.edit_requests())} edit requests, {len(plex.upload_requests())} uploads\n"
        )
        status = task("queue_status").output
        stdout.write(f"\nQueue status: {status}\n")
    return 0

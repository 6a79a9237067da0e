"""``python Stash2Plex.py demo [--serve]``: the whole product against the bundled emulators.

Starts a Stash emulator and a Plex emulator on 127.0.0.1 with a small library whose Stash
and Plex paths differ by a prefix, saves the plugin settings in the emulated Stash, and
runs the real plugin exactly as Stash does (hooks, tasks, the page's operations) and the
command line as a user does. The story: edits reach Plex; ``Sync all scenes``; the
dead-letter queue; an ambiguous and a missing scene settled from the match inbox; a play
and a rating in Plex coming back to Stash (``watch``); nothing left to write. ``--serve``
then keeps both emulators (and Stash's web page with the plugin, when Stash's prebuilt UI
is at hand) up until Ctrl-C and prints their URLs and a command line to try.

The emulators are the test suite's servers (``tests/emulators/``: Stash's GraphQL API on
graphql-core, Plex's XML API, each checked against the real server's source). They stay
there: they are test code with test requirements (``pip install -r requirements-test.txt``)
and the plugin Stash installs leaves ``tests/`` out, so the demo needs a source checkout.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from app.root import ENTRY_SCRIPT, PLUGIN_DIR
from core.log import shortened
from sync_queue.dlq import DeadLetterQueue
from sync_queue.job import Job

STUDIOS = ["Northern Lights", "Blue Harbor", "Redwood Films"]
PERFORMERS = ["Ava Stone", "Ben Hart", "Cleo Park", "Dan Moss", "Eve Lane", "Finn Cole"]
TAGS = ["Outdoor", "Interview", "Behind the Scenes", "4K", "Classic", "Drama", "Travel"]
SCENES = 10
SHOWN = 3  # Plex items whose changes are printed per step (then a count of the rest)
FIELDS = {"title": "title", "summary": "summary", "studio": "studio", "originallyAvailableAt": "date"}
NOT_FOUND_REASON = (
    "not in Plex after 12 attempts: no Plex item holds /plex/media/extras/clip-0412.mp4. Check that Plex has "
    "scanned the file and that path_map maps Stash paths to Plex paths; then run 'Retry dead-letter queue'."
)


class Demo:
    """The emulators, the plugin's data folder and the steps of the story."""

    def __init__(self, plugin: Any, out: TextIO) -> None:
        """``plugin``: the test suite's ``Plugin`` (tests/conftest.py), the plugin as Stash runs it."""
        self.plugin, self.out = plugin, out
        self.stash, self.plex, self.data_dir, self.env = plugin.stash, plugin.plex, plugin.data_dir, plugin.env
        self.ids: list[int] = []
        self.extra: dict[str, int] = {}

    # -- talking to the plugin as Stash and a user do ------------------------------------------
    def run(self, args: dict[str, Any]) -> Any:
        """One plugin run as Stash starts it (a task, a hook or a page's operation)."""
        from tests.runner import run_plugin

        return run_plugin({"server_connection": self.plugin.connection, "args": args}, env=self.env)

    def command(self, *args: str) -> str:
        """The command line, as a user runs it in a shell; its stdout."""
        from tests.runner import run_command

        env = {**os.environ, **self.env, "STASH2PLEX_STASH_URL": self.stash.url}
        code, out, err = run_command([sys.executable, str(ENTRY_SCRIPT), *args], env, 120)
        if code != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {err.strip()}")
        return out

    def say(self, line: str = "") -> None:
        self.out.write(line + "\n")
        self.out.flush()

    # -- the library ----------------------------------------------------------------------------
    def seed(self, rng: random.Random) -> None:
        self.plex.add_section("Stash", ["/plex/media"], key=1)
        for n in range(1, SCENES + 1):
            name = f"{STUDIOS[n % 3].lower().replace(' ', '-')}/scene-{n:03d}.mp4"
            self.ids.append(
                self.stash.add_scene(
                    title=f"Scene {n}: {rng.choice(['Sunrise', 'Harbor', 'Forest', 'Night Drive'])}",
                    details=f"Sample scene {n}.",
                    date=f"2024-{1 + n % 12:02d}-{1 + n % 28:02d}",
                    studio=STUDIOS[n % 3],
                    performers=rng.sample(PERFORMERS, 2),
                    tags=rng.sample(TAGS, 2),
                    files=[{"path": f"/stash/media/{name}", "size": 10_000_000 + n, "duration": 600.0 + n}],
                )
            )
            self.plex.add_item(1, f"/plex/media/{name}", size=10_000_000 + n, duration_ms=(600 + n) * 1000)
        # Two copies of one file in Plex, neither at the scene's mapped path: ambiguous.
        self.extra["ambiguous"] = self.stash.add_scene(
            title="Two copies in Plex", files=[{"path": "/stash/media/inbox/copy.mp4", "size": 777, "duration": 70.0}]
        )
        for folder in ("old", "new"):
            self.extra[folder] = self.plex.add_item(1, f"/plex/media/{folder}/copy.mp4", size=777, duration_ms=70_000)
        # Plex holds this file under another name: nothing at the mapped path, nothing by name.
        self.extra["renamed"] = self.plex.add_item(
            1, "/plex/media/extras/Clip (final).mp4", size=4120, duration_ms=41_000
        )
        self.plugin.configure()  # plex_url, plex_token and path_map /stash/media=/plex/media

    @contextlib.contextmanager
    def plex_changes(self) -> Iterator[None]:
        """Says what changed in Plex during the block, as lines (the first ``SHOWN`` items)."""
        before = {item["ratingKey"]: item for item in self.plex.items()}
        yield
        changed = 0
        for item in self.plex.items():
            diff = _item_diff(before.get(item["ratingKey"], item), item)
            if diff:
                changed += 1
                if changed <= SHOWN:
                    self.say(f"   Plex item {item['ratingKey']} {item['files'][0]}")
                    for line in diff:
                        self.say(f"       {line}")
        if changed > SHOWN:
            self.say(f"   … and {changed - SHOWN} more Plex items")

    # -- the story --------------------------------------------------------------------------------
    def edits(self) -> None:
        self.say("1. You edit three scenes in Stash; each edit runs the plugin's hook:")
        edits: list[dict[str, Any]] = [
            {"title": "Harbor at Dawn (Director's Cut)", "tags": ["Travel", "4K"]},
            {"details": "Rewritten description.", "performers": ["Cleo Park"]},
            {"studio": "Blue Harbor", "date": "2023-07-14"},
        ]
        with self.plex_changes():
            for sid, change in zip(self.ids[:3], edits):
                run = self.run({"hookContext": self.stash.update_scene(sid, **change)})
                what = "queued" if run.error is None else f"error: {run.error}"
                self.say(f"   scene {sid} ({', '.join(change)}): {what}; the hook answered in {run.wall * 1000:.0f} ms")
            self.plugin.wait_drained()
            self.say("   The background drainer wrote them to Plex:")

    def sync_all(self) -> None:
        self.say("\n2. The task 'Sync all scenes':")
        with self.plex_changes():
            run = self.run({"mode": "all"})
            self.say(
                f"   {_counts(run.output) if run.error is None else 'error: ' + str(run.error)} in {run.wall:.1f} s"
            )

    def dead_letters(self) -> None:
        self.say("\n3. The dead-letter queue (jobs that will not succeed as they are):")
        sid = self.stash.add_scene(
            title="Renamed in Plex",
            files=[{"path": "/stash/media/extras/clip-0412.mp4", "size": 4120, "duration": 41.0}],
        )
        self.extra["missing"] = sid
        with contextlib.closing(DeadLetterQueue(self.data_dir)) as dlq:  # its retries take hours: the demo skips them
            dlq.add(Job(scene_id=sid, attempt=11), "PlexNotFound", NOT_FOUND_REASON, "Renamed in Plex")
        for group in self.run({"mode": "ui_status"}).output["dlq"]["groups"]:
            for entry in group["scenes"]:
                self.say(f"   scene {entry['scene_id']} {entry['title']!r}: {entry['reason']}")
        self.say(
            f"   (scene {sid} was added later; after its retries, a few hours, it lands here: the demo put it there)"
        )

    def inbox(self) -> None:
        self.say("\n4. The match inbox on the Stash2Plex page settles both:")
        page = self.run({"mode": "ui_inbox"}).output
        answers = {self.extra["ambiguous"]: self.extra["new"], self.extra["missing"]: self.extra["renamed"]}
        for scene in page["scenes"]:
            self.say(f"   {scene['kind']}: scene {scene['scene_id']} {scene['title']!r}")
            for c in scene["candidates"]:
                evidence = [w for w, ok in (("same size", c["same_size"]), ("same length", c["same_duration"])) if ok]
                self.say(
                    f"       candidate Plex item {c['rating_key']} {c['path']} ({', '.join(evidence) or 'no evidence'})"
                )
        with self.plex_changes():
            for sid, rating_key in answers.items():
                run = self.run({"mode": "ui_pin", "scene_id": sid, "answer": "item", "rating_key": rating_key})
                self.say(
                    f"   'This one' for scene {sid}: Plex item {rating_key}" + (f" ({run.error})" if run.error else "")
                )
            self.plugin.wait_drained()
        status = self.run({"mode": "ui_status"}).output
        self.say(
            f"   the inbox: {self.run({'mode': 'ui_inbox'}).output['total']} scenes; dead letters: {status['dlq']['count']}"
        )

    def plex_to_stash(self) -> None:
        self.say("\n5. Plex back into Stash (import_plays, import_ratings; 'watch' keeps listening):")
        self.plugin.configure(import_plays=True, import_ratings=True)
        self.command("watch", "--once")  # the first look: what Plex records from now on goes to Stash
        sid, rating_key = self.ids[4], self.plex.items()[4]["ratingKey"]
        before = self.stash.scene(sid)
        self.plex.play(rating_key)
        _rate(self.plex, rating_key, 8.0)
        self.say(f"   someone watches scene {sid} in Plex and gives it 4 stars")
        self.command("watch", "--once")  # what 'watch' does every minute
        after = self.stash.scene(sid)
        self.say(f"   'watch --once' (what 'watch' does every minute): scene {sid} in Stash:")
        self.say(
            f"       plays {len(self.stash.scene_plays(sid))}, rating {before['rating100'] or 'none'} → {after['rating100']} (of 100)"
        )

    def nothing_left(self) -> None:
        self.say("\n6. 'Sync all scenes' again:")
        self.plex.clear_requests()
        run = self.run({"mode": "all"})
        self.say(
            f"   {_counts(run.output)}; {len(self.plex.edit_requests())} edit requests, {len(self.plex.upload_requests())} uploads"
        )
        self.say("\n" + self.command("status").strip())


def _item_diff(before: dict, after: dict) -> list[str]:
    lines = []
    for field, label in FIELDS.items():
        old, new = before["fields"].get(field) or "", after["fields"].get(field) or ""
        if old != new:
            lines.append(f"{label}: {_short(old)} → {_short(new)}")
    for tag_type in ("genre", "actor", "collection"):
        old, new = set(before["tags"].get(tag_type, [])), set(after["tags"].get(tag_type, []))
        if old != new:
            lines.append(
                f"{tag_type}: " + " ".join([f"+{n}" for n in sorted(new - old)] + [f"−{n}" for n in sorted(old - new)])
            )
    if after.get("uploads", 0) != before.get("uploads", 0):
        lines.append("poster: uploaded")
    return lines


def _short(value: str) -> str:
    return repr(shortened(value, 50)) if value else "(empty)"


def _counts(output: dict[str, Any]) -> str:
    keys = ("checked", "queued", "synced", "unchanged", "failed", "retrying")
    return ", ".join(f"{output.get(k, 0)} {k}" for k in keys if output.get(k)) or "nothing to do"


def _rate(plex: Any, rating_key: int, rating: float) -> None:
    """A rating given in Plex Web, through plexapi's ``Video.rate`` (PUT /:/rate)."""
    from plexapi.server import PlexServer

    PlexServer(plex.url, plex.token, timeout=5).fetchItem(rating_key).rate(rating)


def _serve(demo: Demo, ui: Any) -> None:
    """Keep everything up until Ctrl-C; print where to look and what to try."""
    demo.say("\nThe emulators stay up (Ctrl-C stops them):")
    if ui is not None:
        demo.say(
            f"   Stash's web UI with the plugin: {demo.stash.url}/stash2plex (a scene's Plex tab: {demo.stash.url}/scenes/1)"
        )
    else:
        demo.say(
            f"   Stash (GraphQL only: Stash's prebuilt UI is not here, see tests/browser/README.md): {demo.stash.url}/graphql"
        )
    demo.say(f"   Plex: {demo.plex.url}")
    demo.say("   Try the command line against them:")
    demo.say(
        f"       STASH2PLEX_STASH_URL={demo.stash.url} STASH2PLEX_DATA_DIR={demo.data_dir} python Stash2Plex.py status"
    )
    demo.say("   (any command: all --dry-run, unmatched, inspect 1, health_check, watch)")
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.wait(0.25):  # in slices: a signal's handler runs between them
            pass
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    demo.say("stopped")


def _stash_ui(stash: Any, env: dict[str, str]) -> Any:
    """Stash's web UI with the plugin installed, when Stash's prebuilt UI is at hand."""
    from tests import reference

    build, schema = reference.path("stash-ui/build"), reference.path("stash-schema")
    if not (build / "index.html").is_file() or not (schema / "schema.graphql").is_file():
        return None
    ui = stash.serve_ui(build, schema)
    ui.install_plugin(PLUGIN_DIR, env)
    return ui


def main(stdout: TextIO, stderr: TextIO, env: dict[str, str], serve: bool = False) -> int:
    if not (PLUGIN_DIR / "tests" / "emulators").is_dir():
        stderr.write(
            "the demo needs a source checkout of Stash2Plex (its tests/ folder holds the emulators); "
            "an installed plugin leaves it out. Clone the repository and run: "
            "pip install -r requirements-test.txt && python Stash2Plex.py demo\n"
        )
        return 1
    try:
        from tests.conftest import Plugin
        from tests.emulators.plex_emulator import PlexEmulator
        from tests.emulators.stash_emulator import StashEmulator
    except ImportError as exc:
        stderr.write(f"the demo needs the test requirements ({exc}); run: pip install -r requirements-test.txt\n")
        return 1
    with StashEmulator() as stash, PlexEmulator() as plex, tempfile.TemporaryDirectory() as tmp:
        stash.auth_required = False  # a default Stash install has no login
        data_dir = Path(tmp) / "data"
        # the drainer exits once the queue is empty (it would outlive the demo's folder)
        demo_env = {"STASH2PLEX_DRAINER_LINGER_S": "0", **env, "STASH2PLEX_DATA_DIR": str(data_dir)}
        demo = Demo(Plugin(stash, plex, data_dir, demo_env), stdout)
        ui = _stash_ui(stash, demo.env) if serve else None
        demo.seed(random.Random(7))
        demo.say(f"Stash2Plex demo: Stash {stash.url} and Plex {plex.url} (emulators), {len(demo.ids) + 1} scenes")
        demo.say("Stash's /stash/media/… is Plex's /plex/media/… (the path_map setting)\n")
        for step in (demo.edits, demo.sync_all, demo.dead_letters, demo.inbox, demo.plex_to_stash, demo.nothing_left):
            step()
        if serve:
            _serve(demo, ui)
    return 0

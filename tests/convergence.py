"""The model-based convergence check shared by tests/test_convergence.py and
tests/bench/convergence.py.

A seeded random sequence of what users and servers do (scene edits of every synced
field, hundreds of tags at once, covers, case-only and ordinary renames, deletions (with
their ``Scene.Destroy.Post`` hook, or unheard), Plex
rescans that move files or re-add items, a new file taking a moved file's path, a new
scene saved at a deleted scene's path (the same Plex item), two items exchanging files
(also while ``reconcile`` runs), bulk tasks with edits and entity renames or deletions
arriving mid-way; Plex plays, with imports of the watch history between), each through
the real plugin process and the emulators. Then the plugin's
tasks run until the queue is empty, and every live scene's Plex item must show what
Stash holds (a scene without a cover: no other scene's cover as its poster), no item may
carry another scene's data, an item no scene holds shows nothing Stash2Plex wrote, and
every Plex play is in the Stash play history of the scene that held its item when it was
played, exactly once.

With ``ratings`` (the bench's seeds; the suite's stay as they were) ratings are played too,
from an RNG of their own: a user's rating set, changed or cleared in Stash (the scene hook)
and in Plex (``PUT /:/rate``, as Plex Web sends it), both nearly at once (either order, or in
the same second), among every operation above, with ``import_ratings`` on and the import run
as a scheduled ``watch --once`` between. The two emulators share one clock (``Wall``), so a
change made after another is dated after it. At the end every live scene's rating and its
item's follow the rule the product implements (docs/usage.md, "What wins when both sides
change"; ``_check_ratings``), and no rating is written in a loop (a last round of imports and
syncs writes nothing).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.emulators.stash_emulator import _DEFAULT_SVG, cover_png

TAGS = ("drama", "Drama", "kept", "outdoor", "Outdoor", "night")
PERFORMERS = ("john doe", "John Doe", "Jane Roe", "ann lee")
STUDIOS = ("acme films", "Acme Films", "Beta", None)
DATES = ("2024-01-02", "2023-06-30", "2020-02-29")
TITLE = re.compile(r"^S(\d+) ")
MANY_TAGS = tuple(f"many tag {n:03d}" for n in range(500))  # a scene with hundreds of tags
KINDS = {"tag": "tags", "performer": "performers", "studio": "studio"}
STASH_RATINGS = (None, 20, 40, 50, 60, 73, 80, 100)  # rating100; 73 is no half star (Plex: 7.5)
PLEX_RATINGS = (None, 2.0, 4.0, 5.0, 6.0, 7.5, 8.0, 10.0)  # userRating; None clears (rating=-1)


class Wall:
    """One clock for both emulators, as two servers reading the same wall clock (their
    ``Date`` headers too: the plugin learns each server's offset from them). ``after`` waits
    for the next whole second past every stamp given so far (the Stash emulator's logical
    clock, a strict second per update, runs ahead of real time), so a change made after
    another is dated after it; ``held`` dates Plex's next changes at a given second (two
    changes in the same second)."""

    def __init__(self, stash) -> None:
        self.stash, self.held = stash, None

    def plex(self) -> float:
        return float(self.held) if self.held is not None else time.time()

    def stash_clock(self) -> float:
        return time.time()

    def after(self, plex_stamp: int = 0) -> None:
        """Sleep until the clock is in a second after every stamp either server gave."""
        last = max(self.stash._last_ts, plex_stamp)
        while int(time.time()) <= last:
            time.sleep(0.05)


@dataclass
class World:
    plugin: object
    rng: random.Random
    history: dict[int, set[str]] = field(default_factory=dict)  # every Plex path a scene had
    live: set[int] = field(default_factory=set)
    version: int = 0
    log: list[str] = field(default_factory=list)
    orphaned: set[str] = field(default_factory=set)  # Plex paths of deleted scenes' files
    # Plex plays come from an RNG of their own, so the operations of a seed stay as they were
    plays_rng: random.Random = field(default_factory=random.Random)
    plays: int = 0
    covers: dict[int, set[str]] = field(default_factory=dict)  # SHA-1 of every cover a scene had
    # Ratings (``ratings``): an RNG of their own too; what users did on each side
    ratings: bool = False
    ratings_rng: random.Random = field(default_factory=random.Random)
    wall: Wall | None = None
    stash_side: dict[int, tuple[int, int | None]] = field(
        default_factory=dict
    )  # sid → the user's last (time, rating100)
    edited_after: set[int] = field(default_factory=set)  # scenes edited otherwise since their last rating in Stash
    seen_first: set[int] = field(default_factory=set)  # items rated in Plex after Stash's change reached them
    plex_last: int = 0  # the newest lastRatedAt a user's rating got
    seen_ts: dict[int, int] = field(default_factory=dict)  # sid → the newest updated_at seen
    plex_side: dict[int, tuple[int, float | None]] = field(default_factory=dict)  # rk → the user's last (time, rating)
    loose: set[int] = field(default_factory=set)  # scenes whose item changed hands: agreement checked only
    stash_hist: dict[int, set[float]] = field(default_factory=dict)  # sid → every rating it had, in Plex's terms
    user_plex_rates: int = 0
    user_stash_rates: int = 0
    owner_changes: int = 0  # a rating given to an item may reach each scene that holds it in turn
    delivered: set[int] = field(default_factory=set)  # id() of the hook contexts the model delivered
    # The machine's own faults (``faults``): an RNG of their own; what is going on now
    faults: bool = False
    faults_rng: random.Random = field(default_factory=random.Random)
    full_at: int | None = None  # the file-size limit of the next hook (and the drainer it starts)
    full_drainer: int = 0  # the pid of a drainer that runs out of space
    full_steps: int = 0  # operations until its space comes back
    full_since: int = 0  # where the operations played since the disk filled begin
    holder: object = None  # the process holding every SQLite file of the data folder
    fault_problems: list[str] = field(default_factory=list)
    fired_seen: int = 0  # how many of Stash's hook contexts were looked at for the plugin's own

    @property
    def stash(self):
        return self.plugin.stash

    @property
    def plex(self):
        return self.plugin.plex

    # -- helpers --------------------------------------------------------------------
    def add(self, name: str, size: int) -> int:
        sid = self.stash.add_scene(
            title="pending", files=[{"path": f"/stash/media/{name}", "size": size, "duration": 60.0}]
        )
        rng = self.rng
        self.stash.update_scene(
            sid,
            title=f"S{sid} v0",
            tags=rng.sample(TAGS, rng.randint(0, 2)),
            performers=rng.sample(PERFORMERS, rng.randint(0, 1)),
            studio=rng.choice(STUDIOS),
        )
        self.plex.add_item(1, f"/plex/media/{name}", size=size, duration_ms=60000)
        self.history[sid] = {f"/plex/media/{name}"}
        self.live.add(sid)
        self.note_cover(sid)
        return sid

    def note_cover(self, sid: int) -> None:
        shown = self.stash.screenshot_bytes(sid)
        if shown != _DEFAULT_SVG:
            self.covers.setdefault(sid, set()).add(hashlib.sha1(shown).hexdigest())

    def destroyed(self, sid: int) -> str:
        """Delete the scene in Stash (its file stays); Stash fires ``Scene.Destroy.Post``,
        which reaches the plugin in most runs (else: the plugin was not installed then,
        and ``all``/``reconcile`` find it gone)."""
        context = self.stash.delete_scene(sid)
        self.live.discard(sid)
        if self.rng.random() < 0.6:
            self.hook(context)
            return "with its hook"
        return "without a hook"

    def hook(self, context: dict) -> None:
        self.delivered.add(id(context))
        run = self.plugin.hook(context, file_size_limit=self.full_at)
        assert run.error is None, run.stderr[-2000:]

    def pick(self) -> int | None:
        return self.rng.choice(sorted(self.live)) if self.live else None

    def item_at(self, path: str) -> dict | None:
        found = [i for i in self.plex.items() if i["files"][0] == path]
        return found[0] if found else None

    def next_title(self, sid: int) -> str:
        self.version += 1
        return f"S{sid} v{self.version}"

    # -- operations -----------------------------------------------------------------
    def edit(self) -> None:
        sid = self.pick()
        if sid is None:
            return
        rng, changes = self.rng, {}
        for name in rng.sample(["title", "details", "date", "studio", "performers", "tags"], rng.randint(1, 4)):
            if name == "title":
                changes["title"] = self.next_title(sid)
            elif name == "details":
                long = rng.random() < 0.2
                changes["details"] = f"S{sid} details {self.version} " + ("長" * 6000 if long else "text")
            elif name == "date":
                changes["date"] = rng.choice(DATES)
            elif name == "studio":
                changes["studio"] = rng.choice(STUDIOS)
            elif name == "performers":
                changes["performers"] = rng.sample(PERFORMERS, rng.randint(0, 2))
            elif rng.random() < 0.15:
                changes["tags"] = rng.sample(MANY_TAGS, rng.randint(150, 400))
            else:
                changes["tags"] = rng.sample(TAGS, rng.randint(0, 3))
        self.log.append(f"edit {sid} {sorted(changes)}")
        self.hook(self.stash.update_scene(sid, **changes))

    def cover(self) -> None:
        sid = self.pick()
        if sid is None:
            return
        self.version += 1
        cover = None if self.rng.random() < 0.3 else cover_png(sid, 1000 + self.version)
        self.log.append(f"cover {sid} {'none' if cover is None else 'new'}")
        self.hook(self.stash.update_scene(sid, cover=cover))
        self.note_cover(sid)

    def rename(self) -> None:
        """A tag, performer or studio renamed (case-only or not): every scene showing it changes."""
        kind = self.rng.choice(["tags", "performers", "studio"])
        names = {}
        for sid in self.live:
            scene = self.stash.scene(sid)
            for name in scene[kind] if kind != "studio" else [scene["studio"]] if scene["studio"] else []:
                names.setdefault(name, []).append(sid)
        if not names:
            return
        old = self.rng.choice(sorted(names))
        new = old.swapcase() if self.rng.random() < 0.6 else old + " x"
        self.log.append(f"rename {kind} {old!r} -> {new!r}")
        for sid in names[old]:
            scene = self.stash.scene(sid)
            value = new if kind == "studio" else [new if n == old else n for n in scene[kind]]
            self.hook(self.stash.update_scene(sid, **{kind: value}))

    def delete(self) -> None:
        sid = self.pick()
        if sid is None or len(self.live) < 3:
            return
        path = self.stash.scene(sid)["files"][0]["path"]
        how = self.destroyed(sid)
        self.orphaned.add(path.replace("/stash/media", "/plex/media"))
        self.log.append(f"delete {sid} ({path}) {how}")

    def move(self, new_at_old_path: bool = False) -> None:
        """A rescan found the file in a subfolder (same ratingKey in Plex, a scan update in Stash);
        optionally a new video then takes the old path."""
        sid = self.pick()
        if sid is None:
            return
        file = self.stash.scene(sid)["files"][0]
        old_stash = file["path"]
        if "/moved/" in old_stash:
            return
        name = old_stash.rsplit("/", 1)[1]
        new_stash = f"/stash/media/moved/{name}"
        item = self.item_at(old_stash.replace("/stash/media", "/plex/media"))
        if item is None or self.item_at(new_stash.replace("/stash/media", "/plex/media")) is not None:
            return  # two files cannot share a path: the moved one's place is taken
        self.plex.move_file(item["ratingKey"], new_stash.replace("/stash/media", "/plex/media"))
        self.hook(self.stash.update_scene(sid, files=[{**file, "path": new_stash}]))
        self.history[sid].add(new_stash.replace("/stash/media", "/plex/media"))
        self.log.append(f"move {sid}")
        if new_at_old_path:
            fresh = self.add(name, size=file["size"] + 7_000_000)
            self.log.append(f"new scene {fresh} at the old path of {sid}")
            self.hook({"id": fresh, "type": "Scene.Create.Post", "input": None})

    def reuse(self) -> None:
        """A scene deleted, and a new scene saved at its file's path: Plex keeps the same item."""
        sid = self.pick()
        if sid is None or len(self.live) < 3:
            return
        file = self.stash.scene(sid)["files"][0]
        how = self.destroyed(sid)
        fresh = self.stash.add_scene(title="pending", files=[{k: file[k] for k in ("path", "size", "duration")}])
        title = self.next_title(fresh)
        tags = self.rng.sample(TAGS, self.rng.randint(0, 2))
        self.stash.update_scene(fresh, title=title, tags=tags, performers=self.rng.sample(PERFORMERS, 1))
        self.history[fresh] = {file["path"].replace("/stash/media", "/plex/media")}
        self.live.add(fresh)
        self.note_cover(fresh)
        self.loose.add(fresh)  # the item (and a rating given to it in Plex) was the deleted scene's
        self.owner_changes += 1
        self.log.append(f"scene {fresh} at the path of deleted {sid} ({how})")
        self.hook({"id": fresh, "type": "Scene.Create.Post", "input": None})

    def _pair(self) -> tuple[dict, dict] | None:
        """The Plex items of two live scenes, each at its scene's path."""
        if len(self.live) < 2:
            return None
        a, b = self.rng.sample(sorted(self.live), 2)
        items = [
            self.item_at(self.stash.scene(s)["files"][0]["path"].replace("/stash/media", "/plex/media")) for s in (a, b)
        ]
        if items[0] is None or items[1] is None:
            return None
        return items[0], items[1]

    def _exchange(self, first: dict, second: dict) -> None:
        """A rescan finds each item's file at the other's path (both ratingKeys stay)."""
        a, b = first["ratingKey"], second["ratingKey"]
        self.loose |= {s for s in self.live if self._path(s) in (first["files"][0], second["files"][0])}
        self.owner_changes += 2
        self.plex.move_file(a, "/plex/media/exchange.tmp")
        self.plex.move_file(b, first["files"][0])
        self.plex.move_file(a, second["files"][0])

    def exchange(self) -> None:
        pair = self._pair()
        if pair is not None:
            self._exchange(*pair)
            self.log.append(f"exchange items {pair[0]['ratingKey']} and {pair[1]['ratingKey']}")

    def reconcile(self) -> None:
        """``reconcile``; sometimes two items exchange files after its check read them."""
        pair = self._pair() if self.rng.random() < 0.7 else None
        done = []

        def meanwhile(record):
            if pair is not None and not done and record["method"] == "GET":
                if record["path"].startswith("/library/metadata/"):
                    done.append(True)
                    self._exchange(*pair)

        self.plex.on_request = meanwhile
        try:
            with self.unlocked():
                run = self.plugin.task("reconcile")
        finally:
            self.plex.on_request = None
        swapped = f", items {pair[0]['ratingKey']} and {pair[1]['ratingKey']} exchanged meanwhile" if done else ""
        self.log.append(f"task reconcile{swapped}")
        assert run.error is None, run.stderr[-2000:]

    def entity(self) -> None:
        """A tag, performer or studio renamed or deleted in Stash: only its entity hook fires."""
        kind = self.rng.choice(sorted(KINDS))
        names = set()
        for sid in self.live:
            scene = self.stash.scene(sid)
            names.update(scene[KINDS[kind]] if kind != "studio" else [scene["studio"]] if scene["studio"] else [])
        if not names:
            return
        old = self.rng.choice(sorted(names))
        entity = self.stash.entity_id(kind, old)
        if self.rng.random() < 0.4:
            self.log.append(f"destroy {kind} {old!r}")
            self.hook(self.stash.destroy_entity(kind, entity))
            return
        new = old.swapcase() if self.rng.random() < 0.5 else f"{old} y"
        with contextlib.suppress(KeyError):
            self.stash.entity_id(kind, new)
            return  # a name another entity has
        self.log.append(f"rename {kind} {old!r} -> {new!r}")
        self.hook(self.stash.rename_entity(kind, entity, new))

    def readd(self) -> None:
        sid = self.pick()
        if sid is None:
            return
        path = self.stash.scene(sid)["files"][0]["path"].replace("/stash/media", "/plex/media")
        item = self.item_at(path)
        if item is not None:
            self.plex.readd_item(item["ratingKey"])
            self.log.append(f"readd {sid}")

    def bulk(self, mode: str) -> None:
        """A bulk task; while it runs (after its first page was read) a user edits, or
        renames or deletes a tag, performer or studio."""
        done = []
        change = self.edit if self.rng.random() < 0.5 else self.entity

        def meanwhile(record):
            if record["operation"] == "S2PScenesAfter" and not done:
                done.append(True)
                change()

        self.stash.on_graphql = meanwhile if self.rng.random() < 0.7 else None
        try:
            with self.unlocked():
                run = self.plugin.task(mode)
        finally:
            self.stash.on_graphql = None
        self.log.append(f"task {mode}" + (" (while it ran: the operation before)" if done else ""))
        assert run.error is None, run.stderr[-2000:]

    def step(self) -> None:
        ops = [
            (self.edit, 5),
            (self.cover, 2),
            (self.rename, 2),
            (self.delete, 1),
            (self.move, 1),
            (lambda: self.move(new_at_old_path=True), 1),
            (self.readd, 1),
            (self.reuse, 2),
            (self.exchange, 2),
            (self.reconcile, 2),
            (self.entity, 1),
            (lambda: self.bulk("all"), 2),
            (lambda: self.bulk("recent"), 1),
        ]
        op = self.rng.choices([o for o, _ in ops], weights=[w for _, w in ops])[0]
        op()

    def play(self) -> None:
        """Maybe a Plex play of a scene's item (a unique time each), maybe an import of the
        watch history meanwhile (the task; plays are added once however often it runs)."""
        rng = self.plays_rng
        sid = rng.choice(sorted(self.live)) if self.live and rng.random() < 0.6 else None
        if sid is not None:
            path = self.stash.scene(sid)["files"][0]["path"].replace("/stash/media", "/plex/media")
            item = self.item_at(path)
            if item is not None:
                self.plays += 1
                # an item's plays closer than its duration (60 s) would be one viewing
                self.plex.play(item["ratingKey"], viewed_at=1_600_000_000 + 100 * self.plays)
                self.log.append(f"play {sid}")
        if rng.random() < 0.25:
            self.log.append("import_plays")
            self.import_plays()

    # -- the machine's own faults -------------------------------------------------
    def fault(self) -> None:
        """Maybe a fault of the plugin's own machine, at a random moment among the other
        operations: every SQLite file held by another process for a while (hooks and tasks
        go on meanwhile), the disk full for a few operations (the drainer a hook starts
        cannot write; its space comes back later, or a task takes over), a drainer
        SIGKILLed at a random point of its run."""
        rng = self.faults_rng
        if self.full_drainer and self.full_steps <= 0:
            self.space_back()
        self.full_steps -= 1
        roll = rng.random()
        if roll < 0.2 and self.holder is None:
            self.hold_files(rng.uniform(0.3, 2.5))
        elif roll < 0.35 and not self.full_drainer:
            self.fill_disk(rng.randint(1, 3))
        elif roll < 0.55:
            self.kill_drainer(rng.uniform(0.0, 1.0))
        if self.holder is not None and self.holder.proc.poll() is not None:
            self.holder.close()
            self.holder = None

    def hold_files(self, seconds: float) -> None:
        from tests.disk_faults import HeldFiles, sqlite_files

        if sqlite_files(Path(self.plugin.data_dir)):
            self.log.append(f"data files held {seconds:.1f} s")
            self.holder = HeldFiles(Path(self.plugin.data_dir), seconds)

    def fill_disk(self, steps: int) -> None:
        """An edit whose hook starts a drainer that cannot grow any file (the hooks' inbox
        excepted): it stops for lack of space and waits for it."""
        spool = Path(self.plugin.data_dir) / "queue" / "inbox.spool"
        size = spool.stat().st_size if spool.exists() else 0
        self.log.append(f"disk full for {steps} operations")
        self.release()
        self.full_at = size + 4096  # the hooks' inbox may grow by a few lines, nothing else
        try:
            self.edit()
        finally:
            self.full_at = None
        self.full_drainer = self._lock_holder(wait_s=3.0)
        self.full_steps = steps
        self.full_since = len(self.log)

    def space_back(self) -> None:
        """The space is back. A drainer that ran out of it must still be there (waiting
        for the disk with the jobs), unless a task took over or nothing waits."""
        from sync_queue import health
        from tests.disk_faults import raise_file_size_limit

        self.log.append("space back")
        try:
            raise_file_size_limit(self.full_drainer)
        except ProcessLookupError:
            failing = str(health.read(self.plugin.data_dir).get("failing"))
            # a task, or the model's own stand-in drainer (``hold``), took the lock over
            took_over = self._lock is not None or any(op.startswith("task") for op in self.log[self.full_since :])
            if "is full" in failing and not took_over and self.plugin.status()["pending"]:
                self.fault_problems.append(f"the drainer that ran out of space exited with jobs waiting ({failing})")
        self.full_drainer = 0
        self.hold()

    def kill_drainer(self, after: float) -> None:
        """An edit whose hook starts a drainer, SIGKILLed ``after`` seconds later."""
        from tests.runner import kill_lock_holder

        if self.full_drainer:
            return
        self.release()
        self.edit()
        time.sleep(after)
        killed = kill_lock_holder(Path(self.plugin.data_dir) / "drainer.lock")
        self.log.append(f"drainer SIGKILLed after {after:.2f} s" if killed else "drainer done before its kill")
        self._lock_holder(wait_s=0.0)
        deadline = time.monotonic() + 5
        while self.plugin.drainer_busy() and time.monotonic() < deadline:
            time.sleep(0.02)
        self.hold()

    def _lock_holder(self, wait_s: float) -> int:
        deadline = time.monotonic() + wait_s
        lock = Path(self.plugin.data_dir) / "drainer.lock"
        while True:
            text = lock.read_text().strip() if lock.exists() else ""
            if (text.isdigit() and self.plugin.drainer_busy()) or time.monotonic() >= deadline:
                return int(text) if text.isdigit() else 0
            time.sleep(0.02)

    def end_faults(self) -> None:
        if self.full_drainer:
            self.space_back()
        if self.holder is not None:
            self.holder.close()
            self.holder = None

    def import_plays(self) -> None:
        run = self.plugin.task("import_plays")
        assert run.error is None, run.stderr[-2000:]

    # -- the drainer lock ---------------------------------------------------------
    # Between tasks the model holds the drainer lock when it can, so hooks only queue
    # (a drainer per hook would cost a process start each); tasks take it over.
    _lock: object = None

    def hold(self) -> None:
        from core.platform import HeldLock

        lock = HeldLock(Path(self.plugin.data_dir) / "drainer.lock")
        self._lock = lock if lock.acquire() else None

    def release(self) -> None:
        if self._lock is not None:
            self._lock.path.write_text("")  # no cleanup may ever signal the test process
            self._lock.release()
            self._lock = None

    @contextlib.contextmanager
    def unlocked(self):
        self.release()
        try:
            yield
        finally:
            self.hold()

    # -- the end state --------------------------------------------------------------
    def settle(self) -> None:
        for mode in ("all", "process_queue"):
            run = self.plugin.task(mode)
            assert run.error is None, run.stderr[-2000:]
        self.plugin.wait_drained()
        if self.plays:
            self.import_plays()
            self.import_plays()  # a re-read of the same history adds nothing
        if self.ratings:
            for _ in range(2):  # an import's Stash writes fire hooks; their syncs may be followed by an import
                self.deliver_fired()
                self.import_ratings(relock=False)
                self.plugin.task("process_queue")
                self.plugin.wait_drained()

    def check(self) -> list[str]:
        problems = []
        items = self.plex.items()
        for sid in sorted(self.live):
            problems += self._check_scene(sid, items)
        held = {self.stash.scene(s)["files"][0]["path"].replace("/stash/media", "/plex/media") for s in self.live}
        for item in items:
            if item["files"][0] in self.orphaned - held:
                problems += self._check_released(item)  # the video of a deleted scene: no scene's data
                continue
            owner = TITLE.match(item["fields"]["title"] or "")
            if owner and item["files"][0] not in self.history.get(int(owner.group(1)), set()):
                problems.append(f"item {item['ratingKey']} at {item['files'][0]} shows {item['fields']['title']!r}")
        problems += self._check_plays(items) if self.plays else []
        problems += self.fault_problems
        return problems + (self._check_ratings(items) if self.ratings else [])

    def _check_released(self, item: dict) -> list[str]:
        """An item no scene holds shows nothing Stash2Plex wrote: Plex's own title (the
        file's name when it was released; the scan's when nothing was ever written there),
        no summary, studio, date or tags, and no scene's cover as its poster."""
        fields = {k: v or "" for k, v in item["fields"].items()}
        wrong = [f"{k} {fields[k]!r}" for k in ("summary", "studio", "originallyAvailableAt") if fields[k]]
        if TITLE.match(fields["title"]):
            wrong.append(f"title {fields['title']!r}")
        wrong += [f"{t} {item['tags'][t]}" for t in ("genre", "actor", "collection") if item["tags"][t]]
        if any(item["poster_hash"] in hashes for hashes in self.covers.values()):
            wrong.append("a scene's cover as its poster")
        return (
            [f"item {item['ratingKey']} at {item['files'][0]} (no scene holds it): {', '.join(wrong)}"] if wrong else []
        )

    def _check_plays(self, items: list[dict]) -> list[str]:
        """Each Plex play reaches Stash exactly once: a live scene holds as many plays as the
        journal says were added to it, no time twice (every play has a time of its own), and
        every play of an item a live scene held when it was played (the ledger's owners) was applied."""
        import sqlite3

        from sync_queue.ledger import Ledger, owner_at

        with contextlib.closing(sqlite3.connect(Path(self.plugin.data_dir) / "state.db")) as db:
            applied = db.execute("SELECT history_key, scene_id, written FROM plays WHERE NOT duplicate").fetchall()
        ledger = Ledger(Path(self.plugin.data_dir))
        try:
            owners = ledger.owners(sorted({row.rating_key for row in self.plex.history_rows()}))
        finally:
            ledger.close()
        problems, seen = [], set()
        for sid in sorted(self.live):
            times = self.stash.scene_plays(sid)
            added = sum(1 for _, scene, written in applied if scene == sid and written)
            if len(times) != added or len(set(times)) != len(times) or seen & set(times):
                problems.append(f"scene {sid}: Stash plays {times}, {added} added by the journal")
            seen |= set(times)
        done = {key for key, _, _ in applied}
        owned = {
            i["ratingKey"]
            for i in items
            if (m := TITLE.match(i["fields"]["title"] or "")) and int(m.group(1)) in self.live
        }
        for row in self.plex.history_rows():
            held = owner_at(owners[row.rating_key], row.viewed_at + 1) if row.rating_key in owners else None
            if (
                row.rating_key in owned
                and held in self.live
                and f"/status/sessions/history/{row.history_id}" not in done
            ):
                problems.append(f"the play {row.history_id} of item {row.rating_key} never reached Stash")
        return problems

    def _check_scene(self, sid: int, items: list[dict]) -> list[str]:
        scene = self.stash.scene(sid)
        path = scene["files"][0]["path"].replace("/stash/media", "/plex/media")
        held = [i for i in items if i["files"][0] == path]
        if len(held) != 1:
            return [f"scene {sid}: {len(held)} Plex items hold {path}"]
        item, wrong = held[0], []
        fields = {k: v or "" for k, v in item["fields"].items()}
        summary, details = fields["summary"], scene["details"] or ""
        expect = {
            "title": (fields["title"], scene["title"]),
            "studio": (fields["studio"], scene["studio"] or ""),
            "date": (fields["originallyAvailableAt"], scene["date"] or ""),
            "genre": (_folded(item["tags"]["genre"]), _folded(scene["tags"])),
            "actor": (_folded(item["tags"]["actor"]), _folded(scene["performers"])),
            "collection": (_folded(item["tags"]["collection"]), _folded([scene["studio"]] if scene["studio"] else [])),
        }
        genres, tags = expect["genre"]
        if len(tags) >= 150 and genres and set(genres) < set(tags):
            # A tag list longer than a request line can carry keeps the tags that fit
            # (plex/plan.py ``cut_tags``; the emulator refuses request lines over 8190 bytes).
            del expect["genre"]
        wrong += [f"{k}: Plex {got!r}, Stash {want!r}" for k, (got, want) in expect.items() if got != want]
        if summary != details and not (summary.endswith("…") and details.startswith(summary[:-1])):
            wrong.append(f"summary: Plex {summary[:60]!r}, Stash {details[:60]!r}")
        shown = self.stash.screenshot_bytes(sid)
        if shown == _DEFAULT_SVG:
            if item["poster_hash"] == hashlib.sha1(_DEFAULT_SVG).hexdigest():
                wrong.append("the default SVG was uploaded as the poster")
            elif any(item["poster_hash"] in hashes for other, hashes in self.covers.items() if other != sid):
                wrong.append("no cover in Stash, and the poster is another scene's cover")
        elif item["poster_hash"] != hashlib.sha1(shown).hexdigest():
            wrong.append("poster differs from Stash's cover")
        return [f"scene {sid} (item {item['ratingKey']}): {w}" for w in wrong]

    # -- ratings --------------------------------------------------------------------
    def _path(self, sid: int) -> str:
        return self.stash.scene(sid)["files"][0]["path"].replace("/stash/media", "/plex/media")

    def note_stash(self, by_user: bool = True) -> None:
        """Record each live scene's newest change in Stash (``updated_at`` and the rating it
        left); changes the plugin made (an import) are seen but are no user's."""
        for sid in self.live:
            ts = self.stash.updated_ts(sid)
            if ts > self.seen_ts.get(sid, 0):
                self.seen_ts[sid] = ts
                rating = self.stash.scene(sid)["rating100"]
                if rating is not None:
                    self.stash_hist.setdefault(sid, set()).add(round(rating / 5) / 2)
                if sid not in self.stash_side or (by_user and rating != self.stash_side[sid][1]):
                    self.stash_side[sid] = (ts, rating)  # a change of the rating: an edit of another field is none
                    self.edited_after.discard(sid)
                elif by_user:
                    self.edited_after.add(sid)

    def rate(self) -> None:
        """Maybe a user's rating in Stash, in Plex, or both nearly at once; maybe an import."""
        rng = self.ratings_rng
        sid = rng.choice(sorted(self.live)) if self.live else None
        choice = rng.random()
        if sid is not None and choice < 0.3:
            self.rate_in_stash(sid)
        elif sid is not None and choice < 0.6:
            self.rate_in_plex(sid)
        elif sid is not None and choice < 0.8:
            orders = ["stash, then plex", "plex, then stash", "the same second", "synced, then plex in the same second"]
            order = rng.choice(orders)
            self.log.append(f"both rated at once ({order}):")
            if order == "plex, then stash":
                self.rate_in_plex(sid)
                self.rate_in_stash(sid)
            else:
                self.rate_in_stash(sid)
                if order.startswith("synced"):  # Stash's rating reached Plex before the user rated there
                    with self.unlocked():
                        run = self.plugin.task("process_queue")
                    assert run.error is None, run.stderr[-2000:]
                self.rate_in_plex(sid, same_second="same second" in order, seen_first=order.startswith("synced"))
        if rng.random() < 0.35:
            self.import_ratings()

    def rate_in_stash(self, sid: int) -> None:
        current = self.stash.scene(sid)["rating100"]
        value = self.ratings_rng.choice([v for v in STASH_RATINGS if v != current])
        self.log.append(f"stash rating {sid} {current} -> {value}")
        self.wall.after(self.plex_last)
        self.hook(self.stash.update_scene(sid, rating100=value))
        self.user_stash_rates += 1
        self.note_stash()

    def rate_in_plex(self, sid: int, same_second: bool = False, seen_first: bool = False) -> None:
        """A user's rating in Plex Web (plexapi ``RatingMixin.rate``: ``PUT /:/rate``, -1 clears)."""
        import requests

        item = self.item_at(self._path(sid))
        if item is None:
            return
        rk = item["ratingKey"]
        current = float(item["fields"]["userRating"]) if item["fields"]["userRating"] else None
        # Not a rating the scene had in Stash: one equal to what Stash2Plex last wrote to the item
        # is taken for its own (the ledger knows values, not times; a known limitation).
        had = self.stash_hist.get(sid, set())
        value = self.ratings_rng.choice([v for v in PLEX_RATINGS if v != current and v not in had])
        if same_second:
            self.wall.held = self.stash.updated_ts(sid)
        else:
            self.wall.after(self.plex_last)
        try:
            params = {"key": rk, "identifier": "com.plexapp.plugins.library", "rating": -1 if value is None else value}
            headers = {"X-Plex-Token": self.plex.token}
            requests.put(f"{self.plex.url}/:/rate", params=params, headers=headers, timeout=10).raise_for_status()
            at = self.plex.item(rk)["lastRatedAt"] if value is not None else int(self.wall.plex())
        finally:
            self.wall.held = None
        self.plex_side[rk] = (at, value)
        self.plex_last = max(self.plex_last, at)
        (self.seen_first.add if seen_first else self.seen_first.discard)(rk)
        self.user_plex_rates += 1
        self.log.append(f"plex rating {sid} (item {rk}) {current} -> {value} at {at}")

    def import_ratings(self, relock: bool = True) -> None:
        """``watch --once`` (what the resident ``watch`` does on its timer); the hooks its
        Stash writes fire are delivered as Stash would."""
        from tests.conftest import STASH_API_KEY
        from tests.runner import REPO, run_command

        before = len(self.stash.hook_contexts)
        env = {**os.environ, **self.plugin.env, "STASH2PLEX_STASH_URL": self.stash.url}
        env["STASH2PLEX_STASH_API_KEY"] = STASH_API_KEY
        self.release()
        try:
            code, _, err = run_command([sys.executable, str(REPO / "Stash2Plex.py"), "watch", "--once"], env, 120)
        finally:
            if relock:
                self.hold()
        assert code == 0 and "not brought to Stash" not in err, err[-2000:]
        self.note_stash(by_user=False)
        self.log.append(f"import ratings ({len(self.stash.hook_contexts) - before} hook(s))")
        self.deliver_fired()

    def deliver_fired(self) -> None:
        """The scene hooks the plugin's own rating writes to Stash fired (an import's, or a
        sync's bringing a newer Plex rating), delivered as Stash would."""
        fired = self.stash.hook_contexts[self.fired_seen :]
        self.fired_seen += len(fired)
        for context in fired:
            if id(context) not in self.delivered and context.get("inputFields") == ["id", "rating100"]:
                self.hook(context)

    def writes(self) -> tuple[int, int]:
        """(ratings the plugin wrote to Plex, ratings it wrote to Stash)."""
        return len(self.plex.rate_requests()) - self.user_plex_rates, len(self.stash.graphql_requests("S2PRate"))

    def _check_ratings(self, items: list[dict]) -> list[str]:
        """The later change of a rating wins (docs/usage.md): a side changed when its rating did
        (another edit of the scene is no change of its rating); when both changed before the
        plugin saw either, the later on one clock, Stash on a tie, and a Plex rating given after
        Stash's reached Plex is the later whatever the seconds say. A scene edited otherwise
        after its last Stash rating, with a later Plex rating, dates Stash's change by that edit
        when both are new to the plugin (Stash keeps no time per field): then either side may
        win, and the two must agree; so may a rating cleared in Plex (Plex keeps no time for it).
        Then
        one more round writes nothing (no loop)."""
        problems = []
        at_path = {i["files"][0]: i for i in items}
        for sid in sorted(self.live):
            item = at_path.get(self._path(sid))
            if item is None:
                continue
            rk = item["ratingKey"]
            stash = self.stash.scene(sid)["rating100"]
            plex = float(item["fields"]["userRating"]) if item["fields"]["userRating"] else None
            s_at, s_value = self.stash_side.get(sid, (0, None))
            p_at, p_value = self.plex_side.get(rk, (None, None))
            plex_touched = rk in self.plex_side
            where = f"scene {sid} (item {rk}): Stash {stash}, Plex {plex}"
            # a clear without lastRatedAt has no time the plugin can know: when Stash changed too, either wins
            unknown = plex_touched and p_at > s_at and (sid in self.edited_after or p_value is None)
            if sid in self.loose or unknown:
                if not _agree(stash, plex):
                    problems.append(f"{where} disagree")
                continue
            if plex_touched and (p_at > s_at or (p_at == s_at and rk in self.seen_first)):  # Plex's is later
                if plex != p_value or not _agree(stash, p_value):
                    problems.append(f"{where}: Plex's later {p_value} (at {p_at}, Stash's at {s_at}) should win")
                continue
            if stash != s_value:
                problems.append(f"{where}: Stash's later {s_value} (at {s_at}) was overwritten")
            elif not _agree(stash, plex):
                problems.append(f"{where}: Plex should show Stash's {s_value}")
        if problems:
            return problems
        before = self.writes()
        self.deliver_fired()
        self.import_ratings(relock=False)
        self.plugin.task("process_queue")
        self.plugin.wait_drained()
        self.import_ratings(relock=False)
        after = self.writes()
        if after != before:
            problems.append(f"ratings still written after settling (Plex, Stash writes): {before} -> {after}")
        if before[1] > self.user_plex_rates + self.owner_changes:
            problems.append(
                f"{before[1]} ratings written to Stash for {self.user_plex_rates} given in Plex "
                f"and {self.owner_changes} items changing hands"
            )
        return problems


def _agree(rating100: int | None, user_rating: float | None) -> bool:
    """Stash's rating and Plex's show the same (within half a star), or neither has one."""
    if rating100 is None or user_rating is None:
        return rating100 is None and user_rating is None
    return abs(rating100 - user_rating * 10) <= 5


def _folded(names) -> list[str]:
    return sorted({n.casefold() for n in names})


def run_seed(plugin, seed: int, scenes: int = 5, steps: int = 10, ratings: bool = False, faults: bool = False) -> World:
    """Play one seeded sequence; raises AssertionError naming the seed and the operations.
    ``ratings``: also ratings on both sides (the plugin must be configured with ``import_ratings``);
    ``faults``: also faults of the plugin's own machine (``World.fault``)."""
    world = World(plugin, random.Random(seed), plays_rng=random.Random(f"plays {seed}"))
    world.faults, world.faults_rng = faults, random.Random(f"faults {seed}")
    if ratings:
        world.ratings, world.ratings_rng, world.wall = True, random.Random(f"ratings {seed}"), Wall(plugin.stash)
        plugin.plex.clock, plugin.stash.clock = world.wall.plex, world.wall.stash_clock
    world.hold()
    try:
        for n in range(scenes):
            world.add(f"c{n:03d}.mp4", size=1000 + n)
        if ratings:
            world.note_stash()
            world.import_ratings()  # the first look: ratings are read from now on
        for _ in range(steps):
            world.step()
            world.play()
            if ratings:
                world.deliver_fired()
                world.note_stash()
                world.rate()
            if faults:
                world.fault()
    finally:
        world.end_faults()
        world.release()
    world.settle()
    problems = world.check()
    assert not problems, f"seed {seed}: " + "; ".join(problems) + "\noperations: " + ", ".join(world.log)
    return world

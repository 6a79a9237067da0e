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
every Plex play of an item a scene owns is in that scene's Stash play history exactly once.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import re
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
        run = self.plugin.hook(context)
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
                self.plex.play(item["ratingKey"], viewed_at=1_600_000_000 + 10 * self.plays)
                self.log.append(f"play {sid}")
        if rng.random() < 0.25:
            self.log.append("import_plays")
            self.import_plays()

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
        return problems + (self._check_plays(items) if self.plays else [])

    def _check_released(self, item: dict) -> list[str]:
        """An item no scene holds shows nothing Stash2Plex wrote: Plex's own title (the
        file's name), no summary, studio, date or tags, and no scene's cover as its poster."""
        name = item["files"][0].rsplit("/", 1)[1].rsplit(".", 1)[0]
        fields = {k: v or "" for k, v in item["fields"].items()}
        wrong = [f"{k} {fields[k]!r}" for k in ("summary", "studio", "originallyAvailableAt") if fields[k]]
        if fields["title"] != name:
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
        every play of an item a live scene owns now was applied."""
        import sqlite3

        with contextlib.closing(sqlite3.connect(Path(self.plugin.data_dir) / "plays.db")) as db:
            applied = db.execute("SELECT history_key, scene_id, written FROM applied").fetchall()
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
            if row.rating_key in owned and f"/status/sessions/history/{row.history_id}" not in done:
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


def _folded(names) -> list[str]:
    return sorted({n.casefold() for n in names})


def run_seed(plugin, seed: int, scenes: int = 5, steps: int = 10) -> World:
    """Play one seeded sequence; raises AssertionError naming the seed and the operations."""
    world = World(plugin, random.Random(seed), plays_rng=random.Random(f"plays {seed}"))
    world.hold()
    try:
        for n in range(scenes):
            world.add(f"c{n:03d}.mp4", size=1000 + n)
        for _ in range(steps):
            world.step()
            world.play()
    finally:
        world.release()
    world.settle()
    problems = world.check()
    assert not problems, f"seed {seed}: " + "; ".join(problems) + "\noperations: " + ", ".join(world.log)
    return world

"""The sync ledger: what Stash2Plex last wrote to Plex, per scene and per Plex item.

Per scene: its Plex item, the hash of its desired state (unchanged: no Plex request at
all), per-field hashes, the tags we put on the item (a removal in Stash removes exactly
those), the poster's source and hash (uploaded only when its bytes changed) and the
entities it showed (a renamed or deleted tag fans out to exactly those scenes). Per item
(``items``): what was last written there and for which scene, so a change of owner
removes the previous scene's values, and the poster uploaded there (``item_posters``), so
Plex's own comes back when the item's new scene has none or no scene owns it. Also small
state (last sync, client id) and the cached Plex section index; outcome counts are in
``sync_queue/stats.py``.
"""

from __future__ import annotations

import json
from dataclasses import astuple, dataclass, field
from typing import Any

from sync_queue import sqlite

_SCHEMA = """
CREATE TABLE IF NOT EXISTS scenes (
    scene_id INTEGER PRIMARY KEY,
    rating_key INTEGER,
    plex_path TEXT,
    state_hash TEXT,
    fields TEXT NOT NULL DEFAULT '{}',
    written_tags TEXT NOT NULL DEFAULT '{}',
    poster_source TEXT,
    poster_hash TEXT,
    synced_at REAL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS plex_index (
    section_id INTEGER NOT NULL,
    rating_key INTEGER NOT NULL,
    path TEXT NOT NULL,
    size INTEGER,
    duration_ms INTEGER
);
CREATE INDEX IF NOT EXISTS plex_index_section ON plex_index (section_id);
CREATE TABLE IF NOT EXISTS scene_entities (
    kind TEXT NOT NULL,
    entity_id INTEGER NOT NULL,
    scene_id INTEGER NOT NULL,
    PRIMARY KEY (kind, entity_id, scene_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS scene_entities_scene ON scene_entities (scene_id);
CREATE TABLE IF NOT EXISTS items (
    rating_key INTEGER PRIMARY KEY,
    scene_id INTEGER NOT NULL,
    fields TEXT NOT NULL DEFAULT '{}',
    written_tags TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS item_posters (
    rating_key INTEGER PRIMARY KEY,
    scene_id INTEGER NOT NULL,
    poster_hash TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS scenes_rating_key ON scenes (rating_key);
CREATE TABLE IF NOT EXISTS pins (
    scene_id INTEGER PRIMARY KEY,
    answer TEXT NOT NULL,
    rating_key INTEGER,
    pinned_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS ratings_seen (
    scene_id INTEGER PRIMARY KEY,
    rating_key INTEGER NOT NULL,
    stash INTEGER,  -- the scene's rating100 last seen (NULL: none)
    plex TEXT NOT NULL  -- the item's rating last seen (rating_text: '' for none)
);
CREATE TABLE IF NOT EXISTS item_owners (
    rating_key INTEGER NOT NULL,
    since REAL NOT NULL,  -- our clock
    scene_id INTEGER NOT NULL,  -- 0: no scene (the item was released)
    PRIMARY KEY (rating_key, since)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS loose_matches (
    scene_id INTEGER PRIMARY KEY,
    rating_key INTEGER NOT NULL,
    reason TEXT NOT NULL,
    title TEXT NOT NULL DEFAULT '',
    matched_at REAL NOT NULL
);
"""
PIN_ITEM, NOT_IN_PLEX, SKIP = "item", "not_in_plex", "skip"  # a user's answers in the inbox
ANSWERS = (PIN_ITEM, NOT_IN_PLEX, SKIP)
ALL_CHECKED_AT = "all_checked_at"  # meta: when ``all`` last looked at every scene (epoch s); the page's "checked"


@dataclass
class SceneRecord:
    scene_id: int
    rating_key: int | None = None
    plex_path: str | None = None
    state_hash: str | None = None
    fields: dict[str, str] = field(default_factory=dict)
    written_tags: dict[str, list[str]] = field(default_factory=dict)
    poster_source: str | None = None
    poster_hash: str | None = None
    synced_at: float | None = None
    entities: dict[str, list[int]] | None = None  # kind → ids; None: not known (not saved)
    owner: int | None = None  # the scene the linked item was last written for (read only; None: not known)


@dataclass(frozen=True)
class Pin:
    """A user's answer for a scene (the inbox, or ``pin``/``unpin`` on the command line):
    ``item`` with the Plex item to write to, ``not_in_plex`` or ``skip``."""

    scene_id: int
    answer: str
    rating_key: int | None = None
    pinned_at: float = 0.0


@dataclass(frozen=True)
class ItemRecord:
    """What Stash2Plex last wrote to one Plex item, and for which scene (its owner)."""

    rating_key: int
    scene_id: int
    fields: dict[str, str] = field(default_factory=dict)
    written_tags: dict[str, list[str]] = field(default_factory=dict)


NO_OWNER = 0  # item_owners: no scene holds the item (released)


def owner_at(owners: list[tuple[float, int]], at: float) -> int:
    """The scene that held an item at ``at`` (our clock) from its owners (``Ledger.owners``);
    before the first, the first: what the item saw before any scene held it is its first
    scene's (a file Plex had before Stash found it). ``NO_OWNER`` while released.

    >>> owner_at([(100.0, 7), (200.0, 0), (300.0, 9)], 50), owner_at([(100.0, 7), (200.0, 0), (300.0, 9)], 250)
    (7, 0)
    >>> owner_at([(100.0, 7), (200.0, 0), (300.0, 9)], 300)
    9
    """
    held = owners[0][1]
    for since, scene_id in owners:
        if since > at:
            break
        held = scene_id
    return held


def _note_owner(conn: Any, rating_key: int, scene_id: int, now: float) -> None:
    """Record that ``scene_id`` holds the item from ``now`` on, when it did not already (an item
    released before any scene held it: nothing to record)."""
    last = conn.execute(
        "SELECT scene_id FROM item_owners WHERE rating_key = ? ORDER BY since DESC LIMIT 1", (rating_key,)
    ).fetchone()
    if (last[0] if last else NO_OWNER) != scene_id:
        conn.execute("INSERT OR REPLACE INTO item_owners VALUES (?, ?, ?)", (rating_key, now, scene_id))


def _json(value: dict) -> str:
    return json.dumps(value, sort_keys=True)


def _write_item(conn: Any, record: ItemRecord, now: float) -> None:
    """An item's record: what was written there, for which scene (its owner, noted from ``now``)."""
    _note_owner(conn, record.rating_key, record.scene_id, now)
    row = (record.rating_key, record.scene_id, _json(record.fields), _json(record.written_tags))
    conn.execute("INSERT OR REPLACE INTO items VALUES (?, ?, ?, ?)", row)


def _write_entities(conn: Any, scene_id: int, entities: dict[str, list[int]]) -> None:
    conn.execute("DELETE FROM scene_entities WHERE scene_id = ?", (scene_id,))
    conn.executemany(
        "INSERT OR IGNORE INTO scene_entities VALUES (?, ?, ?)",
        [(kind, int(i), scene_id) for kind, ids in entities.items() for i in ids],
    )


def entity_map(entities: dict[str, Any] | None) -> dict[str, list[int]]:
    """The one form entity ids are compared and stored in: kind → sorted ids, no empty kinds."""
    return {k: sorted(int(i) for i in v) for k, v in sorted((entities or {}).items()) if v}


# What a scene record said of its item before items had records of their own (the newest
# record wins), and each item's owner then, as its owner from the start.
_LEGACY = (
    (
        "scenes",
        "INSERT OR IGNORE INTO items SELECT rating_key, scene_id, fields, written_tags FROM old.scenes "
        "WHERE rating_key IS NOT NULL ORDER BY synced_at DESC",
    ),
    (
        "scenes",
        "INSERT OR IGNORE INTO item_posters SELECT rating_key, scene_id, poster_hash FROM old.scenes "
        "WHERE rating_key IS NOT NULL AND poster_hash IS NOT NULL ORDER BY synced_at DESC",
    ),
    (
        "scenes",
        "INSERT OR IGNORE INTO item_owners SELECT rating_key, 0, scene_id FROM items "
        "WHERE rating_key NOT IN (SELECT rating_key FROM item_owners)",
    ),
)


class Ledger(sqlite.Store):
    OLD_FILE = "ledger.db"
    SCHEMA = _SCHEMA
    LEGACY = _LEGACY

    # -- scenes ----------------------------------------------------------------
    def get_many(self, scene_ids: list[int]) -> dict[int, SceneRecord]:
        rows = self._in(
            "SELECT s.scene_id, s.rating_key, plex_path, state_hash, s.fields, s.written_tags, poster_source, "
            "poster_hash, synced_at, i.scene_id FROM scenes s LEFT JOIN items i ON i.rating_key = s.rating_key "
            "WHERE s.scene_id IN ({marks})",
            scene_ids,
        )
        found: dict[int, SceneRecord] = {}
        for sid, rk, path, state, fields, tags, source, poster, at, owner in rows:
            found[sid] = SceneRecord(sid, rk, path, state, json.loads(fields), json.loads(tags), source, poster, at)
            found[sid].owner = owner
        held: dict[int, dict[str, list[int]]] = {}
        for scene_id, kind, entity_id in self._in(
            "SELECT scene_id, kind, entity_id FROM scene_entities WHERE scene_id IN ({marks})", scene_ids
        ):
            held.setdefault(scene_id, {}).setdefault(kind, []).append(entity_id)
        for scene_id, entities in held.items():
            if scene_id in found:
                found[scene_id].entities = entity_map(entities)
        return found

    def save(self, record: SceneRecord) -> None:
        self.save_many([record])

    def save_many(self, records: list[SceneRecord]) -> None:
        """Records of several scenes in one transaction (a bulk sync saves what each round
        of writes did at once: one commit instead of one per scene)."""
        if not records:
            return
        now = self.clock()
        with self._writing() as conn:
            for record in records:
                record.synced_at = now
                conn.execute(
                    "INSERT OR REPLACE INTO scenes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (record.scene_id, record.rating_key, record.plex_path, record.state_hash, _json(record.fields))
                    + (_json(record.written_tags), record.poster_source, record.poster_hash, now),
                )
                if record.entities is not None:
                    _write_entities(conn, record.scene_id, record.entities)
                if record.rating_key is not None:
                    item = ItemRecord(record.rating_key, record.scene_id, record.fields, record.written_tags)
                    _write_item(conn, item, now)
                    if record.poster_hash is not None:  # the item shows this scene's upload
                        conn.execute(
                            "INSERT OR REPLACE INTO item_posters VALUES (?, ?, ?)",
                            (record.rating_key, record.scene_id, record.poster_hash),
                        )

    def items(self, rating_keys: list[int]) -> dict[int, ItemRecord]:
        """What was last written to each of these Plex items, and for which scene.

        Kept per item, not only per scene: when another scene takes an item over (a new
        scene at a deleted one's path, two items exchanging files), what was written
        there for the previous owner is known and removed.
        """
        sql = "SELECT rating_key, scene_id, fields, written_tags FROM items WHERE rating_key IN ({marks})"
        rows = self._in(sql, rating_keys)
        return {rk: ItemRecord(rk, sid, json.loads(fields), json.loads(tags)) for rk, sid, fields, tags in rows}

    def owners(self, rating_keys: list[int]) -> dict[int, list[tuple[float, int]]]:
        """Each item's owners, oldest first: (since, on our clock; the scene, ``NO_OWNER`` after a
        release). Items no scene ever held are left out."""
        found: dict[int, list[tuple[float, int]]] = {}
        for rk, since, sid in self._in(
            "SELECT rating_key, since, scene_id FROM item_owners WHERE rating_key IN ({marks}) "
            "ORDER BY rating_key, since",
            rating_keys,
        ):
            found.setdefault(rk, []).append((since, sid))
        return found

    def item(self, rating_key: int) -> ItemRecord | None:
        return self.items([rating_key]).get(rating_key)

    def claim(self, record: ItemRecord) -> None:
        """Record what an edit is about to write to an item, committed before it goes out
        (``Syncer`` passes the tags it adds with those recorded before): an edit whose
        final record is lost (a SIGKILL, a disk that filled up after Plex answered) leaves
        nothing on the item that the ledger does not know was written."""
        with self._writing() as conn:
            _write_item(conn, record, self.clock())

    def item_poster(self, rating_key: int) -> tuple[int, str] | None:
        """(scene, SHA-1 of the image) of the poster Stash2Plex last uploaded to the item
        and did not take back since; None when none is known."""
        row = self._one("SELECT scene_id, poster_hash FROM item_posters WHERE rating_key = ?", (rating_key,))
        return (row[0], row[1]) if row is not None else None

    def forget_poster(self, rating_key: int) -> None:
        """The item shows Plex's own poster again (or the user's): no upload of ours is on it."""
        with self._writing() as conn:
            conn.execute("DELETE FROM item_posters WHERE rating_key = ?", (rating_key,))
            conn.execute("UPDATE scenes SET poster_hash = NULL WHERE rating_key = ?", (rating_key,))

    def forget_item(self, rating_key: int) -> None:
        """Nothing Stash2Plex wrote is on the item any more (it was released): no record of
        what was written there, and no scene links it (its next sync finds its item anew
        and writes everything, the poster included)."""
        with self._writing() as conn:
            _note_owner(conn, rating_key, NO_OWNER, self.clock())
            conn.execute("DELETE FROM items WHERE rating_key = ?", (rating_key,))
            conn.execute("DELETE FROM item_posters WHERE rating_key = ?", (rating_key,))
            conn.execute(
                "UPDATE scenes SET rating_key = NULL, plex_path = NULL, state_hash = NULL, poster_source = NULL, "
                "poster_hash = NULL WHERE rating_key = ?",
                (rating_key,),
            )

    def forget_scene(self, scene_id: int) -> None:
        """The scene is gone from Stash: its record, the entities it showed, its loose match
        and the user's answer for it (a pin of a scene gone would keep its item from others)."""
        with self._writing() as conn:
            for table in ("scenes", "scene_entities", "loose_matches", "pins"):
                conn.execute(f"DELETE FROM {table} WHERE scene_id = ?", (scene_id,))

    def scene_ids(self) -> set[int]:
        """Every scene with a record (``all`` and ``reconcile`` find the ones gone from Stash)."""
        return {row[0] for row in self._rows("SELECT scene_id FROM scenes")}

    def set_entities(self, scene_id: int, entities: dict[str, list[int]]) -> None:
        """Record which entities a scene's item shows, without touching the rest."""
        self.set_entities_many({scene_id: entities})

    def set_entities_many(self, entities: dict[int, dict[str, list[int]]]) -> None:
        """``set_entities`` for many scenes, in one transaction."""
        with self._writing() as conn:
            for scene_id, found in entities.items():
                _write_entities(conn, scene_id, found)

    def scenes_with(self, kind: str, entity_id: int, after: int = 0, limit: int = 100) -> list[int]:
        """Scenes whose Plex item shows the entity, in id order after ``after`` (one page)."""
        rows = self._rows(
            "SELECT scene_id FROM scene_entities WHERE kind = ? AND entity_id = ? AND scene_id > ? "
            "ORDER BY scene_id LIMIT ?",
            (kind, entity_id, after, limit),
        )
        return [row[0] for row in rows]

    def count(self) -> int:
        return self._one("SELECT COUNT(*) FROM scenes WHERE state_hash IS NOT NULL")[0]

    # -- ratings: the last one seen on each side (worker/ratings.py ``winner``) -----------
    def rating_seen(self, scene_id: int, rating_key: int) -> tuple[int | None, str] | None:
        """(Stash's rating100, Plex's rating text) last seen for the scene on this item; None: never."""
        row = self._one(
            "SELECT stash, plex FROM ratings_seen WHERE scene_id = ? AND rating_key = ?", (scene_id, rating_key)
        )
        return (row[0], row[1]) if row else None

    def rated_items(self, after: int, limit: int) -> list[int]:
        """Items last seen rated in Plex (or given a rating by Stash2Plex), in key order after ``after``."""
        rows = self._rows(
            "SELECT rating_key FROM ratings_seen WHERE plex != '' AND rating_key > ? UNION "
            "SELECT rating_key FROM items WHERE json_extract(fields, '$.userRating') != '' AND rating_key > ? "
            "ORDER BY rating_key LIMIT ?",
            (after, after, limit),
        )
        return [row[0] for row in rows]

    def set_rating_seen(self, scene_id: int, rating_key: int, stash: int | None, plex: str) -> None:
        self._write("INSERT OR REPLACE INTO ratings_seen VALUES (?, ?, ?, ?)", (scene_id, rating_key, stash, plex))

    # -- pins: a user's answers, honoured before the matcher -----------------------
    def pins(self, scene_ids: list[int] | None = None) -> dict[int, Pin]:
        """The pins of these scenes (every pin when None)."""
        query = "SELECT scene_id, answer, rating_key, pinned_at FROM pins"
        rows = self._rows(query) if scene_ids is None else self._in(f"{query} WHERE scene_id IN ({{marks}})", scene_ids)
        return {row[0]: Pin(*row) for row in rows}

    def pin_of(self, scene_id: int) -> Pin | None:
        return self.pins([scene_id]).get(scene_id)

    def set_pin(self, scene_id: int, answer: str, rating_key: int | None = None) -> Pin:
        """Store the answer; the scene's loose match is settled by it."""
        if answer not in ANSWERS:
            raise ValueError(f"answer {answer!r} is not one of {', '.join(ANSWERS)}")
        pin = Pin(scene_id, answer, rating_key if answer == PIN_ITEM else None, self.clock())
        with self._writing() as conn:
            conn.execute("INSERT OR REPLACE INTO pins VALUES (?, ?, ?, ?)", astuple(pin))
            conn.execute("DELETE FROM loose_matches WHERE scene_id = ?", (scene_id,))
        return pin

    def unpin(self, scene_id: int) -> bool:
        """Forget the scene's answer; False when it had none."""
        return self._write("DELETE FROM pins WHERE scene_id = ?", (scene_id,)) > 0

    # -- matches accepted by file name only (the inbox shows them for a check) -------
    def note_loose(self, scene_id: int, rating_key: int, reason: str, title: str = "") -> None:
        """The scene's item was accepted by file name only (``reason`` says how)."""
        self._write(
            "INSERT OR REPLACE INTO loose_matches VALUES (?, ?, ?, ?, ?)",
            (scene_id, rating_key, reason, title, self.clock()),
        )

    def settle_loose(self, scene_id: int) -> None:
        """The scene's item was found by its exact path (or pinned) since: not loose any more."""
        self._write("DELETE FROM loose_matches WHERE scene_id = ?", (scene_id,))

    def loose_ids(self) -> set[int]:
        return {row[0] for row in self._rows("SELECT scene_id FROM loose_matches")}

    def loose_matches(self) -> dict[int, tuple[int, str, str]]:
        """scene → (Plex item, why it was accepted, title) for every match by name still linked."""
        rows = self._rows(
            "SELECT l.scene_id, l.rating_key, l.reason, l.title FROM loose_matches l "
            "JOIN scenes s ON s.scene_id = l.scene_id AND s.rating_key = l.rating_key"
        )
        return {sid: (rk, reason, title) for sid, rk, reason, title in rows}

    # -- key/value -------------------------------------------------------------
    def meta(self, key: str, default: Any = None) -> Any:
        row = self._one("SELECT value FROM meta WHERE key = ?", (key,))
        return json.loads(row[0]) if row else default

    def set_meta(self, key: str, value: Any) -> None:
        self._write("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    # -- Plex section index cache ---------------------------------------------------
    def index_rows(self, section_id: int) -> list[tuple[int, str, int | None, int | None]]:
        return self._rows(
            "SELECT rating_key, path, size, duration_ms FROM plex_index WHERE section_id = ?", (section_id,)
        )

    def durations(self, rating_keys: list[int]) -> dict[int, float]:
        """Each item's duration in seconds, from the cached index (items it does not know are left out)."""
        rows = self._in(
            "SELECT rating_key, MAX(duration_ms) FROM plex_index WHERE rating_key IN ({marks}) "
            "AND duration_ms > 0 GROUP BY rating_key",
            rating_keys,
        )
        return {rk: ms / 1000 for rk, ms in rows}

    def replace_index(self, section_id: int, stamp: str, rows: list[tuple[int, str, int | None, int | None]]) -> None:
        with self._writing() as conn:
            conn.execute("DELETE FROM plex_index WHERE section_id = ?", (section_id,))
            conn.executemany("INSERT INTO plex_index VALUES (?, ?, ?, ?, ?)", [(section_id, *row) for row in rows])
            conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (f"index_stamp:{section_id}", json.dumps(stamp)))

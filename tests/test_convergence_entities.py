"""Model-based convergence with entity hooks and Plex-side drift, ending with ``reconcile``.

A seeded random sequence of what users and the servers do: scene edits
(``Scene.Update.Post``), tag/performer/studio renames (case-only or not), tag merges and
entity deletions (only their entity hook fires, as in Stash), a performer merge (no hook
at all), and Plex-side drift made through real plexapi calls (a user unlocking and
refreshing an item, a title typed in Plex Web). While the sequence plays, the model holds
the drainer lock, so hooks only record their events. Then ``process_queue`` and finally
``reconcile`` run, and every scene's Plex item must show what Stash holds.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.runner import drainer_lock_held

TAGS = ("drama", "kept", "outdoor", "night")
PERFORMERS = ("john doe", "Jane Roe", "ann lee")
STUDIOS = ("acme films", "Beta", None)
KEYS = {"tag": "tags", "performer": "performers", "studio": "studio"}


class Model:
    def __init__(self, plugin, seed: int) -> None:
        self.plugin, self.rng, self.log = plugin, random.Random(seed), []
        self.items: dict[int, int] = {}

    @property
    def stash(self):
        return self.plugin.stash

    def hook(self, context: dict) -> None:
        run = self.plugin.hook(context)
        assert run.error is None, run.stderr[-2000:]

    def scene_id(self) -> int:
        return self.rng.choice(sorted(self.items))

    def shown(self, kind: str) -> list[str]:
        names = set()
        for sid in self.items:
            scene = self.stash.scene(sid)
            names.update(scene[KEYS[kind]] if kind != "studio" else [scene["studio"]] if scene["studio"] else [])
        return sorted(names)

    # -- what happens ------------------------------------------------------------------
    def edit(self) -> None:
        sid, rng = self.scene_id(), self.rng
        changes = {"title": f"Scene {sid} v{len(self.log)}"}
        changes.update(
            rng.choice(
                [
                    {"tags": rng.sample(TAGS, rng.randint(0, 3))},
                    {"performers": rng.sample(PERFORMERS, rng.randint(0, 2))},
                    {"studio": rng.choice(STUDIOS)},
                ]
            )
        )
        self.log.append(f"edit {sid} {sorted(changes)}")
        self.hook(self.stash.update_scene(sid, **changes))

    def entity(self) -> None:
        kind = self.rng.choice(sorted(KEYS))
        names = self.shown(kind)
        if not names:
            return
        old = self.rng.choice(names)
        entity = self.stash.entity_id(kind, old)
        roll = self.rng.random()
        if roll < 0.25:
            self.log.append(f"delete {kind} {old!r}")
            self.hook(self.stash.destroy_entity(kind, entity))
        elif roll < 0.45 and len(names) > 1 and kind != "studio":
            into = self.rng.choice([n for n in names if n != old])
            target = self.stash.entity_id(kind, into)
            self.log.append(f"merge {kind} {old!r} into {into!r}")
            if kind == "tag":
                self.hook(self.stash.merge_tags([entity], target))
            else:
                self.stash.merge_performers([entity], target)  # Stash fires no hook for this
        else:
            new = old.swapcase() if self.rng.random() < 0.5 else f"{old} x"
            if new in self.shown(kind):
                return
            self.log.append(f"rename {kind} {old!r} -> {new!r}")
            self.hook(self.stash.rename_entity(kind, entity, new))

    def plex_drift(self) -> None:
        from plexapi.server import PlexServer

        sid = self.scene_id()
        item = PlexServer(self.plugin.plex.url, self.plugin.plex.token).fetchItem(self.items[sid])
        if self.rng.random() < 0.5:
            item.edit(**{"title.locked": 0, "summary.locked": 0, "genre.locked": 0})
            if item.genres:
                item.removeGenre([g.tag for g in item.genres], locked=False)
            item.unlockPoster()
            item.refresh()
            self.log.append(f"plex wipe {sid}")
        else:
            item.editTitle("Typed in Plex")
            self.log.append(f"plex edit {sid}")

    # -- the end state -------------------------------------------------------------------
    def problems(self) -> list[str]:
        wrong = []
        for sid, rating_key in sorted(self.items.items()):
            scene, item = self.stash.scene(sid), self.plugin.plex.item(rating_key)
            studio = [scene["studio"]] if scene["studio"] else []
            expect = {
                "title": (item["fields"]["title"], scene["title"]),
                "studio": (item["fields"]["studio"] or "", scene["studio"] or ""),
                "genre": (_folded(item["tags"]["genre"]), _folded(scene["tags"])),
                "actor": (_folded(item["tags"]["actor"]), _folded(scene["performers"])),
                "collection": (_folded(item["tags"]["collection"]), _folded(studio)),
                "locked": ("title" in item["locks"] and "thumb" in item["locks"], True),
            }
            wrong += [
                f"scene {sid} {k}: Plex {got!r}, Stash {want!r}" for k, (got, want) in expect.items() if got != want
            ]
        return wrong


def _folded(names) -> list[str]:
    return sorted({n.casefold() for n in names})


@pytest.mark.parametrize("seed", [12, 3])
def test_entity_hooks_and_plex_drift_converge_after_reconcile(plugin, seed):
    model = Model(plugin, seed)
    rng = model.rng
    for n in range(5):
        sid, rk = plugin.add_scene(
            n,
            tags=rng.sample(TAGS, 2),
            performers=rng.sample(PERFORMERS, 1),
            studio=rng.choice(STUDIOS),
        )
        model.items[sid] = rk
    assert plugin.task("all").error is None
    with drainer_lock_held(Path(plugin.data_dir)):  # hooks only record; the tasks below do the work
        for _ in range(10):
            rng.choices([model.edit, model.entity, model.plex_drift], weights=[2, 3, 1])[0]()
    for mode in ("process_queue", "reconcile"):
        run = plugin.task(mode)
        assert run.error is None, run.stderr[-2000:]
    problems = model.problems()
    assert not problems, f"seed {seed}: {'; '.join(problems)}\noperations: {', '.join(model.log)}"

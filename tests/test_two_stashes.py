"""Issue 25.5: two Stash instances sharing one plugin folder each keep their own queue.

Both emulated Stashes have a scene 1 (each its own file); the plugin runs from one copy,
as two Stash servers sharing a plugins folder would run it. Each edit reaches its own
Plex item; neither drainer takes the other's jobs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.errors import DataFileError
from core.platform import write_whole
from sync_queue.owner import OWNER_FILE, data_folder
from tests.conftest import STASH_API_KEY, STASH_COOKIE, Installed, Plugin
from tests.emulators.stash_emulator import StashEmulator
from tests.runner import drainer_lock_held
from tests.test_bootstrap import _copy_plugin


def _scene(plugin, name: str) -> tuple[int, int]:
    sid = plugin.stash.add_scene(title=name, files=[{"path": f"/stash/media/{name}.mp4", "size": 10, "duration": 60.0}])
    return sid, plugin.plex.add_item(1, f"/plex/media/{name}.mp4", size=10, duration_ms=60000)


def test_two_stashes_sharing_a_plugin_folder_each_sync_their_own_scenes(plugin, tmp_path):
    plugin_dir = _copy_plugin(tmp_path / "stash-a" / "plugins")
    env = {k: v for k, v in plugin.env.items() if k != "STASH2PLEX_DATA_DIR"}  # the default folder
    with StashEmulator(session_cookie=STASH_COOKIE, api_key=STASH_API_KEY) as other:
        other.config_dir = str(tmp_path / "stash-b")
        a = Installed(Plugin(plugin.stash, plugin.plex, plugin_dir / "data", env), plugin_dir)
        b_base = Plugin(other, plugin.plex, plugin_dir / "data", env)
        b_base.configure()
        (sid_a, rk_a), (sid_b, rk_b) = _scene(a, "from-a"), _scene(b_base, "from-b")
        assert sid_a == sid_b == 1  # the same scene id in both
        b = Installed(b_base, plugin_dir)
        with drainer_lock_held(plugin_dir / "data"):  # A's drainer is busy while both edits are made
            assert a.hook(a.stash.update_scene(sid_a, title="Edited in A")).error is None
            assert b.hook(other.update_scene(sid_b, title="Edited in B")).error is None
        assert a.task("process_queue").error is None
        b_dirs = [d for d in plugin_dir.iterdir() if d.name.startswith("data-")]
        if b_dirs:
            b.data_dir = b_dirs[0]
            b.wait_drained()
        assert plugin.plex.item(rk_a)["fields"]["title"] == "Edited in A"
        assert plugin.plex.item(rk_b)["fields"]["title"] == "Edited in B"  # A's drainer took it before
        assert len(b_dirs) == 1 and str(tmp_path / "stash-b") in (b_dirs[0] / OWNER_FILE).read_text()
        assert str(tmp_path / "stash-a") in (plugin_dir / "data" / OWNER_FILE).read_text()

        # a folder the user named for both is refused for the second, with what to do
        shared = {**env, "STASH2PLEX_DATA_DIR": str(plugin_dir / "data")}
        refused = Installed(Plugin(other, plugin.plex, plugin_dir / "data", shared), plugin_dir)
        run = refused.hook(other.update_scene(sid_b, title="Refused"))
        assert run.error is not None and "holds the queue of another Stash" in run.error, run.error
        assert "a STASH2PLEX_DATA_DIR of its own" in run.error


def test_a_data_folder_belongs_to_the_stash_that_used_it_first(tmp_path):
    base = tmp_path / "data"
    base.mkdir()
    (base / "ledger.db").write_bytes(b"an earlier version's data")  # unclaimed: taken over as it is
    plugin_dir, named = str(tmp_path), {"STASH2PLEX_DATA_DIR": str(base)}
    assert data_folder(plugin_dir, "/home/a/.stash", {}) == str(base)
    assert data_folder(plugin_dir, "/home/a/.stash/", {}) == str(base)  # the same folder, written otherwise
    other = Path(data_folder(plugin_dir, "/home/b/.stash", {}))
    assert other.parent == tmp_path and other.name.startswith("data-") and len(other.name) == 13
    assert data_folder(plugin_dir, "/home/b/.stash", {}) == str(other)  # stable
    assert data_folder(plugin_dir, None, {}) == str(base)  # the command line: as given
    with pytest.raises(DataFileError, match="holds the queue of another Stash"):
        data_folder(plugin_dir, "/home/b/.stash", named)
    (base / "ledger.db").read_bytes()  # untouched


def test_a_claim_is_never_seen_half_written(tmp_path):
    """The owner file appears whole: readers racing a first claim read it or nothing."""
    import threading

    from sync_queue import owner

    folder, errors, stop = tmp_path / "data", [], threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                owner.owner(folder)
            except Exception as exc:  # DataFileError: a half-written file
                errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for n in range(200):
            (folder / owner.OWNER_FILE).unlink(missing_ok=True)
            assert owner.claim(folder, f"/stash-{n}") == owner.key(f"/stash-{n}")
    finally:
        stop.set()
        reader.join()
    assert errors == [] and not list(folder.glob("*.tmp"))


def test_a_small_file_is_replaced_whole_or_made_only_when_absent_and_no_temp_file_stays(tmp_path):
    """core/platform.py ``write_whole``: the breaker's and the health file's replace, the owner's link."""
    path = str(tmp_path / OWNER_FILE)
    write_whole(path, "one")
    write_whole(path, "two")
    with pytest.raises(FileExistsError):
        write_whole(path, "three", publish=os.link)
    assert Path(path).read_text(encoding="utf-8") == "two" and os.listdir(tmp_path) == [OWNER_FILE]

"""private_logs: paths and titles become stable placeholders in logs and queue status.

Run through real hooks, the detached drainer and the queue_status task against the
emulators; file names with spaces (which no shape-based search could delimit).
"""

from __future__ import annotations

import re

from core.privacy import KEY_FILE, Placeholders, load_key
from tests.runner import create_context

FOLDER = "/stash/media/My Private Folder"
TITLE = "Secret Holiday Title"
DEAD_TITLE = "Another Private Title"


def _scene(plugin, name: str, title: str, plex_folders: list[str]) -> tuple[int, list[int]]:
    sid = plugin.stash.add_scene(title=title, files=[{"path": f"{FOLDER}/{name}", "size": 5, "duration": 1}])
    rks = [plugin.plex.add_item(1, f"{folder}/{name}", size=5 + i) for i, folder in enumerate(plex_folders)]
    return sid, rks


def test_paths_and_titles_become_stable_placeholders(plugin):
    plugin.configure(private_logs="true", path_map="/stash/media=/plex/media")
    sid, (rk,) = _scene(plugin, "holiday clip.mp4", TITLE, ["/plex/media/My Private Folder"])
    dead, _ = _scene(plugin, "twice here.mp4", DEAD_TITLE, ["/plex/media/a b", "/plex/media/c d"])
    plugin.hook(plugin.stash.update_scene(sid, title=TITLE))
    plugin.hook(create_context(dead))
    plugin.wait_drained()
    assert plugin.plex.item(rk)["fields"]["title"] == TITLE  # the sync itself is unchanged

    log = plugin.drainer_log()
    status = plugin.task("queue_status")
    shown = log + status.stdout + status.stderr
    for private in (TITLE, DEAD_TITLE, "My Private Folder", "holiday clip", "twice here", "a b/", "c d/"):
        assert private not in shown, (private, shown[-3000:])
    assert re.search(
        r"exact path <path-[0-9a-f]{8}>\): poster uploaded; title: '<title-[0-9a-f]{8}>' → '<title-[0-9a-f]{8}>'", log
    ), log
    entry = status.output["dlq_newest"][0]
    assert re.fullmatch(r"<title-[0-9a-f]{8}>", entry["title"]) and entry["scene_id"] == dead
    assert "AmbiguousMatch" == entry["error_class"] and "<path-" in entry["reason"]

    # stable: the same path gets the same placeholder in every run of this data folder
    again = plugin.task("queue_status").output["dlq_newest"][0]
    assert again["reason"] == entry["reason"] and again["title"] == entry["title"]
    key = bytes.fromhex((plugin.data_dir / "privacy.key").read_text())
    mapped = "/plex/media/My Private Folder/holiday clip.mp4"
    assert Placeholders(key).placeholder("path", mapped) in log


def test_off_by_default_paths_and_titles_stay(plugin):
    sid, (rk,) = _scene(plugin, "plain clip.mp4", TITLE, ["/plex/media/My Private Folder"])
    plugin.configure(path_map="/stash/media=/plex/media")
    plugin.hook(plugin.stash.update_scene(sid, title=TITLE))
    plugin.wait_drained()
    assert f"'{TITLE}'" in plugin.drainer_log() and "My Private Folder/plain clip.mp4" in plugin.drainer_log()
    assert not (plugin.data_dir / "privacy.key").exists()


def test_a_key_file_created_but_not_written_is_never_read_as_an_empty_key(tmp_path):
    """What another process sees while one creates privacy.key (or after it died before
    writing it): an empty file. An empty key would make the placeholders guessable and
    unlike every other process's; a key is made instead, and kept."""
    (tmp_path / KEY_FILE).write_text("")
    key = load_key(tmp_path)
    assert len(key) == 16 and load_key(tmp_path) == key
    assert bytes.fromhex((tmp_path / KEY_FILE).read_text()) == key


def test_placeholders_pure():
    p = Placeholders(b"k" * 16)
    p.note_title("Summer Trip")
    p.note_path("/media/my videos/summer trip.mp4")
    text = p("scene 3 at /media/my videos/summer trip.mp4: 'Summer Trip'; also /other/x.mp4 and http://h:1/a/b")
    assert text == (
        f"scene 3 at {p.placeholder('path', '/media/my videos/summer trip.mp4')}: "
        f"'{p.placeholder('title', 'Summer Trip')}'; also {p.placeholder('path', '/other/x.mp4')} and http://h:1/a/b"
    )
    assert p.placeholder("path", "/a/b") == Placeholders(b"k" * 16).placeholder("path", "/a/b")
    assert p.placeholder("path", "/a/b") != Placeholders(b"j" * 16).placeholder("path", "/a/b")
    p.note_title("ab")
    assert p("ab cab") == "ab cab"  # too short to replace safely

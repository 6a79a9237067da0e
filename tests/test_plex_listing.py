"""Plex's library listing (plex/client.py ``list_files``) and the index built from it
(plex/index.py ``LibraryIndex``), against the Plex emulator over real HTTP: every page
read, pages after the first read at once, a library that grows while it is listed, and
one listing shared by the threads that wait for it."""

from __future__ import annotations

import threading
import time

import pytest

from core.errors import ConfigError, PlexUnavailable
from plex.client import LIST_PAGE_SIZE, PlexClient, SectionInfo
from plex.index import LibraryIndex, missing_sections, pick_sections
from sync_queue.ledger import Ledger


def _add(plex, first: int, count: int) -> list[int]:
    return [
        plex.add_item(1, f"/plex/media/{n:05d}.mp4", size=1000 + n, duration_ms=60000 + n)
        for n in range(first, first + count)
    ]


def _listings(plex) -> list[dict]:
    return plex.requests_matching("GET", "/library/sections/1/all")


def test_every_page_is_read_and_the_rows_keep_plex_order(plex):
    keys = _add(plex, 0, 2 * LIST_PAGE_SIZE + 234)
    client = PlexClient(plex.url, plex.token, "test-client")
    rows = client.list_files(1)
    assert [r[0] for r in rows] == keys
    assert rows[7] == (keys[7], "/plex/media/00007.mp4", 1007, 60007)
    starts = sorted(int(r["headers"]["X-Plex-Container-Start"]) for r in _listings(plex))
    assert starts == [0, LIST_PAGE_SIZE, 2 * LIST_PAGE_SIZE]


def test_pages_after_the_first_are_read_at_once(plex):
    _add(plex, 0, 3 * LIST_PAGE_SIZE + 1)
    client = PlexClient(plex.url, plex.token, "test-client")
    later = threading.Barrier(3, timeout=10)

    def hold(record: dict) -> None:
        """Plex answers none of the later pages until all three are asked (by order, not time:
        read one after another, the second would never be asked and the first's wait breaks)."""
        if record["path"] == "/library/sections/1/all" and record["headers"].get("X-Plex-Container-Start") != "0":
            later.wait()

    plex.on_request = hold
    rows = client.list_files(1)
    assert len(rows) == 3 * LIST_PAGE_SIZE + 1 and len(_listings(plex)) == 4
    assert not later.broken


def test_a_library_that_grows_while_listed_is_read_to_its_end(plex):
    keys = _add(plex, 0, LIST_PAGE_SIZE + 10)
    added: list[int] = []

    def grow(record: dict) -> None:
        if record["path"].startswith("/library/sections/1/all") and not added:
            added.extend(_add(plex, 10_000, LIST_PAGE_SIZE))  # after the first page was answered

    plex.on_request = grow
    rows = PlexClient(plex.url, plex.token, "test-client").list_files(1)
    assert [r[0] for r in rows] == keys + added
    assert len(_listings(plex)) == 3


def test_threads_waiting_for_a_failed_first_listing_get_its_error(plex, tmp_path):
    """A warm-up listing that fails (or hangs until its timeout) is not asked again by
    every thread that waited for it: they get its error; a later call asks Plex anew."""
    _add(plex, 0, 3)
    index = LibraryIndex(PlexClient(plex.url, plex.token, "test-client"), Ledger(tmp_path), ())
    plex.fail_503, plex.latency = True, 0.5
    warm = threading.Thread(target=index.warm)
    warm.start()
    time.sleep(0.1)  # the warm-up's request is in flight
    with pytest.raises(PlexUnavailable):
        index.index()
    warm.join()
    assert [r["path"] for r in plex.requests] == ["/identity", "/"]  # where plex_url leads, then Plex's root

    plex.fail_503, plex.latency = False, 0.0
    assert [f.rating_key for f in index.index().by_path("/plex/media/00001.mp4")]
    assert len(plex.requests) > 1


def test_files_already_listed_are_found_by_exact_path_while_the_first_listing_runs(plex, tmp_path):
    """A large library's first listing takes a while; a scene whose file is on a page that
    has arrived is matched at once (plex/index.py ``early``), the rest wait for the index."""
    keys = _add(plex, 0, 3 * LIST_PAGE_SIZE + 1)
    client = PlexClient(plex.url, plex.token, "test-client")
    client.sections()  # connected before the latency starts
    index = LibraryIndex(client, Ledger(tmp_path), ())
    plex.latency = 0.5
    warm = threading.Thread(target=index.warm)
    warm.start()
    deadline = time.monotonic() + 10
    while not index.early("/plex/media/00000.mp4") and time.monotonic() < deadline:
        time.sleep(0.01)
    found = index.early("/plex/media/00000.mp4")
    assert index.listing and [f.rating_key for f in found] == [keys[0]]
    assert [s.key for s in index.sections] == [1]  # named by Plex before the listing ends, without waiting
    assert index.early("/plex/media/01600.mp4") == []  # not on a page read yet
    warm.join(30)
    assert not index.listing and index.early("/plex/media/00000.mp4") == []  # from now on the whole index decides
    assert [f.rating_key for f in index.index().by_path("/plex/media/01500.mp4")] == [keys[1500]]


def test_two_libraries_are_never_matched_early(plex, tmp_path):
    """With two libraries one path can be two items (one in each): only the whole index decides."""
    _add(plex, 0, LIST_PAGE_SIZE + 1)
    plex.add_section("More", ["/plex/more"], key=2)
    client = PlexClient(plex.url, plex.token, "test-client")
    client.sections()
    index = LibraryIndex(client, Ledger(tmp_path), ("Stash", "More"))
    plex.latency = 0.3
    warm = threading.Thread(target=index.warm)
    warm.start()
    seen = []
    while warm.is_alive():
        seen.append(index.early("/plex/media/00000.mp4"))
        time.sleep(0.02)
    assert len(seen) > 5 and not any(seen)
    assert [s.key for s in index.sections] == [1, 2]  # the listing itself worked


def test_libraries_named_in_the_settings_are_found_by_trimmed_title_in_any_case():
    """plex_libraries against Plex's sections: one comparison for the sync and Health check's list."""
    available = [SectionInfo(1, "Stash", "movie", "0"), SectionInfo(2, "Music", "artist", "0")]
    assert missing_sections(available, (" stash ", "Films")) == ["Films"]
    assert pick_sections(available, ("STASH",)) == [available[0]]
    with pytest.raises(
        ConfigError, match=r"names 'Films', which Plex does not have\. Plex libraries: 'Stash', 'Music'"
    ):
        pick_sections(available, (" stash ", "Films"))

"""The hooks' spool (sync_queue/spool.py): one line per hook, appended beside the queue,
moved into it by the consumer (one job per scene), never lost across a crash in between or
a hook writing while it moves, counted (by scene) and cleared with the queue."""

from __future__ import annotations

import os
import sqlite3

import pytest

from sync_queue import spool
from sync_queue.job import BULK, INTERACTIVE, Job
from sync_queue.queue import JobQueue
from tests.runner import REPO, create_context, hook_document

NOW = 1_800_000_000.0


def put(folder, sid: int, priority: str = INTERACTIVE, at: float = NOW, fields=("title",)) -> None:
    spool.put(str(folder.parent), spool.scene_record(sid, priority, "Scene.Update.Post", fields, at))


@pytest.fixture
def folder(tmp_path):
    put(tmp_path / "queue", 1, INTERACTIVE, NOW)
    return tmp_path / "queue"


def spool_lines(folder) -> list[tuple]:
    spool_file = folder / spool.SPOOL_FILE
    records = [
        r
        for path in (spool_file, spool_file.with_name(spool_file.name + spool.TAKEN_SUFFIX))
        for r in spool.read(str(path))[0]
    ]
    return [(r["scene"], r["priority"], r["at"]) for r in records]


def test_each_hook_appends_one_line_and_a_cut_off_line_spares_the_next(folder):
    put(folder, 2, BULK, NOW + 1)
    with open(folder / spool.SPOOL_FILE, "ab") as spool_file:
        spool_file.write(b'\n{"scene": 3, "prior')  # a hook stopped by a full disk mid-line
    put(folder, 4, INTERACTIVE, NOW + 2)
    records, bad = spool.read(str(folder / spool.SPOOL_FILE))
    assert [r["scene"] for r in records] == [1, 2, 4] and bad == ['{"scene": 3, "prior']
    queue = JobQueue(folder)  # the spool's scenes by priority, as the queue counts them
    assert [queue.counts()[k] for k in ("pending", INTERACTIVE, BULK)] == [3, 2, 1]
    queue.close()
    assert oct((folder / spool.SPOOL_FILE).stat().st_mode & 0o777) == "0o600"


def test_the_consumer_takes_spool_lines_as_jobs_one_per_scene(folder):
    put(folder, 2, BULK, NOW + 1, fields=())
    put(folder, 2, BULK, NOW + 2, fields=())  # collapses into the first
    put(folder, 3, BULK, NOW + 3, fields=())
    put(folder, 3, INTERACTIVE, NOW + 4)  # a user's edit replaces the scan's job
    queue = JobQueue(folder, consumer=True, clock=lambda: NOW + 10)
    taken = queue.take(10)
    assert [(t.job.scene_id, t.job.priority, t.job.enqueued_at) for t in taken] == [
        (1, INTERACTIVE, NOW),
        (3, INTERACTIVE, NOW + 4),
        (2, BULK, NOW + 1),
    ]
    assert spool_lines(folder) == [] and not list(folder.glob("inbox.spool*"))
    queue.close()


def test_a_crash_between_put_and_delete_moves_a_line_twice_into_one_job(folder, monkeypatch):
    import os

    queue = JobQueue(folder, consumer=True, clock=lambda: NOW + 10)

    def crash(path):
        raise OSError("killed")

    monkeypatch.setattr(os, "remove", crash)
    with pytest.raises(OSError):
        queue.take(10)  # the job is in the queue and its line still in the taken file
    monkeypatch.undo()
    queue.close()
    put(folder, 2)  # a hook meanwhile: a new spool file beside the taken one
    again = JobQueue(folder, consumer=True, clock=lambda: NOW + 10)
    assert [t.job.scene_id for t in again.take(10)] == [1, 2]  # 1 collapsed into its waiting job
    assert again.take(10) == [] and spool_lines(folder) == []
    again.close()


def test_a_line_written_while_the_file_moves_goes_to_the_new_file(tmp_path, monkeypatch):
    """A hook that opened the spool file just before the consumer took it aside writes to
    the new file (core/platform.py ``append``), never into the one being moved in."""
    from core import platform

    spool_file, taken = str(tmp_path / "inbox.spool"), str(tmp_path / "inbox.spool.taken")
    platform.append(spool_file, b"a\n")
    early = os.open(spool_file, os.O_WRONLY | os.O_APPEND)
    assert platform.take_aside(spool_file, taken)
    platform.append(spool_file, b"c\n")  # another hook's line makes the new file first
    monkeypatch.setattr(platform.os, "open", _open_first(early))  # its open came before the move
    platform.append(spool_file, b"b\n")
    os.close(early)
    assert (tmp_path / "inbox.spool.taken").read_bytes() == b"a\n"
    assert (tmp_path / "inbox.spool").read_bytes() == b"c\nb\n"
    assert not platform.take_aside(str(tmp_path / "none"), taken)


@pytest.mark.skipif(os.name == "nt", reason="POSIX: the take waits on the appenders' shared flock")
def test_a_take_waits_for_the_append_under_way(tmp_path):
    """The consumer reads the taken file only after the appenders writing into it finished."""
    import fcntl
    import threading

    from core import platform

    spool_file, taken = str(tmp_path / "inbox.spool"), str(tmp_path / "inbox.spool.taken")
    platform.append(spool_file, b"a\n")
    writing = os.open(spool_file, os.O_WRONLY | os.O_APPEND)
    fcntl.flock(writing, fcntl.LOCK_SH)  # an appender between its lock and its write
    done = threading.Event()
    threading.Thread(target=lambda: done.set() if platform.take_aside(spool_file, taken) else None).start()
    assert not done.wait(0.2)
    os.close(writing)
    assert done.wait(5)


def _open_first(fd: int):
    """os.open that hands out a duplicate of ``fd`` (a file opened earlier) once, then opens."""
    real = os.open
    calls: list = []

    def opened(*args, **kwargs):
        calls.append(args)
        return os.dup(fd) if len(calls) == 1 else real(*args, **kwargs)

    return opened


def test_counts_waiting_job_and_clear_see_the_spool(folder):
    put(folder, 2, BULK, NOW + 1, fields=())
    put(folder, 2, BULK, NOW + 2, fields=())
    queue = JobQueue(folder)
    counts = queue.counts()
    assert (counts["pending"], counts[INTERACTIVE], counts[BULK]) == (2, 1, 1)  # scenes, not lines
    assert queue.ready_count() == 2
    assert queue.waiting_job(2) == Job(2, BULK, NOW + 2)
    assert queue.clear() == 2
    assert queue.counts()["pending"] == 0 and spool_lines(folder) == []
    queue.close()


def test_an_entity_waiting_in_the_spool_and_the_queue_counts_once(folder):
    """Its event was moved in, a newer one is spooled since: one entity to fan out, not two."""
    spool.put(str(folder.parent), spool.entity_record("tag", 7, "Tag.Update.Post", NOW))
    queue = JobQueue(folder, consumer=True, clock=lambda: NOW + 10)
    queue.take(10)
    spool.put(str(folder.parent), spool.entity_record("tag", 7, "Tag.Merge.Post", NOW + 1))
    counts = queue.counts()
    assert (counts["pending"], counts["entity_events"]) == (2, 1), counts  # scene 1 in flight, tag 7
    assert queue.pending() == 2
    queue.close()


def test_a_damaged_spool_line_is_set_aside_and_the_rest_move(folder):
    spool.put(str(folder.parent), {"scene": 5, "priority": "urgent", "event": "e", "fields": [], "at": 0})
    with open(folder / spool.SPOOL_FILE, "ab") as spool_file:
        spool_file.write(b"\nnot json\n")
    queue = JobQueue(folder, consumer=True, clock=lambda: NOW + 10)
    assert [t.job.scene_id for t in queue.take(10)] == [1]
    assert queue.take_rejected() == [
        ("inbox", 0, "ValueError: not a scene job: scene 5, priority 'urgent'"),
        ("inbox", 0, "not a job: 'not json'"),
    ]
    assert spool_lines(folder) == []
    queue.close()


def test_rows_an_older_version_left_in_the_inbox_table_move_in(tmp_path):
    JobQueue(tmp_path).counts()  # makes data.db
    with sqlite3.connect(tmp_path / "data.db") as conn:
        conn.execute(
            "CREATE TABLE s2p_inbox (scene_id INTEGER PRIMARY KEY, priority TEXT NOT NULL, "
            "event TEXT NOT NULL, fields TEXT NOT NULL, queued_at REAL NOT NULL)"
        )
        conn.execute("INSERT INTO s2p_inbox VALUES (6, 'bulk', 'Scene.Create.Post', '', ?)", (NOW,))
    queue = JobQueue(tmp_path, consumer=True, clock=lambda: NOW + 10)
    assert [(t.job.scene_id, t.job.priority) for t in queue.take(10)] == [(6, BULK)]
    queue.close()
    with sqlite3.connect(tmp_path / "data.db") as conn:
        assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 's2p_inbox'").fetchone() is None


def _append_many(args) -> None:
    folder, first, n = args
    for sid in range(first, first + n):
        put(folder, sid)


def test_concurrent_hooks_and_takes_lose_and_double_no_line(tmp_path):
    """Four processes append 300 lines each while the consumer takes the file aside again
    and again: every scene arrives, once."""
    import multiprocessing

    folder = tmp_path / "queue"
    queue = JobQueue(folder, consumer=True, clock=lambda: NOW + 10)
    seen: list[int] = []
    with multiprocessing.get_context("fork").Pool(4) as pool:
        done = pool.map_async(_append_many, [(folder, 1 + 1000 * i, 300) for i in range(4)])
        while not done.ready():
            seen.extend(t.job.scene_id for t in queue.take(500))
        done.get()
    seen.extend(t.job.scene_id for t in queue.take(2000))
    assert sorted(seen) == [1 + 1000 * i + k for i in range(4) for k in range(300)]
    queue.close()


# -- a hook's row is one job, whichever lane finishes the hook ---------------------------------
def _run_hook(context: dict, data) -> str:
    """The plugin's entry as Stash runs it (in this process): the reply's output."""
    import io
    import json

    from app import main

    connection = {"Scheme": "http", "Host": "127.0.0.1", "Port": 9, "PluginDir": str(REPO), "Dir": "/stash/config"}
    connection["SessionCookie"] = {"Name": "session", "Value": "cookie-value"}
    out = io.StringIO()
    env = {"STASH2PLEX_DATA_DIR": str(data)}
    assert main.main(io.StringIO(json.dumps(hook_document(connection, context))), out, io.StringIO(), env) == 0
    reply = json.loads(out.getvalue())
    assert reply["error"] is None, reply
    return reply["output"]


@pytest.mark.parametrize("drainer_runs", [True, False])
def test_a_hook_writes_its_line_before_it_looks_for_a_drainer(tmp_path, monkeypatch, drainer_runs):
    """A drainer that holds its lock when the hook looks looks once more after letting go
    of it, so it finds the line; a free lock means none will: the hook starts one. Looking
    first and writing after would strand the line when the drainer leaves in between."""
    from app import root
    from hooks import lane

    data = tmp_path / "data"
    spawned: list = []
    monkeypatch.setattr(root, "spawn_detached", lambda *args: spawned.append(args))
    assert _run_hook(create_context(3), data) == "scene 3 queued"  # the first run: folder claimed
    assert len(spawned) == 1
    seen: list = []

    def look(path: str) -> bool:
        seen.append(spool_lines(data / "queue"))
        return drainer_runs

    monkeypatch.setattr(lane, "is_locked", look)
    assert _run_hook(create_context(4), data) == "scene 4 queued"
    assert [[sid for sid, _, _ in lines] for lines in seen] == [[3, 4]]  # written, then looked
    assert len(spawned) == (1 if drainer_runs else 2)
    assert (data / spool.NUDGE_FILE).exists() == drainer_runs


def test_a_spool_line_sqlite_cannot_hold_is_set_aside_and_the_rest_move(folder):
    """An id past SQLite's 64 bits (a tag's child list) must not stop every later take."""
    spool.put(str(folder.parent), spool.entity_record("tag", 2**63, "Tag.Update.Post", NOW))
    spool.put(str(folder.parent), spool.entity_record("tag", 7, "Tag.Update.Post", NOW))
    queue = JobQueue(folder, consumer=True, clock=lambda: NOW + 10)
    assert [t.job.scene_id for t in queue.take(10)] == [1]
    assert queue.take_rejected() == [("inbox", 0, "ValueError: not an entity event: 'tag' 9223372036854775808")]
    assert spool_lines(folder) == [] and queue.counts()["entity_events"] == 1
    queue.close()


@pytest.mark.parametrize("at", ["soon", 1e300, None])
def test_a_damaged_health_file_still_lets_the_hook_start_a_drainer(tmp_path, monkeypatch, at):
    """The hook's warning reads sync_health.json, a file of ours another program may have
    damaged: a time that is none is 'now', not a traceback after the line was written and
    before the drainer was started (the line would wait for the next hook)."""
    import json

    from app import root
    from sync_queue import health

    data = tmp_path / "data"
    spawned: list = []
    monkeypatch.setattr(root, "spawn_detached", lambda *args: spawned.append(args))
    assert _run_hook(create_context(3), data) == "scene 3 queued"
    (data / health.HEALTH_FILE).write_text(json.dumps({"failing": {"reason": "Plex said 401", "at": at}}))
    assert _run_hook(create_context(4), data) == "scene 4 queued"
    assert len(spawned) == 2
    text = health.warning_due(str(data), NOW, every_s=0)
    assert text is not None and text.startswith("background sync is failing (last try ")


def test_a_taken_file_a_reader_holds_open_on_windows_stays_for_the_next_take(folder, monkeypatch):
    """Windows deletes no file another process has open (a status read of the spool): the
    take goes on, and a later one moves the same lines again (as after a crash)."""
    from core import platform

    real, reader = os.remove, [True]

    def held(path):
        if str(path).endswith(spool.TAKEN_SUFFIX) and reader:
            raise PermissionError(13, "The process cannot access the file", path)
        real(path)

    monkeypatch.setattr(platform, "IS_WINDOWS", True)
    monkeypatch.setattr(platform.os, "remove", held)
    queue = JobQueue(folder, consumer=True, clock=lambda: NOW + 10)
    assert [t.job.scene_id for t in queue.take(10)] == [1]
    assert spool_lines(folder) == [(1, INTERACTIVE, NOW)]  # still there
    reader.clear()  # the reader is done
    assert [t.job.scene_id for t in queue.take(10)] == [1]  # its line moved again: one more sync, none lost
    assert spool_lines(folder) == []
    queue.close()


def _hook_process(data) -> object:
    """One hook as Stash runs it: the plugin's own process (tests/runner.py)."""
    from tests.runner import run_plugin

    connection = {"Scheme": "http", "Host": "127.0.0.1", "Port": 9, "PluginDir": str(REPO), "Dir": "/stash/config"}
    return run_plugin(hook_document(connection, create_context(3)), {"STASH2PLEX_DATA_DIR": str(data)}, timeout=60)


@pytest.mark.parametrize(
    "damage, culprit, words",
    [
        ("queue is a file", "queue", "is a file where Stash2Plex keeps a folder"),
        ("the spool is a folder", "queue/inbox.spool", "is a folder where Stash2Plex keeps a file"),
    ],
)
def test_a_damaged_data_folder_is_named_in_the_hooks_reply_without_a_traceback(tmp_path, damage, culprit, words):
    """Something other than the plugin put a file where its queue folder belongs (or a folder
    where its spool file does): the hook answers with the path, what is wrong and what to do."""
    data = tmp_path / "data"
    (data / "queue").parent.mkdir(parents=True)
    if damage == "queue is a file":
        (data / "queue").write_text("not ours")
    else:
        (data / "queue" / spool.SPOOL_FILE).mkdir(parents=True)
    run = _hook_process(data)
    assert run.returncode == 1 and run.error, run.stderr[-2000:]
    assert "Traceback" not in run.stderr and "unexpectedly" not in run.error, run.stderr[-2000:]
    assert run.error.startswith(f"cannot write {data / 'queue'}"), run.error
    assert f"{data / culprit} {words}" in run.error and "Move it" in run.error, run.error
    assert run.messages("error") == [run.error]


def test_a_spool_that_keeps_being_moved_away_is_named_in_the_reply(tmp_path, monkeypatch):
    """``append`` gives up on a file that is moved away at each try: a named, held file."""
    import io
    import json

    from app import main
    from core import platform

    monkeypatch.setattr(platform, "_append_locked", lambda fd, path, record: False)
    connection = {"Scheme": "http", "Host": "127.0.0.1", "Port": 9, "PluginDir": str(REPO), "Dir": "/stash/config"}
    out, err = io.StringIO(), io.StringIO()
    env = {"STASH2PLEX_DATA_DIR": str(tmp_path / "data")}
    assert main.main(io.StringIO(json.dumps(hook_document(connection, create_context(3)))), out, err, env) == 1
    error = json.loads(out.getvalue())["error"]
    spool_file = tmp_path / "data" / "queue" / spool.SPOOL_FILE
    assert error.startswith(f"cannot write {spool_file}: another program kept it busy (it kept being moved away)"), (
        error
    )
    assert "Traceback" not in err.getvalue()


def test_an_appender_waits_for_its_turn_every_5_ms_for_at_most_2_s():
    """Windows' appenders take turns on a byte lock tried without waiting (``LK_NBLCK``):
    ``LK_LOCK`` tries once a second (the second of two hooks lost 1 s) and raises after
    ten (a traceback). The loop, with an injected lock, clock and sleep."""
    from core import platform

    assert (platform.APPEND_PATIENCE_S, platform.APPEND_POLL_S) == (2.0, 0.005)
    now, slept, tries = [0.0], [], []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] = len(slept) * s

    def held_for(n: int):
        return lambda: tries.append(now[0]) or len(tries) > n

    assert platform.retry_for(held_for(3), 2.0, 0.005, lambda: now[0], sleep)
    assert tries == [0.0, 0.005, 0.01, 0.015] and slept == [0.005] * 3
    now[0], slept[:], tries[:] = 0.0, [], []
    assert not platform.retry_for(held_for(10**6), 2.0, 0.005, lambda: now[0], sleep)
    assert len(tries) == 401 and len(slept) == 400 and now[0] == 2.0


def test_a_resumed_move_is_dated_now_so_no_hook_warns_of_a_held_queue_file(folder):
    """A drainer that died mid-move left ``inbox.spool.taken``; the next one moves it in
    again: its time is when that move began, not the old one (a hook meanwhile would
    otherwise warn that another program holds the queue file)."""
    import time

    taken = folder / (spool.SPOOL_FILE + spool.TAKEN_SUFFIX)
    assert spool.take(str(folder)) == str(taken)
    os.utime(taken, (1000.0, 1000.0))  # the interrupted move, long ago
    before = time.time() - 1.0  # a file's time may trail time.time() (the kernel's coarse clock)
    assert spool.take(str(folder)) == str(taken)
    assert spool.moving_for(str(folder), before) == 0.0

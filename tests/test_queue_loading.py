"""persist-queue loaded without its package ``__init__`` (sync_queue/pq_insides.py), checked
against the pinned version; and the SQLite 'locked' retry that replaced tenacity there."""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys

import pytest

from sync_queue import sqlite
from tests.runner import REPO

PROBE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from sync_queue.job import INTERACTIVE, Job
from sync_queue.pq_insides import load
from sync_queue.queue import JobQueue
pq = load()
loaded = {"asyncio": "asyncio" in sys.modules, "ssl": "ssl" in sys.modules, "package": "persistqueue" in sys.modules}
producer = JobQueue(Path(sys.argv[2]) / "queue")
added = producer.put(Job(scene_id=5, priority=INTERACTIVE))
producer.close()
import persistqueue  # the whole package, loaded afresh, reads what the adapter wrote
from persistqueue.serializers import json as js
real = persistqueue.SQLiteAckQueue(sys.argv[2] + "/queue", name="interactive", serializer=js, auto_resume=False)
row = real.get(block=False)
real.close()
print(json.dumps({"loaded": loaded, "added": added, "row": row, "version": persistqueue.__version__}))
"""


def test_the_queue_loads_persist_queue_without_asyncio_and_keeps_its_classes(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(REPO), str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["version"] == "1.1.0"  # requirements.txt pins it; the loading trick is checked for this one
    assert result["loaded"] == {"asyncio": False, "ssl": False, "package": False}
    assert result["added"] is True and result["row"]["scene_id"] == 5


def test_an_already_imported_persist_queue_is_used_as_it_is(tmp_path):
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import persistqueue\n"
        "from sync_queue.pq_insides import load\n"
        "print(load().SQLiteAckQueue is persistqueue.SQLiteAckQueue)"
    )
    done = subprocess.run([sys.executable, "-c", code, str(REPO)], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "True", done.stderr


def test_locked_waits_are_jittered_exponential_up_to_two_seconds():
    rng = random.Random(7)
    waits = [round(sqlite.locked_wait(n, rng), 6) for n in range(1, 8)]
    check = random.Random(7)
    assert waits == [round(check.uniform(0, high), 6) for high in (0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0)]


def _sqlite_error(message: str, code: int) -> sqlite3.OperationalError:
    exc = sqlite3.OperationalError(message)
    exc.sqlite_errorcode = code  # what SQLite sets; the cause is decided by the code
    return exc


class _Flaky:
    def __init__(self, errors: list[BaseException]) -> None:
        self.errors, self.calls = errors, 0

    @sqlite.retry_locked
    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def test_retry_locked_retries_only_locked_and_busy_up_to_six_attempts(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(sqlite.time, "sleep", slept.append)
    flaky = _Flaky(
        [
            _sqlite_error("database is locked", sqlite3.SQLITE_LOCKED),
            _sqlite_error("database is busy", sqlite3.SQLITE_BUSY),
        ]
    )
    assert flaky() == "done" and flaky.calls == 3 and len(slept) == 2

    always = _Flaky([_sqlite_error("database is locked", sqlite3.SQLITE_BUSY) for _ in range(10)])
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        always()
    assert always.calls == 6

    other = _Flaky([_sqlite_error("no such table: x", sqlite3.SQLITE_ERROR)])
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        other()
    assert other.calls == 1


def test_a_write_begins_again_while_another_process_holds_the_file(tmp_path, monkeypatch):
    """The one retry of our writes (sqlite.py ``write``): its ``BEGIN IMMEDIATE``, after the
    busy timeout ran out, until the holder lets go; nothing inside the transaction waits."""
    conn = sqlite.connect(tmp_path / "x.db", "CREATE TABLE IF NOT EXISTS t (v INTEGER);")
    conn.execute("PRAGMA busy_timeout = 0")  # the 10 s wait is SQLite's own, not ours to test
    holder = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 2:
            holder.execute("COMMIT")

    monkeypatch.setattr(sqlite.time, "sleep", sleep)
    with sqlite.write(conn) as tx:
        tx.execute("INSERT INTO t VALUES (1)")
    assert len(slept) == 2 and conn.execute("SELECT v FROM t").fetchall() == [(1,)]
    holder.execute("BEGIN IMMEDIATE")
    with pytest.raises(sqlite3.OperationalError, match="locked"), sqlite.write(conn):
        pass  # held for good: given up after six attempts
    assert len(slept) == 2 + 5
    holder.close()
    conn.close()


CHURN = r"""
import sys, threading, types
sys.path.insert(0, sys.argv[1])
from sync_queue.pq_insides import _load_without_init
stop = threading.Event()

def churn():  # what a thread importing modules does to sys.modules
    n = 0
    while not stop.is_set():
        name = f"_s2p_churn_{n % 50}"
        sys.modules[name] = types.ModuleType(name)
        sys.modules.pop(f"_s2p_churn_{(n + 25) % 50}", None)
        n += 1

sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
t = threading.Thread(target=churn)
t.start()
try:
    for _ in range(20):
        assert _load_without_init() is not None
finally:
    stop.set()
    t.join()
print("ok")
"""


def test_loading_persist_queue_while_another_thread_imports(tmp_path):
    """A task reads Plex's listing in a thread (importing plexapi) while the queue adapter
    loads persist-queue: taking its modules out of ``sys.modules`` again must not trip
    over the other thread's imports ("dictionary changed size during iteration")."""
    done = subprocess.run([sys.executable, "-c", CHURN, str(REPO)], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]

"""Causes named right (issue 13): network failures told apart, a plex_url with a wrong
path caught at connect time, a full / read-only / forbidden disk told apart from a
corrupt file, a 0-byte ledger said, bugs of ours not retried.

End to end through the plugin process against the emulators where the cause can be
produced without privileges (a closed port, a ``.invalid`` name, a self-signed TLS
emulator, a reply cut mid-body, a file size limit); the rest at the classification
level with SQLite's real result codes.
"""

from __future__ import annotations

import errno
import random
import shutil
import socket
import sqlite3
import ssl
import subprocess
from pathlib import Path

import pytest

from core.errors import DataFileError, StashRefused, StashUnavailable, TransientError
from sync_queue.job import Job
from sync_queue.sqlite import data_file_error
from tests.conftest import PLEX_TOKEN
from tests.emulators.plex_emulator import PlexEmulator
from tests.runner import drainer_lock_held
from tests.test_reliability import status
from worker.settle import Action, decide


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        + ["-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    return cert, key


# -- 8. network errors told apart ---------------------------------------------------------
CAUSES = {
    "refused": "Plex refused the connection at 127.0.0.1:",
    "dns": "the host name in plex_url (plex-typo.invalid:32400) could not be resolved",
    "reset": "the connection to Plex broke mid-reply",
    "wrong_path": "plex_url must be the server's address only",
}


@pytest.mark.parametrize("cause", list(CAUSES))
def test_health_check_names_the_network_cause(plugin, cause):
    if cause == "refused":
        plugin.configure(plex_url=f"http://127.0.0.1:{_closed_port()}")
    elif cause == "dns":
        plugin.configure(plex_url="http://plex-typo.invalid:32400")
    elif cause == "reset":
        plugin.plex.cut_replies = True
    else:  # the address copied from the browser: Plex Web's page, not the server's root
        plugin.configure(plex_url=plugin.plex.url + "/web")
    run = plugin.task("health_check")
    assert run.error is None and run.output["ok"] is False, run.stderr[-2000:]
    problems = " | ".join(run.output["problems"])
    assert CAUSES[cause] in problems, problems
    assert "Traceback" not in run.stderr
    if cause == "dns":
        assert "refused" not in problems


def test_a_plex_url_with_a_wrong_path_stops_the_run_and_keeps_the_job(plugin):
    sid, _ = plugin.add_scene(1)
    plugin.configure(plex_url=plugin.plex.url + "/web")
    with drainer_lock_held(plugin.data_dir):
        assert plugin.hook(plugin.stash.update_scene(sid, title="Wrong path")).error is None
    run = plugin.task("process_queue")
    assert run.error and "setting plex_url" in run.error and "no /web" in run.error, run.error
    after = status(plugin)
    assert after["pending"] == 1 and after["dlq"] == 0 and after["retrying"] == 0, after


def test_a_self_signed_certificate_is_named_with_its_remedy(plugin, self_signed):
    cert, key = self_signed
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    with PlexEmulator(token=PLEX_TOKEN, tls=context) as tls_plex:
        tls_plex.add_section("Stash", ["/plex/media"], key=1)
        plugin.configure(plex_url=tls_plex.url)
        run = plugin.task("health_check")
        problems = " | ".join(run.output["problems"])
        assert "TLS certificate" in problems and "REQUESTS_CA_BUNDLE" in problems and "http://" in problems
        assert "refused" not in problems
        plugin.env["REQUESTS_CA_BUNDLE"] = str(cert)  # the remedy the message gives
        run = plugin.task("health_check")
        assert run.output["ok"] is True, run.output["problems"]

        # Over https the writes (the edit, the poster upload) go through plexapi's session,
        # with the certificate setting it has.
        sid = plugin.stash.add_scene(
            title="Over TLS", files=[{"path": "/stash/media/tls.mp4", "size": 1, "duration": 60.0}]
        )
        rk = tls_plex.add_item(1, "/plex/media/tls.mp4", size=1, duration_ms=60000)
        plugin.hook(plugin.stash.update_scene(sid, title="Written over TLS"))
        plugin.wait_drained()
        assert tls_plex.item(rk)["fields"]["title"] == "Written over TLS"
        assert [r["method"] for r in tls_plex.upload_requests()] == ["POST"]


# -- 9. a full or read-only disk is not a corrupt file -------------------------------------------
def test_a_full_disk_is_named_with_its_folder_and_the_queue_is_kept(plugin):
    sid, _ = plugin.add_scene(1)
    with drainer_lock_held(plugin.data_dir):
        assert plugin.hook(plugin.stash.update_scene(sid, title="Before")).error is None
        before = (plugin.data_dir / "queue" / "inbox.spool").read_bytes()
        # no file may grow past one byte: every write fails with EFBIG, like a full disk
        full = plugin.hook(plugin.stash.update_scene(sid, title="Disk full"), file_size_limit=1)
        assert full.returncode == 1 and full.error, full.stderr[-2000:]
        assert str(plugin.data_dir / "queue") in full.error and "is full" in full.error, full.error
        assert "move the file" not in full.error and "Traceback" not in full.stderr
        assert (plugin.data_dir / "queue" / "inbox.spool").read_bytes() == before
        assert status(plugin)["pending"] == 1  # the job queued before is still there


def test_an_empty_ledger_file_is_said(plugin):
    plugin.data_dir.mkdir(parents=True, exist_ok=True)
    (plugin.data_dir / "state.db").write_bytes(b"")
    run = plugin.task("queue_status")
    assert run.error is None
    assert any("state.db was empty (0 bytes" in m for m in run.messages("warning")), run.logs


def _readonly_error(tmp_path: Path) -> sqlite3.OperationalError:
    path = tmp_path / "x.db"
    sqlite3.connect(path).close()
    try:
        sqlite3.connect(f"file:{path}?mode=ro", uri=True).execute("CREATE TABLE t (a)")
    except sqlite3.OperationalError as exc:
        return exc
    raise AssertionError("a read-only connection wrote")


@pytest.mark.parametrize(
    "errno_, words",
    [
        (errno.EROFS, "is on a read-only file system"),
        (errno.EACCES, "permission denied in"),
        (errno.ENOSPC, "is full"),
        (None, "reported an error"),
    ],
)
def test_disk_errors_are_told_apart_from_corruption(tmp_path, errno_, words):
    path = tmp_path / "data" / "dlq.db"
    error = data_file_error(path, _readonly_error(tmp_path), probe=lambda folder: errno_)
    assert isinstance(error, DataFileError)
    text = str(error)
    assert text.startswith(f"cannot write {path}: ") and words in text and str(path.parent) in text, text
    assert "move the file" not in text and "not damaged" in text


def test_a_corrupt_file_still_gets_the_move_aside_advice(tmp_path):
    path = tmp_path / "bad.db"
    path.write_bytes(random.Random(1).randbytes(8192))
    try:
        sqlite3.connect(path).execute("SELECT * FROM sqlite_master").fetchall()
    except sqlite3.DatabaseError as exc:
        text = str(data_file_error(path, exc, probe=lambda folder: pytest.fail("no probe for corruption")))
    assert "move the file" in text and str(path) in text


# -- bugs of ours are bugs -------------------------------------------------------------------------
def test_a_type_error_from_our_code_is_a_bug_and_one_from_plexapi_an_unreadable_reply():
    from plexapi.utils import cast

    from plex.errors import translate

    try:
        cast(int, object())  # plexapi itself fails on an odd value: Plex's reply was odd
    except TypeError as exc:
        assert isinstance(translate(exc, "reading"), TransientError)
    try:
        len(None)  # our code (here: the test) has a bug
    except TypeError as exc:
        with pytest.raises(TypeError):
            translate(exc, "reading")


def test_routes_a_bug_to_the_dlq_and_stash_trouble_to_waiting():
    job, rng = Job(scene_id=7), random.Random(1)
    bug = decide(job, AttributeError("'NoneType' object has no attribute 'x'"), 100.0, rng)
    assert bug.action == Action.DLQ and "hit a bug" in bug.message and "traceback is in the log" in bug.message
    assert decide(job, StashUnavailable("down"), 100.0, rng).action == Action.WAIT_STASH
    assert decide(job, StashRefused("expired"), 100.0, rng).action == Action.HOLD


def test_a_read_only_folder_under_the_breaker_is_named_not_a_traceback(tmp_path):
    from worker.breaker import BreakerStore, CircuitBreaker

    class ReadOnlyStore(BreakerStore):
        def update(self, fn):
            raise OSError(errno.EROFS, "Read-only file system", str(self.path))

    breaker = CircuitBreaker(ReadOnlyStore(tmp_path / "breaker.json"))
    with pytest.raises(DataFileError) as caught:
        breaker.record_failure()
    text = str(caught.value)
    assert str(tmp_path) in text and "read-only file system" in text and "move the file" not in text

"""Everything that differs between Linux, macOS and Windows, in one place.

An exclusive file lock the OS releases when its holder dies (no stale lock after a
SIGKILL), starting a process fully detached from Stash (new session, no inherited stdio:
Stash reads our stdout to EOF), and lowering a background process's priority below
Stash's. Standard library only (``fcntl.flock``/``msvcrt.locking``, ``subprocess`` flags:
what ``filelock``/``psutil`` wrap), as the runtime dependency list is fixed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the hook's path)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path
    from typing import IO

# ``sys.platform`` (not ``os.name``) so the type checker knows which branch runs where.
IS_WINDOWS = sys.platform == "win32"


def _try_lock(handle: IO[bytes], blocking: bool, shared: bool = False) -> bool:
    """Exclusive lock, or (POSIX) a shared one: shared lookers never block each other."""
    if sys.platform == "win32":
        import msvcrt

        mode = msvcrt.LK_LOCK if blocking else msvcrt.LK_NBLCK
        try:
            handle.seek(0)
            msvcrt.locking(handle.fileno(), mode, 1)
        except OSError:
            return False
        return True
    import fcntl

    flags = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if blocking else fcntl.LOCK_NB)
    try:
        fcntl.flock(handle.fileno(), flags)
    except BlockingIOError:
        return False
    return True


def _unlock(handle: IO[bytes]) -> None:
    if sys.platform == "win32":
        import msvcrt

        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
        return
    import fcntl

    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` for the ``with`` block, waiting for it.

    The lock dies with the process, whatever kills it. Raises ``OSError`` when it
    cannot be taken (Windows' ``LK_LOCK`` gives up after ten one-second tries).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        if not _try_lock(handle, blocking=True):
            raise OSError(f"could not lock {path}")
        try:
            yield
        finally:
            _unlock(handle)


def retry_for(
    attempt: Callable[[], bool],
    patience: float,
    poll: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,  # or an Event's wait: set, it ends the wait early
) -> bool:
    """Call ``attempt`` until it returns True, every ``poll`` seconds for at most ``patience``
    seconds; False when it never did. A lock taken without waiting, tried again this way,
    goes to the first process that asks once it is free (a blocking lock may check only
    once a second, as Windows' ``LK_LOCK`` does)."""
    deadline = clock() + patience
    while not attempt():
        if clock() >= deadline:
            return False
        sleep(poll)
    return True


class HeldLock:
    """A lock held beyond one ``with`` block (the drainer keeps it for its life)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: IO[bytes] | None = None

    def acquire(self, patience: float = 0.0) -> bool:
        """Take the lock. ``patience`` seconds of retrying ride out the few milliseconds
        another process holds it to *look* (``is_locked``), so only a real holder wins."""
        if self._handle is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+b")
        if not retry_for(lambda: _try_lock(handle, blocking=False), patience, 0.02):
            handle.close()
            return False
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()).encode())
        handle.flush()
        self._handle = handle
        return True

    def release(self) -> None:
        if self._handle is None:
            return
        _unlock(self._handle)
        self._handle.close()
        self._handle = None


def is_locked(path: Path | str) -> bool:
    """True when another process holds the lock on ``path`` right now.

    Looks with a shared lock, so two processes looking at once never mistake each
    other for the holder (Windows has no shared mode; there a look is exclusive).
    """
    if not os.path.exists(path):
        return False
    with open(path, "a+b") as handle:
        if not _try_lock(handle, blocking=False, shared=True):
            return True
        _unlock(handle)
        return False


APPEND_LOCK_AT = 1 << 40  # Windows: the byte appenders lock (far past any end: never written)
APPEND_PATIENCE_S, APPEND_POLL_S = 2.0, 0.005  # Windows: how long an appender waits for its turn


def append(path: str, record: bytes) -> None:
    """Append ``record`` to ``path`` (created owner-only) in one write, so records of
    concurrent appenders never interleave, and never into a file :func:`take_aside` moved
    away: the appender holds a shared lock while it writes and writes only while ``path``
    is still the file it opened. POSIX: ``O_APPEND`` puts each write at the end
    atomically; Windows' C runtime seeks then writes, so there appenders take turns on a
    byte lock, tried every 5 ms for at most 2 s. OSError (a full disk; ``EBUSY``: the file
    stayed held) is raised; what a short write left is cut off by the next record's
    leading newline (readers skip what does not parse)."""
    for _ in range(100):  # a take moves the file at most once per drainer pass
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o600)
        try:
            if _append_locked(fd, path, record):
                return
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, path) from None  # which file the disk refused
        finally:
            os.close(fd)
    raise OSError(errno.EBUSY, "it kept being moved away", path)


def _append_locked(fd: int, path: str, record: bytes) -> bool:
    if sys.platform == "win32":
        import msvcrt

        def turn() -> bool:  # LK_LOCK would try once a second, and raise after ten
            os.lseek(fd, APPEND_LOCK_AT, os.SEEK_SET)
            try:
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            except OSError:
                return False
            return True

        if not retry_for(turn, APPEND_PATIENCE_S, APPEND_POLL_S):
            raise OSError(errno.EBUSY, "another process kept its turn to append", path)
        try:
            _write_all(fd, record)  # Windows refuses to move an open file: it is still ``path``
        finally:
            os.lseek(fd, APPEND_LOCK_AT, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        return True
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_SH)  # a take waits for this write (take_aside)
    try:
        opened, now = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    if (opened.st_dev, opened.st_ino) != (now.st_dev, now.st_ino):
        return False  # taken aside between our open and our lock: append to the new file
    _write_all(fd, record)
    return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def take_aside(path: str, taken: str) -> bool:
    """Move ``path`` to ``taken`` so that no appender (:func:`append`) writes to it any
    more, and wait for the ones writing now; False when there was nothing to move (or,
    on Windows, an appender has it open: the next take moves it)."""
    if not _unless_held(os.replace, path, taken):
        return False
    if sys.platform != "win32":
        import fcntl

        with open(taken, "rb") as handle:  # appenders that locked before the move finish first
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return True


def write_whole(path: str, text: str, publish: Callable[[str, str], None] = os.replace) -> None:
    """Write the file ``path`` whole or not at all: ``text`` goes to a temp file beside it
    (the same folder, so the move is atomic), on disk before ``publish`` moves it in; the
    temp file never stays. ``os.replace``: a reader sees the old file or the new, never half
    of one; ``os.link``: ``path`` is made only when absent (FileExistsError otherwise). On
    Windows a replace raises PermissionError while another process has ``path`` open (it
    moves no file open without delete sharing): the caller's OSError, as a full disk is."""
    import _thread

    temp = f"{path}.{os.getpid()}.{_thread.get_ident()}.tmp"
    try:
        with open(temp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        publish(temp, path)
    finally:
        with contextlib.suppress(OSError):
            os.remove(temp)


def discard(path: str) -> bool:
    """Delete ``path``; False when it is gone already or (Windows) another process has it
    open, a reader: it stays for the next try."""
    return _unless_held(os.remove, path)


def _unless_held(change: Callable[..., None], *paths: str) -> bool:
    """Move or delete a file; False when it is gone, or on Windows when another process has
    it open (Windows moves and deletes no file open without delete sharing, which Python's
    ``open`` and ``os.open`` do not ask for)."""
    try:
        change(*paths)
    except FileNotFoundError:
        return False
    except PermissionError:
        if IS_WINDOWS:
            return False
        raise
    return True


def spawn_detached(argv: Sequence[str], stdin_data: bytes, log_path: Path) -> int:
    """Start ``argv`` detached from us and from Stash; return its pid at once.

    ``stdin_data`` is written to the child's stdin pipe (it carries the Stash
    connection, which must never appear on a command line). Its stdout and stderr
    go to ``log_path``. We never wait for the child.
    """
    import subprocess  # not at import time: the hook needs it only when no drainer runs

    log_path.parent.mkdir(parents=True, exist_ok=True)
    kwargs: dict = {"close_fds": True}
    if sys.platform == "win32":
        flags = subprocess.CREATE_NEW_PROCESS_GROUP | subprocess.DETACHED_PROCESS
        kwargs["creationflags"] = flags | subprocess.CREATE_NO_WINDOW
    else:
        kwargs["start_new_session"] = True
    # owner-only: the log holds error texts (secrets are redacted, paths and titles are not)
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with open(fd, "ab") as log:
        child = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=log, stderr=log, **kwargs)
    assert child.stdin is not None
    try:
        child.stdin.write(stdin_data)
    finally:
        child.stdin.close()
    return child.pid


BACKGROUND_NICENESS = 10


def lower_priority() -> None:
    """Run this process below normal priority: the drainer works in the background, and a
    hook (which Stash waits for inside the user's save) or Stash itself gets the CPU first.
    Best effort: a system that refuses leaves the priority as it is."""
    try:
        if IS_WINDOWS:
            import ctypes

            below_normal = 0x00004000  # BELOW_NORMAL_PRIORITY_CLASS
            kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
            kernel32.SetPriorityClass(kernel32.GetCurrentProcess(), below_normal)
        else:
            os.nice(BACKGROUND_NICENESS)
    except (OSError, AttributeError):
        pass


def shell_command(argv: Sequence[str]) -> str:
    """``argv`` as one line to paste into this OS's shell (cmd.exe quoting on Windows)."""
    if IS_WINDOWS:
        import subprocess

        return subprocess.list2cmdline(list(argv))
    import shlex

    return shlex.join(argv)

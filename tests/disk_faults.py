"""The plugin's own machine misbehaving, for end-to-end tests: every SQLite file of a data
folder held by another process (as a backup tool, a ``sqlite3`` shell or an antivirus
holds one), and a file-size limit raised again (a full disk that got space back)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

# Another process: SQLite's locks are per process (POSIX fcntl locks), so a connection in
# the test's own process would not show the plugin what a backup tool does.
_HOLDER = r"""
import sqlite3, sys, time
conns = []
for path in sys.argv[2:]:
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    conns.append(conn)
print("held", flush=True)
time.sleep(float(sys.argv[1]))
for conn in conns:
    conn.execute("ROLLBACK")
print("let go", flush=True)
"""


def sqlite_files(data_dir: Path) -> list[Path]:
    return sorted(p for p in data_dir.rglob("*.db") if p.is_file())


class HeldFiles:
    """Every SQLite file of ``data_dir`` held in an exclusive transaction for ``seconds``."""

    def __init__(self, data_dir: Path, seconds: float) -> None:
        self.files = sqlite_files(data_dir)
        assert self.files, f"no SQLite file in {data_dir}"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, str(seconds), *map(str, self.files)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "held"
        self.released_at: float | None = None

    def wait_released(self, timeout: float) -> float:
        """Block until the holder lets go; when (``time.monotonic``)."""
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "let go"
        self.proc.wait(timeout)
        self.released_at = time.monotonic()
        return self.released_at

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@contextlib.contextmanager
def held(data_dir: Path, seconds: float) -> Iterator[HeldFiles]:
    holder = HeldFiles(data_dir, seconds)
    try:
        yield holder
    finally:
        holder.close()


def raise_file_size_limit(pid: int) -> None:
    """Give a process its space back: lift its file-size limit (Linux ``prlimit``; its
    hard limit was left unlimited)."""
    import resource

    resource.prlimit(pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

"""The pytest side of ``tests/forkserver.py``: which runs may be forked, and a forked run
with the part of ``subprocess.Popen``'s interface ``tests/runner.py`` uses."""

from __future__ import annotations

import atexit
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import BinaryIO

from tests.forkserver import read_message, send_message

SERVER = Path(__file__).with_name("forkserver.py")


def _shapes_interpreter_start(key: str) -> bool:
    """Variables read when Python or an imported package starts, which a fork of an
    interpreter started without them cannot honour."""
    return (
        (key.startswith("PYTHON") and key != "PYTHONPATH")
        or key.startswith(("LC_", "PLEXAPI_"))
        or key in {"LANG", "LANGUAGE", "HOME", "XDG_CONFIG_HOME"}
    )


class ForkedRun:
    """One plugin run forked by the server: pipes, pid, kill and wait."""

    def __init__(self, conn: socket.socket, stdin: BinaryIO, stdout: BinaryIO, stderr: BinaryIO) -> None:
        self._conn = conn
        self._replies = conn.makefile("rb")
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        started = read_message(self._replies)
        if started is None:
            raise RuntimeError("the fork server did not start the plugin run")
        self.pid: int = started["pid"]
        self.returncode: int | None = None
        self.cpu: float | None = None  # user + system seconds of the run, once it ended

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def poll(self) -> int | None:
        """The exit status once the server has said the run ended, else None (not blocking)."""
        if self.returncode is None and select.select([self._conn], [], [], 0)[0]:
            self.wait()
        return self.returncode

    def wait(self) -> tuple[int, int | None]:
        if self._conn.fileno() < 0:  # already reaped by poll()
            return self.returncode, None  # type: ignore[return-value]
        ended = read_message(self._replies)
        self._replies.close()
        self._conn.close()
        if ended is None:
            raise RuntimeError("the fork server ended the connection without the plugin's exit status")
        self.returncode = ended["returncode"]
        self.cpu = ended.get("cpu")
        return ended["returncode"], ended["maxrss"]


class ForkServer:
    """One server per pytest process, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._proc: subprocess.Popen | None = None
        self._path = ""
        self.env: dict[str, str] = {}

    def possible(self, argv: list[str], env: dict[str, str]) -> bool:
        if os.environ.get("S2P_TEST_FRESH_PROCESSES") or not sys.platform.startswith("linux"):
            # Linux only: macOS forbids much after fork() once system frameworks are loaded
            # (proxy lookup goes through them), and Windows has no fork.
            return False
        if env.get("S2P_TEST_FRESH_PROCESSES"):
            return False
        script = argv[2:3] if argv[1:2] == ["-S"] else argv[1:2]
        if len(argv) < 2 or argv[0] != sys.executable or not script or script[0].startswith("-"):
            return False
        base = self.env or os.environ
        return not any(env.get(key) != base.get(key) and _shapes_interpreter_start(key) for key in set(env) | set(base))

    def start(self, argv: list[str], env: dict[str, str], file_size_limit: int | None) -> ForkedRun:
        path = self._running()
        # "-S" (no site, Stash2Plex.yml): the server imported site already; the child runs
        # as a Python with site, which app/bootstrap.py treats as site turned on.
        argv = [argv[0], *argv[2:]] if argv[1:2] == ["-S"] else argv
        pipes = [os.pipe() for _ in range(3)]
        child_ends = [pipes[0][0], pipes[1][1], pipes[2][1]]
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(path)
            request = {"argv": argv, "env": env, "cwd": os.getcwd(), "file_size_limit": file_size_limit}
            send_message(conn, request, child_ends)
        except BaseException:
            conn.close()
            for r, w in pipes:
                os.close(r)
                os.close(w)
            raise
        for fd in child_ends:
            os.close(fd)
        stdin = os.fdopen(pipes[0][1], "wb")
        return ForkedRun(conn, stdin, os.fdopen(pipes[1][0], "rb"), os.fdopen(pipes[2][0], "rb"))

    def _running(self) -> str:
        with self._lock:
            if self._owner != os.getpid() or self._proc is None or self._proc.poll() is not None:
                self._launch()
            return self._path

    def _launch(self) -> None:
        folder = tempfile.mkdtemp(prefix="s2p-fork-")
        self._path = os.path.join(folder, "socket")
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        # Pipes on all three fds, as Stash gives the plugin: a child keeps these very
        # stream objects (their buffering and seekability) on the run's own pipes.
        self._proc = subprocess.Popen(
            [sys.executable, str(SERVER), self._path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
            cwd=folder,
        )
        errors: list[bytes] = []
        threading.Thread(target=lambda: errors.extend(iter(self._proc.stderr.readline, b"")), daemon=True).start()
        ready, _, _ = select.select([self._proc.stdout], [], [], 60)
        if not ready or self._proc.stdout.readline() != b"ready\n":
            self._proc.kill()
            self._proc.wait()
            raise RuntimeError(
                "the test fork server did not start:\n" + b"".join(errors)[-2000:].decode(errors="replace")
            )
        self._owner = os.getpid()
        atexit.register(self._stop, self._proc)

    @staticmethod
    def _stop(proc: subprocess.Popen) -> None:
        if proc.stdin:
            proc.stdin.close()  # the server exits at the end of its stdin
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


FORK_SERVER = ForkServer()

"""Runs the plugin exactly as Stash does, for end-to-end tests and benchmarks.

Reads Stash2Plex.yml, builds argv from ``exec`` (+ a task's ``execArgs``) with
``{pluginDir}`` substituted in every element after the first, swaps ``python`` for
the running interpreter, appends the plugins folder to PYTHONPATH, writes the stdin
JSON, closes stdin, reads stdout to EOF (so a child that inherited our stdout would
hang the call, as it would hang Stash) and decodes the stderr log protocol. The process
is forked from a pre-started interpreter (``tests/forkserver.py``) where a fork behaves
as a new interpreter would, and started anew otherwise (``S2P_TEST_FRESH_PROCESSES=1``:
always).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.forkserver_client import FORK_SERVER, ForkedRun

REPO = Path(__file__).resolve().parent.parent
LEVELS = {"t": "trace", "d": "debug", "i": "info", "w": "warning", "e": "error"}


@dataclass
class PluginRun:
    reply: dict[str, Any]
    logs: list[tuple[str, str]]
    progress: list[float]
    returncode: int
    wall: float
    stdout: str
    stderr: str = ""
    peak_rss_kb: int | None = None  # the plugin process's own peak RSS (POSIX)
    raw_lines: list[str] = field(default_factory=list)

    @property
    def output(self) -> Any:
        return self.reply.get("output")

    @property
    def error(self) -> str | None:
        return self.reply.get("error")

    def messages(self, level: str | None = None) -> list[str]:
        return [m for lvl, m in self.logs if level is None or lvl == level]


def compile_plugin(plugin_dir: Path = REPO) -> None:
    """Write the plugin's bytecode before the plugin runs as many processes, as its first
    run in a real install does. With ``PYTHONDONTWRITEBYTECODE`` set (as on these machines)
    every plugin process would otherwise compile the modules changed since their last
    bytecode again (about 60 ms of CPU for all of them)."""
    import compileall

    for package in plugin_dir.glob("*/__init__.py"):
        if package.parent.name != "tests":
            compileall.compile_dir(package.parent, quiet=1)


def plugin_config(plugin_dir: Path = REPO) -> dict[str, Any]:
    """The plugin's Stash2Plex.yml (parsed once per version of the file: PyYAML's pure-Python
    parser took about 15 ms a run, and the suite runs the plugin hundreds of times)."""
    path = plugin_dir / "Stash2Plex.yml"
    stat = path.stat()
    return copy.deepcopy(_parsed_yml(path, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=16)
def _parsed_yml(path: Path, _mtime_ns: int, _size: int) -> dict[str, Any]:
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def build_argv(plugin_dir: Path = REPO, exec_args: list[str] | None = None, python: str | None = None) -> list[str]:
    """``python`` is the interpreter Stash would resolve (default: the one running the tests)."""
    config = plugin_config(plugin_dir)
    argv = list(config["exec"]) + list(exec_args or [])
    argv = [argv[0]] + [a.replace("{pluginDir}", str(plugin_dir)) for a in argv[1:]]
    if argv[0] in ("python", "python3"):
        argv[0] = python or sys.executable
    return argv


def decode_stderr(text: str, err_level: str = "error") -> tuple[list[tuple[str, str]], list[float]]:
    logs, progress = [], []
    for line in text.splitlines():
        if not line.strip():
            continue
        if len(line) >= 4 and line[0] == "\x01" and line[2] == "\x02" and line[1] in "tdiwep":
            message = line[3:].strip()
            if line[1] == "p":
                progress.append(float(message))
            else:
                logs.append((LEVELS[line[1]], message))
        else:
            logs.append((err_level, line))
    return logs, progress


def parse_reply(stdout: str, returncode: int) -> dict[str, Any]:
    try:
        reply = json.loads(stdout)
        if isinstance(reply, dict) and set(reply) <= {"output", "error"}:
            reply = {"output": reply.get("output"), "error": reply.get("error")}
        else:
            reply = {"output": stdout, "error": None}
    except ValueError:
        reply = {"output": stdout, "error": None}
    if returncode != 0 and not reply["error"]:
        reply["error"] = f"exit status {returncode}"
    return reply


def run_plugin(
    document: dict | str | bytes,
    env: dict[str, str] | None = None,
    plugin_dir: Path = REPO,
    timeout: float = 300.0,
    exec_args: list[str] | None = None,
    python: str | None = None,
    file_size_limit: int | None = None,
) -> PluginRun:
    """``file_size_limit`` (POSIX): no file the plugin writes may grow past that many bytes
    (RLIMIT_FSIZE; writes past it fail with EFBIG): a full disk, without root or a tmpfs."""
    data = (
        document
        if isinstance(document, bytes)
        else (document if isinstance(document, str) else json.dumps(document)).encode()
    )
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in (full_env.get("PYTHONPATH"), str(plugin_dir.parent)) if p)
    argv = build_argv(plugin_dir, exec_args, python)
    started = time.perf_counter()
    proc = _start(argv, full_env, file_size_limit)
    out, err = _communicate(proc, data, timeout)
    returncode, peak = _reap(proc)
    wall = time.perf_counter() - started
    stdout = out.decode("utf-8", "replace")
    stderr = err.decode("utf-8", "replace")
    logs, progress = decode_stderr(stderr)
    return PluginRun(parse_reply(stdout, returncode), logs, progress, returncode, wall, stdout, stderr, peak)


class StartedRun:
    """A plugin run started and not waited for (a test kills or signals it): ``poll``,
    ``kill``, ``send_signal``, ``wait``; its stderr goes to ``stderr_path``."""

    def __init__(self, proc: Any, data: bytes, stderr_path: Path, stdout_path: Path | None = None) -> None:
        self.proc, self.pid = proc, proc.pid
        self.returncode: int | None = None
        # unbuffered: tests read the log while the run goes on; both closed by wait()
        self._sinks = [open(stdout_path or os.devnull, "ab", buffering=0), open(stderr_path, "ab", buffering=0)]  # noqa: SIM115
        out, err = self._sinks
        self._drains = _feed(proc, data, lambda s: _copy(s, out), lambda s: _copy(s, err))

    def poll(self) -> int | None:
        if self.returncode is None and self.proc.poll() is not None:
            self.wait()
        return self.returncode

    def kill(self) -> None:
        self.proc.kill()

    def send_signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)

    def wait(self, timeout: float | None = None) -> int:
        """The exit status; ``subprocess.TimeoutExpired`` when the run outlives ``timeout``."""
        if self.returncode is not None:
            return self.returncode
        deadline = None if timeout is None else time.monotonic() + timeout
        while isinstance(self.proc, ForkedRun) and deadline is not None and self.proc.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0)
            time.sleep(0.02)
        returncode = self.proc.wait()[0] if isinstance(self.proc, ForkedRun) else self.proc.wait(timeout)
        for drain in self._drains:
            drain.join(10)
        for sink in self._sinks:
            sink.close()
        self.returncode = returncode
        return returncode


def _copy(stream: Any, sink: Any) -> None:
    for chunk in iter(lambda: stream.read1(65536), b""):
        sink.write(chunk)
    stream.close()


def start_plugin(document: dict, env: dict[str, str], stderr_path: Path, plugin_dir: Path = REPO) -> StartedRun:
    """Start a run as :func:`run_plugin` does (forked where it may be), without waiting for it."""
    full_env = {**os.environ, **env}
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in (full_env.get("PYTHONPATH"), str(plugin_dir.parent)) if p)
    return StartedRun(_start(build_argv(plugin_dir), full_env), json.dumps(document).encode(), stderr_path)


def start_command(
    args: list[str], env: dict[str, str], stderr_path: Path, stdout_path: Path | None = None
) -> StartedRun:
    """``python Stash2Plex.py <args>`` as a user starts it (stdin at its end), not waited for."""
    proc = _start([sys.executable, str(REPO / "Stash2Plex.py"), *args], {**os.environ, **env})
    return StartedRun(proc, b"", stderr_path, stdout_path)


def run_command(argv: list[str], env: dict[str, str], timeout: float) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``argv`` (``python Stash2Plex.py <command> ...``, as a
    user types it) with stdin at its end (:func:`_start` decides how it starts)."""
    proc = _start(argv, env)
    out, err = _communicate(proc, b"", timeout)
    returncode, _ = _reap(proc)
    return returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def _start(argv: list[str], env: dict[str, str], file_size_limit: int | None = None) -> Any:
    """The process of ``argv`` with pipes on fds 0-2: forked from the fork server where a
    fork behaves as a new interpreter would, started anew otherwise."""
    if FORK_SERVER.possible(argv, env):
        return FORK_SERVER.start(argv, env, file_size_limit)
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=None if file_size_limit is None else _limit_file_size(file_size_limit),
    )


def _limit_file_size(limit: int):
    def apply() -> None:
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of being killed (kept across exec)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))  # raised again: space back

    return apply


def _communicate(proc: Any, data: bytes, timeout: float) -> tuple[bytes, bytes]:
    """Write stdin, close it, read stdout and stderr to EOF (as Stash does), without reaping."""
    chunks: dict[str, bytes] = {}
    readers = _feed(
        proc, data, lambda s: chunks.__setitem__("out", s.read()), lambda s: chunks.__setitem__("err", s.read())
    )
    for reader in readers:
        reader.join(timeout)
        if reader.is_alive():
            proc.kill()
            raise TimeoutError(f"the plugin did not close its output within {timeout} s")
    return chunks.get("out", b""), chunks.get("err", b"")


def _feed(proc: Any, data: bytes, read_out: Any, read_err: Any) -> list[threading.Thread]:
    """Threads reading the run's stdout and stderr (``read_out(stream)``, ``read_err(stream)``)
    are started, then ``data`` is written to its stdin and stdin closed, as Stash does."""
    readers = [
        threading.Thread(target=read, args=(stream,), daemon=True)
        for read, stream in ((read_out, proc.stdout), (read_err, proc.stderr))
    ]
    for reader in readers:
        reader.start()
    try:
        proc.stdin.write(data)
    except BrokenPipeError:
        pass
    proc.stdin.close()
    return readers


def _reap(proc: Any) -> tuple[int, int | None]:
    if isinstance(proc, ForkedRun):
        return proc.wait()
    if hasattr(os, "wait4"):
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        return proc.returncode, usage.ru_maxrss
    return proc.wait(), None


def hook_document(connection: dict, hook_context: dict) -> dict:
    return {"server_connection": connection, "args": {"hookContext": hook_context}}


def task_document(connection: dict, mode: str, **extra: str) -> dict:
    return {"server_connection": connection, "args": {"mode": mode, **extra}}


def create_context(scene_id: int) -> dict:
    """The hookContext of a scene created by a scan (input is null)."""
    return {"id": scene_id, "type": "Scene.Create.Post", "input": None}


def kill_lock_holder(lock: Path) -> bool:
    """SIGKILL the process whose pid is in ``lock``; False when it names none. A blank or
    half-written file must never become ``os.kill(0)``: that signals our whole process
    group (pytest, and the shell that started it)."""
    import signal

    try:
        pid = int(Path(lock).read_text().strip())
    except (OSError, ValueError):
        return False
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


@contextlib.contextmanager
def drainer_lock_held(data_dir: Path):
    """Pretend a drainer runs: hooks then only enqueue, and queued jobs stay visible.

    The lock is an OS lock on ``<data_dir>/drainer.lock`` (the plugin's own primitive);
    the pid is blanked before release so no cleanup ever signals the test process.
    """
    from core.platform import HeldLock

    lock = HeldLock(Path(data_dir) / "drainer.lock")
    assert lock.acquire(), "a drainer is running"
    try:
        yield lock
    finally:
        lock.path.write_text("")
        lock.release()

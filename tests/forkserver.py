"""A fork server for the test suite's plugin runs: the same plugin process, without paying
for a new interpreter and its third-party imports on every run.

The suite starts the plugin about 800 times. On these machines a bare ``python -c pass``
costs about 50 ms of CPU (``site`` alone 40 ms), and importing plexapi, stashapi, pydantic
and requests another 250 ms: more than half of the suite's CPU went into starting the
same interpreter again. This server (one per pytest process) starts once, imports the
standard library and the third-party packages the plugin uses, and then forks one child
per plugin run. The child becomes exactly what ``python Stash2Plex.py`` would be:

- fds 0/1/2 are the pipes the test made (the same text streams, encodings and buffering
  a Python started with pipes has: the server itself was started with pipes);
- ``os.environ``, ``sys.argv``, ``sys.path`` (script folder, ``PYTHONPATH``, then the
  interpreter's own path), the working directory and the file-size limit are the run's;
- the script runs as ``__main__`` (``runpy.run_path``), and the child ends as the
  interpreter ends a program (non-daemon threads joined, ``atexit`` handlers, streams
  flushed), with the script's exit status, but without the module teardown that follows
  (``_run_as_main``: in a fork it copied most of the server's memory, page by page).

The plugin's own modules are imported too (they do nothing at import time), and removed
again in a child that runs another copy of the plugin; a fork is a copy, so nothing one
run changes reaches the next. persist-queue is loaded the way the plugin loads it
(``sync_queue/pq_insides.py`` ``load``: its three modules, without the package's
``__init__``, kept by that module and out of ``sys.modules``), so a child has what a new
interpreter has after its first ``load()``, and ``import persistqueue`` still loads the
whole package afresh; a run of another copy gets its own. What a fork
cannot reproduce is left to real processes (``tests/runner.py`` decides): another
interpreter, an environment that changes how Python or an imported package starts
(``PYTHON*``, locale, ``HOME``, ``PLEXAPI_*``), systems other than Linux, and
``S2P_TEST_FRESH_PROCESSES=1`` (every run a new interpreter, for a slower, fuller check).
The drainer a forked run starts is forked by the server too (``_fork_drainers_too``), in a
session of its own; the server, its parent, reaps it (a real one is reparented to init).
Every other process the plugin starts is a real one.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import sys
from pathlib import Path

HEADER = struct.Struct("!I")
REPO = Path(__file__).resolve().parent.parent
PREIMPORT = (
    "argparse asyncio base64 concurrent.futures contextlib dataclasses datetime email.utils enum "
    "functools hashlib heapq http.client io json logging logging.handlers pathlib random re "
    "shlex sqlite3 subprocess tempfile threading time traceback typing urllib.parse uuid "
    "xml.etree.ElementTree zlib "
    "requests urllib3 tenacity pydantic plexapi plexapi.server plexapi.video plexapi.library "
    "stashapi.stashapp stashapi.log pydantic.main pydantic.fields pydantic.types pydantic.dataclasses "
    "pydantic.functional_validators pydantic_core concurrent.futures.thread netrc secrets"
).split()


def send_message(conn: socket.socket, message: dict, fds: tuple[int, ...] | list[int] = ()) -> None:
    data = json.dumps(message).encode()
    payload = HEADER.pack(len(data)) + data
    if fds:
        socket.send_fds(conn, [payload], list(fds))
    else:
        conn.sendall(payload)


def receive_request(conn: socket.socket) -> tuple[dict | None, list[int]]:
    """The one message a client sends, with its three fds (the client then waits)."""
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
    if not data:
        return None, fds
    while len(data) < HEADER.size or len(data) < HEADER.size + HEADER.unpack_from(data)[0]:
        chunk = conn.recv(1 << 16)
        if not chunk:
            raise EOFError("the client closed the connection mid-message")
        data += chunk
    return json.loads(data[HEADER.size :]), fds


def read_message(stream) -> dict | None:
    """One message from a buffered binary stream (the client's side); None at its end."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    return json.loads(stream.read(HEADER.unpack(head)[0]))


def _preimport() -> None:
    import importlib

    for name in PREIMPORT:
        try:
            importlib.import_module(name)
        except ImportError:  # a package the tests' environment lacks: the child imports it (and fails) itself
            pass


def _plugin_packages() -> list[str]:
    return sorted(p.name for p in REPO.iterdir() if (p / "__init__.py").is_file() and p.name not in ("tests", "deps"))


def _preimport_plugin() -> None:
    """The plugin's own modules too, for runs of this checkout's ``Stash2Plex.py`` (they
    have nothing to do at import time, so a fork of them is what a new import would be).
    A run of another copy of the plugin gets them removed first (``_forget_plugin``)."""
    import importlib
    import pkgutil

    sys.path.insert(0, str(REPO))
    try:
        for name in _plugin_packages():
            package = importlib.import_module(name)
            for module in pkgutil.walk_packages(package.__path__, name + "."):
                importlib.import_module(module.name)
        importlib.import_module("sync_queue.pq_insides").load()  # what a run's first queue does
    finally:
        sys.path.remove(str(REPO))


def _forget_plugin() -> None:
    packages = set(_plugin_packages())
    for name in [n for n in sys.modules if n.split(".")[0] in packages]:
        del sys.modules[name]


def _serve(path: str, base_path: list[str]) -> dict:
    """Fork one plugin process per request until our stdin closes (the pytest process is
    gone); returns only in a plugin process, with its run's request.

    The server forks the run itself and tells its client when it ends (a pidfd per run in
    the same ``select``): a handler process per run between them cost a second fork of
    this interpreter and its exit (docs/architecture.md has the figures)."""
    import gc

    gc.freeze()  # what was imported stays out of the children's collections: fewer copied pages
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    runs: dict[int, tuple[int, socket.socket | None]] = {}  # pidfd: the run's pid, its client
    os.write(1, b"ready\n")
    while True:
        readable, _, _ = select.select([listener, 0, *runs], [], [])
        if 0 in readable and not os.read(0, 1 << 10):
            os._exit(0)
        for pidfd in [fd for fd in readable if fd in runs]:
            _ended(pidfd, *runs.pop(pidfd))
        if listener not in readable:
            continue
        conn, _ = listener.accept()
        request = _start(conn, path, runs)
        if request is not None:
            listener.close()
            _become(request[0], request[1], base_path)
            return request[0]


def _start(conn: socket.socket, server: str, runs: dict[int, tuple[int, socket.socket | None]]):
    """Receive one run's request and fork it; in the plugin process, (request, fds)."""
    conn.settimeout(30)  # a client sends its request as it connects: never hang the server on one
    try:
        request, fds = receive_request(conn)
    except (OSError, EOFError, ValueError):
        conn.close()
        return None
    conn.settimeout(None)
    if request is None:
        for fd in fds:
            os.close(fd)
        conn.close()
        return None
    request["server"] = server
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        for pidfd, (_, other) in runs.items():
            os.close(pidfd)
            if other is not None:
                other.close()
        conn.close()
        return request, fds
    for fd in fds:
        os.close(fd)
    try:
        send_message(conn, {"pid": pid})
    except OSError:
        pass  # the client is gone: the run still ends, and is reaped, as any other
    if request.get("detached"):
        conn.close()  # nobody waits for a detached drainer; the server reaps it when it ends
        runs[os.pidfd_open(pid)] = (pid, None)
    else:
        runs[os.pidfd_open(pid)] = (pid, conn)
    return None


def _ended(pidfd: int, pid: int, conn: socket.socket | None) -> None:
    """Reap a run that ended and tell its client how (exit status, peak RSS, CPU)."""
    os.close(pidfd)
    _, status, usage = os.wait4(pid, 0)
    if conn is None:
        return
    cpu = usage.ru_utime + usage.ru_stime  # the run's own CPU (tests/bench/start_cost.py)
    try:
        send_message(conn, {"returncode": os.waitstatus_to_exitcode(status), "maxrss": usage.ru_maxrss, "cpu": cpu})
    except OSError:
        pass
    conn.close()


def _become(request: dict, fds: list[int], base_path: list[str]) -> None:
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    if request.get("detached"):
        os.setsid()  # what spawn_detached's start_new_session does
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    import time

    time.tzset()
    limit = request.get("file_size_limit")
    if limit is not None:
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))  # raised again: space back
    script = request["argv"][1]
    sys.argv[:] = request["argv"][1:]
    extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    folder = os.path.dirname(os.path.realpath(script))
    sys.path[:] = [folder, *extra, *base_path]
    if folder != str(REPO.resolve()):
        _forget_plugin()  # another copy of the plugin: its modules, not this checkout's
    _fork_drainers_too(request["server"], script)


def _fork_drainers_too(server: str, script: str) -> None:
    """The drainer a run starts (``core/platform.py`` ``spawn_detached``: ``Popen([python,
    script, "drain"], start_new_session=True)``) is forked by the server as well, detached
    the same way (its own session, stdin a pipe, stdout/stderr the log, the same
    environment, folder and file-size limit); any other process is started for real."""
    import resource
    import subprocess

    real = subprocess.Popen

    def popen(args, *a, **kw):
        args_list = [str(x) for x in args] if isinstance(args, (list, tuple)) else []
        drain = (
            len(args_list) == 3
            and args_list[0] == sys.executable
            and os.path.realpath(args_list[1]) == os.path.realpath(script)
            and args_list[2] == "drain"
        )
        if not drain or a:
            return real(args, *a, **kw)
        if not kw.get("start_new_session") or kw.get("stdin") != subprocess.PIPE:
            return real(args, *a, **kw)
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        return _DetachedFork(server, args_list, kw["stdout"].fileno(), kw["stderr"].fileno(), limit)

    subprocess.Popen = popen  # type: ignore[misc]


class _DetachedFork:
    """What ``spawn_detached`` uses of the ``Popen`` it gets: ``stdin`` and ``pid``."""

    def __init__(self, server: str, argv: list[str], out_fd: int, err_fd: int, limit: int) -> None:
        import resource

        read_end, write_end = os.pipe()
        request = {
            "argv": argv,
            "env": dict(os.environ),
            "cwd": os.getcwd(),
            "detached": True,
            "file_size_limit": None if limit == resource.RLIM_INFINITY else limit,
        }
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(server)
            send_message(conn, request, [read_end, out_fd, err_fd])
            os.close(read_end)
            with conn.makefile("rb") as replies:
                started = read_message(replies)
        if started is None:
            os.close(write_end)
            raise OSError("the test fork server did not start the drainer")
        self.pid = started["pid"]
        self.stdin = os.fdopen(write_end, "wb")


def main() -> None:
    base_path = sys.path[1:]  # without this file's folder: a real run has the script's there
    _preimport()
    _preimport_plugin()
    request = _serve(sys.argv[1], base_path)
    _run_as_main(request["argv"][1])


def _run_as_main(script: str) -> None:
    """Run the script as ``__main__`` and end as the interpreter ends a program (its exit
    status, an uncaught exception's traceback, non-daemon threads joined, ``atexit``
    handlers run, the standard streams flushed), without the module teardown after that:
    in a fork it writes reference counts on nearly every page shared with the server,
    about 30 ms of copying a run, and a plugin run's work is done and flushed by then."""
    import atexit
    import runpy
    import threading

    try:
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = _exit_status(exc.code)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # what Py_FinalizeEx does first
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _exit_status(code: object) -> int:
    """The status ``sys.exit(code)`` ends a program with (its message printed)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    main()

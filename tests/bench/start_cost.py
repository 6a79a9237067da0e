"""The CPU of the plugin's own processes for one scene edit, start to exit: the hook that
queues it and starts the drainer, a hook while a drainer runs (it only queues), the
drainer writing one job to Plex (``STASH2PLEX_DRAINER_LINGER_S=0``, as in the suite) and a
``process_queue`` task writing one job. Each is measured as a new interpreter (as Stash
starts it) and forked from the suite's fork server (tests/forkserver.py), beside a trivial
plugin started the same two ways, in the same run; medians of the rounds. CPU is the
process's own user + system time from ``wait4`` (the fork server reports its runs'). The
drainer is started here as the hook starts it (``Stash2Plex.py drain``, the connection on
stdin), so that it is waited for. Linux only.

    python tests/bench/start_cost.py [rounds]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from core.platform import HeldLock, is_locked  # noqa: E402
from tests.emulators.plex_emulator import PlexEmulator  # noqa: E402
from tests.emulators.stash_emulator import StashEmulator  # noqa: E402
from tests.forkserver_client import ForkedRun  # noqa: E402
from tests.runner import _communicate, _start, build_argv, compile_plugin, hook_document, task_document  # noqa: E402

TRIVIAL = 'import sys; sys.stdin.read(); print(\'{"output": "ok"}\')\n'


def _cpu_of(argv: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, str, str]:
    """(CPU seconds, stdout, stderr) of one run, started as tests/runner.py starts it."""
    proc = _start(argv, env)
    out, err = _communicate(proc, stdin, 120)
    if isinstance(proc, ForkedRun):
        proc.wait()
        cpu = proc.cpu or 0.0
    else:
        _, _, usage = os.wait4(proc.pid, 0)
        cpu = usage.ru_utime + usage.ru_stime
    return cpu, out.decode(), err.decode()


def _settled(data_dir: Path, timeout: float = 60.0) -> None:
    """Wait until no drainer runs and nothing is queued (the drainer a hook started is done)."""
    from sync_queue import spool
    from sync_queue.queue import JobQueue

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_locked(data_dir / "drainer.lock") and not spool.holds_work(str(data_dir / "queue")):
            queue = JobQueue(data_dir / "queue")
            left = queue.pending()
            queue.close()
            if left == 0 and not is_locked(data_dir / "drainer.lock"):
                return
        time.sleep(0.02)
    raise TimeoutError("the drainer a hook started did not finish")


def one_scene() -> tuple[StashEmulator, PlexEmulator, int]:
    """Both emulators started, one scene in Stash and its item in Plex, the plugin configured
    for them (``fork_ab.py`` measures against the same)."""
    stash, plex = StashEmulator().start(), PlexEmulator().start()
    plex.add_section("Stash", ["/plex/media"], key=1)
    sid = stash.add_scene(title="Scene 1", files=[{"path": "/stash/media/scene-1.mp4", "size": 1001, "duration": 60.0}])
    plex.add_item(1, "/plex/media/scene-1.mp4", size=1001, duration_ms=60000)
    settings = {"plex_url": plex.url, "plex_token": plex.token, "path_map": "/stash/media=/plex/media"}
    stash.plugin_settings = {"Stash2Plex": settings}
    return stash, plex, sid


class Lab:
    def __init__(self, folder: Path) -> None:
        self.stash, self.plex, self.sid = one_scene()
        self.data_dir = folder / "data"
        self.trivial = folder / "trivial.py"
        self.trivial.write_text(TRIVIAL)
        self.edits = 0

    def env(self, fresh: bool) -> dict[str, str]:
        env = dict(os.environ)
        env.update(STASH2PLEX_DATA_DIR=str(self.data_dir), STASH2PLEX_DRAINER_LINGER_S="0")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(REPO.parent)) if p)
        if fresh:
            env["S2P_TEST_FRESH_PROCESSES"] = "1"
        return env

    def _edit(self) -> bytes:
        self.edits += 1
        context = self.stash.update_scene(self.sid, title=f"Scene 1, edit {self.edits}")
        return json.dumps(hook_document(self.stash.server_connection(str(REPO)), context)).encode()

    def _queued(self, env: dict[str, str]) -> float:
        """A hook while a drainer "runs" (the lock held): its CPU; its job stays queued."""
        lock = HeldLock(self.data_dir / "drainer.lock")
        assert lock.acquire(), "a drainer still runs"
        try:
            cpu, out, err = _cpu_of(build_argv(REPO), self._edit(), env)
            assert '"error": null' in out, err
        finally:
            lock.path.write_text("")
            lock.release()
        return cpu

    def round(self, fresh: bool) -> dict[str, float]:
        env = self.env(fresh)
        connection = self.stash.server_connection(str(REPO))
        figures = {}
        figures["trivial plugin"], _, _ = _cpu_of([sys.executable, "-S", str(self.trivial)], b"{}", env)
        figures["hook, starts the drainer"], out, err = _cpu_of(build_argv(REPO), self._edit(), env)
        assert '"error": null' in out, err
        _settled(self.data_dir)
        figures["hook, drainer running"] = self._queued(env)
        payload = json.dumps({"server_connection": connection, "data_dir": str(self.data_dir)}).encode()
        drain = [sys.executable, str(REPO / "Stash2Plex.py"), "drain"]
        figures["drainer, one job"], _, err = _cpu_of(drain, payload, env)
        assert "drainer finished: 1 synced" in err, err
        self._queued(env)
        task = json.dumps(task_document(connection, "process_queue")).encode()
        figures["process_queue, one job"], out, err = _cpu_of(build_argv(REPO), task, env)
        assert '"error": null' in out and '"synced": 1' in out, (out, err)
        return figures

    def close(self) -> None:
        self.stash.stop()
        self.plex.stop()


def main(argv: list[str]) -> int:
    rounds = int(argv[0]) if argv else 7
    compile_plugin()
    with tempfile.TemporaryDirectory() as folder:
        lab = Lab(Path(folder))
        try:
            lab.round(False)  # warm-up: the fork server, the data folder, the page cache
            lab.round(True)
            runs: dict[str, dict[str, list[float]]] = {"new": {}, "forked": {}}
            for _ in range(rounds):
                for fresh, way in ((True, "new"), (False, "forked")):
                    for name, cpu in lab.round(fresh).items():
                        runs[way].setdefault(name, []).append(cpu)
        finally:
            lab.close()
    print(
        f"CPU of one run (user + system, median of {rounds} rounds), ratio to the trivial plugin started the same way"
    )
    print(f"  {'':<26} {'new interpreter':>24} {'forked (the suite)':>24}")
    for name in runs["new"]:
        cells = []
        for way in ("new", "forked"):
            median = statistics.median(runs[way][name])
            base = statistics.median(runs[way]["trivial plugin"])
            cells.append(f"{median * 1000:7.1f} ms {median / base:6.2f}x")
        print(f"  {name:<26} {cells[0]:>24} {cells[1]:>24}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

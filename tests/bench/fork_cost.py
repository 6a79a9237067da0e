"""CPU of one run forked from the suite's fork server (tests/forkserver.py) beside the same
trivial script started as a new ``python -S``, in the same run (the machine's CPU from
/proc/stat, Linux: the fork server's processes are not this one's children).

    python tests/bench/fork_cost.py [runs]

``--against FILE`` compares another version of the server (a copy of tests/forkserver.py
beside it, e.g. ``git show REV:tests/forkserver.py > tests/forkserver_before.py``) with this
one instead: batches of 60 forked runs through each in turn, ``runs`` batches each (the
machine's other work falls on both alike).

    python tests/bench/fork_cost.py --against tests/forkserver_before.py [batches]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests import forkserver_client  # noqa: E402
from tests.forkserver_client import FORK_SERVER, ForkServer  # noqa: E402
from tests.runner import _communicate, _reap  # noqa: E402

SCRIPT = 'import sys; sys.stdin.read(); print(\'{"output": "ok"}\')\n'


def _machine_cpu() -> float:
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:3]) + fields[5] + fields[6]) / os.sysconf("SC_CLK_TCK")


def _per_run(start, runs: int) -> tuple[float, float]:
    start()
    cpu, wall = _machine_cpu(), time.perf_counter()
    for _ in range(runs):
        start()
    return (_machine_cpu() - cpu) / runs, (time.perf_counter() - wall) / runs


def against(other: Path, batches: int, script: Path) -> int:
    """Interleaved batches through ``other`` (a copy of the server) and this checkout's server."""
    servers = {}
    for name, file in (("before", other.resolve()), ("now", forkserver_client.SERVER)):
        forkserver_client.SERVER = file  # what ForkServer starts
        servers[name] = ForkServer()
        servers[name]._running()
    env = dict(os.environ)
    cpu: dict[str, list[float]] = {"before": [], "now": []}
    for n in range(batches):
        for name in ("before", "now") if n % 2 else ("now", "before"):

            def forked(server=servers[name]) -> None:
                proc = server.start([sys.executable, str(script)], env, None)
                _communicate(proc, b"{}", 30)
                _reap(proc)

            cpu[name].append(_per_run(forked, 60)[0])
    before, now = statistics.median(cpu["before"]), statistics.median(cpu["now"])
    pairs = statistics.median(b / a for a, b in zip(cpu["before"], cpu["now"]))
    print(f"a forked trivial plugin run, {batches} batches of 60 through each server (machine CPU per run, median)")
    print(f"  {other}: {before * 1000:.1f} ms")
    print(f"  tests/forkserver.py: {now * 1000:.1f} ms")
    print(f"  ratio (now / before): {now / before:.2f}x, pairwise median {pairs:.2f}x")
    return 0


def main(argv: list[str]) -> int:
    script = Path(tempfile.mkdtemp()) / "trivial.py"
    script.write_text(SCRIPT)
    if argv[:1] == ["--against"]:
        return against(Path(argv[1]), int(argv[2]) if len(argv) > 2 else 12, script)
    runs = int(argv[0]) if argv else 200
    env = dict(os.environ)

    def forked() -> None:
        proc = FORK_SERVER.start([sys.executable, str(script)], env, None)
        _communicate(proc, b"{}", 30)
        _reap(proc)

    def fresh() -> None:
        subprocess.run([sys.executable, "-S", str(script)], input=b"{}", capture_output=True, check=True)

    fork_cpu, fork_wall = _per_run(forked, runs)
    new_cpu, new_wall = _per_run(fresh, runs)
    print(f"a trivial plugin run, {runs} runs each (machine CPU per run, wall per run)")
    print(f"  forked from the fork server: {fork_cpu * 1000:.1f} ms CPU, {fork_wall * 1000:.1f} ms wall")
    print(f"  new python -S (baseline):    {new_cpu * 1000:.1f} ms CPU, {new_wall * 1000:.1f} ms wall")
    print(f"  ratio (CPU):                 {fork_cpu / new_cpu:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

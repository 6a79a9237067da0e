"""CPU of one run forked from the suite's fork server (tests/forkserver.py) beside the same
trivial script started as a new ``python -S``, in the same run (the machine's CPU from
/proc/stat, Linux: the fork server's processes are not this one's children).

    python tests/bench/fork_cost.py [runs]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.forkserver_client import FORK_SERVER  # noqa: E402
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


def main(argv: list[str]) -> int:
    runs = int(argv[0]) if argv else 200
    script = Path(tempfile.mkdtemp()) / "trivial.py"
    script.write_text(SCRIPT)
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

"""An interleaved A/B of one forked plugin run's CPU: a one-job drainer (``drain``) or a
one-job ``process_queue`` (``task``) against the emulators, each run forked from this
interpreter after it imported what the suite's fork server imports (tests/forkserver.py),
as the suite's runs are. Each arm first runs its ``--a``/``--b`` code (Python, e.g. a patch
that puts an older behaviour back) in a fork of its own, then forks the measured run from
that; the arms alternate, so the machine's other work falls on both alike. Prints each
arm's median CPU (user + system, ``wait4``) and page faults, and the median of the
pairwise ratios B/A. Linux only.

    python tests/bench/fork_ab.py drain 15 --b "import sync_queue.pq_insides as m; m.load()"
    python tests/bench/fork_ab.py task 15 --linger 15 --a "..." --b "..."
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import statistics
import sys
import tempfile
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests import forkserver  # noqa: E402
from tests.bench.start_cost import one_scene  # noqa: E402
from tests.runner import drainer_lock_held, hook_document, run_plugin, task_document  # noqa: E402


class Lab:
    def __init__(self, linger: str) -> None:
        self.stash, self.plex, self.sid = one_scene()
        self.data_dir = Path(tempfile.mkdtemp()) / "data"
        self.env = dict(os.environ, STASH2PLEX_DATA_DIR=str(self.data_dir), STASH2PLEX_DRAINER_LINGER_S=linger)
        self.connection = self.stash.server_connection(str(REPO))
        self.edits = 0

    def edit(self) -> None:
        """One scene edit queued by a real hook run (the lock held: it only enqueues)."""
        self.edits += 1
        context = self.stash.update_scene(self.sid, title=f"Scene 1, edit {self.edits}")
        with drainer_lock_held(self.data_dir):
            run = run_plugin(hook_document(self.connection, context), env=self.env)
        assert run.error is None, run.stderr

    def drain(self) -> None:
        from app.main import main

        payload = json.dumps({"server_connection": self.connection, "data_dir": str(self.data_dir)})
        err = io.StringIO()
        main(io.StringIO(payload), io.StringIO(), err, self.env, ["drain"])
        assert "drainer finished: 1 synced" in err.getvalue(), err.getvalue()

    def task(self) -> None:
        from app.main import main

        out = io.StringIO()
        main(io.StringIO(json.dumps(task_document(self.connection, "process_queue"))), out, io.StringIO(), self.env)
        assert '"synced": 1' in out.getvalue(), out.getvalue()


def _measured(run, code: str) -> tuple[float, int]:
    """(CPU seconds, minor page faults) of ``run`` in a fork of a fork that ran ``code``."""
    read_end, write_end = os.pipe()
    arm = os.fork()
    if arm == 0:
        os.close(read_end)
        exec(code, {"__name__": "arm"})  # noqa: S102  # the arm's patch, given on the command line
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            try:
                run()
            except BaseException:
                traceback.print_exc()
                os._exit(3)
            os._exit(0)
        _, status, usage = os.wait4(pid, 0)
        os.write(write_end, json.dumps([status, usage.ru_utime + usage.ru_stime, usage.ru_minflt]).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reply:
        status, cpu, faults = json.loads(reply.read())
    os.waitpid(arm, 0)
    if status != 0:
        raise RuntimeError("the measured run failed (its traceback is above)")
    return cpu, faults


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", choices=("drain", "task"))
    parser.add_argument("pairs", type=int)
    parser.add_argument("--a", default="", help="Python run in arm A's fork before the measured run")
    parser.add_argument("--b", default="", help="the same for arm B")
    parser.add_argument("--linger", default="0", help="STASH2PLEX_DRAINER_LINGER_S (default 0, as in the suite)")
    args = parser.parse_args(argv)
    forkserver._preimport()
    forkserver._preimport_plugin()
    lab = Lab(args.linger)
    run = lab.drain if args.run == "drain" else lab.task
    gc.freeze()
    found: dict[str, list[tuple[float, int]]] = {"A": [], "B": []}
    try:
        for n in range(args.pairs + 1):  # the first pair warms the data folder up, uncounted
            for arm in ("A", "B") if n % 2 else ("B", "A"):
                lab.edit()
                measured = _measured(run, args.a if arm == "A" else args.b)
                if n:
                    found[arm].append(measured)
    finally:
        lab.stash.stop()
        lab.plex.stop()
    for arm in ("A", "B"):
        cpu = statistics.median(c for c, _ in found[arm])
        faults = statistics.median(f for _, f in found[arm])
        print(f"{arm}: {cpu * 1000:.1f} ms CPU, {faults:.0f} page faults (medians of {args.pairs})")
    pairs = statistics.median(b[0] / a[0] for a, b in zip(found["A"], found["B"]))
    print(f"B/A: median of the pairwise ratios {pairs:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

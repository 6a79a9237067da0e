"""The first edit of a large ``all``: seconds from the task's start to Plex's first edit.

    python tests/bench/first_edit.py [--scenes 100000] [--runs 3] [--trials 3]

One library of ``scenes`` (bench.py's ``Lab``), then ``runs`` runs of ``trials`` starts of
``all``: each over the same library with every title changed (the scenes need writing again),
stopped at its first edit (the rest of a 100,000-scene run would take 20 minutes and say
nothing more about the start). Beside each run: the median of a trivial plugin started the
same way (the cost of any process start on the machine at that moment).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.bench.bench import Lab, compile_plugin, launch, line  # noqa: E402
from tests.bench.realistic import StreamedTask  # noqa: E402
from tests.bench.storm import TRIVIAL_PLUGIN  # noqa: E402
from tests.runner import build_argv  # noqa: E402


def first_edit(lab: Lab, round_no: int, timeout: float = 120.0) -> float:
    lab.next_round(round_no)
    lab.plex.clear_requests()
    task = StreamedTask(lab)
    deadline = time.monotonic() + timeout
    while not lab.plex.edit_requests() and time.monotonic() < deadline and task.proc.poll() is None:
        time.sleep(0.01)
    edits = lab.plex.edit_requests()
    task.proc.kill()
    task.proc.wait()
    assert edits, task.stderr()[-2000:]
    return min(r["time"] for r in edits) - task.epoch


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python tests/bench/first_edit.py", description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args(argv)
    compile_plugin()
    built = time.perf_counter()
    lab = Lab(args.scenes)
    print(f"first edit of 'all' over {args.scenes:,} scenes (library built in {time.perf_counter() - built:.0f} s)")
    try:
        trivial = Path(lab.data_dir).parent / "trivial.py"
        trivial.write_text(TRIVIAL_PLUGIN)
        baseline = [*build_argv()[:-1], str(trivial)]
        n = 0
        for run in range(args.runs):
            times = []
            for _ in range(args.trials):
                n += 1
                times.append(first_edit(lab, n))
            start = statistics.median(launch(baseline, b"{}", lab.env).wall for _ in range(3))
            shown = " ".join(f"{t:.2f}" for t in times)
            line(f"run {run + 1}: first edit (s)", shown, f"{start * 1000:.0f} ms trivial start", "", "<= 2 s each")
    finally:
        lab.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Many seeds of the model-based convergence check (tests/convergence.py).

    python -m tests.bench.convergence 50          # seeds 1..50, stops at the first failure
    python -m tests.bench.convergence 1 --from 17 # one given seed again
    python -m tests.bench.convergence 50 --no-ratings  # without ratings (the suite's kind of seed)
    python -m tests.bench.convergence 50 --faults      # and the machine's faults: files held, disk full, kills

Ratings on both sides are played by default (``run_seed(ratings=True)``, ``import_ratings`` on).

Prints each seed and its time; a failure prints the seed and the operations played.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tests.conftest import PLEX_TOKEN, STASH_API_KEY, STASH_COOKIE, Plugin, _stop_drainers
from tests.convergence import run_seed
from tests.emulators.plex_emulator import PlexEmulator
from tests.emulators.stash_emulator import StashEmulator


def one(seed: int, scenes: int, steps: int, ratings: bool = True, faults: bool = False) -> None:
    root = Path(tempfile.mkdtemp(prefix=f"s2p-convergence-{seed}-"))
    data_dir = root / "data"
    env = {"STASH2PLEX_DATA_DIR": str(data_dir), "STASH2PLEX_BREAKER_RECOVERY_S": "2"}
    with (
        PlexEmulator(token=PLEX_TOKEN) as plex,
        StashEmulator(session_cookie=STASH_COOKIE, api_key=STASH_API_KEY) as stash,
    ):
        plex.add_section("Stash", ["/plex/media"], key=1)
        plugin = Plugin(stash, plex, data_dir, env)
        plugin.configure(plex_concurrency=2, import_ratings=ratings or None)
        try:
            run_seed(plugin, seed, scenes=scenes, steps=steps, ratings=ratings, faults=faults)
        finally:
            _stop_drainers(data_dir)
    shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("count", type=int, nargs="?", default=50)
    parser.add_argument("--from", dest="first", type=int, default=1)
    parser.add_argument("--scenes", type=int, default=6)
    parser.add_argument("--steps", type=int, default=14)
    parser.add_argument("--no-ratings", dest="ratings", action="store_false", help="no ratings on either side")
    parser.add_argument("--faults", action="store_true", help="the machine's faults too (World.fault)")
    args = parser.parse_args(argv)
    for seed in range(args.first, args.first + args.count):
        started = time.perf_counter()
        try:
            one(seed, args.scenes, args.steps, args.ratings, args.faults)
        except AssertionError as exc:
            print(f"seed {seed}: FAILED\n{exc}", flush=True)
            return 1
        print(f"seed {seed}: converged in {time.perf_counter() - started:.1f} s", flush=True)
    print(f"{args.count} seeds in a row converged")
    return 0


if __name__ == "__main__":
    sys.exit(main())

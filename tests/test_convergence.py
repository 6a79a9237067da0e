"""The model-based convergence test (tests/convergence.py), a few seeds kept fast.

Many more seeds: ``python -m tests.bench.convergence 50``.
"""

from __future__ import annotations

import pytest

from tests.convergence import run_seed


@pytest.mark.parametrize("seed", [2, 3])  # each fails on the code before issue 25 (ownership, reconcile's read)
def test_every_live_scene_converges_and_no_item_gets_another_scenes_data(plugin, seed):
    plugin.configure(plex_concurrency=2)
    run_seed(plugin, seed, scenes=5, steps=8)


@pytest.mark.parametrize("seed", [1])
def test_the_machines_own_faults_lose_no_edit(plugin, seed):
    """Data files held by another process, a full disk and SIGKILLed drainers at random
    moments (``World.fault``); 50 seeds: ``python -m tests.bench.convergence 50 --faults``."""
    plugin.configure(plex_concurrency=2)
    world = run_seed(plugin, seed, scenes=4, steps=6, faults=True)
    assert any(op.startswith(("data files held", "disk full", "drainer")) for op in world.log), world.log

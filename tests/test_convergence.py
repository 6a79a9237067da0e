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

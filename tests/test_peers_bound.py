"""bench/peers.py's bound: the grid's matrix-product FLOPs, counted by hand on a tiny grid."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import peers  # noqa: E402


def test_the_bound_counts_shared_trajectories_once_and_a_peers_configurations_each():
    grid = {"lr": [0.1, 0.2], "depth": [1], "width": [2], "epochs": [10, 30]}
    # 5 rows, 3 features, 1 output; a layer k -> m: forward 2n(k+1)m, its weights' gradient
    # 2n(k+1)m, and the gradient of its input 2nkm above the first layer
    first = 2 * 2 * 5 * (3 + 1) * 2  # 160
    out = 2 * 2 * 5 * (2 + 1) * 1 + 2 * 5 * 2 * 1  # 80
    epoch = first + out
    shared, alone = peers.training_flops(grid, 5, 3, 1)
    assert shared == 2 * epoch * 30  # two trajectories (lr), each the longest epochs
    assert alone == 2 * epoch * (10 + 30)  # four configurations, each from scratch


def test_the_bound_counts_depth_and_width_per_configuration():
    grid = {"lr": [0.1], "depth": [1, 2], "width": [4], "epochs": [7]}
    one = 2 * 2 * 9 * 3 * 4 + 2 * 2 * 9 * 5 * 2 + 2 * 9 * 4 * 2
    two = one + 2 * 2 * 9 * 5 * 4 + 2 * 9 * 4 * 4
    assert peers.training_flops(grid, 9, 2, 2) == (7 * (one + two), 7 * (one + two))

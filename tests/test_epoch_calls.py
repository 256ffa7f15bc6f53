"""bench/epoch_calls.py sorts a group's epoch calls into the kinds its table sums: on a tiny
data set, each call of a depth-2 group's epoch by hand."""

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import epoch_calls  # noqa: E402


def tiny():
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((7, 3)), rng.standard_normal((7, 1))
    return SimpleNamespace(X_train=X, y_train=y, n_features=3, n_outputs=1, task="regression")


def test_each_call_of_an_epoch_has_its_kind():
    calls = epoch_calls.epoch_calls(tiny(), [3, 4, 4, 1], [0.1, 0.2])
    kinds = [epoch_calls.kind(c) for c in calls]
    names = [epoch_calls.name(c) for c in calls]
    # every product (forward 3, backward: 2 a layer above the first, the first layer's 1), and
    # nothing else, is a matrix product
    assert kinds.count("matmul") == 3 + 2 * 2 + 1 + 1
    assert all((k == "matmul") == n.startswith(("matmul", "dot")) for k, n in zip(kinds, names))
    # the bias adds (K, w, n) + (K, w, 1) and the one-unit output's outer product w o g broadcast
    assert "broadcast" == kinds[names.index("add (2, 4, 7) (2, 4, 1) (2, 4, 7)")]
    assert "broadcast" == kinds[names.index("multiply (2, 4, 1) (2, 1, 7)")]
    # 1 - A² takes its 1 as a 0-d array: an elementwise pass, not a broadcast one
    assert "elementwise" == kinds[names.index("subtract () (2, 4, 7) (2, 4, 7)")]
    assert kinds[-1] == "elementwise" and names[-1].startswith("add (")  # the update
    assert set(kinds) == set(epoch_calls.KINDS)


def test_the_table_sums_every_shape_of_the_grid(capsys):
    assert epoch_calls.main(["--grid", "quick", "--loops", "1", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "| 64-16-10 " in out and "| all " in out and "a call that does nothing" in out

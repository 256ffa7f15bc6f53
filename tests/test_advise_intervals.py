"""Issue 54: conclusions, round four. ``baselines`` is no configuration; each comparison with its own noise; "did not
matter" only when an equivalence interval shows it; a baseline that beats the network said first; commands that do
what their findings say. Constructed run records (expected values worked out here, not by the advisor)."""
from __future__ import annotations

from sweeper.insight.advice.advisor import advise
from test_advise_slices import rec, ranked


def _grid(extra=None):
    """lr × depth, two seeds each: lr=0.01 best everywhere (made by hand)."""
    runs = []
    for lr, depth, seed in ((lr, d, s) for lr in ("0.001", "0.01") for d in ("1", "2") for s in (0, 1)):
        val = 3000 - 400 * (lr == "0.01") - 50 * (depth == "2") + 7 * seed
        runs.append(rec(val, lr=lr, depth=depth, seed=seed, **(extra(lr, depth, seed) if extra else {})))
    return ranked(runs)


def test_baselines_is_not_a_run_param_and_a_resumed_sweep_that_adds_it_reads_as_one_grid():
    from sweeper.tracking.records import split_params

    params, tags = split_params({"lr": 0.01, "baselines": ["linear", "boosting"], "data": {"name": "diabetes"}})
    assert "baselines" not in params and tags["config.baselines"] == "['linear', 'boosting']"
    argv = ["lr=0.001,0.01", "depth=1,2", "seed=0,1"]
    ref = {"linear": {"val_mse": 2900.0}}
    plain = advise(_grid(), argv, baselines=ref)
    # runs of stores made before baselines became a tag hold it as a param: the first round's at its default, the
    # resumed round's (lr=0.01) at what the user added
    mixed = advise(_grid(lambda lr, d, s: {"baselines": "[linear, boosting]" if lr == "0.01" else "linear"}), argv,
                   baselines=ref)
    assert mixed.text() == plain.text() and mixed.command == plain.command and mixed.sizes == plain.sizes
    assert "baselines" not in plain.text()

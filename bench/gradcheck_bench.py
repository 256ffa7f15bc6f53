"""Issue 53: what the gradient check adds to a sweep of a model of yours, per model and shape.

    python bench/gradcheck_bench.py            # ~20 s on 2 cores

For each model and data shape: the check run cold (``models.gradcheck.check_gradients``: finite
differences on 6 rows in float64, each parameter, a second draw only for a parameter that
fails), the verdict read back from the cache (another sweep of the same model source:
``models.gradcheck.verdict`` with this process's memo emptied), and what the sweep's launching
process spends on it in all (``contract.model.check_sweep_gradients``: the data set's shape read
too, as a sweep of a built-in data set would not otherwise). Median of ``--repeats``, seconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "my_nets"))

CASES = [  # (label, model section, data node name)
    (
        "my_nets.TwoLayerNet hidden=16",
        {"_target_": "my_nets.TwoLayerNet", "hidden": 16},
        "diabetes",
    ),
    ("my_nets.TwoLayerNet hidden=64", {"_target_": "my_nets.TwoLayerNet", "hidden": 64}, "digits"),
    (
        "sweeper.models.mlp_net:MLPNet depth=3 width=64 (as a class of yours)",
        {"_target_": "sweeper.models.mlp_net:MLPNet", "depth": 3, "width": 64},
        "digits",
    ),
]


def _median(f, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def row(label: str, model: dict, name: str, repeats: int) -> str:
    """One model and shape: the check cold, the cached verdict, the sweep's start in all."""
    import numpy as np

    from sweeper import data
    from sweeper.base import state
    from sweeper.models import gradcheck, interface
    from sweeper.sweep.plan import check_sweep_gradients

    plain = compose_plain(name)
    ds = data.load_plain(plain["data"])
    net = interface.instantiate(model)
    n_params = sum(
        v.size for v in net.init(ds.n_features, ds.n_outputs, np.random.default_rng(0)).values()
    )
    cold = _median(lambda: gradcheck.check_gradients(net, ds.n_features, ds.n_outputs), repeats)
    gradcheck.verdict(model, ds.n_features, ds.n_outputs, ds.task)  # into the cache

    def cached():
        state.process().gradchecks.clear()
        gradcheck.verdict(model, ds.n_features, ds.n_outputs, ds.task)

    # a fresh sweep of a model whose source is new to the cache: the data's shape, then the check
    def start():
        state.process().gradchecks.clear()
        data._load_plain.cache_clear()
        for f in Path(os.environ["SWEEPER_CACHE_DIR"]).glob("gradient-checks/*.json"):
            f.unlink()
        check_sweep_gradients([{**plain, "model": model}])

    warm, total = _median(cached, repeats), _median(start, repeats)
    return (
        f"| {label} | {name} ({ds.n_features} → {ds.n_outputs}) | {n_params:,} | {cold:.3f} "
        f"| {warm:.4f} | {total:.3f} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    os.environ["SWEEPER_CACHE_DIR"] = tempfile.mkdtemp(prefix="gradcheck-bench-")
    print(
        "| model | data (n_in → n_out) | parameters | check, cold s | cached verdict s | sweep's "
        "start, in all s |"
    )
    print("|---|---|---|---|---|---|")
    for label, model, name in CASES:
        print(row(label, model, name, args.repeats))


def compose_plain(name: str) -> dict:
    """The resolved config of ``python -m sweeper data=NAME`` (no hydra node)."""
    from hydra import compose, initialize_config_dir

    import sweeper
    from sweeper.contract.compose import plain as _plain

    with initialize_config_dir(config_dir=str(sweeper.CONF_DIR), version_base="1.3"):
        return _plain(compose(config_name="config", overrides=[f"data={name}"]))


if __name__ == "__main__":
    main()

"""Issue 35: what the model interface costs, and what stacking a user's model buys.

    python bench/interface_bench.py                    # both tables (~2 min on 2 cores)
    python bench/interface_bench.py --against ../old   # table 1 interleaved with another checkout
                                                       # (e.g. main before)
    python bench/interface_bench.py --against ../old --only-mlp   # table 1 only

Table 1 — the MLP's own paths before and after the interface: ``models.train`` on one
configuration (diabetes, depth 1, width 16, 2000 epochs) and
``models.batched.train_group`` on 32 learning rates; epochs/s, median of ``--repeats``,
each tree in a subprocess of its own, interleaved (A B A B …), ratio after/before.

Table 2 — the example's model (``examples/my_nets``: a two-layer ReLU network of its own)
with K = 32 configurations of one shape (32 learning rates, hidden 16): stacked as one group
(``models.stacked``) against one at a time (``models.train`` through ``models.generic``),
float32 and float64, and the MLP's hand-tuned batched kernel on the same shape (depth 1,
width 16, relu) as the reference; member-epochs/s and ratios. Every side on one thread (the
MLP's group of 32 would otherwise split across the cores: ``threads=1``), as the table says.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EPOCHS, K = 2000, 32


def _arrays(dtype: str):
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    y = ((y - y.mean()) / y.std()).reshape(-1, 1)
    n = int(0.6 * len(X))
    return [a.astype(dtype) for a in (X[:n], y[:n], X[n:], y[n:])]


def mlp_rates(dtype: str = "float64") -> dict[str, float]:
    """The MLP's one-configuration and batched epochs/s in this
    process's tree (both trees have these APIs)."""
    from sweeper.base.backend import resolve
    from sweeper.models import MLP, init_params, train
    from sweeper.models.batched import Member, stacked_params, train_group

    b = resolve("cpu")
    X, y, Xv, yv = _arrays(dtype)
    sizes = [X.shape[1], 16, 1]
    model = MLP(np, init_params(sizes, "tanh", 0, dtype), "tanh", "regression")
    fit = train(b, model, X, y, Xv, yv, lr=0.01, epochs=EPOCHS, log_every=50)
    one = EPOCHS / fit.train_time_s
    params = stacked_params(sizes, "tanh", list(range(K)), dtype)
    members = [Member(0.001 * (i + 1), EPOCHS) for i in range(K)]
    g = train_group(b, params, "tanh", "regression", X, y, Xv, yv, members, log_every=50)
    return {
        "one": one,
        "batched": K * EPOCHS / g.train_time_s,
        **_through_the_door(b, dtype, X, y, Xv, yv),
    }


def _through_the_door(b, dtype: str, X, y, Xv, yv) -> dict[str, float]:
    """The same two, each through the door a job takes (issue 53): ``models.build``
    from a config and then ``models.train``, and ``models.group.train_members``
    from a group's configs; the process's CPU time around all of it (the model's
    dispatch, its parameters drawn, the training)."""
    import time

    from sweeper.models import build, train
    from sweeper.models.group import train_members

    cfg = {
        "seed": 0,
        "dtype": dtype,
        "depth": 1,
        "width": 16,
        "activation": "tanh",
        "weight_decay": 0.0,
        "log_every": 50,
        "batch_size": 0,
        "optimizer": "gd",
        "momentum": 0.9,
        "nesterov": False,
        "beta1": 0.9,
        "beta2": 0.999,
        "eps": 1e-8,
        "patience": 0,
        "model": {"_target_": "sweeper.models.MLPNet"},
    }
    from omegaconf import OmegaConf

    # the process's CPU time: on a loaded machine it moves less than the wall clock
    t0 = time.process_time()
    model = build(OmegaConf.create(cfg), X.shape[1], "regression", b)
    train(b, model, X, y, Xv, yv, lr=0.01, epochs=EPOCHS, log_every=50)
    one = EPOCHS / (time.process_time() - t0)
    heads = [{**cfg, "lr": 0.001 * (i + 1), "epochs": EPOCHS, "seed": i} for i in range(K)]
    t0 = time.process_time()
    train_members(
        b, cfg, (X.shape[1], 1, "regression"), heads, [(EPOCHS,)] * K, [X, y, Xv, yv], b.clock()
    )
    return {"one_door": one, "batched_door": K * EPOCHS / (time.process_time() - t0)}


def table1(against: Path | None, repeats: int) -> list[str]:
    trees = [("after", ROOT)] + ([("before", against.resolve())] if against else [])
    got: dict[str, list[dict[str, float]]] = {name: [] for name, _ in trees}
    for _ in range(repeats):
        for name, tree in trees:
            env = {**os.environ, "PYTHONPATH": f"{tree}:{tree / 'plugins'}", "SWEEPER_THREADS": "1"}
            out = subprocess.run(
                [sys.executable, __file__, "--child"],
                cwd=tree,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            got[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    lines = [
        "| path | "
        + " | ".join(f"{n} epochs/s" for n, _ in trees)
        + (" | after/before |" if against else " |"),
        "|---|" + "---|" * len(trees) + ("---|" if against else ""),
    ]
    for key, what in (
        ("one", "one configuration (models.train)"),
        ("batched", f"batched, K={K} (member-epochs/s)"),
        ("one_door", "one configuration through models.build (CPU time)"),
        ("batched_door", f"batched, K={K}, through models.group.train_members (CPU time)"),
    ):
        med = {n: statistics.median(r[key] for r in got[n]) for n, _ in trees}
        row = f"| {what} | " + " | ".join(f"{med[n]:,.0f}" for n, _ in trees)
        lines.append(row + (f" | {med['after'] / med['before']:.3f} |" if against else " |"))
    return lines


def table2(repeats: int, device: str = "cpu") -> list[str]:
    sys.path.insert(0, str(ROOT / "examples" / "my_nets"))
    from my_nets import TwoLayerNet

    from sweeper.base.backend import resolve
    from sweeper.models import train
    from sweeper.models.batched import Member as MLPMember, stacked_params, train_group
    from sweeper.models.generic import Interfaced, init_host
    from sweeper.models.optim import Optimizer
    from sweeper.models.stacked import Member, train_stacked

    b, net, epochs = resolve(device), TwoLayerNet(hidden=16), 500
    lrs = [0.001 * (i + 1) for i in range(K)]
    lines = [
        "| dtype | threads (each side) | stacked K=32 | one at a time ×32 | stacked / alone | "
        "MLP kernel K=32 | "
        "stacked / MLP kernel |",
        "|---|---|---|---|---|---|---|",
    ]
    from threadpoolctl import threadpool_limits

    # one BLAS thread for every side, as the table says
    limit = threadpool_limits(1, user_api="blas")
    for dtype in ("float32", "float64"):
        X, y, Xv, yv = (b.to_device(a) for a in _arrays(dtype))
        rates = {"stacked": [], "alone": [], "mlp": []}
        for _ in range(repeats):
            f = train_stacked(
                b,
                net,
                "regression",
                X,
                y,
                Xv,
                yv,
                [Member(lr, i, (epochs,)) for i, lr in enumerate(lrs)],
                n_out=1,
                log_every=50,
                opt=Optimizer(),
                dtype=dtype,
            )
            rates["stacked"].append(K * epochs / f.train_time_s)
            t = 0.0
            for i, lr in enumerate(lrs[:8]):  # 8 of the 32 alone: the rate is per configuration
                m = Interfaced(
                    b.xp,
                    net,
                    {k: b.to_device(v) for k, v in init_host(net, X.shape[1], 1, i, dtype).items()},
                    "regression",
                )
                t += train(b, m, X, y, Xv, yv, lr=lr, epochs=epochs, log_every=50).train_time_s
            rates["alone"].append(8 * epochs / t)
            params = [
                b.to_device(p)
                for p in stacked_params([X.shape[1], 16, 1], "relu", list(range(K)), dtype)
            ]
            g = train_group(
                b,
                params,
                "relu",
                "regression",
                X,
                y,
                Xv,
                yv,
                [MLPMember(lr, epochs) for lr in lrs],
                log_every=50,
                threads=1,
            )
            rates["mlp"].append(K * epochs / g.train_time_s)
        med = {k: statistics.median(v) for k, v in rates.items()}
        lines.append(
            f"| {dtype} | 1 | {med['stacked']:,.0f} | {med['alone']:,.0f} | "
            f"{med['stacked'] / med['alone']:.2f}× | "
            f"{med['mlp']:,.0f} | {med['stacked'] / med['mlp']:.2f}× |"
        )
    limit.unregister()
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument(
        "--against",
        type=Path,
        help="another checkout (e.g. a worktree of main before the interface)",
    )
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--device", choices=["cpu", "gpu"], default="cpu", help="table 2's device")
    p.add_argument("--only-models", action="store_true", help="table 2 only")
    p.add_argument("--only-mlp", action="store_true", help="table 1 only")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        print(json.dumps(mlp_rates()))
        return
    t0 = time.time()
    if not a.only_models:
        print("Table 1: the MLP's paths (member-)epochs/s, median of", a.repeats)
        print("\n".join(table1(a.against, a.repeats)))
    if a.only_mlp:
        print(f"\n({time.time() - t0:.0f} s, load average {os.getloadavg()[0]:.2f})")
        return
    print(
        f"\nTable 2: examples/my_nets TwoLayerNet(hidden=16), {K} learning rates, "
        f"member-epochs/s on {a.device}, "
        f"median of {a.repeats}"
    )
    print("\n".join(table2(a.repeats, a.device)))
    print(f"\n({time.time() - t0:.0f} s, load average {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()

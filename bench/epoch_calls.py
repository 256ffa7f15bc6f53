"""Issue 61: where a batched group's epoch goes, call by call, on the shapes of a peers' grid.

    python bench/epoch_calls.py          # the peers' diabetes grid (bench/peers.py --grid diabetes)
    python bench/epoch_calls.py --grid digits --repeats 9 --list

Each shape of the grid (depth x width, its learning rates as one group of K members: full batch,
tanh, float64, gradient descent, one BLAS thread, as the batched launcher trains it) gets the
passes ``models.batched`` builds for it, and one epoch's calls (forward, backward, update) are
timed: each call alone (CPU seconds of ``--loops`` calls, the median of ``--repeats``) and the
whole epoch in the training loop's order. Each call is of one kind: a matrix product, the
activation (``tanh``), a *broadcast* elementwise pass (an operand of another shape than the
output: a bias add, the one-unit output's outer product ``w o g``), or another elementwise pass.
The floor is NumPy's cost of a call that does nothing (a ufunc on 1-element arrays with ``out=``)
times the epoch's calls: what fewer calls could save at most. Shared machine: compare the shares
within one run, not times across runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

KINDS = ("matmul", "activation", "broadcast", "elementwise")


def kind(call) -> str:
    """The kind of one epoch call (a ``functools.partial`` of a NumPy function)."""
    func = getattr(call, "func", None)
    if func in (np.matmul, np.dot):
        return "matmul"
    if func in (np.tanh, np.exp):
        return "activation"
    shapes = {a.shape for a in call.args if isinstance(a, np.ndarray) and a.ndim}
    return "broadcast" if len(shapes) > 1 else "elementwise"


def name(call) -> str:
    """``ufunc (shape) (shape) …`` of a call, its scalars as ``()``."""
    func = getattr(call, "func", call)
    shapes = " ".join(str(tuple(getattr(a, "shape", ()))) for a in call.args)
    return f"{getattr(func, '__name__', func)} {shapes}"


def epoch_calls(ds, sizes: list[int], lrs: list[float]) -> list:
    """One epoch's calls of a group of ``len(lrs)`` members of ``sizes`` on ``ds``'s training
    rows."""
    from sweeper.models.activations import ACTIVATIONS
    from sweeper.models.batched import stacked_params
    from sweeper.models.batched_pass import _Pass
    from sweeper.models.optim import Optimizer, State
    from sweeper.models.packed import Layout, Shape

    K = len(lrs)
    layout = Layout([Shape(tuple(sizes), "tanh")], [K])
    P = layout.pack([stacked_params(sizes, "tanh", list(range(K)), "float64")], "float64")
    scale = (-np.asarray(lrs) * 2.0 / ds.X_train.shape[0]).reshape(K, 1, 1)
    y = ds.y_train.astype("float64")
    p = _Pass(
        np,
        layout,
        P,
        [ACTIVATIONS["tanh"]],
        ds.task,
        ds.X_train.astype("float64"),
        y,
        scale,
        State(np, [P], Optimizer(), 0.0, [Ellipsis]),
    )
    return p.forward_calls + p.backward_calls + p.update_calls


def timed(calls: list, loops: int, repeats: int) -> float:
    """CPU seconds of one pass over ``calls``: the median of ``repeats`` runs of ``loops``
    passes."""
    runs = []
    for _ in range(repeats):
        t0 = time.thread_time()
        for _ in range(loops):
            for call in calls:
                call()
        runs.append((time.thread_time() - t0) / loops)
    return statistics.median(runs)


def floor(loops: int = 20_000, repeats: int = 5) -> float:
    """CPU seconds of a call that does nothing: ``np.add`` on 1-element arrays with ``out=``."""
    a, zero = np.ones(1), np.zeros(1)
    return timed([lambda: np.add(a, zero, a)], loops, repeats)


def shapes_of(ds, grid: dict) -> list[list[int]]:
    return [
        [ds.n_features] + [w] * d + [ds.n_outputs] for d in grid["depth"] for w in grid["width"]
    ]


def main(argv: list[str] | None = None) -> int:
    from peers import GRIDS, _dataset
    from threadpoolctl import threadpool_limits
    from trainer_bench import about, table

    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--grid", choices=sorted(GRIDS), default="diabetes")
    ap.add_argument("--loops", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--list", action="store_true", help="also each call's time")
    args = ap.parse_args(argv)
    data_name, grid = GRIDS[args.grid]
    ds = _dataset(data_name)
    epochs = max(grid["epochs"])
    print(f"# bench/epoch_calls.py, {time.strftime('%Y-%m-%d %H:%M')}, {about()}")
    print(
        f"# grid {args.grid}: data={data_name} ({ds.X_train.shape[0]} training rows), "
        f"{len(grid['lr'])} members a group, {epochs} epochs; CPU us an epoch, median of "
        f"{args.repeats} x {args.loops}"
    )
    rows, total, by_kind, n_calls = [], 0.0, dict.fromkeys(KINDS, 0.0), 0
    with threadpool_limits(1), np.errstate(over="ignore", invalid="ignore"):
        per_call = floor()
        for sizes in shapes_of(ds, grid):
            calls = epoch_calls(ds, sizes, grid["lr"])
            alone = [timed([c], args.loops, args.repeats) for c in calls]
            whole = timed(calls, args.loops, args.repeats)
            mine = dict.fromkeys(KINDS, 0.0)
            for c, s in zip(calls, alone):
                mine[kind(c)] += s
                if args.list:
                    print(f"#   {sizes}: {s * 1e6:7.2f} us  {kind(c):<11} {name(c)}")
            total, n_calls = total + whole, n_calls + len(calls)
            for k in KINDS:
                by_kind[k] += mine[k]
            rows.append(
                [
                    "-".join(map(str, sizes)),
                    str(len(calls)),
                    f"{whole * 1e6:.1f}",
                    *(f"{mine[k] * 1e6:.1f}" for k in KINDS),
                    f"{len(calls) * per_call * 1e6:.1f}",
                ]
            )
    share = [f"{by_kind[k] / total:.0%}" for k in KINDS]
    rows.append(
        [
            "all",
            str(n_calls),
            f"{total * 1e6:.1f}",
            *(f"{by_kind[k] * 1e6:.1f} ({s})" for k, s in zip(KINDS, share)),
            f"{n_calls * per_call * 1e6:.1f} ({n_calls * per_call / total:.0%})",
        ]
    )
    print(table(["shape", "calls", "epoch us", *KINDS, "call floor us"], rows))
    print(
        f"# the grid's groups, one after another, {epochs} epochs: {total * epochs:.2f} CPU s; "
        f"a call that does nothing: {per_call * 1e9:.0f} ns"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

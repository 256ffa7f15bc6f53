"""Issue 38: what a 5-fold cross-validated sweep costs against the
same grid on one validation split.

    python bench/folds_bench.py                          # diabetes, 16 configurations, both
                                                         # launchers (~2 min)
    python bench/folds_bench.py --data breast_cancer --launchers batched --repeats 3

The grid is lr × width × depth (4 × 2 × 2 = 16 configurations, ``epochs=1000``). Each sweep is
one CLI multirun into a fresh embedded store (``tracking.log_model=false``, ``baselines=none``),
once with ``data.folds=0`` (one split) and once with ``data.folds=5``; the wall seconds are the
whole command's (start-up, training, MLflow, the summary, and for 5 folds the winner's
refit). Printed: a table of wall seconds (the fastest of ``--repeats``), the ratio 5-fold / one
split per launcher (the issue's target: at most 2.5 under the default, batched, launcher), and
each sweep's winner with its test metric (the refit's for 5 folds).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from _sweeps import timed_sweep

GRID = dict(lr="0.003,0.01,0.03,0.1", width="8,16", depth="1,2")
METRIC = {
    "diabetes": ("val_mse", "test_mse"),
    "breast_cancer": ("val_accuracy", "test_accuracy"),
    "iris": ("val_accuracy", "test_accuracy"),
    "wine": ("val_accuracy", "test_accuracy"),
    "digits": ("val_accuracy", "test_accuracy"),
}


def sweep(data: str, folds: int, launcher: str, epochs: int) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="folds-bench-"))
    cmd = [
        sys.executable,
        "-m",
        "sweeper",
        "-m",
        f"data={data}",
        f"data.folds={folds}",
        *(f"{k}={v}" for k, v in GRID.items()),
        f"epochs={epochs}",
        "log_every=50",
        "tracking.log_model=false",
        "baselines=none",
        f"hydra/launcher={launcher}",
        f"tracking.uri=sqlite:///{tmp}/mlflow.db",
        f"hydra.sweep.dir={tmp}/sweep",
    ]
    wall, runs = timed_sweep(cmd, tmp)
    parent = next(r for r in runs if r.data.tags.get("sweep_dir"))
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    best = next(r for r in runs if r.info.run_id == parent.data.tags["best_run_id"])
    cv = next((r for r in runs if r.info.run_id == parent.data.tags.get("best_cv_run_id")), best)
    val, test = METRIC.get(data, ("val_mse", "test_mse"))
    out = {
        "wall": wall,
        "runs": len(children),
        "winner": ",".join(f"{k}={cv.data.params[k]}" for k in GRID),
        "val": cv.data.metrics.get(val),
        "val_std": cv.data.metrics.get(f"{val}_std"),
        "test": best.data.metrics.get(test),
        "refit": best.info.run_id != cv.info.run_id,
    }
    shutil.rmtree(tmp, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--data", default="diabetes")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=1000)
    ap.add_argument(
        "--launchers",
        default="batched,basic",
        help="comma list: batched (the default of -m), basic",
    )
    ap.add_argument(
        "--repeats", type=int, default=1, help="runs of each sweep; the fastest is shown"
    )
    args = ap.parse_args()
    from tabulate import tabulate

    rows, ratios = [], []
    for launcher in args.launchers.split(","):
        got = {}
        for folds in (0, args.folds):
            tries = [sweep(args.data, folds, launcher, args.epochs) for _ in range(args.repeats)]
            got[folds] = min(tries, key=lambda t: t["wall"])
            g = got[folds]
            what = "one split" if not folds else f"{folds}-fold CV + refit"
            rows.append(
                [
                    launcher,
                    what,
                    g["runs"],
                    f"{g['wall']:.1f}",
                    g["winner"],
                    f"{g['val']:.4g}"
                    + (f" ± {g['val_std']:.3g}" if g["val_std"] is not None else ""),
                    f"{g['test']:.4g}" + (" (refit)" if g["refit"] else ""),
                ]
            )
        ratios.append([launcher, f"{got[args.folds]['wall'] / got[0]['wall']:.2f}"])
    print(
        f"data={args.data}, {len(rows) and rows[0][2]} configurations (lr × width × depth), "
        f"epochs={args.epochs}, "
        f"fastest of {args.repeats}"
    )
    print(
        tabulate(
            rows,
            headers=["launcher", "sweep", "runs", "wall s", "winner", "val (± fold std)", "test"],
            tablefmt="github",
            disable_numparse=True,
        )
    )
    print()
    print(
        tabulate(
            ratios,
            headers=["launcher", f"{args.folds}-fold / one split (wall)"],
            tablefmt="github",
            disable_numparse=True,
        )
    )


if __name__ == "__main__":
    main()

"""MLflow's own asynchronous logging against synchronous calls, for
one child run's records (issue 13).

    python bench/async_bench.py [--runs 40] [--repeats 3]

Each run is what a sweep job sends: ``create_run``, one ``log_batch`` (params, ~30 final
metrics, two 100-point loss curves), ``set_terminated``; into a fresh SQLite store (WAL),
the same calls either synchronous or with ``log_batch(..., synchronous=False)`` (MLFLOW's
queue, flushed before the run ends, as ``mlflow.end_run`` does), or all runs queued and
flushed once at the end. The table: the time the caller spends per run (median of repeats).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sweeper import tracking  # noqa: E402  (sets MLflow's environment first)


def one(c, exp: str, synchronous: bool) -> float:
    from mlflow.entities import Metric, Param

    now = int(time.time() * 1000)
    metrics = [Metric(f"m{i}", 0.5 + i, now, 0) for i in range(30)]
    metrics += [
        Metric(name, 1.0 / (s + 1), now, s)
        for name in ("train_loss", "val_loss")
        for s in range(100)
    ]
    params = [Param(f"p{i}", str(i)) for i in range(40)]
    t = time.perf_counter()
    run = c.create_run(exp)
    op = c.log_batch(run.info.run_id, metrics=metrics, params=params, synchronous=synchronous)
    if not synchronous:
        op.wait()  # the run's records are in before it ends
    c.set_terminated(run.info.run_id, "FINISHED")
    return time.perf_counter() - t


def deferred(c, exp: str, runs: int) -> float:
    """Every run's batch queued (no wait), the queue flushed once,
    then every run ended: the whole time per run."""
    from mlflow.entities import Metric, Param

    now = int(time.time() * 1000)
    t = time.perf_counter()
    ops, ids = [], []
    for _ in range(runs):
        metrics = [Metric(f"m{i}", 0.5 + i, now, 0) for i in range(30)]
        metrics += [
            Metric(name, 1.0 / (s + 1), now, s)
            for name in ("train_loss", "val_loss")
            for s in range(100)
        ]
        run = c.create_run(exp)
        ids.append(run.info.run_id)
        ops.append(
            c.log_batch(
                run.info.run_id,
                metrics=metrics,
                params=[Param(f"p{i}", str(i)) for i in range(40)],
                synchronous=False,
            )
        )
    for op in ops:
        op.wait()
    for run_id in ids:
        c.set_terminated(run_id, "FINISHED")
    return (time.perf_counter() - t) / runs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    modes = {  # seconds per run, in a fresh store (one warm run first)
        "synchronous": lambda c, exp: statistics.median(
            one(c, exp, True) for _ in range(args.runs)
        ),
        "MLflow async (synchronous=False)": lambda c, exp: statistics.median(
            one(c, exp, False) for _ in range(args.runs)
        ),
        "MLflow async, one flush at the end": lambda c, exp: deferred(c, exp, args.runs),
    }
    rows = {}
    for mode, measure in modes.items():
        per = []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as tmp:
                uri = f"sqlite:///{tmp}/mlflow.db"
                c = tracking.open_store(uri)
                exp = tracking.experiment_id(c, "bench", uri)
                one(c, exp, True)  # warm
                per.append(measure(c, exp))
        rows[mode] = statistics.median(per)
    ref = rows["synchronous"]
    print(f"{'records of one run':<36} {'ms per run':>10} {'vs sync':>8}")
    for mode, t in rows.items():
        print(f"{mode:<36} {t * 1e3:>10.1f} {t / ref:>7.2f}x")


if __name__ == "__main__":
    main()

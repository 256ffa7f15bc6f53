"""Ending runs that each logged a model, the two ways ``sweeper.tracking.ending`` has (issue 61).

    python bench/ending_bench.py --repeats 3
    python bench/ending_bench.py --at-once 1 --ways bulk   # one transaction a run

32 runs of the peers' diabetes shape (5 final metrics, 2 curves of 160 points, a system sample,
5 params, 3 data sets, a 5 KB artifact and a model folder of 20 KB) are ended ``--at-once``
(default 4) at a time through ``ending.end_each``, as the writer ends them: MLflow's client calls
(``SWEEPER_PUBLIC_ONLY=bulk``) and the bulk transactions, each on a fresh SQLite store,
interleaved. Prints the wall and CPU ms a run of each, and their medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from sweeper import tracking
from sweeper.base import tested
from sweeper.tracking import bulk, ending

RUNS = 32
PARAMS = {"lr": 0.01, "depth": 2, "width": 16, "epochs": 8000, "activation": "tanh"}


def _end(folder: Path, i: int, datasets: list) -> dict:
    """A run's end as a job of the peers' diabetes grid hands it over, with its model folder."""
    from mlflow.entities import Metric

    model = folder / f"model{i}"
    model.mkdir(parents=True, exist_ok=True)
    (model / "MLmodel").write_text("flavors: {}\nmodel_id: null\n")
    (model / "weights.npz").write_bytes(os.urandom(20_000))
    artifact = folder / f"curves{i}.npz"
    artifact.write_bytes(os.urandom(5_000))
    steps = list(range(0, 8000, 50))
    return dict(
        metrics={
            "val_mse": 2.5,
            "test_mse": 2.6,
            "val_r2": 0.5,
            "test_r2": 0.4,
            "train_time_s": 0.3,
        },
        curves={
            "train_loss": (steps, list(np.linspace(1, 0, 160))),
            "val_loss": (steps, list(np.linspace(1, 0, 160))),
        },
        system=[Metric("system/cpu_utilization_percentage", 50.0, 1000, 0)],
        params=PARAMS,
        tags={"sweeper.status": "FINISHED"},
        datasets=datasets,
        artifacts=[artifact],
        models={"model": model},
    )


def timed(way: str, folder: Path, datasets: list, at_once: int = 4) -> tuple[float, float]:
    """Wall and CPU ms a run, ending RUNS runs ``way`` (calls or bulk) on a fresh store."""
    os.environ.pop(tested.PUBLIC_ONLY, None)
    if way == "calls":
        os.environ[tested.PUBLIC_ONLY] = "bulk"
    tested.shortcut.cache_clear()
    c = tracking.client(f"sqlite:///{folder}/mlflow.db")
    experiment = c.create_experiment("ends", artifact_location=(folder / "artifacts").as_uri())
    specs = [dict(name=f"r{i}", tags={}, params=PARAMS) for i in range(RUNS)]
    ids = bulk.start_runs(c, experiment, specs)
    ends = [ending.Ending(r, _end(folder, i, datasets)) for i, r in enumerate(ids)]
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(0, RUNS, at_once):
        batch = ends[i : i + at_once]
        assert ending.end_each(c, batch) == [None] * len(batch)
    return (time.perf_counter() - wall) / RUNS * 1000, (time.process_time() - cpu) / RUNS * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--at-once", type=int, default=4, help="runs ended in one end_each call")
    ap.add_argument("--ways", default="calls,bulk", help="comma-separated: calls, bulk")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ending-bench-"))
    X = np.random.default_rng(0).normal(size=(266, 10))
    splits = {"training": (X, X[:, 0]), "validation": (X + 1, X[:, 0]), "test": (X - 1, X[:, 0])}
    datasets = tracking.dataset_inputs("diabetes", "diabetes", splits)
    tracking.open_store(f"sqlite:///{root}/warm.db")  # the schema's first creation, untimed
    ways = [w for w in ("calls", "bulk") if w in args.ways.split(",")]
    if not ways or args.at_once < 1:
        ap.error(f"--ways {args.ways} --at-once {args.at_once}: expected calls and/or bulk, >= 1")
    got: dict[str, list[tuple[float, float]]] = {w: [] for w in ways}
    for r in range(args.repeats):
        for way in ways if r % 2 == 0 else ways[::-1]:
            got[way].append(timed(way, root / f"{way}{r}", datasets, args.at_once))
            print(f"{way}: {got[way][-1][0]:.1f} ms a run, CPU {got[way][-1][1]:.1f}", flush=True)
    for way, v in got.items():
        wall, cpu = statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)
        print(f"{way}: median {wall:.1f} ms a run, CPU {cpu:.1f} (of {len(v)})")


if __name__ == "__main__":
    main()

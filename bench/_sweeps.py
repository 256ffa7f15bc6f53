"""What the sweep benchmarks share: one command timed, and the runs it left in its store."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path


def timed_sweep(cmd: list[str], tmp: Path) -> tuple[float, list]:
    """Run ``cmd`` (a ``python -m sweeper -m ...`` whose store is
    ``tmp``/mlflow.db) in ``tmp``: its wall seconds and every run of the store
    (parents and children); exit with its stderr's tail when it fails."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr[-800:]}")
    from mlflow import MlflowClient

    c = MlflowClient(f"sqlite:///{tmp}/mlflow.db")
    return wall, [
        r
        for e in c.search_experiments()
        for r in c.search_runs([e.experiment_id], max_results=5000)
    ]

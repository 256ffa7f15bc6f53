"""Load test of the embedded store: W parallel joblib workers run J
jobs into one fresh SQLite store.

    python bench/load_test.py                 # 8 workers x 25 jobs each = 200 children
    python bench/load_test.py --workers 2 --per-worker 5

Prints one table: jobs asked, children recorded and their statuses, "database is locked" errors seen
in the output, wall time and jobs/s. The store is created first by the launching process (the parent
run), in WAL mode, as every sweep does. Needs the parallel extra (hydra-joblib-launcher).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

LRS = ["0.001", "0.002", "0.005", "0.01", "0.02", "0.05", "0.1", "0.2"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--per-worker", type=int, default=25)
    ap.add_argument("--epochs", type=int, default=200)
    args = ap.parse_args(argv)
    n = args.workers * args.per_worker
    seeds = -(-n // len(LRS))  # jobs = seeds x lrs, at least n

    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "mlflow.db"
        cmd = [
            sys.executable,
            "-m",
            "sweeper",
            "-m",
            "hydra/launcher=joblib",
            f"hydra.launcher.n_jobs={args.workers}",
            f"seed=range(0,{seeds})",
            f"lr={','.join(LRS)}",
            f"epochs={args.epochs}",
            "log_every=20",
            f"tracking.uri=sqlite:///{store}",
            f"hydra.sweep.dir={tmp}/sweep",
            "tracking.experiment=load",
        ]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        output = proc.stdout + proc.stderr

        from mlflow import MlflowClient

        c = MlflowClient(f"sqlite:///{store}")
        exp = c.get_experiment_by_name("load")
        runs = [] if exp is None else c.search_runs([exp.experiment_id], max_results=5000)
        kids = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
        status = Counter(r.info.status for r in kids)
        rows = [
            ("jobs asked", seeds * len(LRS)),
            ("children recorded", len(kids)),
            ("  FINISHED", status.get("FINISHED", 0)),
            ("  other statuses", sum(v for k, v in status.items() if k != "FINISHED")),
            ("parent runs", len(runs) - len(kids)),
            ("'database is locked' in output", output.count("database is locked")),
            ("exit code", proc.returncode),
            ("wall time (s)", f"{wall:.1f}"),
            ("jobs per second", f"{seeds * len(LRS) / wall:.2f}"),
        ]
    width = max(len(k) for k, _ in rows)
    print(
        f"load test: {args.workers} joblib workers, {seeds * len(LRS)} jobs, one embedded SQLite "
        "store (WAL)"
    )
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    return 0 if len(kids) == seeds * len(LRS) and proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

"""``python -m sweeper.runs``: what the store holds: each experiment
with its number of sweeps and runs.

With ``--experiment NAME``: that experiment's sweeps, newest first (parent run
id, date, the model its runs trained, jobs, finished and failed runs, the best
run by the sweep's validation metric), then its single runs and their models.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sweeper import tracking
from sweeper.contract.helptext import Parser, describe
from sweeper.base.fmt import cell
from sweeper.base.tags import model_name
from sweeper.tracking.store_errors import guarded

__all__ = ["main"]

PARENT = "mlflow.parentRunId"


def _is_sweep(r: Any) -> bool:
    return bool(r.data.tags.get("sweep_dir"))


def _date(ms: int | None) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M") if ms else "-"


def overview(c: Any) -> list[list[Any]]:
    """One row per active experiment: name, sweeps (parent runs), runs
    (every other run), last run's date."""
    rows = []
    for exp in c.search_experiments():
        runs = tracking.search(c, [exp.experiment_id])
        sweeps = sum(_is_sweep(r) for r in runs)
        last = max((r.info.start_time for r in runs), default=None)
        rows.append([exp.name, sweeps, len(runs) - sweeps, _date(last)])
    return rows


def sweeps(c: Any, experiment: str, uri: str) -> tuple[list[list[Any]], list[list[Any]]]:
    """The sweeps of an experiment, newest first (parent run id, date, the
    model(s) its runs trained, jobs, finished, failed, best run and its metric
    as the sweep's report published them), and its single runs (no parent),
    each with its model (short: ``mlp``, ``my_nets.TwoLayerNet``)."""
    exp = tracking.named_experiment(c, experiment, uri)
    runs = tracking.search(c, [exp.experiment_id])
    kids: dict[str, list[Any]] = {}
    for r in runs:
        if PARENT in r.data.tags:
            kids.setdefault(r.data.tags[PARENT], []).append(r)
    rows, singles = [], []
    for r in sorted(runs, key=lambda r: r.info.start_time or 0, reverse=True):
        if _is_sweep(r):
            mine = kids.get(r.info.run_id, [])
            best = next(
                ((k, v) for k, v in r.data.metrics.items() if k.startswith("best_val_")), None
            )
            models = sorted({model_name(k.data.tags) for k in mine}) or ["-"]
            rows.append(
                [
                    r.info.run_id,
                    _date(r.info.start_time),
                    ", ".join(models),
                    r.data.tags.get("n_jobs", "-"),
                    sum(k.info.status == "FINISHED" for k in mine),
                    sum(k.info.status == "FAILED" for k in mine),
                    r.data.tags.get("best_run", "-") or "-",
                    f"{best[0]}={cell(best[1])}" if best else "-",
                    r.info.status,
                ]
            )
        elif PARENT not in r.data.tags:
            metric = next((k for k in ("val_accuracy", "val_mse") if k in r.data.metrics), None)
            singles.append(
                [
                    r.info.run_id,
                    _date(r.info.start_time),
                    r.info.run_name,
                    model_name(r.data.tags),
                    f"{metric}={cell(r.data.metrics[metric])}" if metric else "-",
                    r.info.status,
                ]
            )
    return rows, singles


def main(argv: list[str] | None = None) -> int:
    ap = Parser(
        prog="python -m sweeper.runs",
        description=describe(__doc__),
        epilog="then: python -m sweeper.report --parent PARENT_RUN_ID",
    )
    ap.add_argument("--experiment", help="list this experiment's sweeps and single runs")
    ap.add_argument(
        "--tracking-uri",
        default=tracking.DEFAULT_URI,
        help=f"the MLflow store (default: {tracking.DEFAULT_URI})",
    )
    args = ap.parse_args(argv)
    # a store that fails, an unknown experiment: one line and 2 from guarded (which also
    # refuses a store that is not there: MLflow would create an empty one, or wait for a server)
    return guarded(args.tracking_uri, lambda: _list(args))


def _list(args: Any) -> int:
    # lazy: saves ~36 ms at this module's import (measured)
    from tabulate import tabulate

    c = tracking.client(args.tracking_uri)
    if args.experiment is None:
        rows = overview(c)
        print(
            tabulate(
                rows,
                headers=["experiment", "sweeps", "runs", "last run"],
                disable_numparse=True,
            )
            if rows
            else f"no experiment in {args.tracking_uri}"
        )
        _registered(c, args.tracking_uri)
        return 0
    rows, singles = sweeps(c, args.experiment, args.tracking_uri)
    print(f"experiment {args.experiment}: {len(rows)} sweep(s), {len(singles)} single run(s)")
    if rows:
        print(
            tabulate(
                rows,
                headers=[
                    "parent run id",
                    "started",
                    "model",
                    "jobs",
                    "finished",
                    "failed",
                    "best run",
                    "best",
                    "status",
                ],
                disable_numparse=True,
            )
        )
    if singles:
        print(
            tabulate(
                singles,
                headers=["run id", "started", "run", "model", "metric", "status"],
                disable_numparse=True,
            )
        )
    return 0


def _registered(c: Any, uri: str) -> None:
    """The store's registered models, each with its champion and how to load it."""
    try:
        models = c.search_registered_models()
    except tracking.UNREACHABLE:  # a store without a registry (MLflow says so): nothing to list
        return
    for m in models:
        champion = (m.aliases or {}).get(tracking.CHAMPION)
        if champion is None:
            print(f"registered model {m.name}: no {tracking.CHAMPION} alias")
            continue
        print(
            f"registered model {m.name}: version {champion} is {tracking.CHAMPION}; load it with "
            f"MLFLOW_TRACKING_URI={uri} and mlflow.pyfunc.load_model('models:/{m.name}@"
            f"{tracking.CHAMPION}')"
        )


if __name__ == "__main__":
    from sweeper import main_exit

    main_exit(main)

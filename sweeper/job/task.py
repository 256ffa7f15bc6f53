"""The Hydra task of ``python -m sweeper``: one job (:func:`sweeper.job.record.run`),
its exit code when it runs alone, and its objective for search sweepers."""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from sweeper import data, tracking
from sweeper.base.backend import BackendUnavailable
from sweeper.tracking.ui import run_url, ui_line
from sweeper.base.output import mask_files, masked
from sweeper.base.state import current
from sweeper.contract.config import ConfigError
from sweeper.job import metrics
from sweeper.job.context import JobContext
from sweeper.job.record import run

__all__ = ["EXPECTED", "main", "objective", "where"]

EXPECTED = (ConfigError, BackendUnavailable, tracking.TrackingError, data.DataError)


def main(cfg: DictConfig) -> dict[str, Any]:
    """The Hydra task. A single run exits 2 with one line on a bad value, a
    missing GPU or an unusable store, and 1 when it diverged (recorded as
    FAILED). In a multirun every outcome is recorded and the sweep goes on.
    """
    ctx = JobContext.from_hydra()
    if ctx.sweep_dir is not None:
        # lazy: saves ~2.1 ms at this module's import (measured)
        from sweeper.base.output import quiet_unwritable_files
        from sweeper.base.process import exit_with_parent

        # a joblib worker ends with the sweep that started it (a kill -9 included)
        exit_with_parent()
        # and its job log on a full disk is one line, as in the launching process
        quiet_unwritable_files()
    # a URI's password on the command line: not in Hydra's files
    if any(masked(o) != o for o in ctx.overrides):
        hydra_files = [*Path(ctx.output_dir, ".hydra").glob("*.yaml")]
        mask_files(
            hydra_files + ([ctx.sweep_dir / "multirun.yaml"] if ctx.sweep_dir is not None else [])
        )
    try:
        result = run(cfg, ctx)
    except EXPECTED as e:
        if ctx.sweep_dir is not None:
            raise
        print(f"sweeper: error: {e}", file=sys.stderr)
        _forget_run_dir(ctx)
        sys.exit(2)
    # the single run's last line: where to find it
    if ctx.sweep_dir is None and result.get("run_id"):
        print(where(cfg, ctx, result))
    if ctx.sweep_dir is None and result["status"] != "FINISHED" and not result.get("resumed_from"):
        print(
            f"sweeper: run {result['run_id']} {result['status']}: {result['reason']}",
            file=sys.stderr,
        )
        sys.exit(1)
    return result


def _forget_run_dir(ctx: JobContext) -> None:
    """A refused single run leaves no folder behind: the one this command made (hydra.run.dir)
    goes again while it holds only what Hydra wrote into it (``.hydra/``, the job's log)."""

    made = current().new_run_dir
    here = Path(ctx.output_dir).absolute()
    if made is None or not here.is_relative_to(made) or not made.is_dir():
        return
    hydras = [p for p in made.rglob("*") if not p.is_dir()]
    if all(
        p.parent == here / ".hydra" or (p.parent == here and p.suffix == ".log") for p in hydras
    ):
        logging.shutdown()  # the job's log file, closed before it goes
        shutil.rmtree(made, ignore_errors=True)


def where(cfg: DictConfig, ctx: JobContext, result: dict[str, Any]) -> str:
    """A single run's last lines: its experiment, run id and folder, and its address in the UI."""
    url = run_url(cfg.tracking.uri, result["experiment_id"], result["run_id"])
    return (
        f"experiment {result['experiment']}  run {result['run_id']}  output {ctx.output_dir}\n"
        f"UI: {ui_line(cfg.tracking.uri, url)}"
    )


def objective(result: dict[str, Any]) -> float:
    """The job's primary validation metric (val_mse, or val_accuracy
    for a binary task), else NaN."""
    if result.get("task") is None:
        return float("nan")
    return float(result["metrics"].get(f"val_{metrics.PRIMARY[result['task']][0]}", float("nan")))

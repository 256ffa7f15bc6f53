"""The refit of a cross-validated sweep's winner (``data.folds=k``),
as ``GridSearchCV(refit=True)``.

The chosen configuration was scored on ``k`` folds of the non-test rows; its refit is that
configuration trained once on all of them (``data.folds=0 data.val_fraction=0``: the same test
rows, every other row in training) and scored on the test split. It is its own run (tags
``refit_of`` = the cross-validated run, ``refit_sweep`` = the sweep's parent), beside the sweep's
children rather than among them, so it never ranks with them (its ``val_*`` are of its training
rows); the parent's ``best_run_id`` and ``best_model_uri`` point to it, ``best_cv_run_id`` to the
run that won. A rebuilt summary finds the refit already made and reuses it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import yaml

from omegaconf import OmegaConf
from sweeper.base import stop
from sweeper.base.fmt import cell
from sweeper.tracking.ui import run_path
from sweeper.job import crossval
from sweeper.tracking.records import search

__all__ = ["existing", "for_parent", "parent_record", "refit"]

log = logging.getLogger("sweeper")


def existing(c: Any, run: Any) -> Any:
    """The finished refit of the cross-validated ``run``, or None."""

    found = search(
        c,
        [run.info.experiment_id],
        f"tags.refit_of = '{run.info.run_id}' and attributes.status = 'FINISHED'",
    )
    return found[0] if found else None


def refit(c: Any, parent: Any, run: Any) -> Any:
    """Train the refit of the cross-validated ``run`` (the sweep's best) unless it exists; return
    its run (None when ``run`` is not cross-validated, or its configuration cannot be read back)."""
    if run is None or not crossval.of_run(run.data.tags):
        return None
    done = existing(c, run)
    if done is not None:
        return done
    job_dir = run.data.tags.get("hydra.job_dir")
    config_file = Path(job_dir) / "config_resolved.yaml" if job_dir else None
    if config_file is None or not config_file.is_file():
        log.warning(
            "no refit of run %s: its config_resolved.yaml is not in %s", run.info.run_id, job_dir
        )
        return None

    # lazy: saves ~264 ms at this module's import (measured)
    from sweeper.job.context import JobContext
    from sweeper.job.record import run as run_job

    plain = crossval.refit_config(yaml.safe_load(config_file.read_text()))
    sweep_dir = Path(parent.data.tags.get("sweep_dir") or Path(job_dir).parent)
    # two levels below the sweep folder: its */result.json are the
    # sweep's jobs, the refit is none of them
    ctx = JobContext(
        output_dir=sweep_dir / "refit" / run.info.run_id,
        overrides=crossval.refit_overrides(run.data.tags.get("overrides", "")),
    )
    quiet, level = logging.getLogger("sweeper"), logging.getLogger("sweeper").level
    # its job line and its split (validation = training rows, as asked): the caller says it
    quiet.setLevel(logging.ERROR)
    try:
        result = run_job(OmegaConf.create(plain), ctx)
    finally:
        quiet.setLevel(level)
    if not result.get("run_id"):
        return None
    # diverged on all the rows: best_run stays the cross-validated run
    if result.get("status") != "FINISHED":
        log.warning(
            "the refit of run %s ended %s: %s",
            run.info.run_id,
            result.get("status"),
            result.get("reason"),
        )
        c.set_tag(result["run_id"], "refit_failed_of", run.info.run_id)
        return None
    c.update_run(result["run_id"], name=f"refit {run.info.run_name}")
    c.set_tag(result["run_id"], "refit_of", run.info.run_id)
    c.set_tag(result["run_id"], "refit_sweep", parent.info.run_id)
    c.set_tag(
        result["run_id"],
        "mlflow.note.content",
        f"Refit of run {run.info.run_id} ({crossval.described(run.data.tags)}, "
        f"the best of sweep {parent.info.run_id}): trained on every non-test row "
        f"({' '.join(crossval.REFIT_OVERRIDES)}), scored on the test split; its val_* metrics are "
        "of its training rows.",
    )
    return c.get_run(result["run_id"])


def for_parent(c: Any, parent: Any, run: Any, out: Any) -> Any:
    """The refit of the sweep's best ``run`` when it is cross-validated (:func:`refit`), else
    None; a refit that fails is said in one line and leaves best_run at the cross-validated run."""
    if run is None:
        return None
    return stop.extra(f"refit of run {run.info.run_id}", out, refit, c, parent, run)


def parent_record(
    best: dict[str, Any], refitted: Any, metric: str, uri: str, out: Any
) -> tuple[dict[str, str], dict[str, float], str]:
    """What the sweep's parent records of the refit of its best row ``best`` (the leaderboard's):
    the tags (best_run and best_model_uri ``uri`` are the refit's, best_cv_run_id the run that
    won), the metric ``best_test_<metric>``, and the line of its description; the line said on
    ``out``."""
    tags = {
        "best_cv_run_id": best["run_id"],
        "best_run_id": refitted.info.run_id,
        "best_run": refitted.info.run_name or "",
        "best_model_uri": uri,
    }
    test = refitted.data.metrics.get(f"test_{metric}")
    metrics = {f"best_test_{metric}": test} if f"test_{metric}" in refitted.data.metrics else {}
    note = (
        f"**Refit** on every non-test row: [{refitted.info.run_name}]"
        f"({run_path(refitted.info.experiment_id, refitted.info.run_id)}) test_{metric}="
        f"{cell(test)}, model `{uri}`\n\n"
    )
    print(
        f"refit: {best['run']} retrained on every non-test row (train + validation, "
        f"{' '.join(crossval.REFIT_OVERRIDES)}) and scored on the test split: test_{metric}="
        f"{cell(test)} (run {refitted.info.run_id}); the parent's best_run and best_model_uri "
        "point to it",
        file=out,
    )
    return tags, metrics, note

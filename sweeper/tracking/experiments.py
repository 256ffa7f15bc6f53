"""The store's experiments (created with their artifacts beside the store,
refused where MLflow put them elsewhere) and finding runs in them."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable
from urllib.parse import unquote, urlsplit

from sweeper.base import state
from sweeper.base.tags import CONFIG_FINGERPRINT, DATA_SHA256, PRUNED_AT
from sweeper.base.files import sqlite_path
from sweeper.tracking.store import TrackingError, artifact_location

__all__ = [
    "DEFAULT_EXPERIMENT",
    "EXPERIMENT_KIND",
    "EXPERIMENT_TAGS",
    "check_new_default",
    "experiment_id",
    "finished_run",
    "named_experiment",
    "new_store_artifact_root",
    "other_versions",
]


# What kind of experiment this is, for MLflow's own tools and UIs that read it. MLflow
# 3.17's UI does not: it chooses its GenAI or its model-training views from the page address
# (sweep.UI_VIEW, in every address sweeper prints) or from what the browser chose last.
EXPERIMENT_KIND = "mlflow.experimentKind"
EXPERIMENT_TAGS = MappingProxyType({EXPERIMENT_KIND: "custom_model_development"})
# MLflow's own (mlflow.entities.Experiment.DEFAULT_EXPERIMENT_NAME), made with a store
DEFAULT_EXPERIMENT = "Default"


def experiment_id(c: Any, name: str, uri: str, in_sweep: bool = False) -> str:
    """The id of experiment ``name``, created with an absolute artifact location if it is
    new; ``in_sweep``: as the sweep's start found it (the sweep's state keeps it,
    :mod:`sweeper.base.state`: its jobs do not ask the store again, ~2.5 ms a job on SQLite)."""
    if not in_sweep:
        return _experiment_id(c, name, uri)
    key, found = (uri, name), state.current().experiments
    if key not in found:
        found[key] = _experiment_id(c, name, uri)
    return found[key]


def _experiment_id(c: Any, name: str, uri: str) -> str:
    # lazy: saves ~3116 ms at this module's import (measured)
    from mlflow.exceptions import MlflowException

    exp = c.get_experiment_by_name(name)
    if exp is None:
        try:
            note = {
                "mlflow.note.content": f"Runs of python -m sweeper on {name}: a sweep's parent "
                "run holds its "
                "leaderboard (its description), each child one configuration (params: its "
                "hyperparameters)."
            }
            return c.create_experiment(
                name, artifact_location=artifact_location(uri, name), tags=EXPERIMENT_TAGS | note
            )
        except MlflowException:  # created meanwhile by another process
            exp = c.get_experiment_by_name(name)
            if exp is None:
                raise
    if exp.lifecycle_stage == "deleted":
        raise TrackingError(
            f"tracking.experiment={name} is deleted in {uri}: restore it "
            f"(mlflow experiments restore --experiment-id {exp.experiment_id}) or choose another "
            "name"
        )
    outside = _artifacts_outside(exp, uri)
    if outside:
        raise _outside(name, outside)
    return exp.experiment_id


def _outside(name: str, outside: str, new: bool = False) -> TrackingError:
    where = (
        "outside the store folder"
        if Path(outside).is_absolute()
        else "a path relative to the folder each command runs in"
    )
    made = (
        "would keep its artifacts in {0}, {1} (MLflow makes a new store's Default experiment "
        "there: under the "
        "folder the command runs in)"
        if new
        else "keeps its artifacts in {0}, {1} (MLflow made its Default "
        "experiment there: under the folder the store was first opened from)"
    ).format(outside, where)
    return TrackingError(
        f"tracking.experiment={name} {made}: choose another name (sweeper creates an experiment "
        "with "
        "its artifacts beside the store)"
    )


def check_new_default(uri: str, name: str) -> None:
    """MLflow's Default experiment in an embedded store that does not exist yet: MLflow
    will put its artifacts under ``./mlruns/0`` of the folder this command runs in (its
    default artifact root). Outside the store's folder, that is refused now, as
    :func:`experiment_id` would refuse it once the store is made: the refusal leaves no
    new store behind (before, ``d.db`` with its ``-wal``, ``-shm`` and ``.lock``)."""
    db = sqlite_path(uri)
    if name != DEFAULT_EXPERIMENT or db is None or db.exists():
        return
    root = Path(new_store_artifact_root())
    if not root.resolve().is_relative_to(db.resolve().parent):
        raise _outside(name, str(root.absolute() / "0"), new=True)


def new_store_artifact_root() -> str:
    """Where MLflow puts the artifacts of a new embedded store's Default experiment
    (its ``/0``) when no artifact root is given, as an absolute path: ``./mlruns``
    of the working directory (``DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH``)."""

    # lazy: saves ~5288 ms at this module's import (measured)
    from mlflow.store.tracking import DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH

    return os.path.abspath(DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH)


def _artifacts_outside(exp: Any, uri: str) -> str | None:
    """Where the embedded store's experiment ``exp`` keeps its artifacts when that is
    a relative path, or for MLflow's own Default experiment a folder outside the
    store's (``./mlruns/0`` of the first command's working directory); None otherwise
    (a server decides; an experiment made elsewhere on purpose keeps its place)."""

    db, where = sqlite_path(uri), exp.artifact_location or ""
    if db is None:
        return None
    parts = urlsplit(where)
    if parts.scheme not in ("", "file"):
        return None
    path = Path(unquote(parts.path) if parts.scheme else where)
    if not path.is_absolute():
        return where
    inside = path.resolve().is_relative_to(db.resolve().parent)
    return str(path) if exp.experiment_id == "0" and not inside else None


def named_experiment(c: Any, name: str, uri: str) -> Any:
    """The active experiment ``name`` of a store, or TrackingError naming the ones that exist."""
    exp = c.get_experiment_by_name(name)
    if exp is None or exp.lifecycle_stage == "deleted":
        names = ", ".join(e.name for e in c.search_experiments()) or "none"
        raise TrackingError(f"--experiment={name} does not exist in {uri}: expected one of {names}")
    return exp


def finished_run(
    c: Any,
    experiment: str,
    fingerprint: str,
    device: str,
    pruned: Callable[[dict[str, str]], str | None] | None = None,
    say: bool = False,
) -> str | None:
    """The id of a FINISHED run of this configuration (fingerprint) on this
    device, if the experiment has one. A run the sweep's strategy stopped early (tag
    ``pruned_at_epoch``) counts only where ``pruned`` (its rule, asked of the run's tags:
    :func:`sweeper.sweep.pruning.resume_rule`) says None, else why not; without a rule it never
    counts. ``say``: one line when such a run is passed over."""
    found = c.search_runs(
        [experiment],
        f"tags.fingerprint = '{fingerprint}' and tags.device = '{device}' and attributes.status "
        "= 'FINISHED'",
        max_results=50,
    )
    for run in found:
        tags = run.data.tags
        if PRUNED_AT not in tags or (pruned is not None and pruned(tags) is None):
            return run.info.run_id
    if found and say:
        tags = found[0].data.tags
        why = pruned(tags) if pruned is not None else None
        logging.getLogger("sweeper").info(
            "resume: run %s %s",
            found[0].info.run_id,
            why or f"stopped at epoch {tags[PRUNED_AT]}: the configuration trains again",
        )
    return None


def other_versions(
    c: Any, experiment: str, config_fingerprint: str, device: str, sha256: str | None
) -> list[Any]:
    """The FINISHED runs of a configuration on this device (its fingerprint without its
    data file's content: ``config_fingerprint``) that read another version of that file
    than ``sha256``, or one not recorded (a run from before sweeper hashed data files:
    its fingerprint is the configuration's alone). ``resume=true`` reuses none."""
    where = f"tags.device = '{device}' and attributes.status = 'FINISHED'"
    found = {
        r.info.run_id: r
        for key in (CONFIG_FINGERPRINT, "fingerprint")
        for r in c.search_runs(
            [experiment], f"tags.{key} = '{config_fingerprint}' and {where}", max_results=50
        )
    }
    return [r for r in found.values() if r.data.tags.get(DATA_SHA256) != sha256]

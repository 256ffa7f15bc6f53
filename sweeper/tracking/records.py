"""A run's records: created with its tags, ended with one ``log_batch`` of params,
metrics, system metrics and loss curves (at most ``curve_points`` of each), its
data sets, artifacts, logged model and status; the Model Registry. Every call
takes the store's client ``c`` (:func:`sweeper.tracking.store.client`)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shlex
import subprocess
import time
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from sweeper import ROOT
from sweeper.base import state
from sweeper.base.output import masked
from sweeper.base.tags import RERUN

__all__ = [
    "BATCH",
    "CHAMPION",
    "LOST_MODEL",
    "CONTEXTS",
    "CURVE_POINTS",
    "MODEL_RUN_NAME",
    "NOT_PARAMS",
    "PARAM_BATCH",
    "copy_files",
    "copy_model",
    "dataset_inputs",
    "finish_run",
    "flatten",
    "git_commit",
    "log_metrics",
    "log_models",
    "missing_tag",
    "register",
    "search",
    "source_tags",
    "split_params",
    "start_run",
    "thin",
]


BATCH = 1000  # MLflow's limit of metrics per log_batch call


PARAM_BATCH = 100

MODEL_RUN_NAME = "run_name"  # a logged model's tag: the name of the run that logged it


# Points of each loss curve sent to MLflow (tracking.curve_points): as many as the default
# run samples (5000 epochs / log_every 50), so a longer run costs MLflow no more rows (~55
# µs each on SQLite) and charts the same. Every sample is in the run's curves.npz artifact.
CURVE_POINTS = 100


def thin(steps: Any, values: Any, points: int) -> tuple[list[int], list[float]]:
    """At most ``points`` (plus the last) evenly strided samples of a
    curve; ``points`` = 0 keeps all."""
    steps, values = list(steps), list(values)
    if points <= 0 or len(steps) <= points:
        return steps, values
    stride = -(-len(steps) // points)
    keep = list(range(0, len(steps), stride))
    if keep[-1] != len(steps) - 1:
        keep.append(len(steps) - 1)
    return [steps[i] for i in keep], [values[i] for i in keep]


@lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The checkout's commit (once per process: jobs of an in-process multirun share it)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"data": {"name": "xor"}}`` → ``{"data.name": "xor"}``."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


# Config keys that say how a run executes or is recorded, not what it computes: tags,
# not params (hyperparameters). baselines: references fitted once at a sweep's end, not
# part of any run (a run made with baselines=linear,boosting is the same configuration
# as one made without it; the parent says which were fitted: its baseline_<name> tags)
NOT_PARAMS = ("tracking.", "resume", "sync_every_epoch", "model.check", "baselines")


def split_params(plain: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """A run's config as (params: the hyperparameters and the data node,
    flattened; tags: the tracking, resume and sync settings, ``config.<key>``)."""
    # lazy: saves ~211 ms at this module's import (measured)
    from sweeper.models.interface import offer, top_level_keys

    # a model whose hyperparameters are the top-level keys (sweeper's MLP): its model
    # section adds nothing, as before the model group; a model of the interface:
    # model._target_ and model.<name>, and the default model's keys do not
    skip = ("model.",) if offer(plain.get("model"), quiet=True).top_level else top_level_keys()
    flat = {k: v for k, v in flatten(plain).items() if not k.startswith(skip)}
    params = {k: v for k, v in flat.items() if not k.startswith(NOT_PARAMS)}
    # data.folds=0 (one split, the default): the params of a run from before folds
    if not params.get("data.folds", 1):
        params.pop("data.folds")
    return params, {f"config.{k}": str(v) for k, v in flat.items() if k not in params}


def source_tags(command: list[str]) -> dict[str, str]:
    """MLflow's source fields: a short name (``mlflow.source.name``: ``python -m sweeper``,
    ``-m`` added for a sweep; the UI's Source column shows the last ``/``-part of it, which
    of a whole command was a cut path), its type and the user; and the command that re-runs
    it whole (``sweeper.rerun``)."""
    # lazy: saves ~1.6 ms at this module's import (measured)
    import getpass

    try:
        user = getpass.getuser()
    # no user name in this environment (a container without one: pwd's KeyError; OSError from 3.13)
    except (ImportError, KeyError, OSError):
        user = "unknown"
    short = " ".join(command[:3] + (["-m"] if command[3:4] == ["-m"] else []))
    return {
        "mlflow.source.name": short,
        RERUN: shlex.join(command)[:5000],
        "mlflow.source.type": "LOCAL",
        "mlflow.user": user,
    }


def _quality_first(name: str) -> int:
    """Metrics in the order logged: validation, test, then the rest (times, counts), so
    MLflow's views (which take the first metric the runs share) open on ``val_*``."""
    return 0 if name.startswith("val_") else 1 if name.startswith("test_") else 2


def start_run(
    c: Any,
    experiment: str,
    name: str,
    tags: Mapping[str, str],
    params: Mapping[str, Any] | None = None,
    parent_run_id: str | None = None,
    start_time: int | None = None,
) -> str:
    """Create a run (a child when ``parent_run_id`` is given) with its tags
    and params; return its id. Its start is now, or ``start_time`` (ms since
    the epoch: a batched member's run opened after its group began)."""
    # lazy: saves ~4086 ms at this module's import (measured)
    from mlflow.entities import Param

    run = c.create_run(
        experiment, run_name=name, tags=_run_tags(tags, parent_run_id), start_time=start_time
    )
    state.current().runs[run.info.run_id] = (run.info.artifact_uri, run.info.experiment_id)
    items = [Param(k, str(v)) for k, v in (params or {}).items()]
    for i in range(0, len(items), PARAM_BATCH):
        c.log_batch(run.info.run_id, params=items[i : i + PARAM_BATCH])
    return run.info.run_id


def _run_tags(tags: Mapping[str, Any], parent_run_id: str | None) -> dict[str, str]:
    """A new run's tags as text: ``tags``, its parent's id (a child
    run) and the checkout's commit."""
    out = {**tags, **({"mlflow.parentRunId": parent_run_id} if parent_run_id else {})}
    commit = git_commit()
    if commit:
        out["mlflow.source.git.commit"] = commit
    # the command line and overrides without a URI's password
    return {k: masked(str(v)) for k, v in out.items()}


def log_metrics(c: Any, run_id: str, metrics: Mapping[str, float]) -> None:
    """Log a few metrics in one call (also on a run that has already ended)."""
    # lazy: saves ~4128 ms at this module's import (measured)
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    c.log_batch(run_id, metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()])


# Dataset contexts (MLflow's ``mlflow.data.context`` input tag) and the prefix of the
# metrics scored on each (training has none: train_time_s is a time, train_loss a curve).
CONTEXTS = MappingProxyType({"training": None, "validation": "val_", "test": "test_"})


def dataset_inputs(name: str, source: str, splits: Mapping[str, tuple[Any, Any]]) -> list[Any]:
    """The data sets of a run as MLflow inputs: one per context (``CONTEXTS``: split → (X,
    y)), named ``name``, with a digest of its arrays and its source (a file's path,
    ``local``; else the bundled data set's name, ``code``). Built from MLflow's
    entities directly: ``mlflow.data.from_numpy`` would cost a schema inference per split."""

    # lazy: saves ~3740 ms at this module's import (measured)
    from mlflow.entities import Dataset, DatasetInput, InputTag

    if Path(source).is_file():
        source_type, source_json = "local", json.dumps({"uri": Path(source).resolve().as_uri()})
    else:
        source_type, source_json = "code", json.dumps({"tags": {"sweeper.data": source}})
    out = []
    for context, (X, y) in splits.items():
        h = hashlib.md5()
        for a in (X, y):
            h.update(str(a.shape).encode())
            # a sparse matrix: its arrays
            parts = (a.data, a.indices, a.indptr) if hasattr(a, "indptr") else (a,)
            for part in parts:
                h.update(memoryview(part).cast("B") if part.flags.c_contiguous else part.tobytes())
        profile = {"num_rows": int(X.shape[0]), "num_features": int(X.shape[1])}
        dataset = Dataset(
            name, h.hexdigest()[:8], source_type, source_json, profile=json.dumps(profile)
        )
        out.append(DatasetInput(dataset, [InputTag("mlflow.data.context", context)]))
    return out


def finish_run(
    c: Any,
    run_id: str,
    metrics: Mapping[str, float],
    curves: Mapping[str, tuple[Iterable[int], Iterable[float]]] = (),
    artifacts: Iterable[Path] = (),
    models: Mapping[str, Path] | None = None,
    tags: Mapping[str, str] | None = None,
    status: str = "FINISHED",
    curve_points: int = CURVE_POINTS,
    system: Iterable[Any] = (),
    params: Mapping[str, Any] | None = None,
    datasets: Iterable[Any] = (),
) -> None:
    """Log final metrics, curves (metric name → (steps, values), each thinned to ``curve_points``),
    the system metrics a sampler kept (``system``), params and tags, all in as few
    ``log_batch`` calls as MLflow's limits allow (one, for a run of ours); the run's data
    sets (``datasets``, from :func:`dataset_inputs`); artifact files; MLflow 3 logged
    models (name → local model folder), each linked to the run as its output and to the
    final metrics (which also name the data set they were scored on); end the run."""
    # lazy: saves ~4195 ms at this module's import (measured)
    from mlflow.entities import LoggedModelOutput, Param, RunTag

    now = int(time.time() * 1000)
    datasets = list(datasets)
    logged, lost = log_models(c, run_id, dict(models or {}), params)
    # the files: one its job folder lost (deleted under the sweep) is said in a tag, the run ends
    artifacts = list(artifacts)
    missing = (copy_files(_artifact_repo(c, run_id), artifacts) if artifacts else []) + lost
    tags = dict(tags or {}) | missing_tag(artifacts, missing)
    model_id = next(iter(logged.values())) if len(logged) == 1 else None
    items = _last_batch(
        now,
        dict(
            metrics=metrics,
            curves=curves,
            curve_points=curve_points,
            system=system,
            datasets=datasets,
        ),
        model_id,
    )
    ps = [Param(k, str(v)) for k, v in (params or {}).items()]
    ts = [RunTag(k, str(v)) for k, v in tags.items()]
    for i in range(
        max(-(-len(items) // BATCH), -(-len(ps) // PARAM_BATCH), -(-len(ts) // PARAM_BATCH))
    ):
        c.log_batch(
            run_id,
            metrics=items[i * BATCH : (i + 1) * BATCH],
            params=ps[i * PARAM_BATCH : (i + 1) * PARAM_BATCH],
            tags=ts[i * PARAM_BATCH : (i + 1) * PARAM_BATCH],
        )
    if datasets:
        _log_inputs(c, run_id, datasets)
    if logged:
        c.log_outputs(run_id, [LoggedModelOutput(m, step=0) for m in logged.values()])
    c.set_terminated(run_id, status)
    state.current().runs.pop(run_id, None)


def log_models(
    c: Any,
    run_id: str,
    models: Mapping[str, Path],
    params: Mapping[str, Any] | None = None,
) -> tuple[dict[str, str], list[str]]:
    """A run's MLflow 3 logged models (name → local model folder) through MLflow's own calls: each
    created with the run's params and a tag of its run's name, its files copied
    (:func:`copy_model`) and finalized READY; one whose folder is gone FAILED and said in the
    second list (for :func:`missing_tag`). The models' ids by name (none: no call)."""
    # lazy: saves ~4195 ms at this module's import (measured)
    from mlflow.entities import LoggedModelStatus

    if not models:
        return {}, []
    # each model also says its run's name: the UI's Models tab finds
    # it by ``tags.run_name = '<run name>'`` (its own name stays
    # ``model``, which runs:/<run id>/model resolves)
    named = {MODEL_RUN_NAME: c.get_run(run_id).info.run_name or ""}
    logged = {
        name: c.create_logged_model(
            _run_info(c, run_id)[1],
            name,
            run_id,
            tags=named,
            params={k: str(v) for k, v in (params or {}).items()},
        )
        for name in models
    }
    lost = []
    for name, model in logged.items():
        if copy_model(c, models[name], model.model_id, run_id, model.artifact_location):
            c.finalize_logged_model(model.model_id, LoggedModelStatus.READY)
        else:
            lost.append(LOST_MODEL.format(name))
            c.finalize_logged_model(model.model_id, LoggedModelStatus.FAILED)
    return {name: model.model_id for name, model in logged.items()}, lost


LOST_MODEL = "{} (the logged model)"  # a model whose folder was gone, as the missing tag names it


def copy_model(c: Any, folder: Path, model_id: str, run_id: str, location: str) -> bool:
    """A logged model's files: its MLmodel stamped with its id and run (:func:`_stamp`), its
    folder copied to its artifact ``location``; False when the folder is gone (MLflow's local
    ``log_artifacts`` copies nothing from a missing folder and raises nothing: checked first)."""
    # lazy: saves ~4368 ms at this module's import (measured)
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    if not folder.is_dir():
        return False
    try:
        _stamp(folder, model_id, run_id)
        get_artifact_repository(location, tracking_uri=c.tracking_uri).log_artifacts(str(folder))
    except FileNotFoundError:
        return False
    return True


def copy_files(repo: Any, paths: Iterable[Path]) -> list[str]:
    """Copy files into a run's artifact repository; the names of those that are gone (their
    job folder deleted under the sweep after the job kept them), which are left out."""
    missing = []
    for path in paths:
        try:
            repo.log_artifact(str(path))
        except FileNotFoundError:
            missing.append(Path(path).name)
    return missing


def missing_tag(paths: Iterable[Path], missing: list[str]) -> dict[str, str]:
    """The tag that says which of a run's files were not recorded (none: no tag)."""
    if not missing:
        return {}
    folder = next((Path(p).parent for p in paths), None)
    where = f"its job folder {folder}" if folder else "its job folder"
    return {
        "artifacts_missing": (
            f"{where} was deleted before these files were recorded: {', '.join(missing)}"
        )
    }


def _last_batch(now: int, end: Mapping[str, Any], model_id: str | None = None) -> list[Any]:
    """A run's last metrics (:func:`finish_run`'s ``metrics``, each naming
    the data set it was scored on and the logged model, validation first),
    its system samples and its curves thinned to ``curve_points``."""
    # lazy: saves ~4128 ms at this module's import (measured)
    from mlflow.entities import Metric

    metrics = end.get("metrics") or {}
    scored_on = {
        CONTEXTS[d.tags[0].value]: d.dataset
        for d in end.get("datasets") or ()
        if d.tags and CONTEXTS.get(d.tags[0].value)
    }

    def final(k: str, v: float) -> Any:
        d = next((d for prefix, d in scored_on.items() if k.startswith(prefix)), None)
        return Metric(
            k,
            float(v),
            now,
            0,
            model_id=model_id,
            dataset_name=d and d.name,
            dataset_digest=d and d.digest,
        )

    items = [final(k, metrics[k]) for k in sorted(metrics, key=_quality_first)] + list(
        end.get("system") or ()
    )
    for name, (steps, values) in dict(end.get("curves") or {}).items():
        items += [
            Metric(name, float(v), now, int(s))
            for s, v in zip(*thin(steps, values, end.get("curve_points", CURVE_POINTS)))
        ]
    return items


def _log_inputs(c: Any, run_id: str, datasets: list[Any], attempts: int = 4) -> None:
    """``log_inputs``, again when a concurrent run (another joblib worker, a second sweep)
    inserted the same new data set between MLflow's check and its insert: the store refuses
    the second insert as a duplicate (SQLite "UNIQUE constraint failed", PostgreSQL
    "duplicate key", MySQL "Duplicate entry"), rolled back whole; the next attempt finds
    the data set and links this run to it. Reproduced: two joblib workers whose first jobs
    ended at once; 4 threads ending runs on one new data set, 16 failures in 10 rounds."""
    # lazy: saves ~3949 ms at this module's import (measured)
    from mlflow.exceptions import MlflowException

    for attempt in range(attempts):
        try:
            c.log_inputs(run_id, datasets=datasets)
            return
        except MlflowException as e:
            text = str(e).lower()
            if attempt == attempts - 1 or not ("unique constraint" in text or "duplicate" in text):
                raise
            time.sleep(0.02 * (attempt + 1))


# the Model Registry alias promote --register moves to the promoted run's model
CHAMPION = "champion"


def register(c: Any, run_id: str, name: str, alias: str = CHAMPION) -> Any:
    """Register the model of run ``run_id`` as a new version of registered model ``name``
    (created if new) and point ``alias`` at it; return the ModelVersion. The run's logged
    model is the source (a run from before logged models: its ``model/`` artifacts).
    MLflow resolves a ``models:/<id>`` source in the *current* tracking URI, so it is the
    client's store during the call. When any step fails, what this call created is
    deleted again (the version, the registered model it created) and the error raised."""
    # lazy: saves ~3949 ms at this module's import (measured)
    from mlflow.exceptions import MlflowException

    outputs = c.get_run(run_id).outputs
    model_id = next((o.model_id for o in (outputs.model_outputs if outputs else [])), None)
    source = f"models:/{model_id}" if model_id else f"runs:/{run_id}/model"
    created, version, done = False, None, False
    with _current_uri(c.tracking_uri):
        try:
            try:
                c.create_registered_model(name)
                created = True
            except MlflowException as e:
                if e.error_code != "RESOURCE_ALREADY_EXISTS":
                    raise
            version = c.create_model_version(name, source, run_id=run_id, model_id=model_id)
            c.set_registered_model_alias(name, alias, version.version)
            done = True
        finally:  # any exception (Ctrl-C too): what was created is deleted, and it is raised on
            # (a store that is down: nothing more to undo here)
            if not done:
                with contextlib.suppress(MlflowException, OSError):
                    if created:
                        c.delete_registered_model(name)
                    elif version is not None:
                        c.delete_model_version(name, version.version)
    return version


def _current_uri(uri: str) -> Any:
    """A context in which MLflow's current tracking URI is ``uri`` (restored after): the public
    ``mlflow.set_tracking_uri``, where MLflow's own context for it is private
    (``_use_tracking_uri``)."""

    # lazy: saves ~3750 ms at this module's import (measured)
    import mlflow

    @contextlib.contextmanager
    def use() -> Any:
        before = mlflow.get_tracking_uri()
        mlflow.set_tracking_uri(uri)
        try:
            yield
        finally:
            mlflow.set_tracking_uri(before)

    return use()


def _stamp(folder: Path, model_id: str, run_id: str) -> None:
    """Write the logged model's id and its run into the folder's MLmodel file, as ``log_model`` does
    (``save_model`` writes ``model_id: null`` and no run); a line edit, not a YAML round
    trip (~3 ms)."""
    mlmodel = folder / "MLmodel"
    if mlmodel.is_file():
        text = re.sub(r"^(model_id|run_id):.*\n", "", mlmodel.read_text(), flags=re.M)
        mlmodel.write_text(f"{text}model_id: {model_id}\nrun_id: {run_id}\n")


def _run_info(c: Any, run_id: str) -> tuple[str, str]:
    """A run's artifact URI and experiment id (of a run this process
    created, as the sweep's state keeps it)."""
    runs = state.current().runs
    if run_id not in runs:
        info = c.get_run(run_id).info
        return info.artifact_uri, info.experiment_id
    return runs[run_id]


def _artifact_repo(c: Any, run_id: str) -> Any:
    """Where a run's artifacts go, as ``MlflowClient.log_artifact`` finds it,
    without asking the store again for a run that :func:`start_run` created."""
    # lazy: saves ~4368 ms at this module's import (measured)
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    uri = _run_info(c, run_id)[0]
    return get_artifact_repository(uri, tracking_uri=c.tracking_uri)


def search(c: Any, experiment_ids: list[str], filter_string: str = "") -> list[Any]:
    """Every run matching ``filter_string`` in the experiments, all pages."""
    runs, token = [], None
    while True:
        page = c.search_runs(experiment_ids, filter_string, max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs

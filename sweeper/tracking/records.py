"""A run's records: created with its tags, ended with one ``log_batch`` of params, metrics, system metrics and
loss curves (at most ``curve_points`` of each), its data sets, artifacts, logged model and status; the Model
Registry. Every call takes the store's client ``c`` (:func:`sweeper.tracking.store.client`)."""
from __future__ import annotations

import re
import subprocess
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

from sweeper import ROOT


BATCH = 1000  # MLflow's limit of metrics per log_batch call



PARAM_BATCH = 100



# Points of each loss curve sent to MLflow (tracking.curve_points): as many as the default run samples
# (5000 epochs / log_every 50), so a longer run costs MLflow no more rows (~55 µs each on SQLite) and
# charts the same. Every sample is in the run's curves.npz artifact.
CURVE_POINTS = 100



def thin(steps: Any, values: Any, points: int) -> tuple[list[int], list[float]]:
    """At most ``points`` (plus the last) evenly strided samples of a curve; ``points`` = 0 keeps all."""
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
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
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



# Config keys that say how a run executes or is recorded, not what it computes: tags, not params (hyperparameters).
NOT_PARAMS = ("tracking.", "resume", "sync_every_epoch")


def split_params(plain: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """A run's config as (params: the hyperparameters and the data node, flattened; tags: the tracking, resume
    and sync settings, ``config.<key>``)."""
    flat = flatten(plain)
    params = {k: v for k, v in flat.items() if not k.startswith(NOT_PARAMS)}
    return params, {f"config.{k}": str(v) for k, v in flat.items() if k not in params}


def source_tags(command: list[str]) -> dict[str, str]:
    """MLflow's source fields: the command (``mlflow.source.name``), its type and the user."""
    import getpass
    import shlex

    try:
        user = getpass.getuser()
    except Exception:  # no user name in this environment (a container without one)
        user = "unknown"
    return {"mlflow.source.name": shlex.join(command)[:500], "mlflow.source.type": "LOCAL", "mlflow.user": user}


def _quality_first(name: str) -> int:
    """Metrics in the order logged: validation, test, then the rest (times, counts), so MLflow's views (which take
    the first metric the runs share) open on ``val_*``."""
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
    """Create a run (a child when ``parent_run_id`` is given) with its tags and params; return its id. Its start
    is now, or ``start_time`` (ms since the epoch: a batched member's run opened after its group began)."""
    from mlflow.entities import Param

    run = c.create_run(experiment, run_name=name, tags=_run_tags(tags, parent_run_id), start_time=start_time)
    _runs[run.info.run_id] = (run.info.artifact_uri, run.info.experiment_id)
    items = [Param(k, str(v)) for k, v in (params or {}).items()]
    for i in range(0, len(items), PARAM_BATCH):
        c.log_batch(run.info.run_id, params=items[i : i + PARAM_BATCH])
    return run.info.run_id



def _run_tags(tags: Mapping[str, Any], parent_run_id: str | None) -> dict[str, str]:
    """A new run's tags as text: ``tags``, its parent's id (a child run) and the checkout's commit."""
    out = {**tags, **({"mlflow.parentRunId": parent_run_id} if parent_run_id else {})}
    commit = git_commit()
    if commit:
        out["mlflow.source.git.commit"] = commit
    return {k: str(v) for k, v in out.items()}


# Rows a statement touches at most (SQLite's bound-parameter limit).
SQL_CHUNK = 500


def _sql_store(c: Any) -> Any:
    """The client's store when it is MLflow's SQLAlchemy store (the embedded SQLite one, or a database URI) whose
    internals the calls below write through (its ORM models, its checks), else None: then MLflow's public calls."""
    store = getattr(getattr(c, "_tracking_client", None), "store", None)
    try:
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
        from mlflow.store.tracking.dbmodels.models import SqlParam, SqlRun, SqlTag  # noqa: F401
        from mlflow.utils.validation import _validate_param, _validate_tag  # noqa: F401
    except ImportError:  # another MLflow's internals
        return None
    return store if isinstance(store, SqlAlchemyStore) else None


def creates_in_bulk(c: Any) -> bool:
    """Whether :func:`start_runs` creates many runs in one transaction on this client's store."""
    return _sql_store(c) is not None


def start_runs(c: Any, experiment: str, specs: list[Mapping[str, Any]]) -> list[str]:
    """:func:`start_run` for each spec (``name``, ``tags``, ``params``, ``parent_run_id``, ``start_time``); return
    the run ids in order. On the embedded (SQLAlchemy) store the runs are created in one transaction, all or none
    (~1 ms a run instead of ~30: MLflow's ``create_run`` re-reads the experiment and the new run's inputs, and
    commits each run, then ``log_batch`` its params); elsewhere (a server) one ``start_run`` after another."""
    store = _sql_store(c)
    if store is None:  # a server, or another MLflow's internals: its public calls, one run after another
        return [start_run(c, experiment, **spec) for spec in specs]
    import uuid

    from mlflow.entities import LifecycleStage, RunStatus, SourceType
    from mlflow.store.tracking.dbmodels.models import SqlParam, SqlRun, SqlTag
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from mlflow.utils.uri import append_to_uri_path
    from mlflow.utils.validation import _validate_param, _validate_tag

    experiment_entity = store.get_experiment(experiment)
    store._check_experiment_is_active(experiment_entity)
    now, made, runs, tag_rows, param_rows = int(time.time() * 1000), [], [], [], []
    for spec in specs:  # the rows SqlAlchemyStore.create_run and log_batch would write, checked as log_batch does
        tags = {"mlflow.runName": spec["name"], **_run_tags(spec["tags"], spec.get("parent_run_id"))}
        params = {k: str(v) for k, v in (spec.get("params") or {}).items()}
        tags = {t.key: t.value for t in (_validate_tag(k, v) for k, v in tags.items())}  # too long: truncated
        params = {p.key: p.value for p in (_validate_param(k, v) for k, v in params.items())}
        run_id = uuid.uuid4().hex
        artifact_uri = append_to_uri_path(experiment_entity.artifact_location, run_id,
                                          SqlAlchemyStore.ARTIFACTS_FOLDER_NAME)
        runs.append(dict(run_uuid=run_id, name=spec["name"], source_type=SourceType.to_string(SourceType.UNKNOWN),
                         source_name="", entry_point_name="", user_id=tags.get("mlflow.user", "unknown"),
                         status=RunStatus.to_string(RunStatus.RUNNING), start_time=spec.get("start_time") or now,
                         end_time=None, deleted_time=None, source_version="", lifecycle_stage=LifecycleStage.ACTIVE,
                         artifact_uri=artifact_uri, experiment_id=experiment))
        tag_rows += [dict(key=k, value=v, run_uuid=run_id) for k, v in tags.items()]
        param_rows += [dict(key=k, value=v, run_uuid=run_id) for k, v in params.items()]
        made.append((run_id, artifact_uri))
    if runs:
        with store.ManagedSessionMaker() as session:  # one transaction: the runs, their tags and params
            for table, rows in ((SqlRun.__table__, runs), (SqlTag.__table__, tag_rows), (SqlParam.__table__, param_rows)):
                if rows:
                    session.execute(table.insert(), rows)
    for run_id, artifact_uri in made:
        _runs[run_id] = (artifact_uri, str(experiment))
    return [run_id for run_id, _ in made]


def end_runs(c: Any, ends: list[tuple[str, str, str]]) -> None:
    """End runs that will get nothing more: each ``(run_id, status, reason)`` gets its ``failure_reason`` tag and
    ends ``status`` now (``set_tag`` + ``set_terminated``). On a SQL store in one transaction (a Ctrl-C during a
    group of 1,024 members ended its RUNNING runs ~20 ms each, one after another); elsewhere one run at a time."""
    store = _sql_store(c)
    if store is None:
        for run_id, status, reason in ends:
            c.set_tag(run_id, "failure_reason", reason)
            c.set_terminated(run_id, status)
        return
    from mlflow.store.tracking.dbmodels.models import SqlRun, SqlTag
    from mlflow.utils.validation import _validate_tag

    for _, _, reason in ends:
        _validate_tag("failure_reason", reason)
    now = int(time.time() * 1000)
    with store.ManagedSessionMaker() as session:
        for i in range(0, len(ends), SQL_CHUNK):
            part = ends[i : i + SQL_CHUNK]
            ids = [run_id for run_id, _, _ in part]
            session.query(SqlTag).filter(SqlTag.run_uuid.in_(ids), SqlTag.key == "failure_reason").delete(
                synchronize_session=False)
            session.execute(SqlTag.__table__.insert(),
                            [dict(key="failure_reason", value=reason, run_uuid=run_id) for run_id, _, reason in part])
            for status in {st for _, st, _ in part}:
                session.query(SqlRun).filter(SqlRun.run_uuid.in_([r for r, st, _ in part if st == status])).update(
                    {SqlRun.status: status, SqlRun.end_time: now}, synchronize_session=False)


def set_tag_on_runs(c: Any, run_ids: Iterable[str], key: str, value: str) -> None:
    """One tag set to one value on many runs: one statement on the embedded store, else one call a run."""
    run_ids = list(run_ids)
    store = _sql_store(c)
    if store is None:
        for run_id in run_ids:
            c.set_tag(run_id, key, value)
        return
    from mlflow.store.tracking.dbmodels.models import SqlTag

    with store.ManagedSessionMaker() as session:
        for i in range(0, len(run_ids), SQL_CHUNK):
            session.query(SqlTag).filter(SqlTag.run_uuid.in_(run_ids[i : i + SQL_CHUNK]), SqlTag.key == key).update(
                {SqlTag.value: value}, synchronize_session=False)


def child_runs(c: Any, experiment_ids: list[str], parent_run_id: str) -> list[Any]:
    """The active runs of ``experiment_ids`` whose ``mlflow.parentRunId`` is ``parent_run_id``, as MLflow's
    ``search_runs`` returns them (newest first; info, latest metrics, params, tags, data set inputs, logged-model
    outputs). On a SQL store read table by table into MLflow's entities: ``search_runs`` makes an ORM object of
    every tag, param and metric row and expunges them all at its commit (~4 s for 1,000 runs of ~50 each, the
    end of a 1,000-configuration sweep); elsewhere ``search_runs``, all pages."""
    store = _sql_store(c)
    if store is None or not all(hasattr(store, f) for f in ("_get_run_inputs", "_get_model_outputs_bulk")):
        from sweeper.tracking.store import search

        return search(c, experiment_ids, f"tags.`mlflow.parentRunId` = '{parent_run_id}'")
    from mlflow.entities import LifecycleStage, Metric, Param, Run, RunData, RunInfo, RunInputs, RunOutputs, RunTag
    from mlflow.store.tracking.dbmodels.models import SqlLatestMetric, SqlParam, SqlRun, SqlTag

    out = []
    with store.ManagedSessionMaker() as session:
        info = session.query(SqlRun.run_uuid, SqlRun.name, SqlRun.experiment_id, SqlRun.user_id, SqlRun.status,
                             SqlRun.start_time, SqlRun.end_time, SqlRun.lifecycle_stage, SqlRun.artifact_uri).join(
            SqlTag, SqlTag.run_uuid == SqlRun.run_uuid).filter(
            SqlTag.key == "mlflow.parentRunId", SqlTag.value == parent_run_id,
            SqlRun.experiment_id.in_([int(e) for e in experiment_ids]),
            SqlRun.lifecycle_stage == LifecycleStage.ACTIVE).order_by(SqlRun.start_time.desc(), SqlRun.run_uuid).all()
        for i in range(0, len(info), SQL_CHUNK):
            part = info[i : i + SQL_CHUNK]
            ids = [row[0] for row in part]
            tags: dict[str, list[Any]] = {r: [] for r in ids}
            params: dict[str, list[Any]] = {r: [] for r in ids}
            metrics: dict[str, list[Any]] = {r: [] for r in ids}
            for r, k, v in session.query(SqlTag.run_uuid, SqlTag.key, SqlTag.value).filter(SqlTag.run_uuid.in_(ids)):
                tags[r].append(RunTag(k, v))
            for r, k, v in session.query(SqlParam.run_uuid, SqlParam.key, SqlParam.value).filter(SqlParam.run_uuid.in_(ids)):
                params[r].append(Param(k, v))
            for r, k, v, ts, step, nan in session.query(
                    SqlLatestMetric.run_uuid, SqlLatestMetric.key, SqlLatestMetric.value, SqlLatestMetric.timestamp,
                    SqlLatestMetric.step, SqlLatestMetric.is_nan).filter(SqlLatestMetric.run_uuid.in_(ids)):
                metrics[r].append(Metric(k, float("nan") if nan else v, ts, step))
            inputs = store._get_run_inputs(run_uuids=ids, session=session)
            outputs = store._get_model_outputs_bulk(run_ids=ids, session=session)
            for j, (r, name, experiment, user, status, start, end, stage, artifact_uri) in enumerate(part):
                if not name:  # as SqlRun.to_mlflow_entity: the name from its tag
                    name = next((t.value for t in tags[r] if t.key == "mlflow.runName"), name)
                run_info = RunInfo(run_id=r, run_name=name, experiment_id=str(experiment), user_id=user, status=status,
                                   start_time=start, end_time=end, lifecycle_stage=stage, artifact_uri=artifact_uri)
                out.append(Run(run_info, RunData(metrics=metrics[r], params=params[r], tags=tags[r]),
                               RunInputs(dataset_inputs=inputs[j]), RunOutputs(outputs[r])))
    return out


def log_metrics(c: Any, run_id: str, metrics: Mapping[str, float]) -> None:
    """Log a few metrics in one call (also on a run that has already ended)."""
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    c.log_batch(run_id, metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()])



# Dataset contexts (MLflow's ``mlflow.data.context`` input tag) and the prefix of the metrics scored on each
# (training has none: train_time_s is a time, train_loss a curve).
CONTEXTS = {"training": None, "validation": "val_", "test": "test_"}



def dataset_inputs(name: str, source: str, splits: Mapping[str, tuple[Any, Any]]) -> list[Any]:
    """The data sets of a run as MLflow inputs: one per context (``CONTEXTS``: split → (X, y)), named
    ``name``, with a digest of its arrays and its source (a file's path, ``local``; else the bundled data
    set's name, ``code``). Built from MLflow's entities directly: ``mlflow.data.from_numpy`` would cost a
    schema inference per split."""
    import hashlib
    import json

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
            parts = (a.data, a.indices, a.indptr) if hasattr(a, "indptr") else (a,)  # a sparse matrix: its arrays
            for part in parts:
                h.update(memoryview(part).cast("B") if part.flags.c_contiguous else part.tobytes())
        profile = {"num_rows": int(X.shape[0]), "num_features": int(X.shape[1])}
        dataset = Dataset(name, h.hexdigest()[:8], source_type, source_json, profile=json.dumps(profile))
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
    the system metrics a sampler kept (``system``), params and tags, all in as few ``log_batch`` calls
    as MLflow's limits allow (one, for a run of ours); the run's data sets (``datasets``, from
    :func:`dataset_inputs`); artifact files; MLflow 3 logged models (name → local model folder), each
    linked to the run as its output and to the final metrics (which also name the data set they were
    scored on); end the run."""
    from mlflow.entities import LoggedModelOutput, LoggedModelStatus, Param, RunTag

    now = int(time.time() * 1000)
    datasets, models = list(datasets), dict(models or {})
    logged = {name: c.create_logged_model(_run_info(c, run_id)[1], name, run_id,
                                          params={k: str(v) for k, v in (params or {}).items()})
              for name, folder in models.items()}
    model_id = next(iter(logged.values())).model_id if len(logged) == 1 else None
    items = _last_batch(now, dict(metrics=metrics, curves=curves, curve_points=curve_points, system=system,
                                  datasets=datasets), model_id)
    ps = [Param(k, str(v)) for k, v in (params or {}).items()]
    ts = [RunTag(k, str(v)) for k, v in (tags or {}).items()]
    for i in range(max(-(-len(items) // BATCH), -(-len(ps) // PARAM_BATCH), -(-len(ts) // PARAM_BATCH))):
        c.log_batch(run_id, metrics=items[i * BATCH : (i + 1) * BATCH],
                    params=ps[i * PARAM_BATCH : (i + 1) * PARAM_BATCH], tags=ts[i * PARAM_BATCH : (i + 1) * PARAM_BATCH])
    if datasets:
        _log_inputs(c, run_id, datasets)
    if logged:
        c.log_outputs(run_id, [LoggedModelOutput(m.model_id, step=0) for m in logged.values()])
    artifacts = list(artifacts)
    if artifacts:
        repo = _artifact_repo(c, run_id)
        for path in artifacts:
            repo.log_artifact(str(path))
    for name, model in logged.items():
        from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

        _stamp(models[name], model.model_id, run_id)
        get_artifact_repository(model.artifact_location, tracking_uri=c.tracking_uri).log_artifacts(str(models[name]))
        c.finalize_logged_model(model.model_id, LoggedModelStatus.READY)
    c.set_terminated(run_id, status)
    _runs.pop(run_id, None)



def _last_batch(now: int, end: Mapping[str, Any], model_id: str | None = None) -> list[Any]:
    """A run's last metrics (:func:`finish_run`'s ``metrics``, each naming the data set it was scored on and the
    logged model, validation first), its system samples and its curves thinned to ``curve_points``."""
    from mlflow.entities import Metric

    metrics = end.get("metrics") or {}
    scored_on = {CONTEXTS[d.tags[0].value]: d.dataset for d in end.get("datasets") or ()
                 if d.tags and CONTEXTS.get(d.tags[0].value)}

    def final(k: str, v: float) -> Any:
        d = next((d for prefix, d in scored_on.items() if k.startswith(prefix)), None)
        return Metric(k, float(v), now, 0, model_id=model_id, dataset_name=d and d.name, dataset_digest=d and d.digest)

    items = [final(k, metrics[k]) for k in sorted(metrics, key=_quality_first)] + list(end.get("system") or ())
    for name, (steps, values) in dict(end.get("curves") or {}).items():
        items += [Metric(name, float(v), now, int(s))
                  for s, v in zip(*thin(steps, values, end.get("curve_points", CURVE_POINTS)))]
    return items


def ends_in_bulk(c: Any, ends: list[Mapping[str, Any]]) -> bool:
    """Whether :func:`finish_runs` ends runs with these :func:`finish_run` arguments in one transaction: on a SQL
    store, for runs without logged models (MLflow creates those through its own calls) nor a new run name."""
    return _sql_store(c) is not None and not any(
        e.get("models") or "mlflow.runName" in (e.get("tags") or {}) for e in ends)


def finish_runs(c: Any, ends: list[tuple[str, Mapping[str, Any]]]) -> None:
    """:func:`finish_run` for each ``(run_id, its arguments)``, when :func:`ends_in_bulk`: the artifacts copied,
    then every run's last batch (params, metrics with the latest-metric upkeep, tags), data sets and status
    written in one transaction, all or none — the rows MLflow's ``log_batch``, ``log_inputs`` and
    ``set_terminated`` write, checked as they check them (~65 ms a run one call after another on this machine:
    each call a transaction that re-reads the run). A run that is gone or deleted, or a param logged before with
    another value, raises as MLflow would, and nothing of the batch is written."""
    from mlflow.entities import LifecycleStage
    from mlflow.exceptions import MlflowException
    from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE, RESOURCE_DOES_NOT_EXIST
    from mlflow.store.tracking.dbmodels.models import (SqlDataset, SqlInput, SqlInputTag, SqlLatestMetric,
                                                       SqlMetric, SqlParam, SqlRun, SqlTag)
    from mlflow.utils.validation import (_validate_dataset_inputs, _validate_metric, _validate_param,
                                         _validate_tag)

    store = _sql_store(c)
    if store is None or not ends_in_bulk(c, [e for _, e in ends]):
        raise ValueError("finish_runs: these runs do not end in bulk on this store (ends_in_bulk)")
    import uuid

    now = int(time.time() * 1000)
    metrics, params, tags, datasets = {}, {}, {}, {}  # run id -> its rows, checked
    for run_id, end in ends:
        for path in end.get("artifacts") or ():
            _artifact_repo(c, run_id).log_artifact(str(path))
        items, seen = [], set()
        for m in _last_batch(now, end):
            _validate_metric(m.key, m.value, m.timestamp, m.step)
            is_nan, value = store.sanitize_metric_value(m.value)
            row = (m.key, value, is_nan, m.timestamp, m.step)
            if row not in seen:  # log_batch drops a metric logged twice in one call
                seen.add(row)
                items.append(row)
        metrics[run_id] = items
        params[run_id] = {p.key: p.value for p in (_validate_param(k, str(v)) for k, v in (end.get("params") or {}).items())}
        tags[run_id] = {t.key: t.value for t in (_validate_tag(k, str(v)) for k, v in (end.get("tags") or {}).items())}
        datasets[run_id] = list(end.get("datasets") or ())
        _validate_dataset_inputs(datasets[run_id])
    ids = [run_id for run_id, _ in ends]
    with store.ManagedSessionMaker() as session:
        runs, old_params, latest = {}, {}, {}
        for i in range(0, len(ids), SQL_CHUNK):
            part = ids[i : i + SQL_CHUNK]
            for r, stage, experiment_id in session.query(SqlRun.run_uuid, SqlRun.lifecycle_stage,
                                                         SqlRun.experiment_id).filter(SqlRun.run_uuid.in_(part)):
                runs[r] = (stage, experiment_id)
            for r, k, v in session.query(SqlParam.run_uuid, SqlParam.key, SqlParam.value).filter(SqlParam.run_uuid.in_(part)):
                old_params[(r, k)] = v
            for row in session.query(SqlLatestMetric).filter(SqlLatestMetric.run_uuid.in_(part)):
                latest[(row.run_uuid, row.key)] = row
        for run_id in ids:  # as log_batch's checks, in its words
            if run_id not in runs:
                raise MlflowException(f"Run with id={run_id} not found", RESOURCE_DOES_NOT_EXIST)
            if runs[run_id][0] != LifecycleStage.ACTIVE:
                raise MlflowException(f"The run {run_id} must be in the 'active' state. Current state is "
                                      f"{runs[run_id][0]}.", INVALID_PARAMETER_VALUE)
            changed = [{"key": k, "old_value": old_params[(run_id, k)], "new_value": v}
                       for k, v in params[run_id].items() if old_params.get((run_id, k), v) != v]
            if changed:
                raise MlflowException(f"Changing param values is not allowed. Params were already logged='{changed}' "
                                      f"for run ID='{run_id}'.", INVALID_PARAMETER_VALUE)
        param_rows = [dict(run_uuid=r, key=k, value=v) for r in ids for k, v in params[r].items() if (r, k) not in old_params]
        metric_rows, new_latest = [], {}  # the latest value of each metric: the greatest (step, timestamp, value)
        for r in ids:
            for key, value, is_nan, ts, step in metrics[r]:
                row = dict(run_uuid=r, key=key, value=value, is_nan=is_nan, timestamp=ts, step=step)
                metric_rows.append(row)
                old = latest.get((r, key))
                best = new_latest.get((r, key)) or (old and dict(step=old.step, timestamp=old.timestamp, value=old.value))
                if best is None or (step, ts, value) > (best["step"], best["timestamp"], best["value"]):
                    new_latest[(r, key)] = row
        for (r, key), row in new_latest.items():  # the latest value of each metric: updated, or a new row
            old = latest.get((r, key))
            if old is not None:
                old.value, old.is_nan, old.timestamp, old.step = row["value"], row["is_nan"], row["timestamp"], row["step"]
        tag_rows = [dict(run_uuid=r, key=k, value=v) for r in ids for k, v in tags[r].items()]
        for r in ids:  # a tag set again replaces the old value
            if tags[r]:
                session.query(SqlTag).filter(SqlTag.run_uuid == r, SqlTag.key.in_(list(tags[r]))).delete(
                    synchronize_session=False)
        input_rows, input_tag_rows, dataset_rows, known = [], [], [], {}
        for r in ids:
            experiment_id, linked = runs[r][1], set()
            for d in _first_of_each(datasets[r]):
                key = (experiment_id, d.dataset.name, d.dataset.digest)
                if key not in known:
                    found = session.query(SqlDataset.dataset_uuid).filter(
                        SqlDataset.experiment_id == experiment_id, SqlDataset.name == d.dataset.name,
                        SqlDataset.digest == d.dataset.digest).first()
                    if found is not None:
                        known[key] = found[0]
                    else:
                        known[key] = uuid.uuid4().hex
                        ds = d.dataset
                        dataset_rows.append(dict(dataset_uuid=known[key], experiment_id=experiment_id, name=ds.name,
                                                 digest=ds.digest, dataset_source_type=ds.source_type,
                                                 dataset_source=ds.source, dataset_schema=ds.schema,
                                                 dataset_profile=ds.profile))
                linked.add(known[key])
            if linked:
                existing = {s for (s,) in session.query(SqlInput.source_id).filter(
                    SqlInput.source_type == "DATASET", SqlInput.destination_type == "RUN",
                    SqlInput.destination_id == r, SqlInput.source_id.in_(list(linked)))}
                for d in _first_of_each(datasets[r]):
                    source = known[(experiment_id, d.dataset.name, d.dataset.digest)]
                    if source in existing:
                        continue
                    existing.add(source)
                    input_uuid = uuid.uuid4().hex
                    input_rows.append(dict(input_uuid=input_uuid, source_type="DATASET", source_id=source,
                                           destination_type="RUN", destination_id=r, step=0))
                    input_tag_rows += [dict(input_uuid=input_uuid, name=t.key, value=t.value) for t in d.tags]
        for table, rows in ((SqlParam.__table__, param_rows), (SqlMetric.__table__, metric_rows),
                            (SqlLatestMetric.__table__, [row for k, row in new_latest.items() if k not in latest]),
                            (SqlTag.__table__, tag_rows), (SqlDataset.__table__, dataset_rows),
                            (SqlInput.__table__, input_rows), (SqlInputTag.__table__, input_tag_rows)):
            for i in range(0, len(rows), SQL_CHUNK):
                session.execute(table.insert(), rows[i : i + SQL_CHUNK])
        for status in {e.get("status", "FINISHED") for _, e in ends}:
            part = [r for r, e in ends if e.get("status", "FINISHED") == status]
            for i in range(0, len(part), SQL_CHUNK):
                session.query(SqlRun).filter(SqlRun.run_uuid.in_(part[i : i + SQL_CHUNK])).update(
                    {SqlRun.status: status, SqlRun.end_time: now}, synchronize_session=False)
    for run_id in ids:
        _runs.pop(run_id, None)


def _first_of_each(datasets: list[Any]) -> list[Any]:
    """A run's data set inputs, the first of each (name, digest): ``log_inputs`` keeps that one."""
    first: dict[tuple[str, str], Any] = {}
    for d in datasets:
        first.setdefault((d.dataset.name, d.dataset.digest), d)
    return list(first.values())


def _log_inputs(c: Any, run_id: str, datasets: list[Any], attempts: int = 4) -> None:
    """``log_inputs``, again when a concurrent run (another joblib worker, a second sweep) inserted the same new
    data set between MLflow's check and its insert: the store refuses the second insert as a duplicate
    (SQLite "UNIQUE constraint failed", PostgreSQL "duplicate key", MySQL "Duplicate entry"), rolled back
    whole; the next attempt finds the data set and links this run to it. Reproduced: two joblib workers
    whose first jobs ended at once; 4 threads ending runs on one new data set, 16 failures in 10 rounds."""
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



CHAMPION = "champion"  # the Model Registry alias promote --register moves to the promoted run's model



def register(c: Any, run_id: str, name: str, alias: str = CHAMPION) -> Any:
    """Register the model of run ``run_id`` as a new version of registered model ``name`` (created if new)
    and point ``alias`` at it; return the ModelVersion. The run's logged model is the source (a run from
    before logged models: its ``model/`` artifacts). MLflow resolves a ``models:/<id>`` source in the
    *current* tracking URI, so it is the client's store during the call. When any step fails, what this call
    created is deleted again (the version, the registered model it created) and the error raised."""
    from mlflow.exceptions import MlflowException

    outputs = c.get_run(run_id).outputs
    model_id = next((o.model_id for o in (outputs.model_outputs if outputs else [])), None)
    source = f"models:/{model_id}" if model_id else f"runs:/{run_id}/model"
    created, version = False, None
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
        except BaseException:
            try:
                if created:
                    c.delete_registered_model(name)
                elif version is not None:
                    c.delete_model_version(name, version.version)
            except Exception:  # the store is down: nothing more to undo here
                pass
            raise
    return version


def _current_uri(uri: str) -> Any:
    """A context in which MLflow's current tracking URI is ``uri`` (restored after)."""
    import contextlib

    import mlflow

    try:
        from mlflow.tracking._tracking_service.utils import _use_tracking_uri

        return _use_tracking_uri(uri)
    except ImportError:  # pragma: no cover - an MLflow without it
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
    (``save_model`` writes ``model_id: null`` and no run); a line edit, not a YAML round trip (~3 ms)."""
    mlmodel = folder / "MLmodel"
    if mlmodel.is_file():
        text = re.sub(r"^(model_id|run_id):.*\n", "", mlmodel.read_text(), flags=re.M)
        mlmodel.write_text(f"{text}model_id: {model_id}\nrun_id: {run_id}\n")



# Artifact URI and experiment id of the runs this process created: no get_run round trip for them.
_runs: dict[str, tuple[str, str]] = {}



def _run_info(c: Any, run_id: str) -> tuple[str, str]:
    """A run's artifact URI and experiment id."""
    if run_id not in _runs:
        info = c.get_run(run_id).info
        return info.artifact_uri, info.experiment_id
    return _runs[run_id]



def _artifact_repo(c: Any, run_id: str) -> Any:
    """Where a run's artifacts go, as ``MlflowClient.log_artifact`` finds it, without asking the store
    again for a run that :func:`start_run` created."""
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    uri = _run_info(c, run_id)[0]
    return get_artifact_repository(uri, tracking_uri=c.tracking_uri)

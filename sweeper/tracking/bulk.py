"""A SQL store's runs in bulk: created, ended, tagged and read many at
a time, each in one transaction, all or none.

MLflow's SQLAlchemy store makes a transaction of every call and re-reads the run in each (~30 ms
to create a run with its params, ~65 ms to end one, on the embedded SQLite store of this 2-core
machine); a batched group opens up to 1,024 runs at once and a sweep's writer ends the runs that
wait for it. Here the rows those calls write are written directly through MLflow's own ORM
tables, checked with MLflow's own validators; each function says which calls it stands for and is
tested against them (``tests/test_tracking.py``). Elsewhere (a tracking server, an MLflow outside
the versions the tests ran, :data:`sweeper.base.tested.TESTED`; ``SWEEPER_PUBLIC_ONLY=bulk``)
:func:`sql_store` is None and the callers use MLflow's public calls.

This module is MLflow's adapter: every name of MLflow's that is not its public
API (``_tracking_client``, ``_validate_*``, ``_check_experiment_is_active``,
``_get_run_inputs``, ``_get_model_outputs_bulk``) and every write to its
tables is here and nowhere else (``tests/test_adapters.py`` says so).
"""

from __future__ import annotations

import time
import uuid
from contextlib import contextmanager
from typing import Any, Iterable, Mapping

from sweeper.base import state, stop, tested
from sweeper.tracking.records import (
    _artifact_repo,
    _last_batch,
    _run_tags,
    LOST_MODEL,
    MODEL_RUN_NAME,
    copy_files,
    copy_model,
    missing_tag,
    start_run,
)


__all__ = [
    "child_runs",
    "creates_in_bulk",
    "ends_in_bulk",
    "finish_runs",
    "logged_models",
    "mark_runs",
    "set_tag_on_runs",
    "sql_store",
    "start_runs",
    "whole_sessions",
]

# Rows a statement touches at most (SQLite's bound-parameter limit).
SQL_CHUNK = 500


def sql_store(c: Any) -> Any:
    """The client's store when it is MLflow's SQLAlchemy store (the embedded
    SQLite one, or a database URI) whose internals the calls below write through
    (its ORM models, its checks), else None: then MLflow's public calls."""

    # another MLflow's tables may differ, or turned off: its public calls (said)
    if not tested.shortcut("bulk"):
        return None
    # MlflowClient._tracking_client.store: the store behind the public client (no public accessor)
    store = getattr(getattr(c, "_tracking_client", None), "store", None)
    try:
        # lazy: saves ~3750 ms at this module's import (measured)
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
        from mlflow.store.tracking.dbmodels.models import SqlParam, SqlRun, SqlTag  # noqa: F401
        from mlflow.utils.validation import _validate_param, _validate_tag  # noqa: F401
    except ImportError:  # another MLflow's internals
        return None
    return store if isinstance(store, SqlAlchemyStore) else None


def whole_sessions(c: Any) -> None:
    """Each store transaction of this client (MLflow's ``ManagedSessionMaker``) a
    :func:`sweeper.base.stop.deferred` section: a Ctrl-C lands after the transaction, never
    inside SQLAlchemy. Landing inside, it broke the session and its pool (hostile tries, 4
    of 40: a connection left holding the write lock, so the interrupted sweep's parent stayed
    RUNNING after 20 s of 'database is locked'; "Exception ignored ... InstanceState._cleanup"
    blocks). A store other than MLflow's SQLAlchemy one is left as it is."""

    store = getattr(getattr(c, "_tracking_client", None), "store", None)
    maker = getattr(store, "ManagedSessionMaker", None)
    if maker is None or getattr(maker, "sweeper", False):
        return

    @contextmanager
    def session(*args: Any, **kwargs: Any) -> Any:
        with stop.deferred(), maker(*args, **kwargs) as s:
            yield s

    session.sweeper = True  # type: ignore[attr-defined]
    store.ManagedSessionMaker = session


def creates_in_bulk(c: Any) -> bool:
    """Whether :func:`start_runs` creates many runs in one transaction on this client's store."""
    return sql_store(c) is not None


def start_runs(c: Any, experiment: str, specs: list[Mapping[str, Any]]) -> list[str]:
    """:func:`start_run` for each spec (``name``, ``tags``, ``params``, ``parent_run_id``,
    ``start_time``); return the run ids in order. On the embedded (SQLAlchemy) store the
    runs are created in one transaction, all or none (~1 ms a run instead of ~30: MLflow's
    ``create_run`` re-reads the experiment and the new run's inputs, and commits each run,
    then ``log_batch`` its params); elsewhere (a server) one ``start_run`` after another."""
    store = sql_store(c)
    # a server, or another MLflow's internals: its public calls, one run after another
    if store is None:
        return [start_run(c, experiment, **spec) for spec in specs]

    # lazy: saves ~3750 ms at this module's import (measured)
    from mlflow.entities import LifecycleStage, RunStatus, SourceType
    from mlflow.store.tracking.dbmodels.models import SqlParam, SqlRun, SqlTag
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    # lazy: each of these two saves ~1100 ms at this module's import on its own (measured)
    from mlflow.utils.uri import append_to_uri_path
    from mlflow.utils.validation import _validate_param, _validate_tag

    experiment_entity = store.get_experiment(experiment)
    store._check_experiment_is_active(experiment_entity)
    now, made, runs, tag_rows, param_rows = int(time.time() * 1000), [], [], [], []
    # the rows SqlAlchemyStore.create_run and log_batch would write, checked as log_batch does
    for spec in specs:
        tags = {
            "mlflow.runName": spec["name"],
            **_run_tags(spec["tags"], spec.get("parent_run_id")),
        }
        params = {k: str(v) for k, v in (spec.get("params") or {}).items()}
        # too long: truncated
        tags = {t.key: t.value for t in (_validate_tag(k, v) for k, v in tags.items())}
        params = {p.key: p.value for p in (_validate_param(k, v) for k, v in params.items())}
        run_id = uuid.uuid4().hex
        artifact_uri = append_to_uri_path(
            experiment_entity.artifact_location, run_id, SqlAlchemyStore.ARTIFACTS_FOLDER_NAME
        )
        runs.append(
            dict(
                run_uuid=run_id,
                name=spec["name"],
                source_type=SourceType.to_string(SourceType.UNKNOWN),
                source_name="",
                entry_point_name="",
                user_id=tags.get("mlflow.user", "unknown"),
                status=RunStatus.to_string(RunStatus.RUNNING),
                start_time=spec.get("start_time") or now,
                end_time=None,
                deleted_time=None,
                source_version="",
                lifecycle_stage=LifecycleStage.ACTIVE,
                artifact_uri=artifact_uri,
                experiment_id=experiment,
            )
        )
        tag_rows += [dict(key=k, value=v, run_uuid=run_id) for k, v in tags.items()]
        param_rows += [dict(key=k, value=v, run_uuid=run_id) for k, v in params.items()]
        made.append((run_id, artifact_uri))
    if runs:
        # one transaction: the runs, their tags and params
        with store.ManagedSessionMaker(read_only=False) as session:
            for table, rows in (
                (SqlRun.__table__, runs),
                (SqlTag.__table__, tag_rows),
                (SqlParam.__table__, param_rows),
            ):
                if rows:
                    session.execute(table.insert(), rows)
    for run_id, artifact_uri in made:
        state.current().runs[run_id] = (artifact_uri, str(experiment))
    return [run_id for run_id, _ in made]


def set_tag_on_runs(c: Any, run_ids: Iterable[str], key: str, value: str) -> None:
    """One tag set to one value on many runs: one statement on the
    embedded store, else one call a run."""
    run_ids = list(run_ids)
    store = sql_store(c)
    if store is None:
        for run_id in run_ids:
            c.set_tag(run_id, key, value)
        return
    # lazy: saves ~1800 ms at this module's import (measured)
    from mlflow.store.tracking.dbmodels.models import SqlTag

    with store.ManagedSessionMaker(read_only=False) as session:
        for i in range(0, len(run_ids), SQL_CHUNK):
            session.query(SqlTag).filter(
                SqlTag.run_uuid.in_(run_ids[i : i + SQL_CHUNK]), SqlTag.key == key
            ).update({SqlTag.value: value}, synchronize_session=False)


def mark_runs(c: Any, marks: list[tuple[str, Mapping[str, float], Mapping[str, str]]]) -> None:
    """Metrics and tags added to runs that may have ended (each ``(run_id, metrics, tags)``:
    a sweep's ranks and descriptions, :mod:`sweeper.insight.standing`): ``log_batch`` for
    each, or on a SQL store the rows it writes (the metrics with the latest-metric upkeep, a
    tag set again replaced) in one transaction, all or none."""
    # lazy: saves ~1701 ms at this module's import (measured)
    from mlflow.entities import Metric, RunTag

    now = int(time.time() * 1000)
    store = sql_store(c)
    if store is None:
        for run_id, metrics, tags in marks:
            c.log_batch(
                run_id,
                metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()],
                tags=[RunTag(k, str(v)) for k, v in tags.items()],
            )
        return
    # lazy: saves ~2994 ms at this module's import (measured)
    from mlflow.store.tracking.dbmodels.models import SqlLatestMetric, SqlMetric, SqlTag
    from mlflow.utils.validation import _validate_metric, _validate_tag

    ids = [run_id for run_id, _, _ in marks]
    metrics, tags = {}, {}
    for run_id, ms, ts in marks:
        metrics[run_id] = []
        for k, v in ms.items():
            _validate_metric(k, float(v), now, 0)
            is_nan, value = store.sanitize_metric_value(float(v))
            metrics[run_id].append((k, value, is_nan, now, 0))
        tags[run_id] = {t.key: t.value for t in (_validate_tag(k, str(v)) for k, v in ts.items())}
    # it updates latest-metric rows in place
    with store.ManagedSessionMaker(read_only=False) as session:
        runs, _, latest, top = _stored(session, ids)
        _refuse_as_log_batch(ids, runs, {}, {r: {} for r in ids})
        metric_rows, new_latest = _metric_rows(ids, metrics, latest, top)
        for r in ids:
            if tags[r]:
                session.query(SqlTag).filter(
                    SqlTag.run_uuid == r, SqlTag.key.in_(list(tags[r]))
                ).delete(synchronize_session=False)
        tag_rows = [dict(run_uuid=r, key=k, value=v) for r in ids for k, v in tags[r].items()]
        for table, rows in (
            (SqlMetric.__table__, metric_rows),
            (SqlTag.__table__, tag_rows),
            (SqlLatestMetric.__table__, [row for k, row in new_latest.items() if k not in latest]),
        ):
            for i in range(0, len(rows), SQL_CHUNK):
                session.execute(table.insert(), rows[i : i + SQL_CHUNK])


def child_runs(c: Any, experiment_ids: list[str], parent_run_id: str) -> list[Any]:
    """The active runs of ``experiment_ids`` whose ``mlflow.parentRunId`` is
    ``parent_run_id``, as MLflow's ``search_runs`` returns them (newest first; info, latest
    metrics, params, tags, data set inputs, logged-model outputs). On a SQL store read table
    by table into MLflow's entities: ``search_runs`` makes an ORM object of every tag, param
    and metric row and expunges them all at its commit (~4 s for 1,000 runs of ~50 each, the
    end of a 1,000-configuration sweep); elsewhere ``search_runs``, all pages."""
    store = sql_store(c)
    if store is None or not all(
        hasattr(store, f) for f in ("_get_run_inputs", "_get_model_outputs_bulk")
    ):
        # lazy: saves ~4.4 ms at this module's import (measured)
        from sweeper.tracking.records import search

        return search(c, experiment_ids, f"tags.`mlflow.parentRunId` = '{parent_run_id}'")
    # lazy: saves ~4526 ms at this module's import (measured)
    from mlflow.entities import (
        LifecycleStage,
        Metric,
        Param,
        Run,
        RunData,
        RunInfo,
        RunInputs,
        RunOutputs,
        RunTag,
    )

    # lazy: saves ~1580 ms at this module's import on its own (measured)
    from mlflow.store.tracking.dbmodels.models import SqlLatestMetric, SqlParam, SqlRun, SqlTag

    out = []
    with store.ManagedSessionMaker() as session:
        info = (
            session.query(
                SqlRun.run_uuid,
                SqlRun.name,
                SqlRun.experiment_id,
                SqlRun.user_id,
                SqlRun.status,
                SqlRun.start_time,
                SqlRun.end_time,
                SqlRun.lifecycle_stage,
                SqlRun.artifact_uri,
            )
            .join(SqlTag, SqlTag.run_uuid == SqlRun.run_uuid)
            .filter(
                SqlTag.key == "mlflow.parentRunId",
                SqlTag.value == parent_run_id,
                SqlRun.experiment_id.in_([int(e) for e in experiment_ids]),
                SqlRun.lifecycle_stage == LifecycleStage.ACTIVE,
            )
            .order_by(SqlRun.start_time.desc(), SqlRun.run_uuid)
            .all()
        )
        for i in range(0, len(info), SQL_CHUNK):
            part = info[i : i + SQL_CHUNK]
            ids = [row[0] for row in part]
            tags: dict[str, list[Any]] = {r: [] for r in ids}
            params: dict[str, list[Any]] = {r: [] for r in ids}
            metrics: dict[str, list[Any]] = {r: [] for r in ids}
            for r, k, v in session.query(SqlTag.run_uuid, SqlTag.key, SqlTag.value).filter(
                SqlTag.run_uuid.in_(ids)
            ):
                tags[r].append(RunTag(k, v))
            for r, k, v in session.query(SqlParam.run_uuid, SqlParam.key, SqlParam.value).filter(
                SqlParam.run_uuid.in_(ids)
            ):
                params[r].append(Param(k, v))
            for r, k, v, ts, step, nan in session.query(
                SqlLatestMetric.run_uuid,
                SqlLatestMetric.key,
                SqlLatestMetric.value,
                SqlLatestMetric.timestamp,
                SqlLatestMetric.step,
                SqlLatestMetric.is_nan,
            ).filter(SqlLatestMetric.run_uuid.in_(ids)):
                metrics[r].append(Metric(k, float("nan") if nan else v, ts, step))
            inputs = store._get_run_inputs(run_uuids=ids, session=session)
            outputs = store._get_model_outputs_bulk(run_ids=ids, session=session)
            for j, (
                r,
                name,
                experiment,
                user,
                status,
                start,
                end,
                stage,
                artifact_uri,
            ) in enumerate(part):
                if not name:  # as SqlRun.to_mlflow_entity: the name from its tag
                    name = next((t.value for t in tags[r] if t.key == "mlflow.runName"), name)
                run_info = RunInfo(
                    run_id=r,
                    run_name=name,
                    experiment_id=str(experiment),
                    user_id=user,
                    status=status,
                    start_time=start,
                    end_time=end,
                    lifecycle_stage=stage,
                    artifact_uri=artifact_uri,
                )
                out.append(
                    Run(
                        run_info,
                        RunData(metrics=metrics[r], params=params[r], tags=tags[r]),
                        RunInputs(dataset_inputs=inputs[j]),
                        RunOutputs(outputs[r]),
                    )
                )
    return out


def ends_in_bulk(c: Any, ends: list[Mapping[str, Any]]) -> bool:
    """Whether :func:`finish_runs` ends runs with these :func:`finish_run`
    arguments in one transaction: on a SQL store, for runs without a new run name."""
    return sql_store(c) is not None and not any(
        "mlflow.runName" in (e.get("tags") or {}) for e in ends
    )


def logged_models(c: Any, ends: list[tuple[str, Mapping[str, Any]]]) -> dict[str, tuple]:
    """The logged models of the runs ``ends`` that have any, PENDING: the rows MLflow's
    ``create_logged_model`` writes (each with its run's params and a tag of its run's name),
    every model's in one transaction, then its files copied
    (:func:`sweeper.tracking.records.copy_model`); :func:`finish_runs` finalizes them. Run id →
    (model id by name, the names of those whose folder was gone). A run or experiment that is
    gone raises as MLflow would, before any row."""
    # lazy: saves ~1770 ms at this module's import on its own (measured)
    from mlflow.entities import LifecycleStage, LoggedModelStatus
    from mlflow.store.tracking.dbmodels.models import (
        SqlLoggedModel,
        SqlLoggedModelParam,
        SqlLoggedModelTag,
        SqlRun,
    )
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from mlflow.utils.uri import append_to_uri_path
    from mlflow.utils.validation import _validate_logged_model_name

    with_models = [(r, e) for r, e in ends if e.get("models")]
    if not with_models:
        return {}
    store, now, rows, params, tags, made = sql_store(c), int(time.time() * 1000), [], [], [], {}
    with store.ManagedSessionMaker() as session:
        runs = {
            r: (name, experiment_id)
            for r, name, experiment_id in session.query(
                SqlRun.run_uuid, SqlRun.name, SqlRun.experiment_id
            ).filter(SqlRun.run_uuid.in_([r for r, _ in with_models]))
        }
    # a run not found: refused as log_batch would (get_run, in MLflow's calls)
    ids = [r for r, _ in with_models]
    _refuse_as_log_batch(
        ids, {r: (LifecycleStage.ACTIVE, x) for r, (_, x) in runs.items()}, {}, {r: {} for r in ids}
    )
    experiments = {x: store.get_experiment(str(x)) for _, x in runs.values()}
    for experiment in experiments.values():
        store._check_experiment_is_active(experiment)
    for r, e in with_models:
        run_name, experiment_id = runs[r]
        made[r] = ({}, [])
        for name in e["models"]:
            _validate_logged_model_name(name)
            model_id = f"m-{uuid.uuid4().hex}"
            made[r][0][name] = model_id
            rows.append(
                dict(
                    model_id=model_id,
                    experiment_id=experiment_id,
                    name=name,
                    artifact_location=append_to_uri_path(
                        experiments[experiment_id].artifact_location,
                        SqlAlchemyStore.MODELS_FOLDER_NAME,
                        model_id,
                        SqlAlchemyStore.ARTIFACTS_FOLDER_NAME,
                    ),
                    creation_timestamp_ms=now,
                    last_updated_timestamp_ms=now,
                    model_type=None,
                    status=LoggedModelStatus.PENDING.to_int(),
                    lifecycle_stage=LifecycleStage.ACTIVE,
                    source_run_id=r,
                )
            )
            key = dict(model_id=model_id, experiment_id=experiment_id)
            params += [
                {**key, "param_key": str(k), "param_value": str(v)}
                for k, v in (e.get("params") or {}).items()
            ]
            tags.append({**key, "tag_key": MODEL_RUN_NAME, "tag_value": run_name or ""})
    with store.ManagedSessionMaker(read_only=False) as session:
        for table, part in (
            (SqlLoggedModel.__table__, rows),
            (SqlLoggedModelParam.__table__, params),
            (SqlLoggedModelTag.__table__, tags),
        ):
            for i in range(0, len(part), SQL_CHUNK):
                session.execute(table.insert(), part[i : i + SQL_CHUNK])
    folders = {(r, name): folder for r, e in with_models for name, folder in e["models"].items()}
    for row in rows:
        r = row["source_run_id"]
        if not copy_model(
            c, folders[(r, row["name"])], row["model_id"], r, row["artifact_location"]
        ):
            made[r][1].append(row["name"])
    return made


def finish_runs(
    c: Any, ends: list[tuple[str, Mapping[str, Any]]], made: Mapping[str, tuple] | None = None
) -> None:
    """:func:`finish_run` for each ``(run_id, its arguments)``, when :func:`ends_in_bulk`:
    the logged models made (:func:`logged_models`; ``made``: made before, by run id) and the
    artifacts copied, then every run's last batch (params, metrics with the latest-metric
    upkeep and their logged model's metrics, tags), data sets, model outputs, the models'
    status (READY; FAILED, its folder gone) and the runs' written in one transaction, all or
    none — the rows MLflow's ``log_batch``, ``log_inputs``, ``log_outputs``,
    ``finalize_logged_model`` and ``set_terminated`` write, checked as they check them (~80
    ms a run with a model one call after another on this machine: each call a transaction
    that re-reads the run). A run that is gone or deleted, or a param logged before with
    another value, raises as MLflow would, and nothing of the batch is written (its logged
    models stay made, PENDING and unlinked)."""
    store = sql_store(c)
    if store is None or not ends_in_bulk(c, [e for _, e in ends]):
        raise ValueError("finish_runs: these runs do not end in bulk on this store (ends_in_bulk)")
    made = {**logged_models(c, [(r, e) for r, e in ends if r not in (made or {})]), **(made or {})}
    now = int(time.time() * 1000)
    checked = _checked(c, store, ends, now, made)
    # lazy: MLflow's and SQLAlchemy's, imported with the store by now (this module's is light)
    from mlflow.exceptions import MlflowException
    from sqlalchemy.exc import IntegrityError

    for attempt in (1, 2):
        try:
            # a write (MLflow's own say so): it updates latest-metric rows in place, which the
            # default read-only session refuses while tests run (found by tests/test_ending.py)
            with store.ManagedSessionMaker(read_only=False) as session:
                _write(session, ends, now, made, *checked)
            break
        except MlflowException as error:
            # another process inserted a row of the same key meanwhile (two jobs ending their
            # first runs of an experiment both add its data set): nothing of this transaction was
            # written; once more, it reads that row and links it. A second failure is the run's.
            if attempt == 2 or not isinstance(error.__cause__, IntegrityError):
                raise
    for run_id, _ in ends:
        state.current().runs.pop(run_id, None)


def _write(
    session: Any,
    ends: list[tuple[str, Mapping[str, Any]]],
    now: int,
    made: Mapping[str, tuple],
    metrics: dict,
    params: dict,
    tags: dict,
    datasets: dict,
    model_metrics: dict,
) -> None:
    """:func:`finish_runs`' one transaction in ``session``: the checks that read the store, then
    every row written."""
    # lazy: saves ~1770 ms at this module's import on its own (measured)
    from mlflow.entities import LoggedModelStatus
    from mlflow.store.tracking.dbmodels.models import (
        SqlDataset,
        SqlInput,
        SqlInputTag,
        SqlLatestMetric,
        SqlLoggedModel,
        SqlLoggedModelMetric,
        SqlMetric,
        SqlParam,
        SqlRun,
        SqlTag,
    )

    ids = [run_id for run_id, _ in ends]
    runs, old_params, latest, top = _stored(session, ids)
    _refuse_as_log_batch(ids, runs, old_params, params)
    param_rows = [
        dict(run_uuid=r, key=k, value=v)
        for r in ids
        for k, v in params[r].items()
        if (r, k) not in old_params
    ]
    metric_rows, new_latest = _metric_rows(ids, metrics, latest, top)
    tag_rows = [dict(run_uuid=r, key=k, value=v) for r in ids for k, v in tags[r].items()]
    for r in ids:  # a tag set again replaces the old value
        if tags[r]:
            session.query(SqlTag).filter(
                SqlTag.run_uuid == r, SqlTag.key.in_(list(tags[r]))
            ).delete(synchronize_session=False)
    dataset_rows, input_rows, input_tag_rows = _input_rows(session, ids, runs, datasets)
    # log_batch's logged-model metrics (the final ones: their model's id) and log_outputs' links
    model_metric_rows = [
        {**row, "experiment_id": runs[r][1]} for r in ids for row in model_metrics[r]
    ]
    input_rows += [
        dict(
            input_uuid=uuid.uuid4().hex,
            source_type="RUN_OUTPUT",
            source_id=r,
            destination_type="MODEL_OUTPUT",
            destination_id=model,
            step=0,
        )
        for r in ids
        for model in made.get(r, ({}, []))[0].values()
    ]
    # finalize_logged_model's: READY, or FAILED where its folder was gone
    for ready in (True, False):
        part = [
            m
            for r in ids
            for n, m in made.get(r, ({}, []))[0].items()
            if (n not in made[r][1]) == ready
        ]
        if part:
            session.query(SqlLoggedModel).filter(SqlLoggedModel.model_id.in_(part)).update(
                {
                    SqlLoggedModel.status: (
                        LoggedModelStatus.READY if ready else LoggedModelStatus.FAILED
                    ).to_int(),
                    SqlLoggedModel.last_updated_timestamp_ms: now,
                },
                synchronize_session=False,
            )
    for table, rows in (
        (SqlParam.__table__, param_rows),
        (SqlMetric.__table__, metric_rows),
        (SqlLatestMetric.__table__, [row for k, row in new_latest.items() if k not in latest]),
        (SqlTag.__table__, tag_rows),
        (SqlDataset.__table__, dataset_rows),
        (SqlInput.__table__, input_rows),
        (SqlInputTag.__table__, input_tag_rows),
        (SqlLoggedModelMetric.__table__, model_metric_rows),
    ):
        for i in range(0, len(rows), SQL_CHUNK):
            session.execute(table.insert(), rows[i : i + SQL_CHUNK])
    for status in {e.get("status", "FINISHED") for _, e in ends}:
        part = [r for r, e in ends if e.get("status", "FINISHED") == status]
        for i in range(0, len(part), SQL_CHUNK):
            session.query(SqlRun).filter(SqlRun.run_uuid.in_(part[i : i + SQL_CHUNK])).update(
                {SqlRun.status: status, SqlRun.end_time: now}, synchronize_session=False
            )


def _checked(
    c: Any, store: Any, ends: list[tuple[str, Mapping[str, Any]]], now: int, made: Mapping
) -> tuple[dict, dict, dict, dict, dict]:
    """Each run's artifacts copied, and its metrics, params, tags, data
    sets and its logged model's metrics (of its one model, ``made``)
    checked as ``log_batch`` and ``log_inputs`` check them (run id →
    its rows; a metric logged twice in one call kept once)."""
    # lazy: saves ~4426 ms at this module's import (measured)
    from mlflow.utils.validation import (
        _validate_dataset_inputs,
        _validate_metric,
        _validate_param,
        _validate_tag,
    )

    metrics, params, tags, datasets, model_metrics = {}, {}, {}, {}, {}
    for run_id, end in ends:
        files = list(end.get("artifacts") or ())
        logged, lost = made.get(run_id, ({}, []))
        missing = copy_files(_artifact_repo(c, run_id), files) if files else []
        missing += [LOST_MODEL.format(name) for name in lost]
        # as finish_run: the final metrics name the run's model when it has one
        model_id = next(iter(logged.values())) if len(logged) == 1 else None
        items, seen, model_metrics[run_id] = [], set(), []
        for m in _last_batch(now, end, model_id):
            _validate_metric(m.key, m.value, m.timestamp, m.step)
            is_nan, value = store.sanitize_metric_value(m.value)
            row = (m.key, value, is_nan, m.timestamp, m.step)
            if row not in seen:  # log_batch drops a metric logged twice in one call
                seen.add(row)
                items.append(row)
                if m.model_id:
                    model_metrics[run_id].append(
                        dict(
                            model_id=m.model_id,
                            metric_name=m.key,
                            metric_timestamp_ms=m.timestamp,
                            metric_step=m.step,
                            metric_value=value,
                            run_id=run_id,
                            dataset_uuid=None,
                            dataset_name=m.dataset_name,
                            dataset_digest=m.dataset_digest,
                        )
                    )
        metrics[run_id] = items
        params[run_id] = {
            p.key: p.value
            for p in (_validate_param(k, str(v)) for k, v in (end.get("params") or {}).items())
        }
        tags[run_id] = {
            t.key: t.value
            for t in (
                _validate_tag(k, str(v))
                for k, v in ({**(end.get("tags") or {}), **missing_tag(files, missing)}).items()
            )
        }
        datasets[run_id] = list(end.get("datasets") or ())
        _validate_dataset_inputs(datasets[run_id])
    return metrics, params, tags, datasets, model_metrics


def _stored(session: Any, ids: list[str]) -> tuple[dict, dict, dict, dict]:
    """What the store holds of the runs ``ids``: run id → (lifecycle
    stage, experiment id); (run, key) → a param's value; (run, key) →
    its latest-metric row, and that row's (step, timestamp, value)."""
    # lazy: saves ~5767 ms at this module's import (measured)
    from mlflow.store.tracking.dbmodels.models import SqlLatestMetric, SqlParam, SqlRun

    runs, old_params, latest, top = {}, {}, {}, {}
    for i in range(0, len(ids), SQL_CHUNK):
        part = ids[i : i + SQL_CHUNK]
        for r, stage, experiment_id in session.query(
            SqlRun.run_uuid, SqlRun.lifecycle_stage, SqlRun.experiment_id
        ).filter(SqlRun.run_uuid.in_(part)):
            runs[r] = (stage, experiment_id)
        for r, k, v in session.query(SqlParam.run_uuid, SqlParam.key, SqlParam.value).filter(
            SqlParam.run_uuid.in_(part)
        ):
            old_params[(r, k)] = v
        for row in session.query(SqlLatestMetric).filter(SqlLatestMetric.run_uuid.in_(part)):
            latest[(row.run_uuid, row.key)] = row
            top[(row.run_uuid, row.key)] = (row.step, row.timestamp, row.value)
    return runs, old_params, latest, top


def _refuse_as_log_batch(ids: list[str], runs: dict, old_params: dict, params: dict) -> None:
    """``log_batch``'s refusals, in its words: a run not found, not
    active, or a param logged with another value."""
    # lazy: saves ~4923 ms at this module's import (measured)
    from mlflow.entities import LifecycleStage
    from mlflow.exceptions import MlflowException
    from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE, RESOURCE_DOES_NOT_EXIST

    for run_id in ids:
        if run_id not in runs:
            raise MlflowException(f"Run with id={run_id} not found", RESOURCE_DOES_NOT_EXIST)
        if runs[run_id][0] != LifecycleStage.ACTIVE:
            raise MlflowException(
                f"The run {run_id} must be in the 'active' state. Current state is "
                f"{runs[run_id][0]}.",
                INVALID_PARAMETER_VALUE,
            )
        changed = [
            {"key": k, "old_value": old_params[(run_id, k)], "new_value": v}
            for k, v in params[run_id].items()
            if old_params.get((run_id, k), v) != v
        ]
        if changed:
            raise MlflowException(
                f"Changing param values is not allowed. Params were already logged='{changed}' "
                f"for run ID='{run_id}'.",
                INVALID_PARAMETER_VALUE,
            )


def _metric_rows(ids: list[str], metrics: dict, latest: dict, top: dict) -> tuple[list[dict], dict]:
    """The metric rows to insert, and each metric's new latest value (the
    greatest (step, timestamp, value)): an existing latest-metric row is
    updated in place, the others are returned (run, key) → row."""
    metric_rows, new_latest = [], {}
    for r in ids:
        for key, value, is_nan, ts, step in metrics[r]:
            row = dict(run_uuid=r, key=key, value=value, is_nan=is_nan, timestamp=ts, step=step)
            metric_rows.append(row)
            if (r, key) not in top or (step, ts, value) > top[(r, key)]:
                top[(r, key)], new_latest[(r, key)] = (step, ts, value), row
    for (
        r,
        key,
    ), row in new_latest.items():  # the latest value of each metric: updated, or a new row
        old = latest.get((r, key))
        if old is not None:
            old.value, old.is_nan, old.timestamp, old.step = (
                row["value"],
                row["is_nan"],
                row["timestamp"],
                row["step"],
            )
    return metric_rows, new_latest


def _input_rows(
    session: Any, ids: list[str], runs: dict, datasets: dict
) -> tuple[list[dict], list[dict], list[dict]]:
    """The data set, input and input-tag rows ``log_inputs`` writes: a data set once
    an experiment (name, digest), each run linked once to the first input of each."""

    # lazy: saves ~4122 ms at this module's import (measured)
    from mlflow.store.tracking.dbmodels.models import SqlDataset, SqlInput

    input_rows, input_tag_rows, dataset_rows, known = [], [], [], {}
    for r in ids:
        experiment_id, linked, firsts = runs[r][1], set(), _first_of_each(datasets[r])
        for d in firsts:
            key = (experiment_id, d.dataset.name, d.dataset.digest)
            if key not in known:
                found = (
                    session.query(SqlDataset.dataset_uuid)
                    .filter(
                        SqlDataset.experiment_id == experiment_id,
                        SqlDataset.name == d.dataset.name,
                        SqlDataset.digest == d.dataset.digest,
                    )
                    .first()
                )
                if found is not None:
                    known[key] = found[0]
                else:
                    known[key] = uuid.uuid4().hex
                    ds = d.dataset
                    dataset_rows.append(
                        dict(
                            dataset_uuid=known[key],
                            experiment_id=experiment_id,
                            name=ds.name,
                            digest=ds.digest,
                            dataset_source_type=ds.source_type,
                            dataset_source=ds.source,
                            dataset_schema=ds.schema,
                            dataset_profile=ds.profile,
                        )
                    )
            linked.add(known[key])
        if linked:
            existing = {
                s
                for (s,) in session.query(SqlInput.source_id).filter(
                    SqlInput.source_type == "DATASET",
                    SqlInput.destination_type == "RUN",
                    SqlInput.destination_id == r,
                    SqlInput.source_id.in_(list(linked)),
                )
            }
            for d in firsts:
                source = known[(experiment_id, d.dataset.name, d.dataset.digest)]
                if source in existing:
                    continue
                existing.add(source)
                input_uuid = uuid.uuid4().hex
                input_rows.append(
                    dict(
                        input_uuid=input_uuid,
                        source_type="DATASET",
                        source_id=source,
                        destination_type="RUN",
                        destination_id=r,
                        step=0,
                    )
                )
                input_tag_rows += [
                    dict(input_uuid=input_uuid, name=t.key, value=t.value) for t in d.tags
                ]
    return dataset_rows, input_rows, input_tag_rows


def _first_of_each(datasets: list[Any]) -> list[Any]:
    """A run's data set inputs, the first of each (name, digest): ``log_inputs`` keeps that one."""
    first: dict[tuple[str, str], Any] = {}
    for d in datasets:
        first.setdefault((d.dataset.name, d.dataset.digest), d)
    return list(first.values())

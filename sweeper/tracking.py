"""MLflow: the store, the experiment, one parent run per multirun and one child run per job.

Calls are few and batched (each costs ~5-15 ms on SQLite, more over HTTP): a child run is created with
its tags (its name and ``overrides`` tag say what it is while it runs), and when it ends one
``log_batch`` carries its params, metrics, system metrics and loss curves (at most ``curve_points`` of
each), then the artifacts (resolved config, predictions, the whole curves, the model) and the status.
"""
from __future__ import annotations

import functools
import logging
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing, contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

# MLflow's own tqdm bars while it copies a model's files would bury the job's output.
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
# Bounded retries against a tracking server: MLflow's defaults (7 retries, backoff factor 2, 120 s
# timeout) keep a job waiting for minutes when the server is gone. Here: 3 retries over ~7 s.
for _key, _value in (("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "3"), ("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1"),
                     ("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")):
    os.environ.setdefault(_key, _value)

# MLflow (~2 s to import) is imported only by the functions that talk to a store, so that `--help`, a
# refused value and the Hydra callback's module cost nothing of it. It sets its loggers' levels when
# imported, from this variable (INFO by default; alembic's at WARNING or above).
os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")

from sweeper import ROOT  # noqa: E402

for _name in ("mlflow", "alembic"):  # in case MLflow was imported before this module
    logging.getLogger(_name).setLevel(logging.WARNING)

# The embedded store of conf/tracking/local.yaml, for the standalone commands.
DEFAULT_URI = f"sqlite:///{ROOT.as_posix()}/mlruns/mlflow.db"

BATCH = 1000  # MLflow's limit of metrics per log_batch call
PARAM_BATCH = 100
# Points of each loss curve sent to MLflow (tracking.curve_points): as many as the default run samples
# (5000 epochs / log_every 50), so a longer run costs MLflow no more rows (~55 µs each on SQLite) and
# charts the same. Every sample is in the run's curves.npz artifact.
CURVE_POINTS = 100


class TrackingError(RuntimeError):
    """The tracking store cannot be used as configured; one line."""


# What a failing store or server raises (after MLflow's own retries): ``except tracking.UNREACHABLE``.
_UNREACHABLE = (("mlflow.exceptions", "MlflowException"), ("requests.exceptions", "RequestException"),
                ("sqlalchemy.exc", "SQLAlchemyError"))  # the embedded store's own failures


def __getattr__(name: str) -> Any:
    """``UNREACHABLE``, built without importing MLflow: an exception of a class whose module was never
    imported cannot have been raised, so the tuple holds the classes already loaded (and OSError), and
    stays fixed once all three are."""
    if name != "UNREACHABLE":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    found = tuple(c for m, n in _UNREACHABLE if (c := getattr(sys.modules.get(m), n, None)) is not None)
    if len(found) == len(_UNREACHABLE):
        globals()["UNREACHABLE"] = found + (OSError,)
    return found + (OSError,)


def first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


def check_server(uri: str, timeout: float = 5.0) -> None:
    """Fail fast, in one line, when an http(s) tracking server does not answer ``GET /health``."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=timeout) as r:
            r.read()
    except OSError as e:
        raise TrackingError(
            f"tracking.uri={uri} does not answer ({getattr(e, 'reason', e)}): start the server "
            "(mlflow server --host 127.0.0.1 --port PORT ...) or use the embedded store (tracking=local)"
        ) from None


def client(uri: str) -> Any:
    """A client of the store. A new SQLite store (or one not yet in WAL mode) is first created under an
    inter-process lock (:func:`_create_store`); an existing WAL store is opened without lock or probe."""
    from sweeper import settled

    with settled():  # MLflow's modules (~500k objects): no GC pass while they load, none over them after
        from mlflow import MlflowClient

    db = sqlite_path(uri)
    if db is not None:
        _sqlite_commits_without_fsync()
    if db is not None and not _is_wal_database(db):
        return _create_store(db, uri)
    return MlflowClient(tracking_uri=uri)


@functools.cache
def _sqlite_commits_without_fsync() -> None:
    """Every SQLite connection in WAL mode that this process opens from now on (MLflow's engines) commits
    with ``synchronous=NORMAL``: a commit is then durable against a crash of the process and the database
    stays consistent, only the last commits before a power cut can be lost (SQLite's documentation
    recommends it for WAL; other journal modes, e.g. an Optuna storage's, keep their setting). With FULL,
    each of a job's ~15 commits waits for an fsync, and the writer process's fsyncs stall this process's
    file writes in the file system's journal (measured: docs/benchmarks.md)."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    def tune(dbapi_connection: Any, record: Any) -> None:
        if isinstance(dbapi_connection, sqlite3.Connection):
            try:
                if dbapi_connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
                    dbapi_connection.execute("PRAGMA synchronous=NORMAL")
            except sqlite3.Error:  # not a database: MLflow's own first query says so (a failing connect would be
                pass  # retried for minutes)

    event.listen(Engine, "connect", tune)  # once per process (functools.cache)


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, else None."""
    return Path(uri[len("sqlite:///") :]) if uri.startswith("sqlite:///") else None


def artifact_location(uri: str, experiment: str) -> str | None:
    """Artifacts of an embedded store sit beside its database, at an absolute path (not the cwd's)."""
    db = sqlite_path(uri)
    if db is None:
        return None  # a server decides
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", experiment)
    return (db.resolve().parent / "artifacts" / safe).as_uri()


def open_store(uri: str) -> Any:
    """Check that the store can be used and return a client (TrackingError, one line, if not).

    An embedded store's folder must be writable (checked first: MLflow would retry for ~100 s); a new
    SQLite store is created safely against any number of processes (see :func:`client`); a server must
    answer ``GET /health`` and a first request.
    """
    db = sqlite_path(uri)
    if db is not None:
        check_writable(db, uri)
    if uri.startswith(("http://", "https://")):
        check_server(uri)
    try:
        c = client(uri)  # MLflow opens (and checks) an SQLite store here
        if db is None:
            c.search_experiments(max_results=1)  # checks a server is up
    except Exception as e:
        raise TrackingError(f"tracking.uri={uri} cannot be used: {type(e).__name__}: {str(e).splitlines()[0]}") from e
    return c


def check_writable(db: Path, uri: str) -> None:
    """TrackingError unless the database ``db`` can be created or written: SQLite writes its journal
    (``-wal``, ``-shm``) beside the file, so the folder must be writable too. Uses the real uid
    (``os.access``), so a folder of mode 555 fails for a user and a read-only file system for anyone."""
    folder = db.parent if str(db.parent) else Path(".")
    existing = folder
    while not existing.exists() and existing != existing.parent:  # mkdir creates the missing folders
        existing = existing.parent
    hint = "choose a writable place for tracking.uri"
    if not existing.is_dir():
        raise TrackingError(f"tracking.uri={uri} cannot be used: {existing} is a file, not a folder; {hint}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise TrackingError(f"tracking.uri={uri} cannot be used: the folder {existing} is not writable; {hint}")
    if db.exists() and not os.access(db, os.R_OK | os.W_OK):
        raise TrackingError(f"tracking.uri={uri} cannot be used: the database {db} is not writable; {hint}")


def _create_store(db: Path, uri: str) -> Any:
    """Create the SQLite store ``db`` (schema, then WAL journal mode) and return a client.

    Several processes creating one store at once race in MLflow's schema migrations and can leave it
    unusable, so the creation holds an exclusive lock on ``<db>.lock`` (the file stays; it is empty).
    The WAL switch comes last: a WAL header means a complete schema, which :func:`client` trusts
    without the lock. WAL lets parallel jobs log without "database is locked".
    """
    from mlflow import MlflowClient

    db.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(db.with_name(db.name + ".lock")):
        c = MlflowClient(tracking_uri=uri)  # creates the schema of a new store
        if not _is_wal_database(db):  # else made by another process while this one waited
            c.search_experiments(max_results=1)  # a store MLflow cannot read fails here, unchanged
            with closing(sqlite3.connect(db)) as con:
                con.execute("PRAGMA journal_mode=WAL")
    return c


@contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """An exclusive inter-process lock on ``path`` (``flock``; no lock where fcntl is missing: Windows)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _is_wal_database(db: Path) -> bool:
    """Whether ``db`` is an SQLite database already in WAL mode (its header's read/write versions are 2)."""
    try:
        with open(db, "rb") as f:
            header = f.read(20)
    except OSError:
        return False
    return header[:16] == b"SQLite format 3\x00" and header[18:20] == b"\x02\x02"


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


# What kind of experiment this is, for MLflow's own tools and UIs that read it. MLflow 3.17's UI does not: it
# chooses its GenAI or its model-training views from the page address (sweep.UI_VIEW, in every address sweeper
# prints) or from what the browser chose last.
EXPERIMENT_KIND = "mlflow.experimentKind"
EXPERIMENT_TAGS = {EXPERIMENT_KIND: "custom_model_development"}


# (store URI, experiment name) → id, of the experiments this sweep found active or created (sweeper.sweep.start
# empties it): its jobs do not ask the store again (~2.5 ms a job on SQLite).
SWEEP_EXPERIMENTS: dict[tuple[str, str], str] = {}


def experiment_id(c: Any, name: str, uri: str, in_sweep: bool = False) -> str:
    """The id of experiment ``name``, created with an absolute artifact location if it is new; ``in_sweep``:
    as the sweep's start found it."""
    if not in_sweep:
        return _experiment_id(c, name, uri)
    key = (uri, name)
    if key not in SWEEP_EXPERIMENTS:
        SWEEP_EXPERIMENTS[key] = _experiment_id(c, name, uri)
    return SWEEP_EXPERIMENTS[key]


def _experiment_id(c: Any, name: str, uri: str) -> str:
    from mlflow.exceptions import MlflowException

    exp = c.get_experiment_by_name(name)
    if exp is None:
        try:
            return c.create_experiment(name, artifact_location=artifact_location(uri, name), tags=EXPERIMENT_TAGS)
        except MlflowException:  # created meanwhile by another process
            exp = c.get_experiment_by_name(name)
            if exp is None:
                raise
    if exp.lifecycle_stage == "deleted":
        raise TrackingError(
            f"tracking.experiment={name} is deleted in {uri}: restore it "
            f"(mlflow experiments restore --experiment-id {exp.experiment_id}) or choose another name"
        )
    return exp.experiment_id


def named_experiment(c: Any, name: str, uri: str) -> Any:
    """The active experiment ``name`` of a store, or TrackingError naming the ones that exist."""
    exp = c.get_experiment_by_name(name)
    if exp is None or exp.lifecycle_stage == "deleted":
        names = ", ".join(e.name for e in c.search_experiments()) or "none"
        raise TrackingError(f"--experiment={name} does not exist in {uri}: expected one of {names}")
    return exp


def finished_run(c: Any, experiment: str, fingerprint: str, device: str) -> str | None:
    """The id of a FINISHED run of this configuration (fingerprint) on this device, if the experiment has one."""
    found = c.search_runs(
        [experiment],
        f"tags.fingerprint = '{fingerprint}' and tags.device = '{device}' and attributes.status = 'FINISHED'",
        max_results=1,
    )
    return found[0].info.run_id if found else None


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


def start_run(
    c: Any,
    experiment: str,
    name: str,
    tags: Mapping[str, str],
    params: Mapping[str, Any] | None = None,
    parent_run_id: str | None = None,
) -> str:
    """Create a run (a child when ``parent_run_id`` is given) with its tags and params; return its id."""
    from mlflow.entities import Param

    tags = {**tags, **({"mlflow.parentRunId": parent_run_id} if parent_run_id else {})}
    commit = git_commit()
    if commit:
        tags["mlflow.source.git.commit"] = commit
    run = c.create_run(experiment, run_name=name, tags={k: str(v) for k, v in tags.items()})
    _runs[run.info.run_id] = (run.info.artifact_uri, run.info.experiment_id)
    items = [Param(k, str(v)) for k, v in (params or {}).items()]
    for i in range(0, len(items), PARAM_BATCH):
        c.log_batch(run.info.run_id, params=items[i : i + PARAM_BATCH])
    return run.info.run_id


def log_metrics(c: Any, run_id: str, metrics: Mapping[str, float]) -> None:
    """Log a few metrics in one call (also on a run that has already ended)."""
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    c.log_batch(run_id, metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()])


def search(c: Any, experiment_ids: list[str], filter_string: str = "") -> list[Any]:
    """Every run matching ``filter_string`` in the experiments, all pages."""
    runs, token = [], None
    while True:
        page = c.search_runs(experiment_ids, filter_string, max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


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
    from mlflow.entities import LoggedModelOutput, LoggedModelStatus, Metric, Param, RunTag

    now = int(time.time() * 1000)
    datasets, models = list(datasets), dict(models or {})
    logged = {name: c.create_logged_model(_run_info(c, run_id)[1], name, run_id,
                                          params={k: str(v) for k, v in (params or {}).items()})
              for name, folder in models.items()}
    model_id = next(iter(logged.values())).model_id if len(logged) == 1 else None
    scored_on = {CONTEXTS[d.tags[0].value]: d.dataset for d in datasets if d.tags and CONTEXTS.get(d.tags[0].value)}

    def final(k: str, v: float) -> Any:
        d = next((d for prefix, d in scored_on.items() if k.startswith(prefix)), None)
        return Metric(k, float(v), now, 0, model_id=model_id, dataset_name=d and d.name, dataset_digest=d and d.digest)

    items = [final(k, v) for k, v in metrics.items()] + list(system)
    for name, (steps, values) in dict(curves).items():
        items += [Metric(name, float(v), now, int(s)) for s, v in zip(*thin(steps, values, curve_points))]
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
    before logged models: its ``model/`` artifacts)."""
    from mlflow.exceptions import MlflowException

    outputs = c.get_run(run_id).outputs
    model_id = next((o.model_id for o in (outputs.model_outputs if outputs else [])), None)
    source = f"models:/{model_id}" if model_id else f"runs:/{run_id}/model"
    try:
        c.create_registered_model(name)
    except MlflowException as e:
        if e.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
    version = c.create_model_version(name, source, run_id=run_id, model_id=model_id)
    c.set_registered_model_alias(name, alias, version.version)
    return version


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


class SystemSampler:
    """CPU, memory, disk and network (and GPU with nvidia-ml-py) sampled every ``interval`` seconds in a
    thread, as MLflow's ``system/...`` metrics, one step per sample.

    MLflow's own monitor asks the store for the run and logs at every sample (two store calls every
    interval, each holding the GIL the training loop needs). Here the samples stay in memory: a run
    shorter than ``flush_every`` seconds logs them with its final batch (no extra store call), a longer
    one also sends them from the thread every ``flush_every`` seconds, so they show up live.
    """

    def __init__(self, c: Any, run_id: str, uri: str, interval: float, flush_every: float):
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        # MLflow picks the monitors (GPU only where its driver library answers); its thread is not started.
        self.monitors = SystemMetricsMonitor(run_id, tracking_uri=uri).monitors
        self.c, self.run_id, self.interval, self.flush_every = c, run_id, interval, flush_every
        self.rows: list[Any] = []
        self.step = 0
        self.flush_error: str | None = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="sweeper-system-metrics")
        self._thread.start()

    def _loop(self) -> None:
        last_flush = time.monotonic()
        for m in self.monitors:
            try:
                m.collect_metrics()  # psutil's CPU percentage counts from its previous call
            except Exception:
                pass  # _sample drops it, with the reason
            m.clear_metrics()
        while not self._done.wait(self.interval):
            self._sample()
            if time.monotonic() - last_flush >= self.flush_every:
                last_flush = time.monotonic()
                self._flush()

    def _sample(self) -> None:
        from mlflow.entities import Metric

        now, row = int(time.time() * 1000), []
        for m in list(self.monitors):
            try:
                m.collect_metrics()
                row += [Metric(f"system/{k}", float(v), now, self.step) for k, v in m.aggregate_metrics().items()]
            except Exception as e:  # a monitor that fails (a GPU gone, a counter missing) is dropped, said once
                self.monitors.remove(m)
                logging.getLogger(__name__).warning("system metrics: %s dropped: %s", type(m).__name__, first_line(e))
            m.clear_metrics()
        with self._lock:
            self.rows += row
            self.step += 1

    def _flush(self) -> None:
        with self._lock:
            rows, self.rows = self.rows, []
        try:
            for i in range(0, len(rows), BATCH):
                self.c.log_batch(self.run_id, metrics=rows[i : i + BATCH])
        except Exception as e:  # the run still ends; these samples are lost, said once
            if self.flush_error is None:
                self.flush_error = first_line(e)
                logging.getLogger(__name__).warning("system metrics of run %s not logged: %s", self.run_id, self.flush_error)

    def stop(self) -> list[Any]:
        """Stop sampling; return the samples not logged yet (for the run's final batch). A run shorter
        than one interval gets one sample, over its whole length."""
        self._done.set()
        self._thread.join()
        if self.step == 0:
            self._sample()
        with self._lock:
            rows, self.rows = self.rows, []
        return rows


def system_monitor(c: Any, run_id: str, uri: str, interval: float = 0.5, flush_every: float = 30.0) -> SystemSampler | None:
    """Start sampling system metrics for a run if psutil is installed (None without it)."""
    try:
        import psutil  # noqa: F401
    except ImportError:
        return None
    return SystemSampler(c, run_id, uri, interval, flush_every)


def stop(monitor: SystemSampler | None) -> list[Any]:
    """Stop a sampler; the samples it has not logged, to pass to :func:`finish_run` (``system=``)."""
    return monitor.stop() if monitor is not None else []

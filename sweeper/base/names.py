"""The words every layer shares: statuses and reasons, the files a job and a sweep
leave, how runs are named and where the MLflow UI shows them, the command that resumes a
sweep. Imports nothing of ours but the base layer."""

from __future__ import annotations

import shlex
import signal
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from sweeper.base.fmt import text_cell
from sweeper.base.hydra_internals import BASIC_SWEEPER  # noqa: F401  (the basic sweeper's _target_)

__all__ = [
    "BASIC_SWEEPER",
    "CONFIG_FINGERPRINT",
    "CURVES_FILE",
    "DATA_SHA256",
    "ENGINE",
    "ERROR_FILE",
    "GPU_DEVICE",
    "GROUP",
    "GROUP_SIZE",
    "HOST",
    "LAUNCHER",
    "MAX_NAME_BYTES",
    "MLP_NAME",
    "ORPHAN",
    "PID",
    "PRUNED_AT",
    "PYTHON_CALL",
    "REPLACED_BY",
    "RERUN",
    "RESULT_FILE",
    "RETRIED",
    "SWEEPS",
    "SWEEP_FILE",
    "SWEEP_FROM",
    "TRAJECTORY",
    "WORKER",
    "WORKER_HOST",
    "WORKER_PID",
    "booked",
    "ended",
    "experiment_url",
    "label",
    "model_name",
    "name_problem",
    "python_call",
    "resume_command",
    "run_path",
    "run_url",
    "sqlite_path",
    "table_query",
    "ui_command",
    "ui_line",
    "uri_problem",
]

RESULT_FILE = "result.json"  # a job's outcome, in its Hydra output folder
ERROR_FILE = "error.txt"  # a failed run's whole traceback, in its folder and among its artifacts
CURVES_FILE = "curves.npz"  # the loss curves, kept with result.json so a run can be uploaded later
SWEEP_FILE = "sweep.json"  # a sweep's parent run(s) and job count, in its sweep folder
# A parent run's tag: what started its sweep, when not the command line ("python":
# sweeper.multirun). The advisor's next command then takes that form: sweeper.multirun([...]).
SWEEP_FROM = "sweep_from"
PYTHON_CALL = "sweeper.multirun("


def python_call(args: list[str]) -> str:
    """The Python form of a sweep's next command: ``sweeper.multirun([...])``
    with ``resume=true`` last."""
    kept = [a for a in args if a.lstrip("+~").partition("=")[0] != "resume"]
    return f"{PYTHON_CALL}{[*kept, 'resume=true']!r})"


ORPHAN = "orphaned: its job ended without closing the run (killed?)"
INTERRUPTED = "interrupted (Ctrl-C)"
RETRIED = "an attempt: its engine retried the job"
# The longest name that becomes one file or folder name (an experiment's artifact folder, a pinned
# file's NAME_1.yaml, a sweep folder's part): file systems allow 255 bytes, and a suffix may follow.
MAX_NAME_BYTES = 200


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be one file or folder name (None when it can): too long,
    empty, ``.``/``..``, or holding ``/`` or a NUL."""
    if not name or name in (".", ".."):
        return "expected a non-empty name"
    if "/" in name or "\0" in name:
        return "expected a name without / (it names one file or folder)"
    size = len(name.encode("utf-8", "surrogateescape"))
    if size > MAX_NAME_BYTES:
        return (
            f"{size} bytes long: expected a name of at most {MAX_NAME_BYTES} bytes (it names "
            "a file or folder)"
        )
    return None


def uri_problem(uri: str) -> str | None:
    """Why a tracking URI cannot be used (None when it looks usable): an address Python cannot parse
    (``http://[::1``), or an http(s) address without a host."""

    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018  (a port that is no number raises here)
    except ValueError as e:
        return f"cannot be read as an address ({e}): expected sqlite:///PATH or http(s)://HOST:PORT"
    if parts.scheme in ("http", "https") and not parts.hostname:
        return "names no host: expected http(s)://HOST:PORT"
    if parts.scheme == "sqlite":
        path = uri[len("sqlite:///") :] if uri.startswith("sqlite:///") else ""
        # sqlite:////:memory: is a file ":memory:" (at /): meant in-memory
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if (
            path in ("", ":memory:")
            or path.startswith(("file:", ":memory:"))
            or "mode=memory" in path
            or name.startswith(":memory:")
        ):
            return (
                "is not a persistent store (an in-memory database keeps nothing once the command "
                "ends): "
                "expected sqlite:///PATH/TO/mlflow.db"
            )
    return None


# tag of a run a sweep's strategy stopped early, at a rung (sweeper.sweep.pruning: the
# settings it was stopped under are that module's to record and compare)
PRUNED_AT = "pruned_at_epoch"


# A run on a data file: its content's SHA-256, and the fingerprint of its configuration
# alone (the fingerprint holds both: sweeper.contract.fingerprint); resume names the
# runs of the configuration that read another version
DATA_SHA256, CONFIG_FINGERPRINT = "data_sha256", "config_fingerprint"

# Bookkeeping tags: how and where a run ran (its process and host, heartbeat, batched
# group, worker, engine, the command that re-runs it), not what it is or scored. One
# prefix keeps them together, apart from what a reader came for.
BOOK = "sweeper."
HOST, PID = (
    BOOK + "host",
    BOOK + "pid",
)  # the process that created the run (liveness: sweeper.insight.publish)
LAUNCHER, GROUP, GROUP_SIZE, TRAJECTORY = (
    BOOK + k for k in ("launcher", "batch_group", "group_size", "trajectory")
)
WORKER, WORKER_HOST, WORKER_PID, ENGINE, GPU_DEVICE = (
    BOOK + k for k in ("batch_worker", "worker_host", "worker_pid", "engine", "gpu_device")
)
# the command that re-runs the run (MLflow's mlflow.source.name is a short name)
RERUN = BOOK + "rerun"
SWEEPS = BOOK + "sweeps"  # the parent runs whose leaderboard ranks the run (space-separated ids)


def booked(tags: Any, key: str) -> str | None:
    """A bookkeeping tag's value, also on a run recorded before the prefix (its bare name then)."""
    value = tags.get(key)
    return value if value is not None else tags.get(key.removeprefix(BOOK))


# tag of a run that python -m sweeper.upload logged again as a new run (a stub)
REPLACED_BY = "replaced_by"


def sqlite_path(uri: str):
    """The database file of a ``sqlite:///`` tracking URI, else None: the file
    SQLAlchemy opens (its URL rules: ``%20`` is a space, a ``?query`` no part of the
    path), so the checks, the folder made and the lock are of that file (before:
    ``a%20b/`` was made and checked while MLflow retried ``a b/x.db`` for ~100 s)."""

    return (
        Path(unquote(uri[len("sqlite:///") :].partition("?")[0]))
        if uri.startswith("sqlite:///")
        else None
    )


def ended(code: int | None) -> str:
    """How a process ended, in words: ``exit code 3``, or the signal that killed it
    (``killed by SIGKILL``); a bus error (SIGBUS) in a process that writes a store is
    SQLite's write to its ``-shm`` that the file system could not back."""

    if code is None or code >= 0:
        return f"exit code {code}"
    bus = (
        ": the store's -shm file could not be written (a full disk, or the file cut short under it)"
    )
    return f"killed by {signal.Signals(-code).name}" + (bus if -code == signal.SIGBUS else "")


def resume_command(args: list[str]) -> str:
    """The command line that finishes an interrupted sweep: the same arguments, ``resume=true``."""
    kept = [a for a in args if a.lstrip("+~").partition("=")[0] != "resume"]
    return shlex.join(["python", "-m", "sweeper", *kept, "resume=true"])


def ui_command(uri: str) -> str:
    if sqlite_path(uri) is not None:
        return f"mlflow ui --backend-store-uri {uri} --port 5000"
    return f"open {uri} in a browser"


# MLflow 3.17's UI picks its model-training views (runs table, models, charts) or its GenAI
# ones (traces, evaluations) from the page address's workflowType, else from what this browser
# chose last (GenAI at first); it does not read the experiment's mlflow.experimentKind tag. So
# every address sweeper prints asks for the model-training views.
UI_VIEW = "workflowType=machine_learning"


def _ui_base(uri: str) -> str:
    """The UI of a tracking server, or the one ``mlflow ui`` (:func:`ui_command`) serves
    for an embedded store."""
    return uri.rstrip("/") if uri.startswith(("http://", "https://")) else "http://127.0.0.1:5000"


def run_path(experiment_id: str, run_id: str) -> str:
    """A run's page in the MLflow UI, relative to the UI (a link in a run's
    description), on its model-training views."""
    return f"#/experiments/{experiment_id}/runs/{run_id}?{UI_VIEW}"


def run_url(uri: str, experiment_id: str, run_id: str) -> str:
    """Where the MLflow UI shows a run, on its model-training views."""
    return f"{_ui_base(uri)}/{run_path(experiment_id, run_id)}"


def experiment_url(uri: str, experiment_id: str, query: str = "") -> str:
    """Where the MLflow UI shows an experiment's runs table (sweeps expand into their
    runs); ``query``: more of the page address (:func:`table_query`,
    or ``viewStateShareKey=<key>``: :mod:`sweeper.tracking.ui`)."""
    return f"{_ui_base(uri)}/#/experiments/{experiment_id}/runs?{UI_VIEW}" + (
        f"&{query}" if query else ""
    )


def table_query(order_by: str, ascending: bool, search: str = "") -> str:
    """The runs table's own search and sort as the page address gives them (every MLflow
    3 UI honours them; a sort flattens the tree of parents and
    children): ``orderByKey=metrics.%60val_mse%60&orderByAsc=true``."""

    parts = [f"searchFilter={quote(search, safe='')}"] if search else []
    return "&".join(
        [
            *parts,
            f"orderByKey={quote(order_by, safe='')}",
            f"orderByAsc={str(bool(ascending)).lower()}",
        ]
    )


def ui_line(uri: str, url: str) -> str:
    """``url``, and for an embedded store the command that serves it."""
    ui = ui_command(uri)
    return url + ("" if ui.startswith("open") else f"  (after: {ui})")


def label(overrides: list[str], device: str | None = None, keys: list[str] | None = None) -> str:
    """A readable name from a job's overrides (those of ``keys`` only, when given), without where it
    logs: ``lr=0.005,depth=2,cpu``; a value that 4 significant digits change (Optuna's)
    is rounded to them (the run's params keep it whole)."""
    parts = [o for o in overrides if not o.lstrip("+~").startswith(("tracking", "hydra"))]
    parts = [
        f"{k.removeprefix('++')}={text_cell(v)}" if eq else k
        for k, eq, v in (o.partition("=") for o in parts)
    ]
    if keys is not None:
        parts = [o for o in parts if o.lstrip("+~").partition("=")[0] in keys]
    if device is None:
        return ",".join(parts) or "defaults"
    parts = [o.split("=", 1)[1] if o.startswith("device=") else o for o in parts]
    return ",".join(parts + ([] if device in parts else [device]))


# sweeper's own network, as runs, tables and promote --model name it (its config: model=mlp)
MLP_NAME = "mlp"


def model_name(tags: Any) -> str:
    """A run's model, short, from its tags: the last two parts of its import path
    (``my_nets.TwoLayerNet``, ``nets.resnets.ResTanh`` → ``resnets.ResTanh``), or
    ``mlp`` for sweeper's MLP (a run without a ``model`` tag)."""
    path = str((tags or {}).get("model") or "").replace(":", ".")
    return ".".join(path.split(".")[-2:]) if path else MLP_NAME

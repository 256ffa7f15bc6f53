"""Sweeps from Python: ``sweeper.multirun([...])`` and
``sweeper.run([...])``, the command line's overrides in a list.

    # python -m sweeper -m lr=0.001,0.005 depth=1,2
    result = sweeper.multirun(["lr=0.001,0.005", "depth=1,2"])
    result.leaderboard            # pandas DataFrame: the parent run's summary.csv, best first
    result.advice.next_overrides  # the advisor's next command, as this function's argument

Both go through Hydra as ``python -m sweeper`` does (the same config, the launcher and
sweeper plugins, the Hydra callback that creates the parent run and publishes the summary),
so they leave the same records in the store. They may be called again in the same process
(a notebook): Hydra's global state and sweeper's per-process state (the writer process, the
store clients, the experiments a sweep found) are reset around each call; an idle painter
process (matplotlib and scikit-learn imported: the plots and the baselines) is kept for the
next call. They never exit the process: bad input raises :class:`ValueError` with the
command line's one-line message; Ctrl-C (a kernel's interrupt) closes what was running as
the command line does, then raises KeyboardInterrupt.
"""

from __future__ import annotations

import ast
import shlex
import sys
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from sweeper import CONF_DIR
from sweeper.base import state, stop
from sweeper.base.fmt import PYTHON_CALL
from sweeper.base.output import first_line
from sweeper.base.hydra_internals import main_hydra
from sweeper.contract.config import ConfigError

__all__ = [
    "Advice",
    "RunResult",
    "SweepFailed",
    "SweepResult",
    "load_model",
    "multirun",
    "next_overrides",
    "reset",
    "run",
]  # sweeper.multirun, sweeper.run

if TYPE_CHECKING:
    import pandas as pd

# hydra.job.name as python -m sweeper has it: the same job log file, the same configs
TASK_NAME = "__main__"
COMMAND = ("python", "-m", "sweeper", "-m")  # how the advisor's next command begins


@dataclass
class Advice:
    """The advisor's findings on a sweep: ``text`` (its advice.md), ``next_overrides`` (the
    next command as the argument of :func:`multirun`, ``resume=true`` last; None when it has
    none) and ``command`` (the same as the advice prints it: ``sweeper.multirun([...])``)."""

    text: str
    next_overrides: list[str] | None
    command: str | None

    def __str__(self) -> str:
        return self.text

    def _repr_markdown_(self) -> str:  # a notebook shows the findings as a page
        return self.text


@dataclass
class SweepResult:
    """What :func:`multirun` returns: one sweep's parent run, its leaderboard and its advice.

    ``leaderboard``: the parent's ``summary.csv`` (one row a run, best first;
    with seeds swept, a configuration's runs follow each other). ``also``: the
    sweep's other parent runs, when its jobs logged to several experiments or
    stores (e.g. ``data=diabetes,wine``), each a SweepResult of its own."""

    leaderboard: "pd.DataFrame"
    parent_run_id: str
    experiment: str
    experiment_id: str
    tracking_uri: str
    status: str  # the parent run's
    counts: dict[str, int]  # n_finished, n_failed, ... as the parent's tags hold them
    advice: Advice
    best_run_id: str | None
    best_model_uri: str | None
    sweep_dir: Path
    exit_code: int  # the command line's: 0 when a job finished and none crashed
    also: list["SweepResult"] = field(default_factory=list)

    def load_best_model(self) -> Any:
        """The best run's logged model, as ``mlflow.pyfunc.load_model``
        loads it (from this sweep's store)."""
        if self.best_model_uri is None:
            raise LookupError(
                f"parent run {self.parent_run_id} has no best run: no run FINISHED with a finite "
                "metric"
            )
        return load_model(self.best_model_uri, self.tracking_uri)

    def __repr__(self) -> str:
        best = f", best run {self.best_run_id}" if self.best_run_id else ""
        more = f", and {len(self.also)} more parent run(s)" if self.also else ""
        return (
            f"<SweepResult parent run {self.parent_run_id} ({self.status}) of experiment '"
            f"{self.experiment}': "
            f"{len(self.leaderboard)} row(s){best}{more}>"
        )


@dataclass
class RunResult:
    """What :func:`run` returns: the run's id, status
    (FINISHED, FAILED: diverged, ...), metrics and model."""

    run_id: str | None
    status: str
    metrics: dict[str, float]
    reason: str | None
    experiment: str
    tracking_uri: str
    model_uri: str | None
    output_dir: Path
    config: dict[str, Any]

    def load_model(self) -> Any:
        if self.model_uri is None:
            raise LookupError(f"run {self.run_id} logged no model ({self.status})")
        return load_model(self.model_uri, self.tracking_uri)


class SweepFailed(RuntimeError):
    """What :func:`multirun` raises for a sweep that failed — the command line would
    exit non-zero: no run FINISHED, or a run crashed or could not be recorded. Its
    message is one line; ``result`` is the sweep's :class:`SweepResult` (its
    parent's status and counts, as the store holds them)."""

    def __init__(self, message: str, result: SweepResult | None = None):
        super().__init__(message)
        self.result = result


def multirun(overrides: Sequence[str]) -> SweepResult:
    """Run the sweep ``python -m sweeper -m OVERRIDES`` in this process and return its result.

    ``overrides``: the command line's arguments after ``-m``, one a string (``"lr=0.001,0.005"``,
    ``"+sweep=optuna"``, ``"hydra/launcher=joblib"``, ``"hydra.sweep.dir=..."``). Progress and
    the summary are printed on this process's stdout, as on the command line. Raises ValueError
    (the command line's one-line message) for bad input, before anything is written to the
    store, and :class:`SweepFailed` (its ``result`` attached) for a sweep that failed."""
    args = _checked(overrides, sweep=True)
    with _session(["-m", *args]):
        # lazy: saves ~33 ms at this module's import (measured)
        from sweeper.tracking import writer

        # as the command line: a long sweep's writer imports MLflow meanwhile
        writer.prestart(["-m", *args])
        code, error = 0, None
        try:
            _hydra().multirun(
                config_name="config",
                task_function=sweep_job,
                overrides=[*_mode(args, "MULTIRUN"), "+hydra.callbacks.sweeper.caller=python"],
            )
        except stop.Refused as e:
            raise _refused(e) from None
        # the end of the multirun (sweeper.sweep.callbacks): the command line's exit code
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        # a job raised (Hydra then skips the sweep's end): closed here, as sweeper.summary would
        except Exception as e:
            code, error = 1, e
        config = state.process().doing["sweep"]
        # before the sweep began (Hydra's own error): as it was raised
        if config is None and error is not None:
            raise error
        if config is None:
            raise SweepFailed("the sweep did not start (Hydra called no multirun callback)")
        sweep_dir = Path(str(config.hydra.sweep.dir)).absolute()
        if error is not None:
            # lazy: saves ~277 ms at this module's import (measured)
            from sweeper.sweep import life

            life.finish(sweep_dir)
        result = _results(sweep_dir, code)
        if code:
            raise SweepFailed(_failure(result, error), result) from error
        return result


def _said(e: BaseException) -> str:
    return first_line(e).rstrip(": ")


def _failure(result: SweepResult, error: BaseException | None) -> str:
    """A failed sweep in one line: its counts and parent as the store holds them, and why."""
    counts = (
        ", ".join(f"{v} {k.removeprefix('n_')}" for k, v in result.counts.items() if v) or "no run"
    )
    board = result.leaderboard
    reasons = [
        r for r in (board["reason"] if "reason" in board else []) if isinstance(r, str) and r
    ]
    why = (
        f"; {_said(error)}"
        if error is not None
        else f"; the first: {reasons[0]}"
        if reasons
        else ""
    )
    return (
        f"the sweep failed ({counts}; parent run {result.parent_run_id} {result.status}){why}: "
        "its leaderboard "
        "says why each run failed (this error's .result.leaderboard)"
    )


def run(overrides: Sequence[str] = ()) -> RunResult:
    """Train and record one configuration,
    as ``python -m sweeper OVERRIDES`` does; return its result.

    A run that diverged is returned FAILED with its reason (the command
    line exits 1); bad input, a missing GPU or an unusable store raise
    (ValueError and its kind, with the command line's one-line message)."""
    args = _checked(overrides, sweep=False)
    with _session(args):
        ret = _hydra().run(
            config_name="config", task_function=one_job, overrides=_mode(args, "RUN")
        )
        result = ret.return_value  # the job's exception, raised here
        uri = result["tracking_uri"]
        model = None
        if result.get("run_id") and result.get("artifacts", {}).get("models"):
            # lazy: saves ~159 ms at this module's import (measured)
            from sweeper import tracking
            from sweeper.insight.publish import model_uri

            model = model_uri(tracking.client(uri).get_run(result["run_id"]))
        return RunResult(
            result.get("run_id"),
            result["status"],
            dict(result.get("metrics") or {}),
            result.get("reason"),
            result["experiment"],
            uri,
            model,
            Path(str(ret.hydra_cfg.hydra.runtime.output_dir)),
            result["config"],
        )


def sweep_job(cfg: Any) -> float:
    """The multirun's task: the command line's (:func:`sweeper.__main__.main`)."""
    # lazy: saves ~245 ms at this module's import (measured)
    from sweeper.job.task import main, objective

    return objective(main(cfg))


def one_job(cfg: Any) -> dict[str, Any]:
    """The single run's task: the command line's, raising where it would exit."""
    # lazy: saves ~214 ms at this module's import (measured)
    from sweeper.job.context import JobContext
    from sweeper.job.record import run as record
    from sweeper.job.task import where

    ctx = JobContext.from_hydra()
    result = record(cfg, ctx)
    if result.get("run_id"):
        print(where(cfg, ctx, result))
    if result["status"] != "FINISHED" and not result.get("resumed_from"):
        print(
            f"sweeper: run {result['run_id']} {result['status']}: {result['reason']}",
            file=sys.stderr,
        )
    return result


def load_model(uri: str, tracking_uri: str) -> Any:
    """``mlflow.pyfunc.load_model(uri)`` with ``uri`` (``models:/<id>``, ``runs:/<id>/model``)
    looked up in the store ``tracking_uri``, without changing MLflow's process-wide tracking URI."""
    # lazy: saves ~1304 ms at this module's import (measured)
    import mlflow.artifacts
    import mlflow.pyfunc

    # lazy: saves ~34 ms at this module's import (measured)
    from sweeper import tracking

    model_id = uri.removeprefix("models:/")
    # a logged model: MLflow would look for it in
    if model_id != uri and "/" not in model_id and "@" not in model_id:
        # its global tracking URI
        uri = tracking.client(tracking_uri).get_logged_model(model_id).artifact_location
    # downloaded into a folder that goes once the model is loaded (its weights and code are read
    # at load): MLflow's own download leaves a new temporary folder each call from a server's store
    with tempfile.TemporaryDirectory(prefix="sweeper-model-") as tmp:
        local = mlflow.artifacts.download_artifacts(
            artifact_uri=uri, tracking_uri=tracking_uri, dst_path=tmp
        )
        return mlflow.pyfunc.load_model(local)


def _checked(overrides: Sequence[str], sweep: bool) -> list[str]:
    """The overrides as strings, checked as the command line checks
    its own (one-line ConfigError)."""
    if isinstance(overrides, str):
        raise ConfigError(
            f"overrides={overrides!r} is not allowed: expected a list of key=value strings, "
            f"e.g. [{', '.join(repr(o) for o in overrides.split())}]"
        )
    args = [str(o) for o in overrides]
    flags = [a for a in args if a.startswith("-")]
    if flags:
        raise ConfigError(
            f"{flags[0]} is not allowed here: expected key=value overrides "
            "(sweeper.multirun sweeps, sweeper.run trains one configuration)"
        )
    bare = [a for a in args if "=" not in a and not a.startswith("~")]
    if bare:  # Hydra's parser would say so over several lines
        raise ConfigError(
            f"{bare[0]} is not allowed: expected an override key=value (or ~key to delete one)"
        )
    # here: this module's imports load it already (~0 ms either way, measured)
    from sweeper.contract.config import check_overrides

    try:
        check_overrides(["-m", *args] if sweep else args, whole=True)
    except ConfigError as e:
        swept, marker, _ = str(e).partition(" is a sweep: add -m")
        if marker:  # the command line's hint names its flag
            raise ConfigError(
                f"{swept} is a sweep: sweeper.run trains one configuration; sweep with "
                "sweeper.multirun([...])"
            ) from None
        raise
    # lazy: saves ~142 ms at this module's import (measured)
    from sweeper.contract.hydra_args import chdir_paths
    from sweeper.contract.model import model_overrides

    # model.<hyperparameter>=...: added to the model's section; with hydra.job.chdir=true
    # a relative data.path is read from here; as the command line does
    return chdir_paths(model_overrides(args))


def _refused(e: stop.Refused) -> Exception:
    """What :func:`multirun` raises for input refused once Hydra runs our code: the kind
    of error the command line reported (ConfigError and DataError are ValueErrors;
    TrackingError for a store that cannot be used), with its one-line message; a
    ConfigError for other bad input, a RuntimeError for a sweep that could not start."""
    # lazy: saves ~244 ms at this module's import (measured)
    from sweeper.job.task import EXPECTED

    cause = e.__context__  # stop.refuse is called while handling it
    kind = (
        type(cause) if isinstance(cause, EXPECTED) else ConfigError if e.code == 2 else RuntimeError
    )
    return kind(e.message)


def _hydra() -> Any:
    """Hydra's app over conf/, as ``@hydra.main`` in
    sweeper/__main__.py builds it (plugins' search paths too)."""
    # lazy: saves ~89 ms at this module's import (measured)
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    return main_hydra(TASK_NAME, str(CONF_DIR))


def _mode(args: list[str], mode: str) -> list[str]:
    """The overrides with ``hydra.mode`` added, as Hydra's command line
    adds it (``-m``: MULTIRUN) when the config does not set it."""
    return (
        [*args]
        if any(a.lstrip("+").startswith("hydra.mode=") for a in args)
        else [*args, f"hydra.mode={mode}"]
    )


# Hydra's global state and sweeper's per-process state hold one sweep at a time
_ONE_AT_A_TIME = threading.Lock()


@contextmanager
def _session(args: list[str]) -> Iterator[None]:
    """One call: state reset before and after; Ctrl-C and SIGTERM stop training
    threads as on the command line (the caller's own handlers back afterwards); an
    interruption closes the runs (KILLED) and is raised on. Calls from several threads
    run one after another; a call from inside a call (a model's code) is refused."""
    if state.process().api_caller == threading.get_ident():
        raise RuntimeError(
            "sweeper.multirun/run was called while a sweep of this same thread runs (from a "
            "model's "
            "or a callback's code): one sweep at a time a process; call it after this one returns"
        )
    with _ONE_AT_A_TIME:
        state.process().api_caller = threading.get_ident()  # the thread whose call holds it
        try:
            with _one(args):
                yield
        finally:
            state.process().api_caller = None


@contextmanager
def _one(args: list[str]) -> Iterator[None]:
    reset()
    handlers = stop.install()
    try:
        yield
    except KeyboardInterrupt:
        stop.STOP.set()  # training threads end now
        # a second Ctrl-C must not cut the bookkeeping short (the caller's handlers come back below)
        stop.ignore()
        callbacks = sys.modules.get("sweeper.sweep.callbacks")
        line = callbacks.interrupted(args) if callbacks else None  # says a store that failed
        print(
            line or "sweeper: interrupted before any run started: nothing recorded", file=sys.stderr
        )
        raise
    finally:
        stop.restore(handlers)
        reset()


def reset() -> None:
    """Forget what an earlier sweep or run of this process left: Hydra's global state, an
    earlier Ctrl-C, and the sweep's state (:mod:`sweeper.base.state`: its writer and painter
    processes stopped, then a fresh one: no store client, experiment, run or parent of the earlier
    sweep). Only the modules already imported are touched: nothing heavy is imported for it."""
    stop.reset()
    mods = sys.modules
    if "hydra.core.global_hydra" in mods:
        mods["hydra.core.global_hydra"].GlobalHydra.instance().clear()
    if "hydra.core.hydra_config" in mods:
        mods["hydra.core.hydra_config"].HydraConfig.instance().cfg = None
    for name in ("sweeper.tracking.writer", "sweeper.insight.plots"):
        if name in mods:
            mods[name].stop()
    # lazy: saves ~3.7 ms at this module's import (measured)
    from sweeper.base import process

    # the sweep folders' locks (the command line holds its one until it exits)
    process.release_all()
    state.begin()
    state.process().doing.update(sweep=None, job=None, since=None)


def _results(sweep_dir: Path, code: int) -> SweepResult:
    """The sweep's result from its sweep.json and the store: one
    SweepResult a parent run (the first; the rest in ``also``)."""
    # lazy: saves ~114 ms at this module's import (measured)
    from sweeper.job.sweepdir import sweep_state

    parents = sweep_state(sweep_dir)["parents"]
    if not parents:
        raise SweepFailed(f"sweep {sweep_dir} created no parent run")
    results = [_parent_result(p, sweep_dir, code) for p in parents]
    results[0].also = results[1:]
    return results[0]


def next_overrides(command: str | None) -> list[str] | None:
    """The overrides of an advised next command, in either form: ``sweeper.multirun([...])``
    (a sweep of this API) or ``python -m sweeper -m ...`` (of the command line)."""

    if not command:
        return None
    if command.startswith(PYTHON_CALL) and command.endswith(")"):
        return [str(a) for a in ast.literal_eval(command[len(PYTHON_CALL) : -1])]
    argv = shlex.split(command)
    return argv[len(COMMAND) :] if tuple(argv[: len(COMMAND)]) == COMMAND else None


def _parent_result(p: dict[str, Any], sweep_dir: Path, code: int) -> SweepResult:
    # lazy: saves ~412 ms at this module's import (measured)
    import pandas as pd

    # lazy: saves ~141 ms at this module's import (measured)
    from sweeper import tracking
    from sweeper.insight import leaderboard
    from sweeper.insight.advice.evidence import TAG

    c = tracking.client(p["uri"])
    parent = c.get_run(p["run_id"])
    tags = parent.data.tags
    with tempfile.TemporaryDirectory() as tmp:
        names = {a.path for a in c.list_artifacts(p["run_id"])}
        summary = (
            Path(c.download_artifacts(p["run_id"], "summary.csv", tmp))
            if "summary.csv" in names
            else None
        )
        board = leaderboard.read_csv(summary) if summary else pd.DataFrame()
        text = (
            Path(c.download_artifacts(p["run_id"], "advice.md", tmp)).read_text()
            if "advice.md" in names
            else ""
        )
    command = tags.get(f"{TAG}next_command")
    advice = Advice(text, next_overrides(command), command)
    counts = {k: int(v) for k, v in tags.items() if k.startswith("n_") and v.isdigit()}
    return SweepResult(
        board,
        p["run_id"],
        p["experiment"],
        p["experiment_id"],
        p["uri"],
        parent.info.status,
        counts,
        advice,
        tags.get("best_run_id"),
        tags.get("best_model_uri"),
        sweep_dir,
        code,
    )

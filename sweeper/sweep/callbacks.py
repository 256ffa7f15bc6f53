"""Hydra callbacks: the launching process opens and closes every
multirun (see ``sweeper.sweep.life``)."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn

from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from hydra.types import RunMode
from sweeper import tracking
from sweeper.base import state, stop
from sweeper.base.tags import HOST, PID
from sweeper.base.files import RESULT_FILE
from sweeper.contract.config import ConfigError
from sweeper.contract.hydra_args import hydra_line
from sweeper.models.interface import ModelError
from sweeper.sweep import life as sweep
from sweeper.sweep.life import claim_run_dir
from sweeper.tracking.store import TrackingError


__all__ = ["interrupted", "start_failed"]


class SweepCallback(Callback):
    """Checks all jobs and creates the parent run(s) before the first
    job; prints the summary after the last.

    Hydra skips ``on_multirun_end`` when a job raised; jobs therefore record their expected outcomes
    instead of raising, and ``python -m sweeper.summary <sweep dir>`` does the same work by hand.

    ``caller``: ``python`` when :func:`sweeper.multirun` started the
    sweep (``hydra.callbacks.sweeper.caller``): its parent run says
    so, and the advisor's next command is that call.
    """

    def __init__(self, caller: str = "cli") -> None:
        self.caller = caller

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        state.process().doing["sweep"] = config
        try:
            sweep.start(config, caller=self.caller)
            # lazy: saves ~3.4 ms at this module's import (measured)
            from sweeper.sweep import resuming_sweeper

            # resume=true filters finished configurations; a launcher's failure: one line
            resuming_sweeper.put_in_place(config)
        except Exception as e:  # noqa: BLE001  (the one place a sweep's start is decided)
            start_failed(e)

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        """A single run's folder, before Hydra makes it: one line when it
        cannot be made (a file on the way) or lies in a live sweep's folder
        (its job folders and result.json would be mixed with the sweep's)."""

        try:
            claim_run_dir(Path(str(config.hydra.run.dir)))
        except ConfigError as e:
            stop.refuse(str(e))

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        doing = state.process().doing  # for Ctrl-C (:func:`interrupted`)
        doing["job"], doing["since"] = config, time.time()

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        state.process().doing["job"] = None

        if config.hydra.mode == RunMode.MULTIRUN:
            # from where the sweep started: with hydra.job.chdir=true
            # this job runs in its own folder
            sweep.note_job(
                Path(config.hydra.runtime.cwd) / config.hydra.sweep.dir,
                Path(config.hydra.runtime.output_dir),
                config.hydra.job.num,
            )

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        code = sweep.finish(Path(config.hydra.sweep.dir).absolute(), returned=True)
        # a signal some library swallowed on its way (an import's `except
        if (signalled := stop.masked()) is not None:
            # ImportError`, a fallback's `except Exception`): the sweep is interrupted all the same
            raise signalled
        if code:
            sys.exit(code)


def start_failed(e: Exception) -> NoReturn:
    """What an error of a sweep's start is: the interruption when a signal came (an error
    OmegaConf or Hydra raised in a Ctrl-C's way, while the jobs were composed: not a refusal);
    else bad input in one line, exit 2 (a config, a store, a model of yours, the sweep's arguments
    as Hydra's sweeper reads them); else a bug, its traceback and exit 1 (Hydra would only warn and
    launch the jobs without a parent run)."""
    stop.raise_signalled(e)
    if isinstance(e, (ConfigError, ModelError, TrackingError)):
        stop.refuse(str(e))
    if isinstance(e, HydraException):
        stop.refuse(hydra_line(e))
    traceback.print_exc()
    stop.refuse(f"the sweep could not start: {type(e).__name__}: {e}", 1)


def interrupted(args: list[str]) -> str | None:
    """Ctrl-C reached ``python -m sweeper ARGS`` (or :func:`sweeper.multirun`): record it in the
    store and return the one line to print (None when nothing had been recorded yet). It does not
    raise: recording that fails (a store that fails now) is said in the line, still without a
    traceback, as the interruption is what the caller hears of.

    A multirun closes its sweep (:func:`sweeper.sweep.interrupted`); a single run is KILLED
    — by its job when Ctrl-C landed in training, else here (a RUNNING run of this process).
    """
    try:
        return _record_interruption(args)
    except Exception as e:  # noqa: BLE001  (the one place an interruption's bookkeeping fails)
        return (
            f"sweeper: interrupted; recording it in the store failed ({tracking.first_line(e)}): "
            "see python -m sweeper.report"
        )


def _record_interruption(args: list[str]) -> str | None:
    doing = state.process().doing
    if doing["sweep"] is not None:
        return sweep.interrupted(Path(doing["sweep"].hydra.sweep.dir).absolute(), args)
    job = doing["job"]
    # no job yet, or one cut short before it loaded the tracking code: it has created no run
    run_id, status = (
        _killed_run(job) if job is not None and "sweeper.tracking" in sys.modules else (None, None)
    )
    if run_id is None:
        return None
    if status in ("FINISHED", "FAILED"):  # it had ended, recorded, when the signal came
        return f"sweeper: interrupted after run {run_id} ended {status}: it is recorded as it ended"
    return f"sweeper: interrupted: run {run_id} KILLED"


def _killed_run(job: DictConfig) -> tuple[str | None, str | None]:
    """The single run that Ctrl-C ended and its status: from its result.json (a run that had
    ended keeps its FINISHED or FAILED), or its RUNNING run in the store, KILLED here."""

    # lazy: saves ~26 ms at this module's import (measured)
    from sweeper.insight import publish

    result = Path(job.hydra.runtime.output_dir) / RESULT_FILE
    # this run's, not an earlier one's
    if result.is_file() and result.stat().st_mtime >= state.process().doing["since"] - 1:
        written = json.loads(result.read_text())
        return written.get("run_id"), written.get("status")
    uri = job.tracking.uri
    db = tracking.sqlite_path(uri)
    # interrupted before the store existed: do not create it
    if db is not None and not db.is_file():
        return None, None
    # no store opened here yet (Ctrl-C cut MLflow's import short, or its store's): this process
    # created no run, and importing those modules again fails half-way ("partially initialized
    # module 'mlflow'", "Table 'experiments' is already defined")
    if not state.process().store_opened:
        return None, None
    c = tracking.client(uri)
    exp = c.get_experiment_by_name(job.tracking.experiment)
    if exp is None:
        return None, None
    mine = c.search_runs(
        [exp.experiment_id],
        f"attributes.status = 'RUNNING' and tags.`{PID}` = '{os.getpid()}' "
        f"and tags.`{HOST}` = '{socket.gethostname()}'",
    )
    killed = publish.mark_orphans(c, mine, True, "KILLED", stop.reason())
    return (killed[0], "KILLED") if killed else (None, None)

"""A sweep's state in one object, instead of a global in each module that keeps a part of it.

What one sweep (or one run) of this process holds while it lasts: the writer process that ends runs
while the next job trains (:mod:`sweeper.tracking.writer`), the process that draws the summary's
plots (:mod:`sweeper.insight.plots`), a client per store, the experiments found or created, the
runs this process created, and the parent runs by sweep folder. :func:`current` is the state the
code in use reads; :func:`begin` makes a fresh one current (the Python API does, before each sweep
or run: :func:`sweeper.api.reset`). Hydra calls sweeper's task function, launcher and callbacks
with no argument of sweeper's to carry it, so it is found here rather than passed down every call.

What this process holds for its whole life (:func:`begin` keeps it) is :func:`process`: the
signals received, the locks held, the caches filled once a process (a model's offer, its verdicts,
its gradient check, a pyfunc template), the messages said once. A worker forked from this process
inherits a copy of both, as it did of the module globals they replace; a spawned one starts afresh.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


__all__ = ["SweepState", "begin", "current", "digest", "process"]


@dataclass
class SweepState:
    writer: Any = None  # sweeper.tracking.writer.Writer, from the sweep's start to its end
    painter: Any = None  # sweeper.insight.plots.Painter, likewise
    # a store URI's MlflowClient, once its store exists
    clients: dict[str, Any] = field(default_factory=dict)
    # an embedded store's file (device, inode) then
    client_files: dict[str, Any] = field(default_factory=dict)
    # (uri, experiment name) → its id, found or created by this sweep (one lookup a
    # sweep, not one a job)
    experiments: dict[tuple[str, str], str] = field(default_factory=dict)
    # artifact URI and experiment id of the runs this process created: no get_run round
    # trip for them
    runs: dict[str, tuple[str, str]] = field(default_factory=dict)
    # the parent runs this process created, by sweep folder: what Ctrl-C closes even
    # before sweep.json exists
    parents: dict[Path, dict[str, dict[str, Any]]] = field(default_factory=dict)
    # sweep.json as this process wrote it, by sweep folder: its jobs here read it on,
    # should the folder be deleted
    sweep_files: dict[Path, dict[str, Any]] = field(default_factory=dict)
    # a single run's folder this command made (hydra.run.dir): removed again when the
    # run is refused before it starts
    new_run_dir: Path | None = None
    # the SHA-256 of each data file the sweep's fingerprints read (:func:`digest`), by
    # its (device, inode, size, mtime)
    digests: dict[tuple[int, int, int, int], str] = field(default_factory=dict)
    # the failures whose traceback was printed (sweeper.job.record): once each, then the
    # run's line only
    errors_said: set[str] = field(default_factory=set)


_current = SweepState()


@dataclass
class ProcessState:
    # sweeper.base.stop: the signals received, in order
    signals: list[int] = field(default_factory=list)
    # ... how deep the main thread is in stop.deferred sections, the signals that came
    # during one (raised at its end), and a signal whose exception Python swallowed
    # (stop.catch_swallowed), sent again to land; whether that hook runs now, and the thread
    # (and its queue) that sends a signal again
    deferring: int = 0
    deferred: list[int] = field(default_factory=list)
    again: list[int] = field(default_factory=list)
    unraisable: bool = False
    resender: Any = None
    # sweeper.base.process: path → the open file whose lock this process holds until it
    # exits; the parent pid this process watches (once a process)
    locks: dict[str, Any] = field(default_factory=dict)
    watched: int | None = None
    # sweeper.base.output: why the standard output could not be written (None: it could);
    # the passwords of URIs said, by (scheme and user, host), to mask them in what is printed
    stdout_broken: str | None = None
    passwords: dict[tuple[str, str], str] = field(default_factory=dict)
    # sweeper.base.output: the log files that could not be written (said once each)
    logs_said: set[str] = field(default_factory=set)
    # sweeper.contract.model: the model sources that differ from their pin, said once each
    sources_said: set[str] = field(default_factory=set)
    # sweeper.api: the thread whose call of the Python API holds the process (None: none)
    api_caller: int | None = None
    # sweeper.sweep.callbacks: what this process is doing, for Ctrl-C: the multirun's
    # config, the current job's and when it began
    doing: dict[str, Any] = field(
        default_factory=lambda: {"sweep": None, "job": None, "since": None}
    )
    # sweeper.sweep.cores: this sweep's pool of CPU workers (one), from warm() or the
    # first launch
    pool: Any = None
    # sweeper.tracking.store: whether a client opened a store here (no run of this process
    # exists before: what a Ctrl-C then records is nothing)
    store_opened: bool = False
    # sweeper.insight.plots: a painter between the Python API's calls (plots.stop keeps a
    # live, idle one here; the next sweep's start takes it: its matplotlib and
    # scikit-learn already imported)
    spare_painter: Any = None
    # sweeper.sweep.packing: the per-epoch costs of a data set's blocks, by their key
    costs: dict[tuple, Any] = field(default_factory=dict)
    # sweeper.job.compute: a model's memory footprint (or None), by its key
    footprints: dict[str, Any] = field(default_factory=dict)
    # sweeper.tracking.pyfunc: the pyfunc template folder by key, its artifacts by folder
    templates: dict[str, Path] = field(default_factory=dict)
    template_artifacts: dict[Path, dict[str, str]] = field(default_factory=dict)
    # sweeper.models.forms: the chosen activation forms, by device and dtype
    forms: dict[str, dict[str, str]] = field(default_factory=dict)
    # sweeper.models.gradcheck: this process's gradient-check verdicts, by its key
    gradchecks: dict[str, Any] = field(default_factory=dict)
    # sweeper.models.interface: what a model class offers, by its import path
    offers: dict[str, Any] = field(default_factory=dict)
    # sweeper.models.stacked: why a model does not batch (None: it does), by its key
    verdicts: dict[str, str | None] = field(default_factory=dict)
    # sweeper.models.usercode: thread ident → how deep it is in call_user(); the pid
    # that patched os._exit
    user_depth: Counter = field(default_factory=Counter)
    user_pid: int | None = None
    # sweeper.base.strict: what a NumPy function called on the stand-in's device arrays
    # runs, by (module, name), filled as its namespace (strict/namespace.py) is imported
    device_functions: dict[tuple[str, str], Any] = field(default_factory=dict)


_process = ProcessState()


def process() -> ProcessState:
    """What this process holds for its life, whatever sweep it is in."""
    return _process


def current() -> SweepState:
    """The state of the sweep (or run) this process is in."""
    return _current


def begin() -> SweepState:
    """A fresh state, current from now on. The processes of the one before (its writer,
    its painter) are the caller's to stop first."""
    global _current
    _current = SweepState()
    return _current


def digest(path: Any) -> str | None:
    """The SHA-256 of a data file's content (a run's fingerprint holds it), read once
    a sweep: again only when the file changes (another size, modification time or
    inode); None when it is no readable file (the job that reads it says why)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return None
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        held = current().digests
        if key not in held:
            with open(path, "rb") as f:
                held[key] = hashlib.file_digest(f, "sha256").hexdigest()
        return held[key]
    except OSError:
        return None

"""A sweep's state in one object, instead of a global in each module that keeps a part of it.

What one sweep (or one run) of this process holds while it lasts: the writer process that ends runs
while the next job trains (:mod:`sweeper.tracking.writer`), the process that draws the summary's
plots (:mod:`sweeper.insight.plots`), a client per store, the experiments found or created, the
runs this process created, and the parent runs by sweep folder. :func:`current` is the state the
code in use reads; :func:`begin` makes a fresh one current (the Python API does, before each sweep
or run: :func:`sweeper.api.reset`). Hydra calls sweeper's task function, launcher and callbacks
with no argument of sweeper's to carry it, so it is found here rather than passed down every call.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


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

# What outlives one sweep in this process: a painter between the Python API's calls
# (sweeper.insight.plots.stop keeps a live, idle one here; the next sweep's start
# takes it: its matplotlib and scikit-learn already imported)
spare: dict[str, Any] = {"painter": None}


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

"""A batched group's runs ended together in the launching process, where no writer process
runs: the writer's protocol (:mod:`sweeper.tracking.writer`) without its process.

Each member's job hands its run's end over as it would to the writer (``TrackedRun.hand_to``;
its result.json says this process records the run), and the group's runs end together when
its last member is recorded: one :func:`sweeper.tracking.ending.end_each`, on a SQL store one
transaction, each result.json settled as the writer settles it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Iterator

from sweeper import tracking
from sweeper.base import state
from sweeper.base.files import read_json
from sweeper.tracking.writer import RECORDING, _kept, _record_all, _said, request

__all__ = ["Together", "together"]


class Together:
    """The writer's side for one batched group recorded in the launching process: its members'
    runs handed over as each job is recorded, then ended together when the group's last one is
    (the writer's ``_record_all``: one transaction a store, each run's result.json settled),
    ~7 ms a run against ~15 ms one transaction each (``bench/ending_bench.py --ways bulk
    --at-once 8`` against ``--at-once 1``)."""

    def __init__(self) -> None:
        self.pid = os.getpid()  # the process that records the runs: this one
        self.jobs: list[dict[str, Any]] = []

    def make_room(self) -> None:
        """Nothing to wait for: the runs are ended when the group is."""

    def submit(self, *handed: Any) -> None:
        """Keep the end of a run (:meth:`sweeper.tracking.writer.Writer.submit`'s arguments) for
        :meth:`end_all`."""
        self.jobs.append(request(*handed))

    def end_all(self) -> None:
        """End the runs handed over, each one's failure said and kept for upload as the writer
        says and keeps it; when Ctrl-C cuts this short, each run whose result.json still says
        this process records it is kept for upload (as ``Writer.end`` keeps the writer's)."""
        jobs, self.jobs = self.jobs, []
        try:
            for answer in _record_all(jobs, {}, tracking):
                _said(answer)
        finally:
            for job in jobs:
                path = Path(job["result"])
                if (read_json(path) or {}).get(RECORDING) == self.pid:
                    _kept(path, "interrupted before its run was ended")


@contextlib.contextmanager
def together(on: bool) -> Iterator[None]:
    """While a batched group's members are recorded (``on``, and no writer process): their runs
    end together when the last one is recorded, or when the recording stops."""
    now = state.current()
    if not on or now.writer is not None:
        yield
        return
    group = now.writer = Together()
    try:
        yield
    finally:
        now.writer = None
        group.end_all()

"""One run in the store, from creation to its end: the record half's vocabulary (start,
finish, fail, kill, hand to the writer). It keeps what every call needs together: the
store's URI and client, the run's id and its system-metrics sampler."""

from __future__ import annotations

import threading
import time
import weakref
from pathlib import Path
from typing import Any, Iterable, Mapping

from sweeper.base import state
from sweeper.base.process import HEARTBEAT, beat, heartbeat_interval
from sweeper.tracking import bulk, ending, records, system
from sweeper.tracking.store import failures


__all__ = ["TrackedRun"]


class Heartbeat:
    """Refreshes RUNNING runs' ``heartbeat`` tag every interval from one thread, so that a
    report on any host tells a live job's run from one whose job died
    (:func:`sweeper.base.process.beating`): one run's, or a batched group's members' (one
    statement a beat on the embedded store: one thread for the group, not one a member). A run
    leaves it when it ends (:meth:`stop`); the thread ends with the last. A failed refresh
    is skipped: the next one may pass, and a run that goes silent is judged by its last beat."""

    def __init__(self, client: Any, owners: list["TrackedRun"], interval: float) -> None:
        self.client, self.interval = client, interval
        # a job that raised past its run drops it: its beats stop with it
        self._owners = {o.run_id: weakref.ref(o) for o in owners}
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="sweeper-heartbeat")
        self._thread.start()

    def _loop(self) -> None:
        while not self._done.wait(self.interval):
            with self._lock:
                ids = [run_id for run_id, ref in self._owners.items() if ref() is not None]
            if not ids:
                return
            try:
                bulk.set_tag_on_runs(self.client, ids, HEARTBEAT, beat(time.time(), self.interval))
            except failures():  # the store hiccuped (locked, a server's blip): the next may pass
                pass

    def stop(self, run_id: str | None = None) -> None:
        """No more beats for ``run_id`` (for every run when None); the
        thread ends once no run is left."""
        with self._lock:
            if run_id is None:
                self._owners.clear()
            else:
                self._owners.pop(run_id, None)
            last = not self._owners
        if last:
            self._done.set()
            if threading.current_thread() is not self._thread:
                self._thread.join()


class TrackedRun:
    """A run of the store at ``uri`` (client ``client``), created by :meth:`start`."""

    def __init__(self, uri: str, client: Any, run_id: str, experiment_id: str) -> None:
        self.uri, self.client, self.run_id, self.experiment_id = uri, client, run_id, experiment_id
        self._monitor: system.SystemSampler | None = None
        self._heart: Heartbeat | None = None

    @classmethod
    def start(
        cls,
        uri: str,
        client: Any,
        experiment_id: str,
        name: str,
        tags: Mapping[str, str],
        parent_run_id: str | None = None,
        params: Mapping[str, Any] | None = None,
        start_time: int | None = None,
    ) -> "TrackedRun":
        """Create the run RUNNING with its name and tags (a child of
        ``parent_run_id`` when given); its params come with its last batch
        (or now, ``params``); it started now, or at ``start_time`` (ms)."""
        interval = heartbeat_interval()
        tags = {**tags, HEARTBEAT: beat(time.time(), interval)}
        run_id = records.start_run(
            client,
            experiment_id,
            name,
            tags,
            params=params,
            parent_run_id=parent_run_id,
            start_time=start_time,
        )
        run = cls(uri, client, run_id, experiment_id)
        run._heart = Heartbeat(client, [run], interval)
        return run

    @classmethod
    def start_many(
        cls, uri: str, client: Any, experiment_id: str, specs: list[Mapping[str, Any]]
    ) -> list["TrackedRun"]:
        """:meth:`start` for each spec (``name``, ``tags``, ``parent_run_id``,
        ``params``, ``start_time``): on the embedded store in one transaction
        (:func:`bulk.start_runs`), with one heartbeat for them all."""
        interval = heartbeat_interval()
        now = beat(time.time(), interval)
        ids = bulk.start_runs(
            client, experiment_id, [{**s, "tags": {**s["tags"], HEARTBEAT: now}} for s in specs]
        )
        runs = [cls(uri, client, run_id, experiment_id) for run_id in ids]
        heart = Heartbeat(client, runs, interval) if runs else None
        for run in runs:
            run._heart = heart
        return runs

    def stop_heartbeat(self) -> None:
        """No more beats: the run ends now (or another process ends it within an interval)."""
        heart, self._heart = self._heart, None
        if heart is not None:
            heart.stop(self.run_id)

    def sample_system(self, also: list["TrackedRun"] = (), min_s: float = 0.0) -> None:
        """Sample CPU, memory (and GPU) while the run trains (nothing without
        psutil); the samples logged while it runs go to the runs ``also`` too (a
        batched group's members); none if it ends within ``min_s`` seconds."""
        self._monitor = system.system_monitor(self.client, self.run_id, self.uri, min_s=min_s)
        if self._monitor is not None:
            self._monitor.also = [r.run_id for r in also]

    def system_samples(self) -> list[Any]:
        """Stop sampling; the samples not logged yet, for the run's last batch."""
        monitor, self._monitor = self._monitor, None
        return system.stop(monitor)

    def finish(self, metrics: Mapping[str, float], **end: Any) -> None:
        """Log the run's last batch, data sets, artifacts and models
        and end it (:func:`ending.end_runs`)."""
        self.stop_heartbeat()
        ending.end_runs(self.client, [ending.Ending(self.run_id, {"metrics": metrics, **end})])

    def fail(
        self, reason: str, params: Mapping[str, Any], status: str, artifacts: Iterable[Path] = ()
    ) -> None:
        """End the run ``status`` (FAILED, or KILLED when interrupted: the caller says which)
        with its reason, params, system metrics and ``artifacts`` (a failed run's error file)."""
        self.stop_heartbeat()
        end = dict(
            tags={"failure_reason": reason},
            status=status,
            system=self.system_samples(),
            params=params,
            artifacts=artifacts,
        )
        ending.end_runs(self.client, [ending.Ending(self.run_id, end)])

    def hand_to(self, writer: Any, end: Mapping[str, Any], result_path: Path) -> None:
        """Let the writer process end the run (its last batch ``end``)
        while this process goes on."""
        self.stop_heartbeat()
        writer.submit(
            self.uri,
            self.run_id,
            state.current().runs.pop(self.run_id, None),
            dict(end),
            result_path,
        )

"""System metrics (CPU, memory, disk, network; GPU with nvidia-ml-py)
of a run, sampled in a thread."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from sweeper.base.tested import optional
from sweeper.tracking.records import BATCH
from sweeper.tracking.store import failures, first_line

__all__ = ["SystemSampler", "stop", "system_monitor"]


class SystemSampler:
    """CPU, memory, disk and network (and GPU with nvidia-ml-py) sampled every ``interval``
    seconds in a thread, as MLflow's ``system/...`` metrics, one step per sample.

    MLflow's own monitor asks the store for the run and logs at every sample (two store calls every
    interval, each holding the GIL the training loop needs). Here the samples stay in memory: a run
    shorter than ``flush_every`` seconds logs them with its final batch (no extra store call), a
    longer one also sends them from the thread every ``flush_every`` seconds, so they show up live.
    """

    def __init__(
        self, c: Any, run_id: str, uri: str, interval: float, flush_every: float, min_s: float = 0.0
    ):
        # lazy: saves ~4003 ms at this module's import (measured)
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        # MLflow picks the monitors (GPU only where its driver library
        # answers); its thread is not started.
        self.monitors = SystemMetricsMonitor(run_id, tracking_uri=uri).monitors
        self.c, self.run_id, self.interval, self.flush_every = (
            c,
            run_id,
            interval,
            max(flush_every, min_s),
        )
        self.min_s, self.began = (
            min_s,
            time.monotonic(),
        )  # a run shorter than min_s keeps no samples
        self.rows: list[Any] = []
        self.also: list[str] = []  # more runs the samples go to (a batched group's other members)
        self.step = 0
        self.flush_error: str | None = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, daemon=True, name="sweeper-system-metrics"
        )
        self._thread.start()

    def _loop(self) -> None:
        last_flush = time.monotonic()
        self._sample(keep=False)  # psutil's CPU percentage counts from its previous call
        while not self._done.wait(self.interval):
            self._sample()
            if time.monotonic() - last_flush >= self.flush_every:
                last_flush = time.monotonic()
                self._flush()

    def _sample(self, keep: bool = True) -> None:
        """One sample of each monitor, kept as the next step's row (``keep=False``: the first
        call, whose numbers count from nothing); a monitor that fails (a GPU gone, a counter
        missing) is dropped, said once."""
        # lazy: saves ~2365 ms at this module's import (measured)
        from mlflow.entities import Metric

        now, row = int(time.time() * 1000), []
        for m in list(self.monitors):
            try:
                m.collect_metrics()
                got = m.aggregate_metrics().items() if keep else ()
                row += [Metric(f"system/{k}", float(v), now, self.step) for k, v in got]
            except Exception as e:  # noqa: BLE001  (the monitor's own: it goes, the run does not)
                self.monitors.remove(m)
                logging.getLogger(__name__).warning(
                    "system metrics: %s dropped: %s", type(m).__name__, first_line(e)
                )
            m.clear_metrics()
        if keep:
            with self._lock:
                self.rows += row
                self.step += 1

    def _flush(self) -> None:
        with self._lock:
            rows, self.rows = self.rows, []
        try:
            for run_id in [self.run_id, *self.also]:
                for i in range(0, len(rows), BATCH):
                    self.c.log_batch(run_id, metrics=rows[i : i + BATCH])
        except failures() as e:  # the run still ends; these samples are lost, said once
            if self.flush_error is None:
                self.flush_error = first_line(e)
                logging.getLogger(__name__).warning(
                    "system metrics of run %s not logged: %s", self.run_id, self.flush_error
                )

    def stop(self) -> list[Any]:
        """Stop sampling; return the samples not logged yet (for the run's final batch). A run
        shorter than ``min_s`` gets none (nothing was sent: the first flush waits that long
        too); a longer one shorter than one interval gets one sample, over its whole length."""
        self._done.set()
        self._thread.join()
        if time.monotonic() - self.began < self.min_s:
            self.rows = []
            return []
        if self.step == 0:
            self._sample()
        with self._lock:
            rows, self.rows = self.rows, []
        return rows


def system_monitor(
    c: Any,
    run_id: str,
    uri: str,
    interval: float = 0.5,
    flush_every: float = 30.0,
    min_s: float = 0.0,
) -> SystemSampler | None:
    """Start sampling system metrics for a run if psutil is installed (None without it); a
    run that ends before ``min_s`` seconds (``tracking.system_metrics_min_s``) keeps none."""
    if optional("psutil") is None:  # lazy: saves ~44 ms at this module's import (measured)
        return None
    return SystemSampler(c, run_id, uri, interval, flush_every, min_s)


def stop(monitor: SystemSampler | None) -> list[Any]:
    """Stop a sampler; the samples it has not logged, to pass to
    :func:`finish_run` (``system=``)."""
    return monitor.stop() if monitor is not None else []

"""``hydra/launcher=joblib``: its worker processes started and warmed
(imports, stores) while the sweep starts."""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from omegaconf import DictConfig, OmegaConf

from sweeper import settled, tracking
from sweeper.base.tested import optional, shortcut

__all__ = ["warm_joblib_workers"]

log = logging.getLogger("sweeper")


JOBLIB_LAUNCHER = "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"


def warm_joblib_workers(config: DictConfig, jobs: list[tuple[list[str], dict[str, Any]]]) -> Any:
    """With ``hydra/launcher=joblib``, start its worker processes now and have each
    import what a job needs (sweeper, MLflow: ~2 s a worker) and open the jobs'
    stores, in a thread, while this process opens them too; return the thread.

    The launcher's ``Parallel`` is called with the same arguments as here (hydra_joblib_launcher's
    ``launch``), so joblib hands it the same, already warm, loky workers; were they to
    differ, joblib would start new ones, as it does without this. None when there is
    nothing to warm (another launcher, one worker: joblib then runs the jobs in this
    process; the shortcut ``joblib_warm`` off: ``SWEEPER_PUBLIC_ONLY``)."""
    if str(config.hydra.launcher.get("_target_")) != JOBLIB_LAUNCHER or not shortcut("joblib_warm"):
        return None

    # lazy: saves ~150 ms at this module's import (measured)
    launcher, joblib = optional("hydra_plugins.hydra_joblib_launcher._core"), optional("joblib")
    if launcher is None or joblib is None:
        return None
    cfg = {
        k: v
        for k, v in OmegaConf.to_container(config.hydra.launcher, resolve=True).items()
        if k != "_target_"
    }
    cfg["backend"] = "loky"  # as the launcher sets it
    launcher.process_joblib_cfg(cfg)
    workers = min(joblib.effective_n_jobs(cfg.get("n_jobs") or 1), len(jobs))
    uris = sorted({c["tracking"]["uri"] for _, c in jobs})
    if workers <= 1:
        return None

    def warm() -> None:
        try:
            each = (joblib.delayed(_warm_worker)(uris) for _ in range(workers))
            pids = joblib.Parallel(**cfg)(each)
            log.info(
                "joblib: %d worker processes warmed (pids %s)",
                len(set(pids)),
                ", ".join(map(str, sorted(set(pids)))),
            )
        # the launcher starts its workers itself, as without this
        except Exception as e:  # noqa: BLE001
            log.warning("joblib's workers could not be warmed: %s", e)

    thread = threading.Thread(target=warm, name="sweeper-warm-joblib", daemon=True)
    thread.start()
    return thread


def _warm_worker(uris: list[str]) -> int:
    """In a joblib worker: import what its jobs will (the task's modules, MLflow and
    its pyfunc flavour) and open their stores (MLflow keeps a store per URI)."""

    t = time.perf_counter()
    # sweeper's MLflow settings before MLflow's import, as the job's own client sets them
    tracking.mlflow_defaults()
    with settled():  # as the launching process imports MLflow: no GC passes over its modules
        # lazy: saves ~1174 ms at this module's import (measured)
        from sweeper.job import record  # noqa: F401
        from sweeper.tracking import pyfunc  # noqa: F401  (imports MLflow)

    for uri in uris:
        try:
            tracking.client(uri)
        except tracking.failures():  # the job says what is wrong with it
            pass

    # an already warm worker leaves this task to another
    time.sleep(max(0.0, 0.05 - (time.perf_counter() - t)))
    return os.getpid()

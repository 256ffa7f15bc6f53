"""The tags sweeper writes on a run and reads back, and their values. Imports nothing of ours."""

from __future__ import annotations

from typing import Any

__all__ = [
    "BOOK",
    "CONFIG_FINGERPRINT",
    "DATA_SHA256",
    "ENGINE",
    "GPU_DEVICE",
    "GROUP",
    "GROUP_SIZE",
    "HOST",
    "LAUNCHER",
    "MLP_NAME",
    "ORPHAN",
    "PID",
    "PRUNED_AT",
    "REPLACED_BY",
    "RERUN",
    "RETRIED",
    "SWEEPS",
    "SWEEP_FROM",
    "TRAJECTORY",
    "WORKER",
    "WORKER_HOST",
    "WORKER_PID",
    "booked",
    "model_name",
]

# A parent run's tag: what started its sweep, when not the command line ("python":
# sweeper.multirun). The advisor's next command then takes that form: sweeper.multirun([...]).
SWEEP_FROM = "sweep_from"
# failure reasons of a run its job did not close
ORPHAN = "orphaned: its job ended without closing the run (killed?)"
INTERRUPTED = "interrupted (Ctrl-C)"
RETRIED = "an attempt: its engine retried the job"


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


# sweeper's own network, as runs, tables and promote --model name it (its config: model=mlp)
MLP_NAME = "mlp"


def model_name(tags: Any) -> str:
    """A run's model, short, from its tags: the last two parts of its import path
    (``my_nets.TwoLayerNet``, ``nets.resnets.ResTanh`` → ``resnets.ResTanh``), or
    ``mlp`` for sweeper's MLP (a run without a ``model`` tag)."""
    path = str((tags or {}).get("model") or "").replace(":", ".")
    return ".".join(path.split(".")[-2:]) if path else MLP_NAME

"""The launcher's config, stored under ``hydra/launcher`` as
``batched`` (imported at plugin discovery: light)."""

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from hydra.core.config_store import ConfigStore


@dataclass
class BatchedLauncherConf:
    _target_: str = "hydra_plugins.sweeper_batched_launcher.batched_launcher.BatchedLauncher"
    # Most bytes of device memory one group of configurations may hold while it trains;
    # 0 = a quarter of the machine's memory. A larger grid splits into several groups.
    max_group_bytes: int = 0
    # Most configurations in one group (0 = no limit but the memory budget).
    max_group_size: int = 0
    # Where groups compute (sweeper.sweep.engines): local | ray | submitit_local | submitit_slurm.
    engine: str = "local"
    # local: how many GPUs compute groups at once (null: every visible one).
    gpus: Optional[int] = None
    # local: how many worker processes compute CPU groups at once, one BLAS
    # thread each (sweeper.sweep.cores); null: the cores this process may use
    # (os.sched_getaffinity); 1: one group after another in this process.
    cpu_workers: Optional[int] = None
    # engine=ray: address (null: a new local cluster), num_cpus per
    # group, max_retries, init (ray.init's arguments).
    ray: Dict[str, Any] = field(
        default_factory=lambda: {"address": None, "num_cpus": 1, "max_retries": 1, "init": {}}
    )
    # engine=submitit_*: partition, timeout_min, cpus_per_task,
    # array_parallelism, additional_parameters, folder.
    submitit: Dict[str, Any] = field(
        default_factory=lambda: {"partition": None, "timeout_min": 60, "cpus_per_task": 1}
    )
    # Groups of one shape that differ only in depth, width and activation train as one
    # packed group (one first-layer product for all) where the planner estimates it
    # ends sooner on this device (sweeper.sweep.packing); false: one shape a group.
    pack: bool = True
    # Successive halving (sweeper.sweep.halving): eta (an integer >= 2; null = off)
    # stops all but the best 1/eta of the configurations at each rung min_epochs·eta^k
    # (min_epochs null: the largest epochs / eta^3, at least 2·log_every).
    halving: Dict[str, Any] = field(default_factory=lambda: {"eta": None, "min_epochs": None})


ConfigStore.instance().store(
    group="hydra/launcher", name="batched", node=BatchedLauncherConf, provider="sweeper"
)

"""The thin launcher class; the work is in ``sweeper.sweep.launch``,
imported only when a sweep launches."""

from __future__ import annotations

from typing import Any, Sequence

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class BatchedLauncher(Launcher):
    """Trains every compatible configuration of a sweep together, then
    gives each its own Hydra job."""

    def __init__(
        self,
        max_group_bytes: int = 0,
        max_group_size: int = 0,
        engine: str = "local",
        gpus: Any = None,
        ray: Any = None,
        submitit: Any = None,
        halving: Any = None,
        cpu_workers: Any = None,
        pack: Any = True,
    ) -> None:
        self.max_group_bytes = max_group_bytes
        self.max_group_size = max_group_size
        self.engine, self.gpus, self.ray, self.submitit = (
            engine,
            gpus,
            ray,
            submitit,
        )  # sweeper.sweep.engines
        self.halving = halving  # sweeper.sweep.halving
        self.cpu_workers = cpu_workers  # sweeper.sweep.cores
        self.pack = pack  # sweeper.sweep.packing
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        from sweeper.sweep.launch import launch

        return launch(self, job_overrides, initial_job_idx)

    def __repr__(self) -> Any:
        return (
            f"BatchedLauncher(max_group_bytes={self.max_group_bytes}, max_group_size="
            f"{self.max_group_size}, "
            f"engine={self.engine}, cpu_workers={self.cpu_workers})"
        )

"""The one place that chooses an array library: ``cpu`` is NumPy, ``gpu`` is CuPy.

Model and training code take ``backend.xp`` and never import CuPy themselves. Everything that crosses
between host and device goes through :meth:`Backend.to_device` and :meth:`Backend.to_numpy`, and
every wait for the device through :meth:`Backend.synchronize`, so both can be counted and timed.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np


class BackendUnavailable(RuntimeError):
    """The requested device cannot run here; the message says why and what to do, in one line."""


@dataclass(frozen=True)
class Backend:
    """An array namespace and the few operations that touch the host/device boundary."""

    device: str  # "cpu" | "gpu"
    xp: ModuleType

    def to_device(self, a: np.ndarray) -> Any:
        """Copy a host array to the device (a no-op for NumPy)."""
        return self.xp.asarray(a)

    def to_numpy(self, a: Any) -> np.ndarray:
        """Copy a device array to the host: the single way results leave the device."""
        return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else np.asarray(a)

    def synchronize(self) -> None:
        """Wait until the device has finished all queued work (nothing to wait for on the CPU)."""
        if self.device == "gpu":
            self.xp.cuda.Device().synchronize()

    def clock(self) -> float:
        """A host clock read after synchronising, so device work is timed honestly."""
        self.synchronize()
        return time.perf_counter()


def _cupy() -> ModuleType:
    """Import CuPy and prove it can reach a CUDA device; raise BackendUnavailable with CuPy's reason."""
    advice = "install the gpu extra (pip install -e '.[gpu]') on a machine with an NVIDIA GPU, or use device=cpu"
    try:
        import cupy  # the only import of cupy in the project
    except ImportError as e:
        raise BackendUnavailable(f"device=gpu needs cupy, which is not installed ({e}): {advice}") from e
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CUDARuntimeError: no driver, driver too old, no device
        raise BackendUnavailable(f"device=gpu: CuPy cannot reach a CUDA device ({e}): {advice}") from e
    if count == 0:
        raise BackendUnavailable(f"device=gpu: CuPy found no CUDA device: {advice}")
    return cupy


def resolve(device: str) -> Backend:
    """Map ``cfg.device`` to a backend: ``cpu`` → NumPy, ``gpu`` → CuPy."""
    if device == "cpu":
        return Backend("cpu", np)
    if device == "gpu":
        return Backend("gpu", _cupy())
    raise ValueError(f"device={device} is not allowed: expected one of cpu, gpu")

"""The one place that chooses an array library: ``cpu`` is NumPy, ``gpu`` is CuPy.

Model and training code take ``backend.xp`` and never import CuPy themselves. Everything that
crosses between host and device goes through :meth:`Backend.to_device` and
:meth:`Backend.to_numpy`, and every wait for the device through :meth:`Backend.synchronize`, so
both can be counted and timed. A backend is plain data (a namespace and three functions), so tests
can build a "gpu" backend on NumPy where no CUDA device exists and drive the very same code path.
"""

from __future__ import annotations

import contextlib
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache, partial
from types import ModuleType
from typing import Any, Callable, ContextManager, Iterator

import numpy as np

from sweeper.base.process import usable_cpus
from sweeper.base.stop import check


__all__ = [
    "Backend",
    "BackendUnavailable",
    "FAKE_GPU_ENV",
    "SMALL_PRODUCT_FLOPS",
    "cpu_threads",
    "current_gpu",
    "fake_gpu",
    "gpu_available",
    "gpu_count",
    "is_sparse",
    "on_gpu",
    "resolve",
    "resolved",
]

# Test-only: SWEEPER_FAKE_GPU=numpy makes device=gpu run the GPU code path on NumPy, so multiruns
# that mix devices can be tested end to end where no CUDA device exists; SWEEPER_FAKE_GPU=strict
# runs it on the strict device stand-in (sweeper.base.strict: it refuses what CuPy refuses and
# counts every transfer and sync). Such runs are tagged fake_gpu=true.
FAKE_GPU_ENV = "SWEEPER_FAKE_GPU"
FAKE_GPU_MODES = ("numpy", "strict")


def fake_gpu() -> str:
    """The fake GPU this process runs ``device=gpu`` on (``numpy`` or ``strict``), or ""
    for CuPy."""
    mode = os.environ.get(FAKE_GPU_ENV, "")
    return mode if mode in FAKE_GPU_MODES else ""


class BackendUnavailable(RuntimeError):
    """The requested device cannot run here; the message says why and what to do, in one line."""


def _host(a: Any) -> np.ndarray:
    return np.asarray(a)


def is_sparse(a: Any) -> bool:
    """A SciPy or CuPy sparse matrix (text features), told apart without importing either."""
    return hasattr(a, "tocsr") and hasattr(a, "nnz")


def _to_host_device(a: Any) -> Any:
    """NumPy's "device": arrays as they are; a SciPy sparse matrix stays sparse
    (``np.asarray`` would box it)."""
    return a if is_sparse(a) else np.asarray(a)


def _no_wait() -> None:
    return None


def _no_mark(phase: str, step: int = -1) -> None:
    return None


# Below this many FLOPs in an epoch's largest matrix product, one BLAS thread is faster than two:
# OpenBLAS's threads cost more to wake and join than they save, and they keep the other core
# spinning while NumPy runs the elementwise calls. Measured on 2 cores (a product followed by
# tanh, as in an epoch): (64, 65) @ (65, 266), 2.2 MFLOP, took 27 µs on 1 thread and 38 µs on 2 in
# float32 (float64: even); from ~8 MFLOP up, 2 threads win (1.2× at 33 MFLOP, 1.7× at 1.6 GFLOP).
SMALL_PRODUCT_FLOPS = 4e6
# Column blocks (threads) for an epoch above that size; default: the CPUs this process may use.
THREADS_ENV = "SWEEPER_THREADS"


def _threadpools() -> Any:
    """The thread pools of the native libraries loaded now (~1 ms: looked up per training, because
    importing scikit-learn or SciPy later loads BLAS libraries of their own)."""
    # comes with scikit-learn; a dependency of its own here
    # lazy: saves ~2 ms at this module's import (measured)
    from threadpoolctl import (
        ThreadpoolController,
    )

    return ThreadpoolController()


@lru_cache(maxsize=None)
def _workers(n: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(n, thread_name_prefix="sweeper-block")


def cpu_threads() -> int:
    """How many threads a large epoch (or a batched group) runs on: ``SWEEPER_THREADS``,
    else the CPUs this process may use, but no more than ``OMP_NUM_THREADS`` where that
    is set: joblib's workers get ``cpu_count // n_jobs`` there, so parallel jobs share
    the cores instead of each taking all of them."""
    value = os.environ.get(THREADS_ENV, "")
    if value.strip():
        if not value.strip().isdigit() or int(value) < 1:
            raise ValueError(f"{THREADS_ENV}={value} is not allowed: expected an integer >= 1")
        return int(value)
    cpus = usable_cpus()
    omp = os.environ.get("OMP_NUM_THREADS", "").strip()
    return max(1, min(cpus, int(omp))) if omp.isdigit() and int(omp) > 0 else cpus


@contextlib.contextmanager
def _host_threads(product_flops: float, max_blocks: int = 1) -> Iterator[tuple[int, Any]]:
    """Small products: one BLAS thread, one block. Large ones: the epoch in column blocks (at most
    ``max_blocks``: the data's rows allow no more) on :func:`cpu_threads` threads, each block's BLAS
    getting its share of them (see models.mlp.FullBatch); with one block, BLAS keeps all
    its threads."""
    if product_flops < SMALL_PRODUCT_FLOPS:
        with _threadpools().limit(limits=1, user_api="blas"):
            yield 1, None
        return
    threads = cpu_threads()
    blocks = max(1, min(threads, max_blocks))
    if blocks == 1:
        yield 1, None
        return
    with _threadpools().limit(limits=max(1, threads // blocks), user_api="blas"):
        yield blocks, _workers(blocks - 1)


def _no_threads(product_flops: float, max_blocks: int = 1) -> ContextManager[tuple[int, Any]]:
    return contextlib.nullcontext((1, None))


@dataclass(frozen=True)
class Backend:
    """An array namespace and the few operations that touch the host/device boundary."""

    device: str  # "cpu" | "gpu"
    xp: ModuleType
    to_device_fn: Callable[[np.ndarray], Any] = _to_host_device
    to_numpy_fn: Callable[[Any], np.ndarray] = _host
    synchronize_fn: Callable[[], None] = _no_wait
    host_threads_fn: Callable[[float, int], ContextManager[tuple[int, Any]]] = _no_threads
    fake: bool = False  # a "gpu" backend running on NumPy (tests on machines without CUDA)
    # the training loops name their phases here (``epoch``, ``segment end``, ``end``):
    # the strict stand-in files every transfer and sync under the phase it happened in;
    # a no-op elsewhere (one call an epoch)
    mark_fn: Callable[[str, int], None] = _no_mark

    def to_device(self, a: np.ndarray) -> Any:
        """Copy a host array to the device (a no-op for NumPy)."""
        return self.to_device_fn(a)

    def to_numpy(self, a: Any) -> np.ndarray:
        """Copy a device array to the host: the single way results leave the device."""
        return self.to_numpy_fn(a)

    def synchronize(self) -> None:
        """Wait until the device has finished all queued work (nothing to wait for on the CPU)."""
        self.synchronize_fn()

    def host_threads(
        self, product_flops: float, max_blocks: int = 1
    ) -> ContextManager[tuple[int, Any]]:
        """A context for training whose largest matrix product is ``product_flops`` and whose data
        allow at most ``max_blocks`` column blocks; it gives ``(blocks, pool)``: how many blocks an
        epoch runs in and the threads that run them (``(1, None)``: one block, on this thread).
        CPU only; on the GPU the host only queues work."""
        return self.host_threads_fn(product_flops, max_blocks)

    def mark(self, phase: str, step: int = -1) -> None:
        """The training loop enters ``phase`` at epoch ``step`` (for the
        strict stand-in's accounts)."""
        self.mark_fn(phase, step)

    def epoch(self, e: int, halt: Any = None) -> None:
        """A training loop's epoch ``e`` begins: marked (:meth:`mark`), and the one place a loop
        hears that it must stop: :class:`sweeper.base.stop.Stopped` once Ctrl-C or SIGTERM set
        :data:`~sweeper.base.stop.STOP` (threads that train see no KeyboardInterrupt), or once
        the caller's ``halt`` (an Event) is set. The models' loops call it and know nothing of
        signals; one call an epoch (an attribute read)."""
        self.mark_fn("epoch", e)
        check(halt)

    def clock(self) -> float:
        """A host clock read after synchronising, so device work is timed honestly."""
        self.synchronize()
        return time.perf_counter()


def _cupy() -> ModuleType:
    """Import CuPy and prove it can reach a CUDA device; raise BackendUnavailable with
    CuPy's reason."""
    advice = (
        "install the gpu extra (pip install -e '.[gpu]') on a machine with an NVIDIA GPU, or "
        "use device=cpu"
    )
    try:
        # here: cupy is optional (the gpu extra), absent without a GPU (measured: absent here)
        import cupy  # the only import of cupy in the project
    except ImportError as e:
        raise BackendUnavailable(
            f"device=gpu needs cupy, which is not installed ({e}): {advice}"
        ) from e
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CUDARuntimeError: no driver, driver too old, no device
        raise BackendUnavailable(
            f"device=gpu: CuPy cannot reach a CUDA device ({e}): {advice}"
        ) from e
    if count == 0:
        raise BackendUnavailable(f"device=gpu: CuPy found no CUDA device: {advice}")
    return cupy


def _to_gpu(cp: ModuleType, a: Any) -> Any:
    """A host array on the GPU; a SciPy CSR matrix becomes a ``cupyx.scipy.sparse`` CSR matrix."""
    if is_sparse(a):
        # here: cupyx comes with cupy, optional (the gpu extra; measured: absent here)
        import cupyx.scipy.sparse

        return cupyx.scipy.sparse.csr_matrix(a)
    return cp.asarray(a)


def _reached() -> tuple[ModuleType | None, str]:
    """:func:`_cupy`, or None and why not: the one place where a missing device is a value
    rather than :class:`BackendUnavailable` (:func:`gpu_available`, :func:`resolved`,
    :func:`gpu_count`)."""
    try:
        return _cupy(), ""
    except BackendUnavailable as e:
        return None, str(e)


def gpu_available() -> tuple[bool, str]:
    """Whether ``device=gpu`` can run here, and if not, why (for skip reasons)."""
    cp, why = _reached()
    return cp is not None, why


def resolved(device: str) -> Backend | None:
    """:func:`resolve`, or None where the device is not there: a job computed ahead of its
    record (a batched group, a trainer's halving) leaves it to the one-job path, which records
    it SKIPPED with the reason. (A fake GPU is always there; CuPy only where :func:`_cupy`
    reaches a device, the one way :func:`resolve` raises BackendUnavailable.)"""
    if device == "gpu" and not fake_gpu() and _reached()[0] is None:
        return None
    return resolve(device)


def resolve(device: str) -> Backend:
    """Map ``cfg.device`` to a backend: ``cpu`` → NumPy, ``gpu`` → CuPy."""
    if device == "cpu":
        return Backend("cpu", np, host_threads_fn=_host_threads)
    if device == "gpu" and fake_gpu() == "numpy":
        return Backend("gpu", np, fake=True)
    if device == "gpu" and fake_gpu() == "strict":
        # lazy: saves ~19 ms at this module's import (measured)
        from sweeper.base import strict

        strict.append_summary_at_exit()
        return Backend(
            "gpu",
            strict.xp,
            strict.to_device,
            strict.to_numpy,
            strict.synchronize,
            fake=True,
            mark_fn=strict.mark,
        )
    if device == "gpu":
        cp = _cupy()
        return Backend(
            "gpu", cp, partial(_to_gpu, cp), cp.asnumpy, lambda: cp.cuda.Device().synchronize()
        )
    raise ValueError(f"device={device} is not allowed: expected one of cpu, gpu")


# Test-only, with SWEEPER_FAKE_GPU=numpy or strict: how many GPUs the fake backend
# pretends this node has (default 1).
FAKE_GPUS_ENV = "SWEEPER_FAKE_GPUS"
_fake_device = __import__("threading").local()


def gpu_count() -> int:
    """How many GPUs this process sees (0 without CuPy or a device)."""
    if fake_gpu():
        value = os.environ.get(FAKE_GPUS_ENV, "1").strip()
        return int(value) if value.isdigit() else 1
    cp = _reached()[0]
    return 0 if cp is None else int(cp.cuda.runtime.getDeviceCount())


@contextlib.contextmanager
def on_gpu(index: int) -> Iterator[None]:
    """Within this block, this thread's GPU work goes to device ``index`` (CuPy's
    ``Device`` context)."""
    if fake_gpu():
        before, _fake_device.index = getattr(_fake_device, "index", 0), index
        try:
            yield
        finally:
            _fake_device.index = before
        return
    with _cupy().cuda.Device(index):
        yield


def current_gpu() -> int:
    """The device this thread's GPU work goes to."""
    if fake_gpu():
        return getattr(_fake_device, "index", 0)
    return int(_cupy().cuda.Device().id)

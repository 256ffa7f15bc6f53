"""A strict device stand-in (test-only; ``SWEEPER_FAKE_GPU=strict``): the GPU code path
on NumPy, refusing what CuPy refuses and counting every crossing between host and device.

``SWEEPER_FAKE_GPU=numpy`` runs ``device=gpu`` with NumPy itself as ``xp``: a host array
slipped into a device expression, a device array handed to ``np.`` code, a ``float(loss)`` in
the epoch loop all pass there silently. Here the "device" holds :class:`~.array.DeviceArray`
(and :class:`~.sparse.DeviceSparse`) objects that behave as CuPy's at the boundary:

- ``np.asarray(device_array)`` raises CuPy's ``TypeError`` ("Implicit conversion to a
  NumPy array is not allowed...");
- a ufunc, ``@`` or function mixing a device array with a host ``numpy.ndarray``
  (even 0-d) raises CuPy's ``TypeError: Unsupported type <class 'numpy.ndarray'>``;
  a non-scalar host array written into a device array raises CuPy's ``ValueError``
  ("non-scalar numpy.ndarray cannot be used for fill");
- a NumPy function or ufunc called on device arrays only (``np.maximum(x, 0)``,
  ``np.sum(x)``) dispatches and stays on the device, as CuPy's
  ``__array_ufunc__``/``__array_function__`` do; a reduction gives a 0-d device array;
- the explicit transfers (``Backend.to_device``, ``Backend.to_numpy``, ``.get()``,
  ``xp.asarray`` of host data) and the host's reads (``float``, ``int``, ``bool``, ``.item()``,
  ``.tolist()``, ``repr``, a boolean mask's count, ``__array__`` inside
  :meth:`Ledger.allow_implicit <.ledger.Ledger.allow_implicit>`, ``synchronize()``) are allowed
  and counted in :data:`LEDGER`, each with the phase the training loop marked (``Backend.mark``:
  ``epoch``, ``segment end``, ``end``) and a short stack (``path:line in function``);
- ``xp`` (:data:`xp`) is CuPy's namespace as far as the GPU path uses it
  (:mod:`.namespace`); sparse text features are ``cupyx.scipy.sparse`` CSR matrices
  (:mod:`.sparse`). What is not modelled raises, naming itself.

What it does not model: kernels and their launch cost, streams and asynchrony (every
call completes at once, so a time measured here says nothing of a GPU's), device memory
(its size, allocation failures, the memory pool), several devices (``SWEEPER_FAKE_GPUS``
only pretends), cuRAND's numbers (``xp.random`` draws other orders than NumPy's, as
CuPy's do, but not CuPy's), cuBLAS/cuSPARSE summation order (float32 sums here are
NumPy's, bit for bit; a GPU's differ in the last bits) and NumPy-vs-CuPy differences of
type promotion or of a function's options beyond ``copyto`` and ``take``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sweeper.base.strict.array import DeviceArray
from sweeper.base.strict.ledger import (
    LEDGER,
    LEDGER_ENV,
    Event,
    Ledger,
    append_summary_at_exit,
    describe,
)
from sweeper.base.strict.namespace import xp
from sweeper.base.strict.sparse import DeviceSparse
from sweeper.base.strict.sparse import to_device as sparse_to_device

__all__ = [
    "DeviceArray",
    "DeviceSparse",
    "Event",
    "LEDGER",
    "LEDGER_ENV",
    "Ledger",
    "append_summary_at_exit",
    "describe",
    "mark",
    "synchronize",
    "to_device",
    "to_numpy",
    "xp",
]


def to_device(a: Any) -> Any:
    """A host array (or SciPy sparse matrix) copied to the stand-in device: one counted
    host→device copy."""
    if type(a) is DeviceArray or type(a) is DeviceSparse:
        return a
    LEDGER.record("h2d", "to_device")
    if hasattr(a, "tocsr") and hasattr(a, "nnz"):
        return sparse_to_device(a)
    return DeviceArray(np.array(a, copy=True))


def to_numpy(a: Any) -> np.ndarray:
    """A device array's copy on the host (``cupy.asnumpy``): one counted device→host copy."""
    return xp.asnumpy(a)


def synchronize() -> None:
    """Wait for the device (a counted sync)."""
    LEDGER.record("sync", "synchronize()")


def mark(phase: str, step: int = -1) -> None:
    """The training loop's phase (``Backend.mark``), recorded with every later event on
    this thread."""
    LEDGER.mark(phase, step)

"""The stand-in's ``cupyx.scipy.sparse`` matrix: a SciPy CSR/CSC matrix behind the
boundary a cupyx one keeps.

What the GPU path asks of one (text features, :mod:`sweeper.models.mlp` and
:mod:`sweeper.models.batched`): ``shape``, ``dtype``, ``ndim``, ``nnz``, ``format``, ``T`` (a CSC
view, as cupyx's), ``tocsr()``/``tocsc()``, row slicing (``X[:k]``, ``X[..., :k, :]``),
``copy()``, ``astype()``, and the product with a device array on either side (``X @ W``: a dense
device array, as cupyx's ``csrmm``). A host operand of a product raises CuPy's ``TypeError``;
``np.asarray`` raises the implicit-conversion error; ``.get()`` is a counted copy to a SciPy
matrix and ``.toarray()`` a dense device array. Anything else raises ``AttributeError`` naming it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sweeper.base.strict.array import IMPLICIT, SCALARS, DeviceArray, unsupported, wrap
from sweeper.base.strict.ledger import LEDGER


__all__ = ["DeviceSparse", "to_device"]


class DeviceSparse:
    """A sparse matrix "on the device" (see the module's docstring)."""

    __slots__ = ("_m",)
    _device_sparse = True
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, m: Any) -> None:
        self._m = m

    shape = property(lambda self: self._m.shape)
    dtype = property(lambda self: self._m.dtype)
    ndim = property(lambda self: 2)
    nnz = property(lambda self: self._m.nnz)
    format = property(lambda self: self._m.format)
    T = property(lambda self: DeviceSparse(self._m.T))

    def tocsr(self) -> "DeviceSparse":
        return DeviceSparse(self._m.tocsr())

    def tocsc(self) -> "DeviceSparse":
        return DeviceSparse(self._m.tocsc())

    def copy(self) -> "DeviceSparse":
        return DeviceSparse(self._m.copy())

    def astype(self, dtype: Any) -> "DeviceSparse":
        return DeviceSparse(self._m.astype(dtype))

    def __getitem__(self, key: Any) -> Any:
        parts = key if type(key) is tuple else (key,)
        if any(not (p is Ellipsis or isinstance(p, (slice, int, np.integer))) for p in parts):
            raise AttributeError(
                "the strict device stand-in models a sparse matrix's slices only (X[a:b], "
                f"X[..., a:b, :]), not the index {key!r}"
            )
        r = self._m[key]
        return DeviceSparse(r) if hasattr(r, "tocsr") else wrap(r)

    def _product(self, other: Any, left: bool) -> Any:
        if type(other) is DeviceArray:
            return wrap(self._m @ other._a if left else other._a @ self._m)
        if type(other) is DeviceSparse:
            return DeviceSparse(self._m @ other._m if left else other._m @ self._m)
        if isinstance(other, SCALARS):
            return DeviceSparse(self._m * other)
        raise unsupported(other)

    def __matmul__(self, other: Any) -> Any:
        return self._product(other, True)

    def __rmatmul__(self, other: Any) -> Any:
        return self._product(other, False)

    def dot(self, other: Any) -> Any:
        return self._product(other, True)

    def get(self, stream: Any = None) -> Any:
        """The explicit copy to the host: a SciPy matrix (counted)."""
        LEDGER.record("d2h", "sparse .get()")
        return self._m.copy()

    def toarray(self) -> DeviceArray:
        return DeviceArray(self._m.toarray())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(IMPLICIT)

    def __repr__(self) -> str:
        return (
            f"<{self.shape[0]}x{self.shape[1]} sparse matrix of type {self.dtype} with {self.nnz}"
            " stored elements "
            f"in {self._m.format.upper()} format on the (stand-in) device>"
        )

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"the strict device stand-in does not model cupyx.scipy.sparse's .{name}: add it to "
            "sweeper/base/strict/sparse.py if the GPU path needs it"
        )


def to_device(m: Any) -> DeviceSparse:
    """A SciPy sparse matrix on the device in CSR (``cupyx.scipy.sparse.csr_matrix(m)``)."""
    # lazy: saves ~137 ms at this module's import (measured)
    import scipy.sparse

    return DeviceSparse(scipy.sparse.csr_matrix(m, copy=True))

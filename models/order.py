"""The order of the training rows in each epoch of mini-batch training: drawn on the device, the same on every device.

``xp.random.RandomState(seed).shuffle`` gave NumPy's order on the CPU and cuRAND's on the GPU (CuPy sorts random
32-bit keys), so a mini-batch run on the GPU trained on other batches than its CPU twin and the two could not be
compared. Here epoch ``t``'s order sorts the keys ``mix(i + seed·φ + t·n)`` of the rows ``i = 0..n-1``, with ``mix``
SplitMix64's finaliser (a bijection of 64-bit integers: xor-shifts and multiplications by odd constants, modulo
2⁶⁴) — integer arithmetic every device does alike, so the keys, hence the orders, are the same everywhere; the keys of
one epoch are distinct, so the sort has one answer whatever its algorithm. The epoch count lives on the device (one
add an epoch): nothing crosses to the host.
"""
from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from sweeper.models.activations import Call

_U64 = np.uint64
GOLDEN = 0x9E3779B97F4A7C15  # 2⁶⁴/φ: spreads the seeds
MIX = ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB), (31, None))  # SplitMix64: z ^= z >> s; z *= c


class RowOrder:
    """Calls (:attr:`calls`) that write the next epoch's order of the rows ``0..n-1`` into ``order`` (n,) in place;
    the first call gives epoch 0's."""

    def __init__(self, xp: Any, order: Any, seed: int) -> None:
        n = order.shape[0]
        self.xp, self.order = xp, order
        self.base = xp.arange(n, dtype=_U64)  # i + seed·φ (mod 2⁶⁴)
        xp.add(self.base, _U64((seed * GOLDEN) % 2**64), self.base)
        self.epoch = xp.zeros((), dtype=_U64)
        self.offset = xp.empty((), dtype=_U64)
        self.keys = xp.empty(n, dtype=_U64)
        scratch = xp.empty(n, dtype=_U64)
        k = self.keys
        self.calls: list[Call] = [partial(xp.multiply, self.epoch, _U64(n), self.offset),  # t·n
                                  partial(xp.add, self.base, self.offset, k),
                                  partial(xp.add, self.epoch, _U64(1), self.epoch)]
        for shift, factor in MIX:
            self.calls += [partial(xp.right_shift, k, _U64(shift), scratch), partial(xp.bitwise_xor, k, scratch, k)]
            if factor is not None:
                self.calls.append(partial(xp.multiply, k, _U64(factor), k))
        self.calls.append(self._sort)

    def _sort(self) -> None:
        self.xp.copyto(self.order, self.xp.argsort(self.keys))


def row_orders(n: int, seed: int, epochs: int) -> np.ndarray:
    """The first ``epochs`` orders :class:`RowOrder` gives, ``(epochs, n)``, on the host (for tests and readers)."""
    order = np.arange(n)
    rows = RowOrder(np, order, seed)
    out = np.empty((epochs, n), dtype=order.dtype)
    for t in range(epochs):
        for call in rows.calls:
            call()
        out[t] = order
    return out

"""Where a group's parameters live: every member's, of every shape, in one flat buffer
(:class:`Layout`).

A group's members come in *blocks*, consecutive members of one shape (layer sizes and
activation); today's groups are one block, a *packed* group several (widths, depths, activations
of one grid). All the members' parameters (and, in the same layout, their gradients, optimizer
state, best weights) are one flat array, ordered so that each computation reads views of it:

- first the first layers of every block with a hidden layer, ``Q_0 = [W_0; b_0].T`` of
  shape ``(K_b, w_b, d + 1)`` each, one after another: together the rows of one matrix
  ``Q`` ``(R, d + 1)``, ``R = Σ_b K_b w_b``, so the whole group's first layer is one
  product ``Q @ [X.T; 1]`` (ParallelMLPs' ``X @ [W_1 | … | W_K]``, whatever the widths)
  and its gradient one product too;
- then each block's deeper layers ``Wt_l`` ``(K_b, fan_out, fan_in)`` and ``b_l``
  ``(K_b, fan_out, 1)`` (a block-diagonal product per block: one strided batched product each),
  and a depth-0 block's ``Q_0`` ``(K_b, k, d + 1)`` (its own product, straight to the outputs).

An update is then one pass over the flat array whatever the blocks (the rates, weight decay and
step sizes are per element: :meth:`expand`), and a member's weights are a few views
(:meth:`member`). On sparse data (one block only) the first layer's memory is in
:func:`sweeper.models.batched_pass.sparse_layout`'s order, ``(K, d + 1, fo)`` (``sparse="member"``)
or ``(d + 1, K, fo)`` (``"group"``), and its view the strided ``(K, fo, d + 1)`` of that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from sweeper.models.mlp import init_params


__all__ = ["Layout", "Shape", "group_bytes", "member_params", "stacked_params"]


@dataclass(frozen=True)
class Shape:
    """What members of one block share: their layer sizes ``[d, h_1, …, h_L, k]`` and activation."""

    sizes: tuple[int, ...]
    activation: str

    @property
    def depth(self) -> int:
        return len(self.sizes) - 2


@dataclass(frozen=True)
class Block:
    shape: Shape
    start: int  # its first member's index in the group
    count: int


class Layout:
    """The blocks of a group (``shapes[i]`` for ``counts[i]`` consecutive members) and where
    each stacked parameter ``[Q_0, Wt_1, b_1, …, Wt_L, b_L]`` of each block lies in the flat
    buffer (see the module's docstring). All the shapes share the inputs ``d`` and outputs
    ``k``; ``sparse`` (one block) orders the first layer for the sparse products."""

    def __init__(
        self, shapes: Sequence[Shape], counts: Sequence[int], sparse: str | None = None
    ) -> None:
        if len({(s.sizes[0], s.sizes[-1]) for s in shapes}) != 1:
            raise ValueError("the blocks of a group share their inputs and outputs")
        if sparse and len(shapes) > 1:
            raise ValueError("a group on sparse data is one block")
        self.sparse = sparse
        starts = np.concatenate([[0], np.cumsum(counts)]).astype(int)
        self.blocks = [Block(s, int(a), int(c)) for s, a, c in zip(shapes, starts, counts)]
        self.K = int(starts[-1])
        self.d, self.k = shapes[0].sizes[0], shapes[0].sizes[-1]
        self._of = np.repeat(np.arange(len(self.blocks)), counts)  # member → its block
        # (offset, stacked shape) of each block's parameters; the first layers of the
        # blocks with hidden layers first
        self.specs: list[list[tuple[int, tuple[int, ...]]]] = [[] for _ in self.blocks]
        off = 0
        for i, b in enumerate(self.blocks):
            if b.shape.depth:
                self.specs[i].append((off, (b.count, b.shape.sizes[1], self.d + 1)))
                off += b.count * b.shape.sizes[1] * (self.d + 1)
        self.first_size, self.rows = off, off // (self.d + 1)
        for i, b in enumerate(self.blocks):
            s = b.shape.sizes
            if not b.shape.depth:
                self.specs[i].append((off, (b.count, self.k, self.d + 1)))
                off += b.count * self.k * (self.d + 1)
            for l in range(1, b.shape.depth + 1):
                for shape in ((b.count, s[l + 1], s[l]), (b.count, s[l + 1], 1)):
                    self.specs[i].append((off, shape))
                    off += int(np.prod(shape))
        self.size = off
        self._views: dict[int, tuple[Any, list[list[Any]]]] = {}

    def views(self, flat: Any) -> list[list[Any]]:
        """Per block, its stacked ``[Q_0, Wt_1, b_1, …]`` as views of ``flat`` (kept
        per array: the buffers of a training live as long as it does)."""
        kept = self._views.get(id(flat))
        if kept is not None and kept[0] is flat:
            return kept[1]
        out = []
        for specs in self.specs:
            arrays = []
            for j, (off, shape) in enumerate(specs):
                part = flat[off : off + int(np.prod(shape))]
                if j == 0 and self.sparse == "member":  # memory (K, d + 1, fo)
                    arrays.append(part.reshape(shape[0], shape[2], shape[1]).swapaxes(1, 2))
                elif j == 0 and self.sparse == "group":  # memory (d + 1, K, fo)
                    arrays.append(part.reshape(shape[2], shape[0], shape[1]).transpose(1, 2, 0))
                else:
                    arrays.append(part.reshape(shape))
            out.append(arrays)
        self._views[id(flat)] = (flat, out)
        return out

    def first(self, flat: Any) -> Any:
        """The first layers of the blocks with hidden layers as one ``(R, d + 1)``
        matrix (dense data)."""
        return flat[: self.first_size].reshape(self.rows, self.d + 1)

    def member(self, flat: Any, m: int) -> list[Any]:
        """Member ``m``'s ``[Q_0, Wt_1, b_1, …]`` (views of ``flat``)."""
        b = int(self._of[m])
        return [p[m - self.blocks[b].start] for p in self.views(flat)[b]]

    def block_of(self, m: int) -> tuple[int, int]:
        """Member ``m``'s block and its index there."""
        b = int(self._of[m])
        return b, m - self.blocks[b].start

    def pack(self, stacked: Sequence[Sequence[np.ndarray]], dtype: Any) -> np.ndarray:
        """A host flat array holding each block's stacked parameters (as
        :func:`sweeper.models.batched.stacked_params` draws them)."""
        flat = np.empty(self.size, dtype=dtype)
        for views, arrays in zip(self.views(flat), stacked):
            for v, a in zip(views, arrays):
                v[...] = a
        self._views.pop(id(flat), None)
        return flat

    def expand(self, per_member: np.ndarray) -> np.ndarray:
        """A value per member (``(K,)``, host) as a value per element of the flat array."""
        return np.asarray(per_member)[self.owners()]

    def owners(self) -> np.ndarray:
        """Each element's member."""
        if not hasattr(self, "_owners"):
            owners = np.empty(self.size, dtype=np.int64)
            for b, views in zip(self.blocks, self.views(owners)):
                for v in views:
                    v[...] = np.arange(b.start, b.start + b.count).reshape(
                        -1, *([1] * (v.ndim - 1))
                    )
            self._views.pop(id(owners), None)
            self._owners = owners
        return self._owners

    def weights(self) -> np.ndarray:
        """1 where an element is a weight (weight decay shrinks it), 0 where it is a bias."""
        mask = np.zeros(self.size)
        for views in self.views(mask):
            for j, v in enumerate(views):
                if j == 0:
                    v[..., :-1] = 1  # Q_0 = [W_0; b_0].T: the bias is its last column
                elif j % 2:
                    v[...] = 1  # Wt_l; b_l stays 0
        self._views.pop(id(mask), None)
        return mask

    def subset(self, lo: int, hi: int) -> tuple["Layout", list[tuple[int, slice]]]:
        """The layout of members ``lo..hi - 1`` (a thread's share), and for each of its blocks the
        block it comes from and its members' slice there (blocks it does not reach are left out)."""
        shapes, counts, cuts = [], [], []
        for i, b in enumerate(self.blocks):
            a, z = max(lo, b.start), min(hi, b.start + b.count)
            if a < z:
                shapes.append(b.shape)
                counts.append(z - a)
                cuts.append((i, slice(a - b.start, z - b.start)))
        return Layout(shapes, counts, self.sparse), cuts


def stacked_params(
    sizes: list[int], activation: str, seeds: Sequence[int], dtype: str
) -> list[np.ndarray]:
    """``[Q_0, Wt_1, b_1, ..., Wt_L, b_L]`` stacked over members, each member drawn by
    :func:`init_params` with its own seed (so member k starts exactly where
    a one-configuration run of seed k starts).

    ``Q_0 = [W_0; b_0].T`` of shape ``(K, fan_out, d + 1)`` carries the first layer's bias
    in its last column (the data get a row of ones); deeper layers keep ``Wt_l = W_l.T``
    ``(K, fan_out, fan_in)`` and ``b_l.T`` ``(K, fan_out, 1)`` apart."""
    per = [init_params(sizes, activation, s, dtype) for s in seeds]
    out = [np.ascontiguousarray(np.stack([np.concatenate([p[0], p[1]]).T for p in per]))]
    for l in range(1, len(sizes) - 1):
        out.append(np.ascontiguousarray(np.stack([p[2 * l].T for p in per])))  # (K, fo, fi)
        out.append(np.ascontiguousarray(np.stack([p[2 * l + 1].T for p in per])))  # (K, fo, 1)
    return out


def member_params(stacked: list[np.ndarray], m: int) -> list[np.ndarray]:
    """Member ``m``'s ``[W_0, b_0, W_1, b_1, ...]`` in :class:`models.mlp.MLP`'s layout,
    from host arrays."""
    Q = stacked[0][m]
    return [Q[:, :-1].T.copy(), Q[:, -1:].T.copy(), *(a[m].T.copy() for a in stacked[1:])]


def group_bytes(
    k: int,
    n: int,
    n_val: int,
    sizes: list[int],
    itemsize: int,
    shared: bool,
    copies: int = 0,
    nnz: tuple[int, int] | None = None,
) -> int:
    """Device memory one group of ``k`` members holds while it trains (buffers, weights,
    data); ``copies`` more arrays of the weights' size per member (an optimizer's state,
    a trajectory's snapshots).

    ``nnz`` (the stored values of the training and the validation matrix) for sparse data:
    the data are then the CSR matrices (the training one twice, as ``X`` and ``X.T``; int32
    indices) instead of a dense ``[X.T; 1]``, and every member adds its columns of the sparse
    products' results (``X @ W`` on both sets, the copy of ``D_0.T``, ``X.T @ D_0.T``)."""
    hidden, out = sum(sizes[1:-1]), sizes[-1]
    per_member = (
        n * (3 * hidden + 3 * out)
        + n_val * (hidden + out)  # activations, D, scratch; output, g
        + (4 + copies) * sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:]))
    )  # weights, grads, copies
    if nnz is None:
        data = (n + n_val) * (sizes[0] + 1) * (1 if shared else k) * itemsize
    else:
        index = 4
        data = (2 * nnz[0] + nnz[1]) * (itemsize + index) + (2 * n + n_val + sizes[0] + 3) * index
        per_member += sizes[1] * (2 * n + n_val + sizes[0])
    return k * per_member * itemsize + data

"""One batched pass of K members over the data: the forward and backward calls of a
group's epoch, built once and replayed (see :mod:`models.batched` for the shapes and the
first layer's shared product)."""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

from sweeper.base.backend import is_sparse
from sweeper.models import losses
from sweeper.models.activations import Call
from sweeper.models.mlp import _gather, _run, _sparse_grad, _sparse_product
from sweeper.models.optim import State
from sweeper.models.optim import RowOrder


__all__ = ["first_layer", "sparse_layout"]


def sparse_layout(xp: Any, Q: Any, per_member: bool) -> Any:
    """The stacked ``Q_0`` (K, fo, d + 1) with its memory in ``(K, d + 1, fo)`` order
    (``per_member``) or in ``(d + 1, K, fo)`` order (the same values, a strided array):
    what a group on sparse data trains, so that :func:`first_layer` gives views."""
    if per_member:
        return xp.swapaxes(xp.ascontiguousarray(xp.swapaxes(Q, 1, 2)), 1, 2)
    return xp.moveaxis(xp.ascontiguousarray(xp.moveaxis(Q, 2, 0)), 0, 2)


def first_layer(xp: Any, Q: Any) -> list[Any]:
    """The first layer's ``[W_0; b_0]`` as contiguous views of a ``Q_0`` (or its gradient) in
    :func:`sparse_layout`: ``[P_0]``, the whole group's (d + 1, K·fo) with column ``k·fo + j``
    member k's unit j, or each member's (d + 1, fo). Writing into them writes into ``Q``."""
    group = xp.moveaxis(Q, 2, 0)  # (d + 1, K, fo)
    if group.flags.c_contiguous:
        return [group.reshape(group.shape[0], group.shape[1] * group.shape[2])]
    members = xp.swapaxes(Q, 1, 2)  # (K, d + 1, fo)
    if members.flags.c_contiguous:
        return list(members)
    raise ValueError("the first layer's weights on sparse data must be in sparse_layout")


def _per_block(P: list[Any], rows: Any, make: Callable[[Any, Any], Call]) -> Call:
    """``make(P[i], rows of block i)`` for each block ``P[i]`` (d + 1, c) of
    :func:`first_layer`, with ``rows`` (K·fo, n) cut into blocks of ``c`` rows: the one
    call, or one call that runs them all."""
    c = P[0].shape[1]
    calls = [make(p, rows[i * c : (i + 1) * c]) for i, p in enumerate(P)]
    return calls[0] if len(calls) == 1 else partial(_run, calls)


class _Block:
    """One block's share of a pass (members of one shape, :class:`sweeper.models.packed.Block`):
    its parameters' views ``Wt`` (``Wt[0]`` is ``Q_0``) and ``b`` (``b[0]`` None), its hidden
    activations ``A`` (``A[0]`` rows of the pass's ``A0``), their scratch ``tmp`` and gradients
    ``D`` (``D[0]`` rows of ``D0``; training only), its rows of the logits ``z``, its activation
    ``act``, its ``members`` (a slice of the group's)."""

    def __init__(
        self,
        params: list[Any],
        A: list[Any],
        tmp: list[Any],
        D: list[Any],
        z: Any,
        act: Any,
        members: slice,
    ) -> None:
        self.Wt, self.b = [params[0]] + params[1::2], [None] + params[2::2]
        self.A, self.tmp, self.D, self.z, self.act, self.members = A, tmp, D, z, act, members
        self.L = len(self.Wt) - 1
        # its first layer's gradient (a view of the pass's flat gradients; training only)
        self.GQ: Any = None


class _Pass:
    """Preallocated buffers and the calls of one data set's forward (and, with a scale,
    backward) pass of a group whose parameters are the flat ``P`` of ``layout``
    (:class:`sweeper.models.packed.Layout`: one block of one shape, or several), each
    block with its activation in ``acts``.

    Shapes (K members, n rows): ``H_0 = [X.T; 1]`` (d + 1, n), or (K, d + 1, n) per member
    (one block), or for sparse ``X`` none: the first layer reads ``X`` (CSR) and its gradient
    ``X.T`` (CSR, backward only); ``A0`` (R, n) the first hidden layer of every block with
    one (``R = Σ K_b w_b`` rows: a block's ``A_0`` is its rows, viewed (K_b, w_b, n)); deeper
    ``A_l`` (K_b, width, n) per block; ``z`` (K, k, n); ``D_l`` like ``A_l``, ``D0`` like
    ``A0``; ``g`` like ``z``; ``y`` (1 or K, 1, n), one-hot (1 or K, k, n) for k classes.
    Forward: ``A0 = f(Q @ H_0)`` (Q the layout's first layers, (R, d + 1): one product for the
    group), then per block ``A_l = f(Wt_l @ A_{l-1} + b_l)``, ``z_b = Wt_L @ A_{L-1} + b_L``
    (a depth-0 block: ``z_b = Q_0 @ H_0``).
    Backward: per block ``G_Wl = D_l @ A_{l-1}.T``, ``G_bl = D_l @ 1``,
    ``D_{l-1} = (Wt_l.T @ D_l) ∘ f'(Z_{l-1})`` (a broadcast product when layer l has one
    unit), down to its rows of ``D0``; then ``D0 ∘ f'`` and ``G_Q = D0 @ H_0.T``, one
    product for the group. The gradients are a flat array of the layout, so the update
    (:class:`models.optim.State` on the flat parameters) is one pass whatever the blocks.
    """

    def __init__(
        self,
        xp: Any,
        layout: Any,
        P: Any,
        acts: list[Any],
        task: str,
        X: Any,
        y: Any,
        scale: Any | None,
        state: State | None = None,
    ):
        self.xp, self.task, self.layout = xp, task, layout
        K, n, dtype = layout.K, X.shape[-2], X.dtype
        self.sparse = is_sparse(X)
        self.shared = X.ndim == 2
        if self.sparse:  # shared by the group; never densified (see the module's docstring)
            self.X = X
        else:
            # (d + 1, n) or (K, d + 1, n)
            self.H = xp.ones((*X.shape[:-2], X.shape[-1] + 1, n), dtype=dtype)
            self.H[..., :-1, :] = xp.swapaxes(X, -1, -2)
            self.HT = xp.swapaxes(self.H, -1, -2)
        self.y = xp.ascontiguousarray(y.reshape((1, 1, n) if y.ndim == 2 else (K, 1, n)))
        self.z = xp.empty((K, layout.k, n), dtype=dtype)
        if task == "multiclass":  # class indices (1 or K, 1, n) → one-hot columns (1 or K, k, n)
            self.y = xp.ascontiguousarray(losses.one_hot(xp, self.y, self.z.shape[1], classes=-2))
        training = scale is not None
        R = layout.rows
        self.A0 = xp.empty((R, n), dtype=dtype)
        # the backward pass's scratch, free while the forward pass runs (the
        # activation's form may use it)
        self.T0 = xp.empty((R, n), dtype=dtype) if training else None
        self.D0 = xp.empty((R, n), dtype=dtype) if training else None
        self.blocks, r = [], 0
        for blk, params, act in zip(layout.blocks, layout.views(P), acts):
            sizes, A, tmp, D = blk.shape.sizes, [], [], []
            if blk.shape.depth:
                rows = slice(r, r + blk.count * sizes[1])
                A.append(self.A0[rows].reshape(blk.count, sizes[1], n))
                tmp.append(self.T0[rows].reshape(A[0].shape) if training else None)
                D.append(self.D0[rows].reshape(A[0].shape) if training else None)
                r = rows.stop
            for w in sizes[2:-1]:
                A.append(xp.empty((blk.count, w, n), dtype=dtype))
                tmp.append(xp.empty((blk.count, w, n), dtype=dtype) if training else None)
                D.append(xp.empty((blk.count, w, n), dtype=dtype) if training else None)
            members = slice(blk.start, blk.start + blk.count)
            self.blocks.append(_Block(params, A, tmp, D, self.z[members], act, members))
        self.forward_calls = self._forward(
            layout.first(P) if R and self.shared and not self.sparse else None
        )
        self.backward_calls: list[Call] = []
        if not training:
            return
        # the layout's flat gradients (the sparse layer's memory order kept)
        self.grads = xp.empty_like(P)
        self.ones = xp.ones((n, 1), dtype=dtype)
        self.g = xp.empty_like(self.z)
        self.col = xp.empty((K, 1, n), dtype=dtype)  # the softmax's max and sum per sample
        # g ← scale · dL/dz / grad_constant, with scale = grad_scale(lr) · active ·
        # grad_constant per member
        calls = [
            *losses.residual_calls(xp, task, self.z, self.y, self.g, self.col),
            partial(xp.multiply, self.g, scale, self.g),
        ]
        for blk, b, G in zip(layout.blocks, self.blocks, layout.views(self.grads)):
            calls += self._block_backward(b, G, self.g[blk.start : blk.start + blk.count])
        calls += self._first_backward(
            layout.first(self.grads) if R and self.shared and not self.sparse else None
        )
        self.backward_calls = calls
        self.update_calls = state.calls([self.grads])

    def _forward(self, Q: Any) -> list[Call]:
        """``A0 ← f(Q @ H_0)`` (every block with hidden layers: one product, and one activation
        pass when they share the activation), then each block's deeper layers and outputs."""
        xp, deep = self.xp, [b for b in self.blocks if b.L]
        calls: list[Call] = []
        if deep:  # one product; else (sparse: one block; each member its own data) one a block
            calls += (
                [partial(xp.matmul, Q, self.H, out=self.A0)]
                if Q is not None
                else [self._from_inputs(b.Wt[0], b.A[0], b.members) for b in deep]
            )
            if len({b.act for b in deep}) == 1:
                calls += deep[0].act.f_calls(xp, self.A0, self.T0)
            else:
                for b in deep:
                    calls += b.act.f_calls(xp, b.A[0], b.tmp[0])
        for b in self.blocks:
            if not b.L:  # depth 0: the outputs straight from the inputs
                calls.append(self._from_inputs(b.Wt[0], b.z, b.members))
            for l in range(1, b.L + 1):
                out = b.A[l] if l < b.L else b.z
                calls += [
                    partial(xp.matmul, b.Wt[l], b.A[l - 1], out=out),
                    partial(xp.add, out, b.b[l], out),
                ]
                if l < b.L:
                    calls += b.act.f_calls(xp, out, b.tmp[l])
        return calls

    def _block_backward(self, b: _Block, G: list[Any], g: Any) -> list[Call]:
        """One block's backward pass from its ``g`` down to its ``D_0`` (its rows of ``D0``;
        for depth 0, its first layer's gradient), ``G`` its views of the gradients."""
        xp = self.xp
        GW, Gb = [G[0]] + G[1::2], [None] + G[2::2]
        b.GQ = GW[0]
        if not b.L:
            return [self._into_inputs(g, GW[0], b.members)]
        calls, D = [], g
        for l in range(b.L, 0, -1):
            calls += [
                partial(xp.matmul, D, xp.swapaxes(b.A[l - 1], 1, 2), out=GW[l]),
                _flat_product(xp, D, self.ones, Gb[l]),
            ]  # G_bl = D_l @ 1: the sum over rows
            Wt, prev = b.Wt[l], b.D[l - 1]
            if Wt.shape[1] == 1:  # one unit: Wt_l.T @ D_l is the broadcast product w ∘ D_l
                calls.append(partial(xp.multiply, xp.swapaxes(Wt, 1, 2), D, out=prev))
            else:
                calls.append(partial(xp.matmul, xp.swapaxes(Wt, 1, 2), D, out=prev))
            if l > 1:
                calls += b.act.grad_calls(xp, prev, b.A[l - 1], b.tmp[l - 1])
            D = prev
        return calls

    def _first_backward(self, GQ: Any) -> list[Call]:
        """``D0 ← D0 ∘ f'(Z_0)`` and the first layers' gradient: ``G_Q = D0 @ H_0.T``,
        one product for the group."""
        xp, deep = self.xp, [b for b in self.blocks if b.L]
        if not deep:
            return []
        if len({b.act for b in deep}) == 1:
            calls = deep[0].act.grad_calls(xp, self.D0, self.A0, self.T0)
        else:
            calls = [c for b in deep for c in b.act.grad_calls(xp, b.D[0], b.A[0], b.tmp[0])]
        if GQ is not None:
            return calls + [partial(xp.matmul, self.D0, self.HT, out=GQ)]
        # sparse (one block), own data
        return calls + [self._into_inputs(b.D[0], b.GQ, b.members) for b in deep]

    def _from_inputs(self, Q: Any, out: Any, members: slice) -> Call:
        """``out ← Q @ H_0`` for one block's ``Q`` (K_b, fo, d + 1): with shared data
        one (K_b·fo, d + 1) @ (d + 1, n) product; on sparse
        data ``Z.T = X @ P[:-1] + P[-1]`` per :func:`first_layer` block; each member on
        its own data (its ``members``' rows of ``H_0``) a batched one."""
        xp = self.xp
        if self.sparse:  # written into out as (K·fo, n)
            return _per_block(
                first_layer(xp, Q),
                out.reshape(out.shape[0] * out.shape[1], out.shape[2]),
                lambda P, rows: partial(_sparse_product, xp, self.X, P, rows),
            )
        if self.shared:
            return _flat_product(xp, Q, self.H, out)
        return partial(xp.matmul, Q, self.H[members], out=out)

    def _into_inputs(self, D: Any, out: Any, members: slice) -> Call:
        """``out ← D @ H_0.T`` (K_b, fo, d + 1), a block's first layer's gradient, as
        :meth:`_from_inputs` reads it."""
        xp = self.xp
        if self.sparse:  # G_0 = [X.T @ D_0.T; row sums of D_0] (d + 1, K·fo), a view of out
            XT = self.X.T.tocsr()  # (d, n): the product reads its rows, as models.mlp.FullBatch's
            return _per_block(
                first_layer(xp, out),
                D.reshape(D.shape[0] * D.shape[1], D.shape[2]),
                lambda G, rows: partial(_sparse_grad, xp, XT, rows, G),
            )
        if self.shared:
            return _flat_product(xp, D, self.HT, out)
        return partial(xp.matmul, D, self.HT[members], out=out)

    def run(self, calls: list[Call]) -> None:
        for call in calls:
            call()

    def loss(self) -> Any:
        """Each member's mean loss of the last forward pass, shape ``(K,)`` (no host sync)."""
        if self.task == "multiclass":
            return losses.cross_entropy(self.xp, self.z, self.y, classes=1, axis=1)  # (K, n) left
        return losses.loss(self.xp, self.task, self.z, self.y, axis=(1, 2))


def _flat_product(xp: Any, a: Any, b: Any, out: Any) -> Call:
    """``out ← a @ b`` for a stacked ``a`` (K, r, c) and one shared ``b`` (c, m): one (K·r,
    c) @ (c, m) matrix product into ``out`` viewed as (K·r, m), instead of K small ones."""
    K, r, c = a.shape
    return partial(xp.matmul, a.reshape(K * r, c), b, out=out.reshape(K * r, out.shape[2]))


def _mini_batch_calls(
    xp: Any, full: _Pass, steps: dict[int, _Pass], b: int, seed: int
) -> list[Call]:
    """One epoch of mini-batch steps, as :class:`models.mlp.MiniBatches` takes them: the
    rows in the order :class:`~sweeper.models.optim.RowOrder` draws from ``seed`` each
    epoch, ``b`` a step (the last takes the rest). A step gathers its columns of the
    whole training set's inputs and targets (``full``'s, shared by the members) into its
    pass's buffers, then runs its forward, backward and update."""
    n = full.H.shape[1]  # (d + 1, n): the inputs the members share
    order = xp.arange(n)
    calls: list[Call] = list(RowOrder(xp, order, seed).calls)
    Y = full.y[0]  # (k, n)
    for start in range(0, n, b):
        rows = order[start : start + b]
        step = steps[rows.shape[0]]
        calls += [
            _gather(xp, full.H[:-1], rows, step.H[:-1]),
            _gather(xp, Y, rows, step.y[0]),
            *step.forward_calls,
            *step.backward_calls,
            *step.update_calls,
        ]
    return calls

"""One batched pass of K members over the data: the forward and backward calls of a group's epoch, built once and
replayed (see :mod:`models.batched` for the shapes and the first layer's shared product)."""
from __future__ import annotations

from functools import partial
from typing import Any, Callable

from sweeper.base.backend import is_sparse
from sweeper.models import losses
from sweeper.models.activations import Call
from sweeper.models.mlp import _gather, _run, _sparse_grad, _sparse_product
from sweeper.models.optim import State
from sweeper.models.optim import RowOrder


def sparse_layout(xp: Any, Q: Any, per_member: bool) -> Any:
    """The stacked ``Q_0`` (K, fo, d + 1) with its memory in ``(K, d + 1, fo)`` order (``per_member``) or in
    ``(d + 1, K, fo)`` order (the same values, a strided array): what a group on sparse data trains, so that
    :func:`first_layer` gives views."""
    if per_member:
        return xp.swapaxes(xp.ascontiguousarray(xp.swapaxes(Q, 1, 2)), 1, 2)
    return xp.moveaxis(xp.ascontiguousarray(xp.moveaxis(Q, 2, 0)), 0, 2)



def first_layer(xp: Any, Q: Any) -> list[Any]:
    """The first layer's ``[W_0; b_0]`` as contiguous views of a ``Q_0`` (or its gradient) in
    :func:`sparse_layout`: ``[P_0]``, the whole group's (d + 1, K·fo) with column ``k·fo + j`` member k's
    unit j, or each member's (d + 1, fo). Writing into them writes into ``Q``."""
    group = xp.moveaxis(Q, 2, 0)  # (d + 1, K, fo)
    if group.flags.c_contiguous:
        return [group.reshape(group.shape[0], -1)]
    members = xp.swapaxes(Q, 1, 2)  # (K, d + 1, fo)
    if members.flags.c_contiguous:
        return list(members)
    raise ValueError("the first layer's weights on sparse data must be in sparse_layout")



def _per_block(P: list[Any], rows: Any, make: Callable[[Any, Any], Call]) -> Call:
    """``make(P[i], rows of block i)`` for each block ``P[i]`` (d + 1, c) of :func:`first_layer`, with ``rows``
    (K·fo, n) cut into blocks of ``c`` rows: the one call, or one call that runs them all."""
    c = P[0].shape[1]
    calls = [make(p, rows[i * c:(i + 1) * c]) for i, p in enumerate(P)]
    return calls[0] if len(calls) == 1 else partial(_run, calls)



def weight_parts(depth: int) -> list[Any]:
    """Per stacked parameter (:func:`stacked_params`), the index of its weights for weight decay: all of
    ``Q_0`` but its last column (the bias), all of each ``Wt_l``, none of a ``b_l``."""
    return [(Ellipsis, slice(None, -1))] + [Ellipsis, None] * depth



class _Pass:
    """Preallocated buffers and the calls of one data set's forward (and, with a scale, backward) pass.

    Shapes (K members, n rows, L = depth): ``H_0 = [X.T; 1]`` (d + 1, n), or (K, d + 1, n) per member, or
    for sparse ``X`` none: the first layer reads ``X`` (CSR) and its gradient ``X.T`` (CSR, backward only);
    ``A_l`` (K, width, n) for hidden layers; ``z`` (K, k, n); ``D_l`` like ``A_l``; ``g`` like ``z``; ``y``
    (1 or K, 1, n), one-hot (1 or K, k, n) for k classes.
    Forward: ``A_0 = f(Q_0 @ H_0)``, ``A_l = f(Wt_l @ A_{l-1} + b_l)``, ``z = Wt_L @ A_{L-1} + b_L``.
    Backward: ``G_Q0 = D_0 @ H_0.T``; ``G_Wl = D_l @ A_{l-1}.T``, ``G_bl = D_l @ 1``;
    ``D_{l-1} = (Wt_l.T @ D_l) ∘ f'(Z_{l-1})`` (a broadcast product when layer l has one unit).
    """

    def __init__(self, xp: Any, params: list[Any], act: Any, task: str, X: Any, y: Any, scale: Any | None,
                 state: State | None = None):
        self.xp, self.task = xp, task
        K, n, dtype = params[0].shape[0], X.shape[-2], X.dtype
        self.sparse = is_sparse(X)
        self.shared = X.ndim == 2
        if self.sparse:  # shared by the group; never densified (see the module's docstring)
            self.X = X
        else:
            self.H = xp.ones((*X.shape[:-2], X.shape[-1] + 1, n), dtype=dtype)  # (d + 1, n) or (K, d + 1, n)
            self.H[..., :-1, :] = xp.swapaxes(X, -1, -2)
            self.HT = xp.swapaxes(self.H, -1, -2)
        self.y = xp.ascontiguousarray(y.reshape((1, 1, n) if y.ndim == 2 else (K, 1, n)))
        self.L = L = (len(params) - 1) // 2
        self.Wt = [params[0]] + params[1::2]  # Wt[0] is Q_0
        self.b = [None] + params[2::2]
        self.A = [xp.empty((K, w.shape[1], n), dtype=dtype) for w in self.Wt[:-1]]
        self.z = xp.empty((K, self.Wt[-1].shape[1], n), dtype=dtype)
        if task == "multiclass":  # class indices (1 or K, 1, n) → one-hot columns (1 or K, k, n)
            self.y = xp.ascontiguousarray(losses.one_hot(xp, self.y, self.z.shape[1], classes=-2))
        outs = self.A + [self.z]
        # the backward pass's scratch (free while the forward pass runs) for the activation's form, when it needs one
        self.tmp = [xp.empty_like(a) for a in self.A] if scale is not None else [None] * L
        calls: list[Call] = []
        for l in range(L + 1):
            calls.append(self._product(l, outs[l]))
            if l:
                calls.append(partial(xp.add, outs[l], self.b[l], outs[l]))
            if l < L:
                calls += act.f_calls(xp, outs[l], self.tmp[l])
        self.forward_calls = calls
        self.backward_calls: list[Call] = []
        if scale is None:
            return
        self.grads = [xp.empty_like(p) for p in params]
        GW = [self.grads[0]] + self.grads[1::2]
        Gb = [None] + self.grads[2::2]
        self.ones = xp.ones((n, 1), dtype=dtype)
        self.g = xp.empty_like(self.z)
        self.D = [xp.empty_like(a) for a in self.A]
        self.col = xp.empty((K, 1, n), dtype=dtype)  # the softmax's max and sum per sample
        # g ← scale · dL/dz / grad_constant, with scale = grad_scale(lr) · active · grad_constant per member
        calls = [*losses.residual_calls(xp, task, self.z, self.y, self.g, self.col),
                 partial(xp.multiply, self.g, scale, self.g)]
        D = self.g
        for l in range(L, -1, -1):
            calls.append(self._weight_grad(D, l, GW[l]))
            if l == 0:
                break
            calls.append(_flat_product(xp, D, self.ones, Gb[l]))  # G_bl = D_l @ 1: the sum over rows
            Wt, prev = self.Wt[l], self.D[l - 1]
            if Wt.shape[1] == 1:  # one unit: Wt_l.T @ D_l is the broadcast product w ∘ D_l
                calls.append(partial(xp.multiply, xp.swapaxes(Wt, 1, 2), D, out=prev))
            else:
                calls.append(partial(xp.matmul, xp.swapaxes(Wt, 1, 2), D, out=prev))
            calls += act.grad_calls(xp, prev, self.A[l - 1], self.tmp[l - 1])
            D = prev
        self.backward_calls = calls
        self.update_calls = state.calls(self.grads)

    def _product(self, l: int, out: Any) -> Call:
        """``out ← Wt_l @ input``; the shared first layer as one (K·fo, d + 1) @ (d + 1, n) product."""
        xp, Wt = self.xp, self.Wt[l]
        if l == 0 and self.sparse:  # Z_0.T = X @ P_0[:-1] + P_0[-1] (n, K·fo), written into out as (K·fo, n)
            return _per_block(first_layer(xp, Wt), out.reshape(-1, out.shape[-1]),
                              lambda P, rows: partial(_sparse_product, xp, self.X, P, rows))
        if l == 0 and self.shared:
            return _flat_product(xp, Wt, self.H, out)
        return partial(xp.matmul, Wt, self.H if l == 0 else self.A[l - 1], out=out)

    def _weight_grad(self, D: Any, l: int, out: Any) -> Call:
        """``out ← D_l @ input.T``; with shared data the first layer's is one (K·fo, n) @ (n, d + 1) product."""
        xp = self.xp
        if l == 0 and self.sparse:  # G_0 = [X.T @ D_0.T; row sums of D_0] (d + 1, K·fo), a view of out
            XT = self.X.T.tocsr()  # (d, n): the product reads its rows, as models.mlp.FullBatch's
            return _per_block(first_layer(xp, out), D.reshape(-1, D.shape[-1]),
                              lambda G, rows: partial(_sparse_grad, xp, XT, rows, G))
        if l == 0 and self.shared:
            return _flat_product(xp, D, self.HT, out)
        return partial(xp.matmul, D, self.HT if l == 0 else xp.swapaxes(self.A[l - 1], 1, 2), out=out)

    def run(self, calls: list[Call]) -> None:
        for call in calls:
            call()

    def loss(self) -> Any:
        """Each member's mean loss of the last forward pass, shape ``(K,)`` (no host sync)."""
        if self.task == "multiclass":
            return losses.cross_entropy(self.xp, self.z, self.y, classes=1, axis=-1)
        return losses.loss(self.xp, self.task, self.z, self.y, axis=(1, 2))



def _flat_product(xp: Any, a: Any, b: Any, out: Any) -> Call:
    """``out ← a @ b`` for a stacked ``a`` (K, r, c) and one shared ``b`` (c, m): one (K·r, c) @ (c, m)
    matrix product into ``out`` viewed as (K·r, m), instead of K small ones."""
    K, r, c = a.shape
    return partial(xp.matmul, a.reshape(K * r, c), b, out=out.reshape(K * r, -1))



def _mini_batch_calls(xp: Any, full: _Pass, steps: dict[int, _Pass], b: int, seed: int) -> list[Call]:
    """One epoch of mini-batch steps, as :class:`models.mlp.MiniBatches` takes them: the rows in the order
    :class:`~sweeper.models.optim.RowOrder` draws from ``seed`` each epoch, ``b`` a step (the last takes the rest). A
    step gathers
    its columns of the whole training set's inputs and targets (``full``'s, shared by the members) into its
    pass's buffers, then runs its forward, backward and update."""
    n = full.H.shape[-1]
    order = xp.arange(n)
    calls: list[Call] = list(RowOrder(xp, order, seed).calls)
    Y = full.y[0]  # (k, n)
    for start in range(0, n, b):
        rows = order[start:start + b]
        step = steps[rows.shape[0]]
        calls += [_gather(xp, full.H[:-1], rows, step.H[:-1]), _gather(xp, Y, rows, step.y[0]),
                  *step.forward_calls, *step.backward_calls, *step.update_calls]
    return calls

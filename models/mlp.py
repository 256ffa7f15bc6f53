"""One model family: a multilayer perceptron whose depth-0 case is linear or logistic regression.

Layers ``l = 0..L`` (L = depth): ``Z_l = A_{l-1} @ W_l + b_l`` with ``A_{-1} = X`` of
shape ``(n, d)``, ``A_l = f(Z_l)`` for hidden layers and the output ``z = Z_L`` of shape
``(n, 1)`` read through the task's loss (identity + MSE, or sigmoid +
binary cross-entropy), or ``(n, k)`` for a multi-class task (softmax + cross-entropy).
Weight decay ``λ`` adds ``(λ/2) Σ ||W_l||²`` (not the biases) to the objective.

Backward, from ``dZ_L = dL/dz``:  ``dW_l = A_{l-1}.T @ dZ_l``, ``db_l = sum(dZ_l, axis=0)``,
``dA_{l-1} = dZ_l @ W_l.T``, ``dZ_{l-1} = dA_{l-1} * f'(Z_{l-1})``.

Two ways to run it, both written once against ``xp``:

- :class:`MLP` ``.logits`` / ``.gradients`` / ``.step``: the equations as written, one
  allocation per array (the reference, used for evaluation and checked against finite
  differences) — the model interface's :class:`~sweeper.models.mlp_net.MLPNet`
  ``forward``/``backward``, the MLP's one forward pass;
- :class:`FullBatch`: the same epoch as a flat list of in-place calls on preallocated buffers, for
  training. It stores activations *feature-major* (``A_l.T``, shape ``(width, n)``) with a row of
  ones appended, so the bias rides in the matrix product (``Z_l.T = [W_l; b_l].T @ [A_{l-1}.T; 1]``)
  and ``db_l`` comes out of the same product as ``dW_l``. Feature-major keeps every elementwise call
  on one contiguous block: NumPy runs a row-strided or broadcast (n, width) operand row by row,
  which costs more than the arithmetic on small nets.

The parameters live in one packed matrix per layer, ``P_l = [W_l; b_l]`` of shape
``(fan_in + 1, fan_out)``; ``MLP.params`` are views into them, so both paths see the same weights.
The arrays live wherever ``xp`` puts them; nothing here copies to the host or waits for the device.
"""

from __future__ import annotations

import contextvars
from concurrent.futures import wait
from functools import partial
from typing import Any

import numpy as np

from sweeper.base.backend import is_sparse
from sweeper.models import losses
from sweeper.models.activations import ACTIVATIONS, Call
from sweeper.models.mlp_net import MLPNet
from sweeper.models.optim import Optimizer, State
from sweeper.models.optim import RowOrder


__all__ = ["FullBatch", "MIN_BLOCK", "MLP", "column_blocks", "init_params", "product_flops"]


def init_params(sizes: list[int], activation: str, seed: int, dtype: str) -> list[np.ndarray]:
    """Weights drawn on the host from NumPy's seeded generator, so every device starts identical.

    He-normal scale for relu, Glorot-normal otherwise; biases start at zero. Returns
    ``[W_0, b_0, W_1, b_1, ...]`` with ``W_l`` of shape ``(sizes[l], sizes[l+1])`` and ``b_l`` of
    shape ``(1, sizes[l+1])``.
    """
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        scale = np.sqrt(2.0 / fan_in) if activation == "relu" else np.sqrt(2.0 / (fan_in + fan_out))
        params.append((rng.standard_normal((fan_in, fan_out)) * scale).astype(dtype))
        params.append(np.zeros((1, fan_out), dtype=dtype))
    return params


class MLP:
    """Parameters on a device plus the forward and backward passes written against ``xp``.

    ``params`` (``[W_0, b_0, W_1, b_1, ...]``, as :func:`init_params` returns them) are
    copied once into the packed matrices ``self.packed``; ``self.params`` are views into
    those. Change weights in place (``p[...] = value``), never by rebinding a list entry.
    """

    def __init__(
        self, xp: Any, params: list[Any], activation: str, task: str, weight_decay: float = 0.0
    ):
        self.xp = xp
        self.weight_decay = weight_decay
        self.packed = [xp.concatenate([W, b], axis=0) for W, b in zip(params[::2], params[1::2])]
        # W_l (fan_in, fan_out), b_l (1, fan_out)
        self.params = [v for P in self.packed for v in (P[:-1], P[-1:])]
        self.activation = activation
        self.task = task
        self.act = ACTIVATIONS[activation]
        self.net = MLPNet(len(self.packed) - 1, self.packed[0].shape[1], activation)

    @property
    def depth(self) -> int:
        return len(self.packed) - 1

    @property
    def named(self) -> dict[str, Any]:
        """The parameters as :class:`~sweeper.models.mlp_net.MLPNet` names them
        (``W1, b1, …``): views, no copies."""
        return {
            f"{kind}{l + 1}": p
            for l, P in enumerate(self.packed)
            for kind, p in (("W", P[:-1]), ("b", P[-1:]))
        }

    def logits(self, X: Any) -> tuple[Any, list[tuple[Any, Any]]]:
        """Forward pass: :meth:`MLPNet.forward <sweeper.models.mlp_net.MLPNet.forward>`
        (one forward pass for both). Returns the output ``z`` (n, k) and the cache
        ``[(A_in, Z), ...]`` of the layers."""
        return self.net.forward(self.xp, self.named, X)

    def predict(self, X: Any) -> Any:
        """Predictions (n, 1): the regression output, or P(y = 1) for a binary task."""
        z, _ = self.logits(X)
        return losses.output(self.xp, self.task, z)

    def loss(self, X: Any, y: Any) -> Any:
        z, _ = self.logits(X)
        return losses.loss(self.xp, self.task, z, y)

    def objective(self, X: Any, y: Any) -> Any:
        """What training minimises: the loss plus the weight decay ``(λ/2) Σ ||W_l||²``."""
        return self.loss(X, y) + self._penalty()

    def _penalty(self) -> Any:
        return (
            0.5 * self.weight_decay * sum((W * W).sum() for W in self.params[::2])
            if self.weight_decay
            else 0.0
        )

    def gradients(self, X: Any, y: Any, with_loss: bool = False) -> tuple[Any, list[Any]]:
        """Objective (a 0-d device array, or None unless ``with_loss``) and
        ``[dW_0, db_0, ...]``: the loss's gradient through :meth:`MLPNet.backward
        <sweeper.models.mlp_net.MLPNet.backward>`, plus ``λ W`` on weights."""
        xp = self.xp
        z, cache = self.logits(X)
        loss = losses.loss(xp, self.task, z, y) + self._penalty() if with_loss else None
        named = self.named
        g = self.net.backward(xp, named, cache, losses.grad(xp, self.task, z, y))
        grads: list[Any] = []
        for l in range(1, len(self.packed) + 1):
            dW = (
                g[f"W{l}"] + self.weight_decay * named[f"W{l}"] if self.weight_decay else g[f"W{l}"]
            )
            grads += [dW, g[f"b{l}"]]
        return loss, grads

    def step(self, grads: list[Any], lr: float) -> None:
        """One gradient-descent update in place: θ ← θ - lr · ∇θ."""
        for p, g in zip(self.params, grads):
            p -= lr * g

    # what models.train.train asks a model for: its step objects (the fused epoch) and
    # its largest product's cost
    def full_batch(
        self,
        X: Any,
        y: Any,
        lr: float | None = None,
        parts: int = 1,
        pool: Any = None,
        opt: Optimizer | None = None,
        state: State | None = None,
    ) -> "FullBatch":
        return FullBatch(self, X, y, lr, parts, pool, opt, state)

    def mini_batches(
        self,
        X: Any,
        y: Any,
        lr: float,
        batch_size: int,
        seed: int,
        opt: Optimizer | None = None,
        shuffle: bool = True,
        parts: int = 1,
        pool: Any = None,
    ) -> "MiniBatches":
        return MiniBatches(self, X, y, lr, batch_size, seed, opt, shuffle, parts, pool)

    def flops(self, n: int) -> float:
        return product_flops(self, n)


class FullBatch:
    """One data set's preallocated buffers and the full-batch epoch over them as a flat
    list of calls.

    Layer ``l = 0..L`` (L = depth) maps its input ``H_l`` to ``Z_l``, as in :class:`MLP` but
    transposed. Shapes, with ``n`` rows and ``k_l`` = fan-in of layer ``l`` (``k_0 = d``)::

        H_0 = [X.T; 1]            (d + 1, n)        the data, transposed once, with a row of ones
        H_l = [A_{l-1}.T; 1]      (k_l + 1, n)      hidden activations (A overwrites Z in place)
        z = Z_L.T                 (k, n)            the output logits (k = 1, or the classes)
        D_l = -lr dL/dZ_l.T       (fan_out_l, n)    D_L = g = -lr dL/dz (only when ``lr`` is given)
        G_l = -lr dL/dP_l         (k_l + 1, fan_out_l)

    Forward:  ``Z_l.T = P_l.T @ H_l``; ``H_{l+1}[:-1] = f(Z_l.T)`` for hidden layers.
    Backward: ``G_l = H_l @ D_l.T``; ``D_{l-1} = (W_l @ D_l) ∘ f'(Z_{l-1}.T)``
    with ``W_l = P_l[:-1]``.
    Update:   ``P_l += G_l`` — gradient descent, because ``G_l`` already carries ``-lr``.

    ``epoch()`` runs forward, backward and update with no allocation, no per-layer dispatch and no
    host transfer; without ``lr`` only the forward pass is built (for the validation set).
    The update is ``opt``'s (:mod:`models.optim`; plain gradient descent by default) on
    the optimizer ``state`` (shared by the batches of one run; made here when not given).

    **Column blocks.** Every array with a sample axis has it last, so the forward pass and the
    ``D_l`` of the backward pass are independent across blocks of columns (samples). With ``parts``
    > 1 (CPU only, from the backend's thread policy) the epoch is built once per column block and
    the blocks run on ``parts`` threads (NumPy and a single-threaded BLAS release the GIL), each
    block writing its share of every ``G_l`` into buffers of its own; the shares are summed and
    the weights updated after the blocks meet. One meeting point per epoch, and every product and
    elementwise pass on two cores, where BLAS threads alone leave the elementwise work on one.
    """

    def __init__(
        self,
        model: MLP,
        X: Any,
        y: Any,
        lr: float | None = None,
        parts: int = 1,
        pool: Any = None,
        opt: Optimizer | None = None,
        state: State | None = None,
    ):
        xp, P = model.xp, model.packed
        n, dtype = X.shape[0], model.packed[0].dtype
        self.xp, self.model = xp, model
        self.opt = opt = opt or Optimizer()
        self.sparse = is_sparse(X)
        # text features: X stays CSR, the first layer is its own product (_sparse_product)
        if self.sparse:
            self.X, self.XT = X, X.T.tocsr()  # (n, d) and (d, n): both products read rows
            self.H = [None]
        else:
            self.H = [_ones_row(xp, (P[0].shape[0], n), dtype)]
            self.H[0][:-1] = X.T
        self.H += [_ones_row(xp, (W.shape[1] + 1, n), dtype) for W in P[:-1]]
        self.z = xp.empty((P[-1].shape[1], n), dtype=dtype)
        self.y = targets(xp, model.task, y, P[-1].shape[1], dtype)
        blocks = column_blocks(n, parts) if pool is not None and not self.sparse else [slice(None)]
        self.parts = len(blocks)
        self._mm = partial(_product, xp, len(blocks) > 1)
        self.pre_calls: list[Call] = []  # weight-only work before the backward pass
        if lr is not None:
            self._scratch(P, n, dtype)
        forward = [self._forward(P, cols) for cols in blocks]
        backward: list[list[Call]] = [[] for _ in blocks]
        # after the blocks meet: sum the gradient shares, then update
        self.update_calls: list[Call] = []
        self.rescale_calls: list[Call] = []  # (part of update_calls) G_{L-1} ∘ w.T
        if lr is not None:
            self.grads = [xp.empty_like(p) for p in P]
            shares = [self.grads] + [[xp.empty_like(p) for p in P] for _ in blocks[1:]]
            backward = [
                self._backward(P, opt.grad_scale(lr), cols, G, n) for cols, G in zip(blocks, shares)
            ]
            self.update_calls = [
                partial(xp.add, G, S, G) for share in shares[1:] for G, S in zip(self.grads, share)
            ]
            self.rescale_calls = self._rescale_calls(P)
            self.update_calls += self.rescale_calls
            self.state = state or State(xp, P, opt, lr)
            self.update_calls += self.state.calls(self.grads)
        if len(blocks) == 1:
            self.forward_calls = forward[0]
            self.backward_calls = self.pre_calls + backward[0]
            self.epoch_calls = self.forward_calls + self.backward_calls + self.update_calls
        else:
            self.forward_calls = [_Blocks(pool, forward)]
            self.backward_calls = (
                self.pre_calls + [_Blocks(pool, backward)] if lr is not None else []
            )
            self.epoch_calls = [
                *self.pre_calls,
                _Blocks(pool, [f + b for f, b in zip(forward, backward)]),
                *self.update_calls,
            ]

    def _forward(self, P: list[Any], cols: slice) -> list[Call]:
        xp, H, act = self.xp, self.H, self.model.act
        calls: list[Call] = []
        # the backward pass's scratch, free while the forward pass runs
        tmp = getattr(self, "tmp", {})
        for l in range(len(P) - 1):
            Z = H[l + 1][:-1][:, cols]  # Z_l.T (fan_out_l, n): overwritten by A_l.T in place
            calls += [
                self._layer(l, P, cols, Z),
                *act.f_calls(xp, Z, tmp[l][:, cols] if l in tmp else None),
            ]
        calls.append(self._layer(len(P) - 1, P, cols, self.z[:, cols]))
        return calls

    def _layer(self, l: int, P: list[Any], cols: slice, out: Any) -> Call:
        """``Z_l.T = P_l.T @ H_l`` into ``out``; the first layer on sparse X:
        ``(X @ W_0 + b_0).T``."""
        if l == 0 and self.sparse:
            return partial(_sparse_product, self.xp, self.X, P[0], out)
        return self._mm(P[l].T, self.H[l][:, cols], out)

    def _weight_grad(self, l: int, cols: slice, D: Any, G: Any) -> Call:
        """``G_l = H_l @ D_l.T``; the first layer on sparse X:
        ``[X.T @ D_0.T; row sums of D_0]``."""
        if l == 0 and self.sparse:
            return partial(_sparse_grad, self.xp, self.XT, D, G)
        return self._mm(self.H[l][:, cols], D.T, G)

    def _scratch(self, P: list[Any], n: int, dtype: Any) -> None:
        """Full-width buffers of the backward pass (each block works on its columns of them)."""
        xp, L = self.xp, len(P) - 1
        self.g = xp.empty((P[-1].shape[1], n), dtype=dtype)
        self.col = xp.empty((1, n), dtype=dtype)  # the softmax's max and sum per sample
        # D_l and a scratch for f' for every hidden layer l < L (D_{L-1} is kept as M,
        # see _backward)
        self.D = {l: xp.empty((P[l].shape[1], n), dtype=dtype) for l in range(L)}
        self.tmp = {l: xp.empty((P[l].shape[1], n), dtype=dtype) for l in range(L)}
        if L >= 2 and P[-1].shape[1] == 1:
            self.W_scaled = xp.empty_like(P[L - 1][:-1])
            # W_{L-1} ∘ w.T, from the weights of this epoch: computed before the blocks run
            self.pre_calls = [partial(xp.multiply, P[L - 1][:-1], P[L][:-1].T, self.W_scaled)]

    def _rescale_calls(self, P: list[Any]) -> list[Call]:
        """``G_{L-1} ∘ w.T`` once the shares are summed (see :meth:`_backward`)."""
        L = len(P) - 1
        if L == 0 or P[-1].shape[1] > 1:
            return []
        return [partial(self.xp.multiply, self.grads[L - 1], P[L][:-1].T, self.grads[L - 1])]

    def _backward(
        self, P: list[Any], scale: float, cols: slice, G: list[Any], n: int
    ) -> list[Call]:
        xp, H, L = self.xp, self.H, len(P) - 1
        g = self.g[:, cols]
        calls = losses.grad_calls(
            xp, self.model.task, self.z[:, cols], self.y[:, cols], g, scale, n, self.col[:, cols]
        )
        calls.append(self._weight_grad(L, cols, g, G[L]))  # G_L = H_L @ g.T
        if L == 0:
            return calls
        if P[-1].shape[1] > 1:  # k outputs: D_{L-1} = (W_L @ g) ∘ f'(Z_{L-1}.T), then as below
            return calls + self._hidden_backward(P, cols, G, g, L + 1, P[L][:-1])
        # The output layer has one unit, so W_L @ g is an outer product w g (w =
        # P_L[:-1], (k_L, 1)). NumPy runs a broadcast multiply at a third of its
        # contiguous speed, so D_{L-1} is kept as M = [g; g; …] ∘ f'(Z_{L-1}.T), with
        # D_{L-1} = w ∘ M row by row, and w goes onto the two small matrices that D_{L-1}
        # meets instead: G_{L-1} = (H_{L-1} @ M.T) ∘ w.T (after the shares are summed),
        # W_{L-1} @ D_{L-1} = (W_{L-1} ∘ w.T) @ M (W_scaled, before the blocks run).
        M = self.D[L - 1][:, cols]
        calls.append(partial(xp.copyto, M, xp.broadcast_to(g, M.shape)))
        calls += self._times_f_prime(M, H[L][:-1][:, cols], self.tmp[L - 1][:, cols])
        calls.append(self._weight_grad(L - 1, cols, M, G[L - 1]))
        return calls + self._hidden_backward(P, cols, G, M, L, getattr(self, "W_scaled", None))

    def _hidden_backward(
        self, P: list[Any], cols: slice, G: list[Any], D: Any, top: int, W_top: Any
    ) -> list[Call]:
        """From ``D_top`` down: ``D_{l-1} = (W_l @ D_l) ∘ f'``, then ``G_{l-1}``,
        for ``l = top - 1 .. 1`` (layer ``top - 1`` multiplies by ``W_top``)."""
        H, mm, calls = self.H, self._mm, []
        for l in range(top - 1, 0, -1):  # D_{l-1} from D_l, then G_{l-1}
            dA = self.D[l - 1][:, cols]
            W = W_top if l == top - 1 else P[l][:-1]
            calls += [
                mm(W, D, dA),
                *self._times_f_prime(dA, H[l][:-1][:, cols], self.tmp[l - 1][:, cols]),
            ]
            calls.append(self._weight_grad(l - 1, cols, dA, G[l - 1]))
            D = dA
        return calls

    def _times_f_prime(self, dA: Any, A: Any, tmp: Any) -> list[Call]:
        """Calls for ``dA ← dA ∘ f'(Z)`` in place, from the activations ``A = f(Z)``."""
        return self.model.act.grad_calls(self.xp, dA, A, tmp)

    def epoch(self) -> None:
        """One gradient-descent step on the whole batch: forward, backward, update, all in place."""
        for call in self.epoch_calls:
            call()

    def forward(self) -> Any:
        """Run the forward pass; returns the logits ``z`` (1, n), a buffer the next call
        overwrites."""
        for call in self.forward_calls:
            call()
        return self.z

    def warm_up(self) -> None:
        """Every call of an epoch but the update, once (CuPy compiles its kernels): the
        weights stay."""
        self.forward()
        self.loss()
        for call in self.backward_calls + self.rescale_calls:
            call()

    def backward_and_update(self) -> None:
        """The rest of an epoch after :meth:`forward` (with the same weights)."""
        for call in self.backward_calls:
            call()
        for call in self.update_calls:
            call()

    def loss(self) -> Any:
        """The loss of the last :meth:`forward`, a 0-d device array (no host sync)."""
        if self.model.task == "multiclass":
            return losses.cross_entropy(self.xp, self.z, self.y, classes=0)
        return losses.loss(self.xp, self.model.task, self.z, self.y)


class MiniBatches:
    """An epoch of mini-batch steps: the training rows in a seeded order drawn on the device each
    epoch (:class:`~sweeper.models.optim.RowOrder`: the same orders on every device),
    ``batch_size`` rows a step (the last step takes the rest), each step a :class:`FullBatch`
    epoch on its rows. The data stay on the device feature-major; a step gathers its columns into
    the batch's buffers (``take`` with ``out``). The optimizer state is shared by the two batch
    shapes; an epoch allocates only the new order (its sort), and nothing waits for the host.

    ``shuffle=False`` keeps the rows in order (scikit-learn's ``shuffle=False``, for the tests).
    """

    def __init__(
        self,
        model: MLP,
        X: Any,
        y: Any,
        lr: float,
        batch_size: int,
        seed: int,
        opt: Optimizer | None = None,
        shuffle: bool = True,
        parts: int = 1,
        pool: Any = None,
    ):
        xp, n = model.xp, X.shape[0]
        dtype, k = model.packed[0].dtype, model.packed[-1].shape[1]
        self.xp, self.shuffle = xp, shuffle
        self.X = xp.ascontiguousarray(X.T)  # (d, n)
        self.Y = targets(xp, model.task, y, k, dtype)  # (k, n)
        self.order = xp.arange(n)
        opt = opt or Optimizer()
        state = State(xp, model.packed, opt, lr)
        b = min(batch_size, n)
        sizes = {b, n % b} - {0}
        shapes = {m: FullBatch(model, X[:m], y[:m], lr, parts, pool, opt, state) for m in sizes}
        self.batches = list(shapes.values())
        self.calls: list[Call] = RowOrder(xp, self.order, seed).calls if shuffle else []
        for start in range(0, n, b):
            rows = self.order[start : start + b]
            fb = shapes[rows.shape[0]]
            self.calls += [
                _gather(xp, self.X, rows, fb.H[0][:-1]),
                _gather(xp, self.Y, rows, fb.y),
                *fb.epoch_calls,
            ]

    def epoch(self) -> None:
        for call in self.calls:
            call()

    def warm_up(self) -> None:
        for fb in self.batches:
            fb.warm_up()


def targets(xp: Any, task: str, y: Any, k: int, dtype: Any) -> Any:
    """The targets feature-major: ``y`` (n, 1) as (1, n), or as one-hot columns (k, n)
    for k classes."""
    n = y.shape[0]
    # (n, 1) → (1, n), a copy: mini-batches write into theirs
    row = xp.array(y.reshape(1, n), dtype=dtype)
    return (
        xp.ascontiguousarray(losses.one_hot(xp, row, k, classes=0)) if task == "multiclass" else row
    )


def _gather(xp: Any, src: Any, cols: Any, out: Any) -> Call:
    """``out ← src[:, cols]`` without allocating (NumPy: ``take`` with ``out`` in a mode
    that needs no buffer)."""
    if xp is np:
        return partial(np.take, src, cols, axis=1, out=out, mode="wrap")
    return partial(xp.take, src, cols, axis=1, out=out)


def product_flops(model: MLP, n: int) -> float:
    """FLOPs of the largest matrix product of an epoch on ``n`` rows (for a backend's
    thread policy)."""
    return 2.0 * n * max(p.shape[0] * p.shape[1] for p in model.packed)


MIN_BLOCK = 256  # columns (samples) per block: below this, a block's products are too thin to split


def column_blocks(n: int, parts: int) -> list[slice]:
    """``parts`` (fewer if ``n`` is small) contiguous, near-equal column ranges covering
    ``0..n``."""
    parts = max(1, min(parts, n // MIN_BLOCK))
    edges = [round(i * n / parts) for i in range(parts + 1)]
    return [slice(a, b) for a, b in zip(edges[:-1], edges[1:])] if parts > 1 else [slice(None)]


def _product(xp: Any, blocks: bool, a: Any, b: Any, out: Any) -> Call:
    """``out ← a @ b``. NumPy on whole arrays: ``dot`` with a positional ``out`` (¼ µs cheaper
    a call than ``matmul``; ``out`` is contiguous there). Column blocks, whose ``out`` is
    strided, and CuPy: ``matmul``, which hands both to BLAS / cuBLAS as they are."""
    if xp is np and not blocks:
        return partial(xp.dot, a, b, out)
    return partial(xp.matmul, a, b, out=out)


class _Blocks:
    """Run one list of calls per column block: the first on this thread, the others on a
    pool; return when all are done (a worker's exception is raised here)."""

    def __init__(self, pool: Any, calls: list[list[Call]]):
        self.pool, self.calls = pool, calls

    def __call__(self) -> None:
        # each worker runs in a copy of this thread's context: NumPy's errstate (train() silences
        # overflow, which divergence detection handles) lives there
        pending = [
            self.pool.submit(contextvars.copy_context().run, _run, calls)
            for calls in self.calls[1:]
        ]
        try:
            _run(self.calls[0])
        finally:  # never leave a block writing into the buffers after an error here
            wait(pending)
        for f in pending:
            f.result()


def _run(calls: list[Call]) -> None:
    for call in calls:
        call()


def _sparse_product(xp: Any, X: Any, P0: Any, out: Any) -> None:
    """``out ← (X @ W_0 + b_0).T`` (fan_out, n) for a sparse X (n, d): a sparse × dense
    product, never densifying X (SciPy / cupyx allocate the (n, fan_out) result)."""
    xp.copyto(out, (X @ P0[:-1]).T)
    out += P0[-1:].T


def _sparse_grad(xp: Any, XT: Any, D: Any, G: Any) -> None:
    """``G ← [X.T @ D.T; D summed over samples]`` (d + 1, fan_out) from the
    CSR ``XT = X.T`` (d, n)."""
    xp.copyto(G[:-1], XT @ D.T)
    xp.sum(D, axis=1, out=G[-1])


def _ones_row(xp: Any, shape: tuple[int, int], dtype: Any) -> Any:
    """An uninitialised (rows, n) buffer whose last row is ones: the input that
    multiplies the bias."""
    H = xp.empty(shape, dtype=dtype)
    H[-1] = 1
    return H

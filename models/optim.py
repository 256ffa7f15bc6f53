"""The update rules of the fused epoch: gradient descent, momentum (optionally Nesterov)
and Adam, plus L2 weight decay — each a flat list of in-place calls on state
preallocated on the device — and the rows' order of mini-batch training.

The backward pass of :class:`sweeper.models.mlp.FullBatch` writes ``G_l = s · dJ/dP_l``
for the packed parameters ``P_l = [W_l; b_l]``, with the factor ``s`` of
:meth:`Optimizer.grad_scale` folded into the loss gradient (backpropagation is linear in
it): ``s = -lr`` for ``gd`` and ``momentum`` (so ``G_l`` is the gradient step
itself), ``s = 1`` for ``adam`` (which needs the raw gradient). Then, per step:

- weight decay ``λ`` (weights, not biases): the objective is ``J = L + (λ/2) Σ_l ||W_l||²``, so
  ``G_l[:-1] += s λ W_l`` (scikit-learn's ``alpha`` for a batch of ``n`` rows is ``λ n``);
- ``gd``:        ``P += G``
- ``momentum``: ``V ← μ V + G``; ``P += V``, or with ``nesterov`` ``P += μ V + G``
  (scikit-learn's SGD)
- ``adam``:      ``m ← β1 m + (1-β1) G``, ``v ← β2 v + (1-β2) G²``,
                 ``P -= lr (√(1-β2^t) / (1-β1^t)) · m / (√v + ε)``
                 (scikit-learn's Adam, ``t`` = step).

Adam's step count lives on the device as ``β1^t`` and ``β2^t`` (0-d arrays multiplied
each step), so the step size needs no host value per step. ``gd`` keeps today's single
add per layer: runs are unchanged.

The same calls update the batched trainer's parameters (:mod:`models.batched`), stacked
over K members with ``lr`` an array ``(K, 1, 1)`` (``-lr`` and the step size broadcast
over each member's weights) and the weights' indices of that layout
(``Q_0 = [W_0; b_0].T`` keeps the bias in its last column).

The rows' order of each epoch of mini-batch training (:class:`RowOrder`) is drawn on the device and
is the same on every device: ``xp.random.RandomState(seed).shuffle`` gave NumPy's order on the CPU
and cuRAND's on the GPU (CuPy sorts random 32-bit keys), so a mini-batch run on the GPU trained on
other batches than its CPU twin. Epoch ``t``'s order sorts the keys ``mix(i + seed·φ + t·n)`` of the
rows ``i = 0..n-1``, with ``mix`` SplitMix64's finaliser (a bijection of 64-bit integers: xor-shifts
and multiplications by odd constants, modulo 2⁶⁴) — integer arithmetic every device does alike; the
keys of one epoch are distinct, so the sort has one answer whatever its algorithm. The epoch count
lives on the device (one add an epoch): nothing crosses to the host.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Mapping, Sequence

import numpy as np

from sweeper.models.activations import Call

__all__ = ["Optimizer", "RowOrder", "State", "row_orders"]

OPTIMIZERS = ("gd", "momentum", "adam")


@dataclass(frozen=True)
class Optimizer:
    """The update rule of a run (the config keys of the same names)."""

    name: str = "gd"
    momentum: float = 0.9
    nesterov: bool = False
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | Any) -> "Optimizer":
        """From a run config (a DictConfig or a dict); keys it lacks keep their defaults."""
        get = cfg.get if hasattr(cfg, "get") else lambda k, d: getattr(cfg, k, d)
        return cls(
            **{k: get(k, v) for k, v in cls().__dict__.items() if k != "name"},
            name=get("optimizer", "gd"),
        )

    @property
    def uses_rates(self) -> bool:
        """Whether the update reads the rates itself (Adam's step size, weight decay),
        besides the gradient's scale."""
        return self.name == "adam" or bool(self.weight_decay)

    @property
    def copies(self) -> int:
        """Arrays of the parameters' size that :class:`State` keeps beside them
        (scratch, velocity, moments; in a group the rates per element that the rule
        reads, and each element's member)."""
        rates = 2 * (self.name == "adam") + bool(self.weight_decay) + self.uses_rates
        return (
            int(self.name != "gd" or bool(self.weight_decay))
            + {"momentum": 1, "adam": 2}.get(self.name, 0)
            + rates
        )

    def grad_scale(self, lr: Any) -> Any:
        """The factor the backward pass folds into the gradient: ``-lr`` (a number or an
        array), or 1 for Adam."""
        return 1.0 if self.name == "adam" else -lr


class State:
    """An optimizer's buffers for one set of parameters, allocated once (shared by every
    batch shape of a run).

    ``lr`` is a number, or an array of per-member rates that broadcasts over parameters stacked over
    members (the batched trainer's ``(K, 1, 1)``); :meth:`set_lr` changes it in place, so the calls
    already built see the new rates (a member's rate set to 0 freezes it, together with zeroing its
    ``buffers``). ``weights`` gives, per parameter, the index of its weights (the part weight decay
    shrinks), or None for a bias-only array; by default all rows but the last, as in a packed
    ``P_l = [W_l; b_l]``. The batched trainer's one flat array of every member's parameters
    (:class:`sweeper.models.packed.Layout`) takes ``lr`` per element and ``decay_mask``,
    1 on its weights and 0 on its biases, with ``weights=[Ellipsis]``.
    """

    def __init__(
        self,
        xp: Any,
        packed: list[Any],
        opt: Optimizer,
        lr: Any,
        weights: Sequence[Any] | None = None,
        decay_mask: np.ndarray | None = None,
    ):
        self.xp, self.P, self.opt = xp, packed, opt
        self.weights = [slice(-1)] * len(packed) if weights is None else list(weights)
        self.decay_mask = 1.0 if decay_mask is None else decay_mask
        dtype = packed[0].dtype
        self.tmp = (
            [xp.empty_like(p) for p in packed] if opt.name != "gd" or opt.weight_decay else []
        )
        self.buffers: list[Any] = []  # what carries over from step to step, per parameter
        if opt.name == "momentum":
            self.V = [xp.zeros_like(p) for p in packed]
            self.buffers = self.V
        if opt.name == "adam":
            self.m = [xp.zeros_like(p) for p in packed]
            self.v = [xp.zeros_like(p) for p in packed]
            self.buffers = self.m + self.v
            self.b1t, self.b2t, self.denom, self.factor = (
                xp.ones((), dtype=dtype) for _ in range(4)
            )
            # per member (or element) with an array lr
            self.step_size = xp.ones(np.shape(lr), dtype=dtype)
        # -lr (Adam's step size) and grad_scale(lr) · λ (weight decay), where the rule
        # uses them: gd and momentum carry the rate in the gradient (Optimizer.grad_scale)
        self.neg_lr = xp.empty(np.shape(lr), dtype=dtype) if opt.name == "adam" else None
        self.decay = xp.empty(np.shape(lr), dtype=dtype) if opt.weight_decay else None
        self.set_lr(lr)

    def set_lr(self, lr: Any) -> None:
        """New rates (host values) for the calls already built; a host→device copy,
        never inside an epoch. The decay's product in float64; each rounded once, to the
        parameters' dtype, by the assignment (-lr is exact in any)."""
        xp = self.xp
        if self.neg_lr is not None:
            self.neg_lr[...] = xp.asarray(-np.asarray(lr))
        if self.decay is not None:
            self.decay[...] = xp.asarray(
                np.asarray(self.opt.grad_scale(lr), dtype=np.float64)
                * self.opt.weight_decay
                * self.decay_mask
            )

    def calls(self, G: list[Any]) -> list[Call]:
        """The calls that apply the step ``G`` (as the backward pass left it) to the parameters."""
        xp, opt, P = self.xp, self.opt, self.P
        calls: list[Call] = []
        if opt.weight_decay:
            c = self.decay
            for p, g, t, w in zip(P, G, self.tmp, self.weights):
                if w is not None:
                    calls += [
                        partial(xp.multiply, p[w], c, t[w]),
                        partial(xp.add, g[w], t[w], g[w]),
                    ]
        if opt.name == "gd":
            return calls + [partial(xp.add, p, g, p) for p, g in zip(P, G)]
        if opt.name == "momentum":
            for p, g, v, t in zip(P, G, self.V, self.tmp):
                calls += [partial(xp.multiply, v, opt.momentum, v), partial(xp.add, v, g, v)]
                if opt.nesterov:
                    calls += [
                        partial(xp.multiply, v, opt.momentum, t),
                        partial(xp.add, t, g, t),
                        partial(xp.add, p, t, p),
                    ]
                else:
                    calls.append(partial(xp.add, p, v, p))
            return calls
        s, d, c = (
            self.step_size,
            self.denom,
            self.factor,
        )  # s ← -lr · (√(1 - β2^t) / (1 - β1^t)): one pass per lr
        calls += [
            partial(xp.multiply, self.b1t, opt.beta1, self.b1t),
            partial(xp.multiply, self.b2t, opt.beta2, self.b2t),
            partial(xp.subtract, 1.0, self.b2t, c),
            partial(xp.sqrt, c, c),
            partial(xp.subtract, 1.0, self.b1t, d),
            partial(xp.divide, c, d, c),
            partial(xp.multiply, self.neg_lr, c, s),
        ]
        for p, g, m, v, t in zip(P, G, self.m, self.v, self.tmp):
            calls += [
                partial(xp.multiply, m, opt.beta1, m),
                partial(xp.multiply, g, 1.0 - opt.beta1, t),
                partial(xp.add, m, t, m),
                partial(xp.multiply, v, opt.beta2, v),
                partial(xp.multiply, g, g, t),
                partial(xp.multiply, t, 1.0 - opt.beta2, t),
                partial(xp.add, v, t, v),
                partial(xp.sqrt, v, t),
                partial(xp.add, t, opt.eps, t),
                partial(xp.divide, m, t, t),
                partial(xp.multiply, t, s, t),
                partial(xp.add, p, t, p),
            ]
        return calls


_U64 = np.uint64
GOLDEN = 0x9E3779B97F4A7C15  # 2⁶⁴/φ: spreads the seeds
MIX = (
    (30, 0xBF58476D1CE4E5B9),
    (27, 0x94D049BB133111EB),
    (31, None),
)  # SplitMix64: z ^= z >> s; z *= c


class RowOrder:
    """Calls (:attr:`calls`) that write the next epoch's order of the rows ``0..n-1``
    into ``order`` (n,) in place; the first call gives epoch 0's."""

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
        self.calls: list[Call] = [
            partial(xp.multiply, self.epoch, _U64(n), self.offset),  # t·n
            partial(xp.add, self.base, self.offset, k),
            partial(xp.add, self.epoch, _U64(1), self.epoch),
        ]
        for shift, factor in MIX:
            self.calls += [
                partial(xp.right_shift, k, _U64(shift), scratch),
                partial(xp.bitwise_xor, k, scratch, k),
            ]
            if factor is not None:
                self.calls.append(partial(xp.multiply, k, _U64(factor), k))
        self.calls.append(self._sort)

    def _sort(self) -> None:
        self.xp.copyto(self.order, self.xp.argsort(self.keys))


def row_orders(n: int, seed: int, epochs: int) -> np.ndarray:
    """The first ``epochs`` orders :class:`RowOrder` gives, ``(epochs, n)``, on the host
    (for tests and readers)."""
    order = np.arange(n)
    rows = RowOrder(np, order, seed)
    out = np.empty((epochs, n), dtype=order.dtype)
    for t in range(epochs):
        for call in rows.calls:
            call()
        out[t] = order
    return out

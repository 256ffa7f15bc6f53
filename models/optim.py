"""The update rules of the fused epoch: gradient descent, momentum (optionally Nesterov) and Adam, plus L2
weight decay — each a flat list of in-place calls on state preallocated on the device.

The backward pass of :class:`sweeper.models.mlp.FullBatch` writes ``G_l = s · dJ/dP_l`` for the packed
parameters ``P_l = [W_l; b_l]``, with the factor ``s`` of :meth:`Optimizer.grad_scale` folded into the
loss gradient (backpropagation is linear in it): ``s = -lr`` for ``gd`` and ``momentum`` (so ``G_l`` is
the gradient step itself), ``s = 1`` for ``adam`` (which needs the raw gradient). Then, per step:

- weight decay ``λ`` (weights, not biases): the objective is ``J = L + (λ/2) Σ_l ||W_l||²``, so
  ``G_l[:-1] += s λ W_l`` (scikit-learn's ``alpha`` for a batch of ``n`` rows is ``λ n``);
- ``gd``:        ``P += G``
- ``momentum``:  ``V ← μ V + G``;  ``P += V``, or with ``nesterov`` ``P += μ V + G`` (scikit-learn's SGD)
- ``adam``:      ``m ← β1 m + (1-β1) G``, ``v ← β2 v + (1-β2) G²``,
                 ``P -= lr √(1-β2^t) / (1-β1^t) · m / (√v + ε)`` (scikit-learn's Adam, ``t`` = step).

Adam's step count lives on the device as ``β1^t`` and ``β2^t`` (0-d arrays multiplied each step), so the
step size needs no host value per step. ``gd`` keeps today's single add per layer: runs are unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Mapping

from sweeper.models.activations import Call

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
        return cls(**{k: get(k, v) for k, v in cls().__dict__.items() if k != "name"}, name=get("optimizer", "gd"))

    def grad_scale(self, lr: float) -> float:
        """The factor the backward pass folds into the gradient: ``-lr``, or 1 for Adam."""
        return 1.0 if self.name == "adam" else -lr


class State:
    """An optimizer's buffers for one model, allocated once (shared by every batch shape of a run)."""

    def __init__(self, xp: Any, packed: list[Any], opt: Optimizer, lr: float):
        self.xp, self.P, self.opt, self.lr = xp, packed, opt, lr
        self.tmp = [xp.empty_like(p) for p in packed] if opt.name != "gd" or opt.weight_decay else []
        if opt.name == "momentum":
            self.V = [xp.zeros_like(p) for p in packed]
        if opt.name == "adam":
            dtype = packed[0].dtype
            self.m = [xp.zeros_like(p) for p in packed]
            self.v = [xp.zeros_like(p) for p in packed]
            self.b1t, self.b2t, self.step_size, self.denom = (xp.ones((), dtype=dtype) for _ in range(4))

    def calls(self, G: list[Any]) -> list[Call]:
        """The calls that apply the step ``G`` (as the backward pass left it) to the parameters."""
        xp, opt, P = self.xp, self.opt, self.P
        calls: list[Call] = []
        if opt.weight_decay:
            c = opt.grad_scale(self.lr) * opt.weight_decay
            for p, g, t in zip(P, G, self.tmp):
                calls += [partial(xp.multiply, p[:-1], c, t[:-1]), partial(xp.add, g[:-1], t[:-1], g[:-1])]
        if opt.name == "gd":
            return calls + [partial(xp.add, p, g, p) for p, g in zip(P, G)]
        if opt.name == "momentum":
            for p, g, v, t in zip(P, G, self.V, self.tmp):
                calls += [partial(xp.multiply, v, opt.momentum, v), partial(xp.add, v, g, v)]
                if opt.nesterov:
                    calls += [partial(xp.multiply, v, opt.momentum, t), partial(xp.add, t, g, t), partial(xp.add, p, t, p)]
                else:
                    calls.append(partial(xp.add, p, v, p))
            return calls
        s, d = self.step_size, self.denom  # s ← -lr √(1 - β2^t) / (1 - β1^t)
        calls += [partial(xp.multiply, self.b1t, opt.beta1, self.b1t), partial(xp.multiply, self.b2t, opt.beta2, self.b2t),
                  partial(xp.subtract, 1.0, self.b2t, s), partial(xp.sqrt, s, s), partial(xp.multiply, s, -self.lr, s),
                  partial(xp.subtract, 1.0, self.b1t, d), partial(xp.divide, s, d, s)]
        for p, g, m, v, t in zip(P, G, self.m, self.v, self.tmp):
            calls += [partial(xp.multiply, m, opt.beta1, m), partial(xp.multiply, g, 1.0 - opt.beta1, t), partial(xp.add, m, t, m),
                      partial(xp.multiply, v, opt.beta2, v), partial(xp.multiply, g, g, t),
                      partial(xp.multiply, t, 1.0 - opt.beta2, t), partial(xp.add, v, t, v),
                      partial(xp.sqrt, v, t), partial(xp.add, t, opt.eps, t), partial(xp.divide, m, t, t),
                      partial(xp.multiply, t, s, t), partial(xp.add, p, t, p)]
        return calls

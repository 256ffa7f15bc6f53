"""A model of the interface (:mod:`sweeper.models.interface`) trained by sweeper's own loop
(:func:`sweeper.models.train.train`): the objects that loop asks a model for, built on
its ``forward`` and ``backward``.

:class:`Interfaced` holds a model object and its parameters on the device (a dict, in
``init``'s order); its ``full_batch`` / ``mini_batches`` give the step objects
:func:`~sweeper.models.train.train` drives (``forward``, ``loss``, ``backward_and_update``,
``epoch``, ``warm_up``), the MLP's :class:`~sweeper.models.mlp.FullBatch` and
:class:`~sweeper.models.mlp.MiniBatches` in the MLP's case. A step is::

    out, cache = model.forward(xp, params, X)         (n, k)
    dout = s · dL/d out                               s = -lr (gd, momentum) or 1 (adam):
                                                      models.optim
    grads = model.backward(xp, params, cache, dout)   copied into buffers the optimizer's calls
                                                      were built on
    P ← update(P, G)                                  models.optim.State (weight decay on
                                                      interface.decays)

Nothing here waits for the device or copies to the host.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sweeper.models import losses
from sweeper.models.interface import ModelError, decays
from sweeper.models.optim import Optimizer, State
from sweeper.models.optim import RowOrder


__all__ = ["Interfaced", "footprint", "init_host"]


def init_host(
    net: Any, n_in: int, n_out: int, seed: int, dtype: str, path: str = "the model"
) -> dict[str, np.ndarray]:
    """``net.init`` with NumPy's generator seeded by ``seed``, as arrays of ``dtype``
    (one line when it is not a dict of arrays)."""
    params = net.init(n_in, n_out, np.random.default_rng(seed))
    if not isinstance(params, dict) or not params:
        raise ModelError(
            f"{path}.init returned {type(params).__name__}: expected a non-empty dict of arrays"
        )
    try:
        return {str(k): np.asarray(v, dtype=dtype) for k, v in params.items()}
    except (TypeError, ValueError) as e:
        raise ModelError(
            f"{path}.init returned a value that is not an array of numbers ({e})"
        ) from None


def footprint(
    net: Any, n_in: int, n_out: int, X: np.ndarray, seed: int, dtype: str, path: str = "the model"
) -> tuple[int, int]:
    """What a model of the interface holds, measured rather than assumed: the bytes of
    the parameters ``init`` draws, and the bytes per row of one ``forward`` on the few
    rows of ``X`` (its output and the arrays its cache keeps, not counting the
    parameters themselves): ``(parameter bytes, activation bytes per row)``."""
    params = init_host(net, n_in, n_out, seed, dtype, path)
    out, cache = net.forward(np, params, np.asarray(X, dtype=dtype))
    own = {id(p) for p in params.values()}
    seen: set[int] = set()

    def size(obj: Any, depth: int = 0) -> int:
        if id(obj) in seen or depth > 4:
            return 0
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            return 0 if id(obj) in own or id(obj.base) in own else obj.nbytes
        if isinstance(obj, dict):
            obj = list(obj.values())
        if isinstance(obj, (list, tuple)):
            return sum(size(o, depth + 1) for o in obj)
        return 0

    return sum(p.nbytes for p in params.values()), -(-size((out, cache)) // max(1, len(X)))


class Interfaced:
    """A model object (``net``) with its parameters on the device, in the shape
    :func:`models.train.train` and :func:`sweeper.job.compute.evaluate` use (``packed``,
    ``params``, ``predict``, ``loss``)."""

    def __init__(
        self,
        xp: Any,
        net: Any,
        params: dict[str, Any],
        task: str,
        weight_decay: float = 0.0,
        n_out: int | None = None,
    ):
        self.xp, self.net, self.task, self.weight_decay, self.n_out = (
            xp,
            net,
            task,
            weight_decay,
            n_out,
        )
        self.names = list(params)
        self.dict = params
        # trained in place: the dict sees every update
        self.packed = [params[k] for k in self.names]
        self.params = self.packed

    def flops(self, n: int) -> float:
        return 2.0 * n * max(p.size for p in self.packed)

    def output(self, X: Any) -> Any:
        out, _ = self.net.forward(self.xp, self.dict, X)
        return self.shaped(out, X, "forward")

    def predict(self, X: Any) -> Any:
        """The task's prediction (n, k): the model's own ``predict`` hook when it has
        one, else sweeper's link."""
        own = getattr(self.net, "predict", None)
        if callable(own):
            return self.shaped(own(self.xp, self.dict, X), X, "predict")
        return losses.output(self.xp, self.task, self.output(X))

    def shaped(self, out: Any, X: Any, method: str) -> Any:
        """``out`` when it is ``(n, n_out)`` for ``n`` rows of ``X``; else one line
        naming it as ``python -m sweeper.check`` does (a wrong shape otherwise
        broadcasts into a NumPy error, or a silently wrong loss)."""
        want = (X.shape[0], self.n_out)
        if self.n_out is not None and tuple(getattr(out, "shape", ())) != want:
            raise ModelError(
                f"{type(self.net).__name__}.{method} gave out of shape "
                f"{tuple(getattr(out, 'shape', ()))}, "
                f"expected {want} (n_out={self.n_out}: one row per input row, one column "
                "per output; "
                "python -m sweeper.check names the same)"
            )
        return out

    def loss(self, X: Any, y: Any) -> Any:
        return losses.loss(self.xp, self.task, self.output(X), y)

    def weights(self) -> list[Any]:
        """Per parameter, the part weight decay shrinks (the whole array) or None."""
        return [
            slice(None) if decays(k, p.shape) else None for k, p in zip(self.names, self.packed)
        ]

    def full_batch(
        self,
        X: Any,
        y: Any,
        lr: float | None = None,
        parts: int = 1,
        pool: Any = None,
        opt: Optimizer | None = None,
        state: State | None = None,
    ) -> "Step":
        return Step(self, X, y, lr, opt, state)

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
    ) -> "MiniSteps":
        return MiniSteps(self, X, y, lr, batch_size, seed, opt, shuffle)


class Step:
    """One full-batch step of an :class:`Interfaced` model on ``X`` (n, d), ``y`` (n,
    1); without ``lr`` only the forward pass and the loss (the validation set)."""

    def __init__(
        self,
        model: Interfaced,
        X: Any,
        y: Any,
        lr: float | None = None,
        opt: Optimizer | None = None,
        state: State | None = None,
    ):
        self.m, self.X, self.y = model, X, y
        self.out = self.cache = None
        if lr is not None:
            opt = opt or Optimizer()
            self.scale = opt.grad_scale(lr)
            self.G = [model.xp.empty_like(p) for p in model.packed]
            self.state = state or State(model.xp, model.packed, opt, lr, model.weights())
            self.update_calls = self.state.calls(self.G)

    def forward(self) -> Any:
        self.out, self.cache = self.m.net.forward(self.m.xp, self.m.dict, self.X)
        return self.out

    def loss(self) -> Any:
        return losses.loss(self.m.xp, self.m.task, self.out, self.y)

    def gradients(self) -> None:
        """``G ← s · dJ/dP`` from the last :meth:`forward` (one line when ``backward``
        misses a parameter or a shape)."""
        m = self.m
        dout = losses.grad(m.xp, m.task, self.out, self.y) * self.scale
        grads = m.net.backward(m.xp, m.dict, self.cache, dout)
        for name, p, g in zip(m.names, m.packed, self.G):
            got = grads.get(name) if isinstance(grads, dict) else None
            if got is None or tuple(got.shape) != tuple(p.shape):
                what = "no gradient" if got is None else f"a gradient of shape {tuple(got.shape)}"
                raise ModelError(
                    f"{type(m.net).__name__}.backward gave {what} for {name} "
                    f"{tuple(p.shape)}: expected "
                    "a dict with one gradient per parameter, of its shape"
                )
            m.xp.copyto(g, got)

    def backward_and_update(self) -> None:
        self.gradients()
        for call in self.update_calls:
            call()

    def epoch(self) -> None:
        self.forward()
        self.backward_and_update()

    def warm_up(self) -> None:
        self.m.shaped(self.forward(), self.X, "forward")  # before its loss broadcasts a wrong shape
        self.loss()
        if hasattr(self, "G"):
            self.gradients()


class MiniSteps:
    """An epoch of mini-batch steps: the rows in an order drawn on the device each epoch
    from ``seed`` (:class:`~sweeper.models.optim.RowOrder`, as the MLP's
    :class:`~sweeper.models.mlp.MiniBatches`), ``batch_size`` rows a step, the optimizer
    state shared."""

    def __init__(
        self,
        model: Interfaced,
        X: Any,
        y: Any,
        lr: float,
        batch_size: int,
        seed: int,
        opt: Optimizer | None = None,
        shuffle: bool = True,
    ):
        xp = model.xp
        self.xp, self.X, self.y, self.shuffle = xp, X, y, shuffle
        self.n, self.b = X.shape[0], min(batch_size, X.shape[0])
        self.order = xp.arange(self.n)
        self.rows = RowOrder(xp, self.order, seed).calls if shuffle else []
        opt = opt or Optimizer()
        self.step = Step(model, X[: self.b], y[: self.b], lr, opt)

    def epoch(self) -> None:
        for call in self.rows:
            call()
        for start in range(0, self.n, self.b):
            rows = self.order[start : start + self.b]
            self.step.X, self.step.y = self.X[rows], self.y[rows]
            self.step.epoch()

    def warm_up(self) -> None:
        self.step.warm_up()

"""A group of configurations of one model shape trained together: the model's own batched
path when it has one (sweeper's MLP: :mod:`sweeper.models.batched`, its hand-tuned kernel),
else its parameters stacked over members (:mod:`sweeper.models.stacked`) once a one-step
proof shows that its code broadcasts. The launcher asks here and knows no model by name.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any, Callable, Sequence

import numpy as np

from sweeper.models import forms, layer_sizes, stacked
from sweeper.models.batched import Member, stacked_params, train_packed
from sweeper.models.generic import Interfaced
from sweeper.models.interface import instantiate, offer
from sweeper.models.mlp import MLP
from sweeper.models.optim import Optimizer
from sweeper.models.packed import Shape as Block

__all__ = ["MEMBER_KEYS", "form_tags", "per_member", "train_members"]

log = logging.getLogger("sweeper")

Shape = tuple[int, int, str]  # inputs, outputs, task

# The keys a group's members may differ in, beside epochs (a trajectory's counts) and
# those every member shares (sweeper.sweep.groups.SHARED): the MLP's kernel takes each
# member's learning rate, seed, patience and split; a model of the interface stacked
# (models.stacked) each member's learning rate and seed only.
MEMBER_KEYS = ("lr", "seed", "patience", "data.split_seed")


def per_member(model_cfg: Any) -> tuple[str, ...]:
    """Which of :data:`MEMBER_KEYS` the group path of this model trains per member; the others its
    members share (or a member trains apart), so that each member trains as it would alone."""
    return MEMBER_KEYS if offer(model_cfg).fast_path else ("lr", "seed")


def form_tags(backend: Any, plain: dict[str, Any]) -> dict[str, str]:
    """sweeper's MLP: the form this process computes its activation in
    (:mod:`sweeper.models.forms`), as a run's tag."""

    return (
        {forms.TAG: forms.tag(backend.xp, plain["activation"], plain["dtype"])}
        if offer(plain.get("model")).fast_path
        else {}
    )


def train_members(
    backend: Any,
    cfg0: dict[str, Any],
    shape: Shape,
    heads: Sequence[dict[str, Any]],
    counts: Sequence[tuple[int, ...]],
    arrays: list[Any],
    t_h2d: float,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Any, float, list[Callable[[Any], Any]]] | None:
    """Train the members (each trajectory's longest configuration ``heads[i]``, read at
    its epoch ``counts[i]``) on the device arrays ``arrays`` (X, y, X_val, y_val):
    ``(fit, host→device seconds since t_h2d, models_of)`` where
    ``fit.at[i][count] = (TrainResult, parameters)`` and ``models_of[i](parameters)`` is
    a model to score; None when the model does not batch (said in one line; the reason
    is kept for the runs' tags). sweeper's MLP trains heads of several shapes (depth,
    width, activation) as one packed group."""
    if offer(cfg0.get("model")).fast_path:  # its own batched kernel
        return _mlp(backend, cfg0, shape, heads, counts, arrays, t_h2d, progress)
    return _stacked(backend, cfg0, shape, heads, counts, arrays, t_h2d)


def _mlp(
    backend: Any,
    cfg0: dict[str, Any],
    shape: Shape,
    heads: Sequence[dict[str, Any]],
    counts: Sequence[tuple[int, ...]],
    arrays: list[Any],
    t_h2d: float,
    progress: Any,
) -> tuple[Any, float, Any]:
    """sweeper's MLP: its own batched kernel (:func:`sweeper.models.batched.train_packed`), the
    heads of one shape (depth, width, activation) a block, several shapes a packed group."""

    n_in, n_out, task = shape
    opt = Optimizer.from_config(cfg0)
    blocks: dict[Block, list[int]] = {}  # each shape's heads, in the order the shapes come
    for i, h in enumerate(heads):
        blocks.setdefault(
            Block(tuple(layer_sizes(n_in, h["depth"], h["width"], n_out)), h["activation"]), []
        ).append(i)
    order = [i for idx in blocks.values() for i in idx]
    group = [
        Member(
            heads[i]["lr"], heads[i]["epochs"], heads[i]["patience"], heads[i]["seed"], counts[i]
        )
        for i in order
    ]
    shaped = [
        (
            b,
            stacked_params(
                list(b.sizes), b.activation, [heads[i]["seed"] for i in idx], cfg0["dtype"]
            ),
        )
        for b, idx in blocks.items()
    ]
    h2d = backend.clock() - t_h2d
    fit = train_packed(
        backend,
        shaped,
        task,
        *arrays,
        group,
        log_every=cfg0["log_every"],
        progress=progress,
        opt=opt,
        batch_size=cfg0["batch_size"],
    )
    back = np.argsort(order)  # the heads' order again
    fit.fits, fit.params, fit.at = (
        [fit.fits[j] for j in back],
        [fit.params[j] for j in back],
        [fit.at[j] for j in back],
    )

    def model_of(activation: str, member_params: list[np.ndarray]) -> MLP:
        return MLP(
            backend.xp,
            [backend.to_device(p) for p in member_params],
            activation,
            task,
            opt.weight_decay,
        )

    return fit, h2d, [partial(model_of, h["activation"]) for h in heads]


def _stacked(
    backend: Any,
    cfg0: dict[str, Any],
    shape: Shape,
    heads: Sequence[dict[str, Any]],
    counts: Sequence[tuple[int, ...]],
    arrays: list[Any],
    t_h2d: float,
) -> tuple[Any, float, Any] | None:
    """A model of the interface, stacked over members when :func:`sweeper.models.stacked.batches`
    proves that its code broadcasts (once per shape in this process)."""

    net, (n_in, n_out, task) = instantiate(cfg0["model"]), shape
    # what the group's settings forbid (shared by its members), then the proof, once per
    # model and shape: the proof's verdict alone is kept, by everything that decides it
    reason = stacked.why_not(cfg0) or (
        None if arrays[0].ndim == 2 else "members with their own data split train one at a time"
    )
    if reason is None:
        key = stacked.shape_key(cfg0["model"], n_in, n_out, task)
        verdicts = stacked.verdicts()
        if key not in verdicts:
            verdicts[key] = stacked.batches(net, n_in, n_out, task)
        reason = verdicts[key]
    if reason is not None:
        log.info(
            "%s does not batch (%s): its %d configurations train one at a time",
            cfg0["model"]["_target_"],
            reason,
            sum(map(len, counts)),
        )
        return None
    group = [stacked.Member(h["lr"], h["seed"], c) for h, c in zip(heads, counts)]
    h2d = backend.clock() - t_h2d
    opt = Optimizer.from_config(cfg0)
    fit = stacked.train_stacked(
        backend,
        net,
        task,
        *arrays,
        group,
        n_out=n_out,
        log_every=cfg0["log_every"],
        opt=opt,
        dtype=cfg0["dtype"],
    )

    def model_of(member_params: dict[str, np.ndarray]) -> Interfaced:
        return Interfaced(
            backend.xp,
            net,
            {k: backend.to_device(v) for k, v in member_params.items()},
            task,
            opt.weight_decay,
            n_out,
        )

    return fit, h2d, [model_of] * len(heads)

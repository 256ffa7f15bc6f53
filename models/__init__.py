"""models/: the networks, their losses and activations, and gradient descent — written
once against ``xp``."""

from __future__ import annotations

from typing import Any

from sweeper.models.interface import Model, ModelError, instantiate, offer
from sweeper.models.mlp import MLP, init_params
from sweeper.models.mlp_net import MLPNet
from sweeper.models.train import TrainResult, train

__all__ = [
    "MLP",
    "MLPNet",
    "Model",
    "ModelError",
    "TrainResult",
    "build",
    "init_params",
    "layer_sizes",
    "train",
]


def layer_sizes(n_features: int, depth: int, width: int, n_outputs: int = 1) -> list[int]:
    """The widths of a network's layers, inputs first: ``[d, width × depth, outputs]``."""
    return [n_features] + [width] * depth + [n_outputs]


def build(cfg: Any, n_features: int, task: str, backend: Any, n_outputs: int = 1) -> Any:
    """The model of ``cfg`` for a data set with ``n_outputs`` outputs (the classes of a multi-class
    task, else 1), its parameters on the device: sweeper's MLP (depth, width, activation, dtype,
    seed, weight_decay) with its fused kernels, or a model of the interface (``cfg.model``,
    :mod:`sweeper.models.interface`) in :class:`~sweeper.models.generic.Interfaced`.

    Parameters are drawn on the host with NumPy's generator seeded by ``cfg.seed`` and
    then copied, so every device starts from the same parameters.
    """

    model_cfg = cfg.get("model") if hasattr(cfg, "get") else getattr(cfg, "model", None)
    if not offer(model_cfg).fast_path:
        # lazy: saves ~5.9 ms at this module's import (measured)
        from sweeper.models.generic import Interfaced, init_host

        net = instantiate(model_cfg)
        host = init_host(
            net, n_features, n_outputs, cfg.seed, cfg.dtype, str(model_cfg["_target_"])
        )
        return Interfaced(
            backend.xp,
            net,
            {k: backend.to_device(v) for k, v in host.items()},
            task,
            getattr(cfg, "weight_decay", 0.0),
            n_outputs,
        )
    sizes = layer_sizes(n_features, cfg.depth, cfg.width, n_outputs)
    host = init_params(sizes, cfg.activation, cfg.seed, cfg.dtype)
    return MLP(
        backend.xp,
        [backend.to_device(p) for p in host],
        cfg.activation,
        task,
        getattr(cfg, "weight_decay", 0.0),
    )

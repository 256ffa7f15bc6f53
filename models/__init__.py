"""models/: the networks, their losses and activations, and gradient descent — written once against ``xp``."""
from __future__ import annotations

from typing import Any

from sweeper.models.mlp import MLP, init_params
from sweeper.models.train import TrainResult, train

__all__ = ["MLP", "TrainResult", "build", "init_params", "layer_sizes", "train"]


def layer_sizes(n_features: int, depth: int, width: int, n_outputs: int = 1) -> list[int]:
    """The widths of a network's layers, inputs first: ``[d, width × depth, outputs]``."""
    return [n_features] + [width] * depth + [n_outputs]


def build(cfg: Any, n_features: int, task: str, backend: Any, n_outputs: int = 1) -> MLP:
    """The MLP of ``cfg`` (depth, width, activation, dtype, seed, weight_decay) for a data set with
    ``n_outputs`` outputs (the classes of a multi-class task, else 1), its weights on the device.

    Weights are drawn on the host with NumPy's generator seeded by ``cfg.seed`` and then copied, so
    every device starts from the same parameters.
    """
    sizes = layer_sizes(n_features, cfg.depth, cfg.width, n_outputs)
    host = init_params(sizes, cfg.activation, cfg.seed, cfg.dtype)
    return MLP(backend.xp, [backend.to_device(p) for p in host], cfg.activation, task,
               getattr(cfg, "weight_decay", 0.0))

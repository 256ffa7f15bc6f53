"""The ``model`` section of a config: sweeper's MLP (conf/model/mlp.yaml), or a class of the model interface
(:mod:`sweeper.models.interface`) named by ``model._target_`` with its hyperparameters as ``model.<name>``."""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from omegaconf import OmegaConf

from sweeper.models.interface import ModelError, check_class, check_trainer, is_mlp, is_trainer, load_target, split


def check_model(model: Any) -> None:
    """Sweeper's MLP, or a class of the model interface that imports, has its three methods and takes the given
    hyperparameters: :class:`ModelError` (one line naming what is wrong) otherwise. Imports the user's module."""
    if model is None:
        return
    if not isinstance(model, Mapping) and not OmegaConf.is_dict(model):
        raise ModelError(f"model={model} is not allowed: expected a model section with _target_ (model=mlp, or "
                         "model._target_=my_nets.Net)")
    if is_mlp(model):
        extra = sorted(k for k in model if k != "_target_")
        if extra:
            raise ModelError(f"model.{extra[0]} is not a key of sweeper's MLP: its hyperparameters are the top-level "
                             "depth, width and activation (write depth=2, not model.depth=2)")
        return
    path, kwargs = split(model)
    target = load_target(path)
    (check_trainer if is_trainer(target) else check_class)(target, path, kwargs)


_MODEL_KEY = re.compile(r"^model\.(?!_target_=)[A-Za-z_][\w.]*=")


def model_overrides(args: list[str]) -> list[str]:
    """``model.hidden=32`` as ``++model.hidden=32``: a model's hyperparameters are its constructor's keyword
    arguments, which conf/model/mlp.yaml (or the user's model yaml) need not list; the config's validation checks
    them against the class. Every other argument is returned as it is."""
    return ["++" + a if _MODEL_KEY.match(a) else a for a in args]

"""The ``model`` section of a config: sweeper's MLP (conf/model/mlp.yaml), or a class of the model interface
(:mod:`sweeper.models.interface`) named by ``model._target_`` with its hyperparameters as ``model.<name>``."""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from omegaconf import OmegaConf

from sweeper.models.interface import (MLP_TARGET, ModelError, check_class, check_trainer, is_mlp, is_trainer,
                                      load_target, split)


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
        if "check" in extra:
            raise ModelError(f"model.check={model['check']} is not allowed with sweeper's MLP: its gradients are "
                             "sweeper's own (held to finite differences by its test suite); model.check applies to "
                             "a model of yours")
        if extra:
            raise ModelError(f"model.{extra[0]} is not a key of sweeper's MLP: its hyperparameters are the top-level "
                             "depth, width and activation (write depth=2, not model.depth=2)")
        return
    path, kwargs = split(model)
    target = load_target(path)
    if "check" in model and is_trainer(target):
        raise ModelError(f"model.check={model['check']} is not allowed with {path}: a function trainer computes its "
                         "own updates, with no gradients for sweeper to check")
    if "check" in model and not isinstance(model["check"], bool):
        raise ModelError(f"model.check={model['check']} is not allowed: expected true or false (false: a model whose "
                         "gradient check fails trains anyway, its runs tagged gradient_check=failed)")
    (check_trainer if is_trainer(target) else check_class)(target, path, kwargs)


def gradient_check(model: Any, n_in: int, n_out: int, task: str) -> tuple[str | None, dict[str, str]]:
    """The gradient check of a model of the interface at a data set's shape (:func:`sweeper.models.gradcheck.verdict`:
    once per model source, hyperparameters and shape): ``(refusal, tags)``. ``refusal`` is the one line that refuses
    a sweep when the check failed and ``model.check`` is not false (else None); ``tags`` the run's
    ``gradient_check`` (``passed`` or ``failed``) and, when failed, ``gradient_check_detail``. Nothing for
    sweeper's MLP or a function trainer."""
    from sweeper.models import gradcheck
    from sweeper.models.interface import check_on, kind

    if kind(model) != "model":
        return None, {}
    got = gradcheck.verdict(model, n_in, n_out, task)
    if got.ok:
        return None, {"gradient_check": "passed"}
    tags = {"gradient_check": "failed", "gradient_check_detail": got.detail()}
    if not check_on(model):
        return None, tags
    path, kwargs = split(model)
    shape = f"n_in={n_in}, n_out={n_out}"
    what = (f"the gradient of {got.worst[0]} is wrong (worst relative error {got.worst[1]:.2g} against finite "
            f"differences, allowed {gradcheck.FD_RTOL:g}; {shape})" if got.problem is None and got.worst else
            f"its gradients cannot be checked ({got.problem}; {shape})")
    return (f"model._target_={path}: {what}: {check_command(path, kwargs)} shows the whole check; model.check=false "
            "trains it anyway (its runs tagged gradient_check=failed)"), tags


def check_command(path: str, kwargs: dict[str, Any]) -> str:
    """The command that runs the whole check of a model with these hyperparameters."""
    import shlex

    def value(v: Any) -> str:
        return "true" if v is True else "false" if v is False else "null" if v is None else str(v)

    return shlex.join(["python", "-m", "sweeper.check", path, *(f"{k}={value(v)}" for k, v in kwargs.items())])


# The model section's own keys (beside a model's hyperparameters, model.<name>): key -> (default, allowed, meaning);
# python -m sweeper --help and the configuration reference show them.
MODEL_KEYS = {
    "_target_": (MLP_TARGET, "an import path (module.Name or module:Name)",
                 "the network trained: sweeper's MLP (its hyperparameters are the top-level depth, width, activation), "
                 "a class of yours with init/forward/backward (model.<name>: its constructor's keyword arguments), or "
                 "a function trainer fit(data, report, *, lr, epochs, seed, ...)"),
    "check": ("true", "true or false",
              "a class of yours: its gradients are checked against finite differences before it trains, and a "
              "failed check refuses the sweep; false trains it anyway, each run tagged gradient_check=failed"),
}


_MODEL_KEY = re.compile(r"^model\.(?!_target_=)[A-Za-z_][\w.]*=")


def model_overrides(args: list[str]) -> list[str]:
    """``model.hidden=32`` as ``++model.hidden=32``: a model's hyperparameters are its constructor's keyword
    arguments, which conf/model/mlp.yaml (or the user's model yaml) need not list; the config's validation checks
    them against the class. Every other argument is returned as it is."""
    return ["++" + a if _MODEL_KEY.match(a) else a for a in args]


"""The ``model`` section of a config: sweeper's MLP (conf/model/mlp.yaml), or a class of
the model interface (:mod:`sweeper.models.interface`) named by ``model._target_`` with
its hyperparameters as ``model.<name>``."""

from __future__ import annotations

import functools
import inspect
import logging
import re
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from omegaconf import OmegaConf

from sweeper import CONF_DIR
from sweeper.base import state
from sweeper.models.interface import (
    ModelError,
    check_class,
    check_trainer,
    is_trainer,
    load_target,
    loaded,
    offer,
    parameters,
    split,
)
from sweeper.models.interface import (
    GIVEN,
    check_on,
    home,
    hyperparameters,
    kind,
    source_digest,
    top_level_keys,
)


__all__ = [
    "MODEL_KEYS",
    "check_command",
    "check_model",
    "gradient_check",
    "model_overrides",
    "reach",
    "trainer_keys",
    "where_tags",
]


def check_model(model: Any, cfg: Any = None) -> None:
    """Sweeper's MLP, or a class of the model interface that imports, has its three methods and
    takes the given hyperparameters: :class:`ModelError` (one line naming what is wrong)
    otherwise. Imports the user's module. With the whole config ``cfg``: a top-level key set
    away from its default that this model would ignore is refused too (:func:`ignored_key`)."""
    if model is None:
        return
    if cfg is not None:
        reach(cfg)  # a pin of a model of yours: where its module lives
    _check_section(model)
    problem = ignored_key(model, cfg) if cfg is not None else None
    if problem:
        raise ModelError(problem)


def _check_section(model: Any) -> None:
    if not isinstance(model, Mapping) and not OmegaConf.is_dict(model):
        raise ModelError(
            f"model={model} is not allowed: expected a model section with _target_ (model=mlp, or "
            "model._target_=my_nets.Net)"
        )
    offers = offer(model)
    # its hyperparameters are top-level keys (sweeper's MLP): its section holds nothing else
    if offers.top_level:
        extra = sorted(k for k in model if k != "_target_")
        if "check" in extra and offers.fast_path:
            raise ModelError(
                f"model.check={model['check']} is not allowed with sweeper's MLP: its gradients "
                "are "
                "sweeper's own (held to finite differences by its test suite); model.check "
                "applies to "
                "a model of yours"
            )
        if extra:
            top = offers.top_level
            raise ModelError(
                f"model.{extra[0]} is not a key of {_named(offers)}: its hyperparameters are the "
                "top-level "
                f"{', '.join(top)} (write {top[0]}=VALUE, not model.{top[0]}=VALUE)"
            )
        return
    path, kwargs = split(model)
    target = load_target(path)
    if "check" in model and is_trainer(target):
        raise ModelError(
            f"model.check={model['check']} is not allowed with {path}: a function trainer "
            "computes its "
            "own updates, with no gradients for sweeper to check"
        )
    if "check" in model and not isinstance(model["check"], bool):
        raise ModelError(
            f"model.check={model['check']} is not allowed: expected true or false (false: a "
            "model whose "
            "gradient check fails trains anyway, its runs tagged gradient_check=failed)"
        )
    (check_trainer if is_trainer(target) else check_class)(target, path, kwargs)


def where_tags(model: Any) -> dict[str, str]:
    """Where a model of yours (a class or a function trainer) imports from and its
    source's digest: the run's ``model_dir`` and ``model_source`` tags,
    which ``python -m sweeper.promote`` writes into a pin (``pinned.model_dir``,
    ``pinned.model_source``) so that it re-runs without PYTHONPATH (:func:`reach`)."""

    target = load_target(split(model)[0])
    out = {"model_dir": home(target), "model_source": source_digest(target)}
    return {k: v for k, v in out.items() if v}


def reach(cfg: Any) -> None:
    """A pin of a model of yours (``pinned.model_dir``): its folder joins ``sys.path`` (at the end:
    a module of that name nearer the command still wins), so the pin re-runs from any folder without
    PYTHONPATH; a source that differs from the pinned one (``pinned.model_source``) is said once."""

    pins = cfg.get("pinned") if hasattr(cfg, "get") else None
    folder = pins.get("model_dir") if hasattr(pins, "get") else None
    if not folder:
        return
    if folder not in sys.path and Path(folder).is_dir():
        sys.path.append(str(folder))
    want = pins.get("model_source")  # a pin of sweeper's own model has none
    model = cfg.get("model")
    if not want or model is None:
        return

    target, error = loaded(split(model)[0])
    if error is not None:
        return
    got = source_digest(target)
    key = f"{split(model)[0]}:{got}"
    said = state.process().sources_said
    if got and got != want and key not in said:
        said.add(key)
        logging.getLogger("sweeper").warning(
            "%s: its source differs from the one pinned (%s, not %s): a changed model may score "
            "otherwise",
            split(model)[0],
            got,
            want,
        )


# sweeper's own training loop's keys: a function trainer runs its own loop, and receives
# one of them only when its signature names it (sweeper.job.trainer); lr, epochs and
# seed it always receives (interface.GIVEN).
TRAINER_KEYS = (
    "optimizer",
    "momentum",
    "nesterov",
    "beta1",
    "beta2",
    "eps",
    "batch_size",
    "weight_decay",
    "patience",
    "log_every",
    "sync_every_epoch",
)
# ... of which sweeper applies these to any function trainer itself, through report()'s
# answer (sweeper.job.trainer.Stop)
BY_REPORT = ("patience",)


def trainer_keys(fn: Any) -> tuple[str, ...]:
    """The keys of sweeper's training loop (:data:`TRAINER_KEYS`) that a function trainer's
    signature names: it receives them as keyword arguments, beside lr, epochs and seed."""

    named = {p.name: p.kind for p in parameters(fn) or ()}
    return tuple(
        k
        for k in TRAINER_KEYS
        if named.get(k) in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    )


def ignored_key(model: Any, cfg: Any) -> str | None:
    """The one line for the first top-level key of ``cfg`` set away from its default
    (conf/config.yaml) that the model of ``model`` would ignore: the MLP's hyperparameters
    (depth, width, activation) with another model, and sweeper's training-loop keys with a
    function trainer whose signature does not name them. None: every key set does something."""

    if offer(model).top_level:
        return None
    mlp_keys = top_level_keys()  # the default model's own (sweeper's MLP: depth, width, activation)
    path, _ = split(model)
    target = load_target(path)
    defaults = top_defaults()
    changed = [k for k in cfg if k in defaults and not _same(cfg[k], defaults[k])]
    for k in changed:
        if k in mlp_keys:
            own = ", ".join(f"model.{n}" for n in _own_names(target)) or "none"
            return (
                f"{k}={cfg[k]} does nothing with {path}: {', '.join(mlp_keys[:-1])} and "
                f"{mlp_keys[-1]} are "
                f"{_named(offer(None))}'s hyperparameters; {path}'s are {own} (model.NAME=VALUE)"
            )
    if not is_trainer(target):
        return None
    takes = trainer_keys(target)
    for k in changed:
        if k in TRAINER_KEYS and k not in takes and k not in BY_REPORT:
            return (
                f"{k}={cfg[k]} does nothing with {path}: a function trainer runs its own loop "
                "and receives lr, "
                "epochs, seed, its model.NAME hyperparameters and, of sweeper's training keys, "
                "only those its "
                f"signature names ({', '.join(takes) or 'none'}): add {k} to its keyword "
                "arguments to receive it "
                "(patience applies to any: report() answers False where it would stop)"
            )
    return None


def _own_names(target: Any) -> list[str]:
    return [n for n in hyperparameters(target) if n not in GIVEN and n not in ("data", "report")]


def _same(value: Any, default: Any) -> bool:
    return value == default and isinstance(value, bool) == isinstance(default, bool)


@functools.cache
def top_defaults() -> dict[str, Any]:
    """conf/config.yaml's top-level values (the defaults a command line changes)."""
    cfg = OmegaConf.load(CONF_DIR / "config.yaml")
    return {
        k: cfg[k] for k in cfg if k not in ("defaults", "hydra") and not OmegaConf.is_config(cfg[k])
    }


def _named(offers: Any) -> str:
    """A model in words: sweeper's MLP (a model with sweeper's own kernels), else its
    import path."""
    return "sweeper's MLP" if offers.fast_path else offers.path


def gradient_check(
    model: Any, n_in: int, n_out: int, task: str
) -> tuple[str | None, dict[str, str]]:
    """The gradient check of a model of the interface at a data set's shape
    (:func:`sweeper.models.gradcheck.verdict`: once per model source, hyperparameters
    and shape): ``(refusal, tags)``. ``refusal`` is the one line that refuses a sweep
    when the check failed and ``model.check`` is not false (else None); ``tags`` the
    run's ``gradient_check`` (``passed`` or ``failed``) and, when failed,
    ``gradient_check_detail``. Nothing for sweeper's MLP or a function trainer."""
    # lazy: saves ~10 ms at this module's import (measured)
    from sweeper.models import gradcheck

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
    what = (
        f"the gradient of {got.worst[0]} is wrong (worst relative error {got.worst[1]:.2g} "
        "against finite "
        f"differences, allowed {gradcheck.FD_RTOL:g}; {shape})"
        if got.problem is None and got.worst
        else f"its gradients cannot be checked ({got.problem}; {shape})"
    )
    return (
        f"model._target_={path}: {what}: {check_command(path, kwargs)} shows the whole check; "
        "model.check=false "
        "trains it anyway (its runs tagged gradient_check=failed)"
    ), tags


def check_command(path: str, kwargs: dict[str, Any]) -> str:
    """The command that runs the whole check of a model with these hyperparameters."""

    def value(v: Any) -> str:
        return "true" if v is True else "false" if v is False else "null" if v is None else str(v)

    return shlex.join(
        ["python", "-m", "sweeper.check", path, *(f"{k}={value(v)}" for k, v in kwargs.items())]
    )


# The model section's own keys (beside a model's hyperparameters, model.<name>): key -> (default,
# allowed, meaning); python -m sweeper --help and the configuration reference show them.
MODEL_KEYS = MappingProxyType(
    {
        "_target_": (
            str(OmegaConf.load(CONF_DIR / "model" / "mlp.yaml")["_target_"]),
            "an import path (module.Name or module:Name)",
            "the network trained: sweeper's MLP (its hyperparameters are the top-level depth, "
            "width, activation), "
            "a class of yours with init/forward/backward (model.<name>: its constructor's keyword "
            "arguments), or "
            "a function trainer fit(data, report, *, lr, epochs, seed, ...)",
        ),
        "check": (
            "true",
            "true or false",
            "a class of yours: its gradients are checked against finite differences before it "
            "trains, and a "
            "failed check refuses the sweep; false trains it anyway, each run tagged "
            "gradient_check=failed",
        ),
    }
)


_MODEL_KEY = re.compile(r"^model\.(?!_target_=)[A-Za-z_][\w.]*=")


def model_overrides(args: list[str]) -> list[str]:
    """``model.hidden=32`` as ``++model.hidden=32``: a model's hyperparameters are its constructor's
    keyword arguments, which conf/model/mlp.yaml (or the user's model yaml) need not list; the
    config's validation checks them against the class. Every other argument is returned as it is."""
    return ["++" + a if _MODEL_KEY.match(a) else a for a in args]

"""The model contract: what a from-scratch network must give sweeper, and how sweeper finds it.

A model is any class. sweeper instantiates it with its hyperparameters as keyword
arguments (the config's ``model.<name>`` keys; ``model._target_`` is its import path,
``my_nets.TwoLayerNet``) and calls three methods::

    init(n_in, n_out, rng) -> dict[str, ndarray]
        The initial parameters, on the host, drawn from ``rng`` (a
        ``numpy.random.Generator`` seeded by the run's ``seed``; sweeper moves them to
        the device, so a CPU and a GPU run start identical).
    forward(xp, params, X) -> (out, cache)
        ``X`` (n, n_in) on the device (``xp`` is ``numpy`` or ``cupy``); ``out`` (n,
        n_out): predictions for a regression, logits for a classification (sweeper owns
        the loss and the link: MSE; sigmoid + binary cross-entropy;
        softmax + cross-entropy). ``cache`` is anything ``backward`` needs.
    backward(xp, params, cache, dout) -> dict[str, array]
        The gradient of the loss with respect to each parameter,
        given ``dout = dL/d out`` (n, n_out).

Everything else — optimizers, weight decay (on every parameter of two or more axes whose first
axis is not 1, i.e. not on a ``(1, m)`` bias), mini-batches, the epoch loop, loss sampling, early
stopping, divergence, devices, timing, records — is sweeper's and the same for every model.

**Batched for free.** Parameters stacked over a leading member axis, ``(K, *shape)``, go
through the same ``forward``/``backward`` when the code broadcasts: ``X @ W``
(``(n, d) @ (K, d, h) → (K, n, h)``), elementwise ops, ``A.swapaxes(-1, -2) @ dZ`` (not
``A.T``) and ``dZ.sum(axis=-2, keepdims=True)`` (not ``axis=0``). sweeper proves it once
per shape (:func:`sweeper.models.stacked.batches`) before training K configurations as
one group, and otherwise trains them one at a time, saying so.

Optional hooks a model may define: ``predict(xp, params, X)`` (its own output in the task's
units; by default sweeper's link on ``forward``'s ``out``). What else a model offers,
sweeper reads off its class (:class:`Offer`, :func:`offer`) instead of knowing it by name —
the attributes the class declares itself (a subclass that overrides ``forward`` declares
none, and trains through the interface): ``fast_path = True`` (sweeper's own fused kernels
compute exactly this model: :mod:`sweeper.models.mlp`, :mod:`sweeper.models.batched`;
sweeper's MLP alone), ``top_level = (...)`` (its hyperparameters are the
config's top-level keys: the MLP's ``depth``, ``width``, ``activation``), ``linear = {...}``
(the values that make it linear: the MLP's ``depth=0``).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

import numpy as np

from sweeper.base import state
from sweeper.base.fmt import near
from sweeper.models.usercode import attempt, call_user, raised

# A model author's surface (sweeper.models re-exports Model and ModelError); the rest
# serves sweeper itself.
# the user's contract: Model, ModelError, Offer, offer (sweeper.models); the rest is what the
# job, the checks, the launcher and the tests read here
__all__ = [
    "GIVEN",
    "MLP_TARGET",
    "Model",
    "ModelError",
    "Offer",
    "check_class",
    "check_on",
    "check_trainer",
    "decays",
    "described",
    "domain",
    "home",
    "hyperparameters",
    "instantiate",
    "is_trainer",
    "kind",
    "load_target",
    "loaded",
    "offer",
    "parameters",
    "source_digest",
    "split",
    "top_level_keys",
]


REQUIRED = ("init", "forward", "backward")
# The default model, when a config has no model section (one from before the group):
# conf/model/mlp.yaml's.
MLP_TARGET = "sweeper.models.MLPNet"
# What a config's model section holds besides the hyperparameters: the import path, and
# whether a failed gradient check refuses the sweep (model.check=false: it trains
# anyway, its runs tagged gradient_check=failed).
RESERVED = ("_target_", "check")


@runtime_checkable
class Model(Protocol):
    """What sweeper calls on a model (numpydoc shapes: ``n`` rows, ``d`` inputs, ``k`` outputs)."""

    def init(self, n_in: int, n_out: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Initial parameters on the host, e.g. ``{"W1": (d, h), "b1": (1, h), ...}``."""

    def forward(self, xp: Any, params: dict[str, Any], X: Any) -> tuple[Any, Any]:
        """``X`` (n, d) → ``(out, cache)``, ``out`` of shape (n, k)."""

    def backward(self, xp: Any, params: dict[str, Any], cache: Any, dout: Any) -> dict[str, Any]:
        """``dout = dL/d out`` (n, k) → ``{name: dL/d params[name]}``, each of its
        parameter's shape."""


# what a module lacking an attribute gives (getattr's default): a user's None is an attribute
_NOTHING = object()


class ModelError(ValueError):
    """A model that cannot be used (unimportable, a missing method, an unknown
    hyperparameter); one line."""


def loaded(path: str) -> tuple[Any, ModelError | None]:
    """:func:`load_target`'s object and None, or None and its ModelError: the one place that
    error is a value, for a caller that goes on without the model (:func:`offer` quiet, a
    pin's source check, the advisor's domain of a key, ``--help``'s model keys)."""
    try:
        return load_target(path), None
    except ModelError as e:
        return None, e


def load_target(path: str, key: str = "model._target_") -> Any:
    """The object an import path names: ``pkg.mod.Name`` or ``pkg.mod:Name`` (one line
    when it cannot be had)."""
    if not isinstance(path, str) or not path.strip():
        raise ModelError(
            f"{key}={path!r} is not allowed: expected an import path such as my_nets.TwoLayerNet"
        )
    module_name, sep, name = path.partition(":")
    if not sep:
        module_name, _, name = path.rpartition(".")
    if not module_name or not name:
        raise ModelError(
            f"{key}={path} is not allowed: expected an import path such as my_nets.TwoLayerNet "
            "(a module importable from the working directory or PYTHONPATH, then the class)"
        )
    try:
        # a module that exits on import: refused, not our end
        module = call_user(importlib.import_module, module_name)
    except ImportError as e:
        raise ModelError(
            f"{key}={path} cannot be imported ({type(e).__name__}: {e}): expected a module "
            "importable from the working directory or PYTHONPATH"
        ) from None
    # the user's module raised while importing, or tried to end the process: say which and what
    except Exception as e:  # noqa: BLE001
        raise ModelError(f"{key}={path}: {raised(f'importing {module_name}', e)}") from None
    target = getattr(module, name, _NOTHING)
    if target is _NOTHING:
        public = [n for n in vars(module) if not n.startswith("_")]
        raise ModelError(
            f"{key}={path} cannot be imported: module {module_name} has no "
            f"{name}{near(name, public, module_name + '.')}"
        )
    return target


def source_digest(obj: Any) -> str | None:
    """A digest of the source of every module a class and its base classes come from (a function:
    its module); None when one has no source file (a class typed into a notebook)."""

    h = hashlib.sha256()
    seen = set()
    for c in inspect.getmro(obj) if inspect.isclass(obj) else (obj,):
        mod = sys.modules.get(getattr(c, "__module__", "") or "")
        if c is object or mod is None or mod.__name__ in seen or mod.__name__ == "builtins":
            continue
        seen.add(mod.__name__)
        file = getattr(mod, "__file__", None)
        if not file or not os.path.isfile(file):
            return None
        h.update(mod.__name__.encode() + b"\0" + Path(file).read_bytes() + b"\0")
    return h.hexdigest()[:32]


def home(obj: Any) -> str | None:
    """The folder from which the module of a class or function imports (what PYTHONPATH would
    need to hold): ``/x/mine`` for ``my_nets`` in ``/x/mine/my_nets.py``, ``/x`` for ``pkg.nets``
    in ``/x/pkg/nets.py``; None for sweeper's own modules and modules without a file."""
    name = getattr(obj, "__module__", "") or ""
    mod = sys.modules.get(name)
    file = getattr(mod, "__file__", None)
    if not file or name.split(".")[0] == "sweeper":
        return None
    path = Path(file).resolve()
    depth = len(name.split(".")) - (0 if path.stem == "__init__" else 1)
    return str(path.parents[depth])


@dataclass(frozen=True)
class Offer:
    """What a model offers sweeper beyond the interface, read off its class (its
    optional attributes), so that sweeper asks a model what it has rather than knowing
    it by name: sweeper's MLP says so like any model would.

    ``fast_path``: sweeper's own fused kernels train it (a single run's epoch, the batched
    group's kernel, the portable logged model: :mod:`sweeper.models.mlp`,
    :mod:`sweeper.models.batched`); ``top_level``: its hyperparameters are the config's top-level
    keys (``depth=2``), not ``model.<name>``; ``linear``: the values that make it a linear model
    (the linear reference's own form); ``trainer``: a function trainer (its own loop)."""

    path: str
    trainer: bool = False
    fast_path: bool = False
    top_level: tuple[str, ...] = ()
    linear: tuple[tuple[str, Any], ...] = ()

    @property
    def kind(self) -> str:
        """``mlp`` (sweeper's own kernels), ``trainer`` (a function of the user's) or
        ``model`` (a class of the interface)."""
        return "mlp" if self.fast_path else "trainer" if self.trainer else "model"


def offer(model_cfg: Any, quiet: bool = False) -> Offer:
    """What the model of a config's ``model`` section (a mapping; None or no ``_target_``:
    the default) offers, asked of its class once per import path. :class:`ModelError` when
    it cannot be imported; with ``quiet``, a model that offers nothing beyond the
    interface instead (a stored run's model read where its module is not)."""
    path = MLP_TARGET if model_cfg is None else str(model_cfg.get("_target_", MLP_TARGET))
    offers = state.process().offers
    if path not in offers:
        target, error = loaded(path)
        if error is not None:
            if quiet:
                return Offer(path)
            raise error
        # declared by the class itself: a subclass that
        own = vars(target) if inspect.isclass(target) else {}
        offers[path] = Offer(
            path,
            is_trainer(target),
            bool(own.get("fast_path", False)),  # overrides forward is a
            tuple(own.get("top_level", ())),
            tuple(dict(own.get("linear", {})).items()),
        )  # model
    return offers[path]


def top_level_keys() -> tuple[str, ...]:
    """The default model's hyperparameters set as top-level keys (sweeper's MLP: depth, width,
    activation): keys that mean nothing to a model whose hyperparameters are ``model.<name>``."""
    return offer(None).top_level


def kind(model_cfg: Any) -> str:
    """``mlp`` (sweeper's own kernels), ``model`` (a class of the interface) or
    ``trainer`` (a function of the user's): :attr:`Offer.kind`."""
    return offer(model_cfg).kind


def hyperparameters(cls: Any) -> dict[str, Any]:
    """The constructor's keyword arguments and their defaults
    (``inspect.Parameter.empty``: required)."""
    return {
        p.name: p.default
        for p in parameters(cls) or ()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"
    }


def check_class(cls: Any, path: str, given: dict[str, Any]) -> None:
    """One line when ``cls`` is not a model or ``given`` (its hyperparameters) does not
    fit its constructor."""
    if not inspect.isclass(cls):
        raise ModelError(
            f"model._target_={path} is not a class: expected a class with init, forward "
            "and backward "
            "(a function trainer is model._target_=module.fit)"
        )
    missing = [m for m in REQUIRED if not callable(getattr(cls, m, None))]
    if missing:
        raise ModelError(
            f"model._target_={path} lacks {', '.join(missing)}: a model defines "
            "init(n_in, n_out, rng), "
            "forward(xp, params, X) and backward(xp, params, cache, dout)"
        )
    known = hyperparameters(cls)
    takes_any = any(p.kind == p.VAR_KEYWORD for p in parameters(cls) or ())
    unknown = sorted(set(given) - set(known))
    if unknown and not takes_any:
        allowed = (
            ", ".join(f"model.{k}" for k in known) or "none (its constructor takes no arguments)"
        )
        raise ModelError(
            f"model.{unknown[0]} is not a hyperparameter of {path}: expected one of {allowed}"
        )
    for k, v in given.items():
        problem = _type_problem(v, known.get(k, inspect.Parameter.empty), _annotation(cls, k))
        if problem:
            raise ModelError(f"model.{k}={v} is not allowed: expected {problem}")
    required = [k for k, v in known.items() if v is inspect.Parameter.empty and k not in given]
    if required:
        raise ModelError(
            f"model.{required[0]} is missing for {path}: its constructor requires it "
            f"(e.g. model.{required[0]}=VALUE)"
        )


_KINDS = MappingProxyType(
    {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
)


def doc_line(obj: Any, name: str) -> str:
    """The line of ``obj``'s docstrings (its class's, its constructor's; a function's
    own) that documents the hyperparameter ``name``: a numpydoc ``name : type`` entry
    (its description, the next line), or a line that names it first
    (``name: ...``, ``name -- ...``, ````name````...); "" when none does."""
    docs = [inspect.getdoc(obj) or ""]
    if inspect.isclass(obj):
        docs.append(inspect.getdoc(obj.__init__) or "" if "__init__" in vars(obj) else "")
    pattern = re.compile(
        rf"^[\s*-]*(?:``|`)?{re.escape(name)}(?:``|`)?\s*(?:\([^)]*\))?\s*(:|--|—|-|=)\s*(.*)$"
    )
    for doc in docs:
        lines = doc.splitlines()
        for i, line in enumerate(lines):
            m = pattern.match(line)
            if not m:
                continue
            text = m.group(2).strip()
            if (
                m.group(1) == ":"
                and (i + 1 < len(lines))
                and lines[i + 1].startswith((" ", "\t"))
                and line.lstrip() == line
            ):
                # numpydoc: name : type
                return f"{text}: {lines[i + 1].strip()}" if text else lines[i + 1].strip()
            return text
    return ""


def described(target: Any) -> list[tuple[str, str, str, str]]:
    """Each hyperparameter of a model class (its constructor's keyword arguments) or a function
    trainer (its keyword arguments but ``lr``, ``epochs``, ``seed``): ``(name, default, kind, doc)``
    as ``--help`` shows them — the default (``required`` when there is none), the kind from the
    annotation or the default's type (``an integer``, ``a number``, ``true or false``, ``a string``,
    else the annotation's name or ``any value``), and its docstring's line (:func:`doc_line`)."""
    out = []
    params = (parameters(target) or [])[2 if is_trainer(target) else 0 :]
    for p in params:
        if (
            p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            or p.name == "self"
            or p.name in GIVEN
        ):
            continue
        want = _annotation(target, p.name)
        kind = (
            _KINDS.get(want) or _KINDS.get(type(p.default))
            if p.default is not p.empty or want in _KINDS
            else None
        )
        if kind is None:
            kind = getattr(want, "__name__", None) or (
                str(want) if want is not None else "any value"
            )
        default = (
            "required"
            if p.default is p.empty
            else "null"
            if p.default is None
            else (str(p.default).lower() if isinstance(p.default, bool) else str(p.default))
        )
        out.append((p.name, default, kind, doc_line(target, p.name)))
    return out


_BOUND = re.compile(r"(>=|≥|>)\s*(-?\d+(?:\.\d+)?(?:e-?\d+)?)")


def domain(obj: Any, name: str) -> tuple[type | None, float | None, bool]:
    """What the constructor (or function) declares of a numeric hyperparameter: its type
    (the annotation, else its default's type: ``int`` or ``float``; None when neither
    says), and a lower bound its documentation states (``>= 1``, ``> 0``, "positive",
    "non-negative") with whether it is strict; (None, None, False) for an unknown name."""
    params = {p.name: p for p in parameters(obj) or ()}
    if name not in params:
        return None, None, False
    want = _annotation(obj, name)
    default = params[name].default
    kind = (
        want if want in (int, float) else type(default) if type(default) in (int, float) else None
    )
    doc = doc_line(obj, name).lower()
    m = _BOUND.search(doc)
    if m:
        return kind, float(m.group(2)), m.group(1) == ">"
    if "non-negative" in doc or "nonnegative" in doc:
        return kind, 0.0, False
    if "positive" in doc:
        return kind, 0.0, True
    return kind, None, False


def _annotation(cls: Any, name: str) -> Any:
    for p in parameters(cls) or ():
        if p.name == name and p.annotation is not inspect.Parameter.empty:
            a = p.annotation
            return (
                {"int": int, "float": float, "bool": bool, "str": str}.get(a, a)
                if isinstance(a, str)
                else a
            )
    return None


def _type_problem(value: Any, default: Any, annotation: Any) -> str | None:
    """What a hyperparameter's value should be, from its annotation or else its
    default's type (None: it fits, or nothing says): an int where an int is, a number
    (int or float) where a float is, true/false where a bool is."""
    want = (
        annotation if annotation in _KINDS else type(default) if type(default) in _KINDS else None
    )
    if want is None:
        return None
    ok = (
        isinstance(value, bool)
        if want is bool
        else isinstance(value, int) and not isinstance(value, bool)
        if want is int
        else isinstance(value, (int, float)) and not isinstance(value, bool)
        if want is float
        else isinstance(value, str)
    )
    if ok:
        return None
    shown = f" (the default is {default!r})" if default is not inspect.Parameter.empty else ""
    return _KINDS[want] + shown


def parameters(obj: Any) -> list[inspect.Parameter] | None:
    """The parameters of ``obj``'s signature (a class: its constructor's); None when Python
    cannot read one (a builtin, a C extension's class): nothing is known of them, not 'none'."""
    try:
        return list(inspect.signature(obj).parameters.values())
    except (TypeError, ValueError):
        return None


def split(model_cfg: Any) -> tuple[str, dict[str, Any]]:
    """A config's model section as (import path, hyperparameters): ``check`` and the
    other reserved keys are not the model's."""
    items = dict(model_cfg.items()) if model_cfg is not None else {}
    path = str(items.pop("_target_", MLP_TARGET))
    return path, {k: v for k, v in items.items() if k not in RESERVED}


def check_on(model_cfg: Any) -> bool:
    """Whether a failed gradient check refuses the sweep (``model.check``, true unless
    set false)."""
    return model_cfg is None or model_cfg.get("check", True) is not False


def instantiate(model_cfg: Any) -> Any:
    """The model object of a config's model section, checked (one line on any problem)."""
    path, kwargs = split(model_cfg)
    cls = load_target(path)
    check_class(cls, path, kwargs)
    # the user's constructor refused its values: one line
    what = f"{path}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
    return attempt(ModelError, what, call_user, cls, **kwargs)


# The keyword arguments sweeper passes a function trainer from the top-level keys
# (sweeper.job.trainer).
GIVEN = ("lr", "epochs", "seed")


def is_trainer(obj: Any) -> bool:
    """A function trainer (``fit(data, report, *, lr, epochs, seed, ...)``), not a model class."""
    return callable(obj) and not inspect.isclass(obj)


def check_trainer(fn: Any, path: str, given: dict[str, Any]) -> None:
    """One line when ``fn`` cannot take ``(data, report, lr=, epochs=, seed=, **given)``."""
    params = parameters(fn)
    if params is None:  # nothing to check it against
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) < 2 and not any(p.kind == p.VAR_POSITIONAL for p in params):
        raise ModelError(
            f"model._target_={path} takes {len(positional)} positional arguments: a "
            "function trainer is "
            "fit(data, report, *, lr, epochs, seed, **hyperparameters)"
        )
    known = {
        p.name: p.default for p in params[2:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
    takes_any = any(p.kind == p.VAR_KEYWORD for p in params)
    for k in (*GIVEN, *given):
        if k not in known and not takes_any:
            own = ", ".join(f"model.{n}" for n in known if n not in GIVEN) or "none"
            what = (
                "a keyword argument sweeper passes"
                if k in GIVEN
                else "not one of its keyword arguments"
            )
            raise ModelError(
                f"model.{k} is not accepted by {path} ({what}): its hyperparameters are {own}; "
                "a trainer takes lr, epochs and seed too"
            )
    for k, v in given.items():
        problem = _type_problem(v, known.get(k, inspect.Parameter.empty), None)
        if problem:
            raise ModelError(f"model.{k}={v} is not allowed: expected {problem}")


def decays(name: str, shape: tuple[int, ...]) -> bool:
    """Whether weight decay shrinks a parameter: arrays of two or more axes whose first
    axis is not 1 (a ``(1, m)`` bias, a 1-D vector and a scalar are left alone)."""
    return len(shape) >= 2 and shape[0] != 1

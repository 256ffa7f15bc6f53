"""The launcher's config, stored under ``hydra/launcher`` as ``batched`` (imported at plugin
discovery: light).

Each key is declared once, here: a typed field (its type OmegaConf enforces when Hydra merges
an override: ``hydra.launcher.gpus=abc`` is Hydra's one line), its default, its comment (the
config reference's text) and what it allows (:class:`Allowed`, in the field's metadata). The
launcher reads the fields as its attributes; :func:`problem` is the one check of a value, used
both on the command line before Hydra composes (``sweeper.contract.hydra_args``) and by the
launcher before any store (``sweeper.sweep.engines.check``)."""

from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Callable, Dict, Optional

from hydra.core.config_store import ConfigStore

__all__ = [
    "Allowed",
    "BatchedLauncherConf",
    "PREFIX",
    "at_least",
    "declared",
    "first_problem",
    "key",
    "nested",
    "problem",
]

# hydra.launcher.engine: where groups compute (sweeper.sweep.engines)
ENGINES = ("local", "ray", "submitit_local", "submitit_slurm")


@dataclass(frozen=True)
class Allowed:
    """What a key allows: ``ok(value)``, said as ``expected`` in its one-line error."""

    expected: str
    ok: Callable[[Any], bool]


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def at_least(least: int, why: str = "", null: str = "") -> Allowed:
    """An integer >= ``least`` (``why``: what a value means); ``null``: also null, meaning that."""
    said = f"an integer >= {least}" + (f", or null ({null})" if null else "")
    said += f" ({why})" if why else ""
    return Allowed(said, lambda v: (bool(null) and v is None) or (_int(v) and v >= least))


def one_of(values: tuple[str, ...]) -> Allowed:
    return Allowed(f"one of {', '.join(values)}", lambda v: v in values)


def flag(true: str, false: str) -> Allowed:
    return Allowed(f"true ({true}) or false ({false})", lambda v: isinstance(v, bool))


def options(of: str) -> Allowed:
    """An open mapping handed on as it is (its keys are ``of``'s own)."""
    return Allowed(f"a mapping of {of}", lambda v: hasattr(v, "keys"))


def key(default: Any, allowed: Allowed) -> Any:
    """A field with its default and what it allows (a mutable default: a factory)."""
    if callable(default):
        return field(default_factory=default, metadata={"allowed": allowed})
    return field(default=default, metadata={"allowed": allowed})


@dataclass
class HalvingConf:
    # Successive halving (sweeper.sweep.pruning): stops all but the best 1/eta of the
    # configurations at each rung min_epochs·eta^k.
    eta: Optional[int] = key(None, at_least(2, null="no halving"))
    # The first rung, in epochs.
    min_epochs: Optional[int] = key(
        None, at_least(1, null="the largest epochs / eta^3, at least 2·log_every")
    )


@dataclass
class BatchedLauncherConf:
    _target_: str = "hydra_plugins.sweeper_batched_launcher.batched_launcher.BatchedLauncher"
    # Most bytes of device memory one group of configurations may hold while it trains; 0 = a
    # quarter of the machine's memory. A larger grid splits into several groups.
    max_group_bytes: int = key(0, at_least(0, "bytes; 0 = a quarter of the machine's memory"))
    # Most configurations in one group (0 = no limit but the memory budget).
    max_group_size: int = key(0, at_least(0, "0 = no limit"))
    # Where groups compute (sweeper.sweep.engines).
    engine: str = key("local", one_of(ENGINES))
    # local: how many GPUs compute groups at once (null: every visible one).
    gpus: Optional[int] = key(None, at_least(1, null="every GPU"))
    # local: how many worker processes compute CPU groups at once, one BLAS thread each
    # (sweeper.sweep.cores); null: the cores this process may use (os.sched_getaffinity); 1: one
    # group after another in this process.
    cpu_workers: Optional[int] = key(None, at_least(1, null="the cores this process may use"))
    # engine=ray: address (null: a new local cluster), num_cpus per group, max_retries, init
    # (ray.init's arguments).
    ray: Dict[str, Any] = key(
        lambda: {"address": None, "num_cpus": 1, "max_retries": 1, "init": {}},
        options("Ray's settings"),
    )
    # engine=submitit_*: partition, timeout_min, cpus_per_task, array_parallelism,
    # additional_parameters, folder.
    submitit: Dict[str, Any] = key(
        lambda: {"partition": None, "timeout_min": 60, "cpus_per_task": 1},
        options("submitit's settings"),
    )
    # Groups of one shape that differ only in depth, width and activation train as one packed group
    # (one first-layer product for all) where the planner estimates it ends sooner on this device
    # (sweeper.sweep.packing); false: one shape a group.
    pack: bool = key(True, flag("groups of several shapes where they pay", "one shape a group"))
    # successive halving: its keys are HalvingConf's (hydra.launcher.halving.eta, .min_epochs)
    halving: HalvingConf = field(default_factory=HalvingConf)


PREFIX = "hydra.launcher."


def declared(node: type = BatchedLauncherConf, at: str = PREFIX) -> dict[str, Any]:
    """Every key of the config below ``node`` (``hydra.launcher.halving.eta``: a nested
    config's keys, not the config itself) and its field."""
    out = {}
    for f in fields(node):
        if f.name.startswith("_"):
            continue
        inner = f.default_factory if is_dataclass(f.default_factory) else None
        out.update(declared(inner, f"{at}{f.name}.") if inner else {f"{at}{f.name}": f})
    return out


def nested(node: type = BatchedLauncherConf, at: str = PREFIX) -> dict[str, type]:
    """The nested configs (``hydra.launcher.halving``), each with its dataclass."""
    out = {}
    for f in fields(node):
        if is_dataclass(f.default_factory):
            out[f"{at}{f.name}"] = f.default_factory
            out.update(nested(f.default_factory, f"{at}{f.name}."))
    return out


def problem(
    name: str, value: Any, node: type = BatchedLauncherConf, at: str = PREFIX
) -> Optional[str]:
    """The one line (without ``sweeper: error:``) for ``name=value`` (``name``: a full key,
    ``hydra.launcher.gpus``) that the key does not allow; None when allowed, or for a name it
    does not declare (a name the config lacks: ``sweeper.contract.hydra_args``, which names
    the one meant). ``node``, ``at``: another plugin's config and where it sits (the Optuna
    sweeper's, ``hydra.sweeper.``)."""
    keys = declared(node, at)
    allowed = keys[name].metadata.get("allowed") if name in keys else None
    if allowed is None or allowed.ok(value):
        return None
    return f"{name}={value} is not allowed: expected {allowed.expected}"


def first_problem(conf: Any, node: type = BatchedLauncherConf, at: str = PREFIX) -> Optional[str]:
    """The line of the first key of a composed ``hydra.launcher`` (a mapping; ``node``, ``at``:
    another plugin's, as in :func:`problem`) whose value is not allowed; None when every key
    present is allowed."""
    for name in declared(node, at):
        value = conf
        for part in name[len(at) :].split("."):
            value = value.get(part, _ABSENT) if hasattr(value, "get") else _ABSENT
        line = None if value is _ABSENT else problem(name, value, node, at)
        if line:
            return line
    return None


_ABSENT = object()


ConfigStore.instance().store(
    group="hydra/launcher", name="batched", node=BatchedLauncherConf, provider="sweeper"
)

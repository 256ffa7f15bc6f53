"""The ``SWEEPER_*`` environment variables sweeper reads, what each allows, and the one-line
refusal of a bad one (checked by ``python -m sweeper`` before anything else): a value that would be
ignored or half-read (a thread count of ``two``, ``SWEEPER_WRITER=no``) or a name sweeper does not
read (a typo) would otherwise go unsaid. An empty value is as unset. Imports nothing of ours but
:mod:`sweeper.base.files` (a JSON file read whole or not at all)."""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping, TypeVar

from sweeper.base.files import read_json
from sweeper.base.fmt import number


T = TypeVar("T")

__all__ = [
    "ACTIVATION_FORMS",
    "SHORTCUTS",
    "cache_root",
    "problem",
    "read_cached",
    "shortcuts_off",
    "turned_off_by",
    "write_cached",
    "writer_on",
]


def _number(low: float, strict: bool) -> Callable[[str], bool]:
    def check(v: str) -> bool:
        x = number(v)
        return x is not None and math.isfinite(x) and (x > low if strict else x >= low)

    return check


def _integer(low: int) -> Callable[[str], bool]:
    return lambda v: v.strip().isdigit() and int(v) >= low


def _folder(v: str) -> bool:
    return not os.path.exists(v) or os.path.isdir(v)


# SWEEPER_ACTIVATION_FORMS: each activation's forms (sweeper.models.forms implements
# them; a test holds the two equal)
ACTIVATION_FORMS = MappingProxyType(
    {"tanh": ("library", "exp"), "sigmoid": ("library", "exp"), "relu": ("library",)}
)


def _forms_allowed(value: str) -> bool:
    if value.strip() in ("probe", "library"):
        return True
    for item in value.split(","):
        name, eq, form = item.partition("=")
        if not eq or form.strip() not in ACTIVATION_FORMS.get(name.strip(), ()):
            return False
    return True


# SWEEPER_PUBLIC_ONLY: sweeper's shortcuts past a framework's public API, each turned off
# by name (1: all) to run the public path it stands in for (docs/benchmarks.md "Shortcuts
# past the frameworks" measures each against it). name -> (the packages whose internals
# it reaches into: it runs only inside their tested range, sweeper.base.tested;
#          where it lives; the public path that runs instead)
SHORTCUTS: MappingProxyType[str, tuple[tuple[str, ...], str, str]] = MappingProxyType(
    {
        "jobrun": (
            ("hydra-core", "omegaconf"),
            "sweeper.sweep.hydra_run_job: a copy of Hydra's run_job without its config copies",
            "Hydra's run_job",
        ),
        "compose": (
            (),
            "sweeper.contract.compose: each shape of overrides composed once, the jobs' values set "
            "on it",
            "Hydra composes every job (sweeper's check, the sweeper's, the launcher's)",
        ),
        "bulk": (
            ("mlflow",),
            "sweeper.tracking.bulk: MLflow's ORM tables written many runs a transaction",
            "MLflow's client calls, a run at a time",
        ),
        "writer": (
            (),
            "sweeper.tracking.writer: a second process ends the runs while the next job trains",
            "each job ends its own run (as SWEEPER_WRITER=off)",
        ),
        "painter": (
            (),
            "sweeper.insight.plots: a process imports matplotlib while the sweep runs and draws "
            "the plots",
            "the plots drawn in the launching process at the sweep's end",
        ),
        "exit": (
            (),
            "sweeper.main_exit: threading._shutdown, atexit._run_exitfuncs, os._exit (no "
            "interpreter teardown)",
            "sys.exit",
        ),
        "pyfunc_cache": (
            (),
            "sweeper.tracking.pyfunc: a model is a copy of a cached template with its own files",
            "mlflow.pyfunc.save_model for every model",
        ),
        "ui_view": (
            ("mlflow-ui",),
            "sweeper.tracking.ui: the printed address opens a shared view of MLflow's UI (its "
            "internal UI state: the columns in view)",
            "the printed address carries the sort and search alone",
        ),
    }
)


def _shortcuts_allowed(value: str) -> bool:
    return value.strip() in ("0", "1") or all(n.strip() in SHORTCUTS for n in value.split(","))


def turned_off_by(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The setting of ``env`` (default: this process's) that turns the shortcut ``name``
    off, as ``VARIABLE=value``: ``SWEEPER_PUBLIC_ONLY`` naming it (``1``: all),
    or ``SWEEPER_WRITER=off`` (the writer's older spelling); None when none does (a
    value :func:`problem` refuses turns none off)."""
    env = os.environ if env is None else env
    value = env.get("SWEEPER_PUBLIC_ONLY", "").strip()
    if value == "1" or name in {n.strip() for n in value.split(",")}:
        return f"SWEEPER_PUBLIC_ONLY={value}"
    if name == "writer" and env.get("SWEEPER_WRITER", "") == "off":
        return "SWEEPER_WRITER=off"
    return None


def writer_on(env: Mapping[str, str] | None = None) -> bool:
    """``SWEEPER_WRITER=on`` in ``env`` (default: this process's): the writer process in a sweep
    of any size (``off``: in none, :func:`turned_off_by`)."""
    return (os.environ if env is None else env).get("SWEEPER_WRITER", "").strip() == "on"


def shortcuts_off(env: Mapping[str, str] | None = None) -> frozenset[str]:
    """The shortcuts ``env`` (default: this process's) turns off (:func:`turned_off_by`)."""
    return frozenset(n for n in SHORTCUTS if turned_off_by(n, env))


ANY: Callable[[str], bool] = lambda v: True  # noqa: E731

# name -> (what it allows, in words; its check)
VARIABLES: MappingProxyType[str, tuple[str, Callable[[str], bool]]] = MappingProxyType(
    {
        "SWEEPER_WRITER": (
            "on or off (the writer process that ends finished runs; on: in a sweep of any size)",
            lambda v: v in ("on", "off"),
        ),
        "SWEEPER_PLOTS": (
            "on or off (a sweep's figures, plots/*.png on its parent run, drawn or left out)",
            lambda v: v in ("on", "off"),
        ),
        "SWEEPER_THREADS": (
            "an integer >= 1 (threads of a large epoch or a batched group)",
            _integer(1),
        ),
        "SWEEPER_HEARTBEAT_S": (
            "a number of seconds > 0 (between two heartbeats of a run)",
            _number(0, True),
        ),
        "SWEEPER_AHEAD_BULK": ("an integer >= 0", _integer(0)),
        "SWEEPER_AHEAD_AFTER_S": ("a number of seconds >= 0", _number(0, False)),
        "SWEEPER_PUBLIC_ONLY": (
            "1, 0, or shortcuts to turn off, comma-separated, of "
            + ", ".join(SHORTCUTS)
            + " (1: all of them: MLflow's and Hydra's public calls)",
            _shortcuts_allowed,
        ),
        "SWEEPER_CACHE_DIR": (
            "a folder, or a path where one can be made (model and store templates, gradient "
            "checks, probes)",
            _folder,
        ),
        "SWEEPER_ACTIVATION_FORMS": (
            "probe, library, or forms such as tanh=exp,sigmoid=library (models.forms)",
            _forms_allowed,
        ),
        "SWEEPER_FAKE_GPU": (
            "numpy or strict (test-only: device=gpu on NumPy, or on the strict device stand-in)",
            lambda v: v in ("numpy", "strict"),
        ),
        "SWEEPER_STRICT_LEDGER": (
            "a file path (test-only: the strict stand-in's counts, appended at exit)",
            ANY,
        ),
        "SWEEPER_FAKE_GPUS": ("an integer >= 1 (test-only)", _integer(1)),
        "SWEEPER_TEST_DIE_ONCE": ("a file path (test-only)", ANY),
        "SWEEPER_OOM_COUNTER": (
            "a file holding the host's out-of-memory kill count (test-only: /proc/vmstat's)",
            ANY,
        ),
        "SWEEPER_SHARED_DATA": ("a folder of data files (the test suite's)", ANY),
        "SWEEPER_BEST_DIR": (
            "a folder of pinned files for tests/test_best.py (as its --best-dir)",
            ANY,
        ),
    }
)


def cache_root() -> Path:
    """Where sweeper keeps what it computes once per machine (model and store templates,
    gradient checks, probes): ``$SWEEPER_CACHE_DIR``, else ``$XDG_CACHE_HOME/sweeper``
    (``~/.cache/sweeper``)."""
    base = (
        os.environ.get("SWEEPER_CACHE_DIR")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sweeper"
    )
    return Path(base)


def read_cached(path: Path, parse: Callable[[Any], T] = lambda v: v) -> T | None:
    """``parse`` of the JSON value this machine's cache keeps in ``path`` (a file under
    :func:`cache_root`), or None: a file that is not there, was cut short, or has another
    version's shape (``parse`` raised KeyError, TypeError, ...) is no cache."""
    return read_json(path, parse)


def write_cached(path: Path, value: Any, key: str | None = None) -> None:
    """Keep ``value`` in ``path`` for this machine's later processes (with ``key``: as that
    entry of the file, beside the others it holds now). Atomically: a temporary file beside it,
    then a rename, so a process that reads it (a sweep's workers, a concurrent sweep) gets a
    whole file. A cache that cannot be written is no cache; a value JSON cannot hold is the
    caller's error (TypeError), raised before any file is touched."""
    try:
        if key is not None:
            known = read_cached(path)
            value = {**(known if isinstance(known, dict) else {}), key: value}
        text = json.dumps(value, indent=1, sort_keys=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError:  # a folder that cannot be written
        pass


def problem(env: Mapping[str, str] | None = None) -> str | None:
    """The one line for the first ``SWEEPER_*`` variable of ``env`` (default: this
    process's) that is not allowed."""
    env = os.environ if env is None else env
    for name in sorted(k for k in env if k.startswith("SWEEPER_")):
        value = env[name]
        if value == "":
            continue
        if name not in VARIABLES:
            return (
                f"the environment variable {name} is not one sweeper reads: expected one of "
                f"{', '.join(VARIABLES)} (unset it: unset {name})"
            )
        allowed, check = VARIABLES[name]
        if not check(value):
            return f"the environment variable {name}={value} is not allowed: expected {allowed}"
    return None

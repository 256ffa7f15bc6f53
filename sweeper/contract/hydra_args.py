"""Hydra's own errors on the command line, seen before Hydra composes (:func:`check_hydra`),
so they are one line and exit 2 instead of Hydra's 4-14 lines and exit 1: an unknown
``hydra.`` key, ``+key=`` for a key that exists, an unknown ``hydra/launcher=`` or
``hydra/sweeper=``, a sweep without ``-m``, and the batched launcher's knobs out of range."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from pathlib import Path, PurePath
from types import MappingProxyType
from typing import Any

from hydra.conf import HydraConf
from hydra.core.config_store import ConfigStore
from hydra.core.plugins import Plugins
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from sweeper.base.hydra_internals import reporter, set_reporter
from sweeper.base.files import name_problem
from sweeper.base.fmt import near

__all__ = [
    "OPTIONS",
    "TASK_STARTED",
    "chdir_paths",
    "check_commands",
    "check_hydra",
    "hydra_line",
    "one_line_errors",
]

# Hydra's keys whose values become folders (a sweep's, a run's, a job's).
FOLDERS = ("hydra.run.dir", "hydra.sweep.dir", "hydra.sweep.subdir", "hydra.job.name")


def hydra_groups(group: str) -> list[str]:
    """The options of a Hydra group (``hydra/launcher``): its own configs and those the
    installed plugins register (discovering the plugins imports them: ~0.4 s, paid only
    when the command names the group)."""

    Plugins.instance()
    names = {
        n.removesuffix(".yaml") for n in ConfigStore.instance().list(group) if n.endswith(".yaml")
    }
    # lazy: saves ~3.6 ms at this module's import (measured)
    from importlib.resources import files

    # hydra.conf: Hydra's own configs (a package of hydra-core, imported above); a group of
    # none of them (no such folder there) has the registered options only
    folder = files("hydra.conf").joinpath(group)
    if folder.is_dir():
        names |= {
            p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml")
        }
    return sorted(names)


def check_hydra(
    args: list[str],
    overrides: list[Any],
    error: type[Exception],
    top_level: Any,
    whole: bool = True,
) -> None:
    """Raise ``error`` (one line) for an override of ``args`` (parsed: ``overrides``) that Hydra
    would refuse over several lines; ``top_level`` are the config's own top-level keys; ``whole``:
    ``args`` is the whole command line (else whether ``-m`` was given is unknown)."""
    multirun = (
        not whole
        or any(a in ("-m", "--multirun") for a in args)
        or any(o.key_or_group == "hydra.mode" for o in overrides)
    )
    # the batched launcher's keys are checked unless another launcher is chosen
    batched = all(
        str(o.value()) == "batched" for o in overrides if o.key_or_group == "hydra/launcher"
    )
    for o in overrides:
        key = o.key_or_group
        if not multirun and o.is_sweep_override():
            raise error(
                f"{o.input_line} is a sweep: add -m (python -m sweeper -m {o.input_line} ...), "
                "or give one value"
            )
        if o.is_add() and key in top_level:
            raise error(
                f"{o.input_line}: {key} is already a key of the config: write {o.input_line[1:]} "
                "(without +)"
            )
        if (
            key in ("hydra/launcher", "hydra/sweeper")
            and not o.is_sweep_override()
            and not o.is_delete()
        ):
            options = hydra_groups(key)
            if options and str(o.value()) not in options:
                raise error(
                    f"{key}={o.value()} is not allowed: expected one of {', '.join(options)}"
                )
        if (
            key.startswith("hydra.")
            and not o.is_add()
            and not o.is_force_add()
            and not o.is_delete()
        ):
            _check_hydra_key(key, error)
        if key in FOLDERS and not o.is_sweep_override() and not o.is_delete():
            _check_folder_names(key, str(o.value()), error)
        if key.startswith("hydra.launcher.") and batched:
            _check_launcher_key(o, key, error)


def _check_hydra_key(key: str, error: type[Exception]) -> None:
    """``hydra.<name>...``: ``name`` one of the fields of Hydra's own config."""

    fields = [f.name for f in dataclasses.fields(HydraConf)]
    if key.split(".")[1] not in fields:
        raise error(
            f"{key} is not a key of Hydra's config{near(key.split('.')[1], fields, 'hydra.')}: "
            f"expected hydra.<one of {', '.join(fields)}>"
        )


def _check_folder_names(key: str, value: str, error: type[Exception]) -> None:
    """Each folder name of an output folder's path (``hydra.run.dir``, ...) one the file
    system takes."""

    for part in PurePath(value).parts:
        why = name_problem(part) if part not in ("/", ".", "..") else None
        if why:
            raise error(f"{key}={value[:60]}...: the folder name {part[:40]}... is {why}")


def _check_launcher_key(o: Any, key: str, error: type[Exception]) -> None:
    """``hydra.launcher.KEY=VALUE``: the batched launcher's own check of the key
    (:func:`hydra_plugins.sweeper_batched_launcher.config.problem`, beside the key's field),
    on VALUE as Hydra will merge it; a VALUE of another type than the field's is left to
    Hydra's merge (its one line: ``Value 'abc' of type 'str' could not be converted to
    Integer``), a sweep's values to each job."""

    # lazy: saves ~147 ms at this module's import (measured)
    from hydra_plugins.sweeper_batched_launcher.config import (
        PREFIX,
        BatchedLauncherConf,
        declared,
        nested,
        problem,
    )

    if o.is_delete() or (key in declared() and o.is_sweep_override()):
        return
    parent, _, name = key.rpartition(".")
    if key not in declared() and key not in nested() and parent in (PREFIX[:-1], *nested()):
        # cpu_worker=2, halving.et=3: one line with the keys there, and the one meant
        under = [k[len(parent) + 1 :] for k in declared() if k.startswith(f"{parent}.")]
        names = sorted({k.split(".")[0] for k in under})
        raise error(
            f"{key} is not a key of {parent}{near(name, names, parent + '.')}: expected one of "
            f"{', '.join(names)}"
        )
    if key not in declared():  # a key under a plain mapping of the launcher's: Hydra's
        return
    conf = OmegaConf.structured(BatchedLauncherConf)
    try:
        OmegaConf.update(conf, key[len(PREFIX) :], o.value(), merge=True)
    except OmegaConfBaseException:
        return
    line = problem(key, OmegaConf.select(conf, key[len(PREFIX) :]))
    if line:
        raise error(line)


# Hydra's options that each choose what the command does: Hydra allows one of them (a
# ValueError otherwise).
COMMANDS = MappingProxyType(
    {
        "-m": "--multirun",
        "--multirun": "--multirun",
        "-c": "--cfg",
        "--cfg": "--cfg",
        "-i": "--info",
        "--info": "--info",
        "--shell-completion": "--shell-completion",
        "-sc": "--shell-completion",
    }
)


# Hydra 1.3's command-line options (hydra._internal.utils.get_args_parser; a test keeps
# the two equal)
OPTIONS = (
    "--help",
    "-h",
    "--hydra-help",
    "--version",
    "--cfg",
    "-c",
    "--resolve",
    "--package",
    "-p",
    "--run",
    "-r",
    "--multirun",
    "-m",
    "--shell-completion",
    "-sc",
    "--config-path",
    "-cp",
    "--config-name",
    "-cn",
    "--config-dir",
    "-cd",
    "--experimental-rerun",
    "--info",
    "-i",
)


def check_commands(args: list[str], error: type[Exception]) -> None:
    """``-m --cfg job``: Hydra raises a ValueError with its traceback; here one line. So
    is an option Hydra does not have: argparse takes a prefix of one for it
    (``--experiment digits`` became ``--experimental-rerun digits``, a traceback), and a
    report command's flag given to the main command is the likeliest."""
    for i, a in enumerate(args):
        name = a.partition("=")[0]
        if a.startswith("-") and a != "--" and name not in OPTIONS:
            raise error(
                f"{name} is not an option of python -m sweeper (-m for a sweep, --cfg job, "
                "--help; Hydra's: "
                f"--hydra-help): a key is given as key=value ({name.lstrip('-')}=...), and the "
                "read commands "
                "take their own flags (python -m sweeper report --help)"
            )
        if name == "--experimental-rerun":
            rerun = a.partition("=")[2] or (args[i + 1] if i + 1 < len(args) else "")
            if not os.path.isfile(rerun):
                raise error(
                    f"--experimental-rerun={rerun}: no such file: expected a job's "
                    ".hydra/config.pickle"
                )
    given = list(dict.fromkeys(COMMANDS[a] for a in args if a in COMMANDS))
    if len(given) > 1:
        raise error(
            f"{' and '.join(given)} cannot be given together: expected one of them (e.g. python "
            "-m sweeper "
            f"--cfg job key=value shows one job's config; -m runs the sweep)"
        )


def hydra_line(e: BaseException) -> str | None:
    """The one line for an error that Hydra or OmegaConf raised while reading the
    command line or composing the config (a value of the wrong type for a Hydra
    key, ``lr.x=1``, a missing config): Hydra's first line and its cause's, with the
    key; None for any other exception (ours, a job's), which keeps Hydra's report."""

    if not isinstance(e, (HydraException, OmegaConfBaseException)):
        return None

    def first(x: BaseException) -> str:
        lines = [ln.strip() for ln in str(x).splitlines() if ln.strip()]
        return lines[0] if lines else type(x).__name__

    text = first(e)
    cause = e.__cause__ if isinstance(e.__cause__, OmegaConfBaseException) else None
    key = getattr(cause or e, "full_key", None)
    if cause is not None:
        text = f"{text.rstrip('.')}: {first(cause)}"
    if key and key not in text:
        text += f" (key {key})"
    lines = str(e).splitlines()
    at = next((i for i, ln in enumerate(lines) if ln.startswith("Available options in")), None)
    # Could not find 'data/nope': Hydra lists the group's options below, one a line
    if at is not None:
        options = []
        for ln in lines[at + 1 :]:
            if not ln.startswith(("\t", " ")) or not ln.strip():
                break
            options.append(ln.strip())
        text += f": expected one of {', '.join(options)}" if options else ""
    if "Cannot find primary config" in text:
        text += ": expected --config-name config (conf/config.yaml) or a config of --config-path"
    return text


def one_line_errors(error: type[Exception]) -> None:
    """From now on in this process, an error that Hydra or OmegaConf raises while it
    composes the config (before any job's task starts) reaches the caller as ``error``
    with one line (:func:`hydra_line`), instead of Hydra printing 4-14 lines and
    exiting 1. ``HYDRA_FULL_ERROR=1`` keeps Hydra's own report. A job's failure is left
    to Hydra: the caller's task function sets :data:`TASK_STARTED`."""

    original = reporter()
    if getattr(original, "one_line", False) or os.environ.get("HYDRA_FULL_ERROR") == "1":
        return

    def run_and_report(func: Any) -> Any:
        try:
            return func()
        except Exception as e:  # noqa: BLE001  (every other one goes to Hydra's own report below)
            line = None if TASK_STARTED else hydra_line(e)
            if line is not None:
                raise error(line) from None

            def again(err: Exception = e) -> Any:
                raise err

            return original(again)

    run_and_report.one_line = True  # type: ignore[attr-defined]
    set_reporter(run_and_report)


TASK_STARTED = False  # set by python -m sweeper's task function: from then on an error is a job's


_CHDIR = re.compile(r"^\+{0,2}hydra\.job\.chdir=(true|True)$")
_DATA_PATH = re.compile(r"^(\+{0,2}data\.path)=(.+)$")
_STORE = re.compile(r"^(\+{0,2}tracking\.uri)=sqlite:///([^/].*)$")  # a relative database path


def chdir_paths(args: list[str]) -> list[str]:
    """With ``hydra.job.chdir=true`` every job runs in its own folder, where a relative
    ``data.path`` names nothing and a relative ``tracking.uri=sqlite:///PATH`` a new store in
    each job's folder: each relative value (of a sweep's comma-separated data paths) that is
    a file here, and the store's path, is made absolute, and said on stderr. Without chdir,
    or for a value with Hydra's grammar in it, the arguments are returned as they are."""
    if not any(_CHDIR.match(a) for a in args):
        return args
    out = []
    for a in args:
        m = _DATA_PATH.match(a)
        if m and not any(c in m[2] for c in "()${}[]'\"\\"):
            values = [
                str(Path(v).absolute()) if not Path(v).is_absolute() and Path(v).is_file() else v
                for v in m[2].split(",")
            ]
            new = f"{m[1]}={','.join(values)}"
            if new != a:
                print(
                    f"sweeper: {a} read as {','.join(values)} (hydra.job.chdir=true runs each "
                    "job in its own "
                    "folder)",
                    file=sys.stderr,
                )
            a = new
        m = _STORE.match(a)
        if m and not any(c in m[2] for c in "()${}[]'\"\\,"):
            # each job's folder would get a store of its own
            a = f"{m[1]}=sqlite:///{Path(m[2]).absolute()}"
            print(
                f"sweeper: {m[1]}=sqlite:///{m[2]} read as {a.partition('=')[2]} "
                "(hydra.job.chdir=true runs each "
                "job in its own folder)",
                file=sys.stderr,
            )
        out.append(a)
    return out

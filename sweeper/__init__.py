"""sweeper: sweep the hyperparameters of from-scratch NumPy/CuPy
models with Hydra, track every run in MLflow.

The package is used from its repository (``pip install -e .``): Hydra reads ``conf/``
beside it and the embedded MLflow store lives in ``mlruns/`` beside it.
``${sweeper_root:}`` in a config is that folder (the resolver is registered by
``sweeper.contract.config``). Importing the package itself pulls in nothing heavy, so
``sweeper.base.backend`` and the benchmarks run where only NumPy (and CuPy) are installed.
"""

import atexit
import importlib
import os
import sys
import threading
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Callable, Iterator, NoReturn

ROOT = Path(__file__).resolve().parent.parent
CONF_DIR = ROOT / "conf"

# MLflow's telemetry (3.17: a lookup of its telemetry host, an installation id in
# ~/.config/mlflow/telemetry.json, usage events) is off in every process of sweeper: its
# commands, its workers (they inherit the environment) and a program that imports it. An
# environment setting, so that a user who wants it keeps it: MLFLOW_DISABLE_TELEMETRY=false
# or DO_NOT_TRACK=false (either set by the user is left as it is). Set at import, before anything
# imports MLflow, which decides at its own import whether to start its telemetry client.
if "MLFLOW_DISABLE_TELEMETRY" not in os.environ and "DO_NOT_TRACK" not in os.environ:
    os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"

# A password in a tracking URI (http://alice:s3cr3t@host) is masked in every log record
# of every process of sweeper (sweeper.base.output.masked: http://alice:***@host): its
# own lines and Hydra's, in the terminal and the log files.
# after the environment: nothing of MLflow's is imported
from sweeper.base import output as _output  # noqa: E402

_output.mask_log_records()

# The repository's models/ and data/ folders are the subpackages sweeper.models and sweeper.data
# (pyproject.toml's package-dir maps them for an install). Run from a checkout without installing
# (the benchmarks, a GPU machine), this package's search path takes the repository's root as well.
# There is deliberately no top-level `data` or `models` package: a user's own data/ folder would
# shadow it.
if not (Path(__file__).parent / "models").is_dir() and (ROOT / "models" / "__init__.py").is_file():
    __path__.append(str(ROOT))  # type: ignore[name-defined]  # noqa: F821


def _command() -> str:
    """``python -m sweeper[.command]``, as this process was started. While
    Python still locates the module (a Ctrl-C in its imports), ``sys.argv[0]``
    is "-m": then the module named after ``-m`` in ``sys.orig_argv``."""
    argv = list(getattr(sys, "orig_argv", []))
    module = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else ""
    if sys.argv[:1] == ["-m"] and module.startswith("sweeper"):
        return f"python -m {module.removesuffix('.__main__')}"
    name = Path(sys.argv[0]).stem if sys.argv and sys.argv[0] not in ("-m", "-c", "") else "sweeper"
    return "python -m sweeper" + ("" if name in ("__main__", "sweeper") else f".{name}")


def _interrupted_hook(
    kind: type, value: BaseException, tb: object, _default: Callable = sys.excepthook
) -> None:
    """A command's Ctrl-C that nothing caught (in its imports, its first
    seconds, a read command's work): one line instead of a traceback; the
    process then ends by SIGINT as Python's own does (exit 130 in a shell)."""
    cause: BaseException | None = value
    # an import that Ctrl-C cut short
    while cause is not None and not isinstance(cause, KeyboardInterrupt):
        # raises its own error (scipy: 'initialization failed')
        cause = cause.__cause__ or cause.__context__
    if issubclass(kind, KeyboardInterrupt) or cause is not None:
        command = _command()
        # SIGTERM, SIGHUP: its own name and code (143, 129)
        stop = sys.modules.get("sweeper.base.stop")
        why, code = (
            (stop.reason(), stop.exit_code(cause))
            if stop and stop.seen()
            else ("interrupted (Ctrl-C)", 130)
        )
        # (a terminal that is gone, SIGHUP: not said)
        _output.say(f"{command}: {why}: what it had written stays; run it again to finish")
        # Python ends with 130 on its own only for a KeyboardInterrupt itself
        if cause is not value or code != 130:
            with suppress(OSError, ValueError):
                sys.stderr.flush()
            os._exit(code)
        return
    _default(kind, value, tb)


# ``python -m sweeper[.command]``: while Python locates the module, sys.argv[0]
# is "-m" (and this package is the first thing it imports). Only then, never
# for a program or a notebook that imports sweeper, Ctrl-C is one line.
if sys.argv[:1] == ["-m"]:
    sys.excepthook = _interrupted_hook

# The Python API (sweeper.api): ``sweeper.multirun([...])``, ``sweeper.run([...])``.
# Imported on first use, so that ``import sweeper`` stays as light as the commands
# need it (tests/test_startup.py). The user's surface (docs/guide/python.md). A
# model's contract and its check live where a user imports them:
# ``sweeper.models.Model`` and ``sweeper.check.check_model`` (docs/guide/models.md).
__all__ = ["RunResult", "SweepFailed", "SweepResult", "multirun", "run"]
_API = tuple(__all__)


def __getattr__(name: str):  # noqa: ANN202  (PEP 562)
    if name in _API:
        # by name, not ``from sweeper import api``: the package sits below every
        # module of its own, the API's included (tests/test_layout.py's import
        # graph); this is a look-up at the caller's request, not a dependency
        return getattr(importlib.import_module("sweeper.api"), name)
    raise AttributeError(f"module 'sweeper' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])


@contextmanager
def settled() -> Iterator[None]:
    """Around a heavy import (MLflow's): no cyclic garbage collection while it loads, and
    every object alive after it (its modules, mostly) left out of the collector's later
    full passes (``gc.freeze``). Measured with ``gc.callbacks`` on the quick-start sweep:
    six full passes walked MLflow's ~500k objects for 0.5 s of its 2.2 s, the last 176 ms
    inside the summary. Objects made later are collected as before.

    Use it once a process, around the import itself (``sweeper.tracking.store.client``
    does only while MLflow is not imported yet): a freeze later on (each job's store
    client) would make permanent whatever the sweep holds at that moment — the previous
    jobs' configs, whose cycles the collector would then never free (~1 MB a job)."""
    # lazy: saves ~0.5 ms at this module's import (measured)
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        gc.freeze()


def main_exit(fn: Callable[[], "int | None"], goes_on: str = "") -> NoReturn:
    """Run a command's ``fn`` and end the process with its code, as
    ``sys.exit(fn())`` would — non-daemon threads joined, ``atexit`` handlers run
    (loky's workers, MLflow's telemetry, logging), stdio flushed — but without the
    interpreter's teardown of every module and object, which takes 0.6-1.1 s once
    MLflow is imported (measured: docs/benchmarks.md) and which the OS does at once.

    A standard output that cannot be written is said once and dropped
    (:mod:`sweeper.base.output`): the command ends with 1 unless ``goes_on``
    says what it goes on with (a sweep: its runs, recorded in the store).

    Only for ``if __name__ == "__main__":``: a command called in-process keeps
    returning normally; under a profiler or tracer (``python -m cProfile -m sweeper``,
    coverage), or with ``SWEEPER_PUBLIC_ONLY=exit``, the exit is Python's own."""

    # lazy: saves ~4.6 ms at this module's import (measured)
    from sweeper.base import output, state, stop
    from sweeper.base.tested import shortcut

    output.guard(goes_on)
    # Ctrl-C, SIGTERM, SIGHUP: KeyboardInterrupts that wait for a store transaction to end
    stop.install()
    try:
        code = fn()
        # a signal a library swallowed on its way (an import's
        if (signalled := stop.masked()) is not None:
            # `except ImportError`, a fallback's `except Exception`): the command was interrupted
            raise signalled
    except SystemExit as e:
        code = e.code
    # sys.exit("message"): Python prints it, exit 1
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    # a command whose output is its result: it did not do its job
    if state.process().stdout_broken is not None and not code and not goes_on:
        code = 1
    # cProfile, coverage, a debugger (they write their results in the teardown),
    # or the shortcut "exit" turned off (SWEEPER_PUBLIC_ONLY): Python's own exit
    if sys.getprofile() is not None or sys.gettrace() is not None or not shortcut("exit"):
        sys.exit(code)
    stop.exiting(code or 0)
    # as Python's own exit: threading's exit hooks (concurrent.futures and loky
    # stop their threads there), then every non-daemon thread joined, then atexit
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    else:
        for thread in threading.enumerate():
            if thread is not threading.main_thread() and not thread.daemon:
                thread.join()
    atexit._run_exitfuncs()
    output.drained(sys.stdout, sys.stderr)  # a closed pipe: nothing more can be written anyway
    os._exit(code or 0)

"""``python -m sweeper ARGS`` (or ``python -m sweeper.report ARGS``, any module of the package) for the tests, forked
from a process that imported sweeper, Hydra and MLflow once.

Each command-line run of the suite used to start a fresh interpreter, and about 2 of the 2.7 CPU-seconds of a small
sweep went to imports (MLflow 1.1 s, its SQL store and ORM 0.8 s): with a few hundred runs, most of the suite's
time. Here each test process starts one *zygote* (``python tests/forked_cli.py``) that imports what a sweep's main
process imports and then waits; a run is a ``fork()`` of it that does what ``python -m sweeper`` does next (its
folder, its environment, its arguments, ``runpy.run_module(module, run_name="__main__")``, the interpreter's exit
steps), its output in files, its exit status sent back. Everything a run does is the real command's: its Hydra
multirun, its launcher's workers (fresh interpreters of their own), its MLflow store; only the imports were done
before.

What a fork cannot reproduce: a variable read when a module is imported (the zygote imported them with the test
process's environment). The zygote records the variables its imports read (:func:`_preload_recording`), and a run
given an ``env`` of its own is forked only when each is ``SWEEPER_*`` and none was read (:meth:`Zygote.forks`);
any other, or any run while ``TESTS_FRESH_CLI=1``, is a fresh interpreter (:func:`conftest.cli`), as are the tests
that send signals or time processes (they start their own).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

PREFIX = "SWEEPER_"  # the variables a run given an env of its own may be forked with (Zygote.forks)
FRESH = "TESTS_FRESH_CLI"  # "1": every conftest.cli run a fresh interpreter (the forks' behaviour checked)


def _preload() -> None:
    """What a sweep's main process imports (measured: its sys.modules at exit), so that a fork starts past it."""
    import gc

    import hydra._internal.hydra  # noqa: F401
    import mlflow  # noqa: F401
    import mlflow.pyfunc  # noqa: F401  (this and below: what a small multirun imported after the rest, ~0.1 s)
    import mlflow.store.tracking.sqlalchemy_store  # noqa: F401
    import numpy  # noqa: F401
    import sqlalchemy.dialects.sqlite  # noqa: F401
    import sqlalchemy.orm
    import tabulate  # noqa: F401
    import threadpoolctl  # noqa: F401

    import sweeper.__main__  # noqa: F401
    import sweeper.advise  # noqa: F401  (the other commands: ~0.15 s more, once)
    import sweeper.check  # noqa: F401
    import sweeper.compare  # noqa: F401
    import sweeper.insight.baselines  # noqa: F401
    import sweeper.insight.importance  # noqa: F401
    import sweeper.insight.plots  # noqa: F401
    import sweeper.insight.publish  # noqa: F401
    import sweeper.insight.standing  # noqa: F401
    import sweeper.job.task  # noqa: F401
    import sweeper.promote  # noqa: F401
    import sweeper.report  # noqa: F401
    import sweeper.runs  # noqa: F401
    import sweeper.summary  # noqa: F401
    import sweeper.sweep.pruning  # noqa: F401
    import sweeper.sweep.launch  # noqa: F401
    import sweeper.tracking.pyfunc  # noqa: F401
    import sweeper.tracking.store  # noqa: F401
    import sweeper.upload  # noqa: F401

    sqlalchemy.orm.configure_mappers()  # MLflow's ORM classes, configured at a store's first query otherwise
    gc.freeze()  # the imported objects stay shared pages in each fork (no collection writes to them)


class _Recording(os._Environ):  # type: ignore[misc,name-defined]
    """``os.environ`` while the zygote imports: the variables read (``"*"``: all of them, by iteration)."""

    read: set[str] = set()

    def __getitem__(self, key):
        caller = sys._getframe(1).f_code
        if not (caller.co_name == "__iter__" and "_collections_abc" in caller.co_filename):
            _Recording.read.add(key)  # (an items() or values() loop is said by __iter__)
        return super().__getitem__(key)

    def __contains__(self, key):
        _Recording.read.add(key)
        return super().__contains__(key)

    def __iter__(self):
        # all of them, except for a reader known to look at its own prefix only (tqdm: TQDM_*)
        frame = sys._getframe(1)
        while frame and frame.f_code.co_filename.endswith(
            ("_collections_abc>", "_collections_abc.py", "forked_cli.py")
        ):
            frame = frame.f_back
        caller = frame.f_code.co_filename if frame else ""
        _Recording.read.add("TQDM_*" if caller.endswith(f"tqdm{os.sep}utils.py") else "*")
        return super().__iter__()


def _preload_recording() -> list[str]:
    """:func:`_preload`, and the environment variables Python code read meanwhile (os.environ, os.getenv)."""
    os.environ.__class__ = _Recording
    try:
        _preload()
    finally:
        os.environ.__class__ = os._Environ
    return sorted(k for k in _Recording.read if isinstance(k, str))


def _run_child(request: dict[str, Any]) -> None:
    """In the fork: become ``python -m sweeper ARGS`` in ``cwd`` with ``env``; never returns."""
    import atexit
    import runpy
    import traceback

    code: Any = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for fd, path, flags in (
            (0, os.devnull, os.O_RDONLY),
            (1, request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
            (2, request["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        ):
            os.dup2(os.open(path, flags, 0o600), fd)
        module = request.get("module", "sweeper")
        sys.argv = ["-m", *request["args"]]
        sys.path[0] = (
            os.getcwd()
        )  # python -m puts the working folder first (a user's modules there import)
        # run as __main__ afresh, as python -m does (preloaded for its imports only; runpy warns if it is there):
        # a package's __main__, or the module itself (a later import of it makes a second copy, as in python -m)
        loaded = sys.modules.get(module)
        sys.modules.pop(f"{module}.__main__" if hasattr(loaded, "__path__") else module, None)
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            code = e.code
        if code is None:
            code = 0
        elif not isinstance(code, int):  # sys.exit("message"): Python prints it, exit 1
            print(code, file=sys.stderr)
            code = 1
        threading._shutdown()  # the interpreter's exit: non-daemon threads joined, atexit handlers run
        atexit._run_exitfuncs()
    except BaseException:  # what Python prints for an uncaught exception, and its exit status
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def _wait(pid: int, timeout: float) -> int:
    """The child's exit status as ``subprocess`` gives it (negative: the signal that ended it); killed after
    ``timeout`` s, then reported as None."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.01)


def serve() -> None:
    """The zygote: preload, say "ready" and the variables its imports read, then fork one run per request line
    (JSON) and answer its exit status."""
    read = _preload_recording()
    out = sys.stdout
    out.write("ready " + json.dumps(read) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _run_child(request)
        out.write(json.dumps({"returncode": _wait(pid, request["timeout"])}) + "\n")
        out.flush()


class Zygote:
    """One test process's zygote: started at its first run, ended with the process. It imports with ``env``
    (the test process's environment as the session set it up, not as the test that happens to start it has
    patched it)."""

    def __init__(self, env: dict[str, str]) -> None:
        self._env = dict(env)
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self.read: frozenset[str] = frozenset()  # the variables its imports read

    def _started(self) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                [sys.executable, str(Path(__file__)), "serve"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=Path(__file__).parent,
                env=self._env,
            )
            ready = self._proc.stdout.readline()
            if not ready.startswith("ready "):
                raise RuntimeError(f"the CLI zygote did not start (it said {ready!r})")
            self.read = frozenset(json.loads(ready[len("ready ") :]))
        return self._proc

    def forks(self, env: dict[str, str]) -> bool:
        """Whether a run with these variables added to the environment behaves forked as in a fresh interpreter:
        each is sweeper's own (``SWEEPER_*``: no native library reads them at its start) and no Python code read
        it while the zygote imported (so no import decided anything by it; sweeper reads them when it runs)."""
        with self._lock:
            self._started()
        return "*" not in self.read and all(
            k.startswith(PREFIX) and k not in self.read for k in env
        )

    def run(
        self,
        args: list[str],
        cwd: Path,
        env: dict[str, str],
        timeout: float,
        module: str = "sweeper",
    ) -> subprocess.CompletedProcess:
        """``python -m MODULE ARGS`` forked in ``cwd`` with ``env``; its output read back from two temporary
        files (removed)."""
        with tempfile.TemporaryDirectory(prefix="sweeper-cli-") as scratch:
            return self._run(module, args, cwd, env, timeout, Path(scratch))

    def _run(
        self,
        module: str,
        args: list[str],
        cwd: Path,
        env: dict[str, str],
        timeout: float,
        scratch: Path,
    ) -> subprocess.CompletedProcess:
        out, err = scratch / "stdout.txt", scratch / "stderr.txt"
        request = {
            "module": module,
            "args": args,
            "cwd": str(cwd),
            "env": env,
            "out": str(out),
            "err": str(err),
            "timeout": timeout,
        }
        with self._lock:
            proc = self._started()
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            answer = proc.stdout.readline()
        if not answer:
            raise RuntimeError(
                f"the CLI zygote ended (exit {proc.wait()}) during: python -m {module} {args}"
            )
        code = json.loads(answer)["returncode"]
        argv = [sys.executable, "-m", module, *args]
        stdout, stderr = out.read_text(), err.read_text()
        if code is None:
            raise subprocess.TimeoutExpired(argv, timeout, stdout, stderr)
        return subprocess.CompletedProcess(argv, code, stdout, stderr)

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.stdin.close()
            self._proc.wait(timeout=60)


if __name__ == "__main__" and sys.argv[1:] == ["serve"]:
    serve()

"""A job's final MLflow records, written by a second process while the next job (or group) trains.

The end of a run — its ``log_batch`` (params, metrics, curves, system metrics), data set inputs,
logged model, artifact uploads and status (:func:`sweeper.tracking.ending.end_runs`) — is a dozen
requests to the store: ~30 ms a job on the embedded SQLite store of this 2-core machine,
~100-200 ms to a tracking server, more over a network. The launching process of a multirun of
:data:`MIN_JOBS` jobs or more therefore starts a :class:`Writer` (``sweeper.sweep.start``
decides; :func:`prestart` starts it as the command begins when the command line already shows
such a sweep): ``python -m sweeper.tracking.writer``, a process of its own that imports MLflow,
opens the store(s) and ends the runs it is sent, in order, while the jobs go on — on a SQL store
the runs waiting when it is free in one transaction (:func:`sweeper.tracking.ending.end_each`;
one at a time when that fails, each then with its own outcome). The run itself is created by the
job or its group (so it shows RUNNING and resume finds it), only its end is handed over.

Nothing is lost on the way:

- a job's ``result.json`` is written first with ``pending_upload`` (and
  ``recording``) set; the writer clears them once the run is in the store, or keeps
  ``pending_upload`` with the ``tracking_error`` when the store fails
  (``python -m sweeper.upload`` then logs it, as for a job whose server went away);
- at most :data:`MAX_PENDING` runs wait (a job waits when more would): memory stays bounded;
- the sweep's end, Ctrl-C (:func:`sweeper.sweep.interrupted`) and the process's exit wait for the
  writer to finish what it was sent (:func:`drain`); the writer runs in a session of its
  own (Ctrl-C at the terminal is the launching process's to handle) and, if the
  launching process dies (SIGKILL), finishes what it was sent before it exits.

Jobs that do not run in the launching process (joblib workers,
submitit, ray) end their runs themselves.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable

from sweeper import settled, tracking
from sweeper.base import state
from sweeper.base.environment import turned_off_by, writer_on
from sweeper.base.files import read_json
from sweeper.base.process import alive, ended, sent
from sweeper.base.output import masked, quietly
from sweeper.base.stop import STOP
from sweeper.base.tested import shortcut
from sweeper.tracking.store import mlflow_defaults

__all__ = [
    "MIN_JOBS",
    "MIN_JOBS_BATCHED",
    "RECORDING",
    "Writer",
    "current",
    "drain",
    "estimated_jobs",
    "interrupt",
    "prestart",
    "recording",
    "request",
    "start",
    "stop",
    "wanted",
    "write_result",
]

log = logging.getLogger("sweeper")

# A multirun of this many jobs or more, run in the launching process by the basic launcher,
# hands the end of each run to a writer (sweeper.sweep.start): 8 when a job logs to a
# tracking server (~100-200 ms a run's end), 16 on the embedded SQLite store (~30 ms).
# Measured on 2 cores, basic launcher, fresh store copies (docs/benchmarks.md): on SQLite 8
# jobs 2.15-2.25 s with the writer against 2.06-2.11 s without, 12 jobs even, 20 jobs 2.54
# against 2.82 s — below the threshold the writer's own start (it imports MLflow, ~1 s of
# the other core while this process imports it too) outlasts what it takes off the jobs.
MIN_JOBS = MappingProxyType({"server": 8, "sqlite": 16})
# The batched launcher's jobs train in worker processes and end in bulk in this one: there the
# writer is a third process beside the two workers of a 2-core machine, and pays on the embedded
# store only from ~150 jobs. Measured on 2 idle cores (2026-12-07, SWEEPER_WRITER=on
# bench/shortcuts_bench.py --shortcuts writer, the one-shape sweep, writer on against off,
# median of 3-5, interleaved):
# 64 jobs (grid-64) -3.0 % and -4.7 % (the writer slower), 128 jobs 0.0 %, 200 jobs +21.8 %,
# 400 jobs +32.6 %, 1,000 jobs +59.8 %; the peers' 32-job diabetes grid 9.56 s with it against
# 8.87 s without (median of 5). SWEEPER_WRITER=on starts it whatever the sweep's size.
MIN_JOBS_BATCHED = MappingProxyType({"server": MIN_JOBS["server"], "sqlite": 150})
# The launchers whose jobs run in the launching process: as hydra/launcher choices
# (the command line) and as the composed config's hydra.launcher._target_ class names
IN_PROCESS = ("basic", "batched")
IN_PROCESS_CLASSES = ("BasicLauncher", "BatchedLauncher")
# after Ctrl-C, the longest the writer gets to record what it was sent (then: upload)
INTERRUPT_WAIT_S = 30.0
# runs handed over and not yet written (~3 KB each: thinned curves): a job waits beyond this
MAX_PENDING = 64
BULK = MAX_PENDING  # runs ended in one transaction at most (those waiting when the writer is free)
RECORDING = "recording"  # result.json's flag while the writer (this pid) has the run


def write_result(path: Path, result: dict[str, Any]) -> None:
    """``result.json`` (or ``sweep.json``) written whole or not at all (a reader never
    sees half of it), a URI's password masked (:func:`sweeper.base.output.masked`: the
    process that masked it connects again with it)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(masked(json.dumps(result, indent=2, default=str)))
    os.replace(tmp, path)


class Writer:
    """The launching process's side: :meth:`submit` hands a run's end
    over, :meth:`drain` waits for all.

    The writer is ``python -m sweeper.tracking.writer`` (not ``multiprocessing``'s spawn,
    which would first import the launching module — Hydra, ~0.4 s — in the child); requests
    and answers are length-prefixed pickles (``multiprocessing.connection``) over two pipes
    of its own, so nothing the writer or MLflow prints can get in their way. ``uris``: the
    stores it opens at once (:meth:`open`), while this process gets to its first job.
    """

    def __init__(self, uris: Iterable[str] = ()) -> None:
        # lazy: saves ~24 ms at this module's import (measured)
        from multiprocessing.connection import Connection

        # a send is in the pipe when it returns, and the writer sees the end of
        # the requests when this process is gone (its write end closes with it)
        req_r, req_w = os.pipe()
        ans_r, ans_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sweeper.tracking.writer", str(req_r), str(ans_w)],
                stdin=subprocess.DEVNULL,
                pass_fds=(req_r, ans_w),
                start_new_session=True,
            )
        finally:
            os.close(req_r)
            os.close(ans_w)
        self.requests, self.answers = (
            Connection(req_w, readable=False),
            Connection(ans_r, writable=False),
        )
        self.pending: list[Path] = []  # the result.json files of the runs handed over, in order
        self.submitted = 0  # runs handed over in all
        self.failed: list[str] = []  # the tracking errors of runs kept for upload
        if uris:
            self.open(uris)

    @property
    def pid(self) -> int:
        """The process that records the runs handed over (a job's result.json says it)."""
        return self.proc.pid

    def open(self, uris: Iterable[str]) -> None:
        """Have the writer open these stores now, before their first run arrives."""
        sent(self.requests, {"open": sorted(uris)})  # a writer gone: the first submit finds out

    def submit(
        self,
        uri: str,
        run_id: str,
        info: tuple[str, str] | None,
        kwargs: dict[str, Any],
        result_path: Path,
    ) -> None:
        """Hand over the end of run ``run_id`` (``kwargs``: its
        :class:`sweeper.tracking.ending.Ending`'s ``end``) whose job wrote ``result_path``;
        returns at once unless :data:`MAX_PENDING` runs already wait."""
        self.make_room()
        self.pending.append(result_path)
        self.submitted += 1
        # a writer gone: _take keeps the run for upload
        sent(self.requests, request(uri, run_id, info, kwargs, result_path))
        while self.pending and self._take(timeout=0):
            pass

    def make_room(self) -> None:
        """Wait while :data:`MAX_PENDING` runs handed over are not written
        yet (not once a stop is asked for: the job's run is handed over at
        once, and the interruption waits for the writer)."""

        while len(self.pending) >= MAX_PENDING and not STOP.is_set():
            self._take(timeout=None)

    def _take(self, timeout: float | None) -> bool:
        """One answer (a written run): True, or False when none came within ``timeout`` (None:
        until one does, or the writer is gone — its runs then stay pending for upload)."""
        while True:
            answer = self._answer(0.5 if timeout is None else timeout, 5)
            if answer is None:
                alive = self.proc.poll() is None
                if timeout is None and alive:
                    continue
                # the writer died: what it had stays pending_upload in result.json
                if timeout is None:
                    why = (
                        f"the writer process ended ({ended(self.proc.returncode)}) before "
                        "recording it"
                    )
                    for path in self.pending:
                        self._kept(path, why)
                    self.pending = []
                return False
            self.pending.pop(0)
            _said(answer)
            if answer.get("error"):
                self.failed.append(answer["error"])
            return True

    def _answer(self, timeout: float, gone_wait: float) -> Any:
        """The writer's next answer within ``timeout`` seconds, else None; None too once its
        answers end (the writer gone or going), after waiting at most ``gone_wait`` seconds
        for its process to end."""
        try:
            return self.answers.recv() if self.answers.poll(timeout) else None
        except (EOFError, OSError):
            _wait(self.proc, gone_wait)
            return None

    def drain(self) -> list[str]:
        """Wait until every run handed over is written; the tracking
        errors of those kept for upload."""
        while self.pending:
            self._take(timeout=None)
        failed, self.failed = self.failed, []
        return failed

    def end(self, timeout: float = INTERRUPT_WAIT_S) -> list[str]:
        """After Ctrl-C: close the requests (the writer records the whole ones it has, then
        exits; one cut short by the interruption ends its reading), wait for it at most
        ``timeout`` seconds (then it is killed), and keep for ``python -m sweeper.upload``
        every run it did not record. Which ones is told by their result.json, not by the
        answers (Ctrl-C may have cut one short): the writer clears ``recording`` once a run
        is in the store or kept. Returns the tracking errors of the runs kept."""

        if self.pending:
            log.info(
                "recording the %d finished run(s) handed to the writer (at most %.0f s)...",
                len(self.pending),
                timeout,
            )
        quietly(self.requests.close)  # (a writer already gone: its end is closed)
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            # answers are read (and dropped) so that the writer never waits to send one
            self._answer(0.1, max(0.0, deadline - time.monotonic()))
        if self.proc.poll() is None:
            self.proc.kill()
            _wait(self.proc, 5)
        why = f"interrupted before the writer process recorded it ({ended(self.proc.returncode)})"
        recorded = []
        for path in self.pending:
            if (result := read_json(path)) is None:  # its folder is gone: nothing is left to keep
                continue
            if result.get(RECORDING) == self.proc.pid:
                self._kept(path, why)
            elif not result.get("pending_upload"):
                recorded.append(f"run {result.get('run_id')} (job {path.parent.name})")
        if recorded:  # which ones, exactly: the sweep's line counts them finished
            log.info(
                "the writer recorded %d finished run(s) after the interruption: %s",
                len(recorded),
                ", ".join(recorded),
            )
        self.pending = []
        self.answers.close()
        failed, self.failed = self.failed, []
        return failed

    def _kept(self, path: Path, why: str) -> None:
        """The run of ``path`` (a result.json) stays
        for ``python -m sweeper.upload``, and the sweep says so."""
        if _kept(path, why):
            self.failed.append(why)

    def close(self) -> None:
        """Wait for every run handed over, then end the writer; one that
        was never handed a run (a refused sweep, one too short for it) is
        stopped at once, not waited for while it still imports MLflow."""
        self.drain()
        self.requests.close()  # the writer's end of requests: it stops
        if not self.submitted:
            self.proc.kill()
        _wait(self.proc, 30)
        self.answers.close()


def request(uri: str, run_id: str, info: Any, kwargs: dict, result_path: Path) -> dict:
    """A run's end as the writer takes it (:meth:`Writer.submit`'s arguments)."""
    return dict(uri=uri, run_id=run_id, info=info, kwargs=kwargs, result=str(result_path))


def _kept(path: Path, why: str) -> bool:
    """The run of ``path`` (a result.json) stays for ``python -m sweeper.upload``, and the sweep
    says so; False where its folder is gone (nothing is left to keep)."""
    try:
        _keep(path, why)
    except (OSError, ValueError):
        return False
    _say_kept(why, path.parent)
    return True


def _say_kept(why: str, folder: Path) -> None:
    log.error(
        "%s; the result is kept in %s: upload it with python -m sweeper.upload %s",
        why,
        folder,
        folder.parent,
    )


def _said(answer: dict[str, Any]) -> None:
    """A run's answer (:func:`_settled`) said as the job itself would have said it."""
    # recorded without the files its deleted folder held: said, nothing to upload
    if answer.get("gone"):
        log.warning("run %s is recorded: %s", answer["run_id"], answer["gone"])
    if answer.get("error"):
        _say_kept(answer["error"], Path(answer["folder"]))


def _wait(proc: Any, timeout: float) -> None:
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass


def current() -> Writer | None:
    """The launching process's writer, from the sweep's start to its end (or
    the process's exit): the sweep's state's (:mod:`sweeper.base.state`)."""
    return state.current().writer


def start(uris: Iterable[str] = ()) -> bool:
    """Start the sweep's writer (once) and have it open the stores
    ``uris``; False when no writer can be started here (no ``pass_fds``:
    Windows; no process left): the jobs then end their runs themselves."""
    now = state.current()
    if now.writer is None:
        try:
            now.writer = Writer(uris)
        except (OSError, ValueError) as e:
            log.warning("no writer process (%s): each job ends its own run", e)
            return False
        atexit.register(stop)  # at the process's exit the writer finishes what it was sent
    elif uris:
        now.writer.open(uris)
    return True


def wanted(n_jobs: int, uris: Iterable[str], launcher: str) -> bool:
    """Whether a sweep of ``n_jobs`` jobs logging to ``uris``, launched by the class ``launcher``
    (hydra.launcher._target_), gets a writer."""
    kind = "basic" if launcher.endswith("BasicLauncher") else "batched"
    return (
        launcher.endswith(IN_PROCESS_CLASSES)
        and (writer_on() or n_jobs >= min_jobs(uris, kind))
        and shortcut("writer")
    )


def prestart(args: list[str]) -> None:
    """Start the writer at once when the command line ``args`` alone shows a multirun of at least
    :func:`min_jobs` jobs in this process (the default launcher, or
    ``hydra/launcher=basic``): its import of MLflow (~1 s) then runs beside Hydra's
    start and the sweep's checks instead of after them. ``sweeper.sweep.start`` decides
    with the composed jobs, and stops a writer it does not need."""
    if turned_off_by("writer") or not {"-m", "--multirun"} & set(args):
        return
    launchers = [
        a.rpartition("=")[2]
        for a in args
        if a.lstrip("+").startswith(("hydra/launcher=", "override hydra/launcher="))
    ]
    launcher = launchers[-1] if launchers else "batched"  # conf/config.yaml's default
    if launcher not in IN_PROCESS:
        return
    uris = [a.partition("=")[2] for a in args if a.startswith("tracking.uri=")]
    uris += ["http://"] if "tracking=server" in args else []
    if writer_on() or estimated_jobs(args) >= min_jobs(uris, launcher):
        start()


def estimated_jobs(args: list[str]) -> int:
    """The jobs of the basic sweeper's grid that the command line lists (sweeps of a
    config file, globs and intervals not counted): at most the multirun's size."""
    # lazy: saves ~346 ms at this module's import (measured)
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        overrides = OverridesParser.create().parse_overrides(
            [a for a in args if not a.startswith("-")]
        )
    except HydraException:  # its OverrideParseException: Hydra says what is wrong, later
        return 0
    n = 1
    for o in overrides:
        if (
            o.is_sweep_override()
            and o.is_discrete_sweep()
            and not o.value_type.name.startswith("GLOB")
        ):
            n *= max(1, sum(1 for _ in o.sweep_string_iterator()))
    return n


def min_jobs(uris: Iterable[str], launcher: str = "batched") -> int:
    """The smallest sweep that gets a writer, for the stores ``uris`` of its jobs and the
    launcher (``basic`` or ``batched``) that runs them."""
    return (MIN_JOBS if launcher == "basic" else MIN_JOBS_BATCHED)[
        "server" if any(u.startswith(("http://", "https://")) for u in uris) else "sqlite"
    ]


def drain() -> list[str]:
    """Wait for the writer (if any) to write every run handed over;
    the errors of those kept for upload."""
    w = current()
    return w.drain() if w is not None else []


def stop() -> None:
    now = state.current()
    if now.writer is not None:
        now.writer.close()
        now.writer = None


def interrupt() -> list[str]:
    """Ctrl-C: let the writer (if any) record what it was sent, within :data:`INTERRUPT_WAIT_S`,
    and end it (:meth:`Writer.end`); the tracking errors of the runs kept for upload."""
    now = state.current()
    if now.writer is None:
        return []
    w, now.writer = now.writer, None
    return w.end()


def _serve(requests: Any, answers: Any) -> None:
    """The writer's loop: end each run it is sent, in order, until the launching process
    closes its end of the requests or is gone (then after the ones already sent).

    A thread takes the requests off the pipe as they come (so a job never waits for a send,
    not even while this process still imports MLflow); this thread unpickles them and ends
    the runs, one at a time (unpickling a run's end imports MLflow's modules for its data
    set inputs: in the other thread, while this one imported MLflow, one got a module half
    imported, and the writer ended with an ImportError, its runs left for upload).
    """
    # lazy: saves ~2.0 ms at this module's import (measured)
    import queue

    # Ctrl-C, SIGTERM and SIGHUP are the launching process's to handle (a SIGTERM sent to
    # every process of the sweep, e.g. by docker stop, or the SIGHUP of a closed terminal,
    # included): the writer finishes what it was handed, and ends when its requests end
    # lazy: saves ~3.4 ms at this module's import (measured)
    from sweeper.base import stop

    stop.ignore()
    inbox: "queue.Queue[bytes]" = queue.Queue()

    def receive() -> None:
        while True:
            try:
                inbox.put(requests.recv_bytes())
            # the end of the requests (EOFError), or half of one (Ctrl-C cut a send)
            except Exception:  # noqa: BLE001
                inbox.put(pickle.dumps(None))
                return

    threading.Thread(target=receive, daemon=True, name="sweeper-writer-inbox").start()

    mlflow_defaults()
    with settled():
        # lazy: saves ~3327 ms at this module's import (measured)
        import mlflow  # noqa: F401  (now, not when the first run arrives)

    clients: dict[str, Any] = {}

    ended = False
    while not ended:
        # the runs waiting now, in order: ended together (one transaction a store)
        runs: list[dict[str, Any]] = []
        job = pickle.loads(inbox.get())
        while True:
            if job is None:
                ended = True
                break
            if "open" in job:  # the stores of the runs to come: opened before the first one arrives
                for uri in job["open"]:  # one that fails: the first run that needs it says why
                    _opened(clients, uri, tracking)
            else:
                runs.append(job)
            if len(runs) >= BULK:
                break
            try:
                job = pickle.loads(inbox.get_nowait())
            except queue.Empty:
                break
        for answer in _record_all(runs, clients, tracking):
            sent(answers, answer)  # nobody listens any more: the runs are still recorded
    os._exit(0)  # the interpreter's teardown (~1 s with MLflow) is skipped: everything is written


def main(argv: list[str]) -> None:
    """``python -m sweeper.tracking.writer REQUESTS_FD ANSWERS_FD``, started by :class:`Writer`."""
    # lazy: saves ~24 ms at this module's import (measured)
    from multiprocessing.connection import Connection

    _serve(Connection(int(argv[0]), writable=False), Connection(int(argv[1]), readable=False))


def _record_all(
    jobs: list[dict[str, Any]], clients: dict[str, Any], tracking: Any
) -> list[dict[str, Any]]:
    """End the runs ``jobs`` (in order), the answers in that order: consecutive runs of one
    store together (:func:`sweeper.tracking.ending.end_each`: on a SQL store in one
    transaction; when that fails, or elsewhere, one at a time, each with its own outcome)."""
    # lazy: saves ~28 ms at this module's import (measured)
    from sweeper.tracking import ending

    answers: list[dict[str, Any]] = []
    i = 0
    while i < len(jobs):
        j = i + 1
        while j < len(jobs) and jobs[j]["uri"] == jobs[i]["uri"]:
            j += 1
        batch, i = jobs[i:j], j
        uri = batch[0]["uri"]
        c = _opened(clients, uri, tracking)
        if isinstance(c, Exception):  # the store cannot be opened: each run says why
            outcomes: list[Exception | None] = [c] * len(batch)
        else:
            for job in batch:
                _remember(job)
            outcomes = ending.end_each(
                c, [ending.Ending(job["run_id"], job["kwargs"]) for job in batch]
            )
        answers += [_settled(job, _error(job, e, tracking)) for job, e in zip(batch, outcomes)]
    return answers


def _opened(clients: dict[str, Any], uri: str, tracking: Any) -> Any:
    """The client of the store at ``uri``, opened once; the error when it cannot be opened
    (tried again for the next runs: a server may be back)."""
    if uri not in clients:
        try:
            clients[uri] = tracking.client(uri)
        except Exception as e:  # noqa: BLE001  (said by each run that needed it)
            return e
    return clients[uri]


def _error(job: dict[str, Any], e: Exception | None, tracking: Any) -> str | None:
    """Why the job's run is kept for upload (None: it is in the store)."""
    if e is None:
        return None
    if isinstance(e, tracking.UNREACHABLE):
        return f"tracking.uri={job['uri']} failed at the end: {tracking.first_line(e)}"
    # (a bug): the run is kept for upload, and the sweep says so
    return f"recording run {job['run_id']} failed: {type(e).__name__}: {e}"


def _settled(job: dict[str, Any], error: str | None) -> dict[str, Any]:
    """The job's result.json updated (done, or kept for upload with the
    reason) and the answer for the launching process; a result.json that went
    with its folder (deleted under the sweep) is said as that, not kept."""
    path = Path(job["result"])
    answer = {"run_id": job["run_id"], "error": error, "folder": str(path.parent)}
    try:
        _keep(path, error) if error else _done(path)
    except FileNotFoundError:
        if not error:  # in the store; nothing is left to upload
            answer["gone"] = (
                f"its job folder {path.parent} was deleted under the sweep (its tag "
                "artifacts_missing "
                "names the files that went with it)"
            )
    except (OSError, ValueError) as e:
        answer["error"] = error or f"{path}: {e}"
    return answer


def _remember(job: dict[str, Any]) -> None:
    """The artifact URI and experiment of the job's run, as the job
    knew them (no ``get_run`` to end it)."""
    if job["info"]:
        state.current().runs[job["run_id"]] = tuple(job["info"])


def _done(path: Path) -> None:
    result = json.loads(path.read_text())
    result.pop(RECORDING, None)
    result.pop("pending_upload", None)
    write_result(path, result)


def _keep(path: Path, error: str) -> None:
    """The run stays for ``python -m sweeper.upload``, with the reason."""
    result = json.loads(path.read_text())
    result.pop(RECORDING, None)
    write_result(path, result | {"pending_upload": True, "tracking_error": error})


def recording(result: dict[str, Any]) -> bool:
    """Whether a live writer still has this job's run
    (``python -m sweeper.upload`` leaves it alone)."""

    pid = result.get(RECORDING)
    return bool(pid) and alive(int(pid))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])

"""A job's final MLflow records, written by a second process while the next job (or group) trains.

The end of a run — its ``log_batch`` (params, metrics, curves, system metrics), data set inputs, logged
model, artifact uploads and status (:func:`sweeper.tracking.finish_run`) — is a handful of requests to a
tracking server: ~100-200 ms a job on this 2-core machine, more over a network. The launching process of
a multirun that logs to a server therefore starts a :class:`Writer` with the sweep (``sweeper.sweep.start``,
which says when):
a process of its own (``multiprocessing``'s spawn) that opens the store once and ends each run it is sent,
in order, while the jobs go on. The run itself is created by the job (so it shows RUNNING and resume
finds it), only its end is handed over.

Nothing is lost on the way:

- a job's ``result.json`` is written first with ``pending_upload`` (and ``recording``) set; the writer
  clears them once the run is in the store, or keeps ``pending_upload`` with the ``tracking_error`` when
  the store fails (``python -m sweeper.upload`` then logs it, as for a job whose server went away);
- at most :data:`MAX_PENDING` runs wait (a job waits when more would): memory stays bounded;
- the sweep's end, Ctrl-C (:func:`sweeper.sweep.interrupted`) and the process's exit wait for the
  writer to finish what it was sent (:func:`drain`); the writer ignores SIGINT (Ctrl-C reaches the whole
  process group) and, if the launching process dies (SIGKILL), finishes its queue before it exits.

Jobs that do not run in the launching process (joblib workers, submitit, ray) end their runs themselves.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger("sweeper")

MAX_PENDING = 8  # runs handed over and not yet written: a job waits beyond this
RECORDING = "recording"  # result.json's flag while the writer (this pid) has the run


def write_result(path: Path, result: dict[str, Any]) -> None:
    """``result.json`` written whole or not at all (a reader never sees half of it)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(result, indent=2, default=str))
    os.replace(tmp, path)


class Writer:
    """The launching process's side: :meth:`submit` hands a run's end over, :meth:`drain` waits for all."""

    def __init__(self) -> None:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")  # a fresh interpreter: nothing of this process's state (threads, SQLite)
        # Pipes, not Queues: a send is in the pipe when it returns (a Queue's feeder thread could still hold it
        # when this process is killed), and the writer sees the end of its requests when this process is gone.
        requests, self.requests = ctx.Pipe(duplex=False)
        self.answers, answers = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_serve, args=(requests, answers), name="sweeper-writer")
        self.proc.start()
        requests.close()
        answers.close()
        self.pending: list[Path] = []  # the result.json files of the runs handed over, in order
        self.failed: list[str] = []  # the tracking errors of runs kept for upload

    def submit(self, uri: str, run_id: str, info: tuple[str, str] | None, kwargs: dict[str, Any], result_path: Path) -> None:
        """Hand over the end of run ``run_id`` (:func:`sweeper.tracking.finish_run`'s ``kwargs``) whose job
        wrote ``result_path``; returns at once unless :data:`MAX_PENDING` runs already wait."""
        while len(self.pending) >= MAX_PENDING:
            self._take(timeout=None)
        self.pending.append(result_path)
        try:
            self.requests.send({"uri": uri, "run_id": run_id, "info": info, "kwargs": kwargs, "result": str(result_path)})
        except OSError:  # the writer is gone: _take keeps the run for upload
            pass
        while self.pending and self._take(timeout=0):
            pass

    def _take(self, timeout: float | None) -> bool:
        """One answer (a written run): True, or False when none came within ``timeout`` (None: until one does,
        or the writer is gone — its runs then stay pending for upload)."""
        while True:
            try:
                ready = self.answers.poll(0.5 if timeout is None else timeout)
                answer = self.answers.recv() if ready else None
            except (EOFError, OSError):
                answer = None
                self.proc.join(timeout=5)
            if answer is None:
                if timeout is None and self.proc.is_alive():
                    continue
                if timeout is None:  # the writer died: what it had stays pending_upload in result.json
                    why = f"the writer process ended (exit code {self.proc.exitcode}) before recording it"
                    for path in self.pending:
                        try:
                            _keep(path, why)
                        except (OSError, ValueError):  # its folder is gone: nothing is left to keep
                            pass
                        log.error("%s; the result is kept in %s: upload it with python -m sweeper.upload %s",
                                  why, path.parent, path.parent.parent)
                        self.failed.append(why)
                    self.pending = []
                return False
            self.pending.pop(0)
            if answer.get("error"):  # said as the job itself would have said it
                folder = Path(answer["folder"])
                log.error("%s; the result is kept in %s: upload it with python -m sweeper.upload %s",
                          answer["error"], folder, folder.parent)
                self.failed.append(answer["error"])
            return True

    def drain(self) -> list[str]:
        """Wait until every run handed over is written; the tracking errors of those kept for upload."""
        while self.pending:
            self._take(timeout=None)
        failed, self.failed = self.failed, []
        return failed

    def close(self) -> None:
        self.drain()
        self.requests.close()  # the writer's end of requests: it stops
        self.proc.join(timeout=30)


# The launching process's writer, from the sweep's start to its end (or the process's exit).
WRITER: Writer | None = None


def start() -> None:
    global WRITER
    if WRITER is None:
        import atexit

        WRITER = Writer()
        atexit.register(stop)  # before multiprocessing joins its children: the writer is told to end


def drain() -> list[str]:
    """Wait for the writer (if any) to write every run handed over; the errors of those kept for upload."""
    return WRITER.drain() if WRITER is not None else []


def stop() -> None:
    global WRITER
    if WRITER is not None:
        WRITER.close()
        WRITER = None


def _serve(requests: Any, answers: Any) -> None:
    """The writer's loop: end each run it is sent, in order, until the launching process closes its end of
    the requests or is gone (then after the ones already sent)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the launching process's to handle; we finish
    from sweeper import tracking

    clients: dict[str, Any] = {}
    while True:
        try:
            job = requests.recv()
        except Exception:  # noqa: BLE001  the end of the requests (EOFError), or half of one (Ctrl-C cut a send)
            break
        answer = _record(job, clients, tracking)
        try:
            answers.send(answer)
        except OSError:  # nobody listens any more: the runs are still recorded
            pass
    os._exit(0)  # the interpreter's teardown (~1 s with MLflow) is skipped: everything is written


def _record(job: dict[str, Any], clients: dict[str, Any], tracking: Any) -> dict[str, Any]:
    """End one run and update its job's result.json: done, or kept for upload with the reason."""
    path = Path(job["result"])
    uri, run_id = job["uri"], job["run_id"]
    error = None
    try:
        c = clients.get(uri) or clients.setdefault(uri, tracking.client(uri))
        if job["info"]:
            tracking._runs[run_id] = tuple(job["info"])
        tracking.finish_run(c, run_id, **job["kwargs"])
    except tracking.UNREACHABLE as e:
        error = f"tracking.uri={uri} failed at the end: {tracking.first_line(e)}"
    except Exception as e:  # noqa: BLE001  (a bug): the run is kept for upload, and the sweep says so
        error = f"recording run {run_id} failed: {type(e).__name__}: {e}"
    try:
        _keep(path, error) if error else _done(path)
    except (OSError, ValueError) as e:
        error = error or f"{path}: {e}"
    return {"run_id": run_id, "error": error, "folder": str(path.parent)}


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
    """Whether a live writer still has this job's run (``python -m sweeper.upload`` leaves it alone)."""
    from sweeper.report import alive

    pid = result.get(RECORDING)
    return bool(pid) and alive(int(pid))

"""The writer process (sweeper.tracking.writer): a sweep that logs to a server hands each run's end to it; nothing is
lost when the store fails, the writer dies, or the launching process is killed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from conftest import FAST_ARGS, all_runs, cli, client_for, copy_store, mlflow_server
from sweeper import tracking, upload
from sweeper.base import tested
from sweeper.tracking import writer


@pytest.mark.slow
def test_a_sweep_to_a_server_ends_its_runs_in_the_writer(tmp_path, _template_store):
    db = copy_store(_template_store, tmp_path)
    lrs = [0.001 * (i + 1) for i in range(writer_min_jobs())]
    with mlflow_server(db) as url:
        proc = cli(
            tmp_path,
            "-m",
            "tracking=server",
            f"tracking.uri={url}",
            "lr=" + ",".join(map(str, lrs)),
            *FAST_ARGS,
        )
    assert proc.returncode == 0, proc.stderr
    assert "from a writer process" in proc.stdout + proc.stderr
    children = [r for r in all_runs(db) if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == len(lrs) and {r.info.status for r in children} == {"FINISHED"}
    # the whole end of each run: metrics, curves, params, inputs, its logged model
    for r in children:
        assert {"val_mse", "test_mse", "train_time_s"} <= set(r.data.metrics) and r.data.params[
            "lr"
        ]
        assert len(r.inputs.dataset_inputs) == 3 and r.outputs.model_outputs
    results = [json.loads(p.read_text()) for p in (tmp_path / "sweep").glob("*/result.json")]
    assert len(results) == len(lrs)
    assert not any(r.get("pending_upload") or r.get(writer.RECORDING) for r in results)


def writer_min_jobs() -> int:
    return writer.MIN_JOBS["server"]


def _hand_over(w: "writer.Writer", uri: str, jobs: list) -> None:
    """Each job's (run id, result.json, end) handed to the writer ``w``, then waited for: none failed."""
    for run_id, path, end in jobs:
        w.submit(uri, run_id, None, end, path)
    assert w.drain() == []


def _job(tmp_path: Path, c, uri: str, name: str) -> tuple[str, Path, dict]:
    """A started run and its job folder's result.json, as a job leaves them for the writer."""
    exp = tracking.experiment_id(c, "writer", uri)
    run_id = tracking.start_run(c, exp, name, {"device": "cpu"})
    folder = tmp_path / name
    folder.mkdir()
    np.savez(
        folder / "curves.npz",
        train_loss_steps=[0, 10],
        train_loss_values=[1.0, 0.5],
        val_loss_steps=[0, 10],
        val_loss_values=[1.2, 0.7],
    )
    result = {
        "status": "FINISHED",
        "run_id": run_id,
        "tracking_uri": uri,
        "experiment": "writer",
        "device": "cpu",
        "fingerprint": name,
        "overrides": [f"lr={name}"],
        "metrics": {"val_mse": 2.0},
        "config": {"lr": name},
        "artifacts": {"files": ["curves.npz"], "models": {}},
        "reason": None,
    }
    writer.write_result(
        folder / "result.json", {**result, "pending_upload": True, writer.RECORDING: 1}
    )
    end = dict(
        metrics={"val_mse": 2.0},
        curves={"train_loss": ([0, 10], [1.0, 0.5])},
        artifacts=[folder / "curves.npz"],
        status="FINISHED",
        params={"lr": name},
    )
    return run_id, folder / "result.json", end


def test_the_writer_ends_runs_in_order_and_a_dead_one_leaves_them_for_upload(tmp_path, store):
    uri = f"sqlite:///{store}"
    c = tracking.open_store(uri)
    w = writer.Writer()
    try:
        jobs = [_job(tmp_path, c, uri, f"0.00{i}") for i in range(1, 4)]
        _hand_over(w, uri, jobs)
    finally:
        w.close()
    for run_id, path, _ in jobs:
        run = client_for(store).get_run(run_id)
        assert (
            run.info.status == "FINISHED"
            and run.data.metrics["val_mse"] == 2.0
            and run.data.params["lr"]
        )
        r = json.loads(path.read_text())
        assert "pending_upload" not in r and writer.RECORDING not in r

    dead = writer.Writer()
    dead.proc.kill()
    dead.proc.wait()
    run_id, path, end = _job(tmp_path, c, uri, "0.009")
    dead.submit(uri, run_id, None, end, path)
    failed = dead.drain()
    assert len(failed) == 1 and "writer process ended" in failed[0]
    r = json.loads(path.read_text())
    assert (
        r["pending_upload"]
        and "writer process ended" in r["tracking_error"]
        and writer.RECORDING not in r
    )
    # python -m sweeper.upload takes it from here
    assert upload.pending(tmp_path / "0.009") == [path]
    new = upload.upload(path)
    assert client_for(store).get_run(new).info.status == "FINISHED"


def test_a_failing_store_keeps_the_run_for_upload(tmp_path, store):
    uri = f"sqlite:///{store}"
    c = tracking.open_store(uri)
    run_id, path, end = _job(tmp_path, c, uri, "0.002")
    w = writer.Writer()
    try:
        w.submit(uri, "no-such-run", None, end, path)  # the store refuses it
        (failed,) = w.drain()
    finally:
        w.close()
    r = json.loads(path.read_text())
    assert r["pending_upload"] and r["tracking_error"] == failed and "failed at the end" in failed


def test_a_killed_launching_process_leaves_the_writer_to_finish_its_queue(tmp_path, store):
    uri = f"sqlite:///{store}"
    c = tracking.open_store(uri)
    jobs = [_job(tmp_path, c, uri, f"0.0{i}") for i in range(1, 4)]
    script = textwrap.dedent(f"""
        import os, pickle, signal, sys
        from pathlib import Path
        from sweeper.tracking import writer
        jobs = pickle.loads(bytes.fromhex(sys.argv[1]))
        w = writer.Writer()
        for run_id, path, end in jobs:
            w.submit({uri!r}, run_id, None, end, Path(path))
        os.kill(os.getpid(), signal.SIGKILL)  # before any drain
    """)
    import pickle

    proc = subprocess.run(
        [sys.executable, "-c", script, pickle.dumps(jobs).hex()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -9, proc.stderr
    deadline = __import__("time").monotonic() + 60
    while any(client_for(store).get_run(j[0]).info.status != "FINISHED" for j in jobs):
        assert __import__("time").monotonic() < deadline, "the orphaned writer did not end the runs"
        __import__("time").sleep(0.2)
    for _, path, _ in jobs:
        # its result.json comes right after the run
        while writer.RECORDING in json.loads(path.read_text()):
            assert __import__("time").monotonic() < deadline
            __import__("time").sleep(0.1)


@pytest.mark.slow
def test_a_sweep_on_the_embedded_store_ends_its_runs_in_the_writer_started_with_the_command(
    tmp_path, store
):
    """The command line shows a sweep of MIN_JOBS jobs: the writer starts before Hydra composes
    (writer.prestart) and ends every run in SQLite, whole."""
    lrs = [0.001 * (i + 1) for i in range(writer.MIN_JOBS["sqlite"])]
    proc = cli(
        tmp_path,
        "-m",
        "lr=" + ",".join(map(str, lrs)),
        "hydra/launcher=basic",
        *FAST_ARGS,
        store=store,
    )
    assert proc.returncode == 0, proc.stderr
    assert "from a writer process" in proc.stdout + proc.stderr
    children = [r for r in all_runs(store) if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == len(lrs) and {r.info.status for r in children} == {"FINISHED"}
    for r in children:
        assert {"val_mse", "test_mse", "train_time_s"} <= set(r.data.metrics) and r.data.params[
            "lr"
        ]
        assert len(r.inputs.dataset_inputs) == 3 and r.outputs.model_outputs
        # its logged model (ended in bulk with the run): READY, holding the run's final metrics
        model = client_for(store).get_logged_model(r.outputs.model_outputs[0].model_id)
        assert str(model.status) == "READY" and model.source_run_id == r.info.run_id
        assert {"val_mse", "test_mse"} <= {m.key for m in model.metrics}
    results = [json.loads(p.read_text()) for p in (tmp_path / "sweep").glob("*/result.json")]
    assert len(results) == len(lrs) and not any(
        r.get("pending_upload") or r.get(writer.RECORDING) for r in results
    )


def test_the_command_line_alone_decides_whether_the_writer_starts_early(monkeypatch):
    started = []
    monkeypatch.setattr(writer, "start", lambda uris=(): started.append(True))
    many = "lr=" + ",".join(str(0.001 * (i + 1)) for i in range(writer.MIN_JOBS["sqlite"]))
    some = "lr=" + ",".join(str(0.001 * (i + 1)) for i in range(writer.MIN_JOBS["server"]))
    batched = writer.MIN_JOBS_BATCHED["sqlite"]
    assert batched > writer.MIN_JOBS["sqlite"]
    for args, expected in [
        (["-m", many, "hydra/launcher=basic"], True),
        # the default (batched) launcher: its workers train, the writer pays from more jobs
        (["-m", many], False),
        (["-m", "lr=" + ",".join(str(0.0001 * (i + 1)) for i in range(batched))], True),
        (["-m", "lr=" + ",".join(str(0.0001 * (i + 1)) for i in range(batched - 1))], False),
        (["-m", many, "hydra/launcher=batched"], False),
        (
            [
                "--multirun",
                "lr=0.1,0.2",
                "depth=" + ",".join(map(str, range(writer.MIN_JOBS["sqlite"] // 2))),
                "hydra/launcher=basic",
            ],
            True,
        ),
        (["-m", some, "hydra/launcher=basic"], False),  # a sweep this short ends its runs itself
        (
            ["-m", some, "tracking=server", "tracking.uri=http://127.0.0.1:5000"],
            True,
        ),  # a server's are slower
        (["-m", many, "hydra/launcher=basic"], True),
        ([many], False),  # not a multirun
        (["-m", "lr=0.1,0.2"], False),  # too few jobs for the writer to pay
        (["-m", many, "hydra/launcher=joblib"], False),  # its jobs end their own runs
        (["-m", "lr=glob(*)"], False),
    ]:
        started.clear()
        writer.prestart(args)
        assert bool(started) == expected, args
    monkeypatch.setenv("SWEEPER_WRITER", "off")
    started.clear()
    writer.prestart(["-m", many, "hydra/launcher=basic"])
    assert not started
    # on: a sweep of any size in the launching process, not one whose jobs end their own runs
    monkeypatch.setenv("SWEEPER_WRITER", "on")
    for args, expected in [
        (["-m", "lr=0.1,0.2"], True),
        (["-m", "lr=0.1,0.2", "hydra/launcher=joblib"], False),
    ]:
        started.clear()
        writer.prestart(args)
        assert bool(started) == expected, args
    assert writer.estimated_jobs(["lr=0.1,0.2,0.3", "depth=range(0,3)", "seed=4"]) == 9
    # an override Hydra's grammar refuses (Hydra's own line says so later): no estimate, no error
    for bad in ("lr=[0.1,", "lr", "lr=a=b", "depth=range(1,x)"):
        assert writer.estimated_jobs(["width=8,16", bad]) == 0


def test_the_composed_sweep_decides_the_writer_by_its_launcher_and_size(monkeypatch):
    """The batched launcher's runs get a writer from MIN_JOBS_BATCHED jobs (its workers train, the
    launching process ends their runs in bulk), the basic launcher's from MIN_JOBS; on: any size."""
    monkeypatch.delenv("SWEEPER_WRITER", raising=False)
    monkeypatch.delenv("SWEEPER_PUBLIC_ONLY", raising=False)
    basic, batched = "hydra._internal.core_plugins.basic_launcher.BasicLauncher", "BatchedLauncher"
    db, server = ["sqlite:///x.db"], ["http://127.0.0.1:5000"]
    n = writer.MIN_JOBS_BATCHED["sqlite"]
    assert [writer.wanted(k, db, batched) for k in (16, n - 1, n)] == [False, False, True]
    assert [writer.wanted(k, db, basic) for k in (15, 16)] == [False, True]
    assert writer.wanted(writer.MIN_JOBS_BATCHED["server"], server, batched)
    assert not writer.wanted(n, db, "hydra_plugins.hydra_joblib_launcher.JoblibLauncher")
    monkeypatch.setenv("SWEEPER_WRITER", "on")
    assert writer.wanted(2, db, batched) and writer.wanted(2, db, basic)
    assert not writer.wanted(2, db, "JoblibLauncher")
    monkeypatch.setenv("SWEEPER_WRITER", "off")
    tested.shortcut.cache_clear()  # asked again under this setting
    try:
        assert not writer.wanted(n, db, batched)
    finally:
        monkeypatch.delenv("SWEEPER_WRITER")
        tested.shortcut.cache_clear()


def test_sqlite_connections_commit_without_waiting_for_fsync(store):
    """WAL with synchronous=NORMAL: consistent after a crash, no fsync per commit (sweeper.tracking)."""
    c = tracking.client(f"sqlite:///{store}")
    with c._tracking_client.store.engine.connect() as con:
        assert con.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
        assert con.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_a_writer_never_handed_a_run_is_stopped_not_waited_for():
    """A refused sweep (or one the writer does not pay for) ends at once, not after the writer's MLflow import."""
    w = writer.Writer()
    w.close()
    assert w.proc.returncode == -9  # killed: it had nothing to write
    kept = writer.Writer()
    kept.submitted = 1  # as after a submit: close waits for the writer to end by itself
    kept.close()
    assert kept.proc.returncode == 0


def test_ctrl_c_in_the_middle_of_a_hand_over_neither_hangs_nor_loses_a_run(tmp_path, store):
    """Ctrl-C may land between a job's result.json and its request (or cut the request in half): the
    interrupted sweep's writer.end records what it was sent whole, stops, and keeps the rest for upload."""
    import os

    uri = f"sqlite:///{store}"
    c = tracking.open_store(uri)
    w = writer.Writer()
    whole = [_job(tmp_path, c, uri, f"0.00{i}") for i in range(1, 3)]
    for run_id, path, end in whole:
        w.submit(uri, run_id, None, end, path)
    cut_id, cut_path, _ = _job(tmp_path, c, uri, "0.009")
    writer.write_result(
        cut_path, {**json.loads(cut_path.read_text()), writer.RECORDING: w.proc.pid}
    )
    w.pending.append(cut_path)  # handed over as far as the list, then Ctrl-C
    # a request cut short: 1000 bytes announced
    os.write(w.requests.fileno(), b"\x00\x00\x03\xe8" + b"\x80\x05half")
    failed = w.end(timeout=60)
    assert w.proc.returncode == 0, (
        "the writer did not end by itself (killed at the deadline: it hung on the half request)"
    )
    assert len(failed) == 1 and "interrupted before the writer" in failed[0]
    for run_id, path, _ in whole:
        assert client_for(store).get_run(run_id).info.status == "FINISHED"
        r = json.loads(path.read_text())
        assert "pending_upload" not in r and writer.RECORDING not in r
    r = json.loads(cut_path.read_text())
    assert (
        r["pending_upload"]
        and "interrupted before the writer" in r["tracking_error"]
        and writer.RECORDING not in r
    )
    assert upload.pending(tmp_path / "0.009") == [cut_path]


def test_a_writer_out_of_time_after_ctrl_c_is_killed_and_its_runs_kept_for_upload(tmp_path, store):
    uri = f"sqlite:///{store}"
    c = tracking.open_store(uri)
    w = writer.Writer()
    run_id, path, end = _job(tmp_path, c, uri, "0.003")
    writer.write_result(path, {**json.loads(path.read_text()), writer.RECORDING: w.proc.pid})
    w.submit(uri, run_id, None, end, path)
    (failed,) = w.end(timeout=0)  # no time at all: it is still importing MLflow
    assert w.proc.returncode == -9
    r = json.loads(path.read_text())
    assert r["pending_upload"] and r["tracking_error"] == failed and writer.RECORDING not in r
    assert client_for(store).get_run(upload.upload(path)).info.status == "FINISHED"


def test_other_sqlite_databases_keep_their_synchronous_setting(tmp_path, store):
    """Only WAL databases commit with synchronous=NORMAL (an Optuna storage in rollback-journal mode keeps FULL)."""
    import sqlalchemy

    tracking.client(f"sqlite:///{store}")  # the listener is in place
    other = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'optuna.db'}")
    with other.connect() as con:
        assert con.exec_driver_sql("PRAGMA journal_mode").scalar() == "delete"
        assert con.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL, SQLite's default


def test_without_a_writer_process_the_jobs_end_their_own_runs(monkeypatch, caplog):
    """Where no writer can start (Popen's pass_fds is POSIX-only), sweep.start goes on without one: run.run then
    ends each run itself (the sweep's state has no writer)."""
    import subprocess as sp

    def refuse(*args, **kwargs):
        raise ValueError("pass_fds is not supported on this platform")

    monkeypatch.setattr(sp, "Popen", refuse)
    with caplog.at_level("WARNING", logger="sweeper"):
        assert writer.start(["sqlite:///x"]) is False
    assert writer.current() is None and "each job ends its own run" in caplog.text


def test_a_run_whose_job_folder_was_deleted_after_the_hand_over_is_recorded_finished_and_says_so(
    tmp_path, store, caplog
):
    """The sweep folder deleted while the writer still had runs to end (hostile pass 2, row 20): each run printed
    FINISHED ends FINISHED with its metrics, a tag names the files that went with the folder, and the sweep says
    it in a warning, not 'kept ... upload it' (nothing is left to upload). One run handed over alone and two
    together (ending.end_each: one end_runs call, or one each) are both checked; that each way of ending runs
    (client calls, bulk) writes the same tag is tests/test_ending.py's."""
    import shutil

    uri = f"sqlite:///{store}"
    c = tracking.open_store(uri)
    jobs = [_job(tmp_path, c, uri, f"0.00{i}") for i in range(1, 4)]
    for _, path, _ in jobs:
        shutil.rmtree(path.parent)
    w = writer.Writer()
    try:
        with caplog.at_level("WARNING", logger="sweeper"):
            _hand_over(w, uri, jobs[:1])  # one run alone
            _hand_over(w, uri, jobs[1:])  # two together
    finally:
        w.close()
    for run_id, path, _ in jobs:
        run = client_for(store).get_run(run_id)
        assert run.info.status == "FINISHED" and run.data.metrics["val_mse"] == 2.0
        assert (
            "curves.npz" in run.data.tags["artifacts_missing"]
            and str(path.parent) in run.data.tags["artifacts_missing"]
        )
    said = [r.getMessage() for r in caplog.records]
    assert sum("was deleted under the sweep" in m for m in said) == 3
    assert not any("upload it" in m for m in said)

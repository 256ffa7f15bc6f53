"""sweeper.job.record: a run printed FINISHED is never lost to Ctrl-C or SIGTERM; a signalled single run is KILLED."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from conftest import NO_BASELINES, all_runs, one_line, wait_for


DIGITS_16 = (
    "-m",
    NO_BASELINES,
    "data=digits",
    "lr=0.01,0.02,0.03,0.04",
    "depth=0,1",
    "width=8,16",
    "epochs=300",
    "hydra/launcher=basic",
)


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [("SIGINT", 130), ("SIGTERM", 143)])
@pytest.mark.parametrize("at", [2, 3])
def test_a_signal_while_runs_are_recorded_loses_no_run_printed_finished(
    tmp_path, store, sig, code, at
):
    """Before: a 16-configuration sweep (it has a writer process) interrupted at [3/16] left that run KILLED with no
    metrics (3 of 3 tries in the hostile round) while its result.json said FINISHED."""
    import json
    import signal

    args = [
        sys.executable,
        "-m",
        "sweeper",
        *DIGITS_16,
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"tracking.uri=sqlite:///{store}",
    ]
    proc = subprocess.Popen(
        args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    printed, seen = [], []
    for line in proc.stdout:
        seen.append(line)
        if "  FINISHED  run " in line:
            printed.append(line.rsplit("run ", 1)[1].strip())
        if f"[{at}/16]" in line:
            proc.send_signal(getattr(signal, sig))
            break
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    # the case in question: a writer process records the runs, and every job up to [at/16] was printed FINISHED
    assert "each run's records go to the store from a writer process" in "".join(seen) + out + err
    assert len(printed) == at, seen
    runs = {r.info.run_id: r for r in all_runs(store)}
    for run_id in printed:
        assert runs[run_id].info.status == "FINISHED" and runs[run_id].data.metrics, (
            run_id,
            out,
            err,
        )
    for path in (tmp_path / "sweep").glob("*/result.json"):
        r = json.loads(path.read_text())
        if r["status"] == "FINISHED":
            assert not r.get("recording") and (
                not r.get("pending_upload") or "upload" in out + err
            ), r
            assert runs[r["run_id"]].info.status == "FINISHED"


@pytest.mark.slow
def test_sigterm_in_a_single_run_records_it_killed_and_exits_143(tmp_path, store):
    """Before: SIGTERM ended the process at once and left the run RUNNING."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sweeper",
            "data=xor",
            "epochs=20000000",
            f"hydra.run.dir={tmp_path / 'run'}",
            f"tracking.uri=sqlite:///{store}",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # written once the run exists, just before training
    ready = tmp_path / "run" / "config_resolved.yaml"
    wait_for(ready.exists, "the run's config_resolved.yaml", proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    (run,) = all_runs(store)
    assert proc.returncode == 143, err
    assert one_line(err) == f"sweeper: interrupted: run {run.info.run_id} KILLED"
    assert (
        run.info.status == "KILLED" and run.data.tags["failure_reason"] == "interrupted (SIGTERM)"
    )


# The status a run ends with, unit by unit (python tests/mutate.py status): one job in this process, a real store.
FAST_JOB = (
    "depth=0",
    "epochs=50",
    "log_every=10",
    "tracking.system_metrics=true",
    "tracking.system_metrics_min_s=0",
)


def test_a_finished_run_is_recorded_finished_with_its_metrics_curves_params_files_and_data(
    tmp_path, store
):
    """result.json and the store say the same: FINISHED, no failure_reason, the scores as metrics, the curves thinned
    to tracking.curve_points, the params, the job's files, the system metrics, the data set as the run's input."""
    import json

    import numpy as np

    from conftest import client_for, run_once

    result = run_once(tmp_path, *FAST_JOB, "tracking.curve_points=3", store=store)
    kept = json.loads((tmp_path / "job" / "result.json").read_text())
    for r in (result, kept):
        assert (r["status"], r["reason"], r["task"]) == ("FINISHED", None, "regression")
        assert r["artifacts"] == {
            "files": ["config_resolved.yaml", "curves.npz", "test_predictions.csv"],
            "models": {"model": "model/model"},
        }
        assert "pending_upload" not in r and "tracking_error" not in r
    client = client_for(store)
    run = client.get_run(result["run_id"])
    assert run.info.status == "FINISHED" and "failure_reason" not in run.data.tags
    assert run.data.tags["task"] == "regression"
    assert {k: run.data.metrics[k] for k in ("val_mse", "test_mse", "epochs_run")} == {
        k: result["metrics"][k] for k in ("val_mse", "test_mse", "epochs_run")
    }
    assert any(k.startswith("system/") for k in run.data.metrics), sorted(run.data.metrics)
    assert (run.data.params["epochs"], run.data.params["depth"]) == ("50", "0")
    assert [a.path for a in client.list_artifacts(run.info.run_id)] == kept["artifacts"]["files"]
    # epochs 0, 10, ..., 50: 6 points
    whole = np.load(tmp_path / "job" / "curves.npz")["train_loss_steps"]
    assert len(whole) == 6 and 1 < len(client.get_metric_history(run.info.run_id, "train_loss")) < 6
    assert run.inputs.dataset_inputs and run.outputs.model_outputs


def _store_error():
    from mlflow.exceptions import MlflowException

    return MlflowException("the store went away\nits second line")


def test_a_sweep_job_whose_store_fails_at_the_end_keeps_its_result_for_upload(
    tmp_path, store, monkeypatch, caplog
):
    """A job of a sweep (no writer process) whose store fails as it ends its run: FINISHED in result.json, which keeps
    pending_upload and the error for python -m sweeper.upload, said in one line."""
    import json
    import logging

    from conftest import make_cfg
    from sweeper.job import record
    from sweeper.job.context import JobContext
    from sweeper.tracking.run import TrackedRun

    def fail(self, **end):
        raise _store_error()

    monkeypatch.setattr(TrackedRun, "finish", fail)
    sweep = tmp_path / "sweep"
    ctx = JobContext(output_dir=sweep / "0", sweep_dir=sweep, num=0)
    with caplog.at_level(logging.ERROR, logger="sweeper"):
        result = record.run(make_cfg(*FAST_JOB, store=store), ctx)
    error = (
        f"tracking.uri=sqlite:///{store} failed at the end: MlflowException: the store went away"
    )
    kept = json.loads((sweep / "0" / "result.json").read_text())
    for r in (result, kept):
        assert (r["status"], r["reason"], r["pending_upload"], r["tracking_error"]) == (
            "FINISHED",
            None,
            True,
            error,
        )
        assert r["metrics"]["epochs_run"] == 50
    assert (
        f"{error}; the result is kept in {sweep / '0'}: upload it with python -m sweeper.upload {sweep}"
        in [r.getMessage() for r in caplog.records]
    )


def test_a_sweep_job_hands_its_run_to_the_writer_and_result_json_says_so_until_it_is_written(
    tmp_path, store, monkeypatch
):
    """With a writer process, the job writes result.json FINISHED with pending_upload and the writer's pid before it
    hands the run over (read as the writer is handed it), and the writer ends the run: FINISHED with the job's metrics,
    params and files; result.json then drops both flags."""
    import json

    from conftest import client_for, make_cfg
    from sweeper.base import state
    from sweeper.job import record
    from sweeper.job.context import JobContext
    from sweeper.tracking import writer

    w = writer.Writer()
    monkeypatch.setattr(state.current(), "writer", w)
    sweep = tmp_path / "sweep"
    handed, submit = [], w.submit

    def seen(uri, run_id, info, end, path):  # the real hand-over, after a look at what the job left
        handed.append((json.loads(path.read_text()), end["status"], path))
        submit(uri, run_id, info, end, path)

    monkeypatch.setattr(w, "submit", seen)
    try:
        result = record.run(make_cfg(*FAST_JOB, store=store), JobContext(sweep / "0", [], sweep, 0))
        assert w.drain() == []
    finally:
        w.close()
    ((kept, status, path),) = handed
    assert (kept["status"], kept["pending_upload"], kept[writer.RECORDING], status) == (
        "FINISHED",
        True,
        w.proc.pid,
        "FINISHED",
    )
    assert path == sweep / "0" / "result.json"
    run = client_for(store).get_run(result["run_id"])
    assert (
        run.info.status == "FINISHED"
        and run.data.metrics["val_mse"] == result["metrics"]["val_mse"]
    )
    assert run.data.params["epochs"] == "50" and "failure_reason" not in run.data.tags
    assert [a.path for a in client_for(store).list_artifacts(run.info.run_id)] == kept["artifacts"][
        "files"
    ]
    final = json.loads(path.read_text())
    assert (
        "pending_upload" not in final
        and writer.RECORDING not in final
        and final["status"] == "FINISHED"
    )


def test_a_run_failed_by_its_code_keeps_its_traceback_params_and_system_metrics_or_says_the_store_failed(
    tmp_path, store, monkeypatch, caplog
):
    """A bug in the compute half: FAILED with its reason, its error file among its artifacts, its params and system
    metrics; when the store fails as the run is ended, one line says so and result.json still says why."""
    import json
    import logging

    from conftest import client_for, run_once
    from sweeper import models
    from sweeper.tracking import ending

    def broken(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(models, "train", broken)
    result = run_once(tmp_path, *FAST_JOB, store=store)
    assert result["status"] == "FAILED" and result["reason"].startswith(
        "ZeroDivisionError: division by zero ("
    )
    run = client_for(store).get_run(result["run_id"])
    assert run.info.status == "FAILED" and run.data.tags["failure_reason"] == result["reason"]
    assert "error.txt" in [a.path for a in client_for(store).list_artifacts(run.info.run_id)]
    assert run.data.params["epochs"] == "50" and any(
        k.startswith("system/") for k in run.data.metrics
    )

    def gone(*args, **kwargs):
        raise _store_error()

    monkeypatch.setattr(ending, "end_runs", gone)
    with caplog.at_level(logging.ERROR, logger="sweeper"):
        result = run_once(tmp_path / "again", *FAST_JOB, store=store)
    kept = json.loads((tmp_path / "again" / "job" / "result.json").read_text())
    assert kept["status"] == "FAILED" and kept["reason"].startswith(
        "ZeroDivisionError: division by zero ("
    )
    assert (
        f"tracking.uri=sqlite:///{store} failed at the end: MlflowException: the store went away"
        in [r.getMessage() for r in caplog.records]
    )

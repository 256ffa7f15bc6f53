"""sweeper.upload: result.json read in one line, a retry that duplicates nothing, another store, an interrupted upload."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import all_runs, client_for, one_line
from sweeper import tracking, upload
from sweeper.tracking import ending
from sweeper.insight import publish


def _pending(tmp_path: Path, store: Path) -> Path:
    """A sweep folder with one job whose result.json waits for an upload (as a failing server leaves it)."""
    import json

    from conftest import FAST_ARGS, make_cfg
    from sweeper.job.context import JobContext
    from sweeper.job.record import run

    sweep_dir = tmp_path / "sweep"
    sweep_dir.mkdir()
    (sweep_dir / "sweep.json").write_text(json.dumps({"parents": [], "n_jobs": 1, "swept": ["lr"]}))
    run(
        make_cfg("lr=0.01", *FAST_ARGS, "tracking.log_model=false", store=store),
        JobContext(output_dir=sweep_dir / "0", overrides=["lr=0.01"], sweep_dir=sweep_dir),
    )
    path = sweep_dir / "0" / "result.json"
    path.write_text(
        json.dumps({**json.loads(path.read_text()), "pending_upload": True, "run_id": None})
    )
    return sweep_dir


@pytest.mark.parametrize(
    "edit, error",
    [
        (lambda r: "{", "cannot be read (JSONDecodeError"),
        (
            lambda r: {**r, "metrics": {**r["metrics"], "val_mse": "high"}},
            'its metric val_mse is "high", expected a number',
        ),
    ],
)
def test_upload_of_a_malformed_result_json_is_one_line_and_starts_no_run(
    tmp_path, store, capsys, edit, error
):
    """Before: a traceback, and a non-numeric metric left the uploaded run RUNNING."""
    import json

    from sweeper import upload

    sweep_dir = _pending(tmp_path, store)
    path = sweep_dir / "0" / "result.json"
    edited = edit(json.loads(path.read_text()))
    path.write_text(edited if isinstance(edited, str) else json.dumps(edited))
    before = len(all_runs(store))
    assert upload.main([str(sweep_dir)]) == 2
    assert error in one_line(capsys.readouterr().err)
    assert len(all_runs(store)) == before


def test_upload_retried_after_a_failure_does_not_duplicate_the_run(
    tmp_path, store, capsys, monkeypatch
):
    """Before: a retry after a failed (disk full) upload made a second run: 5 FINISHED runs for 4 jobs."""
    from sweeper import upload

    sweep_dir = _pending(tmp_path, store)
    real = ending.end_runs

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ending, "end_runs", full)
    assert upload.main([str(sweep_dir)]) == 2
    (half,) = [r for r in all_runs(store) if r.data.tags.get("uploaded_from")]
    # not RUNNING
    assert half.info.status == "FAILED" and "upload failed" in half.data.tags["failure_reason"]
    monkeypatch.setattr(ending, "end_runs", real)
    assert upload.main([str(sweep_dir)]) == 0
    uploaded = [r for r in all_runs(store) if r.data.tags.get("uploaded_from")]
    assert [r.info.status for r in uploaded] == ["FINISHED"] and uploaded[
        0
    ].info.run_id != half.info.run_id


def test_upload_to_another_store_goes_under_a_parent_there_and_stays_pending_for_its_own(
    tmp_path, store, capsys, _template_store
):
    """Before: upload --tracking-uri of another, new store logged the runs as top-level runs, failed on the parent that
    lives in the sweep's own store (exit 2) and had marked every result.json uploaded: a later upload to the sweep's
    own store said there was nothing to upload."""
    import json

    from conftest import client_for, copy_store
    from sweeper import upload
    from test_liveness import start_sweep
    from test_interrupt import run_job

    sweep_dir = tmp_path / "sweep"
    jobs, state = start_sweep(sweep_dir, store, "0.001,0.002", "hydra/launcher=basic")
    (p,) = state["parents"]
    for i in range(2):
        run_job(jobs, sweep_dir, i)
        # as a store that failed at the run's end leaves it
        path = sweep_dir / str(i) / "result.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "pending_upload": True}))
    (tmp_path / "other").mkdir()
    other = copy_store(_template_store, tmp_path / "other")  # a new, empty store
    other_uri = f"sqlite:///{other}"

    assert upload.main([str(sweep_dir), "--tracking-uri", other_uri]) == 0
    out = capsys.readouterr().out
    assert out.count(f"its own store sqlite:///{store} still lacks it") == 2, out
    there = [r for r in all_runs(other) if r.info.lifecycle_stage == "active"]
    (parent,) = [r for r in there if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in there if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == 2 and {r.data.tags["mlflow.parentRunId"] for r in children} == {
        parent.info.run_id
    }
    assert parent.info.status == "FINISHED" and parent.data.tags["parent_in_own_store"].startswith(
        p["run_id"]
    )
    # before: no sweep_argv (advise had no next command)
    original = client_for(store).get_run(p["run_id"]).data.tags
    assert [parent.data.tags.get(k) for k in ("sweep_argv", "sweeper")] == [
        original["sweep_argv"],
        original["sweeper"],
    ]
    # again: nothing new there
    assert upload.main([str(sweep_dir), "--tracking-uri", other_uri]) == 0
    assert "nothing to upload" in capsys.readouterr().out and len(all_runs(other)) == len(there)

    # the sweep's own store: both are still pending for it
    assert upload.main([str(sweep_dir)]) == 0
    assert capsys.readouterr().out.count("uploaded as run") == 2
    own = client_for(store).search_runs(
        [p["experiment_id"]],
        f"tags.mlflow.parentRunId = '{p['run_id']}' and tags.uploaded_from != ''",
    )
    assert len(own) == 2 and {r.info.status for r in own} == {"FINISHED"}
    assert upload.main([str(sweep_dir)]) == 0 and "nothing to upload" in capsys.readouterr().out


@pytest.mark.parametrize(
    "edit, error",
    [
        (
            lambda r: {k: v for k, v in r.items() if k != "config"},
            "its config is null, expected dict",
        ),
        (
            lambda r: {k: v for k, v in r.items() if k != "fingerprint"},
            "its fingerprint is null, expected str",
        ),
        (lambda r: {**r, "device": 7}, "its device is 7, expected str"),
        (
            lambda r: {**r, "status": "BOGUS"},
            'its status is "BOGUS", expected one of FINISHED, FAILED, KILLED',
        ),
        (lambda r: {**r, "artifacts": None}, "its artifacts is null, expected"),
        (
            lambda r: {**r, "pending_upload": "yes"},
            'its pending_upload is "yes", expected true or false',
        ),
    ],
)
def test_upload_of_a_result_json_without_what_it_logs_is_one_line_and_starts_no_run(
    tmp_path, store, capsys, edit, error
):
    """Before: a result.json missing config, fingerprint or device, or with status BOGUS, was a traceback (the last
    after a run was started)."""
    import json

    from sweeper import upload

    sweep_dir = _pending(tmp_path, store)
    path = sweep_dir / "0" / "result.json"
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    before = len(all_runs(store))
    assert upload.main([str(sweep_dir)]) == 2
    assert error in one_line(capsys.readouterr().err)
    assert len(all_runs(store)) == before


def test_an_interrupted_upload_closes_the_parent_it_made_and_a_later_one_closes_a_parent_left_open(
    tmp_path, store, capsys, _template_store, monkeypatch
):
    """Before: Ctrl-C of `upload --tracking-uri OTHER` after its runs were uploaded left the parent it made there
    RUNNING with no metrics, and a second upload said "nothing to upload" and left it RUNNING for good (hostile
    pass 5, 1 of 8 tries; SIGTERM: 1 more, silently)."""
    import json
    import signal

    from conftest import client_for, copy_store
    from sweeper import upload
    from test_interrupt import run_job
    from test_liveness import start_sweep

    sweep_dir = tmp_path / "sweep"
    jobs, _ = start_sweep(sweep_dir, store, "0.001,0.002", "hydra/launcher=basic")
    for i in range(2):
        run_job(jobs, sweep_dir, i)
        path = sweep_dir / str(i) / "result.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "pending_upload": True}))
    (tmp_path / "other").mkdir()
    other_uri = f"sqlite:///{copy_store(_template_store, tmp_path / 'other')}"
    real, calls = upload.upload, []

    def cut_short(path, uri=None):
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(path, uri)

    monkeypatch.setattr(upload, "upload", cut_short)
    signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    with pytest.raises(KeyboardInterrupt):
        upload.main([str(sweep_dir), "--tracking-uri", other_uri])
    # the caller's signals as they were (once ignored for good: every later test's sweep ignored SIGTERM)
    assert {s: signal.getsignal(s) for s in signals} == signals
    monkeypatch.setattr(upload, "upload", real)
    c = client_for(Path(other_uri.removeprefix("sqlite:///")))
    (parent,) = [
        r
        for r in c.search_runs([e.experiment_id for e in c.search_experiments()])
        if "mlflow.parentRunId" not in r.data.tags
    ]
    # before: RUNNING, no metrics
    assert parent.info.status != "RUNNING" and parent.data.metrics, parent.info
    # the job it did not get to
    assert upload.main([str(sweep_dir), "--tracking-uri", other_uri]) == 0
    # as an upload killed before it closed the parent leaves it
    c.update_run(parent.info.run_id, status="RUNNING")
    capsys.readouterr()
    assert upload.main([str(sweep_dir), "--tracking-uri", other_uri]) == 0
    out = capsys.readouterr().out
    assert (
        "nothing to upload" in out
        and f"parent run {parent.info.run_id}, left RUNNING by an interrupted upload" in out
    )
    assert c.get_run(parent.info.run_id).info.status == "FINISHED"


def test_upload_of_a_missing_folder_exits_non_zero(tmp_path, capsys):
    assert upload.main([str(tmp_path / "gone")]) == 2
    assert "does not exist" in one_line(capsys.readouterr().err)
    (tmp_path / "file").write_text("")
    assert upload.main([str(tmp_path / "file")]) == 2
    assert "is not a folder" in one_line(capsys.readouterr().err)


def test_a_stub_that_upload_replaced_is_neither_finished_nor_failed(store):
    c = client_for(store)
    exp = tracking.experiment_id(c, "diabetes", f"sqlite:///{store}")
    parent_id = tracking.start_run(c, exp, "sweep", {"sweep_dir": "/x", "n_jobs": "2"})
    finished = [
        tracking.start_run(c, exp, f"lr={i}", {}, parent_run_id=parent_id) for i in range(2)
    ]
    stub = tracking.start_run(c, exp, "lr=1", {}, parent_run_id=parent_id)
    for run_id in finished:
        c.set_terminated(run_id, "FINISHED")
    c.set_tag(stub, "failure_reason", f"tracking failed mid-run; re-uploaded as run {finished[1]}")
    c.set_tag(stub, "replaced_by", finished[1])  # what upload.upload sets
    c.set_terminated(stub, "FAILED")
    parent = c.get_run(parent_id)
    counts = publish.tally(parent, publish.children(c, parent))
    assert (counts["n_finished"], counts["n_failed"], counts["n_not_run"]) == (2, 0, 0)


@pytest.mark.parametrize("first_run", ["in the store", "never reached it"])
def test_the_run_a_job_started_before_its_store_failed_is_marked_replaced_where_the_store_has_it(
    tmp_path, store, first_run
):
    """The job's own run (started before the server failed mid-run) becomes a FAILED stub naming the upload that
    replaces it (publish.tally counts it neither finished nor failed); one the store never had is no error."""
    import json

    sweep_dir = _pending(tmp_path, store)
    path = sweep_dir / "0" / "result.json"
    c = client_for(store)
    first = (
        c.create_run(
            c.get_experiment_by_name(json.loads(path.read_text())["experiment"]).experiment_id
        ).info.run_id
        if first_run == "in the store"
        else "0" * 32
    )
    path.write_text(json.dumps({**json.loads(path.read_text()), "run_id": first}))
    assert upload.main([str(sweep_dir)]) == 0
    (new,) = [r for r in all_runs(store) if r.data.tags.get("uploaded_from")]
    assert (
        new.info.status == "FINISHED" and json.loads(path.read_text())["run_id"] == new.info.run_id
    )
    if first_run == "in the store":
        stub = c.get_run(first)
        assert stub.info.status == "FAILED"
        assert (
            stub.data.tags["failure_reason"]
            == f"tracking failed mid-run; re-uploaded as run {new.info.run_id}"
        )
        assert stub.data.tags["replaced_by"] == new.info.run_id

"""What a run sends to MLflow and what it keeps: thinned curves, the whole curves as an artifact, system
metrics from the sampler (live on long runs), the store opened without a second probe."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest

from sweeper import tracking
from sweeper.base import state
from sweeper.tracking.store import _is_wal_database

from conftest import NO_BASELINES, client_for, command_env, run_once, wait_for


@pytest.mark.parametrize(
    "n, points, expected",
    [
        (10, 100, list(range(10))),  # short curves are sent whole
        (10, 0, list(range(10))),  # 0 = every sample
        (10, 5, [0, 2, 4, 6, 8, 9]),  # every 2nd, and the last
        (9, 3, [0, 3, 6, 8]),
        (800, 100, [*range(0, 800, 8), 799]),
    ],
)
def test_thin_keeps_evenly_strided_samples_and_the_last(n, points, expected):
    steps, values = tracking.thin(range(0, 10 * n, 10), [float(v) for v in range(n)], points)
    assert values == [float(i) for i in expected]
    assert steps == [10 * i for i in expected]


def test_a_run_sends_at_most_curve_points_and_keeps_every_sample_as_an_artifact(tmp_path, store):
    result = run_once(
        tmp_path, "epochs=3000", "log_every=10", "tracking.curve_points=40", store=store
    )
    c = client_for(store)
    history = sorted(c.get_metric_history(result["run_id"], "train_loss"), key=lambda m: m.step)
    assert [m.step for m in history] == [
        *range(0, 3000, 80),
        3000,
    ]  # the last point: the last epoch
    local = c.download_artifacts(result["run_id"], "curves.npz", str(tmp_path))
    with np.load(local) as z:
        assert z["train_loss_steps"].tolist() == [*range(0, 3000, 10), 3000]
        sent = {m.step: m.value for m in history}
        kept = dict(zip(z["train_loss_steps"].tolist(), z["train_loss_values"].tolist()))
        assert all(kept[step] == value for step, value in sent.items())


def test_a_run_shorter_than_one_sampling_interval_still_has_system_metrics(tmp_path, store):
    pytest.importorskip("psutil", reason="system metrics need psutil (the dev extra installs it)")
    result = run_once(
        tmp_path, "epochs=50", "log_every=10", "tracking.system_metrics_min_s=0", store=store
    )
    history = client_for(store).get_metric_history(
        result["run_id"], "system/cpu_utilization_percentage"
    )
    # ~0.05 s of work: shorter than one 0.5 s interval unless the machine is loaded (then it may get more samples)
    short = result["metrics"]["wall_time_s"] < 0.5
    assert (len(history) == 1 if short else len(history) >= 1) and 0 <= history[
        0
    ].value <= 100 * 1024


def test_the_sampler_logs_live_during_a_long_run_and_hands_back_the_rest(store):
    pytest.importorskip("psutil", reason="system metrics need psutil (the dev extra installs it)")
    uri = f"sqlite:///{store}"
    c = tracking.open_store(uri)
    run_id = tracking.start_run(c, tracking.experiment_id(c, "sampler", uri), "r", {})
    sampler = tracking.system_monitor(c, run_id, uri, interval=0.02, flush_every=0.1)
    deadline = time.monotonic() + 10
    while (
        not c.get_metric_history(run_id, "system/cpu_utilization_percentage")
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    live = len(c.get_metric_history(run_id, "system/cpu_utilization_percentage"))
    rest = tracking.stop(sampler)
    tracking.finish_run(c, run_id, {}, system=rest)
    history = c.get_metric_history(run_id, "system/cpu_utilization_percentage")
    assert live >= 1, "nothing was logged while the run was running"
    assert sorted(m.step for m in history) == list(range(sampler.step)), (
        "a sample was lost or sent twice"
    )
    assert c.get_run(run_id).info.status == "FINISHED"


def test_open_store_switches_a_new_store_to_wal_and_reopens_it_without_a_probe(tmp_path):
    db = tmp_path / "mlruns" / "mlflow.db"
    uri = f"sqlite:///{db}"
    tracking.open_store(uri)
    assert _is_wal_database(db)
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    c = tracking.open_store(uri)  # the fast path: a client on the existing store
    assert tracking.experiment_id(c, "again", uri)
    plain = tmp_path / "plain.db"
    sqlite3.connect(plain).execute("create table t (a)").connection.commit()
    assert not _is_wal_database(plain) and not _is_wal_database(tmp_path / "missing.db")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database" * 100)  # SQLite's DatabaseError: not WAL either
    assert not _is_wal_database(garbage) and not _is_wal_database(tmp_path)  # a folder


def test_curve_points_must_be_a_non_negative_integer(tmp_path, store):
    from conftest import cli

    before = store.read_bytes()
    proc = cli(tmp_path, "tracking.curve_points=-1", store=store)
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .endswith("tracking.curve_points=-1 is not allowed: expected an integer >= 0")
    ), proc.stderr
    assert store.read_bytes() == before


@pytest.mark.parametrize("multirun", [True, False])
def test_a_database_mlflow_cannot_read_fails_in_one_line_and_is_left_alone(tmp_path, multirun):
    """A file with a WAL header and junk behind it: SQLite itself is asked (never Python's open(), which would drop
    the process's SQLite locks), so it is no WAL store; the command stops in one line, before any job, and the
    file is not changed."""
    from conftest import cli

    db = tmp_path / "mlruns" / "mlflow.db"
    db.parent.mkdir()
    # a WAL header, then junk
    db.write_bytes(b"SQLite format 3\x00" + b"\x10\x00\x02\x02" + b"\x07" * 4000)
    assert not _is_wal_database(db)
    before = db.read_bytes()
    args = ["-m", "lr=0.001,0.005"] if multirun else []
    proc = cli(tmp_path, *args, "epochs=50", store=db)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert f"tracking.uri=sqlite:///{db}" in last and "Traceback" not in proc.stderr, proc.stderr
    assert db.read_bytes() == before
    assert not list((tmp_path / "sweep").glob("*/result.json"))


def test_a_failing_monitor_is_dropped_and_the_others_keep_sampling(store, caplog):
    pytest.importorskip("psutil", reason="system metrics need psutil (the dev extra installs it)")
    uri = f"sqlite:///{store}"
    c = tracking.open_store(uri)
    run_id = tracking.start_run(c, tracking.experiment_id(c, "sampler", uri), "r", {})
    sampler = tracking.system_monitor(c, run_id, uri, interval=0.01, flush_every=60)

    class Broken:
        def collect_metrics(self):
            raise RuntimeError("no such counter")

        def aggregate_metrics(self):
            return {}

        def clear_metrics(self):
            pass

    sampler.monitors.append(Broken())
    wait_for(
        lambda: not any(isinstance(m, Broken) for m in sampler.monitors), "the sampler's next pass"
    )
    rest = tracking.stop(sampler)
    assert not any(isinstance(m, Broken) for m in sampler.monitors)
    assert "Broken dropped: RuntimeError: no such counter" in caplog.text
    tracking.finish_run(c, run_id, {}, system=rest)
    assert c.get_metric_history(run_id, "system/cpu_utilization_percentage")


def _sweeps_at_once(tmp_path, n=4):
    """``n`` multiruns launched at the same moment on one fresh store path; their (returncode, stderr)."""
    import subprocess
    import sys

    tmp_path.mkdir(parents=True, exist_ok=True)
    db = tmp_path / "mlruns" / "mlflow.db"
    logs = [tmp_path / f"output{i}.txt" for i in range(n)]
    procs = []
    for i, log in enumerate(logs):
        # a file, not a pipe: a blocked writer could hold the store's lock
        with open(log, "w") as out:
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "sweeper",
                        "-m",
                        NO_BASELINES,
                        "lr=0.001,0.005",
                        "epochs=20",
                        "log_every=10",
                        f"tracking.uri=sqlite:///{db}",
                        f"hydra.sweep.dir={tmp_path / f'sweep{i}'}",
                    ],
                    cwd=tmp_path,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=command_env(),  # no figures (conftest.NO_PLOTS): the store's races are the point
                )
            )
    return db, [(p.wait(timeout=600), log.read_text()) for p, log in zip(procs, logs)]


@pytest.mark.slow
def test_sweeps_started_together_on_a_fresh_store_all_record_every_run(tmp_path):
    """Before the store lock, alembic's migrations raced ("Online migration expected to match one row",
    "duplicate column name: step", "table _alembic_tmp_metrics already exists") and broke the store (the
    lock itself: test_store_creation_waits_for_the_lock_and_then_trusts_the_finished_store)."""
    db, outcomes = _sweeps_at_once(tmp_path / "0")
    for code, err in outcomes:
        assert code == 0, err[-2000:]
    c = client_for(db)
    runs = [r for e in c.search_experiments() for r in c.search_runs([e.experiment_id])]
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    kids = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 4 and len(kids) == 8
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert sorted(r.data.params["lr"] for r in kids) == ["0.001"] * 4 + ["0.005"] * 4
    assert _is_wal_database(db)


def test_store_creation_waits_for_the_lock_and_then_trusts_the_finished_store(tmp_path):
    """A process that finds the lock held waits; when the holder has made the store (WAL header),
    the waiter uses it as it is, without creating anything."""
    import threading

    db = tmp_path / "mlruns" / "mlflow.db"
    db.parent.mkdir()
    uri = f"sqlite:///{db}"
    got = []
    from sweeper.base.process import exclusive

    with exclusive(db.with_name("mlflow.db.lock")):
        waiter = threading.Thread(target=lambda: got.append(tracking.open_store(uri)))
        waiter.start()
        waiter.join(0.5)
        assert waiter.is_alive() and not _is_wal_database(db), (
            "the store was created under a held lock"
        )
        from mlflow import MlflowClient  # make the store as the lock holder (another process) would

        MlflowClient(tracking_uri=uri).search_experiments()
        with sqlite3.connect(db) as con:
            con.execute("PRAGMA journal_mode=WAL")
    waiter.join(30)
    assert got and tracking.experiment_id(got[0], "after", uri)


@pytest.mark.parametrize("multirun", [False, True])
def test_a_tracking_folder_that_cannot_be_made_fails_in_one_line(tmp_path, multirun, monkeypatch):
    """A db path under a regular file (tests run as root, whom chmod 555 does not stop): exit 2 with one
    line, no traceback, no job started, at once: refused before MLflow is handed the store (its retries took ~100 s;
    before that, a FileExistsError traceback)."""
    from conftest import cli
    from sweeper.tracking import store

    (tmp_path / "afile").write_text("not a folder")
    db = tmp_path / "afile" / "mlflow.db"
    monkeypatch.setattr(
        store, "client", lambda uri: pytest.fail(f"MLflow was handed {uri}: it retries ~100 s")
    )
    with pytest.raises(tracking.TrackingError, match="is a file, not a folder"):
        tracking.open_store(f"sqlite:///{db}")
    proc = cli(tmp_path, *(["-m", "lr=0.001,0.005"] if multirun else []), "epochs=20", store=db)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert lines == [
        f"sweeper: error: tracking.uri=sqlite:///{db} cannot be used: {tmp_path / 'afile'} is a file, "
        "not a folder; choose a writable place for tracking.uri"
    ], proc.stderr
    assert (
        not list(tmp_path.glob("*/*/result.json"))
        and not (tmp_path / "run" / "result.json").exists()
    )


@pytest.mark.parametrize("existing", [False, True])
def test_an_unwritable_tracking_folder_is_refused_before_mlflow_touches_it(
    tmp_path, monkeypatch, existing
):
    """``chmod 555`` on the store's folder (or a read-only mount): os.access with the real uid says no.
    Simulated here, since root may write anywhere: the check must come before MLflow, which would retry
    "unable to open database file" for ~100 s."""
    import os

    db = tmp_path / "mlruns" / "mlflow.db"
    if existing:
        tracking.open_store(f"sqlite:///{db}")
    before = sorted(p.name for p in db.parent.iterdir()) if existing else None
    real = os.access
    monkeypatch.setattr(
        os,
        "access",
        lambda p, mode, **kw: (
            Path(p) != tmp_path / ("mlruns" if existing else "") and real(p, mode, **kw)
        ),
    )
    import mlflow

    monkeypatch.setattr(
        mlflow, "MlflowClient", lambda *a, **k: pytest.fail("MLflow was asked to open the store")
    )
    with pytest.raises(tracking.TrackingError) as err:
        tracking.open_store(f"sqlite:///{db}")
    folder = tmp_path / "mlruns" if existing else tmp_path
    assert str(err.value) == (
        f"tracking.uri=sqlite:///{db} cannot be used: the folder {folder} is not writable; "
        "choose a writable place for tracking.uri"
    )
    assert (
        (sorted(p.name for p in db.parent.iterdir()) == before)
        if existing
        else not db.parent.exists()
    )


def test_loss_curves_are_in_the_units_of_the_metrics(tmp_path, store):
    """A regression run's loss curve is an MSE in the target's units², as val_mse is: its last val_loss
    sample (the last weights) is val_mse, not ~1 (the standardised units)."""
    result = run_once(tmp_path, "data=diabetes", "epochs=2000", "log_every=1", store=store)
    c = client_for(store)
    last = max(c.get_metric_history(result["run_id"], "val_loss"), key=lambda m: m.step)
    assert last.value == pytest.approx(result["metrics"]["val_mse"], rel=1e-3)
    # diabetes' target is in the hundreds: the units matter
    assert result["metrics"]["val_mse"] > 100


def test_runs_ending_at_once_on_one_new_data_set_are_all_recorded(store):
    """Concurrent runs (joblib workers whose jobs end together) log the same new data set: MLflow's
    check-then-insert lets one of them hit the unique constraint; finish_run tries again and links it."""
    import threading

    import numpy as np

    uri = f"sqlite:///{store}"
    c = tracking.open_store(uri)
    exp = tracking.experiment_id(c, "race", uri)
    errors, ended = [], []
    for round_ in range(6):
        X = np.random.default_rng(round_).normal(size=(20, 3))
        ds = tracking.dataset_inputs(
            "d",
            "diabetes",
            {"train": (X, X[:, 0]), "validation": (X + 1, X[:, 0]), "test": (X + 2, X[:, 0])},
        )
        runs = [tracking.start_run(c, exp, f"r{round_}-{i}", {}) for i in range(4)]
        barrier = threading.Barrier(len(runs))

        def end(run_id, ds=ds, barrier=barrier):
            barrier.wait()
            try:
                tracking.finish_run(c, run_id, {"val_mse": 1.0}, datasets=ds)
                ended.append(run_id)
            except Exception as e:  # noqa: BLE001
                errors.append(f"{type(e).__name__}: {str(e).splitlines()[0]}")

        threads = [threading.Thread(target=end, args=(r,)) for r in runs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
    for run_id in ended:
        run = c.get_run(run_id)
        assert run.info.status == "FINISHED" and len(run.inputs.dataset_inputs) == 3
    assert len(ended) == 24


# --- runs created in bulk (a batched group's members, on a SQL store) ---


def _spec(name, **extra):
    return {
        "name": name,
        "tags": {"device": "cpu", "mlflow.user": "someone", "note": "ü"},
        "parent_run_id": None,
        "params": {"lr": 0.01, "data.name": "iris"},
        "start_time": None,
        **extra,
    }


def test_runs_created_in_one_transaction_are_what_one_at_a_time_makes(store):
    from sweeper.tracking import bulk, records

    c = tracking.client(f"sqlite:///{store}")
    experiment = c.create_experiment(
        "bulk", artifact_location=(store.parent / "artifacts").as_uri()
    )
    parent = records.start_run(c, experiment, "parent", {})
    assert bulk.creates_in_bulk(c)
    one = c.get_run(
        records.start_run(
            c,
            experiment,
            "a",
            **{k: v for k, v in _spec("a", parent_run_id=parent).items() if k != "name"},
        )
    )
    ids = bulk.start_runs(
        c, experiment, [_spec("b", parent_run_id=parent), _spec("c", start_time=123)]
    )
    b, c2 = (c.get_run(i) for i in ids)
    for run in (b, c2):
        assert run.info.status == "RUNNING" and run.info.lifecycle_stage == "active"
        assert (
            run.info.experiment_id == one.info.experiment_id
            and run.info.user_id == one.info.user_id == "someone"
        )
        assert run.info.artifact_uri == one.info.artifact_uri.replace(
            one.info.run_id, run.info.run_id
        )
        assert run.data.params == one.data.params
    assert {k: v for k, v in b.data.tags.items() if k != "mlflow.runName"} == {
        k: v for k, v in one.data.tags.items() if k != "mlflow.runName"
    }
    assert b.info.run_name == b.data.tags["mlflow.runName"] == "b" and c2.info.start_time == 123
    assert abs(b.info.start_time - one.info.start_time) < 60_000
    assert state.current().runs[ids[0]] == (
        b.info.artifact_uri,
        experiment,
    )  # the writer finds its artifact folder
    records.finish_run(c, ids[0], {"val_mse": 1.0})  # and the run ends as any other
    assert c.get_run(ids[0]).info.status == "FINISHED"


def test_runs_created_in_bulk_are_all_or_none(store):
    from mlflow.exceptions import MlflowException

    from sweeper.tracking import bulk

    c = tracking.client(f"sqlite:///{store}")
    experiment = c.create_experiment(
        "bulk", artifact_location=(store.parent / "artifacts").as_uri()
    )
    bad = _spec("bad")
    bad["params"] = {"x" * 300: 1}  # a key MLflow refuses
    with pytest.raises(MlflowException):
        bulk.start_runs(c, experiment, [_spec("good"), bad])
    assert c.search_runs([experiment]) == []


def test_one_heartbeat_refreshes_a_groups_runs_until_each_ends(store, monkeypatch):
    from sweeper.base.process import HEARTBEAT
    from sweeper.tracking.run import TrackedRun

    monkeypatch.setenv("SWEEPER_HEARTBEAT_S", "0.05")
    uri = f"sqlite:///{store}"
    c = tracking.client(uri)
    experiment = c.create_experiment(
        "beats", artifact_location=(store.parent / "artifacts").as_uri()
    )
    runs = TrackedRun.start_many(uri, c, experiment, [_spec(n) for n in "abc"])
    heart = runs[0]._heart
    assert all(r._heart is heart for r in runs)  # one thread for the group

    def beats() -> dict[str, str]:
        return {r.run_id: c.get_run(r.run_id).data.tags[HEARTBEAT] for r in runs}

    def next_beat(what: str) -> dict[str, str]:
        before = beats()
        wait_for(lambda: all(beats()[r.run_id] != before[r.run_id] for r in runs[1:]), what)
        return beats()

    runs[0].stop_heartbeat()
    # the others still beat; one under way when the first run left may name it
    next_beat("the others' next beat")
    ended = next_beat("the others' beat after that")[runs[0].run_id]  # no later one does
    next_beat("a third beat of the others")
    # the one that ended beats no more
    assert c.get_run(runs[0].run_id).data.tags[HEARTBEAT] == ended
    assert heart._thread.is_alive()
    for r in runs[1:]:
        r.stop_heartbeat()
    assert not heart._thread.is_alive()  # gone with the last run


def test_runs_ended_with_a_reason_end_as_set_tag_and_set_terminated_end_them(store):
    """Runs that get nothing more (publish.mark_orphans): a reason and a status, in one transaction on the
    embedded store."""
    from sweeper.tracking import bulk, ending

    c = tracking.client(f"sqlite:///{store}")
    experiment = c.create_experiment(
        "ends", artifact_location=(store.parent / "artifacts").as_uri()
    )
    a, b, keep, ref = bulk.start_runs(c, experiment, [_spec(n) for n in "abcd"])
    c.set_tag(a, "failure_reason", "an earlier reason")  # replaced, not doubled
    ends = [(a, "KILLED", "sweep interrupted"), (b, "FAILED", "orphaned: its job died")]
    ends = [
        ending.Ending(r, {"status": st, "tags": {"failure_reason": why}}) for r, st, why in ends
    ]
    assert ending.end_runs(c, ends) == ending.BULK
    c.set_tag(ref, "failure_reason", "orphaned: its job died")
    c.set_terminated(ref, "FAILED")
    ra, rb, rk, rr = (c.get_run(i) for i in (a, b, keep, ref))
    assert (ra.info.status, ra.data.tags["failure_reason"]) == ("KILLED", "sweep interrupted")
    assert (rb.info.status, rb.data.tags["failure_reason"]) == ("FAILED", "orphaned: its job died")
    assert (
        rb.data.tags == {**rr.data.tags, "mlflow.runName": "b"}
        and rb.info.end_time
        and rr.info.end_time
    )
    assert abs(rb.info.end_time - rr.info.end_time) < 60_000
    assert (
        rk.info.status == "RUNNING"
        and "failure_reason" not in rk.data.tags
        and rk.info.end_time is None
    )


# --- runs ended in bulk (the writer process, on a SQL store): tests/test_ending.py; read in bulk ---


def test_child_runs_read_table_by_table_are_what_search_runs_returns(store, tmp_path):
    from mlflow.entities import LoggedModelOutput

    from test_ending import _end

    from sweeper.tracking import bulk, records

    c = tracking.client(f"sqlite:///{store}")
    experiment = c.create_experiment(
        "children", artifact_location=(store.parent / "artifacts").as_uri()
    )
    parent, other = (records.start_run(c, experiment, n, {}) for n in ("parent", "other"))
    X = np.random.default_rng(0).normal(size=(20, 3))
    ids = bulk.start_runs(c, experiment, [_spec(n, parent_run_id=parent) for n in "abcd"])
    bulk.start_runs(c, experiment, [_spec("elsewhere", parent_run_id=other)])
    bulk.finish_runs(
        c, [(ids[0], _end(X, tmp_path, 0)), (ids[1], {**_end(X, tmp_path, 1), "status": "FAILED"})]
    )
    model = c.create_logged_model(experiment, "model", ids[0])
    c.log_outputs(ids[0], [LoggedModelOutput(model.model_id, step=0)])
    c.delete_run(ids[3])  # deleted: not a child any more

    def seen(r):
        return (
            r.info.to_proto().SerializeToString(),
            r.data.metrics.keys(),
            r.data.params,
            r.data.tags,
            r.inputs.to_proto().SerializeToString(),
            [o.model_id for o in r.outputs.model_outputs],
        )

    want = tracking.search(c, [experiment], f"tags.`mlflow.parentRunId` = '{parent}'")
    got = bulk.child_runs(c, [experiment], parent)
    assert [r.info.run_id for r in got] == [r.info.run_id for r in want] and len(got) == 3
    assert [seen(r) for r in got] == [seen(r) for r in want]
    # NaN as NaN
    assert [{k: repr(v) for k, v in r.data.metrics.items()} for r in got] == [
        {k: repr(v) for k, v in r.data.metrics.items()} for r in want
    ]
    assert model.model_id in seen(next(r for r in got if r.info.run_id == ids[0]))[5]


@pytest.mark.parametrize(
    "error", [KeyError("getpwuid(): uid not found: 1234"), OSError("no login")]
)
def test_a_run_without_a_user_name_is_recorded_as_unknown(monkeypatch, error):
    """A container whose uid has no passwd entry: getpass raises (KeyError before Python
    3.13, OSError since); the run's mlflow.user is 'unknown', the run is still recorded."""
    import getpass

    from sweeper.tracking.records import source_tags

    def no_user():
        raise error

    monkeypatch.setattr(getpass, "getuser", no_user)
    tags = source_tags(["python", "-m", "sweeper", "epochs=2"])
    assert tags["mlflow.user"] == "unknown"
    assert tags["mlflow.source.name"] == "python -m sweeper"


class _Monitor:
    def __init__(self, fails_at: int | None = None):
        self.calls, self.fails_at, self.value = 0, fails_at, 0.0

    def collect_metrics(self):
        self.calls += 1
        if self.calls == self.fails_at:
            raise RuntimeError("the GPU is gone\nmore")
        self.value += 10.0

    def aggregate_metrics(self):
        return {"cpu_percent": self.value}

    def clear_metrics(self):
        pass


@pytest.mark.parametrize("fails_at", [1, 2])
def test_a_system_monitor_that_fails_is_dropped_once_and_the_others_still_sample(caplog, fails_at):
    """Whether a monitor fails on the first (priming) call, whose numbers are not kept, or on a
    later one: it is dropped with one warning, and the other monitor's samples go on, numbered
    from step 0."""
    import logging
    import threading

    from sweeper.tracking.system import SystemSampler

    s = SystemSampler.__new__(SystemSampler)
    good, bad = _Monitor(), _Monitor(fails_at)
    s.monitors, s.rows, s.step, s._lock = [good, bad], [], 0, threading.Lock()
    with caplog.at_level(logging.WARNING, logger="sweeper.tracking.system"):
        s._sample(keep=False)
        s._sample()
        s._sample()
    assert s.monitors == [good] and s.step == 2
    dropped = [r.getMessage() for r in caplog.records]
    assert dropped == ["system metrics: _Monitor dropped: RuntimeError: the GPU is gone"]
    got = [(m.key, m.value, m.step) for m in s.rows]
    # the good one's: the priming call's 10.0 not kept
    assert got == [("system/cpu_percent", 20.0, 0), ("system/cpu_percent", 30.0, 1)]


def test_system_metrics_a_store_refuses_are_dropped_said_once_and_a_bug_is_raised(caplog):
    """SystemSampler._flush: samples a failing store refuses (tracking.failures) are lost with one warning for
    the run, which still ends; an error that is no store's is raised."""
    import logging
    import threading

    from mlflow.exceptions import MlflowException

    from sweeper.tracking.system import SystemSampler

    class Client:
        def log_batch(self, run_id, metrics):
            raise raised

    s = SystemSampler.__new__(SystemSampler)
    s.c, s.run_id, s.also, s._lock, s.flush_error = Client(), "r1", [], threading.Lock(), None
    raised = MlflowException("the server went away")
    with caplog.at_level(logging.WARNING, logger="sweeper.tracking.system"):
        for _ in range(2):
            s.rows = ["a sample"]
            s._flush()
    assert [r.getMessage() for r in caplog.records] == [
        "system metrics of run r1 not logged: MlflowException: the server went away"
    ]
    raised, s.rows = TypeError("ours"), ["a sample"]
    with pytest.raises(TypeError, match="ours"):
        s._flush()

"""What a run sends to MLflow and what it keeps: thinned curves, the whole curves as an artifact, system
metrics from the sampler (live on long runs), the store opened without a second probe."""
from __future__ import annotations

import sqlite3
import time

import numpy as np
import pytest

from sweeper import tracking

from conftest import client_for, run_once


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
    result = run_once(tmp_path, "epochs=3000", "log_every=10", "tracking.curve_points=40", store=store)
    c = client_for(store)
    history = sorted(c.get_metric_history(result["run_id"], "train_loss"), key=lambda m: m.step)
    assert [m.step for m in history] == [*range(0, 3000, 80), 2990]
    local = c.download_artifacts(result["run_id"], "curves.npz", str(tmp_path))
    with np.load(local) as z:
        assert z["train_loss_steps"].tolist() == list(range(0, 3000, 10))
        sent = {m.step: m.value for m in history}
        kept = dict(zip(z["train_loss_steps"].tolist(), z["train_loss_values"].tolist()))
        assert all(kept[step] == value for step, value in sent.items())


def test_a_run_shorter_than_one_sampling_interval_still_has_system_metrics(tmp_path, store):
    pytest.importorskip("psutil", reason="system metrics need psutil (the dev extra installs it)")
    result = run_once(tmp_path, "epochs=50", "log_every=10", store=store)
    assert result["metrics"]["wall_time_s"] < 0.5
    history = client_for(store).get_metric_history(result["run_id"], "system/cpu_utilization_percentage")
    assert len(history) == 1 and 0 <= history[0].value <= 100 * 1024


def test_the_sampler_logs_live_during_a_long_run_and_hands_back_the_rest(store):
    pytest.importorskip("psutil", reason="system metrics need psutil (the dev extra installs it)")
    uri = f"sqlite:///{store}"
    c = tracking.open_store(uri)
    run_id = tracking.start_run(c, tracking.experiment_id(c, "sampler", uri), "r", {})
    sampler = tracking.system_monitor(c, run_id, uri, interval=0.02, flush_every=0.1)
    deadline = time.monotonic() + 10
    while not c.get_metric_history(run_id, "system/cpu_utilization_percentage") and time.monotonic() < deadline:
        time.sleep(0.05)
    live = len(c.get_metric_history(run_id, "system/cpu_utilization_percentage"))
    rest = tracking.stop(sampler)
    tracking.finish_run(c, run_id, {}, system=rest)
    history = c.get_metric_history(run_id, "system/cpu_utilization_percentage")
    assert live >= 1, "nothing was logged while the run was running"
    assert sorted(m.step for m in history) == list(range(sampler.step)), "a sample was lost or sent twice"
    assert c.get_run(run_id).info.status == "FINISHED"


def test_open_store_switches_a_new_store_to_wal_and_reopens_it_without_a_probe(tmp_path):
    db = tmp_path / "mlruns" / "mlflow.db"
    uri = f"sqlite:///{db}"
    tracking.open_store(uri)
    assert tracking._is_wal_database(db)
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    c = tracking.open_store(uri)  # the fast path: a client on the existing store
    assert tracking.experiment_id(c, "again", uri)
    plain = tmp_path / "plain.db"
    sqlite3.connect(plain).execute("create table t (a)").connection.commit()
    assert not tracking._is_wal_database(plain) and not tracking._is_wal_database(tmp_path / "missing.db")


def test_curve_points_must_be_a_non_negative_integer(tmp_path, store):
    from conftest import cli

    before = store.read_bytes()
    proc = cli(tmp_path, "tracking.curve_points=-1", store=store)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].endswith(
        "tracking.curve_points=-1 is not allowed: expected an integer >= 0"
    ), proc.stderr
    assert store.read_bytes() == before


@pytest.mark.parametrize("multirun", [True, False])
def test_a_database_mlflow_cannot_read_fails_in_one_line_and_is_left_alone(tmp_path, multirun):
    """The store is opened without a probe when it is already an SQLite file in WAL mode; a damaged one
    still stops the command in one line, before any job, and is not changed."""
    from conftest import cli

    db = tmp_path / "mlruns" / "mlflow.db"
    db.parent.mkdir()
    db.write_bytes(b"SQLite format 3\x00" + b"\x10\x00\x02\x02" + b"\x07" * 4000)  # a WAL header, then junk
    assert tracking._is_wal_database(db)
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
    time.sleep(0.2)
    rest = tracking.stop(sampler)
    assert not any(isinstance(m, Broken) for m in sampler.monitors)
    assert "Broken dropped: RuntimeError: no such counter" in caplog.text
    tracking.finish_run(c, run_id, {}, system=rest)
    assert c.get_metric_history(run_id, "system/cpu_utilization_percentage")

"""A sweep at a glance: leaderboard and plots on the parent run, a live MLflow server, loadable models."""

import contextlib
import csv
import io
import json
import re
import sqlite3
import subprocess
import sys
import socket
import time

import mlflow
import numpy as np
import pytest

from sweeper import data, report, tracking
from conftest import (
    PLOTS,
    command,
    all_runs,
    cli,
    client_for,
    copy_store,
    http_get,
    http_post,
    make_cfg,
    mlflow_server,
    one_line,
    shared_sweep,
)
from sweeper.base.process import PID_START, start_mark

FAST = ("epochs=300", "log_every=10")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, _template_store):
    """One real 4-run multirun (lr x depth) into its own store, shared by the tests of this module."""
    return shared_sweep(
        tmp_path_factory,
        _template_store,
        "report",
        "lr=0.001,0.01",
        "depth=1,2",
        *FAST,
        env=PLOTS,  # its plots are read
    )


@pytest.fixture
def server(sweep):
    """``mlflow server`` on 127.0.0.1 (a free port) over the sweep's store; stopped after the test."""
    with mlflow_server(sweep["store"]) as url:
        yield url


@pytest.mark.slow
def test_a_live_server_shows_the_parent_its_children_and_the_summary(sweep, server):
    experiments = json.loads(
        http_get(f"{server}/api/2.0/mlflow/experiments/get-by-name?experiment_name=diabetes")
    )
    exp_id = experiments["experiment"]["experiment_id"]
    runs = http_post(
        f"{server}/api/2.0/mlflow/runs/search", {"experiment_ids": [exp_id], "max_results": 100}
    )["runs"]
    tags = [{t["key"]: t["value"] for t in r["data"].get("tags", [])} for r in runs]
    parents = [r for r, t in zip(runs, tags) if "mlflow.parentRunId" not in t]
    children = [
        r for r, t in zip(runs, tags) if t.get("mlflow.parentRunId") == sweep["parent"].info.run_id
    ]
    assert len(parents) == 1 and len(children) == 4
    for child in children:
        names = {m["key"] for m in child["data"]["metrics"]}
        assert {"test_mse", "test_mae", "wall_time_s"} <= names
        assert child["info"]["status"] == "FINISHED"
    parent_id = parents[0]["info"]["run_id"]
    listing = json.loads(http_get(f"{server}/api/2.0/mlflow/artifacts/list?run_id={parent_id}"))
    assert {"summary.csv", "summary.md", "plots"} <= {f["path"] for f in listing["files"]}
    plots = json.loads(
        http_get(f"{server}/api/2.0/mlflow/artifacts/list?run_id={parent_id}&path=plots")
    )
    assert {"plots/val_metric_vs_lr.png", "plots/loss_curves_top.png"} <= {
        f["path"] for f in plots["files"]
    }


def test_leaderboard_is_sorted_and_logged_on_the_parent(sweep):
    c = client_for(sweep["store"])
    parent = c.get_run(sweep["parent"].info.run_id)
    rows = list(
        csv.DictReader(
            io.StringIO(open(c.download_artifacts(parent.info.run_id, "summary.csv")).read())
        )
    )
    assert len(rows) == 4
    assert {"run", "lr", "depth", "val_mse", "test_mse", "train_time_s", "status", "run_id"} <= set(
        rows[0]
    )
    val = [float(r["val_mse"]) for r in rows]
    assert val == sorted(val)  # best first
    assert parent.data.metrics["best_val_mse"] == pytest.approx(val[0])
    assert parent.data.tags["best_run_id"] == rows[0]["run_id"]
    assert (
        parent.data.metrics["n_finished"] == 4
        and "n_failed" not in parent.data.metrics
        and parent.data.tags["n_failed"] == "0"
    )  # zero: a tag, no chart
    # readable run names
    assert rows[0]["run"] == f"lr={rows[0]['lr']},depth={rows[0]['depth']},cpu"
    png = open(c.download_artifacts(parent.info.run_id, "plots/val_metric_vs_lr.png"), "rb").read()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    out = sweep["proc"].stdout
    assert "[1/4]" in out and "[4/4]" in out and "val_mse=" in out  # a line per finished job
    assert "mlflow ui --backend-store-uri sqlite:///" in out


@pytest.mark.slow
def test_report_command_rebuilds_the_same_leaderboard_from_the_store(sweep):
    c = client_for(sweep["store"])
    parent_id = sweep["parent"].info.run_id
    before = open(c.download_artifacts(parent_id, "summary.md")).read()
    proc = command(
        "sweeper.report",
        "--experiment",
        "diabetes",
        "--tracking-uri",
        f"sqlite:///{sweep['store']}",
    )
    assert proc.returncode == 0, proc.stderr
    table = [line for line in proc.stdout.splitlines() if line.startswith(("run ", "lr=", "---"))]
    # the very table printed at the end
    assert len(table) == 6 and "\n".join(table) in sweep["proc"].stdout
    assert open(c.download_artifacts(parent_id, "summary.md")).read() == before
    bad = command(
        "sweeper.report", "--experiment", "nope", "--tracking-uri", f"sqlite:///{sweep['store']}"
    )
    assert bad.returncode == 2 and bad.stderr.startswith(
        "sweeper: error: --experiment=nope does not exist"
    )


def test_report_takes_latest_and_reports_single_runs(sweep):
    """In process (the command's main): --experiment NAME --latest is the latest sweep; --run ID (or a --parent
    that is no sweep's parent) reports that one run; --latest alone is refused in one line."""
    import contextlib

    from sweeper import report

    uri = f"sqlite:///{sweep['store']}"
    child = next(r for r in all_runs(sweep["store"]) if "mlflow.parentRunId" in r.data.tags)
    outs = []
    for args in (
        ["--experiment", "diabetes", "--latest"],
        ["--run", child.info.run_id],
        ["--parent", child.info.run_id],
    ):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert report.main([*args, "--tracking-uri", uri]) == 0
        outs.append(buf.getvalue())
    assert f"parent run {sweep['parent'].info.run_id}" in outs[0] and "best:" in outs[0]
    assert outs[1] == outs[2] and outs[1].startswith(
        f"Run {child.info.run_name} ({child.info.run_id}): FINISHED"
    )
    assert f"val_mse          {child.data.metrics['val_mse']:.4g}" in outs[1]
    assert f"#/experiments/{child.info.experiment_id}/runs/{child.info.run_id}" in outs[1]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert report.main(["--latest", "--run", child.info.run_id, "--tracking-uri", uri]) == 2
    assert (
        err.getvalue().strip()
        == "sweeper: error: --latest needs --experiment NAME: expected --experiment NAME --latest"
    )


def test_pyfunc_model_reproduces_the_logged_test_predictions(sweep):
    c = client_for(sweep["store"])
    child = next(r for r in all_runs(sweep["store"]) if "mlflow.parentRunId" in r.data.tags)
    mlflow.set_tracking_uri(f"sqlite:///{sweep['store']}")
    model = mlflow.pyfunc.load_model(f"runs:/{child.info.run_id}/model")
    logged = np.loadtxt(
        c.download_artifacts(child.info.run_id, "test_predictions.csv"), delimiter=",", skiprows=1
    )
    ds = data.load(make_cfg("data=diabetes").data, seed=0)
    import pandas as pd

    # the data set's columns, by name
    frame = pd.DataFrame(ds.raw(ds.X_test), columns=ds.input_columns)
    np.testing.assert_allclose(model.predict(frame), logged[:, 1], rtol=1e-12)
    np.testing.assert_allclose(logged[:, 0], ds.to_original(ds.y_test).ravel())
    mse = float(np.mean((logged[:, 1] - logged[:, 0]) ** 2))
    assert child.data.metrics["test_mse"] == pytest.approx(mse, rel=1e-12)
    assert model.metadata.signature is not None


# ---- every number sweeper prints has at most 4 significant digits --------------------------------------

DECIMAL = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d+|\d+(?:\.\d+)?[eE][-+]?\d+)(?![\w.])")


def long_numbers(text: str) -> list[str]:
    """The numbers in ``text`` printed with more than 4 significant digits (integers, ids and dates are not
    decimals), except in commands, which keep exact values (a resumed sweep matches its runs by them), and in
    Hydra's own log lines."""
    found = []
    for line in text.splitlines():
        if "python -m sweeper" in line or "[HYDRA]" in line:
            continue
        for m in DECIMAL.finditer(line):
            mantissa = re.split("[eE]", m.group(0))[0].lstrip("+-").replace(".", "").lstrip("0")
            if len(mantissa) > 4:
                found.append(m.group(0))
    return found


def test_long_numbers_finds_what_it_should():
    assert long_numbers("lr=0.0012345678  val_mse=3223.53  3118.2245 0.97368421 1.2345e+04") == [
        "0.0012345678",
        "3223.53",
        "3118.2245",
        "0.97368421",
        "1.2345e+04",
    ]
    assert (
        long_numbers(
            "0.001235 3224 12345 1e-08 2.5x 127.0.0.1:5000 3.17.2 run f14dbe78dbca45659e12 12:53:16,818"
        )
        == []
    )
    assert long_numbers("  python -m sweeper -m lr=0.0012345678 resume=true") == []


@pytest.fixture(scope="module")
def digits(tmp_path_factory, _template_store):
    """A sweep whose values have as many digits as Optuna's (lr=0.0012345678), on the CPU and a stand-in GPU
    (CPU/GPU pairs for compare), for 12345 epochs (an integer that 4 significant digits would change)."""
    from sweeper.base.backend import FAKE_GPU_ENV

    tmp = tmp_path_factory.mktemp("digits")
    store = copy_store(_template_store, tmp)
    proc = cli(
        tmp,
        "-m",
        "device=cpu,gpu",
        "lr=0.0012345678,0.0023456789",
        "epochs=12345",
        "log_every=1000",
        store=store,
        env={FAKE_GPU_ENV: "numpy"},
    )
    assert proc.returncode == 0, proc.stderr
    return {"store": store, "tmp": tmp, "proc": proc, "uri": f"sqlite:///{store}"}


def _printed(main, *argv: str) -> str:
    """What a command prints (its main, in this process)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(list(argv)) == 0
    return buf.getvalue()


def test_the_end_of_sweep_summary_rounds_every_number(digits):
    out = digits["proc"].stdout
    # the job lines (and run names) round Optuna-like values
    assert "[1/4]  device=cpu,lr=0.001235  val_mse=" in out
    # the leaderboard's run and lr columns
    assert re.search(r"^cpu,lr=0\.001235 +cpu +0\.001235 ", out, re.M)
    advice = out[out.index("Advice: ") :]
    assert re.search(r"lr=0\.00(1235|2346)\b", advice)  # the advisor names runs with rounded values
    # the next command keeps the exact grid
    assert re.search(r" (\+?lr=)[0-9.,]*0\.0012345678,0\.0023456789", advice)
    assert long_numbers(out) == []


def test_report_advise_summary_and_runs_round_every_number(digits):
    from sweeper import advise, report, runs, summary

    uri = digits["uri"]
    child = next(r for r in all_runs(digits["store"]) if "mlflow.parentRunId" in r.data.tags)
    outs = {
        "report --latest": _printed(
            report.main, "--experiment", "diabetes", "--latest", "--tracking-uri", uri
        ),
        "report --run": _printed(report.main, "--run", child.info.run_id, "--tracking-uri", uri),
        "advise": _printed(advise.main, "--experiment", "diabetes", "--tracking-uri", uri),
        "runs": _printed(runs.main, "--tracking-uri", uri),
        "runs --experiment": _printed(runs.main, "--experiment", "diabetes", "--tracking-uri", uri),
        "summary": _printed(summary.main, str(digits["tmp"] / "sweep")),
    }
    assert {name: long_numbers(out) for name, out in outs.items()} == {name: [] for name in outs}
    single = outs["report --run"]
    # an integer stays an integer (was 1.234e+04)
    assert re.search(r"^  epochs_run +12345$", single, re.M)
    # its params line
    assert re.search(r" lr=0\.00(1235|2346) ", single) and " epochs=12345 " in single
    assert child.data.params["lr"] in (
        "0.0012345678",
        "0.0023456789",
    )  # the store keeps the exact value


def test_compare_and_promote_round_every_number(digits, tmp_path):
    from sweeper import compare, promote

    # a CPU run that trained for 52 minutes: compare's times and speedups get 4 significant digits too
    db = tmp_path / "mlflow.db"
    with sqlite3.connect(digits["store"]) as src, sqlite3.connect(db) as dst:
        src.backup(dst)  # a copy of the store, its write-ahead log included
    c = client_for(db)
    for r in all_runs(db):
        if r.data.tags.get("device") == "cpu" and "mlflow.parentRunId" in r.data.tags:
            c.log_metric(r.info.run_id, "train_time_s", 3118.2245)
    out = _printed(compare.main, "--experiment", "diabetes", "--tracking-uri", f"sqlite:///{db}")
    assert " 3118 " in out and len(out.splitlines()) == 3  # the header and two CPU/GPU pairs
    promoted = _printed(
        promote.main,
        "--experiment",
        "diabetes",
        "--top",
        "2",
        "--tracking-uri",
        digits["uri"],
        "--out-dir",
        str(tmp_path / "promoted"),
    )
    assert " lr=0.001235 " in promoted
    assert {"compare": long_numbers(out), "promote": long_numbers(promoted)} == {
        "compare": [],
        "promote": [],
    }
    # the file keeps it exact
    assert "lr: 0.0012345678" in (tmp_path / "promoted" / "diabetes_1.yaml").read_text()


def test_a_pinned_failure_table_rounds_its_numbers(digits):
    from sweeper.insight import pinned

    (run, *_) = [r for r in all_runs(digits["store"]) if "mlflow.parentRunId" in r.data.tags]
    expected = pinned.expected_metrics(run.data.metrics, rtol=1e-6)
    # every metric 1e-5 larger: some are WORSE
    got = {k: v * (1 + 1e-5) for k, v in run.data.metrics.items()}
    rows = pinned.check(expected, got)
    text = pinned.table(rows)
    # the change shows what 4 digits hide
    assert any(r.verdict == "WORSE" for r in rows) and "+1e-05" in text
    assert long_numbers(text) == []


def test_the_parent_run_reads_as_mlflow_users_expect(sweep):
    """The swept space as params, the leaderboard as its description, its source, and its best run and model."""
    parent = client_for(sweep["store"]).get_run(sweep["parent"].info.run_id)
    params, tags = parent.data.params, parent.data.tags
    assert params["lr"] == "0.001,0.01" and params["depth"] == "1,2"
    assert not [k for k in params if k.startswith("tracking.")]
    # the UI's Source column; the command: sweeper.rerun
    assert tags["mlflow.source.name"] == "python -m sweeper -m"
    assert (
        tags["sweeper.rerun"].startswith("python -m sweeper -m ")
        and "lr=0.001,0.01" in tags["sweeper.rerun"]
    )
    assert tags["mlflow.source.type"] == "LOCAL" and tags["mlflow.user"]
    note = tags["mlflow.note.content"]
    assert (
        note.startswith("**Best:**")
        and tags["best_run_id"] in note
        and "|\u00a0\u00a0lr\u00a0\u00a0|" in note
    )
    # MLflow 3: the best run's model is a logged model (models:/m-<id>), the one its run links to
    best = client_for(sweep["store"]).get_run(tags["best_run_id"])
    assert tags["best_model_uri"] == f"models:/{best.outputs.model_outputs[0].model_id}"
    assert tags["n_finished"] == "4" and "n_killed" not in parent.data.metrics  # a zero: no chart
    child = next(
        r
        for r in all_runs(sweep["store"])
        if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id
    )
    assert (
        child.data.tags["hydra.job_dir"].startswith(str(sweep["tmp"]))
        and child.data.tags["task"] == "regression"
    )
    # no clash with the param
    assert "batch_size" not in child.data.tags and "tracking.uri" not in child.data.params
    # the default launcher trains the configurations together (packed across depths; a group may be split over the
    # cores: the sizes depend on the machine): each group's size is its runs' count
    kids = [
        r
        for r in all_runs(sweep["store"])
        if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id
    ]
    assert {r.data.tags["sweeper.launcher"] for r in kids} == {"batched"}
    groups = {}
    for r in kids:
        groups.setdefault(r.data.tags["sweeper.batch_group"], []).append(r)
    for members in groups.values():
        assert {int(r.data.tags["sweeper.group_size"]) for r in members} == {len(members)}


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_report_run_closes_a_single_run_whose_process_is_gone(store, capsys):
    c = client_for(store)
    exp = tracking.experiment_id(c, "diabetes", f"sqlite:///{store}")
    tags = {
        "device": "cpu",
        "fingerprint": "f" * 16,
        "overrides": "",
        "sweeper.host": socket.gethostname(),
        "sweeper.pid": str(dead_pid()),
    }
    run_id = tracking.start_run(c, exp, "cpu", tags)
    assert report.main(["--run", run_id, "--tracking-uri", f"sqlite:///{store}"]) == 0
    out = capsys.readouterr().out
    assert "marked FAILED (orphaned)" in out and f"{run_id}): FAILED" in out
    run = c.get_run(run_id)
    assert run.info.status == "FAILED" and run.data.tags["failure_reason"].startswith("orphaned")


def test_a_run_id_the_store_lacks_is_one_line_naming_the_store_and_where_ids_are(store, capsys):
    """Before: MLflow's bare "Run with id=deadbeef not found", which store unsaid."""
    from sweeper import advise

    tracking.experiment_id(client_for(store), "diabetes", f"sqlite:///{store}")  # the store exists
    for main, key in ((report.main, "--run"), (report.main, "--parent"), (advise.main, "--parent")):
        assert main([key, "deadbeef", "--tracking-uri", f"sqlite:///{store}"]) == 2
        assert capsys.readouterr().err == (
            f"sweeper: error: Run with id=deadbeef not found in sqlite:///{store}: expected a run "
            "id of this store (python -m sweeper.runs --experiment NAME lists them)\n"
        )


def test_report_run_leaves_a_live_single_run_running(store, capsys):
    c = client_for(store)
    exp = tracking.experiment_id(c, "diabetes", f"sqlite:///{store}")
    live = subprocess.Popen(["sleep", "30"])
    try:
        tags = {
            "device": "cpu",
            "fingerprint": "f" * 16,
            "sweeper.host": socket.gethostname(),
            "sweeper.pid": str(live.pid),
            PID_START: start_mark(live.pid),
        }  # the job's process, as its run records it
        run_id = tracking.start_run(c, exp, "cpu", tags)
        assert report.main(["--run", run_id, "--tracking-uri", f"sqlite:///{store}"]) == 0
        assert c.get_run(run_id).info.status == "RUNNING"
    finally:
        live.kill()


@pytest.mark.slow
def test_a_sigkilled_single_run_is_closed_by_report_run(tmp_path, store):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sweeper",
            "epochs=5000000",
            "log_every=1000",
            f"hydra.run.dir={tmp_path / 'run'}",
            f"tracking.uri=sqlite:///{store}",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not (store.is_file() and [r for r in all_runs(store) if r.info.status == "RUNNING"]):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.5)
    finally:
        proc.kill()
        proc.wait()
    (run,) = all_runs(store)
    assert run.info.status == "RUNNING"  # what SIGKILL leaves
    done = command(
        "sweeper.report",
        "--run",
        run.info.run_id,
        "--tracking-uri",
        f"sqlite:///{store}",
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (run,) = all_runs(store)
    assert run.info.status == "FAILED" and run.data.tags["failure_reason"].startswith("orphaned")


def test_a_run_id_the_store_does_not_hold_is_one_line_from_each_read_command(store, capsys):
    """report --parent/--run and advise --parent with an id the store does not hold: MLflow's
    own line (it names the id), exit 2, no traceback: the command's boundary
    (store_errors.guarded) says it, as it says the store's other failures."""
    from sweeper import advise

    uri = f"sqlite:///{store}"
    missing = "0123456789abcdef0123456789abcdef"
    for main, flag in (
        (report.main, "--parent"),
        (report.main, "--run"),
        (advise.main, "--parent"),
    ):
        assert main([flag, missing, "--tracking-uri", uri]) == 2
        line = one_line(capsys.readouterr().err)
        assert line.startswith("sweeper: error: ") and missing in line, line
        assert "failed" not in line, line  # not the store's failure: the id is unknown

"""A sweep at a glance: leaderboard and plots on the parent run, a live MLflow server, loadable models."""
import contextlib
import csv
import io
import json
import re
import sqlite3
import subprocess
import sys

import mlflow
import numpy as np
import pytest

from sweeper import data
from conftest import all_runs, cli, client_for, copy_store, http_get, http_post, make_cfg, mlflow_server

FAST = ("epochs=300", "log_every=10")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, _template_store):
    """One real 4-run multirun (lr x depth) into its own store, shared by the tests of this module."""
    import shutil

    tmp = tmp_path_factory.mktemp("report")
    store = tmp / "mlruns" / "mlflow.db"
    store.parent.mkdir()
    shutil.copy(_template_store, store)
    proc = cli(tmp, "-m", "lr=0.001,0.01", "depth=1,2", *FAST, store=store)
    assert proc.returncode == 0, proc.stderr
    (parent,) = [r for r in all_runs(store) if "mlflow.parentRunId" not in r.data.tags]
    return {"store": store, "tmp": tmp, "proc": proc, "parent": parent}


@pytest.fixture
def server(sweep):
    """``mlflow server`` on 127.0.0.1 (a free port) over the sweep's store; stopped after the test."""
    with mlflow_server(sweep["store"]) as url:
        yield url


@pytest.mark.slow
def test_a_live_server_shows_the_parent_its_children_and_the_summary(sweep, server):
    experiments = json.loads(http_get(f"{server}/api/2.0/mlflow/experiments/get-by-name?experiment_name=diabetes"))
    exp_id = experiments["experiment"]["experiment_id"]
    runs = http_post(f"{server}/api/2.0/mlflow/runs/search", {"experiment_ids": [exp_id], "max_results": 100})["runs"]
    tags = [{t["key"]: t["value"] for t in r["data"].get("tags", [])} for r in runs]
    parents = [r for r, t in zip(runs, tags) if "mlflow.parentRunId" not in t]
    children = [r for r, t in zip(runs, tags) if t.get("mlflow.parentRunId") == sweep["parent"].info.run_id]
    assert len(parents) == 1 and len(children) == 4
    for child in children:
        names = {m["key"] for m in child["data"]["metrics"]}
        assert {"test_mse", "test_mae", "wall_time_s"} <= names
        assert child["info"]["status"] == "FINISHED"
    parent_id = parents[0]["info"]["run_id"]
    listing = json.loads(http_get(f"{server}/api/2.0/mlflow/artifacts/list?run_id={parent_id}"))
    assert {"summary.csv", "summary.md", "plots"} <= {f["path"] for f in listing["files"]}
    plots = json.loads(http_get(f"{server}/api/2.0/mlflow/artifacts/list?run_id={parent_id}&path=plots"))
    assert {"plots/val_metric_vs_lr.png", "plots/loss_curves_top.png"} <= {f["path"] for f in plots["files"]}


def test_leaderboard_is_sorted_and_logged_on_the_parent(sweep):
    c = client_for(sweep["store"])
    parent = c.get_run(sweep["parent"].info.run_id)
    rows = list(csv.DictReader(io.StringIO(open(c.download_artifacts(parent.info.run_id, "summary.csv")).read())))
    assert len(rows) == 4
    assert {"run", "lr", "depth", "val_mse", "test_mse", "train_time_s", "status", "run_id"} <= set(rows[0])
    val = [float(r["val_mse"]) for r in rows]
    assert val == sorted(val)  # best first
    assert parent.data.metrics["best_val_mse"] == pytest.approx(val[0])
    assert parent.data.tags["best_run_id"] == rows[0]["run_id"]
    assert parent.data.metrics["n_finished"] == 4 and "n_failed" not in parent.data.metrics and parent.data.tags["n_failed"] == "0"  # zero: a tag, no chart
    assert rows[0]["run"] == f"lr={rows[0]['lr']},depth={rows[0]['depth']},cpu"  # readable run names
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
    proc = subprocess.run(
        [sys.executable, "-m", "sweeper.report", "--experiment", "diabetes", "--tracking-uri", f"sqlite:///{sweep['store']}"],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr
    table = [line for line in proc.stdout.splitlines() if line.startswith(("run ", "lr=", "---"))]
    assert len(table) == 6 and "\n".join(table) in sweep["proc"].stdout  # the very table printed at the end
    assert open(c.download_artifacts(parent_id, "summary.md")).read() == before
    bad = subprocess.run([sys.executable, "-m", "sweeper.report", "--experiment", "nope", "--tracking-uri",
                          f"sqlite:///{sweep['store']}"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("sweeper: error: --experiment=nope does not exist")


def test_report_takes_latest_and_reports_single_runs(sweep):
    """In process (the command's main): --experiment NAME --latest is the latest sweep; --run ID (or a --parent
    that is no sweep's parent) reports that one run; --latest alone is refused in one line."""
    import contextlib

    from sweeper import report

    uri = f"sqlite:///{sweep['store']}"
    child = next(r for r in all_runs(sweep["store"]) if "mlflow.parentRunId" in r.data.tags)
    outs = []
    for args in (["--experiment", "diabetes", "--latest"], ["--run", child.info.run_id],
                 ["--parent", child.info.run_id]):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert report.main([*args, "--tracking-uri", uri]) == 0
        outs.append(buf.getvalue())
    assert f"parent run {sweep['parent'].info.run_id}" in outs[0] and "best:" in outs[0]
    assert outs[1] == outs[2] and outs[1].startswith(f"Run {child.info.run_name} ({child.info.run_id}): FINISHED")
    assert f"val_mse          {child.data.metrics['val_mse']:.4g}" in outs[1]
    assert f"#/experiments/{child.info.experiment_id}/runs/{child.info.run_id}" in outs[1]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert report.main(["--latest", "--run", child.info.run_id, "--tracking-uri", uri]) == 2
    assert err.getvalue().strip() == "sweeper: error: --latest needs --experiment NAME: expected --experiment NAME --latest"


def test_pyfunc_model_reproduces_the_logged_test_predictions(sweep):
    c = client_for(sweep["store"])
    child = next(r for r in all_runs(sweep["store"]) if "mlflow.parentRunId" in r.data.tags)
    mlflow.set_tracking_uri(f"sqlite:///{sweep['store']}")
    model = mlflow.pyfunc.load_model(f"runs:/{child.info.run_id}/model")
    logged = np.loadtxt(c.download_artifacts(child.info.run_id, "test_predictions.csv"), delimiter=",", skiprows=1)
    ds = data.load(make_cfg("data=diabetes").data, seed=0)
    import pandas as pd

    frame = pd.DataFrame(ds.raw(ds.X_test), columns=ds.input_columns)  # the data set's columns, by name
    np.testing.assert_allclose(model.predict(frame), logged[:, 1], rtol=1e-12)
    np.testing.assert_allclose(logged[:, 0], ds.to_original(ds.y_test).ravel())
    mse = float(np.mean((logged[:, 1] - logged[:, 0]) ** 2))
    assert child.data.metrics["test_mse"] == pytest.approx(mse, rel=1e-12)
    assert model.metadata.signature is not None


def test_the_painter_draws_what_the_launching_process_would_and_a_dead_one_is_replaced(tmp_path):
    """The sweep's painter process (sweeper.insight.plots) and an in-process draw give the same PNG files; a painter
    that died is not waited for: the figures are drawn here."""
    from sweeper.insight import plots

    figure = {"name": "plots/a.png", "size": [4, 3], "axes": [{"title": "t", "xlabel": "x", "ylabel": "y", "yscale": "log",
                                                              "lines": [{"x": [1, 2, 3], "y": [3.0, 2.0, 1.5], "label": "run"}]}]}
    here = plots.draw_all([figure], tmp_path / "here")
    painter = plots.Painter().start()
    try:
        painter.submit([figure], tmp_path / "there")
        there = painter.collect()
        assert there == {"plots/a.png": tmp_path / "there" / "plots" / "a.png"}
        assert there["plots/a.png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert there["plots/a.png"].stat().st_size == here["plots/a.png"].stat().st_size
        painter.proc.kill()
        painter.proc.wait()
        painter.submit([figure], tmp_path / "after")
        assert painter.collect() == {"plots/a.png": tmp_path / "after" / "plots" / "a.png"} and painter.proc is None
    finally:
        painter.close()


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
        "0.0012345678", "3223.53", "3118.2245", "0.97368421", "1.2345e+04"]
    assert long_numbers("0.001235 3224 12345 1e-08 2.5x 127.0.0.1:5000 3.17.2 run f14dbe78dbca45659e12 12:53:16,818") == []
    assert long_numbers("  python -m sweeper -m lr=0.0012345678 resume=true") == []


@pytest.fixture(scope="module")
def digits(tmp_path_factory, _template_store):
    """A sweep whose values have as many digits as Optuna's (lr=0.0012345678), on the CPU and a stand-in GPU
    (CPU/GPU pairs for compare), for 12345 epochs (an integer that 4 significant digits would change)."""
    from sweeper.base.backend import FAKE_GPU_ENV

    tmp = tmp_path_factory.mktemp("digits")
    store = copy_store(_template_store, tmp)
    proc = cli(tmp, "-m", "device=cpu,gpu", "lr=0.0012345678,0.0023456789", "epochs=12345", "log_every=1000",
               store=store, env={FAKE_GPU_ENV: "numpy"})
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
    assert "[1/4]  device=cpu,lr=0.001235  val_mse=" in out  # the job lines (and run names) round Optuna-like values
    assert re.search(r"^cpu,lr=0\.001235 +cpu +0\.001235 ", out, re.M)  # the leaderboard's run and lr columns
    advice = out[out.index("Advice: "):]
    assert re.search(r"lr=0\.00(1235|2346)\b", advice)  # the advisor names runs with rounded values
    assert re.search(r" (\+?lr=)[0-9.,]*0\.0012345678,0\.0023456789", advice)  # the next command keeps the exact grid
    assert long_numbers(out) == []


def test_report_advise_summary_and_runs_round_every_number(digits):
    from sweeper import advise, report, runs, summary

    uri = digits["uri"]
    child = next(r for r in all_runs(digits["store"]) if "mlflow.parentRunId" in r.data.tags)
    outs = {
        "report --latest": _printed(report.main, "--experiment", "diabetes", "--latest", "--tracking-uri", uri),
        "report --run": _printed(report.main, "--run", child.info.run_id, "--tracking-uri", uri),
        "advise": _printed(advise.main, "--experiment", "diabetes", "--tracking-uri", uri),
        "runs": _printed(runs.main, "--tracking-uri", uri),
        "runs --experiment": _printed(runs.main, "--experiment", "diabetes", "--tracking-uri", uri),
        "summary": _printed(summary.main, str(digits["tmp"] / "sweep")),
    }
    assert {name: long_numbers(out) for name, out in outs.items()} == {name: [] for name in outs}
    single = outs["report --run"]
    assert re.search(r"^  epochs_run +12345$", single, re.M)  # an integer stays an integer (was 1.234e+04)
    assert re.search(r" lr=0\.00(1235|2346) ", single) and " epochs=12345 " in single  # its params line
    assert child.data.params["lr"] in ("0.0012345678", "0.0023456789")  # the store keeps the exact value


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
    promoted = _printed(promote.main, "--experiment", "diabetes", "--top", "2", "--tracking-uri", digits["uri"],
                        "--out-dir", str(tmp_path / "promoted"))
    assert " lr=0.001235 " in promoted
    assert {"compare": long_numbers(out), "promote": long_numbers(promoted)} == {"compare": [], "promote": []}
    assert "lr: 0.0012345678" in (tmp_path / "promoted" / "diabetes_1.yaml").read_text()  # the file keeps it exact


def test_a_pinned_failure_table_rounds_its_numbers(digits):
    from sweeper.insight import pinned

    (run, *_) = [r for r in all_runs(digits["store"]) if "mlflow.parentRunId" in r.data.tags]
    expected = pinned.expected_metrics(run.data.metrics, rtol=1e-6)
    got = {k: v * (1 + 1e-5) for k, v in run.data.metrics.items()}  # every metric 1e-5 larger: some are WORSE
    rows = pinned.check(expected, got)
    text = pinned.table(rows)
    assert any(r.verdict == "WORSE" for r in rows) and "+1e-05" in text  # the change shows what 4 digits hide
    assert long_numbers(text) == []


def test_the_loss_plot_reads_a_jobs_curve_from_its_folder_and_a_run_without_one_from_the_store(tmp_path, store):
    """plots.specs: the job folder's curves.npz (every sample) when the sweep has it, else MLflow's history."""
    import numpy as np

    from sweeper import tracking
    from sweeper.insight import plots

    uri = f"sqlite:///{store}"
    c = tracking.open_store(uri)
    exp = tracking.experiment_id(c, "plots", uri)
    ids = [tracking.start_run(c, exp, f"run{i}", {}) for i in range(2)]
    tracking.finish_run(c, ids[1], {"val_mse": 2.0}, {"train_loss": ([0, 5], [4.0, 3.0])})
    np.savez(tmp_path / "curves.npz", train_loss_steps=[0, 1, 2], train_loss_values=[9.0, 8.0, 7.0])
    rows = [{"run_id": i, "run": f"run{k}", "status": "FINISHED", "val_mse": 1.0, "fingerprint": str(k), "device": "cpu"}
            for k, i in enumerate(ids)]
    board = type("B", (), {"rows": rows, "metric": "mse", "keys": []})()
    (loss,) = [s for s in plots.specs(c, board, {ids[0]: tmp_path}) if s["name"] == "plots/loss_curves_top.png"]
    first, second = loss["axes"][0]["lines"]
    assert (first["x"], first["y"]) == ([0, 1, 2], [9.0, 8.0, 7.0])  # from the folder (the store has none)
    assert (second["x"], second["y"]) == ([0, 5], [4.0, 3.0])  # from the store


def test_the_loss_plot_shows_validation_loss_and_the_lr_plot_ticks_every_swept_lr(tmp_path, store):
    import numpy as np

    from sweeper import tracking
    from sweeper.insight import plots

    uri = f"sqlite:///{store}"
    c = tracking.open_store(uri)
    exp = tracking.experiment_id(c, "plots", uri)
    ids = [tracking.start_run(c, exp, f"run{i}", {}) for i in range(2)]
    np.savez(tmp_path / "curves.npz", train_loss_steps=[0, 1], train_loss_values=[9.0, 8.0], val_loss_steps=[0, 1],
             val_loss_values=[9.5, 8.5])
    rows = [{"run_id": i, "run": f"run{k}", "status": "FINISHED", "val_mse": 1.0 + k, "fingerprint": str(k),
             "device": "cpu", "lr": lr} for k, (i, lr) in enumerate(zip(ids, ["0.005", "0.1"]))]
    board = type("B", (), {"rows": rows, "metric": "mse", "keys": ["lr"]})()
    specs = {s["name"]: s for s in plots.specs(c, board, {ids[0]: tmp_path, ids[1]: tmp_path})}
    lines = specs["plots/loss_curves_top.png"]["axes"][0]["lines"]
    assert [(s["y"], s["ls"], s["label"]) for s in lines[:2]] == [([9.5, 8.5], "-", "run0"), ([9.0, 8.0], "--", None)]
    assert "Validation" in specs["plots/loss_curves_top.png"]["axes"][0]["title"]
    lr = specs["plots/val_metric_vs_lr.png"]["axes"][0]
    assert lr["xticks"] == [0.005, 0.1] and lr["xticklabels"] == ["0.005", "0.1"]
    for spec in specs.values():
        plots.draw(spec, tmp_path / spec["name"])
    assert (tmp_path / "plots" / "val_metric_vs_lr.png").stat().st_size > 1000
    many = [dict(rows[0], lr=str(0.001 * (k + 1)), run=f"r{k}") for k in range(plots.MAX_TICKS + 1)]
    board.rows = many
    lr = {s["name"]: s for s in plots.specs(c, board, {ids[0]: tmp_path})}["plots/val_metric_vs_lr.png"]["axes"][0]
    assert "xticks" not in lr and len(lr["lines"][0]["x"]) == len(many)  # too many to label: matplotlib's ticks


def test_the_parent_run_reads_as_mlflow_users_expect(sweep):
    """The swept space as params, the leaderboard as its description, its source, and its best run and model."""
    parent = client_for(sweep["store"]).get_run(sweep["parent"].info.run_id)
    params, tags = parent.data.params, parent.data.tags
    assert params["lr"] == "0.001,0.01" and params["depth"] == "1,2"
    assert not [k for k in params if k.startswith("tracking.")]
    assert tags["mlflow.source.name"].startswith("python -m sweeper -m ") and "lr=0.001,0.01" in tags["mlflow.source.name"]
    assert tags["mlflow.source.type"] == "LOCAL" and tags["mlflow.user"]
    note = tags["mlflow.note.content"]
    assert note.startswith("**Best:**") and tags["best_run_id"] in note and "| lr" in note.replace("|  lr", "| lr")
    # MLflow 3: the best run's model is a logged model (models:/m-<id>), the one its run links to
    best = client_for(sweep["store"]).get_run(tags["best_run_id"])
    assert tags["best_model_uri"] == f"models:/{best.outputs.model_outputs[0].model_id}"
    assert tags["n_finished"] == "4" and "n_killed" not in parent.data.metrics  # a zero: no chart
    child = next(r for r in all_runs(sweep["store"]) if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id)
    assert child.data.tags["hydra.job_dir"].startswith(str(sweep["tmp"])) and child.data.tags["task"] == "regression"
    assert "batch_size" not in child.data.tags and "tracking.uri" not in child.data.params  # no clash with the param
    # the default launcher trains configurations of one shape together (a group may be split over the cores: the
    # sizes depend on the machine): each group's size is its runs' count, and depth=1 and depth=2 never share one
    kids = [r for r in all_runs(sweep["store"]) if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert {r.data.tags["launcher"] for r in kids} == {"batched"}
    groups = {}
    for r in kids:
        groups.setdefault(r.data.tags["batch_group"], []).append(r)
    for members in groups.values():
        assert {int(r.data.tags["group_size"]) for r in members} == {len(members)}
        assert len({r.data.params["depth"] for r in members}) == 1


def test_a_large_leaderboard_prints_its_best_rows_and_says_how_many_more():
    from sweeper.insight.leaderboard import build

    runs = []
    for i in range(120):
        run = type("R", (), {})()
        run.info = type("I", (), {"run_name": f"lr={i}", "status": "FINISHED", "run_id": f"id{i}", "start_time": i})()
        run.data = type("D", (), {"metrics": {"val_mse": float(120 - i)}, "params": {"lr": str(i)},
                                  "tags": {"device": "cpu"}})()
        runs.append(run)
    board = build(runs)
    whole, top = board.table(), board.table(limit=50)
    assert whole.count("FINISHED") == 120 and top.count("FINISHED") == 50
    assert top.splitlines()[:52] == whole.splitlines()[:52]  # the same best rows
    assert "… and 70 more runs (the best 50 of 120 shown" in top.splitlines()[-1]
    assert "more runs" not in board.table(limit=120)


def test_a_classification_sweep_ranks_by_accuracy_best_first_then_log_loss_then_start(store):
    """Without seeds, one row a run: the highest val_accuracy first; equal accuracies by the lower val_log_loss, then
    the earlier start; runs successive halving pruned after every run that trained its epochs; FAILED ones last."""
    from sweeper.base.names import PRUNED_AT
    from sweeper.insight.leaderboard import build
    from sweeper.tracking.records import search

    c = client_for(store)
    exp = c.create_experiment("acc", artifact_location=(store.parent / "artifacts").as_uri())
    runs = {  # width: (val_accuracy, val_log_loss, status, pruned at)
        "4": (0.90, 0.30, "FINISHED", None), "8": (0.95, 0.20, "FINISHED", None), "16": (0.95, 0.15, "FINISHED", None),
        "32": (0.97, 0.25, "FINISHED", None), "64": (0.99, 0.01, "FAILED", None), "2": (0.99, 0.05, "FINISHED", "50"),
        "256": (0.80, 0.50, "FINISHED", "50"), "128": (0.90, 0.30, "FINISHED", None)}
    for start, (width, (acc, loss, status, pruned)) in enumerate(runs.items()):
        tags = {PRUNED_AT: pruned} if pruned else {}
        r = c.create_run(exp, run_name=f"width={width}", start_time=1_000 + start, tags=tags)
        c.log_param(r.info.run_id, "width", width)
        for k, v in {"val_accuracy": acc, "val_log_loss": loss, "test_accuracy": acc - 0.01}.items():
            c.log_metric(r.info.run_id, k, v)
        c.set_terminated(r.info.run_id, status)
    board = build(search(c, [exp]))
    assert board.metric == "accuracy" and board.lower is False and not board.groups
    # 128 ties 4 on both metrics and started later
    assert [r["width"] for r in board.rows] == ["32", "16", "8", "4", "128", "2", "256", "64"]
    assert board.best["run"] == "width=32"
    shown = [line.split()[0] for line in board.table().splitlines()[2:]]
    assert shown == [f"width={w}" for w in ("32", "16", "8", "4", "128", "2", "256", "64")]

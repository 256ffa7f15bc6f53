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
    command,
    all_runs,
    cli,
    client_for,
    copy_store,
    http_get,
    http_post,
    make_cfg,
    mlflow_server,
    shared_sweep,
)
from sweeper.base.process import PID_START, start_mark

FAST = ("epochs=300", "log_every=10")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, _template_store):
    """One real 4-run multirun (lr x depth) into its own store, shared by the tests of this module."""
    return shared_sweep(
        tmp_path_factory, _template_store, "report", "lr=0.001,0.01", "depth=1,2", *FAST
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


def test_the_painter_draws_what_the_launching_process_would_and_a_dead_one_is_replaced(tmp_path):
    """The sweep's painter process (sweeper.insight.plots) and an in-process draw give the same PNG files; a painter
    that died is not waited for: the figures are drawn here."""
    from sweeper.insight import plots

    figure = {
        "name": "plots/a.png",
        "size": [4, 3],
        "axes": [
            {
                "title": "t",
                "xlabel": "x",
                "ylabel": "y",
                "yscale": "log",
                "lines": [{"x": [1, 2, 3], "y": [3.0, 2.0, 1.5], "label": "run"}],
            }
        ],
    }
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
        assert (
            painter.collect() == {"plots/a.png": tmp_path / "after" / "plots" / "a.png"}
            and painter.proc is None
        )
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


def test_the_loss_plot_reads_a_jobs_curve_from_its_folder_and_a_run_without_one_from_the_store(
    tmp_path, store
):
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
    rows = [
        {
            "run_id": i,
            "run": f"run{k}",
            "status": "FINISHED",
            "val_mse": 1.0,
            "fingerprint": str(k),
            "device": "cpu",
        }
        for k, i in enumerate(ids)
    ]
    board = type("B", (), {"rows": rows, "metric": "mse", "keys": []})()
    (loss,) = [
        s
        for s in plots.specs(c, board, {ids[0]: tmp_path})
        if s["name"] == "plots/loss_curves_top.png"
    ]
    first, second = loss["axes"][0]["lines"]
    assert (first["x"], first["y"]) == (
        [0, 1, 2],
        [9.0, 8.0, 7.0],
    )  # from the folder (the store has none)
    assert (second["x"], second["y"]) == ([0, 5], [4.0, 3.0])  # from the store


def test_the_loss_plot_shows_validation_loss_and_the_lr_plot_ticks_every_swept_lr(tmp_path, store):
    import numpy as np

    from sweeper import tracking
    from sweeper.insight import plots

    uri = f"sqlite:///{store}"
    c = tracking.open_store(uri)
    exp = tracking.experiment_id(c, "plots", uri)
    ids = [tracking.start_run(c, exp, f"run{i}", {}) for i in range(2)]
    np.savez(
        tmp_path / "curves.npz",
        train_loss_steps=[0, 1],
        train_loss_values=[9.0, 8.0],
        val_loss_steps=[0, 1],
        val_loss_values=[9.5, 8.5],
    )
    rows = [
        {
            "run_id": i,
            "run": f"run{k}",
            "status": "FINISHED",
            "val_mse": 1.0 + k,
            "fingerprint": str(k),
            "device": "cpu",
            "lr": lr,
        }
        for k, (i, lr) in enumerate(zip(ids, ["0.005", "0.1"]))
    ]
    board = type("B", (), {"rows": rows, "metric": "mse", "keys": ["lr"]})()
    specs = {s["name"]: s for s in plots.specs(c, board, {ids[0]: tmp_path, ids[1]: tmp_path})}
    lines = specs["plots/loss_curves_top.png"]["axes"][0]["lines"]
    assert [(s["y"], s["ls"], s["label"]) for s in lines[:2]] == [
        ([9.5, 8.5], "-", "run0"),
        ([9.0, 8.0], "--", None),
    ]
    assert "validation solid" in specs["plots/loss_curves_top.png"]["axes"][0]["title"]
    lr = specs["plots/val_metric_vs_lr.png"]["axes"][0]
    assert lr["xticks"] == [0.005, 0.1] and lr["xticklabels"] == ["0.005", "0.1"]
    for spec in specs.values():
        plots.draw(spec, tmp_path / spec["name"])
    assert (tmp_path / "plots" / "val_metric_vs_lr.png").stat().st_size > 1000
    many = [dict(rows[0], lr=str(0.001 * (k + 1)), run=f"r{k}") for k in range(plots.MAX_TICKS + 1)]
    board.rows = many
    lr = {s["name"]: s for s in plots.specs(c, board, {ids[0]: tmp_path})}[
        "plots/val_metric_vs_lr.png"
    ]["axes"][0]
    # too many to label: matplotlib's ticks
    assert "xticks" not in lr and len(lr["lines"][0]["x"]) == len(many)


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


def test_a_large_leaderboard_prints_its_best_rows_and_says_how_many_more():
    from sweeper.insight.leaderboard import build

    runs = []
    for i in range(120):
        run = type("R", (), {})()
        run.info = type(
            "I",
            (),
            {"run_name": f"lr={i}", "status": "FINISHED", "run_id": f"id{i}", "start_time": i},
        )()
        run.data = type(
            "D",
            (),
            {
                "metrics": {"val_mse": float(120 - i)},
                "params": {"lr": str(i)},
                "tags": {"device": "cpu"},
            },
        )()
        runs.append(run)
    board = build(runs)
    whole, top = board.table(), board.table(limit=50)
    assert whole.count("FINISHED") == 120 and top.count("FINISHED") == 50
    assert top.splitlines()[:52] == whole.splitlines()[:52]  # the same best rows
    assert "… and 70 more runs (the best 50 of 120 shown" in top.splitlines()[-1]
    assert "more runs" not in board.table(limit=120)


def _run(name, status="FINISHED", start=0, tags=None, **metrics):
    """A run as MLflow's client returns it (the attributes the leaderboard reads), its params from its name."""
    from types import SimpleNamespace as NS

    params = dict(kv.split("=") for kv in name.split(","))
    return NS(
        info=NS(run_name=name, status=status, run_id=f"id-{name}", start_time=start),
        data=NS(metrics=metrics, params=params, tags=tags or {}),
    )


def test_a_classification_sweep_ranks_by_accuracy_best_first_then_log_loss_then_start():
    """Without seeds, one row a run: the highest val_accuracy first; equal accuracies by the lower val_log_loss, then
    the earlier start; runs successive halving pruned after every run that trained its epochs, among themselves by
    accuracy; FAILED ones last."""
    from sweeper.base.names import PRUNED_AT
    from sweeper.insight.leaderboard import build

    runs = {  # width: (val_accuracy, val_log_loss, status, pruned at)
        "4": (0.90, 0.30, "FINISHED", None),
        "8": (0.95, 0.20, "FINISHED", None),
        "16": (0.95, 0.15, "FINISHED", None),
        "32": (0.97, 0.25, "FINISHED", None),
        "64": (0.99, 0.01, "FAILED", None),
        "2": (0.99, 0.05, "FINISHED", "50"),
        "256": (0.80, 0.50, "FINISHED", "50"),
        "128": (0.90, 0.30, "FINISHED", None),
    }
    board = build(
        [
            _run(
                f"width={w}",
                status,
                1_000 + i,
                {PRUNED_AT: pruned} if pruned else {},
                val_accuracy=acc,
                val_log_loss=loss,
                test_accuracy=acc - 0.01,
            )
            for i, (w, (acc, loss, status, pruned)) in enumerate(runs.items())
        ]
    )
    assert (
        board.metric == "accuracy"
        and board.lower is False
        and not board.groups
        and board.keys == ["width"]
    )
    # 128 ties 4 on both metrics and started later
    order = ["32", "16", "8", "4", "128", "2", "256", "64"]
    assert [r["width"] for r in board.rows] == order
    assert [r["val_accuracy"] for r in board.rows] == [runs[w][0] for w in order]
    assert [r["test_accuracy"] for r in board.rows] == [runs[w][0] - 0.01 for w in order]
    assert board.best["run"] == "width=32" and board.best["status"] == "FINISHED"
    shown = [line.split()[0] for line in board.table().splitlines()[2:]]
    assert shown == [f"width={w}" for w in order]
    assert [r["pruned_at"] for r in board.rows] == [None] * 5 + ["50", "50", None]
    # a failed run is never the best
    assert build([_run("width=1", "FAILED", val_accuracy=0.99)]).best is None


def test_seeds_rank_configurations_by_their_mean_each_shown_by_its_run_closest_to_it():
    """With seeds, one row a configuration: its mean, std (sample) and n over its seeds, best mean first (a
    regression: lower first), led by its run closest to the mean (the earlier on a tie); a configuration with a FAILED
    seed behind a fully finished one within the noise (a t-test on the pooled seed std), not behind one beyond it."""
    import statistics

    from sweeper.insight.leaderboard import build

    values = {"0.1": [10.0, 14.0, 12.5], "0.01": [11.0, 11.5, 12.5], "0.3": [30.0, 31.0, 35.0]}
    runs = [
        _run(f"lr={lr},seed={s}", start=s, val_mse=v, test_mse=v + 1, train_time_s=1.0 + s)
        for lr, vs in values.items()
        for s, v in enumerate(vs)
    ]
    board = build(runs)
    assert board.seeds == ["seed"] and board.lower is True
    assert [g["lr"] for g in board.groups] == ["0.01", "0.1", "0.3"]  # means 11.67, 12.17, 32
    for g in board.groups:
        vs = values[g["lr"]]
        assert g["val_mse"] == pytest.approx(statistics.fmean(vs), rel=1e-12)
        assert (
            g["val_mse_std"] == pytest.approx(statistics.stdev(vs), rel=1e-12)
            and g["n"] == g["n_total"] == 3
        )
        assert g["test_mse"] == pytest.approx(statistics.fmean(vs) + 1, rel=1e-12)
        assert g["train_time_s"] == pytest.approx(2.0, rel=1e-12)  # seeds 0, 1, 2: 1, 2, 3 s
    # the run closest to its mean stands for it: 11.5 for 11.67; 12.5 for 12.17; 31 for 32
    assert [g["run"] for g in board.groups] == ["lr=0.01,seed=1", "lr=0.1,seed=2", "lr=0.3,seed=1"]
    assert board.best["run"] == "lr=0.01,seed=1" and board.rows[0]["run"] == "lr=0.01,seed=1"
    assert [r["run"] for r in board.rows[:3]] == [
        "lr=0.01,seed=1",
        "lr=0.01,seed=0",
        "lr=0.01,seed=2",
    ]
    # lr=0.01 loses a seed: n 2/3, and it goes behind lr=0.1 (means 11.25 and 12.17 are within the noise),
    # never behind lr=0.3 (32, beyond it)
    failed = [
        r if r.info.run_name != "lr=0.01,seed=2" else _run("lr=0.01,seed=2", "FAILED", 2)
        for r in runs
    ]
    board = build(failed)
    assert [(g["lr"], g["n"], g["n_total"]) for g in board.groups] == [
        ("0.1", 3, 3),
        ("0.01", 2, 3),
        ("0.3", 3, 3),
    ]
    assert "2/3 ✗" in board.table() and board.best["lr"] == "0.1"
    far = [
        r if r.info.run_name != "lr=0.3,seed=0" else _run("lr=0.3,seed=0", "FAILED") for r in runs
    ]
    assert [g["lr"] for g in build(far).groups] == [
        "0.01",
        "0.1",
        "0.3",
    ]  # no one to pass within the noise
    # a configuration left with one scored seed moves too; its FAILED run stays in the rows, last
    lone = build(
        [
            _run("lr=0.1,seed=0", val_mse=10.0),
            _run("lr=0.1,seed=1", "FAILED"),
            _run("lr=0.2,seed=0", val_mse=10.5),
            _run("lr=0.2,seed=1", val_mse=11.0),
        ]
    )
    assert [(g["lr"], g["n"]) for g in lone.groups] == [("0.2", 2), ("0.1", 1)]
    assert (
        len(lone.rows) == 4
        and lone.rows[-1]["status"] == "FAILED"
        and lone.rows[-1]["run"] == "lr=0.1,seed=1"
    )
    one = build([_run("lr=0.1,seed=0", val_mse=5.0), _run("lr=0.1,seed=1", val_mse=7.0)]).groups
    # a tie: the earlier
    assert one[0]["run"] == "lr=0.1,seed=0" and one[0]["val_mse_std"] == pytest.approx(2**0.5)


def test_a_leaderboard_row_holds_what_the_table_promote_and_speedup_read_of_its_run():
    """Each field of a row from its run's metrics and tags; the keys are the swept params only (not tracking.*,
    pinned.*, resume, baselines or model._target_, which differ without being a configuration's key or which the model
    column says, nor a param every run shares)."""
    from sweeper.base.names import PRUNED_AT
    from sweeper.insight.leaderboard import build

    tags = {
        "failure_reason": "diverged at epoch 7",
        "device": "gpu",
        "fingerprint": "f-1",
        "gradient_check": "failed",
        "folds": "5",
        PRUNED_AT: "40",
        "model": "nets.resnets.ResTanh",
    }
    runs = [
        _run(
            f"lr={lr},epochs=100,tracking.uri=u{i},pinned.a=p{i},resume={i == 0},baselines=b{i},"
            f"model._target_=nets.M{i}",
            start=i,
            tags=tags if i == 1 else {},
            val_mse=10.0 + i,
            test_mse=20.0 + i,
            train_time_s=0.5 + i,
            speedup=3.0 + i,
            val_mse_std=0.25 + i,
            val_log_loss=0.1,
        )
        for i, lr in enumerate(("0.1", "0.2"))
    ]
    # a run MLflow has ended; runs[0] as a run still running (no end_time)
    runs[1].info.end_time = 7
    board = build(runs, reused={runs[1].info.run_id})
    assert board.keys == ["lr"]
    first, second = board.rows
    assert {
        k: second[k]
        for k in (
            "run",
            "model",
            "lr",
            "val_mse",
            "test_mse",
            "train_time_s",
            "speedup",
            "status",
            "reason",
            "run_id",
            "device",
            "fingerprint",
            "reused",
            "gradient_check",
            "folds",
            "val_mse_fold_std",
            "pruned_at",
            "start_time",
            "end_time",
            "val_log_loss",
        )
    } == {
        "run": runs[1].info.run_name,
        "model": "resnets.ResTanh",
        "lr": "0.2",
        "val_mse": 11.0,
        "test_mse": 21.0,
        "train_time_s": 1.5,
        "speedup": 4.0,
        "status": "FINISHED",
        "reason": "diverged at epoch 7",
        "run_id": runs[1].info.run_id,
        "device": "gpu",
        "fingerprint": "f-1",
        "reused": runs[1].info.run_id,
        "gradient_check": "failed",
        "folds": 5,
        "val_mse_fold_std": 1.25,
        "pruned_at": "40",
        "start_time": 1,
        "end_time": 7,
        "val_log_loss": 0.1,
    }
    assert (
        first["model"],
        first["reason"],
        first["device"],
        first["fingerprint"],
        first["reused"],
        first["gradient_check"],
        first["folds"],
        first["end_time"],
    ) == ("mlp",) + (None,) * 7


def test_the_later_run_of_two_equal_ones_ranks_second_and_unscored_seeds_count_for_nothing():
    """Equal accuracy and log loss: the earlier start first, whatever the order the store returns them in. With seeds,
    a FINISHED seed without a finite score adds nothing to its configuration's mean; a configuration none of whose
    seeds scored ranks last; one of a single scored seed has no std; accuracy ranks high first by the mean."""
    import math

    from sweeper.insight.leaderboard import build

    later, earlier = (
        _run("width=8", start=9, val_accuracy=0.9, val_log_loss=0.3),
        _run("width=4", start=1, val_accuracy=0.9, val_log_loss=0.3),
    )
    assert [r["width"] for r in build([later, earlier]).rows] == ["4", "8"]
    runs = [
        _run("lr=0.1,seed=0", val_accuracy=0.9),
        _run("lr=0.1,seed=1", val_accuracy=math.inf),
        _run("lr=0.2,seed=0", val_accuracy=math.inf),
        _run("lr=0.2,seed=1", val_accuracy=math.nan),
        _run("lr=0.3,seed=0", val_accuracy=0.50),
        _run("lr=0.3,seed=1", val_accuracy=0.51),
    ]
    # lr=0.1 (1 of 2 scored, as if a seed failed) is far beyond the noise of 0.505
    groups = build(runs).groups
    assert [(g["lr"], g["n"], g["n_total"]) for g in groups] == [
        ("0.1", 1, 2),
        ("0.3", 2, 2),
        ("0.2", 0, 2),
    ]
    assert groups[0]["val_accuracy"] == 0.9 and groups[0]["val_accuracy_std"] is None
    assert groups[1]["val_accuracy"] == pytest.approx(0.505) and groups[2]["val_accuracy"] is None


def test_a_failed_seed_moves_its_configuration_behind_every_finished_one_within_the_noise():
    """behind_finished: an item whose seed FAILED goes behind the last fully finished item after it that is the same
    within the noise, counting from itself (the better ones before it stay), the failed ones handled last first."""
    import math

    from sweeper.insight.leaderboard import _pooled, _within, behind_finished

    score = {"A": 1.0, "F1": 5.0, "F2": 5.1, "B": 5.2, "C": 9.0}
    same = lambda a, b: abs(score[a] - score[b]) <= 0.5  # noqa: E731
    failed = lambda x: x.startswith("F")  # noqa: E731
    # A is far better than F1 and stays first; F1 and F2 both go behind B, in their order
    assert behind_finished(["A", "F1", "F2", "B", "C"], failed, same) == ["A", "B", "F1", "F2", "C"]
    assert behind_finished(["F1", "F2", "B"], failed, same) == ["B", "F1", "F2"]
    assert behind_finished(["F1", "C"], failed, same) == [
        "F1",
        "C",
    ]  # nothing within the noise after it
    # the pooled seed std: sqrt(sum (n_i - 1) s_i^2 / sum (n_i - 1)) over configurations of 2+ seeds
    groups = [
        {"n": 3, "values": [1.0, 2.0, 4.0]},
        {"n": 2, "values": [5.0, 7.0]},
        {"n": 1, "values": [9.0]},
    ]
    sd, dof = _pooled(groups)
    assert dof == 3 and sd == pytest.approx(((2 * 7 / 3 + 1 * 2.0) / 3) ** 0.5, rel=1e-12)
    assert _pooled([{"n": 1, "values": [3.0]}]) is None
    # within the noise: |mean_a - mean_b| <= t(0.975, dof) * sd * sqrt(1/n_a + 1/n_b)
    from scipy import stats

    bound = stats.t.ppf(0.975, 3) * sd * (1 / 3 + 1 / 2) ** 0.5
    a = {"mean": 10.0, "n": 3}
    assert _within((sd, dof))(a, {"mean": 10.0 + 0.99 * bound, "n": 2})
    assert not _within((sd, dof))(a, {"mean": 10.0 + 1.01 * bound, "n": 2})
    q = float(stats.t.ppf(0.975, dof))
    # the bound
    assert _within((sd, dof))(
        {"mean": 0.0, "n": 3}, {"mean": q * sd * math.sqrt(1 / 3 + 1 / 2), "n": 2}
    )
    assert _within((sd, dof))({"mean": 10.0, "n": 2}, {"mean": 10.0 + 0.99 * bound, "n": 3})
    assert _within(None)(a, a) is False and not _within((sd, dof))(a, {"mean": None, "n": 2})


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

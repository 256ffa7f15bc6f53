"""The sweep's figures (sweeper/insight/plots.py): the painter process, the loss curves from a job's folder or the
store, the lr plot's ticks."""

from __future__ import annotations


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


def test_baselines_the_painter_cannot_fit_are_fitted_here_and_the_painter_goes_on(tmp_path):
    """A baselines request that fails in the painter (here: no data nodes in it) is the painter's
    error line (its one boundary, plots.serve): the launching process hears None and fits them
    itself, and the same painter still draws the next figures."""
    from sweeper.insight import plots

    figure = {
        "name": "plots/b.png",
        "size": [4, 3],
        "axes": [{"title": "t", "xlabel": "x", "ylabel": "y", "lines": [{"x": [1], "y": [1.0]}]}],
    }
    painter = plots.Painter().start()
    try:
        proc = painter.proc
        painter.prefit({"asked": "auto"})  # no "nodes": the fit raises KeyError in the painter
        assert painter.baselines() is None
        painter.submit([figure], tmp_path / "next")
        assert painter.collect() == {"plots/b.png": tmp_path / "next" / "plots" / "b.png"}
        assert painter.proc is proc and proc.poll() is None  # the same painter, still alive
    finally:
        painter.close()


def test_with_sweeper_plots_off_the_painter_fits_the_baselines_without_importing_matplotlib(
    monkeypatch,
):
    """SWEEPER_PLOTS=off (the suite's command-line runs): no figure will come, so the painter, which the sweep's
    baselines still need, skips matplotlib's import (~0.7 CPU-s); on (the default), it imports it at its start."""
    import os

    import pytest

    from sweeper.insight import plots

    if not os.path.exists("/proc/self/maps"):
        pytest.skip("a process's loaded libraries are read from /proc/PID/maps (Linux)")
    loaded = {}
    for value in ("on", "off"):
        monkeypatch.setenv("SWEEPER_PLOTS", value)
        painter = plots.Painter().start()
        try:
            painter.prefit(
                {"asked": "auto"}
            )  # answered once the start's imports are done: an error line
            assert painter.baselines() is None
            with open(f"/proc/{painter.proc.pid}/maps") as f:
                loaded[value] = "/matplotlib/" in f.read()
        finally:
            painter.close()
    assert loaded == {"on": True, "off": False}


def test_no_painter_starts_where_it_has_nothing_to_draw_or_fit(monkeypatch):
    """SWEEPER_PLOTS=off with baselines=none (or no job): a painter process would import and wait for nothing
    (~0.3 CPU-s a sweep); one starts where figures are drawn or a baseline is fitted."""
    from sweeper.base import state
    from sweeper.insight import plots

    monkeypatch.setattr(state.process(), "spare_painter", None)
    started = {}
    for value, asked in [
        ("off", "none"),
        ("off", ["none"]),
        ("off", None),
        ("off", "linear"),
        ("off", "auto"),
        ("on", "none"),
    ]:
        monkeypatch.setenv("SWEEPER_PLOTS", value)
        state.begin()
        try:
            plots.start(None if asked is None else {"nodes": [], "asked": asked})
            started[value, str(asked)] = plots.current() is not None
        finally:
            plots.stop()
            state.begin()
    assert started == {
        ("off", "none"): False,
        ("off", "['none']"): False,
        ("off", "None"): False,
        ("off", "linear"): True,
        ("off", "auto"): True,
        ("on", "none"): True,
    }

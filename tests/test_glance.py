"""The answer at a glance in the MLflow UI (issue 60): the printed address opens the sweep's runs best first with their
metrics as columns, each run says where it stands, the parent's description reads as a table in MLflow's markdown."""

from __future__ import annotations

import io
import json
import re
from types import MappingProxyType
from urllib.parse import parse_qs, unquote

import pytest

from conftest import PLOTS, all_runs, cli, client_for, shared_sweep

FAST = ("epochs=200", "log_every=10", "tracking.log_model=false")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, _template_store):
    """A real 6-run regression sweep (lr x depth) into its own store, shared by this module's tests; with the linear
    baseline (its row and the note under the table are read)."""
    return shared_sweep(
        tmp_path_factory,
        _template_store,
        "glance",
        "lr=0.001,0.005,0.01",
        "depth=1,2",
        "baselines=linear",
        *FAST,
        env=PLOTS,  # its plots are read
    )


def printed_address(stdout: str) -> str:
    line = next(ln for ln in stdout.splitlines() if ln.startswith("browse with: "))
    return line.split()[2]


def address_view(store, address: str) -> dict:
    """What the printed address opens: the shared view it names (the experiment's tag), else its own query."""
    route, _, query = address.partition("#")[2].partition("?")
    q = {k: v[0] for k, v in parse_qs(query).items()}
    assert q.pop("workflowType") == "machine_learning"
    if "viewStateShareKey" in q:
        experiment_id = route.split("/")[2]
        tags = client_for(store).get_experiment(experiment_id).tags
        return json.loads(tags[f"mlflow.sharedViewState.{q['viewStateShareKey']}"])
    return {**q, "orderByAsc": q["orderByAsc"] == "true"}


def test_the_printed_address_opens_the_sweeps_runs_best_first_with_their_metrics(sweep):
    view = address_view(sweep["store"], printed_address(sweep["proc"].stdout))
    # lower is better
    assert view["orderByKey"] == "metrics.`val_mse`" and view["orderByAsc"] is True
    columns = view["selectedColumns"]
    assert columns[:5] == [
        "metrics.`rank`",
        "metrics.`val_mse`",
        "metrics.`test_mse`",
        "metrics.`val_mae`",
        "metrics.`train_time_s`",
    ]
    # one device
    assert {"params.`lr`", "params.`depth`"} <= set(columns) and "metrics.`speedup`" not in columns
    # the chart view opens on the same answer (its own cards sort by name: best_epoch first), and
    # the UI adds its other charts after these (a section not reordered files each by name)
    cards = [(c["metricKey"], c["type"]) for c in view["compareRunCharts"]]
    assert cards == [
        ("val_mse", "BAR"),
        ("test_mse", "BAR"),
        ("val_mae", "BAR"),
        ("val_loss", "LINE"),
        ("train_loss", "LINE"),
    ]
    sections = {s["uuid"]: s for s in view["compareRunSections"]}
    assert all(sections[c["metricSectionId"]]["isReordered"] for c in view["compareRunCharts"])
    # its search is the sweep's runs, and the store's own search by it gives them best first
    c = client_for(sweep["store"])
    parent = sweep["parent"]
    shown = c.search_runs(
        [parent.info.experiment_id], view["searchFilter"], order_by=["metrics.`val_mse` ASC"]
    )
    kids = [
        r
        for r in all_runs(sweep["store"])
        if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id
    ]
    assert {r.info.run_id for r in shown} == {r.info.run_id for r in kids} and len(shown) == 6
    assert [r.data.metrics["rank"] for r in shown] == [1, 2, 3, 4, 5, 6]
    assert shown[0].info.run_id == c.get_run(parent.info.run_id).data.tags["best_run_id"]


def test_every_run_has_its_leaderboard_rank_and_a_description_naming_it(sweep):
    import csv

    c = client_for(sweep["store"])
    parent = sweep["parent"].info.run_id
    rows = list(
        csv.DictReader(io.StringIO(open(c.download_artifacts(parent, "summary.csv")).read()))
    )
    best = float(rows[0]["val_mse"])
    for i, row in enumerate(rows, 1):
        run = c.get_run(row["run_id"])
        note = run.data.tags["mlflow.note.content"]
        assert run.data.metrics["rank"] == i
        assert note.startswith(f"rank {i} of 6 by val_mse: {float(row['val_mse']):.4g}; "), note
        assert ("the best" if i == 1 else f"best {best:.4g}") in note and "\n" not in note
        assert parent in run.data.tags["sweeper.sweeps"].split()
        size = int(run.data.tags.get("sweeper.group_size", 1))
        # batched: its times are a share
        assert ("trained in a group of" in note) == (size > 1), note


@pytest.mark.slow
def test_a_report_rebuilt_from_the_store_writes_no_rank_again(sweep):
    """python -m sweeper.report rewrites only what changed: the same ranks, no second value in their history."""
    from sweeper import report

    uri = f"sqlite:///{sweep['store']}"
    assert report.main(["--parent", sweep["parent"].info.run_id, "--tracking-uri", uri]) == 0
    c = client_for(sweep["store"])
    kid = next(r for r in all_runs(sweep["store"]) if r.data.tags.get("mlflow.parentRunId"))
    assert len(c.get_metric_history(kid.info.run_id, "rank")) == 1


@pytest.mark.slow
def test_the_address_for_an_accuracy_sweep_sorts_descending(tmp_path, store):
    proc = cli(tmp_path, "-m", "data=breast_cancer", "lr=0.01,0.1", *FAST, store=store)
    assert proc.returncode == 0, proc.stderr
    view = address_view(store, printed_address(proc.stdout))
    # higher is better
    assert view["orderByKey"] == "metrics.`val_accuracy`" and view["orderByAsc"] is False
    assert "metrics.`val_f1`" in view["selectedColumns"]
    # its chart view: the accuracy and F1 first (metrics a regression's sweep has not: none)
    keys = [c["metricKey"] for c in view["compareRunCharts"]]
    assert keys[:3] == ["val_accuracy", "test_accuracy", "val_f1"] and "val_mse" not in keys


def test_outside_the_checked_ui_versions_the_address_carries_the_sort_alone(sweep, monkeypatch):
    """The shared view is MLflow's internal UI state: with the UI outside the versions checked, no experiment tag is
    written and the page address itself sorts and searches (orderByKey / orderByAsc / searchFilter)."""
    from sweeper.base import tested
    from sweeper.insight import publish

    monkeypatch.setattr(
        tested, "TESTED", MappingProxyType({**tested.TESTED, "mlflow-ui": ("0.1", "0.2")})
    )
    tested.within.cache_clear()
    tested.shortcut.cache_clear()
    try:
        c = client_for(sweep["store"])
        before = c.get_experiment(sweep["parent"].info.experiment_id).tags
        board, _ = publish.publish(c, sweep["parent"].info.run_id, out=io.StringIO())
        assert c.get_experiment(sweep["parent"].info.experiment_id).tags == before
    finally:
        tested.within.cache_clear()
        tested.shortcut.cache_clear()
    query = unquote(board.address.partition("?")[2])
    assert "viewStateShareKey" not in query
    assert "orderByKey=metrics.`val_mse`&orderByAsc=true" in query
    assert f"searchFilter=tags.`sweeper.sweeps` LIKE '%{sweep['parent'].info.run_id}%'" in query


def test_with_sweeper_plots_off_the_summary_describes_its_figures_and_draws_none(
    sweep, monkeypatch
):
    """SWEEPER_PLOTS=off (the suite's command-line runs): a sweep's summary still describes its figures
    (plots.specs: a fault in their data still shows) but hands none to be drawn; on (the default), every one."""
    from sweeper.insight import plots, publish

    described, drawn = [], []
    specs = plots.specs
    monkeypatch.setattr(
        plots, "specs", lambda *a, **k: described.append(specs(*a, **k)) or described[-1]
    )
    # no painter here: the figures would be drawn in this process (recorded, not drawn)
    monkeypatch.setattr(plots, "current", lambda: None)
    monkeypatch.setattr(plots, "draw_all", lambda figures, folder: drawn.append(figures) or {})
    for value in ("off", "on"):
        monkeypatch.setenv("SWEEPER_PLOTS", value)
        board, _ = publish.publish(
            client_for(sweep["store"]), sweep["parent"].info.run_id, out=io.StringIO()
        )
        assert len(board.rows) == 6
    names = [{s["name"] for s in found} for found in described]
    assert len(names) == 2 and names[0] == names[1] and "plots/val_metric_vs_lr.png" in names[0]
    assert len(drawn) == 1 and names[1] <= {s["name"] for s in drawn[0]}


def test_bookkeeping_tags_share_one_prefix_and_the_source_is_a_short_name(sweep):
    kid = next(r for r in all_runs(sweep["store"]) if r.data.tags.get("mlflow.parentRunId"))
    tags = kid.data.tags
    bare = {
        "heartbeat",
        "pid",
        "host",
        "batch_worker",
        "worker_pid",
        "worker_host",
        "engine",
        "launcher",
        "batch_group",
        "group_size",
        "trajectory",
    } & set(tags)
    assert bare == set(), bare
    assert {"sweeper.pid", "sweeper.host", "sweeper.heartbeat"} <= set(tags)
    assert (
        tags["mlflow.source.name"] == "python -m sweeper" and "/" not in tags["mlflow.source.name"]
    )
    assert re.match(r"python -m sweeper lr=\S+ depth=\d ", tags["sweeper.rerun"]), tags[
        "sweeper.rerun"
    ]


def _reads_as_a_table(text: str) -> list[str]:
    """The checks of a description in MLflow's markdown; its run links."""
    lines = text.split("\n")
    for a, b in zip(lines, lines[1:]):  # a line right after a table row would be drawn as a row
        assert not a.startswith("|") or b.startswith("|") or b == "", (a, b)
    for row in (ln for ln in lines if ln.startswith("|") and not ln.startswith("|---")):
        cells = row.split("|")[1:-1]
        # padded
        assert all(c.startswith("\u00a0\u00a0") and c.endswith("\u00a0\u00a0") for c in cells), row
    links = re.findall(r"\]\((#/experiments/[^)]*)\)", text)
    assert links and all(link.endswith("?workflowType=machine_learning") for link in links), links
    return links


def test_the_parents_description_reads_as_a_table_in_mlflows_markdown(sweep):
    c = client_for(sweep["store"])
    parent = c.get_run(sweep["parent"].info.run_id)
    note = parent.data.tags["mlflow.note.content"]
    links = _reads_as_a_table(note)
    assert len(links) == 1 + 6  # the best run's, and each run's name in the table
    assert "\n\n([baseline] rows:" in note  # a note under the table is a paragraph of its own
    summary = open(c.download_artifacts(parent.info.run_id, "summary.md")).read()
    assert len(_reads_as_a_table(summary)) == 6


def test_a_long_leaderboards_description_says_how_many_more_in_a_paragraph_of_its_own():
    from sweeper.insight.leaderboard import build
    from sweeper.insight.publish import NOTE_CHARS, description

    runs = []
    for i in range(300):
        run = type("R", (), {})()
        run.info = type(
            "I",
            (),
            {
                "run_name": f"lr={i},depth=2,cpu",
                "status": "FINISHED",
                "run_id": f"{i:032x}",
                "start_time": i,
            },
        )()
        run.data = type(
            "D",
            (),
            {
                "metrics": {"val_mse": 1000.0 - i, "test_mse": 900.0 - i, "train_time_s": 0.1},
                "params": {"lr": str(i), "depth": "2"},
                "tags": {"device": "cpu"},
            },
        )()
        runs.append(run)
    text = description("**Best:** …\n\n", build(runs), "3")
    assert len(text) <= NOTE_CHARS
    _reads_as_a_table(text)
    assert re.search(r"\|\n\n… and [\d,]+ more runs \(the best \d+ of 300 shown", text)


# --- plots that tell the truth ---


def _fits(spec) -> None:
    """The figure of ``spec``, laid out: its tight bounding box (every label, tick, title, legend) inside its canvas."""
    import matplotlib.pyplot as plt

    from sweeper.insight import plots

    fig = plots.figure(spec)
    try:
        fig.canvas.draw()  # the layout is made at drawing (as savefig draws)
        tight, canvas = fig.get_tightbbox(fig.canvas.get_renderer()), fig.bbox_inches
        eps = 1e-6
        assert (
            tight.x0 >= -eps
            and tight.y0 >= -eps
            and tight.x1 <= canvas.x1 + eps
            and tight.y1 <= canvas.y1 + eps
        ), (spec["name"], tight, canvas)
    finally:
        plt.close(fig)


class _NoCurves:
    """A store without loss curves (the plots of a hand-made leaderboard read none)."""

    def get_metric_history(self, run_id, name):
        return []


def _pairs_board(times: list[tuple[float, float]]):
    rows = []
    for i, (cpu, gpu) in enumerate(times):
        for device, t in (
            ("gpu", gpu),
            ("cpu", cpu),
        ):  # device swept first: the run name begins with it
            rows.append(
                {
                    "run": f"{device},lr={0.001 * (i + 1):g}",
                    "run_id": f"{i}{device}",
                    "status": "FINISHED",
                    "val_mse": 3000.0 + i,
                    "fingerprint": str(i),
                    "device": device,
                    "lr": f"{0.001 * (i + 1):g}",
                    "train_time_s": t,
                    "speedup": cpu / gpu if device == "gpu" else None,
                    "start_time": i,
                    "end_time": i,
                }
            )
    return type("B", (), {"rows": rows, "metric": "mse", "keys": ["device", "lr"], "lower": True})()


def test_every_plot_a_sweep_writes_fits_its_canvas(sweep):
    from sweeper.insight import importance, plots
    from sweeper.insight.leaderboard import build, children
    from sweeper.insight.publish import records

    c = client_for(sweep["store"])
    parent = c.get_run(sweep["parent"].info.run_id)
    runs = children(c, parent)
    board = build(runs)
    specs = plots.specs(c, board) + [
        s
        for s in plots.specs(c, _pairs_board([(0.864, 0.882)] * 3))
        if s["name"] == "plots/time_and_speedup.png"
    ]
    specs.append(importance.spec(importance.compute(records(board, runs))))
    names = {s["name"] for s in specs}
    assert {
        "plots/val_metric_vs_lr.png",
        "plots/loss_curves_top.png",
        "plots/history.png",
        "plots/parallel_coordinates.png",
        "plots/time_and_speedup.png",
        "plots/importance.png",
    } <= names
    for spec in specs:
        _fits(spec)
    logged = {a.path for a in c.list_artifacts(parent.info.run_id, "plots")}
    # one device: no time plot of this sweep
    assert names - {"plots/time_and_speedup.png"} <= logged


def test_a_two_percent_time_difference_is_drawn_on_a_linear_axis_from_zero_with_its_values():
    import matplotlib.pyplot as plt

    from sweeper.insight import plots

    (spec,) = [
        s
        for s in plots.specs(_NoCurves(), _pairs_board([(0.864, 0.882), (0.870, 0.889)]))
        if s["name"] == "plots/time_and_speedup.png"
    ]
    times, speed = spec["axes"]
    assert times.get("yscale") != "log" and times["ymin"] == 0 and speed["ymin"] == 0
    assert [b["labels"] for b in times["bars"]] == [
        ["0.864", "0.87"],
        ["0.882", "0.889"],
    ]  # each bar's value
    assert times["xticklabels"] == ["lr=0.001", "lr=0.002"]  # no device in a configuration's name
    fig = plots.figure(spec)
    try:
        ax = fig.axes[0]
        assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0
    finally:
        plt.close(fig)
    (wide,) = [
        s
        for s in plots.specs(_NoCurves(), _pairs_board([(0.05, 0.9), (0.06, 1.0)]))
        if "speedup" in s["name"]
    ]
    assert wide["axes"][0]["yscale"] == "log"  # times 20x apart: a log axis


def test_the_history_is_in_finishing_order_and_log_spaced_keys_get_log_axes():
    from sweeper.insight import plots

    board = _pairs_board([(1.0, 1.0)] * 3)
    board.rows = [
        dict(r, end_time=10 - k, val_mse=v)
        for k, (r, v) in enumerate(
            zip([r for r in board.rows if r["device"] == "cpu"], [5.0, 3.0, 4.0])
        )
    ]
    board.keys = ["lr", "depth"]
    for r, d in zip(board.rows, ("1", "2", "3")):
        r["lr"], r["depth"] = {"1": "0.001", "2": "0.01", "3": "0.1"}[d], d
    specs = {s["name"]: s for s in plots.specs(_NoCurves(), board)}
    history = specs["plots/history.png"]["axes"][0]
    assert history["points"][0]["y"] == [4.0, 3.0, 5.0]  # the last to finish ended first
    assert history["lines"][0]["y"] == [4.0, 3.0, 3.0]  # best so far (lower is better)
    parallel = specs["plots/parallel_coordinates.png"]["axes"][0]
    assert parallel["xticklabels"] == ["lr (log)", "depth", "val_mse"]
    lr = [line["y"][0] for line in parallel["lines"]]
    # 0.001, 0.01, 0.1: evenly apart on a log axis
    assert sorted(lr) == pytest.approx([0.0, 0.5, 1.0])


# --- parameter importance ---


def _grid(noise_sd: float = 20.0, seeds: int = 3):
    """A full grid: lr decides the metric, depth moves it a little, width is pure noise; ``seeds`` seeds each."""
    import itertools

    import numpy as np

    rng = np.random.default_rng(1)
    lrs, depths, widths = ["0.001", "0.003", "0.01", "0.03"], ["1", "2", "3"], ["8", "16", "32"]
    out = []
    for lr, d, w in itertools.product(lrs, depths, widths):
        for seed in range(seeds):
            v = 3000 + 800 * abs(np.log10(float(lr)) + 2) + 60 * int(d) + rng.normal(0, noise_sd)
            out.append(
                {
                    "run": f"{lr},{d},{w},{seed}",
                    "run_id": f"{lr}-{d}-{w}-{seed}",
                    "status": "FINISHED",
                    "reason": None,
                    "params": {"lr": lr, "depth": d, "width": w, "seed": str(seed)},
                    "metrics": {"val_mse": float(v)},
                    "parent": None,
                    "pruned_at": None,
                }
            )
    out.sort(key=lambda r: r["metrics"]["val_mse"])
    return out, {"lr": lrs, "depth": depths, "width": widths}


def test_importance_ranks_the_deciding_key_first_and_the_noise_keys_interval_includes_zero():
    from sweeper.insight import importance
    from sweeper.insight.advice import advisor

    records, _ = _grid()
    found = importance.compute(records)
    assert found["method"].startswith("exact main-effect") and found["configurations"] == 36
    by = {r["key"]: r for r in found["keys"]}
    assert [r["key"] for r in found["keys"]] == ["lr", "depth", "width"]
    assert by["lr"]["low"] > 0.9 and by["depth"]["low"] > 0  # both matter, beyond the noise
    # pure noise
    assert by["width"]["low"] == 0.0 <= by["width"]["share"] <= by["width"]["high"] < 0.01
    # exact on a full grid: the observed shares and the interactions' remainder sum to 1
    assert sum(r["observed"] for r in found["keys"]) + found["interactions"] == pytest.approx(1.0)
    # consistent with the advice: the key it calls not mattering has an interval from 0
    advice = advisor.advise(records)
    flat = {f.tag for f in advice.findings if f.kind == "no_effect" and "@" not in f.tag}
    assert "width" in flat and all(by[k]["low"] == 0.0 for k in flat if k in by)


def test_importance_agrees_in_order_with_optunas_on_the_same_runs():
    optuna = pytest.importorskip("optuna")
    from optuna.distributions import CategoricalDistribution

    from sweeper.insight import importance

    records, levels = _grid()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study()
    dist = {k: CategoricalDistribution(v) for k, v in levels.items()}
    for r in records:
        study.add_trial(
            optuna.trial.create_trial(
                params={k: r["params"][k] for k in dist},
                distributions=dist,
                value=r["metrics"]["val_mse"],
            )
        )
    theirs = optuna.importance.get_param_importances(
        study, evaluator=optuna.importance.FanovaImportanceEvaluator(seed=0)
    )
    assert [r["key"] for r in importance.compute(records)["keys"]] == list(theirs)


def test_importance_on_a_partial_grid_is_model_based_and_omitted_with_a_reason_where_it_cannot_be_estimated():
    from sweeper.insight import importance

    records, _ = _grid(seeds=1)
    # five configurations missing (the worst: failed, say)
    partial = importance.compute(records[:-5])
    assert (
        partial["method"].startswith("additive main-effects model")
        and partial["keys"][0]["key"] == "lr"
    )
    assert "no seed sweep" in partial["noise"]["source"]  # the advisor's stated default noise
    few = importance.compute(records[:2])
    assert set(few) == {"omitted"} and "too few" in few["omitted"]
    search = [
        dict(r, params={**r["params"], "lr": str(0.001 * (1 + i))}) for i, r in enumerate(records)
    ]
    assert "more than" in importance.compute(search)["omitted"]
    assert importance.spec(few) is None


# --- system metrics where they say something ---


def test_a_run_shorter_than_the_threshold_keeps_no_system_metrics_and_one_key_turns_them_on(
    sweep, tmp_path, store
):
    pytest.importorskip("psutil", reason="system metrics need psutil (the dev extra installs it)")
    from conftest import run_once

    kids = [r for r in all_runs(sweep["store"]) if r.data.tags.get("mlflow.parentRunId")]
    # shorter than the default 10 s
    assert all(r.info.end_time - r.info.start_time < 10_000 for r in kids)
    assert not [k for r in kids for k in r.data.metrics if k.startswith("system/")]
    result = run_once(tmp_path, "epochs=50", "tracking.system_metrics_min_s=0", store=store)
    assert (
        "system/cpu_utilization_percentage"
        in client_for(store).get_run(result["run_id"]).data.metrics
    )


def test_the_threshold_is_a_checked_key():
    from sweeper.contract.config import ConfigError, validate
    from conftest import make_cfg
    from omegaconf import OmegaConf

    cfg = OmegaConf.to_container(make_cfg("tracking.system_metrics_min_s=-1"), resolve=True)
    with pytest.raises(ConfigError, match=r"tracking.system_metrics_min_s=-1 .*an integer >= 0"):
        validate(cfg)


def test_marks_written_in_one_transaction_are_what_log_batch_writes(store, monkeypatch):
    """bulk.mark_runs on the embedded store (one transaction) gives the runs what MLflow's log_batch does (the public
    calls, outside the tested versions): a metric logged again becomes the latest, a tag set again is replaced."""
    from sweeper import tracking
    from sweeper.base import tested
    from sweeper.tracking import bulk

    c = tracking.client(f"sqlite:///{store}")
    experiment = c.create_experiment(
        "marks", artifact_location=(store.parent / "artifacts").as_uri()
    )
    ids = [tracking.start_run(c, experiment, n, {"mlflow.note.content": "old"}) for n in "ab"]
    for run_id in ids:
        tracking.finish_run(c, run_id, {"val_mse": 2.0, "rank": 5.0})

    def mark(run_id: str) -> None:
        bulk.mark_runs(
            c,
            [
                (
                    run_id,
                    {"rank": 2.0},
                    {"mlflow.note.content": "rank 2 of 2", "sweeper.sweeps": "p"},
                )
            ],
        )

    mark(ids[0])
    monkeypatch.setenv(tested.PUBLIC_ONLY, "1")
    tested.within.cache_clear()
    tested.shortcut.cache_clear()
    try:
        assert bulk.sql_store(c) is None
        mark(ids[1])
    finally:
        monkeypatch.delenv(tested.PUBLIC_ONLY)
        tested.within.cache_clear()
        tested.shortcut.cache_clear()
    a, b = (c.get_run(i) for i in ids)
    assert a.data.metrics == b.data.metrics == {"val_mse": 2.0, "rank": 2.0}
    assert {k: v for k, v in a.data.tags.items() if k != "mlflow.runName"} == {
        k: v for k, v in b.data.tags.items() if k != "mlflow.runName"
    }
    assert a.data.tags["mlflow.note.content"] == "rank 2 of 2" and a.info.status == "FINISHED"
    assert [m.value for m in c.get_metric_history(ids[0], "rank")] == [5.0, 2.0]


def test_a_summary_cut_short_closes_its_painter_and_a_finished_one_does_not(sweep, monkeypatch):
    """publish.publish: whatever ends its records early (Ctrl-C, the store's error) closes the painter, whose
    answer to this request would be read as the next one's, and is raised on; a summary that records all
    keeps the painter for its figures."""
    from sweeper.insight import plots, publish

    class Painter:
        closed = 0

        def submit(self, figures, folder):
            pass

        def baselines(self):
            return None

        def close(self):
            self.closed += 1

        def collect(self):
            return {}

    painter = Painter()
    monkeypatch.setattr(plots, "current", lambda: painter)

    def cut_short(*args):
        raise KeyboardInterrupt

    c, parent = client_for(sweep["store"]), sweep["parent"].info.run_id
    monkeypatch.setattr(publish, "_record", cut_short)
    with pytest.raises(KeyboardInterrupt):
        publish.publish(c, parent, out=io.StringIO())
    assert painter.closed == 1
    monkeypatch.setattr(publish, "_record", lambda *args: None)
    publish.publish(c, parent, out=io.StringIO())
    assert painter.closed == 1

"""The leaderboard (sweeper/insight/leaderboard.py): runs and configurations ranked, seeds by their mean, failed
seeds behind, what a row holds, a long board cut to its best rows."""

from __future__ import annotations

import pytest


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
    from sweeper.base.tags import PRUNED_AT
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
    from sweeper.base.tags import PRUNED_AT
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

"""Successive halving inside the batched launcher: who stops at a rung, what survivors score, the records."""

from __future__ import annotations

import json

import pytest

from conftest import all_runs, cli, make_cfg
from sweeper.sweep import launch, pruning
from sweeper.contract.compose import plain as _plain


def _jobs(*grids: str, epochs: int = 270) -> list[launch.Job]:
    import itertools

    keys = [g.split("=")[0] for g in grids]
    values = [g.split("=")[1].split(",") for g in grids]
    out = []
    for i, combo in enumerate(itertools.product(*values)):
        cfg = make_cfg(
            *(f"{k}={v}" for k, v in zip(keys, combo)), f"epochs={epochs}", "log_every=10"
        )
        out.append(launch.Job(i, [], cfg, _plain(cfg)))
    return out


def _regroup(capped):
    together, alone = launch.plan(capped)
    return together + [[j] for j in alone]


def test_rungs_are_min_epochs_times_eta_powers_below_the_largest_epochs():
    assert pruning.Halving(3).rungs(2700, 50) == [100, 300, 900]
    assert pruning.Halving(3, min_epochs=20).rungs(200, 10) == [20, 60, 180]
    # no rung below the largest epochs: nothing is stopped
    assert pruning.Halving(2).rungs(10, 50) == []
    assert pruning.Halving(3).rungs(540, 20) == [
        40,
        120,
        360,
    ]  # by default at least 2 · log_every (540 / 27 = 20)
    assert pruning.Halving(3, min_epochs=30).rungs(270, 10) == [
        30,
        90,
    ]  # not 270: a rung lies below the largest
    # 1, 2, ..., 512
    assert pruning.Halving(2, min_epochs=1).rungs(1024, 1) == [2**k for k in range(10)]
    assert pruning.Halving(7, min_epochs=1).rungs(2, 1) == [1]


def test_the_worst_at_a_rung_stop_there_and_survivors_equal_their_runs_without_halving(tmp_path):
    jobs = _jobs("lr=0.0003,0.001,0.003,0.01,0.02,0.05,0.08,0.1,0.15")
    sizes = []

    def compute(groups):
        sizes.extend(map(len, groups))
        return {
            i: c for m in groups for i, c in launch.compute_group(m, launch.member_tags(m)).items()
        }

    final = pruning.run([jobs], pruning.Halving(3, min_epochs=30), compute, _regroup, tmp_path)
    assert set(final) == {j.idx for j in jobs}
    at30 = launch.compute_group([pruning._capped(j, 30) for j in jobs])
    order = sorted(jobs, key=lambda j: at30[j.idx].outcome.scores["val_mse"])
    pruned30 = {i for i, c in final.items() if c.tags.get("pruned_at_epoch") == "30"}
    assert pruned30 == {j.idx for j in order[3:]}  # 9 reached the first rung, the best 3 go on
    assert {final[i].tags["halving"] for i in pruned30} == {"eta=3 rungs=30,90"}
    for i in pruned30:
        assert final[i].outcome.scores["epochs_run"] == 30
        assert final[i].outcome.scores["val_mse"] == pytest.approx(
            at30[i].outcome.scores["val_mse"], rel=1e-12
        )
    full = launch.compute_group(jobs)
    (winner,) = [i for i, c in final.items() if "pruned_at_epoch" not in c.tags]
    for m in ("val_mse", "test_mse", "val_r2"):
        assert final[winner].outcome.scores[m] == pytest.approx(
            full[winner].outcome.scores[m], rel=1e-12
        )
    assert sizes == [9, 3, 1]  # the group shrinks to the survivors: rungs 30, 90, then the full 270
    summary = json.loads((tmp_path / "halving.json").read_text())
    assert [r["pruned"] for r in summary["per_rung"]] == [6, 2]
    assert (
        summary["member_epochs"] == 9 * 30 + 3 * 90 + 270
        and summary["full_grid_member_epochs"] == 9 * 270
    )


def _compute(groups):
    return {i: c for m in groups for i, c in launch.compute_group(m, launch.member_tags(m)).items()}


def test_the_seeds_of_a_configuration_are_ranked_by_their_mean_and_stop_together(tmp_path):
    jobs = _jobs("lr=0.0003,0.003,0.03", "seed=0,1")
    final = pruning.run([jobs], pruning.Halving(3, min_epochs=30), _compute, _regroup, tmp_path)
    by_lr = {}
    for j in jobs:
        by_lr.setdefault(j.plain["lr"], set()).add(final[j.idx].tags.get("pruned_at_epoch"))
    # both seeds of a configuration share their fate
    assert all(len(v) == 1 for v in by_lr.values())
    assert sum(v == {None} for v in by_lr.values()) == 1


@pytest.mark.slow
def test_a_27_configuration_sweep_with_halving_records_every_run_and_ranks_the_full_ones_first(
    tmp_path, store
):
    proc = cli(
        tmp_path,
        "-m",
        "lr=0.001,0.005,0.02",
        "width=4,8,16",
        "depth=1,2,3",
        "epochs=540",
        "log_every=20",
        "hydra.launcher.halving.eta=3",
        "hydra.launcher.halving.min_epochs=20",
        "tracking.log_model=false",
        store=store,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = [r for r in all_runs(store) if r.data.tags.get("mlflow.parentRunId")]
    assert len(runs) == 27 and all(r.info.status == "FINISHED" for r in runs)
    pruned = [r for r in runs if "pruned_at_epoch" in r.data.tags]
    assert sorted({r.data.tags["pruned_at_epoch"] for r in pruned}) == ["180", "20", "60"]
    assert [
        sum(r.data.tags["pruned_at_epoch"] == e for r in pruned) for e in ("20", "60", "180")
    ] == [18, 6, 2]
    assert all(r.data.metrics["epochs_run"] == int(r.data.tags["pruned_at_epoch"]) for r in pruned)
    (parent,) = [r for r in all_runs(store) if not r.data.tags.get("mlflow.parentRunId")]
    from pathlib import Path

    halved = json.loads((Path(parent.data.tags["sweep_dir"]) / "halving.json").read_text())
    assert (
        parent.data.metrics["n_pruned"] == len(pruned) == 26
        and parent.data.tags["n_pruned"] == "26"
    )
    assert parent.data.tags["halving"] == "eta=3 rungs=20,60,180"
    assert parent.data.tags["halving_per_rung"] == "20:27->9 60:9->3 180:3->1"
    assert (
        parent.data.metrics["halving_member_epochs"]
        < parent.data.metrics["halving_full_grid_member_epochs"]
        == 27 * 540
    )
    assert parent.data.metrics["halving_member_epochs"] == halved["member_epochs"]
    out = proc.stdout + proc.stderr
    table = [ln for ln in out.splitlines() if ln.startswith(("lr=", "width=", "depth="))]
    assert "pruned at epoch" not in table[0] and "pruned at epoch 180" in table[1]
    # each pruned run's description says what its own tag says: where it stopped
    assert all(
        f"pruned at epoch {r.data.tags['pruned_at_epoch']}: stopped early at a rung"
        in r.data.tags["mlflow.note.content"]
        for r in pruned
    )
    full = [r for r in runs if r not in pruned]
    assert "stopped early" not in full[0].data.tags["mlflow.note.content"]


@pytest.mark.slow  # three sweeps (~20 s)
def test_resume_takes_a_pruned_run_as_finished_only_under_the_same_halving_settings(
    tmp_path, store
):
    grid = (
        "-m",
        "lr=0.001,0.005,0.02",
        "width=4,16",
        "epochs=180",
        "log_every=20",
        "tracking.log_model=false",
    )
    halved = ("hydra.launcher.halving.eta=3", "hydra.launcher.halving.min_epochs=20")
    first = cli(tmp_path, *grid, *halved, store=store)
    assert first.returncode == 0, first.stderr[-3000:]
    runs = [r for r in all_runs(store) if r.data.tags.get("mlflow.parentRunId")]
    pruned = {r.data.tags["fingerprint"] for r in runs if "pruned_at_epoch" in r.data.tags}
    assert len(runs) == 6 and len(pruned) == 5
    assert {r.data.tags["halving_settings"] for r in runs if "pruned_at_epoch" in r.data.tags} == {
        "eta=3 min_epochs=20"
    }
    # the same settings: every configuration finished (the pruned ones at their rung), nothing trains
    same = cli(tmp_path, *grid, *halved, "resume=true", store=store)
    assert same.returncode == 0, same.stderr[-3000:]
    assert len([r for r in all_runs(store) if r.data.tags.get("mlflow.parentRunId")]) == 6
    # halving off: the pruned configurations train in full, the complete one is reused; each passed-over run said
    off = cli(tmp_path, *grid, "resume=true", store=store)
    assert off.returncode == 0, off.stderr[-3000:]
    new = [
        r
        for r in all_runs(store)
        if r.data.tags.get("mlflow.parentRunId")
        and r.info.run_id not in {x.info.run_id for x in runs}
    ]
    assert {r.data.tags["fingerprint"] for r in new} == pruned and len(new) == 5
    assert all(
        "pruned_at_epoch" not in r.data.tags and r.data.metrics["epochs_run"] == 180 for r in new
    )
    assert (off.stdout + off.stderr).count(
        "under halving (eta=3 min_epochs=20), and this sweep's halving is off"
    ) == 5


# --- the rule itself, on scores the test chooses (compute returns real Computed outcomes it made up) -----------------


def _scripted(score):
    """A rung's compute that trains nothing: each job's outcome holds ``score(job)`` as its val_mse; the calls it got."""
    from sweeper.job.compute import Computed, Outcome

    calls = []

    def compute(groups):
        calls.append(sorted((j.idx, j.plain["epochs"]) for g in groups for j in g))
        return {
            j.idx: Computed(Outcome({"val_mse": score(j)}, {}, None), {"group": "g"})
            for g in groups
            for j in g
        }

    return compute, calls


def _each_alone(capped):
    return [[j] for j in capped]


def _by_epochs(lrs: str, epochs: list[int]) -> list[launch.Job]:
    """lr × epochs, each job its own epochs (``_jobs`` sets one count for all)."""
    import itertools

    out = []
    for i, (lr, e) in enumerate(itertools.product(lrs.split(","), epochs)):
        cfg = make_cfg(f"lr={lr}", f"epochs={e}", "log_every=10")
        out.append(launch.Job(i, [], cfg, _plain(cfg)))
    return out


def test_halving_settings_read_from_the_launcher_and_the_default_rungs():
    H = pruning.Halving
    assert H.of({"eta": 3, "min_epochs": None}) == H(3, None) and H.of(
        {"eta": "2", "min_epochs": "40"}
    ) == H(2, 40)
    assert H.of({"eta": None}) is None and H.of({}) is None and H.of(None) is None
    assert H(3, 40).setting == "eta=3 min_epochs=40" and H(3).setting == "eta=3 min_epochs=auto"
    # 1000 / 27 = 37.04, down to a multiple of log_every 10: 30
    assert H(3).rungs(1000, 10) == [30, 90, 270, 810] and H(2).rungs(1000, 50) == [
        100,
        200,
        400,
        800,
    ]


def test_a_configurations_key_leaves_out_its_seeds_and_the_store_only(tmp_path):
    from pathlib import Path

    from sweeper.sweep.pruning import _config_key

    base = {
        "lr": 0.1,
        "seed": 0,
        "tracking": {"uri": "a"},
        "data": {"name": "diabetes", "split_seed": 0},
        "p": Path("x"),
    }
    same = {
        "data": {"split_seed": 3, "name": "diabetes"},
        "p": Path("x"),
        "tracking": {"uri": "b"},
        "seed": 7,
        "lr": 0.1,
    }
    # another seed, split seed, store; keys in another order
    assert _config_key(base) == _config_key(same)
    assert _config_key(base) != _config_key({**base, "lr": 0.2})
    assert _config_key(base) != _config_key({**base, "data": {"name": "wine", "split_seed": 0}})
    # a value JSON cannot hold: as its text
    assert _config_key(base) != _config_key({**base, "p": Path("y")})


def test_a_failed_or_unscored_member_is_the_worst_and_accuracy_ranks_high_first():
    import math

    from sweeper.job.compute import Computed, Outcome
    from sweeper.sweep.pruning import _score

    (reg,) = _jobs("lr=0.1", epochs=30)
    (cls,) = _jobs("data=iris", epochs=30)
    out = lambda scores, reason=None: Computed(Outcome(scores, {}, reason), {})  # noqa: E731
    assert _score(out({"val_mse": 3.0}), reg) == 3.0
    # higher is better: ranked by its negative
    assert _score(out({"val_accuracy": 0.9}), cls) == -0.9
    # failed, even with a score
    assert _score(out({"val_mse": 3.0}, "diverged at epoch 5"), reg) == math.inf
    assert _score(out({}), reg) == math.inf and _score(out({"val_mse": math.nan}), reg) == math.inf
    assert _score(out({"val_mse": math.inf}), reg) == math.inf


def test_configurations_rank_by_their_seeds_mean_the_best_third_go_on_and_the_rest_are_tagged(
    tmp_path, caplog, monkeypatch
):
    """lr=0.1 has one seed scored 10, lr=0.2 three scored 4 (mean 4, sum 12), lr=0.3 two of 20: the best third by the
    mean (not the sum) goes on. The halving.json and the log lines say it; compute_s is the time compute took."""
    import logging

    jobs = _jobs("lr=0.1,0.2,0.3", "seed=0,1,2", epochs=90)
    jobs = [
        j
        for j in jobs
        if not (j.plain["lr"] == 0.1 and j.plain["seed"])
        and not (j.plain["lr"] == 0.3 and j.plain["seed"] == 2)
    ]
    clock = [100.0]
    monkeypatch.setattr(pruning.time, "perf_counter", lambda: clock[0])
    compute, calls = _scripted(lambda j: {0.1: 10.0, 0.2: 4.0, 0.3: 20.0}[j.plain["lr"]])

    def timed(groups):
        clock[0] += 0.1234
        return compute(groups)

    with caplog.at_level(logging.INFO, logger="sweeper"):
        final = pruning.run([jobs], pruning.Halving(3, min_epochs=30), timed, _each_alone, tmp_path)
    pruned = {j.idx: final[j.idx].tags.get("pruned_at_epoch") for j in jobs}
    assert {j.plain["lr"] for j in jobs if pruned[j.idx] is None} == {0.2}
    assert {j.plain["lr"] for j in jobs if pruned[j.idx] == "30"} == {0.1, 0.3}
    tags = final[next(j.idx for j in jobs if j.plain["lr"] == 0.1)].tags
    assert tags == {
        "group": "g",
        "pruned_at_epoch": "30",
        "halving": "eta=3 rungs=30",
        "halving_settings": "eta=3 min_epochs=30",
    }
    assert (
        [len(c) for c in calls] == [6, 3]
        and all(e == 30 for _, e in calls[0])
        and all(e == 90 for _, e in calls[1])
    )
    summary = json.loads((tmp_path / "halving.json").read_text())
    assert summary == {
        "eta": 3,
        "rungs": [30],
        "per_rung": [{"rung": 30, "reached": 3, "kept": 1, "pruned": 2}],
        "member_epochs": 6 * 30 + 3 * 90,
        "full_grid_member_epochs": 6 * 90,
        "compute_s": 0.247,
    }
    lines = [r.getMessage() for r in caplog.records]
    assert "halving: rung 30 epochs: 3 configurations reached it, 1 go on, 2 stop there" in lines
    assert "halving: 450 member-epochs trained of the full grid's 540 (83%), in 0.2 s" in lines


def test_a_run_that_ends_at_a_rung_is_complete_there_and_halving_stops_when_none_goes_on(tmp_path):
    """epochs=30 ends at the rung 30: complete (never pruned there). Once only configurations that end by the next rung
    are left, nothing trains past it. The default rungs need each job's log_every."""
    jobs = _by_epochs("0.1,0.2,0.3", [30, 90, 270])
    score = {
        0.1: 5.0,
        0.2: 1.0,
        0.3: 9.0,
    }  # lr=0.2 best: its 90-epoch run ends at the rung 90, the 270 one goes on
    compute, calls = _scripted(lambda j: score[j.plain["lr"]])
    final = pruning.run([jobs], pruning.Halving(3, min_epochs=30), compute, _each_alone, tmp_path)
    for j in jobs:
        if j.plain["epochs"] == 30:
            assert "pruned_at_epoch" not in final[j.idx].tags  # complete at its own count
    assert sorted(
        final[j.idx].tags.get("pruned_at_epoch", "-") for j in jobs if j.plain["lr"] == 0.2
    ) == ["-", "-", "-"]
    assert [len(c) for c in calls] == [
        9,
        2,
        1,
    ]  # 30: all; 90: lr=0.2's 90 and 270; 270: lr=0.2's 270
    # the best configuration stops early: only runs that end by the next rung are left, and nothing trains past it
    short = _by_epochs("0.1,0.2", [60, 270])  # eta 2: rungs 30, 60, 120, 240
    # (a rung's jobs hold its epochs)
    compute, calls = _scripted(lambda j: {0: 0.1, 2: 0.2}.get(j.idx, 5.0))
    pruning.run([short], pruning.Halving(2, min_epochs=30), compute, _each_alone, tmp_path)
    assert [len(c) for c in calls] == [
        4,
        2,
    ]  # rung 30: 4; the best half (the 60-epoch runs) end at rung 60
    compute, calls = _scripted(lambda j: 1.0)
    pruning.run(
        [_jobs("lr=0.1,0.2", epochs=270)], pruning.Halving(3), compute, _each_alone, tmp_path
    )
    assert [c[0][1] for c in calls] == [
        20,
        60,
        180,
        270,
    ]  # default rungs: 270 / 27 = 10, at least 2 · log_every


def test_a_one_epoch_grid_is_trained_whole_and_its_summary_says_100_percent(tmp_path, caplog):
    """One configuration of 1 epoch: no rung lies below it; it trains its one member-epoch, all of the full grid's."""
    import logging

    compute, calls = _scripted(lambda j: 1.0)
    with caplog.at_level(logging.INFO, logger="sweeper"):
        final = pruning.run(
            [_jobs("lr=0.1", epochs=1)],
            pruning.Halving(2, min_epochs=1),
            compute,
            _each_alone,
            tmp_path,
        )
    assert list(final) == [0] and calls == [[(0, 1)]]
    assert any(
        r.getMessage().startswith(
            "halving: 1 member-epochs trained of the full grid's 1 (100%), in "
        )
        for r in caplog.records
    )


def test_a_group_that_fails_as_a_whole_leaves_its_jobs_to_the_one_job_path(tmp_path):
    """compute returns nothing for a failed group: its jobs are not halving's (they train alone, in full); the rest go
    on; with every group failed, halving ends at once and still writes its summary."""
    jobs = _jobs("lr=0.1,0.2,0.3", epochs=90)
    compute, _ = _scripted(lambda j: j.plain["lr"])

    def without_first(groups):
        return {i: c for i, c in compute(groups).items() if i != jobs[0].idx}

    final = pruning.run(
        [jobs], pruning.Halving(2, min_epochs=30), without_first, _each_alone, tmp_path
    )
    assert jobs[0].idx not in final and set(final) == {jobs[1].idx, jobs[2].idx}
    assert (
        pruning.run(
            [jobs], pruning.Halving(2, min_epochs=30), lambda groups: {}, _each_alone, tmp_path
        )
        == {}
    )
    assert json.loads((tmp_path / "halving.json").read_text())["per_rung"] == []


def test_the_launchers_strategy_is_asked_of_pruning_by_its_config_or_the_launcher():
    """The one reader of the launcher's ``halving`` key: its config (a mapping, as the plan, the
    resuming sweeper and the job hold it), the launcher itself (its attribute), or nothing (no
    Hydra run: off); the resume rule is the one of the strategy it finds."""
    from types import SimpleNamespace

    from omegaconf import OmegaConf

    on = {"halving": {"eta": 3, "min_epochs": 20}}
    for launcher in (on, OmegaConf.create(on), SimpleNamespace(halving=on["halving"])):
        assert pruning.strategy(launcher) == pruning.Halving(3, 20)
        tags = {"pruned_at_epoch": "20", "halving_settings": "eta=3 min_epochs=20"}
        assert pruning.resume_rule(launcher)(tags) is None
    for off in ({}, None, {"halving": {"eta": None}}, SimpleNamespace(halving=None)):
        assert pruning.strategy(off) is None
        assert pruning.resume_rule(off)(tags) == (
            "stopped at epoch 20 under halving (eta=3 min_epochs=20), and this sweep's halving "
            "is off: the configuration trains again"
        )
    other = pruning.resume_rule({"halving": {"eta": 2}})(tags)
    assert other is not None and "this sweep's halving is eta=2 min_epochs=auto:" in other

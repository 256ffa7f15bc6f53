"""Successive halving inside the batched launcher: who stops at a rung, what survivors score, the records."""
from __future__ import annotations

import json

import pytest

from conftest import all_runs, cli, make_cfg
from sweeper.sweep import halving, launch
from sweeper.sweep.plan import _plain


def _jobs(*grids: str, epochs: int = 270) -> list[launch.Job]:
    import itertools

    keys = [g.split("=")[0] for g in grids]
    values = [g.split("=")[1].split(",") for g in grids]
    out = []
    for i, combo in enumerate(itertools.product(*values)):
        cfg = make_cfg(*(f"{k}={v}" for k, v in zip(keys, combo)), f"epochs={epochs}", "log_every=10")
        out.append(launch.Job(i, [], cfg, _plain(cfg)))
    return out


def _regroup(capped):
    together, alone = launch.plan(capped)
    return together + [[j] for j in alone]


def test_rungs_are_min_epochs_times_eta_powers_below_the_largest_epochs():
    assert halving.Halving(3).rungs(2700, 50) == [100, 300, 900]
    assert halving.Halving(3, min_epochs=20).rungs(200, 10) == [20, 60, 180]
    assert halving.Halving(2).rungs(10, 50) == []  # no rung below the largest epochs: nothing is stopped
    assert halving.Halving(3).rungs(540, 20) == [40, 120, 360]  # by default at least 2 · log_every (540 / 27 = 20)


def test_the_worst_at_a_rung_stop_there_and_survivors_equal_their_runs_without_halving(tmp_path):
    jobs = _jobs("lr=0.0003,0.001,0.003,0.01,0.02,0.05,0.08,0.1,0.15")
    sizes = []

    def compute(groups):
        sizes.extend(map(len, groups))
        return {i: c for m in groups for i, c in launch.compute_group(m, launch.member_tags(m)).items()}

    final = halving.run([jobs], halving.Halving(3, min_epochs=30), compute, _regroup, tmp_path)
    assert set(final) == {j.idx for j in jobs}
    at30 = launch.compute_group([halving._capped(j, 30) for j in jobs])
    order = sorted(jobs, key=lambda j: at30[j.idx].outcome.scores["val_mse"])
    pruned30 = {i for i, c in final.items() if c.tags.get("pruned_at_epoch") == "30"}
    assert pruned30 == {j.idx for j in order[3:]}  # 9 reached the first rung, the best 3 go on
    for i in pruned30:
        assert final[i].outcome.scores["epochs_run"] == 30
        assert final[i].outcome.scores["val_mse"] == pytest.approx(at30[i].outcome.scores["val_mse"], rel=1e-12)
    full = launch.compute_group(jobs)
    (winner,) = [i for i, c in final.items() if "pruned_at_epoch" not in c.tags]
    for m in ("val_mse", "test_mse", "val_r2"):
        assert final[winner].outcome.scores[m] == pytest.approx(full[winner].outcome.scores[m], rel=1e-12)
    assert sizes == [9, 3, 1]  # the group shrinks to the survivors: rungs 30, 90, then the full 270
    summary = json.loads((tmp_path / "halving.json").read_text())
    assert [r["pruned"] for r in summary["per_rung"]] == [6, 2]
    assert summary["member_epochs"] == 9 * 30 + 3 * 90 + 270 and summary["full_grid_member_epochs"] == 9 * 270


def _compute(groups):
    return {i: c for m in groups for i, c in launch.compute_group(m, launch.member_tags(m)).items()}


def test_the_seeds_of_a_configuration_are_ranked_by_their_mean_and_stop_together(tmp_path):
    jobs = _jobs("lr=0.0003,0.003,0.03", "seed=0,1")
    final = halving.run([jobs], halving.Halving(3, min_epochs=30), _compute, _regroup, tmp_path)
    by_lr = {}
    for j in jobs:
        by_lr.setdefault(j.plain["lr"], set()).add(final[j.idx].tags.get("pruned_at_epoch"))
    assert all(len(v) == 1 for v in by_lr.values())  # both seeds of a configuration share their fate
    assert sum(v == {None} for v in by_lr.values()) == 1


@pytest.mark.slow
def test_a_27_configuration_sweep_with_halving_records_every_run_and_ranks_the_full_ones_first(tmp_path, store):
    proc = cli(tmp_path, "-m", "lr=0.001,0.005,0.02", "width=4,8,16", "depth=1,2,3", "epochs=540", "log_every=20",
               "hydra.launcher.halving.eta=3", "hydra.launcher.halving.min_epochs=20", "tracking.log_model=false",
               store=store)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = [r for r in all_runs(store) if r.data.tags.get("mlflow.parentRunId")]
    assert len(runs) == 27 and all(r.info.status == "FINISHED" for r in runs)
    pruned = [r for r in runs if "pruned_at_epoch" in r.data.tags]
    assert sorted({r.data.tags["pruned_at_epoch"] for r in pruned}) == ["180", "20", "60"]
    assert [sum(r.data.tags["pruned_at_epoch"] == e for r in pruned) for e in ("20", "60", "180")] == [18, 6, 2]
    assert all(r.data.metrics["epochs_run"] == int(r.data.tags["pruned_at_epoch"]) for r in pruned)
    (parent,) = [r for r in all_runs(store) if not r.data.tags.get("mlflow.parentRunId")]
    from pathlib import Path

    halved = json.loads((Path(parent.data.tags["sweep_dir"]) / "halving.json").read_text())
    assert parent.data.metrics["n_pruned"] == len(pruned) == 26 and parent.data.tags["n_pruned"] == "26"
    assert parent.data.tags["halving"] == "eta=3 rungs=20,60,180"
    assert parent.data.tags["halving_per_rung"] == "20:27->9 60:9->3 180:3->1"
    assert parent.data.metrics["halving_member_epochs"] < parent.data.metrics["halving_full_grid_member_epochs"] == 27 * 540
    assert parent.data.metrics["halving_member_epochs"] == halved["member_epochs"]
    out = proc.stdout + proc.stderr
    table = [ln for ln in out.splitlines() if ln.startswith(("lr=", "width=", "depth="))]
    assert "pruned at epoch" not in table[0] and "pruned at epoch 180" in table[1]


@pytest.mark.slow  # three sweeps (~20 s)
def test_resume_takes_a_pruned_run_as_finished_only_under_the_same_halving_settings(tmp_path, store):
    grid = ("-m", "lr=0.001,0.005,0.02", "width=4,16", "epochs=180", "log_every=20", "tracking.log_model=false")
    halved = ("hydra.launcher.halving.eta=3", "hydra.launcher.halving.min_epochs=20")
    first = cli(tmp_path, *grid, *halved, store=store)
    assert first.returncode == 0, first.stderr[-3000:]
    runs = [r for r in all_runs(store) if r.data.tags.get("mlflow.parentRunId")]
    pruned = {r.data.tags["fingerprint"] for r in runs if "pruned_at_epoch" in r.data.tags}
    assert len(runs) == 6 and len(pruned) == 5
    assert {r.data.tags["halving_settings"] for r in runs if "pruned_at_epoch" in r.data.tags} == {"eta=3 min_epochs=20"}
    # the same settings: every configuration finished (the pruned ones at their rung), nothing trains
    same = cli(tmp_path, *grid, *halved, "resume=true", store=store)
    assert same.returncode == 0, same.stderr[-3000:]
    assert len([r for r in all_runs(store) if r.data.tags.get("mlflow.parentRunId")]) == 6
    # halving off: the pruned configurations train in full, the complete one is reused; each passed-over run said
    off = cli(tmp_path, *grid, "resume=true", store=store)
    assert off.returncode == 0, off.stderr[-3000:]
    new = [r for r in all_runs(store) if r.data.tags.get("mlflow.parentRunId") and r.info.run_id not in
           {x.info.run_id for x in runs}]
    assert {r.data.tags["fingerprint"] for r in new} == pruned and len(new) == 5
    assert all("pruned_at_epoch" not in r.data.tags and r.data.metrics["epochs_run"] == 180 for r in new)
    assert (off.stdout + off.stderr).count("under halving (eta=3 min_epochs=20), and this sweep's halving is off") == 5

"""Trajectories: configurations that differ only in ``epochs`` are one run of the batched launcher, read at each
count; each reads exactly what it gives alone (``hydra/launcher=basic``'s path, ``compute.train_and_score``)."""

import math
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import all_runs, cli, client_for, make_cfg, no_baselines
from sweeper import data
from sweeper.base.backend import resolve
from sweeper.job.compute import train_and_score
from sweeper.job.metrics import TIMINGS
from sweeper.models.train import EXPLODED
from sweeper.sweep import groups, launch
from sweeper.contract.compose import plain as plain_config

SMALL = ("depth=1", "width=8", "log_every=20")


def _jobs(*grid):
    return [launch.Job(i, list(o), None, plain_config(make_cfg(*o))) for i, o in enumerate(grid)]


def _grid(lrs, epochs, *extra):
    return [(f"lr={lr}", f"epochs={e}", *SMALL, *extra) for lr in lrs for e in epochs]


def _same_as_alone(grid, rtol=1e-9):
    """compute_group over the grid against each configuration trained alone: the same outcome, to ``rtol``."""
    jobs = _jobs(*grid)
    computed = launch.compute_group(jobs)
    assert sorted(computed) == [j.idx for j in jobs]
    for job in jobs:
        cfg = make_cfg(*job.overrides)
        alone = train_and_score(cfg, data.load(cfg.data, cfg.seed), resolve("cpu"))
        got = computed[job.idx].outcome
        where = " ".join(job.overrides)
        assert got.reason == alone.reason, where
        for k in ("best_epoch", "epochs_run"):
            assert got.scores[k] == alone.scores[k], (where, k)
        for name, (steps, values) in alone.curves.items():
            np.testing.assert_array_equal(got.curves[name][0], steps, err_msg=where)
            # a diverged point is an explosion, which amplifies the last bits' difference: both past the bound
            upto = len(values) - (alone.reason is not None)
            np.testing.assert_allclose(
                got.curves[name][1][:upto], values[:upto], rtol=rtol, err_msg=where
            )
            if upto < len(values) and name == "train_loss":
                assert not got.curves[name][1][-1] < EXPLODED * got.curves[name][1][0]
        quality = {
            k: v
            for k, v in alone.scores.items()
            if k not in TIMINGS and k not in ("best_epoch", "epochs_run")
        }
        assert set(quality) == {
            k
            for k in got.scores
            if k not in TIMINGS and k not in ("best_epoch", "epochs_run", "group_train_time_s")
        }
        for k, v in quality.items():
            assert math.isclose(got.scores[k], v, rel_tol=rtol, abs_tol=1e-12), (where, k)
        if alone.reason is None:
            np.testing.assert_allclose(
                got.test_pred, alone.test_pred, rtol=rtol, atol=1e-12, err_msg=where
            )
            for a, b in zip(got.params, alone.params):
                np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-12, err_msg=where)
    by_traj = {}
    for job in jobs:
        by_traj.setdefault(computed[job.idx].tags["sweeper.trajectory"], set()).add(job.plain["lr"])
    assert all(len(lrs) == 1 for lrs in by_traj.values()) and len(by_traj) == len(
        {j.plain["lr"] for j in jobs}
    )
    return jobs, computed


@pytest.mark.parametrize(
    "extra",
    [
        (),
        ("optimizer=momentum",),
        ("optimizer=momentum", "nesterov=true"),
        ("optimizer=adam",),
        ("weight_decay=0.01",),
        ("batch_size=64",),
    ],
    ids=["gd", "momentum", "nesterov", "adam", "weight-decay", "mini-batches"],
)
def test_configurations_read_off_a_trajectory_equal_them_alone(extra):
    """130 epochs is no multiple of log_every=20: its last point (130) is a sample of its own."""
    jobs, computed = _same_as_alone(_grid((0.01, 0.05), (130, 200, 300), *extra))
    for job in jobs:
        steps = computed[job.idx].outcome.curves["val_loss"][0]
        assert (
            steps[-1] == job.plain["epochs"] and steps[-2] == (job.plain["epochs"] - 1) // 20 * 20
        )


def test_patience_reads_the_best_weights_so_far_at_each_count():
    jobs, computed = _same_as_alone(_grid((0.3, 0.02), (50, 130, 600), "patience=40"))
    runs = {(j.plain["lr"], j.plain["epochs"]): computed[j.idx].outcome.scores for j in jobs}
    # the trajectory stopped early: the longest reads its stop
    assert runs[(0.3, 600)]["epochs_run"] < 600
    # a kept copy, not the last
    assert runs[(0.3, 50)]["best_epoch"] < 50 or runs[(0.3, 130)]["best_epoch"] < 130


def test_a_trajectory_that_diverges_between_two_counts_leaves_the_shorter_finished():
    """lr=0.85 on diabetes diverges at epoch 20 (log_every=5): 8 and 12 epochs are read before it."""
    grid = [
        (f"lr={lr}", f"epochs={e}", "depth=1", "width=8", "log_every=5")
        for lr in (0.85, 0.01)
        for e in (8, 12, 40)
    ]
    jobs, computed = _same_as_alone(grid)
    reasons = {(j.plain["lr"], j.plain["epochs"]): computed[j.idx].outcome.reason for j in jobs}
    assert reasons[(0.85, 8)] is None and reasons[(0.85, 40)] == "diverged at epoch 20"


def test_plan_makes_one_member_of_a_trajectory_and_counts_its_snapshots():
    lrs = [f"lr={0.001 * (i + 1)}" for i in range(4)]
    jobs = _jobs(*[(lr, f"epochs={e}") for lr in lrs for e in (1000, 3000)])
    plan, alone = launch.plan(jobs)
    assert [len(g) for g in plan] == [8] and not alone
    assert [len(t) for t in groups.trajectories(plan[0])] == [2] * 4
    only_epochs = _jobs(*[(f"epochs={e}",) for e in (1000, 2000, 4000)])
    plan, alone = launch.plan(only_epochs)
    assert [len(g) for g in plan] == [3] and len(groups.trajectories(plan[0])) == 1 and not alone
    # 5000 epochs alone, 4000 at K=1: alone
    close = _jobs(*[(f"epochs={e}",) for e in (1000, 4000)])
    assert launch.plan(close) == ([], close)
    # whole trajectories: 3, and 1 left that runs alone (4000 < 4500)
    plan, alone = launch.plan(jobs, max_size=3)
    assert (
        [len(groups.trajectories(g)) for g in plan] == [3]
        and [len(g) for g in plan] == [6]
        and len(alone) == 2
    )
    # the budget counts the snapshots: 2 epoch counts a trajectory keep one more copy of the weights
    one = groups._fits(groups.trajectories(jobs[:2]), 1 << 40)
    assert one < groups._fits([[jobs[0]]], 1 << 40)


def test_runs_not_longer_than_log_every_group_at_their_own_stride():
    """epochs=10 with log_every=50 samples every 5 epochs (models.train.sample_stride): a grid of such runs is
    one group that reads what each gives alone; a run of another stride does not join it."""
    grid = [
        (f"lr={lr}", f"epochs={e}", "depth=1", "width=8", "log_every=50")
        for lr in (0.01, 0.05)
        for e in (9, 10)
    ]
    plan, alone = launch.plan(_jobs(*grid))
    assert [len(g) for g in plan] == [4] and not alone
    _same_as_alone(grid)
    mixed = _jobs(
        *grid,
        ("lr=0.02", "epochs=300", "depth=1", "width=8", "log_every=50"),
        ("lr=0.02", "epochs=12", "depth=1", "width=8", "log_every=50"),
    )
    plan, alone = launch.plan(mixed)
    assert [len(g) for g in plan] == [4] and [j.idx for j in alone] == [4, 5]


def test_shares_split_each_epoch_among_the_configurations_that_need_it():
    assert groups.shares([100, 200, 400], 4.0) == pytest.approx(
        [1 / 3, 1 / 3 + 0.5, 1 / 3 + 0.5 + 2]
    )
    assert sum(groups.shares([20, 40, 80, 160, 160], 7.0)) == pytest.approx(7.0)


# --- real multiruns ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_sweep_over_lr_and_epochs_records_what_basic_records_one_run_per_configuration(
    tmp_path, store
):
    from test_launcher import _both, _children, _same_records

    stores, proc = _both(
        tmp_path,
        store,
        "lr=0.01,0.05",
        "epochs=90,200",
        "log_every=20",
        "depth=1",
        "width=8",
        "tracking.log_model=false",
        batched=("hydra.launcher.cpu_workers=1",),
    )  # groups unsplit
    assert "4 jobs: 4 in 1 batched group(s), 0 one at a time" in proc.stdout
    _same_records(stores, rtol=1e-9, statuses_seen=("FINISHED",), count=4)
    basic, batched = _children(stores["basic"]), _children(stores["batched"])
    trajectories = {}
    for fp, run in batched.items():
        assert run.info.run_name == basic[fp].info.run_name
        trajectories.setdefault(run.data.tags["sweeper.trajectory"], set()).add(
            run.data.params["lr"]
        )
        history = client_for(stores["batched"]).get_metric_history(run.info.run_id, "val_loss")
        # the curve ends at its own end
        assert max(m.step for m in history) == int(run.data.params["epochs"])
    assert len(trajectories) == 2 and all(len(lrs) == 1 for lrs in trajectories.values())


@pytest.mark.slow
def test_the_seed_sweep_is_8_runs_off_4_trajectories_each_curve_ending_at_its_epochs(
    tmp_path, store
):
    proc = cli(
        tmp_path,
        "-m",
        "+sweep=seed",
        "tracking.log_model=false",
        "hydra.launcher.cpu_workers=1",
        store=store,
    )
    assert proc.returncode == 0, proc.stderr
    # two groups (one per width), or one when the planner packs them (it does where packing pays on this machine)
    assert re.search(
        r"8 jobs: 8 in (2 batched group\(s\), 0 one at a time"
        r"|1 batched group\(s\) \(2 groups of one shape packed into 1)",
        proc.stdout,
    ), proc.stdout
    runs = [r for r in all_runs(store) if "mlflow.parentRunId" in r.data.tags]
    assert len(runs) == 8 and {r.info.status for r in runs} == {"FINISHED"}
    assert len({r.data.tags["sweeper.trajectory"] for r in runs}) == 4
    for r in runs:
        with np.load(_job_dir(tmp_path, r) / "curves.npz") as z:
            assert z["val_loss_steps"][-1] == int(r.data.params["epochs"])


def _job_dir(tmp_path, run):
    """The job folder whose result.json names this run."""
    import json

    for result in (tmp_path / "sweep").glob("*/result.json"):
        if json.loads(result.read_text())["run_id"] == run.info.run_id:
            return result.parent
    raise AssertionError(f"no job folder for run {run.info.run_id}")


def _launch(tmp_path, store, *args):
    argv = [
        *args,
        *no_baselines(args),
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"tracking.uri=sqlite:///{store}",
    ]
    return subprocess.Popen(
        [sys.executable, "-m", "sweeper", *argv],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _members_running(proc, store, n, deadline=120):
    """Wait (reading the store from this process) until the sweep's n children are in it; they and the process."""
    end = time.monotonic() + deadline
    while True:
        assert proc.poll() is None and time.monotonic() < end, proc.communicate()
        try:
            kids = [r for r in all_runs(store) if "mlflow.parentRunId" in r.data.tags]
        except Exception:  # noqa: BLE001  (the store not created yet)
            kids = []
        if len(kids) == n:
            return kids
        time.sleep(0.05)


LONG = (
    "-m",
    "lr=0.001,0.002",
    "epochs=20000,40000",
    "log_every=100",
    "depth=1",
    "width=8",
    "tracking.log_model=false",
)


@pytest.mark.slow
def test_members_runs_are_running_while_their_group_trains_and_bracket_its_time(tmp_path, store):
    # every run keeps its system metrics
    proc = _launch(tmp_path, store, *LONG, "tracking.system_metrics_min_s=0")
    kids = _members_running(proc, store, 4)
    assert {r.info.status for r in kids} == {"RUNNING"} and not list(
        (tmp_path / "sweep").glob("*/result.json")
    )
    assert all(
        r.data.params["lr"] in ("0.001", "0.002") and r.data.tags["sweeper.trajectory"]
        for r in kids
    )
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    runs = [r for r in all_runs(store) if "mlflow.parentRunId" in r.data.tags]
    assert {r.info.status for r in runs} == {"FINISHED"}
    for r in runs:
        assert r.info.end_time - r.info.start_time >= 1000 * r.data.metrics["group_train_time_s"]
        assert any(k.startswith("system/") for k in r.data.metrics)  # the group's system metrics


@pytest.mark.slow
def test_ctrl_c_during_a_group_kills_every_members_run(tmp_path, store):
    proc = _launch(tmp_path, store, *LONG[:3], "epochs=400000,800000", *LONG[4:])
    _members_running(proc, store, 4)  # RUNNING: the group trains (its runs are opened as it begins)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    runs = all_runs(store)
    kids = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(kids) == 4 and {r.info.status for r in kids} == {"KILLED"}
    assert [r.info.status for r in runs if "mlflow.parentRunId" not in r.data.tags] == ["KILLED"]

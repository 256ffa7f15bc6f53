"""The batched launcher (the default of -m) against the basic one: the same children, the same records."""

import math
import shutil

import numpy as np

import pytest

from conftest import all_runs, cli, client_for, make_cfg
from sweeper.job.compute import scored_on
from sweeper.job.metrics import TIMINGS
from test_text import SMS, needs_sms

GRID = (
    "lr=0.01,5",
    "epochs=100,200",
    "seed=0,1",
    "patience=0,30",
    "log_every=10",
    "depth=1",
    "width=8",
)


def _children(store):
    return {
        r.data.tags["fingerprint"]: r
        for r in all_runs(store)
        if "mlflow.parentRunId" in r.data.tags
    }


def _artifacts(store, run):
    return sorted(a.path for a in client_for(store).list_artifacts(run.info.run_id))


def _both(tmp_path, store, *args, batched=()):
    stores = {"basic": store, "batched": store.parent.parent / "batched_store" / "mlflow.db"}
    shutil.copytree(store.parent, stores["batched"].parent)
    for launcher, db in stores.items():
        out = tmp_path / launcher
        out.mkdir()
        proc = cli(
            out,
            "-m",
            *args,
            f"hydra/launcher={launcher}",
            *(batched if launcher == "batched" else ()),
            store=db,
        )
        assert proc.returncode == 0, proc.stderr
    return stores, proc


def _same_records(stores, rtol, statuses_seen=("FINISHED", "FAILED"), groups=None, count=16):
    basic, batched = _children(stores["basic"]), _children(stores["batched"])
    assert set(basic) == set(batched) and len(basic) == count
    if groups is not None:
        assert len({r.data.tags["sweeper.batch_group"] for r in batched.values()}) == groups
    statuses = set()
    for fp, a in basic.items():
        b = batched[fp]
        statuses.add(a.info.status)
        assert a.info.status == b.info.status, a.data.tags["overrides"]
        assert a.data.tags.get("failure_reason") == b.data.tags.get("failure_reason")
        assert {**a.data.params, "tracking.uri": ""} == {**b.data.params, "tracking.uri": ""}
        assert (
            b.data.tags["sweeper.launcher"] == "batched"
            and int(b.data.tags["sweeper.group_size"]) >= 2
        )
        # rank: the run's place in its sweep's leaderboard, where runs that tie exactly fall in either order
        quality = {
            k: v
            for k, v in a.data.metrics.items()
            if k not in (*TIMINGS, "rank") and not k.startswith("system/")
        }
        assert quality and set(quality) <= set(b.data.metrics)
        for k, v in quality.items():
            assert math.isclose(b.data.metrics[k], v, rel_tol=rtol, abs_tol=1e-12), (
                a.data.tags["overrides"],
                k,
            )
        assert _artifacts(stores["basic"], a) == _artifacts(stores["batched"], b)
        assert (
            b.data.metrics["group_train_time_s"] >= b.data.metrics["train_time_s"] > 0
            or b.info.status == "FAILED"
        )
    assert statuses == set(statuses_seen)  # lr=5 diverges on diabetes in both, with the same reason


@pytest.mark.slow
def test_batched_and_basic_launchers_record_the_same_regression_sweep(tmp_path, store):
    stores, proc = _both(tmp_path, store, *GRID, "data=diabetes")
    assert "batched group(s)" in proc.stdout
    _same_records(stores, rtol=1e-9)


@pytest.mark.slow
def test_batched_and_basic_launchers_record_the_same_binary_sweep_in_float32(tmp_path, store):
    stores, _ = _both(
        tmp_path, store, *GRID, "data=breast_cancer", "dtype=float32", "tracking.log_model=false"
    )
    _same_records(stores, rtol=1e-4, statuses_seen=("FINISHED",))  # cross-entropy grows, but slowly


@pytest.mark.slow
def test_batched_and_basic_launchers_record_the_same_momentum_adam_weight_decay_mini_batch_multiclass_sweep(
    tmp_path, store
):
    """Groups by optimizer and batch size (4 of 4: lr and patience differ inside one), iris's 3 classes."""
    stores, proc = _both(
        tmp_path,
        store,
        "data=iris",
        "optimizer=momentum,adam",
        "nesterov=true",
        "lr=0.01,0.05",
        "weight_decay=0.001",
        "batch_size=0,32",
        "patience=0,20",
        "epochs=60",
        "log_every=10",
        "depth=1",
        "width=8",
        "tracking.log_model=false",
    )
    assert (
        "Launching 16 jobs: 16 in 4 batched group(s), 0 one at a time" in proc.stdout + proc.stderr
    )
    _same_records(stores, rtol=1e-9, statuses_seen=("FINISHED",), groups=4)


@pytest.mark.slow
def test_a_group_larger_than_the_memory_budget_splits(tmp_path, store):
    proc = cli(
        tmp_path,
        "-m",
        "lr=0.01,0.02,0.03,0.04",
        "epochs=20",
        "log_every=10",
        "tracking.log_model=false",
        "hydra.launcher.max_group_size=2",
        store=store,
    )
    assert proc.returncode == 0, proc.stderr
    groups = {r.data.tags["sweeper.batch_group"] for r in _children(store).values()}
    assert len(groups) == 2 and "4 in 2 batched group(s)" in proc.stdout


def _jobs(*grid):
    from sweeper.contract.compose import plain as plain_config
    from sweeper.sweep import launch

    return [launch.Job(i, list(o), None, plain_config(make_cfg(*o))) for i, o in enumerate(grid)]


def test_plan_groups_mini_batches_by_seed_and_full_batches_across_seeds():
    """The seed draws a mini-batch group's row order, so its members share it; full batches mix seeds."""
    from sweeper.sweep import launch

    grid = [
        (f"lr={lr}", f"seed={seed}", f"batch_size={b}", "epochs=100")
        for lr in (0.01, 0.02)
        for seed in (0, 1)
        for b in (0, 32)
    ]
    groups, alone = launch.plan(_jobs(*grid))
    assert not alone
    sizes = sorted(
        (g[0].plain["batch_size"], len(g), len({j.plain["seed"] for j in g})) for g in groups
    )
    assert sizes == [(0, 4, 2), (32, 2, 1), (32, 2, 1)]


def test_members_of_other_seeds_share_the_data_and_other_split_seeds_have_their_own():
    """seed draws the weights only: a group of seeds 0 and 1 on one split reads one data set (2-D X); members of two
    split seeds group too, each with its own rows (stacked), and each scores as it would alone."""
    from sweeper.sweep import launch

    grid = [
        ("lr=0.01", f"seed={seed}", f"data.split_seed={split}", "epochs=100", "log_every=10")
        for seed in (0, 1)
        for split in (0, 1)
    ]
    groups, alone = launch.plan(_jobs(*grid))
    assert not alone and [len(g) for g in groups] == [4]
    seeds_only = [j for j in groups[0] if j.plain["data"]["split_seed"] == 0]
    computed = launch.compute_group(seeds_only)
    a, b = (computed[j.idx] for j in seeds_only)
    assert a.outcome.scores["val_mse"] != b.outcome.scores["val_mse"]
    scored = {
        (j.plain["seed"], j.plain["data"]["split_seed"]): scored_on(j.plain["data"])
        for j in groups[0]
    }
    # the record half reads one copy per split, whatever the weight seed
    assert scored[0, 0] is scored[1, 0]
    assert not np.array_equal(scored[0, 0].y_val, scored[0, 1].y_val)
    both = launch.compute_group(groups[0])
    by = {(j.plain["seed"], j.plain["data"]["split_seed"]): both[j.idx] for j in groups[0]}
    assert by[0, 0].outcome.scores["val_mse"] == pytest.approx(
        a.outcome.scores["val_mse"], rel=1e-9
    )


@needs_sms
def test_text_features_group_by_split_seed_and_sparse_ones_fit_a_budget_counted_in_stored_values():
    """Every word of the training rows (~6.5k features): one member's dense [X.T; 1] alone would be ~230 MB
    (training and validation rows); its CSR matrices and the sparse products' buffers are a few MB."""
    from sweeper.sweep import launch

    text = (
        "data=sms",
        f"data.path={SMS}",
        "data.max_features=0",
        "depth=1",
        "width=8",
        "epochs=50",
        "log_every=10",
    )
    jobs = _jobs(
        *[(*text, f"lr={lr}", f"data.split_seed={seed}") for seed in (0, 1) for lr in (0.5, 1, 2)]
    )
    groups, alone = launch.plan(jobs, max_bytes=40 << 20)
    assert not alone and sorted(len(g) for g in groups) == [3, 3]
    # each split fits its own vocabulary
    assert all(len({j.plain["data"]["split_seed"] for j in g}) == 1 for g in groups)
    # dense text features too: the splits' vocabularies differ in size, so their rows cannot stack into one group
    dense = (
        "data=sms",
        f"data.path={SMS}",
        "data.sparse=false",
        "data.min_df=5",
        "epochs=20",
        "log_every=5",
    )
    groups, alone = launch.plan(
        _jobs(
            *[(*dense, f"lr={lr}", f"data.split_seed={seed}") for seed in (0, 1) for lr in (1, 2)]
        )
    )
    assert not alone and [len({j.plain["data"]["split_seed"] for j in g}) for g in groups] == [1, 1]
    for g in groups:
        assert len(launch.compute_group(g)) == 2


@needs_sms
@pytest.mark.slow
def test_batched_and_basic_launchers_record_the_same_sparse_text_sweep(tmp_path, store):
    stores, proc = _both(
        tmp_path,
        store,
        "data=sms",
        f"data.path={SMS}",
        "data.max_features=500",
        "lr=0.5,1,2",
        "epochs=50",
        "log_every=10",
        "depth=1",
        "width=8",
        "tracking.log_model=false",
        batched=("hydra.launcher.cpu_workers=1",),
    )  # one group, unsplit (sweeper.sweep.cores)
    assert "3 jobs: 3 in 1 batched group(s), 0 one at a time" in proc.stdout
    _same_records(stores, rtol=1e-9, statuses_seen=("FINISHED",), count=3)
    batched = _children(stores["batched"]).values()
    assert len({r.data.tags["sweeper.batch_group"] for r in batched}) == 1
    assert {r.data.tags["sweeper.group_size"] for r in batched} == {"3"}


@pytest.mark.slow
def test_a_large_groups_runs_not_opened_while_it_trained_are_created_in_chunks_before_their_jobs(
    tmp_path, store
):
    # a group over the bound of runs opened ahead (4 here, 1,024 by default) that trains for less than a second:
    # its runs are created a chunk at a time just before their jobs, all starting when the group began
    import os

    env = {
        **os.environ,
        "SWEEPER_AHEAD_BULK": "4",
        "SWEEPER_AHEAD_AFTER_S": "120",
    }  # none opened while training
    proc = cli(
        tmp_path,
        "-m",
        "lr=range(0.001,0.011,0.001)",
        "epochs=20",
        "log_every=10",
        "depth=1",
        "width=8",
        "tracking.log_model=false",
        "hydra.launcher.cpu_workers=1",
        store=store,
        env=env,
    )  # one group, unsplit
    assert proc.returncode == 0, proc.stderr
    kids = list(_children(store).values())
    assert len(kids) == 10 and {k.info.status for k in kids} == {"FINISHED"}
    assert len({k.data.tags["sweeper.batch_group"] for k in kids}) == 1
    assert len({k.info.start_time for k in kids}) == 1  # the group's start
    for k in kids:  # each run handed to its own job: its name, params and overrides agree
        lr = float(k.data.params["lr"])
        assert (
            float(k.data.tags["overrides"].split()[0].split("=")[1]) == lr
            and "val_mse" in k.data.metrics
        )
        assert math.isclose(float(k.info.run_name.split(",")[0].split("=")[1]), lr, rel_tol=1e-3)


def test_a_cpu_group_holds_at_most_1024_trajectories_unless_told_otherwise(monkeypatch):
    from sweeper.sweep import groups, launch

    assert groups.CPU_MAX_GROUP == 1024
    # the same rule on a grid small enough to compose here
    monkeypatch.setattr(groups, "CPU_MAX_GROUP", 4)
    cpu = _jobs(*[(f"lr={0.001 * (i + 1):.3f}", "epochs=10") for i in range(6)])
    assert sorted(map(len, launch.plan(cpu)[0])) == [2, 4]
    assert [len(g) for g in launch.plan(cpu, max_size=6)[0]] == [6]  # max_group_size: as given
    gpu = _jobs(*[(f"lr={0.001 * (i + 1):.3f}", "epochs=10", "device=gpu") for i in range(6)])
    assert [len(g) for g in launch.plan(gpu)[0]] == [6]  # a GPU group: the memory budget alone


def test_a_groups_runs_tagged_or_dropped_on_a_store_gone_warn_each_and_a_bug_is_raised(caplog):
    """launch._each_run (a retried group's runs retagged, a failed group's runs deleted): a store's failure
    (tracking.UNREACHABLE) is one warning per run, the next run still tried; any other error is a bug, raised."""
    from types import SimpleNamespace

    from mlflow.exceptions import MlflowException

    from sweeper.sweep import launch

    tried = []

    def gone(t):
        tried.append(t.run_id)
        raise MlflowException("API request to http://x failed\nretries exhausted")

    runs = {0: SimpleNamespace(run_id="a"), 1: SimpleNamespace(run_id="b")}
    launch._each_run(runs, gone)
    assert tried == ["a", "b"]
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        "run a: API request to http://x failed",
        "run b: API request to http://x failed",
    ]
    with pytest.raises(AttributeError):
        launch._each_run(runs, lambda t: t.client.delete_run(t.run_id))


def test_a_group_whose_runs_fail_to_open_ahead_is_waited_for_before_the_error_goes_on(monkeypatch):
    """launch.train_showing_runs: whatever the launching thread raises while the group trains (a store's
    error opening its runs, Ctrl-C) waits for the training thread (5 s at most: it stops at its next
    epoch) before it goes on; a group that ends is not waited for twice."""
    import threading
    import time

    from sweeper.sweep import launch

    monkeypatch.setenv("SWEEPER_AHEAD_AFTER_S", "0")
    trained = threading.Event()

    def compute_group(members, tags):
        time.sleep(0.5)
        trained.set()
        return {"group": len(members)}

    def open_runs(*args, **kwargs):
        raise RuntimeError("the store failed")

    monkeypatch.setattr(launch, "compute_group", compute_group)
    monkeypatch.setattr(launch, "open_runs", open_runs)
    members = list(range(launch.AHEAD_ALWAYS + 1))
    with pytest.raises(RuntimeError, match="the store failed"):
        launch.train_showing_runs(members, {}, None, {})
    assert trained.is_set()  # the thread had ended before the error reached the caller
    monkeypatch.setattr(launch, "open_runs", lambda *a, **k: None)
    assert launch.train_showing_runs(members, {}, None, {}) == {"group": len(members)}


def test_a_store_that_fails_creates_no_group_in_bulk_and_a_bug_is_raised(monkeypatch):
    """launch._in_bulk: a store that fails (tracking.failures) is False (open_runs says so once, the jobs create
    their runs); an error that is no store's (a bug) is raised, not taken for one."""
    import sqlite3

    from sweeper import tracking
    from sweeper.sweep import launch

    def fails(uri):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(tracking, "client", fails)
    assert launch._in_bulk({"tracking": {"uri": "sqlite:///x.db"}}) is False
    monkeypatch.setattr(tracking, "client", lambda uri: (_ for _ in ()).throw(TypeError("ours")))
    with pytest.raises(TypeError, match="ours"):
        launch._in_bulk({"tracking": {"uri": "sqlite:///x.db"}})

"""The batched launcher's engines (sweeper.sweep.engines): every GPU of a node under the local engine, and groups
computed on submitit and Ray workers, recorded in the launching process with the local engine's metrics."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import all_runs, cli

FAST = (
    "epochs=300",
    "log_every=10",
    "tracking.log_model=false",
    "tracking.system_metrics=false",
    "dtype=float64",
)
GRID = (
    "lr=0.001,0.002,0.003,0.004",
    "depth=1,2",
    "seed=0,1",
    "hydra.launcher.pack=false",
)  # 16 configurations, 2 groups of 8


def children(store: Path) -> list:
    return [r for r in all_runs(store) if "mlflow.parentRunId" in r.data.tags]


def parents(store: Path) -> list:
    return [r for r in all_runs(store) if "mlflow.parentRunId" not in r.data.tags]


def metrics_by_config(store: Path) -> dict:
    return {r.data.tags["fingerprint"]: r.data.metrics for r in children(store)}


@pytest.mark.slow
def test_two_gpu_groups_compute_on_devices_0_and_1_at_once(tmp_path, store):
    env = {"SWEEPER_FAKE_GPU": "numpy", "SWEEPER_FAKE_GPUS": "2"}
    proc = cli(
        tmp_path,
        "-m",
        "device=gpu",
        "depth=1,2",
        "lr=0.001,0.002,0.003,0.004",
        "hydra.launcher.pack=false",
        *FAST,
        store=store,
        env=env,
    )  # a group a depth (packed, they would be one)
    assert proc.returncode == 0, proc.stderr
    runs = children(store)
    assert len(runs) == 8 and all(r.info.status == "FINISHED" for r in runs)
    by_depth = {}
    for r in runs:
        by_depth.setdefault(r.data.params["depth"], set()).add(
            r.data.tags.get("sweeper.gpu_device")
        )
    assert sorted(by_depth) == ["1", "2"] and all(len(v) == 1 for v in by_depth.values()), by_depth
    assert set().union(*by_depth.values()) == {"0", "1"}, by_depth


def local_reference(tmp_path: Path, template: Path) -> dict:
    from conftest import copy_store

    folder = tmp_path / "local"
    folder.mkdir()
    store = copy_store(template, folder)
    proc = cli(folder, "-m", *GRID, *FAST, store=store)
    assert proc.returncode == 0, proc.stderr
    return metrics_by_config(store)


def assert_same_as_local(store: Path, reference: dict, engine: str) -> None:
    runs = children(store)
    assert len(runs) == 16 and all(r.info.status == "FINISHED" for r in runs)
    (parent,) = parents(store)
    assert parent.info.status == "FINISHED"
    assert {r.data.tags["mlflow.parentRunId"] for r in runs} == {parent.info.run_id}
    assert {r.data.tags.get("sweeper.engine") for r in runs} == {engine}
    pids = {r.data.tags["sweeper.worker_pid"] for r in runs}
    assert str(os.getpid()) not in pids and parent.data.tags["sweeper.pid"] not in pids
    got = metrics_by_config(store)
    assert got.keys() == reference.keys()
    for key, ref in reference.items():
        for name in (m for m in ref if m.startswith(("val_", "test_"))):
            assert got[key][name] == pytest.approx(ref[name], rel=1e-9, abs=1e-12), (key, name)


@pytest.mark.slow
def test_a_grid_on_submitit_local_matches_the_local_engine_and_survives_a_lost_worker(
    tmp_path, store, _template_store
):
    reference = local_reference(tmp_path, _template_store)
    # the first group's worker kills itself once: the group is submitted again
    die = tmp_path / "died"
    proc = cli(
        tmp_path,
        "-m",
        *GRID,
        *FAST,
        "hydra.launcher.engine=submitit_local",
        store=store,
        env={"SWEEPER_TEST_DIE_ONCE": str(die)},
    )
    assert proc.returncode == 0, proc.stderr
    assert die.is_file() and "lost with its worker" in proc.stderr + proc.stdout
    assert_same_as_local(store, reference, "submitit_local")


@pytest.mark.slow
def test_a_grid_on_a_local_ray_cluster_matches_the_local_engine(tmp_path, store, _template_store):
    pytest.importorskip(
        "ray",
        reason="Ray is not installed: pip install 'ray[default]' (4 min here; not in the dev extra)",
    )
    reference = local_reference(tmp_path, _template_store)
    # the engine starts a local cluster for this sweep (ray.init(address="local")), which ends with the command;
    # what it exposes is said (Ray listens on every interface whatever _node_ip_address says)
    proc = cli(
        tmp_path,
        "-m",
        *GRID,
        *FAST,
        "hydra.launcher.engine=ray",
        "+hydra.launcher.ray.init._node_ip_address=127.0.0.1",
        "+hydra.launcher.ray.init.num_cpus=2",
        store=store,
        env={"RAY_USAGE_STATS_ENABLED": "0"},
    )
    assert proc.returncode == 0, proc.stderr
    assert_same_as_local(store, reference, "ray")
    assert (proc.stdout + proc.stderr).count("listens on every interface of this machine") == 1


def test_a_local_ray_cluster_says_what_it_exposes_and_a_joined_one_does_not():
    from sweeper.sweep.engines import ray_exposure

    assert ray_exposure(True, {}) is None  # a cluster the user named: theirs to guard
    guarded = ray_exposure(False, {})
    assert (
        "every interface" in guarded and "token authentication" in guarded and "firewall" in guarded
    )
    open_ = ray_exposure(False, {"RAY_AUTH_MODE": "disabled"})
    assert "RAY_AUTH_MODE=disabled" in open_ and "anyone who reaches this machine" in open_


def test_a_group_computed_here_fails_as_a_whole_in_one_place_and_ctrl_c_goes_on(caplog):
    """engines.safe decides a group's own error wherever a group is computed in the launching process (the main
    thread's group, _Launch.here, had its own handler): an error is said once and its members run alone (no
    results: {}); user code that would have ended the process FAILS each member with why; Ctrl-C reaches the
    caller, whose runs end KILLED with the sweep."""
    import logging
    from types import SimpleNamespace as NS

    from sweeper.models.usercode import UserCodeError
    from sweeper.sweep import engines

    members = [NS(idx=3, plain={"model": None}), NS(idx=5, plain={"model": None})]

    def fails(error):
        def compute(got):
            assert got is members
            raise error

        return compute

    assert engines.safe(lambda got: {3: "a", 5: "b"}, members) == {3: "a", 5: "b"}
    with caplog.at_level(logging.WARNING, logger="sweeper"):
        assert engines.safe(fails(MemoryError("no room\nat all")), members) == {}
    assert "group of 2 failed as a whole (MemoryError: no room); retrying" in caplog.text
    exited = UserCodeError("SystemExit", "sys.exit(3) called (net.py:4 in fit)", None, "tb")
    tags = {3: {"launcher": "batched"}, 5: {"launcher": "batched"}}
    failed = engines.safe(fails(exited), members, tags)
    assert sorted(failed) == [3, 5]
    assert (
        failed[3].outcome.reason == "sys.exit(3) called (net.py:4 in fit)"
        and failed[5].tags == tags[5]
    )
    with pytest.raises(KeyboardInterrupt):
        engines.safe(fails(KeyboardInterrupt()), members)

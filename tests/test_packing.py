"""The planner's packing (sweeper.sweep.packing): groups of one shape that differ only in depth, width and activation
train as one packed group where the cost model says it ends sooner; the decision is said and recorded, and a sweep
with packing off gives the same metrics."""

import math
import re

import pytest

from conftest import all_runs, cli, make_cfg
from sweeper.base import state
from sweeper.base.tags import PRUNED_AT
from sweeper.sweep import packing


def _jobs(*grid):
    from sweeper.contract.compose import plain as plain_config
    from sweeper.sweep import launch

    return [launch.Job(i, list(o), None, plain_config(make_cfg(*o))) for i, o in enumerate(grid)]


class _Fixed:
    """A probe's fixed answer (no timing): an epoch of a group costs 100 µs to start (its calls) plus 1 µs a member
    and hidden unit, times ``packed`` when the group holds several shapes (a packed group's passes slower than its
    shapes' apart: its values outgrow the caches); a group's start 3 ms and 10 µs a member and hidden unit."""

    def __init__(self, packed=1.0):
        self.packed, self.asked = packed, []

    def start(self, blocks):
        return START + 1e-5 * sum(K * w * L for L, w, _, K in blocks)

    def epoch(self, blocks):
        self.asked.append(list(blocks))
        units = sum(K * w * L for L, w, _, K in blocks)
        return 1e-4 + 1e-6 * units * (self.packed if len(blocks) > 1 else 1.0)

    def measure(self, *parts):
        pass

    def save(self):
        pass


START = 3e-3  # _Fixed's start of a group, beside 10 µs a member and hidden unit


@pytest.fixture
def fixed(monkeypatch):
    monkeypatch.setattr(packing.Costs, "of", classmethod(lambda cls, *a: _Fixed()))


GRID = [
    (f"width={w}", f"depth={d}", f"lr={lr}", "epochs=200", "data=diabetes")
    for w in (4, 16)
    for d in (1, 2)
    for lr in (0.01, 0.02)
]


def test_groups_of_one_shape_that_differ_in_depth_width_and_activation_pack_into_one(fixed):
    from sweeper.sweep import launch

    grid = GRID + [
        ("width=8", "depth=1", "activation=relu", f"lr={lr}", "epochs=200", "data=diabetes")
        for lr in (0.01, 0.02)
    ]
    groups, alone = launch.plan(_jobs(*grid))
    assert not alone and len(groups) == 1 and len(groups[0]) == 10
    (said,) = {j.pack for j in groups[0]}
    ratio = re.fullmatch(r"5 shapes \(estimated (\d+\.\d\d)x faster than 5 groups apart\)", said)
    assert ratio and float(ratio[1]) > 1
    assert packing.summary(groups) == " (5 groups of one shape packed into 1: hydra.launcher.pack)"
    groups, _ = launch.plan(_jobs(*grid), pack=False)
    assert len(groups) == 5 and {j.pack for g in groups for j in g} == {
        "off (hydra.launcher.pack=false)"
    }
    assert packing.summary(groups) == ""


def test_shapes_whose_epochs_differ_far_stay_apart_and_say_why(fixed):
    """A packed group trains every member to its longest epochs: 200 epochs beside 20,000 would run 20,000."""
    from sweeper.sweep import launch

    grid = [
        (
            f"width={w}",
            f"lr={lr}",
            f"epochs={200 if w == 4 else 20000}",
            "log_every=10",
            "data=diabetes",
        )
        for w in (4, 16, 32)
        for lr in (0.01, 0.02)
    ]
    groups, alone = launch.plan(_jobs(*grid))
    shapes = sorted(sorted({j.plain["width"] for j in g}) for g in groups)
    assert shapes == [[4], [16, 32]]
    short = next(g for g in groups if g[0].plain["width"] == 4)
    assert short[0].pack.startswith("apart (estimated sooner done apart")
    assert packing.summary(groups) == " (2 groups of one shape packed into 1: hydra.launcher.pack)"


def test_only_groups_that_share_everything_else_pack_and_only_sweepers_mlp_on_dense_data(fixed):
    from sweeper.sweep import launch

    grid = [
        (f"width={w}", f"optimizer={o}", "lr=0.01", "epochs=100", "data=diabetes")
        for w in (4, 16)
        for o in ("gd", "adam")
    ]
    groups, _ = launch.plan(_jobs(*grid))
    assert sorted(sorted(j.plain["width"] for j in g) for g in groups) == [
        [4, 16],
        [4, 16],
    ]  # by optimizer
    assert all(len({j.plain["optimizer"] for j in g}) == 1 for g in groups)


def test_a_sweep_over_devices_groups_each_device_as_the_first_so_their_speedups_pair(monkeypatch):
    """Each device has its own probe, and the GPU's alone would keep its shapes apart (its packed epoch twice as dear)
    where the CPU's packs them; a speedup pairs only runs of groups of one size (sweeper.insight.speedup), so the
    GPU's configurations are grouped as the CPU's were, and say so. Before, a mixed sweep on a loaded machine could
    group the two devices differently and log no speedup (test_gpu, seen in a whole-suite run)."""
    from sweeper.sweep import launch

    probes = {"cpu": _Fixed(1.0), "gpu": _Fixed(2.0)}
    monkeypatch.setattr(packing.Costs, "of", classmethod(lambda cls, device, *a: probes[device]))
    (base,) = _jobs(("epochs=2000", "data=diabetes"))
    grid = [
        {"width": w, "depth": d, "lr": lr, "device": device}
        for device in ("cpu", "gpu")
        for w in (16, 32)
        for d in (1, 2)
        for lr in (0.01, 0.02)
    ]
    groups, _ = launch.plan(
        [launch.Job(i, [], None, {**base.plain, **g}) for i, g in enumerate(grid)]
    )
    by_device = {
        device: sorted(len(g) for g in groups if g[0].plain["device"] == device)
        for device in ("cpu", "gpu")
    }
    assert by_device == {"cpu": [8], "gpu": [8]}
    assert {j.pack for g in groups for j in g if j.plain["device"] == "gpu"} == {
        "as on cpu (a speedup pairs groups of one size)"
    }
    assert probes["gpu"].asked == []  # decided once, for the first device
    # on its own, the GPU's probe keeps the shapes apart
    alone, _ = launch.plan(
        [launch.Job(i, [], None, {**base.plain, **g}) for i, g in enumerate(grid) if i >= 8]
    )
    assert sorted(len(g) for g in alone) == [2, 2, 2, 2]


def test_the_cost_model_asks_the_probe_for_the_packed_group_and_counts_the_longest_epochs():
    """A group's seconds: its longest epochs times the epoch the probe measured for *all* its shapes together (each
    configuration its folds' members), plus a start; apart, each shape's own."""
    from sweeper.sweep.groups import trajectories

    jobs = _jobs(*GRID)
    sets = [
        trajectories([j for j in jobs if (j.plain["width"], j.plain["depth"]) == s])
        for s in ((4, 1), (4, 2), (16, 1), (16, 2))
    ]
    probe = _Fixed()
    together = packing.group_s(probe, sets, (309, 10, 1, 3))
    assert probe.asked == [
        [(1, 4, "tanh", 6), (2, 4, "tanh", 6), (1, 16, "tanh", 6), (2, 16, "tanh", 6)]
    ]
    assert together == pytest.approx(
        200 * (1e-4 + 1e-6 * 6 * (4 + 8 + 16 + 32)) + START + 1e-5 * 6 * (4 + 8 + 16 + 32),
        rel=1e-12,
    )
    apart = sum(packing.group_s(probe, [s], (309, 10, 1, 3)) for s in sets)
    assert apart - together == pytest.approx(200 * 3 * 1e-4 + 3 * START, rel=1e-9)
    longer = sets
    for t in longer[0]:
        for j in t:
            j.plain = {
                **j.plain,
                "epochs": 20000,
            }  # one shape's epochs 100x: the others would run them too
    assert packing.group_s(probe, longer, (309, 10, 1, 1)) > sum(
        packing.group_s(probe, [s], (309, 10, 1, 1)) for s in longer
    )


@pytest.mark.parametrize("packed, expect", [(1.0, 1), (1.2, 1), (2.0, 4)])
def test_the_planner_packs_only_where_the_probe_measured_the_packed_epoch_faster_than_the_groups_apart(
    monkeypatch, packed, expect
):
    """With the probe's answer fixed: a packed epoch as dear as its shapes' apart (or 20 % dearer: the starts and
    calls it saves still pay) packs; twice as dear, what packing saves is lost: each shape apart, and said."""
    from sweeper.sweep import launch

    probe = _Fixed(packed)
    monkeypatch.setattr(packing.Costs, "of", classmethod(lambda cls, *a: probe))
    # one composition, its plain config varied (fast)
    (base,) = _jobs(("epochs=2000", "data=diabetes"))
    grid = [
        {"width": w, "depth": d, "lr": lr}
        for w in (16, 32)
        for d in (1, 2)
        for lr in (0.01, 0.02, 0.05, 0.1)
    ]
    groups, _ = launch.plan(
        [launch.Job(i, [], None, {**base.plain, **g}) for i, g in enumerate(grid)]
    )
    assert len(groups) == expect
    # independently of group_s
    units = 4 * (16 + 32 + 32 + 64)
    apart = 2000 * (4 * 1e-4 + 1e-6 * units) + 4 * START + 1e-5 * units
    together = 2000 * (1e-4 + 1e-6 * units * packed) + START + 1e-5 * units
    assert (expect == 1) == (together < packing.GAIN * apart)
    said = {j.pack for g in groups for j in g}
    if expect == 1:
        assert said == {f"4 shapes (estimated {apart / together:.2f}x faster than 4 groups apart)"}
        assert (
            packing.summary(groups) == " (4 groups of one shape packed into 1: hydra.launcher.pack)"
        )
    else:
        assert len(said) == 1 and said.pop().startswith("apart (estimated sooner done apart")
        assert packing.summary(groups) == ""


def test_the_probe_times_the_groups_own_epoch_once_a_machine_and_the_cache_folder_keeps_it(
    monkeypatch, tmp_path
):
    from sweeper import data

    monkeypatch.setenv("SWEEPER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(state.process(), "costs", {})
    ds = data.load_plain(make_cfg("data=diabetes").data)
    costs = packing.Costs.of("cpu", "float64", ds)
    assert costs is packing.Costs.of("cpu", "float64", ds)
    blocks = [(1, 4, "tanh", 2), (2, 8, "relu", 3)]
    costs.measure(blocks[:1], blocks[1:])  # the two groups and the packed one, side by side
    assert len(costs.epochs) == len(costs.starts) == 3
    both, one = costs.epoch(blocks), costs.epoch(blocks[:1])
    assert both > 0 and one > 0 and costs.epoch(blocks) == both and len(costs.epochs) == 3
    # a start: its calls built (parameters packed, copied, buffers made) and a first epoch's excess, each > 0
    assert costs.start(blocks) > 0 and costs.start(blocks[:1]) > 0 and len(costs.starts) == 3
    costs.save()
    # another process of this machine: the measurements, not a new probe
    monkeypatch.setattr(state.process(), "costs", {})
    again = packing.Costs.of("cpu", "float64", ds)
    assert again is not costs and again.epochs == costs.epochs and again.starts == costs.starts
    monkeypatch.setattr(packing.Costs, "_time", lambda *a, **k: pytest.fail("measured again"))
    again.measure(blocks[:1], blocks[1:])
    assert again.epoch(blocks) == both and again.start(blocks) == costs.start(blocks)


def test_the_probes_start_is_the_groups_calls_built_and_its_first_epochs_excess(monkeypatch):
    """With a clock the fake calls advance: building a group's calls costs 2 ms, its first epoch 10 ms and every
    later one 1 ms, so its epoch is 1 ms and its start 2 + (10 - 1) = 11 ms; another group's are its own."""
    now = [0.0]
    costs = packing.Costs(packing.resolve("cpu"), "float64", d=3, n=100)
    costs.data = None

    def calls(blocks):
        first, later = (0.010, 0.001) if blocks[0][1] == 4 else (0.030, 0.005)
        done = []

        def call():
            now[0] += later if done else first
            done.append(1)

        now[0] += 0.002 * len(blocks)
        return [call]

    monkeypatch.setattr(costs, "_calls", calls)
    monkeypatch.setattr(costs, "_clock", lambda: lambda: now[0])
    a, b = [(1, 4, "tanh", 2)], [(1, 8, "tanh", 2)]
    costs.measure(a)
    assert costs.epoch(a) == pytest.approx(0.001) and costs.start(a) == pytest.approx(0.011)
    costs.measure(a, b)  # b and a + b are new: the three timed side by side
    assert costs.epoch(b) == pytest.approx(0.005) and costs.start(b) == pytest.approx(0.027)
    assert costs.start(a + b) == pytest.approx(0.004 + 0.009)  # a's calls first in the packed one


def test_the_probes_epoch_is_the_packed_groups_own_computation():
    """What the probe times: one first-layer product over every shape's rows, each shape's deeper products."""
    from sweeper import data

    import numpy as np

    costs = packing.Costs.of("cpu", "float64", data.load_plain(make_cfg("data=diabetes").data))
    calls = costs._calls([(1, 4, "tanh", 2), (2, 8, "relu", 3)])
    shapes = [
        (c.args[0].shape, c.args[1].shape) for c in calls if getattr(c, "func", None) is np.matmul
    ]
    n = costs.n
    assert ((2 * 4 + 3 * 8, 11), (11, n)) in shapes  # the packed first layer: 32 rows, one product
    assert ((3, 8, 8), (3, 8, n)) in shapes  # the 2x8 shape's deeper layer, its own batched product


@pytest.mark.slow
def test_a_packed_sweep_records_its_decision_and_equals_the_same_sweep_with_packing_off(
    tmp_path, store
):
    """Each run says its group packed (tag batch_packed), the plan line counts the groups, and every metric equals
    the sweep's with hydra.launcher.pack=false (one shape a group) to 1e-9."""
    args = (
        "-m",
        "data=diabetes",
        "width=4,16",
        "depth=1,2",
        "activation=tanh,relu",
        "lr=0.01,0.05",
        "epochs=150,300",
        "patience=0,20",
        "log_every=10",
    )
    # packed, its one group in chunks on two worker processes; apart, one group a shape after another here
    on, off, store, other = _twice(
        tmp_path,
        store,
        (*args, "hydra.launcher.cpu_workers=2"),
        (*args, "hydra.launcher.pack=false", "hydra.launcher.cpu_workers=1"),
    )
    assert "(8 groups of one shape packed into 1: hydra.launcher.pack)" in on.stdout + on.stderr
    assert "packed into" not in off.stdout + off.stderr
    runs = {
        db: {
            r.data.tags["fingerprint"]: r
            for r in all_runs(db)
            if "sweeper.batch_group" in r.data.tags
        }
        for db in (store, other)
    }
    assert len(runs[store]) == len(runs[other]) == 64
    assert {r.data.tags["sweeper.batch_worker"] for r in runs[store].values()} == {"cpu0", "cpu1"}
    # one group, two chunks
    assert len({r.data.tags["sweeper.batch_group"] for r in runs[store].values()}) == 2
    assert {r.data.tags["batch_packed"] for r in runs[store].values()} == {
        next(iter(runs[store].values())).data.tags["batch_packed"]
    }
    assert (
        next(iter(runs[store].values())).data.tags["batch_packed"].startswith("8 shapes (estimated")
    )
    assert {r.data.tags["batch_packed"] for r in runs[other].values()} == {
        "off (hydra.launcher.pack=false)"
    }
    _same_metrics(runs[other], runs[store])


def _packing_pays(folder, args):
    """A cache folder holding the probe's measurements that a sweep of ``args`` (its first plan) asks for, each packed
    epoch as dear as its dearest shape's and every group's start 2 ms: packing then pays in the sweep whatever this (shared, noisy) machine would
    measure. Planned here, with the probe's answer fixed."""
    import itertools

    from sweeper.sweep import launch

    def timed(self, groups):  # (epoch, start) of each group: a start as dear packed as apart
        return [(1e-3 + max(1e-6 * K * w * L for L, w, _, K in blocks), 2e-3) for blocks in groups]

    lists = [
        [f"{k}={v}" for v in vs.split(",")]
        for k, vs in (a.split("=", 1) for a in args if "=" in a)
        if not k.startswith("hydra.")
    ]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SWEEPER_CACHE_DIR", str(folder))
        mp.setattr(state.process(), "costs", {})
        mp.setattr(packing.Costs, "_time", timed)
        # the packing step saves the measurements asked
        launch.plan(_jobs(*itertools.product(*lists)))
    assert (folder / "packing-costs.json").exists()
    return {"SWEEPER_CACHE_DIR": str(folder)}


def _twice(tmp_path, store, first, second):
    """The sweep ``first`` into ``store``, ``second`` into a copy of it made before; both must succeed."""
    import shutil

    other = store.parent.parent / "second_store" / "mlflow.db"
    shutil.copytree(store.parent, other.parent)
    procs, env = [], _packing_pays(tmp_path / "cache", first)
    for folder, args, db in (("first", first, store), ("second", second, other)):
        (tmp_path / folder).mkdir()
        procs.append(cli(tmp_path / folder, *args, store=db, env=env))
        assert procs[-1].returncode == 0, procs[-1].stderr[-3000:]
    return procs[0], procs[1], store, other


def _same_metrics(runs, others, rtol=1e-9):
    assert set(runs) == set(others)
    for fp, a in runs.items():
        b = others[fp]
        assert a.info.status == b.info.status and a.data.tags.get(PRUNED_AT) == b.data.tags.get(
            PRUNED_AT
        )
        for k, v in a.data.metrics.items():
            if k.startswith(("val_", "test_", "best_epoch", "epochs_run")):
                assert math.isclose(b.data.metrics[k], v, rel_tol=rtol, abs_tol=1e-12), (
                    a.data.tags["overrides"],
                    k,
                )


@pytest.mark.slow
def test_halving_and_folds_work_on_packed_groups_as_on_groups_of_one_shape(tmp_path, store):
    """A rung's survivors leave a packed group (regrouped, packed again) and a configuration's folds are its members:
    pruned where the sweep with packing off prunes, with the same fold means."""
    args = (
        "-m",
        "data=diabetes",
        "data.folds=3",
        "width=4,16",
        "depth=1,2",
        "lr=0.005,0.02,0.08",
        "epochs=180",
        "log_every=10",
        "hydra.launcher.halving.eta=3",
        "hydra.launcher.halving.min_epochs=20",
        "hydra.launcher.cpu_workers=1",
        "tracking.log_model=false",
        "baselines=none",
    )
    on, off, store, other = _twice(tmp_path, store, args, (*args, "hydra.launcher.pack=false"))
    assert "(4 groups of one shape packed into 1: hydra.launcher.pack)" in on.stdout + on.stderr
    runs = {
        db: {
            r.data.tags["fingerprint"]: r
            for r in all_runs(db)
            if "sweeper.batch_group" in r.data.tags
        }
        for db in (store, other)
    }
    assert (
        len(runs[store]) == 12 and sum(PRUNED_AT in r.data.tags for r in runs[store].values()) >= 8
    )
    assert all(r.data.tags["folds"] == "3" for r in runs[store].values())
    _same_metrics(runs[other], runs[store])

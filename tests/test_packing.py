"""The planner's packing (sweeper.sweep.packing): groups of one shape that differ only in depth, width and activation
train as one packed group where the cost model says it ends sooner; the decision is said and recorded, and a sweep
with packing off gives the same metrics."""
import math
import re

import pytest

from conftest import all_runs, cli, make_cfg
from sweeper.base.names import PRUNED_AT
from sweeper.sweep import packing


def _jobs(*grid):
    from sweeper.sweep import launch, plan as sweep

    return [launch.Job(i, list(o), None, sweep._plain(make_cfg(*o))) for i, o in enumerate(grid)]


class _Fixed:
    """Costs of a machine where a product costs 50 µs to start plus 10 ns a row (so one wide product beats several
    narrow ones), and a call, an element of a pass (whatever the array's size), an activation and a FLOP cost what
    they cost here (roughly)."""

    call_s = 1e-6

    def gemm(self, rows):
        return 5e-5 + 1e-8 * rows if rows else 0.0

    def pass_s(self, elements):
        return 5e-10

    def activation(self, name):
        return 6.0

    def flop_s(self, rows):
        return 3e-11

    def save(self):
        pass


@pytest.fixture
def fixed(monkeypatch):
    monkeypatch.setattr(packing.Costs, "of", classmethod(lambda cls, *a: _Fixed()))


GRID = [(f"width={w}", f"depth={d}", f"lr={lr}", "epochs=200", "data=diabetes")
        for w in (4, 16) for d in (1, 2) for lr in (0.01, 0.02)]


def test_groups_of_one_shape_that_differ_in_depth_width_and_activation_pack_into_one(fixed):
    from sweeper.sweep import launch

    grid = GRID + [("width=8", "depth=1", "activation=relu", f"lr={lr}", "epochs=200", "data=diabetes") for lr in (0.01, 0.02)]
    groups, alone = launch.plan(_jobs(*grid))
    assert not alone and len(groups) == 1 and len(groups[0]) == 10
    (said,) = {j.pack for j in groups[0]}
    ratio = re.fullmatch(r"5 shapes \(estimated (\d+\.\d\d)x faster than 5 groups apart\)", said)
    assert ratio and float(ratio[1]) > 1
    assert packing.summary(groups) == " (5 groups of one shape packed into 1: hydra.launcher.pack)"
    groups, _ = launch.plan(_jobs(*grid), pack=False)
    assert len(groups) == 5 and {j.pack for g in groups for j in g} == {"off (hydra.launcher.pack=false)"}
    assert packing.summary(groups) == ""


def test_shapes_whose_epochs_differ_far_stay_apart_and_say_why(fixed):
    """A packed group trains every member to its longest epochs: 200 epochs beside 20,000 would run 20,000."""
    from sweeper.sweep import launch

    grid = [(f"width={w}", f"lr={lr}", f"epochs={200 if w == 4 else 20000}", "log_every=10", "data=diabetes")
            for w in (4, 16, 32) for lr in (0.01, 0.02)]
    groups, alone = launch.plan(_jobs(*grid))
    shapes = sorted(sorted({j.plain["width"] for j in g}) for g in groups)
    assert shapes == [[4], [16, 32]]
    short = next(g for g in groups if g[0].plain["width"] == 4)
    assert short[0].pack.startswith("apart (estimated sooner done apart")
    assert packing.summary(groups) == " (2 groups of one shape packed into 1: hydra.launcher.pack)"


def test_only_groups_that_share_everything_else_pack_and_only_sweepers_mlp_on_dense_data(fixed):
    from sweeper.sweep import launch

    grid = [(f"width={w}", f"optimizer={o}", "lr=0.01", "epochs=100", "data=diabetes") for w in (4, 16) for o in ("gd", "adam")]
    groups, _ = launch.plan(_jobs(*grid))
    assert sorted(sorted(j.plain["width"] for j in g) for g in groups) == [[4, 16], [4, 16]]  # by optimizer
    assert all(len({j.plain["optimizer"] for j in g}) == 1 for g in groups)


def test_the_cost_model_counts_the_wider_product_the_calls_and_the_longest_epochs():
    from sweeper.sweep.groups import trajectories

    jobs = _jobs(*GRID)
    sets = [trajectories([j for j in jobs if (j.plain["width"], j.plain["depth"]) == s])
            for s in ((4, 1), (4, 2), (16, 1), (16, 2))]
    shape = (309, 10, 1, 1)
    apart = sum(packing.group_s(_Fixed(), [s], shape) for s in sets)
    together = packing.group_s(_Fixed(), sets, shape)
    # apart, 4 groups of 200 epochs: each 2 products (a start each) and the calls made once a group, and its start;
    # together one group: what differs is 3 groups' products' starts, once-a-group calls and starts
    assert apart - together == pytest.approx(
        200 * (3 * 2 * 5e-5 + 3 * packing.SHARED_CALLS * 1e-6) + 3 * packing.GROUP_S, rel=1e-9)
    longer = sets
    for t in longer[0]:
        for j in t:
            j.plain = {**j.plain, "epochs": 20000}  # one shape's epochs 100x: the others would run them too
    assert packing.group_s(_Fixed(), longer, shape) > sum(packing.group_s(_Fixed(), [s], shape) for s in longer)


def test_the_probe_measures_once_a_machine_and_the_cache_folder_keeps_it(monkeypatch, tmp_path):
    monkeypatch.setenv("SWEEPER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(packing, "_CACHE", {})
    costs = packing.Costs.of("cpu", "float64", 10, 309)
    assert costs is packing.Costs.of("cpu", "float64", 10, 309)
    one = costs.gemm(64)
    assert costs.call_s > 0 and costs.pass_s(1000) >= 0 and costs.flop_s(64) > 0 and costs.activation("tanh") > 0
    assert costs.gemm(64) == one and costs.gemm(0) == 0.0 and costs.gemm(8192) == pytest.approx(costs.gemm(4096) * 2)
    costs.save()
    monkeypatch.setattr(packing, "_CACHE", {})  # another process of this machine: the measurements, not a new probe
    again = packing.Costs.of("cpu", "float64", 10, 309)
    assert again is not costs and again.gemms == costs.gemms and again.call_s == costs.call_s
    monkeypatch.setattr(packing.Costs, "_time", lambda *a, **k: pytest.fail("measured again"))
    assert again.gemm(64) == one


@pytest.mark.slow
def test_a_packed_sweep_records_its_decision_and_equals_the_same_sweep_with_packing_off(tmp_path, store):
    """Each run says its group packed (tag batch_packed), the plan line counts the groups, and every metric equals
    the sweep's with hydra.launcher.pack=false (one shape a group) to 1e-9."""
    args = ("-m", "data=diabetes", "width=4,16", "depth=1,2", "activation=tanh,relu", "lr=0.01,0.05", "epochs=150,300",
            "patience=0,20", "log_every=10")
    # packed, its one group in chunks on two worker processes; apart, one group a shape after another here
    on, off, store, other = _twice(tmp_path, store, (*args, "hydra.launcher.cpu_workers=2"),
                                   (*args, "hydra.launcher.pack=false", "hydra.launcher.cpu_workers=1"))
    assert "(8 groups of one shape packed into 1: hydra.launcher.pack)" in on.stdout + on.stderr
    assert "packed into" not in off.stdout + off.stderr
    runs = {db: {r.data.tags["fingerprint"]: r for r in all_runs(db) if "sweeper.batch_group" in r.data.tags} for db in (store, other)}
    assert len(runs[store]) == len(runs[other]) == 64
    assert {r.data.tags["sweeper.batch_worker"] for r in runs[store].values()} == {"cpu0", "cpu1"}
    assert len({r.data.tags["sweeper.batch_group"] for r in runs[store].values()}) == 2  # one group, two chunks
    assert {r.data.tags["batch_packed"] for r in runs[store].values()} == {
        next(iter(runs[store].values())).data.tags["batch_packed"]}
    assert next(iter(runs[store].values())).data.tags["batch_packed"].startswith("8 shapes (estimated")
    assert {r.data.tags["batch_packed"] for r in runs[other].values()} == {"off (hydra.launcher.pack=false)"}
    _same_metrics(runs[other], runs[store])


def _calls_dear(folder, name):
    """A cache folder whose packing measurements say a call costs 1 ms on ``name``'s shape here: packing, which saves
    calls, then pays whatever this (shared, noisy) machine measures for the rest."""
    import json

    from sweeper import data
    from sweeper.base.backend import resolve

    ds = data.load_plain(make_cfg(f"data={name}").data)
    key = packing.Costs(resolve("cpu"), "float64", ds.n_features, ds.X_train.shape[0])._key()
    folder.mkdir()
    (folder / "packing-costs.json").write_text(json.dumps({key: {"call_s": 1e-3, "gemms": {}, "passes": {}, "acts": {}}}))
    return {"SWEEPER_CACHE_DIR": str(folder)}


def _twice(tmp_path, store, first, second):
    """The sweep ``first`` into ``store``, ``second`` into a copy of it made before; both must succeed."""
    import shutil

    other = store.parent.parent / "second_store" / "mlflow.db"
    shutil.copytree(store.parent, other.parent)
    procs, env = [], _calls_dear(tmp_path / "cache", "diabetes")
    for folder, args, db in (("first", first, store), ("second", second, other)):
        (tmp_path / folder).mkdir()
        procs.append(cli(tmp_path / folder, *args, store=db, env=env))
        assert procs[-1].returncode == 0, procs[-1].stderr[-3000:]
    return procs[0], procs[1], store, other


def _same_metrics(runs, others, rtol=1e-9):
    assert set(runs) == set(others)
    for fp, a in runs.items():
        b = others[fp]
        assert a.info.status == b.info.status and a.data.tags.get(PRUNED_AT) == b.data.tags.get(PRUNED_AT)
        for k, v in a.data.metrics.items():
            if k.startswith(("val_", "test_", "best_epoch", "epochs_run")):
                assert math.isclose(b.data.metrics[k], v, rel_tol=rtol, abs_tol=1e-12), (a.data.tags["overrides"], k)


@pytest.mark.slow
def test_halving_and_folds_work_on_packed_groups_as_on_groups_of_one_shape(tmp_path, store):
    """A rung's survivors leave a packed group (regrouped, packed again) and a configuration's folds are its members:
    pruned where the sweep with packing off prunes, with the same fold means."""
    args = ("-m", "data=diabetes", "data.folds=3", "width=4,16", "depth=1,2", "lr=0.005,0.02,0.08", "epochs=180",
            "log_every=10", "hydra.launcher.halving.eta=3", "hydra.launcher.halving.min_epochs=20",
            "hydra.launcher.cpu_workers=1", "tracking.log_model=false", "baselines=none")
    on, off, store, other = _twice(tmp_path, store, args, (*args, "hydra.launcher.pack=false"))
    assert "(4 groups of one shape packed into 1: hydra.launcher.pack)" in on.stdout + on.stderr
    runs = {db: {r.data.tags["fingerprint"]: r for r in all_runs(db) if "sweeper.batch_group" in r.data.tags} for db in (store, other)}
    assert len(runs[store]) == 12 and sum(PRUNED_AT in r.data.tags for r in runs[store].values()) >= 8
    assert all(r.data.tags["folds"] == "3" for r in runs[store].values())
    _same_metrics(runs[other], runs[store])

"""Issue 39: every finding made and checked per slice; a printed command trains something, within a per-round budget;
failed seeds count; baselines on the same rows. Constructed run records (and one constructed store)."""

import itertools
import math
import shlex

import numpy as np
import pytest

from sweeper.insight.advice.advisor import advise
from sweeper.insight.advice.evidence import Sweep

BASE = {
    "lr": "0.01",
    "epochs": "200",
    "depth": "1",
    "width": "16",
    "seed": "0",
    "patience": "0",
    "log_every": "10",
    "optimizer": "gd",
    "data.name": "diabetes",
    "device": "cpu",
}


def rec(val=None, status="FINISHED", reason=None, metrics=None, reused=False, **params):
    p = {**BASE, **{k: str(v) for k, v in params.items()}}
    name = ",".join(f"{k}={v}" for k, v in params.items())
    m = dict(metrics or {})
    if val is not None:
        m.setdefault("val_accuracy" if "val_log_loss" in m else "val_mse", val)
    m.setdefault("best_epoch", 190.0)
    m.setdefault("epochs_run", float(p["epochs"]))
    return {
        "run": name,
        "run_id": f"id-{name}",
        "status": status,
        "reason": reason,
        "params": p,
        "metrics": m,
        "reused": reused,
    }


def ranked(records, key="val_mse", lower=True):
    ok = [r for r in records if r["status"] == "FINISHED" and key in r["metrics"]]
    return sorted(ok, key=lambda r: r["metrics"][key] * (1 if lower else -1)) + [
        r for r in records if r not in ok
    ]


def grid_points(command: str, keys: tuple[str, ...]) -> set[tuple]:
    """The configurations (over ``keys``) that one printed command trains, its resume=true reuses included."""
    args = dict(a.split("=", 1) for a in shlex.split(command)[3:] if "=" in a)
    return set(itertools.product(*(args.get(k, BASE[k]).split(",") for k in keys)))


def test_a_divergence_in_one_slice_leaves_its_lr_out_there_only():
    runs = []
    for opt, width, lr in itertools.product(("gd", "adam"), ("16", "64"), ("0.01", "0.1", "0.3")):
        if (opt, width, lr) == ("gd", "64", "0.3"):
            runs.append(
                rec(
                    status="FAILED",
                    reason="diverged at epoch 12",
                    optimizer=opt,
                    width=width,
                    lr=lr,
                )
            )
        else:  # adam at lr=0.3 is the best of the grid, width=64 its runner-up
            runs.append(
                rec(
                    3000 - 1000 * float(lr) * (opt == "adam") - 10 * (width == "16"),
                    optimizer=opt,
                    width=width,
                    lr=lr,
                )
            )
    a = advise(ranked(runs), ["optimizer=gd,adam", "width=16,64", "lr=0.01,0.1,0.3", "epochs=200"])
    (f,) = [f for f in a.findings if f.kind == "divergence"]
    assert f.drop == {} and f.drop_where == [({"optimizer": "gd", "width": "64"}, ["0.3"])]
    assert "lr=0.3 at optimizer=gd,width=64 only" in f.step
    assert len(a.commands) > 1  # the grid cut where the value is left out
    points = set().union(*(grid_points(c, ("optimizer", "width", "lr")) for c in a.commands))
    assert ("gd", "64", "0.3") not in points
    assert {
        ("adam", "16", "0.3"),
        ("adam", "64", "0.3"),
        ("gd", "16", "0.3"),
    } <= points  # chosen, runner-up, gd@16
    chosen = a.findings and Sweep(ranked(runs)).ranked()[0]
    assert dict(chosen)["lr"] == "0.3" and dict(chosen)["optimizer"] == "adam"
    # the grids are disjoint: no configuration is trained twice
    assert sum(len(grid_points(c, ("optimizer", "width", "lr"))) for c in a.commands) == len(points)


def test_a_divergence_everywhere_it_ran_is_left_out_of_the_whole_grid_but_never_the_chosen_lr():
    runs = [rec(3000 - 100 * i, lr=lr) for i, lr in enumerate(("0.001", "0.01"))]
    runs.append(rec(status="FAILED", reason="diverged at epoch 3", lr="0.3"))
    a = advise(ranked(runs), ["lr=0.001,0.01,0.3"])
    (f,) = [f for f in a.findings if f.kind == "divergence"]
    assert (
        f.drop == {"lr": ["0.3"]}
        and not f.drop_where
        and "0.3" not in a.command.split("lr=")[1].split()[0]
    )


def _seeded(effects, noisy):
    """width=16,64 × optimizer, four seeds: ``effects[opt]`` the width=64 shift, ``noisy[opt]`` its seed std."""
    rng = np.random.default_rng(0)
    runs = []
    for opt in effects:
        for width in ("16", "64"):
            z = rng.standard_normal(4)
            z = (z - z.mean()) / z.std(ddof=1)
            for seed in range(4):
                v = 33.1 + effects[opt] * (width == "64") + noisy[opt] * z[seed]
                runs.append(rec(v, optimizer=opt, width=width, seed=seed))
    return ranked(runs)


def test_a_key_that_matters_in_one_slice_is_not_a_key_that_did_not_matter():
    # the case: at gd width moves the score by 8 with a seed std of ~2; elsewhere std 17 and no effect.
    runs = _seeded(
        {"gd": 8.1, "adam": 0.0, "momentum": 0.0}, {"gd": 2.0, "adam": 17.0, "momentum": 17.0}
    )
    a = advise(runs, ["optimizer=gd,adam,momentum", "width=16,64", "seed=0,1,2,3"])
    assert not any(f.kind == "no_effect" and f.tag == "width" for f in a.findings)
    from sweeper.insight.advice.noise import pooled

    s = Sweep(runs)
    inflated = pooled(list(s.scores.values()))
    # pooled over the grid the noise is inflated: with it, gd's slice would read as flat
    assert inflated[0] > 10
    assert s.same(33.1, 41.2, 4, 4, among=2, tests=3, noise=inflated)


def test_a_key_that_matters_in_two_of_three_slices_is_not_did_not_matter():
    runs = _seeded(
        {"gd": 8.1, "adam": 9.0, "momentum": 0.0}, {"gd": 2.0, "adam": 2.0, "momentum": 0.2}
    )
    a = advise(runs, ["optimizer=gd,adam,momentum", "width=16,64", "seed=0,1,2,3"])
    flat = [f for f in a.findings if f.kind == "no_effect" and f.tag.startswith("width")]
    assert all(f.tag != "width" for f in flat)  # at most "width matters in some slices only"
    assert [f.tag for f in flat] == ["width@optimizer=momentum"]
    assert (
        flat[0].title == "width matters in some slices only"
        and "sweep width only where optimizer≠momentum" == flat[0].step
    )
    # the interval it passed, said
    assert "90% interval of its largest difference" in flat[0].evidence[-1]


def test_a_key_is_not_did_not_matter_beside_another_finding_about_it():
    # epochs: the same score at 200 and 400 (no effect) but the chosen run overfits: one subject, one finding
    runs = ranked([rec(3000, epochs=200), rec(3000.5, epochs=400)])
    for r in runs:
        r["run_id"] = r["run"]
    down_up = [(e * 10, 1.0 - 0.002 * e if e < 20 else 0.96 + 0.004 * (e - 20)) for e in range(41)]
    curves = {
        r["run_id"]: {
            "val_loss": down_up,
            "train_loss": [(e * 10, 1.0 - 0.01 * e) for e in range(41)],
        }
        for r in runs
    }
    a = advise(runs, ["epochs=200,400"], curves)
    assert "overfitting" in [f.kind for f in a.findings]
    assert not any(f.kind == "no_effect" and f.tag.split("@")[0] == "epochs" for f in a.findings)


def test_a_saturated_grid_gets_no_seeds_only_command():
    runs = [
        rec(1.0, metrics={"val_log_loss": 0.01 * (w + s)}, width=w, seed=s)
        for w in (4, 8, 16)
        for s in (0, 1)
    ]
    a = advise(ranked(runs, "val_accuracy", lower=False), ["width=4,8,16", "seed=0,1"])
    assert [f.kind for f in a.findings][0] == "saturation"
    assert not any("seed" in f.set for f in a.findings)
    assert a.command is None and a.note.startswith("the grid answers its question")
    assert "val_log_loss" in a.note and "data.val_fraction" in a.note


def test_skipped_gpu_jobs_give_a_cpu_only_command():
    # the GPU half SKIPPED: no GPU run in the store
    runs = ranked([rec(3000, lr=0.001), rec(2000, lr=0.01)])
    skipped = [
        f"lr={lr} device=gpu: device=gpu: CuPy found no CUDA device: install a GPU or use device=cpu"
        for lr in ("0.001", "0.01")
    ]
    a = advise(runs, ["lr=0.001,0.01", "device=cpu,gpu"], skipped=skipped)
    (f,) = [f for f in a.findings if f.kind == "device"]
    assert f.set == {"device": "cpu"} and "2 job(s) with device=gpu were SKIPPED" in f.summary
    assert "device=cpu" in a.command and "gpu" not in a.command


def test_every_printed_command_trains_a_new_run_within_the_rounds_budget():
    # a resumed sweep: 4 runs trained this round, 8 reused from earlier rounds; the budget is this round's
    runs = [
        rec(3000 - 100 * i, lr=lr, reused=i < 2, width=w)
        for i, lr in enumerate(("0.001", "0.003", "0.01"))
        for w in (16, 32, 64, 128)
    ]
    for r in runs[4:8]:
        r["reused"] = True
    s = Sweep(runs)
    assert s.trained == 4
    a = advise(ranked(runs), ["lr=0.001,0.003,0.01", "width=16,32,64,128"])
    assert a.budget == 4 and "budget per round: at most 4 new runs (this sweep trained 4;" in a.note
    total, done = a.sizes
    assert 0 < total - done <= a.budget


def test_a_small_round_is_budgeted_at_what_it_trained_with_no_floor():
    # two runs trained: at most two new; three seeds of the best two (4 new) do not fit, two seeds each (2 new) do
    # a categorical key: no edge to extend
    runs = ranked([rec(3000, optimizer="adam"), rec(3500, optimizer="gd")])
    a = advise(runs, ["optimizer=gd,adam"])
    assert a.budget == 2 and "budget per round: at most 2 new runs (this sweep trained 2;" in a.note
    assert grid_points(a.command, ("optimizer", "seed")) == {
        (o, s) for o in ("adam", "gd") for s in "01"
    }
    assert "with seed=0,1 (one seed more than this sweep tried" in a.note
    total, done = a.sizes
    assert (total, done) == (4, 2)
    # the same sweep resumed with every run reused: it trained nothing, so it proposes nothing and says why
    again = advise(ranked([{**r, "reused": True} for r in runs]), ["optimizer=gd,adam"])
    assert (
        again.command is None and "this sweep trained no new run (all 2 were reused" in again.note
    )


def test_a_configuration_with_a_diverged_seed_ranks_behind_a_fully_finished_one():
    a_vals, b_vals = (100.0, 101.0, 99.0), (101.0, 100.5, 102.0, 101.5)
    runs = [rec(v, lr="0.1", seed=i) for i, v in enumerate(a_vals)]
    runs.append(rec(status="FAILED", reason="diverged at epoch 40", lr="0.1", seed=3))
    runs += [rec(v, lr="0.01", seed=i) for i, v in enumerate(b_vals)]
    s = Sweep(ranked(runs))
    first, second = s.ranked()
    # 100.0 (3/4) behind 101.1 (4/4)
    assert dict(first)["lr"] == "0.01" and dict(second)["lr"] == "0.1"
    assert s.n_text(second) == "n=3/4 ✗ (a seed FAILED)"
    # far better beyond the noise, it keeps its place
    runs[:3] = [rec(v - 50, lr="0.1", seed=i) for i, v in enumerate(a_vals)]
    assert dict(Sweep(ranked(runs)).ranked()[0])["lr"] == "0.1"


def test_the_leaderboard_marks_a_failed_seed_and_ranks_it_behind():
    from types import SimpleNamespace as NS

    from sweeper.insight.leaderboard import build

    def run(i, lr, seed, val=None, status="FINISHED"):
        metrics = {} if val is None else {"val_mse": val, "test_mse": val}
        tags = {"failure_reason": "diverged at epoch 40"} if status == "FAILED" else {}
        return NS(
            info=NS(run_name=f"r{i}", run_id=f"id{i}", status=status, start_time=i),
            data=NS(params={"lr": lr, "seed": str(seed)}, metrics=metrics, tags=tags),
        )

    runs = [
        run(0, "0.1", 0, 100.0),
        run(1, "0.1", 1, 101.0),
        run(2, "0.1", 2, 99.0),
        run(3, "0.1", 3, status="FAILED"),
    ]
    runs += [run(4 + i, "0.01", i, v) for i, v in enumerate((101.0, 102.0, 100.0, 101.5))]
    board = build(runs)
    assert [g["lr"] for g in board.groups] == ["0.01", "0.1"] and board.best["lr"] == "0.01"
    table = board.table()
    assert "3/4 ✗" in table and "a seed of it FAILED" in table


def test_baselines_say_when_the_network_does_not_beat_linear_or_boosting_beats_it():
    runs = ranked([rec(3000, lr=0.001), rec(2900, lr=0.01)])
    a = advise(
        runs,
        ["lr=0.001,0.01"],
        baselines={
            "linear": {"val_mse": 2890.0, "test_mse": 3100.0},
            "boosting": {"val_mse": 2000.0, "test_mse": 2100.0},
        },
    )
    titles = {f.title: f for f in a.findings if f.kind == "baseline"}
    assert (
        "no configuration beats the linear reference beyond the noise"
        in titles["the network does not beat the linear reference"].summary
    )
    # a baseline that beats the network beyond the noise is the first finding: both numbers and the gap in percent
    assert a.findings[0] is titles["a tree model fits this table better"]
    assert a.findings[0].summary == (
        "gradient boosting (tuned on the validation rows) scores val_mse 2000 against the "
        "network's best 2900 (lr=0.01): 31.0% better, beyond the noise"
    )
    beaten = advise(
        runs,
        ["lr=0.001,0.01"],
        baselines={"linear": {"val_mse": 5000.0}, "boosting": {"val_mse": 2899.0}},
    )
    # beats linear; boosting within the 2% default
    assert not [f for f in beaten.findings if f.kind == "baseline"]


@pytest.mark.parametrize("name", ["diabetes", "breast_cancer", "iris"])
def test_the_linear_reference_is_scikit_learns_on_the_same_rows(name):
    from sklearn.linear_model import LogisticRegression, Ridge

    from sweeper import data
    from sweeper.insight import baselines
    from sweeper.job.metrics import score

    node = {"name": name, "val_fraction": 0.2, "test_fraction": 0.2, "split_seed": 0}
    ds = data.load_plain(node)
    ours, what = baselines.linear(ds)
    truth_val, truth_test = ds.to_original(ds.y_val), ds.to_original(ds.y_test)
    if ds.task == "regression":
        fits = {a: Ridge(alpha=a).fit(ds.X_train, ds.y_train.ravel()) for a in baselines.ALPHAS}
        pick = min(
            fits,
            key=lambda a: score(
                "regression", truth_val, ds.to_original(fits[a].predict(ds.X_val)), "v"
            )["v_mse"],
        )
        assert f"alpha={pick:g} " in what
        m = fits[pick]
        theirs = {
            **score(
                "regression", truth_val, ds.to_original(m.predict(ds.X_val).reshape(-1, 1)), "val"
            ),
            **score(
                "regression",
                truth_test,
                ds.to_original(m.predict(ds.X_test).reshape(-1, 1)),
                "test",
            ),
        }
    else:
        C = float(what.split("C=")[1].split()[0])
        m = LogisticRegression(C=C, max_iter=2000).fit(ds.X_train, ds.y_train.ravel().astype(int))
        proba = (lambda X: m.predict_proba(X)[:, 1:2]) if ds.task == "binary" else m.predict_proba
        theirs = {
            **score(ds.task, truth_val, proba(ds.X_val), "val"),
            **score(ds.task, truth_test, proba(ds.X_test), "test"),
        }
    assert set(ours) == set(theirs)
    for k in theirs:
        assert math.isclose(ours[k], theirs[k], rel_tol=1e-8, abs_tol=1e-10), k


def test_the_baselines_key_changes_no_fingerprint_and_is_checked():
    from sweeper.contract.config import ConfigError, TOP_LEVEL, check_value
    from sweeper.contract.fingerprint import fingerprint

    cfg = {"lr": 0.01, "epochs": 10, "data": {"name": "diabetes"}}
    assert (
        fingerprint(cfg)
        == fingerprint({**cfg, "baselines": ["linear", "boosting"]})
        == fingerprint({**cfg, "baselines": "none"})
    )
    check_value("baselines", ["linear", "boosting"], TOP_LEVEL["baselines"])
    with pytest.raises(
        ConfigError,
        match=r"^baselines=trees is not allowed: expected auto, a comma list of linear, boosting",
    ):
        check_value("baselines", "trees", TOP_LEVEL["baselines"])


@pytest.mark.slow
def test_a_foreign_parent_gets_findings_no_command_and_no_tags(tmp_path, capsys):
    from mlflow import MlflowClient

    from sweeper.advise import main

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    c = MlflowClient(uri)
    exp = c.create_experiment("theirs", artifact_location=str(tmp_path / "artifacts"))
    parent = c.create_run(exp, run_name="their sweep").info.run_id
    for i, (lr, val) in enumerate((("0.001", 5000.0), ("0.01", 4000.0), ("0.1", 3000.0))):
        r = c.create_run(
            exp, run_name=f"trial {i}", tags={"mlflow.parentRunId": parent}
        ).info.run_id
        c.log_param(r, "lr", lr)
        c.log_metric(r, "val_mse", val)
        c.set_terminated(r, "FINISHED")
    c.set_terminated(parent, "FINISHED")
    assert main(["--parent", parent, "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    assert (
        "edge of the grid: lr" in out
        and "next command: none" in out
        and "not made by sweeper" in out
    )
    assert "nothing written into the parent run" in out
    run = c.get_run(parent)
    assert not [k for k in run.data.tags if k.startswith("advice.")] and not c.list_artifacts(
        parent
    )
    assert main(["--parent", parent, "--tracking-uri", uri, "--log"]) == 0
    assert (
        c.get_run(parent).data.tags["advice.count"]
        and "advice.next_command" not in c.get_run(parent).data.tags
    )


@pytest.mark.slow
def test_a_sweep_fits_its_baselines_on_the_parent_and_shows_them_as_marked_rows(tmp_path, store):
    from conftest import all_runs, cli

    from sweeper import data
    from sweeper.insight import baselines

    proc = cli(
        tmp_path,
        "-m",
        "lr=0.01,0.05",
        "epochs=50",
        "baselines=linear,boosting",
        "tracking.log_model=false",
        store=store,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (parent,) = [r for r in all_runs(store) if "mlflow.parentRunId" not in r.data.tags]
    m = parent.data.metrics
    ours, _ = baselines.linear(
        data.load_plain(
            {"name": "diabetes", "val_fraction": 0.2, "test_fraction": 0.2, "split_seed": 0}
        )
    )
    assert math.isclose(m["baseline_linear_val_mse"], ours["val_mse"], rel_tol=1e-12)
    assert {
        "baseline_linear_test_mse",
        "baseline_boosting_val_mse",
        "baseline_linear_fit_s",
    } <= set(m)
    assert "[baseline] linear" in proc.stdout and "[baseline] boosting" in proc.stdout
    assert parent.data.tags["best_run_id"] in {
        r.info.run_id for r in all_runs(store) if r.data.tags.get("mlflow.parentRunId")
    }


def test_seeds_that_do_not_fit_the_budget_go_to_the_best_two_configurations():
    runs = ranked(
        [
            rec(3139, optimizer="adam", lr="0.3"),
            rec(3145, optimizer="adam", lr="3"),
            rec(3150, optimizer="adam", lr="0.01"),
            rec(3160, optimizer="gd", lr="0.3"),
            rec(3200, optimizer="gd", lr="0.01"),
            rec(status="FAILED", reason="diverged at epoch 3", optimizer="gd", lr="3"),
        ]
    )
    a = advise(runs, ["optimizer=gd,adam", "lr=0.01,0.3,3"])
    assert "the seeds go to the best two configurations only: lr=0.3,3 optimizer=adam" in a.note
    assert grid_points(a.command, ("optimizer", "lr", "seed")) == {
        ("adam", lr, s) for lr in ("0.3", "3") for s in "012"
    }
    total, done = a.sizes
    assert (total, done) == (6, 2) and total - done <= a.budget == 6

"""+sweep=optuna: sweeper's own sweeper over Optuna >= 4 (plugins/hydra_plugins/sweeper_optuna_sweeper)."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import optuna
import pytest
from omegaconf import OmegaConf

from conftest import NO_BASELINES, all_runs, cli, copy_store, one_line
from hydra_plugins.sweeper_optuna_sweeper import _core, _study
from hydra_plugins.sweeper_optuna_sweeper._space import parse
from sweeper.contract.config import ConfigError

# one shape (depth, width, epochs fixed): each round's trials can train as one batched group
ONE_SHAPE = ("+sweep=optuna", "depth=1", "width=8", "epochs=200", "log_every=20")


def children(store):
    return [r for r in all_runs(store) if "mlflow.parentRunId" in r.data.tags]


def parents(store):
    return [r for r in all_runs(store) if "mlflow.parentRunId" not in r.data.tags]


def study_of(db, name):
    return optuna.load_study(study_name=name, storage=f"sqlite:///{db}")


def results(sweep_dir):
    return OmegaConf.to_container(OmegaConf.load(sweep_dir / _core.RESULTS_FILE))


# --- the search space and settings (no subprocess) ---


def test_the_space_is_read_from_hydras_override_syntax():
    s = parse(
        {
            "lr": "tag(log, interval(0.0005, 0.05))",
            "depth": "choice(0, 1, 2)",
            "width": "range(8, 65, 8)",
            "epochs": "interval(100, 300)",
            "data.val_fraction": "interval(0.1, 0.3)",
        },
        ["data=iris", "depth=2", "tracking.uri=sqlite:////tmp/x.db"],
    )
    d = s.distributions
    assert d["lr"] == optuna.distributions.FloatDistribution(0.0005, 0.05, log=True)
    # range()'s stop is excluded, as in grids
    assert d["width"] == optuna.distributions.IntDistribution(8, 64, step=8)
    # an integer key: an integer interval
    assert d["epochs"] == optuna.distributions.IntDistribution(100, 300)
    assert isinstance(d["data.val_fraction"], optuna.distributions.FloatDistribution)
    # the command's fixed value takes the key out of the space
    assert "depth" not in d and "depth=2" in s.fixed
    assert s.overrides({"lr": 0.001, "width": 16}) == (
        "lr=0.001",
        "width=16",
        "data=iris",
        "depth=2",
        "tracking.uri=sqlite:////tmp/x.db",
    )


@pytest.mark.parametrize(
    "params, message",
    [
        (
            {"lr": "interval(0, 0.1)"},
            "hydra.sweeper.params.lr=interval(0, 0.1) is not allowed: lr=0.0 is not allowed",
        ),
        ({"width": "interval(8.5, 64)"}, "width is an integer"),
        ({"depth": "tag(log, interval(0, 2))"}, "a log scale needs low > 0"),
        (
            {"lr": "choice(0.01, -1)"},
            "hydra.sweeper.params.lr=-1 is not allowed: expected a number > 0",
        ),
        ({"data": "choice(iris, nope)"}, "hydra.sweeper.params.data=nope is not allowed"),
        ({"lr": "interval(("}, "hydra.sweeper.params.lr=interval(( is not a valid override"),
        ({"epochs": "range(5, 5)"}, "the range is empty"),
        ({"lr": "0.01"}, "has no search space"),
    ],
)
def test_a_bad_space_is_one_line_naming_the_key(params, message):
    with pytest.raises(ConfigError) as e:
        parse(params, [])
    assert message in str(e.value) and "\n" not in str(e.value)


def test_the_default_storage_sits_beside_the_mlflow_store(tmp_path, monkeypatch):
    assert (
        _study.storage_url("auto", f"sqlite:///{tmp_path}/m/mlflow.db")
        == f"sqlite:///{tmp_path}/m/optuna.db"
    )
    monkeypatch.chdir(tmp_path)
    assert _study.storage_url("auto", "http://127.0.0.1:5000") == f"sqlite:///{tmp_path}/optuna.db"
    assert (
        _study.storage_url(None, "x") is None
        and _study.storage_url("postgresql://u:p@h/db", "x") == "postgresql://u:p@h/db"
    )
    assert "p@" not in _study.shown("postgresql://u:p@h/db")


def plan_for(db, seed=0):
    return {
        "storage": f"sqlite:///{db}",
        "study_name": "s",
        "direction": "minimize",
        "shown_storage": str(db),
        "metric": "val_mse",
        "verb": "minimising",
        **_core.sampler(
            OmegaConf.create(
                {"_target_": "optuna.samplers.TPESampler", "seed": seed, "constant_liar": True}
            )
        ),
    }


def test_a_round_asks_distinct_trials_and_a_continued_study_draws_new_values(tmp_path):
    space = parse({"lr": "tag(log, interval(0.0005, 0.05))", "width": "choice(8, 16, 32, 64)"}, [])
    plan = plan_for(tmp_path / "o.db")
    study = _study.open_study(plan)
    first = _core.ask(study, space, plan, 4)
    assert [t.number for t in first] == [0, 1, 2, 3] and len({t.params["lr"] for t in first}) == 4
    _study.report(
        [(t, np.array([0, 50, 100]), np.array([3.0, 2.0, math.nan])) for t in first], study
    )
    for t in first:
        study.tell(t, t.params["lr"])
    # a second command, same seed: new values, numbers go on
    again = _study.open_study(plan_for(tmp_path / "o.db"))
    second = _core.ask(again, space, plan, 4)
    assert [t.number for t in second] == [4, 5, 6, 7]
    assert not {t.params["lr"] for t in second} & {t.params["lr"] for t in first}
    stored = study_of(tmp_path / "o.db", "s").trials[0]
    assert stored.intermediate_values[0] == 3.0 and stored.intermediate_values[50] == 2.0
    assert math.isnan(stored.intermediate_values[100])
    # same seed, fresh study: the same search
    fresh = _study.open_study(plan_for(tmp_path / "p.db"))
    assert [t.params for t in _core.ask(fresh, space, plan_for(tmp_path / "p.db"), 4)] == [
        t.params for t in first
    ]


def test_a_study_that_optimises_the_other_way_is_refused(tmp_path):
    _study.open_study(plan_for(tmp_path / "o.db"))
    with pytest.raises(
        ConfigError, match="hydra.sweeper.study_name=s is not allowed: that study minimizes"
    ):
        _study.open_study(
            {
                **plan_for(tmp_path / "o.db"),
                "direction": "maximize",
                "metric": "val_accuracy",
                "verb": "maximising",
            }
        )


# --- real searches (subprocesses) ---


@pytest.mark.slow
def test_iris_maximises_val_accuracy_in_rounds_trained_together_and_a_rerun_continues(
    tmp_path, store
):
    proc = cli(
        tmp_path,
        "-m",
        *ONE_SHAPE,
        "data=iris",
        "hydra.sweeper.n_trials=12",
        "hydra.sweeper.batch=4",
        "hydra.launcher.cpu_workers=1",
        store=store,
    )  # a round's group unsplit (split, its chunks are groups)
    assert proc.returncode == 0, proc.stderr
    assert "maximising val_accuracy (multiclass)" in proc.stdout
    found = results(tmp_path / "sweep")
    assert found["direction"] == "maximize" and found["trials"] == list(range(12))
    (parent,) = parents(store)
    # the study's best = the leaderboard's
    assert found["best_value"] == parent.data.metrics["best_val_accuracy"]
    assert parent.data.params["search.lr"] == "tag(log, interval(0.0005, 0.05))"
    assert parent.data.params["optuna.sampler"].startswith("TPESampler(seed=0, constant_liar=True")
    assert (
        parent.data.tags["optuna.direction"] == "maximize"
        and parent.data.tags["optuna.metric"] == "val_accuracy"
    )
    kids = children(store)
    assert sorted(int(k.data.tags["optuna.trial_number"]) for k in kids) == list(range(12))
    assert {k.data.tags["optuna.study_name"] for k in kids} == {"iris"}
    rounds = {}
    for k in kids:
        rounds.setdefault(k.data.tags["optuna.round"], set()).add(
            k.data.tags["sweeper.batch_group"]
        )
    # a round: one group
    assert sorted(rounds) == ["0", "1", "2"] and all(len(g) == 1 for g in rounds.values())
    assert len(set.union(*rounds.values())) == 3
    db = store.parent / "optuna.db"  # beside the MLflow store
    study = study_of(db, "iris")
    assert study.direction == optuna.study.StudyDirection.MAXIMIZE
    by_number = {t.number: t for t in study.trials}
    trial = by_number[int(kids[0].data.tags["optuna.trial_number"])]
    # 0..180, 200: the last
    assert (
        trial.user_attrs["run_id"] == kids[0].info.run_id and len(trial.intermediate_values) == 11
    )
    assert trial.value == kids[0].data.metrics["val_accuracy"]

    (tmp_path / "again").mkdir()
    proc = cli(
        tmp_path / "again", "-m", *ONE_SHAPE, "data=iris", "hydra.sweeper.n_trials=4", store=store
    )
    assert proc.returncode == 0, proc.stderr
    assert results(tmp_path / "again" / "sweep")["trials"] == [12, 13, 14, 15]
    assert sorted(t.number for t in study_of(db, "iris").trials) == list(range(16))


@pytest.mark.slow
def test_diabetes_minimises_val_mse(tmp_path, store):
    proc = cli(tmp_path, "-m", *ONE_SHAPE, "hydra.sweeper.n_trials=4", store=store)
    assert proc.returncode == 0, proc.stderr
    assert "minimising val_mse (regression)" in proc.stdout
    found = results(tmp_path / "sweep")
    (parent,) = parents(store)
    assert (
        found["direction"] == "minimize"
        and found["best_value"] == parent.data.metrics["best_val_mse"]
    )
    assert found["best_value"] == min(k.data.metrics["val_mse"] for k in children(store))
    assert (
        study_of(store.parent / "optuna.db", "diabetes").direction
        == optuna.study.StudyDirection.MINIMIZE
    )


@pytest.mark.slow
def test_two_processes_share_one_sqlite_study(tmp_path, store):
    shared = tmp_path / "shared" / "optuna.db"
    procs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        db = copy_store(store, tmp_path / name)
        args = [
            sys.executable,
            "-m",
            "sweeper",
            "-m",
            NO_BASELINES,
            *ONE_SHAPE,
            "data=iris",
            "hydra.sweeper.n_trials=6",
            "hydra.sweeper.batch=3",
            f"hydra.sweeper.storage=sqlite:///{shared}",
            "hydra.sweeper.study_name=shared",
            f"hydra.sweep.dir={tmp_path / name / 'sweep'}",
            f"tracking.uri=sqlite:///{db}",
        ]
        procs.append(
            subprocess.Popen(
                args, cwd=tmp_path / name, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    trials = study_of(shared, "shared").trials
    assert sorted(t.number for t in trials) == list(range(12))  # each number once
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    assert len({t.params["lr"] for t in trials}) == 12  # the two processes drew different values
    mine = [results(tmp_path / n / "sweep")["trials"] for n in ("a", "b")]
    assert sorted(mine[0] + mine[1]) == list(range(12))


@pytest.mark.slow
def test_a_bad_space_fails_in_one_line_before_any_parent_run(tmp_path, store):
    proc = cli(
        tmp_path, "-m", "+sweep=optuna", "hydra.sweeper.params.lr='interval(0, 0.1)'", store=store
    )
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith("sweeper: error: hydra.sweeper.params.lr=interval(0, 0.1) is not allowed")
    )
    assert "Traceback" not in proc.stderr and not children(store)
    # refused before the store is touched (issue 41): no FAILED parent left behind
    assert not parents(store)


@pytest.mark.slow
def test_a_rerun_with_resume_tells_reused_trials_the_finished_runs_value(tmp_path, store):
    # one value: every trial proposes the same configuration, so the second command's trials are all reused
    space = (*ONE_SHAPE, "lr=choice(0.01)")
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    first = cli(tmp_path / "a", "-m", *space, "hydra.sweeper.n_trials=1", store=store)
    assert first.returncode == 0, first.stderr
    (trained,) = children(store)
    again = cli(
        tmp_path / "b", "-m", *space, "hydra.sweeper.n_trials=2", "resume=true", store=store
    )
    assert again.returncode == 0, again.stderr
    assert len(children(store)) == 1  # nothing trained again
    trials = sorted(study_of(store.parent / "optuna.db", "diabetes").trials, key=lambda t: t.number)
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 3  # not FAILED
    assert [t.value for t in trials] == [trained.data.metrics["val_mse"]] * 3
    assert [t.user_attrs["run_id"] for t in trials[1:]] == [trained.info.run_id] * 2
    assert all(t.user_attrs["status"] == "SKIPPED" for t in trials[1:])


@pytest.mark.slow
def test_a_launcher_that_cannot_start_ends_the_search_in_one_line_and_fails_its_trials(
    tmp_path, store
):
    proc = cli(
        tmp_path,
        "-m",
        *ONE_SHAPE,
        "hydra.sweeper.n_trials=2",
        "hydra/launcher=submitit_slurm",
        store=store,
    )  # no SLURM here
    assert proc.returncode == 2, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("sweeper: error: the launcher failed: "), (
        proc.stderr
    )
    (parent,) = parents(store)
    assert parent.info.status == "KILLED" and not children(store)
    trials = study_of(store.parent / "optuna.db", "diabetes").trials
    # none left RUNNING
    assert trials and all(t.state == optuna.trial.TrialState.FAIL for t in trials)


@pytest.mark.slow
def test_a_study_continued_with_other_choices_is_refused_in_one_line_before_any_trial(
    tmp_path, store
):
    """Before: Optuna's "CategoricalDistribution does not support dynamic value space" as a traceback on the first
    trial, the round's runs left RUNNING, and the printed "finish the sweep" command repeated it."""
    quick = (
        "hydra.sweeper.n_trials=2",
        "hydra.sweeper.batch=2",
        "epochs=30",
        "log_every=10",
        "width=8",
        "tracking.log_model=false",
    )
    assert cli(tmp_path, "-m", "+sweep=optuna", *quick, store=store).returncode == 0
    proc = cli(tmp_path, "-m", "+sweep=optuna", *quick, "depth=1,2,3", store=store)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("sweeper: error:")]
    assert (
        line.startswith("sweeper: error: hydra.sweeper.params.depth=")
        and "its trials drew depth from choice(0, 1, 2)" in line
    )
    assert "hydra.sweeper.study_name=NAME" in line
    runs = all_runs(store)
    # refused before the store is touched: no parent
    assert not [r for r in runs if r.info.status != "FINISHED"]
    assert len(runs) == 3 and len([r for r in runs if r.data.tags.get("mlflow.parentRunId")]) == 2
    study = optuna.load_study(
        study_name="diabetes", storage=f"sqlite:///{store.parent / 'optuna.db'}"
    )
    assert len(study.trials) == 2  # no trial asked for the refused space


@pytest.mark.slow
def test_trials_successive_halving_stopped_are_pruned_in_the_study_with_their_curve_to_the_rung(
    tmp_path, store
):
    # one round of 9 trials trained as batched groups; halving stops 6 at epoch 20 and 2 more at epoch 60
    proc = cli(
        tmp_path,
        "-m",
        "+sweep=optuna",
        "depth=1",
        "width=8",
        "epochs=180",
        "log_every=10",
        "hydra.sweeper.n_trials=9",
        "hydra.sweeper.batch=9",
        "hydra.launcher.halving.eta=3",
        "hydra.launcher.halving.min_epochs=20",
        store=store,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials = study_of(store.parent / "optuna.db", "diabetes").trials
    pruned = [t for t in trials if t.state == optuna.trial.TrialState.PRUNED]
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(trials) == 9 and len(pruned) == 8 and len(complete) == 1
    runs = {k.info.run_id: k for k in children(store)}
    for t in pruned:
        rung = int(t.user_attrs["pruned_at_epoch"])
        assert rung in (20, 60) and max(t.intermediate_values) == rung  # its curve, up to its rung
        assert runs[t.user_attrs["run_id"]].data.tags["pruned_at_epoch"] == str(rung)
        # Optuna's value of a pruned trial: its last intermediate one
        assert t.value == t.intermediate_values[rung]
    assert sorted(int(t.user_attrs["pruned_at_epoch"]) for t in pruned) == [20] * 6 + [60] * 2
    assert complete[0].value == runs[complete[0].user_attrs["run_id"]].data.metrics["val_mse"]
    assert max(complete[0].intermediate_values) == 180
    assert (
        results(tmp_path / "sweep")["study_pruned"] == 8
        and "1 of 9 finished in the study, 8 pruned" in proc.stdout
    )


@pytest.mark.parametrize(
    "setting",
    [
        "hydra.sweeper.n_trials=0",
        "hydra.sweeper.batch=0",
        "hydra.sweeper.storage=foo://x",
        "hydra.sweeper.storage=postgresql://me@host:port/db",  # a port that is no number
        "hydra.sweeper.sampler._target_=nope.Sampler",
    ],
)
def test_a_refused_optuna_setting_writes_no_parent_run(tmp_path, store, setting):
    """Before: the parent run was created, then ended FAILED, although the store is not to be touched."""
    proc = cli(tmp_path, "-m", "+sweep=optuna", setting, "epochs=5", store=store)
    assert proc.returncode == 2
    assert one_line(proc.stderr).startswith(
        f"sweeper: error: {setting.split('=')[0].removesuffix('._target_')}"
    )
    assert not all_runs(store) and not (tmp_path / "sweep").exists()


def test_an_interrupted_optuna_round_tells_its_finished_trials_their_values(tmp_path):
    """Before: Ctrl-C during a round told all its 16 trials FAIL although 10 runs finished; a resume trained them again."""
    import json

    import optuna
    from hydra_plugins.sweeper_optuna_sweeper._core import cut_short

    study = optuna.create_study(direction="minimize")
    trials = [study.ask() for _ in range(3)]
    for trial in trials:
        trial.suggest_float("lr", 0.001, 0.1)
    folders = [tmp_path / str(i) for i in range(3)]
    for folder, status in zip(folders[:2], ["FINISHED", "KILLED"]):
        folder.mkdir()
        (folder / "result.json").write_text(
            json.dumps(
                {
                    "status": status,
                    "run_id": f"run-{status}",
                    "metrics": {"val_mse": 2.5} if status == "FINISHED" else {},
                }
            )
        )
    cut_short(study, trials, folders, "val_mse")
    done = {t.number: t for t in study.get_trials()}
    assert (
        done[trials[0].number].state == optuna.trial.TrialState.COMPLETE
        and done[trials[0].number].value == 2.5
    )
    assert done[trials[0].number].user_attrs["run_id"] == "run-FINISHED"
    assert [done[t.number].state for t in trials[1:]] == [optuna.trial.TrialState.FAIL] * 2


@pytest.mark.slow
def test_an_optuna_trials_value_is_its_fold_mean(tmp_path, store):
    pytest.importorskip("optuna")
    import optuna

    from conftest import all_runs

    proc = cli(
        tmp_path,
        "-m",
        "+sweep=optuna",
        "data=diabetes",
        "data.folds=3",
        "hydra.sweeper.n_trials=3",
        "hydra.sweeper.batch=3",
        "epochs=choice(50,100)",
        "baselines=none",
        store=store,
    )
    assert proc.returncode == 0, proc.stderr
    url = f"sqlite:///{store.parent / 'optuna.db'}"
    study = optuna.load_study(
        study_name=optuna.get_all_study_summaries(url)[0].study_name, storage=url
    )
    runs = {r.data.tags.get("optuna.trial_number"): r for r in all_runs(store)}
    assert len(study.trials) == 3
    for t in study.trials:
        m = runs[str(t.number)].data.metrics
        assert t.value == pytest.approx(
            np.mean([m[f"val_mse_fold{i}"] for i in range(3)]), rel=1e-12
        )


@pytest.mark.parametrize(
    "cfg, why",
    [
        ({"_target_": "nope.Sampler"}, "cannot be built"),
        ({"_target_": "optuna.samplers.TPESampler", "bogus": 1}, "cannot be built"),
        ({"_target_": "optuna.samplers.TPESampler", "seed": "abc"}, "cannot be built"),
        ({"_target_": "optuna.samplers.GridSampler"}, "cannot be built"),  # its search_space
        ({"_target_": "collections.OrderedDict"}, "is not allowed"),  # built, but no sampler
    ],
)
def test_a_sampler_that_cannot_be_built_is_one_config_line(cfg, why):
    """hydra.sweeper.sampler: whatever its class or arguments raise as Hydra builds it is one
    ConfigError line naming the sampler, before the store is touched."""
    from omegaconf import OmegaConf

    from hydra_plugins.sweeper_optuna_sweeper._core import sampler
    from sweeper.contract.config import ConfigError

    with pytest.raises(ConfigError) as e:
        sampler(OmegaConf.create(cfg))
    line = str(e.value)
    assert line.startswith("hydra.sweeper.sampler=") and why in line and "\n" not in line, line


def test_a_refused_search_whose_store_fails_says_so_and_is_still_one_refusal(
    tmp_path, monkeypatch, caplog
):
    """_core.refuse ends each parent FAILED where its store lets it (tracking.mark_ended); a store that fails,
    its client included, is an error line in the log, and the refusal is still the command's one line."""
    import json

    from mlflow.exceptions import MlflowException

    from hydra_plugins.sweeper_optuna_sweeper import _core
    from sweeper import tracking
    from sweeper.base.stop import Refused

    (tmp_path / "sweep.json").write_text(
        json.dumps({"parents": [{"uri": "sqlite:///x.db", "run_id": "r1"}]})
    )

    def gone(uri):
        raise MlflowException("the store went away")

    monkeypatch.setattr(tracking.store, "client", gone)
    monkeypatch.setattr(tracking, "client", gone)
    with pytest.raises(Refused) as e:
        _core.refuse(tmp_path, "hydra.sweeper.params: bad")
    assert e.value.code == 2
    assert "parent run r1 not closed: MlflowException: the store went away" in caplog.text


def test_a_data_set_the_search_cannot_read_is_refused_in_its_one_line(tmp_path, monkeypatch):
    """prepare reads each data set of the space for its task (_core._task); its DataError is the sweep's refusal
    (sweep's one handler of bad input), as a ConfigError's is."""
    from types import SimpleNamespace

    from sweeper import data

    def unreadable(sweeper, arguments):
        raise data.DataError("data.path=/x/gone.csv cannot be read: No such file or directory")

    said = []

    def refused(sweep_dir, message):
        said.append(message)
        raise SystemExit(2)

    monkeypatch.setattr(_core, "prepare", unreadable)
    monkeypatch.setattr(_core, "refuse", refused)
    sweeper = SimpleNamespace(config=OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}}))
    with pytest.raises(SystemExit):
        _core.sweep(sweeper, [])
    assert said == ["data.path=/x/gone.csv cannot be read: No such file or directory"]

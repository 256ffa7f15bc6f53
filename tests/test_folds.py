"""Cross-validated configurations (data.folds=k, issue 38): the folds, their scores, the run, the refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from omegaconf import OmegaConf

from conftest import cli, command, make_cfg
from test_text import needs_sms
from sweeper import data
from sweeper.contract.config import ConfigError, validate
from sweeper.contract.fingerprint import fingerprint
from sweeper.job.compute import scored_on


def _node(name: str, folds: int, split_seed: int = 0, **extra) -> OmegaConf:
    return OmegaConf.create(
        {
            "name": name,
            "val_fraction": 0.2,
            "test_fraction": 0.2,
            "split_seed": split_seed,
            "folds": folds,
            **extra,
        }
    )


@pytest.mark.parametrize("name,k", [("iris", 5), ("breast_cancer", 4), ("diabetes", 5)])
def test_folds_partition_the_non_test_rows_and_leave_the_test_rows_out(name, k):
    raw = data.LOADERS[name](None, 0)
    n = len(raw.y)
    folds, test = data.split_folds(n, 0.2, 0, k, raw.y, raw.task)
    # the test rows of the run without folds
    assert np.array_equal(test, data.split(n, 0.2, 0.2, 0)[2])
    every = np.concatenate(folds)
    # each non-test row in exactly one fold
    assert len(every) == len(set(every.tolist())) == n - len(test)
    assert not set(every.tolist()) & set(test.tolist())
    loaded = data.load_folds(_node(name, k))
    assert len(loaded) == k
    # each fold validates on its rows, trains on the other folds', tests on the test split
    for i, ds in enumerate(loaded):
        np.testing.assert_allclose(ds.raw(ds.X_val), raw.X[folds[i]], rtol=1e-12, atol=1e-12)
        train = np.sort(np.concatenate([f for j, f in enumerate(folds) if j != i]))
        np.testing.assert_allclose(ds.raw(ds.X_train), raw.X[train], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(ds.raw(ds.X_test), raw.X[test], rtol=1e-12, atol=1e-12)
        # fitted on its training rows
        np.testing.assert_allclose(ds.x_mean, raw.X[train].mean(axis=0), rtol=1e-12, atol=1e-15)


def test_folds_are_stratified_and_differ_with_the_split_seed():
    raw = data.LOADERS["breast_cancer"](None, 0)
    k = 5
    folds, test = data.split_folds(len(raw.y), 0.2, 0, k, raw.y, "binary")
    rest = np.setdiff1d(np.arange(len(raw.y)), test)
    share = raw.y[rest].mean()
    for f in folds:  # each class's rows to within one per fold
        positives = raw.y[f].sum()
        assert abs(positives - raw.y[rest].sum() / k) <= 1 and abs(raw.y[f].mean() - share) < 0.02
    plain, _ = data.split_folds(len(raw.y), 0.2, 0, k)  # not stratified: the shares drift more
    assert max(abs(raw.y[f].mean() - share) for f in plain) > max(
        abs(raw.y[f].mean() - share) for f in folds
    )
    other, other_test = data.split_folds(len(raw.y), 0.2, 1, k, raw.y, "binary")
    assert not all(np.array_equal(np.sort(a), np.sort(b)) for a, b in zip(folds, other))
    assert not np.array_equal(np.sort(test), np.sort(other_test))
    again, _ = data.split_folds(len(raw.y), 0.2, 0, k, raw.y, "binary")
    assert all(np.array_equal(a, b) for a, b in zip(folds, again))  # seeded


def test_the_fingerprint_and_params_hold_folds_only_when_it_is_not_zero():
    from sweeper.tracking.records import split_params

    def plain(*o):
        return OmegaConf.to_container(make_cfg(*o), resolve=True)

    base = plain()
    old = plain()
    del old["data"]["folds"]  # a run from before data.folds
    assert fingerprint(base) == fingerprint(old) == fingerprint(plain("data.folds=0"))
    assert fingerprint(plain("data.folds=5")) != fingerprint(base)
    assert (
        "data.folds" not in split_params(base)[0]
        and split_params(plain("data.folds=5"))[0]["data.folds"] == 5
    )
    validate(old)  # a node without the key is valid


@pytest.mark.parametrize("value", [1, -1, 2.5, "two"])
def test_bad_fold_counts_are_refused_by_the_contract(value):
    cfg = OmegaConf.to_container(make_cfg(), resolve=True)
    cfg["data"]["folds"] = value
    with pytest.raises(
        ConfigError,
        match=r"^data\.folds=.* is not allowed: expected 0 \(one validation split\) or an integer >= 2",
    ):
        validate(cfg)


def test_more_folds_than_a_class_has_rows_is_refused_in_one_line():
    with pytest.raises(
        data.DataError, match=r"data\.folds=40 is not allowed for data=iris: expected at most"
    ):
        data.load(_node("iris", 40))
    with pytest.raises(
        data.DataError,
        match=r"data\.folds=200 is not allowed for data=diabetes: expected at most 177",
    ):
        data.load(_node("diabetes", 200))
    data.load(_node("xor", 2, val_fraction=0.0, test_fraction=0.0))  # 2 rows a class: 2 folds


@pytest.mark.parametrize(
    "args,said",
    [
        (("data.folds=1",), "data.folds=1 is not allowed: expected 0"),
        (("data=iris", "data.folds=40"), "data.folds=40 is not allowed for data=iris"),
        (
            ("-m", "data=iris", "lr=0.1,0.2", "data.folds=40"),
            "data.folds=40 is not allowed for data=iris",
        ),
    ],
)
def test_the_cli_refuses_bad_folds_with_one_line_and_exit_2(tmp_path, store, args, said):
    proc = cli(tmp_path, *args, "epochs=10", store=store)
    assert proc.returncode == 2, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("sweeper: error:")]
    assert len(errors) == 1 and said in errors[0], proc.stderr


def _jobs(*grid):
    from sweeper.contract.compose import plain as plain_config
    from sweeper.sweep import launch

    return [launch.Job(i, list(o), None, plain_config(make_cfg(*o))) for i, o in enumerate(grid)]


FOLD_GRID = [
    (
        "data=diabetes",
        "data.folds=5",
        f"lr={lr}",
        f"seed={seed}",
        "epochs=200",
        "log_every=10",
        "depth=1",
        "width=8",
        "dtype=float64",
    )
    for lr in (0.01, 0.05)
    for seed in (0, 1)
]


def test_a_configurations_folds_are_members_of_one_group_and_score_as_each_fold_trained_alone():
    """The folds of 4 configurations train as one batched group (sub-batches of equal fold sizes); each fold's
    score equals the fold trained alone by the one-configuration trainer to 1e-12 (float64), and the run's mean
    and std are those of its fold scores."""
    from sweeper.base.backend import resolve
    from sweeper.job.compute import train_and_score
    from sweeper.sweep import launch

    jobs = _jobs(*FOLD_GRID)
    groups, alone = launch.plan(jobs)
    assert not alone and [len(g) for g in groups] == [4]
    one = launch.plan(jobs[:1])  # even one configuration: its folds are a group
    assert [len(g) for g in one[0]] == [1] and not one[1]
    computed = launch.compute_group(groups[0])
    backend = resolve("cpu")
    for job in jobs:
        cfg = make_cfg(*job.overrides)
        got = computed[job.idx].outcome
        assert got.reason is None
        alone_scores = [
            train_and_score(cfg, ds, backend).scores for ds in data.load_folds(cfg.data)
        ]
        for i, s in enumerate(alone_scores):
            for key in ("val_mse", "val_r2", "val_mae", "test_mse"):
                if key.startswith("val_"):
                    assert got.scores[f"{key}_fold{i}"] == pytest.approx(
                        s[key], rel=1e-12, abs=1e-12
                    ), (job.overrides, key)
        for key in ("val_mse", "val_r2"):
            folds = np.array([got.scores[f"{key}_fold{i}"] for i in range(5)])
            assert got.scores[key] == pytest.approx(folds.mean(), rel=1e-15)
            assert got.scores[f"{key}_std"] == pytest.approx(folds.std(), rel=1e-12)
            assert got.scores[f"{key}_std"] > 0
        assert got.scores["test_mse"] == pytest.approx(
            np.mean([s["test_mse"] for s in alone_scores]), rel=1e-12
        )
        # fold 0's rows: the run's model is fold 0's
        assert scored_on(job.plain["data"]).X_val.shape[0] == 71
    a, b = (computed[j.idx].outcome.scores for j in jobs[:2])
    assert a["val_mse_fold0"] != b["val_mse_fold0"]  # other configurations, other scores


def test_folds_with_mini_batches_group_by_fold_and_match_alone():
    from sweeper.base.backend import resolve
    from sweeper.job.compute import train_and_score
    from sweeper.sweep import launch

    jobs = _jobs(
        *[
            (
                "data=iris",
                "data.folds=3",
                f"lr={lr}",
                "batch_size=32",
                "epochs=60",
                "log_every=10",
                "dtype=float64",
            )
            for lr in (0.05, 0.1)
        ]
    )
    groups, alone = launch.plan(jobs)
    assert not alone and [len(g) for g in groups] == [2]
    computed = launch.compute_group(groups[0])
    for job in jobs:
        cfg = make_cfg(*job.overrides)
        for i, ds in enumerate(data.load_folds(cfg.data)):
            want = train_and_score(cfg, ds, resolve("cpu")).scores["val_log_loss"]
            assert computed[job.idx].outcome.scores[f"val_log_loss_fold{i}"] == pytest.approx(
                want, rel=1e-12
            )


def _runs(db):
    from conftest import all_runs

    return all_runs(db)


@pytest.mark.slow
def test_a_cross_validated_sweep_logs_one_run_per_configuration_and_refits_the_winner(
    tmp_path, store
):
    """A real multirun (batched launcher) and the same grid under hydra/launcher=basic: one run per configuration
    with the fold mean, std and each fold (equal in both to 1e-12), param and tag folds=5; the winner is refit on
    every non-test row, and the parent's best_run and best_model_uri point to the refit."""
    import shutil

    grid = (
        "-m",
        "data=diabetes",
        "data.folds=5",
        "lr=0.01,0.05",
        "depth=1,2",
        "epochs=200",
        "log_every=10",
        "width=8",
        "dtype=float64",
        "baselines=none",
    )
    other = store.parent.parent / "basic_store" / "mlflow.db"
    shutil.copytree(store.parent, other.parent)
    (tmp_path / "batched").mkdir()
    (tmp_path / "basic").mkdir()
    proc = cli(tmp_path / "batched", *grid, store=store)
    assert proc.returncode == 0, proc.stderr
    basic = cli(tmp_path / "basic", *grid, "hydra/launcher=basic", store=other)
    assert basic.returncode == 0, basic.stderr
    runs = _runs(store)
    parent = next(r for r in runs if r.data.tags.get("sweep_dir"))
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == 4
    alone = {
        r.data.tags["fingerprint"]: r for r in _runs(other) if "mlflow.parentRunId" in r.data.tags
    }
    for r in children:
        m = r.data.metrics
        assert r.data.tags["folds"] == "5" and r.data.params["data.folds"] == "5"
        assert r.data.tags["sweeper.launcher"] == "batched"
        for key in ("val_mse", "val_r2", "val_mae"):
            folds = np.array([m[f"{key}_fold{i}"] for i in range(5)])
            assert m[key] == pytest.approx(folds.mean(), rel=1e-12) and m[
                f"{key}_std"
            ] == pytest.approx(folds.std(), rel=1e-9)
        b = alone[r.data.tags["fingerprint"]].data.metrics
        for key in [k for k in m if k.startswith(("val_", "test_"))]:
            assert m[key] == pytest.approx(b[key], rel=1e-12, abs=1e-12), key
    best_cv = min(children, key=lambda r: r.data.metrics["val_mse"])
    refit = next(r for r in runs if r.data.tags.get("refit_of"))
    assert refit.data.tags["refit_of"] == best_cv.info.run_id == parent.data.tags["best_cv_run_id"]
    assert (
        parent.data.tags["best_run_id"] == refit.info.run_id
        and "mlflow.parentRunId" not in refit.data.tags
    )
    assert parent.data.tags["best_model_uri"].startswith("models:/")
    assert refit.data.params["data.val_fraction"] == "0.0" and "data.folds" not in refit.data.params
    assert (
        refit.data.params["lr"] == best_cv.data.params["lr"]
        and refit.data.params["depth"] == best_cv.data.params["depth"]
    )
    assert "refit: " in proc.stdout and refit.info.run_id in proc.stdout
    # the refit's rows: every non-test row trains, the same test rows as the folds
    node = {
        **{k: v for k, v in OmegaConf.to_container(make_cfg("data=diabetes").data).items()},
        "folds": 0,
        "val_fraction": 0.0,
    }
    ds, fold0 = data.load(OmegaConf.create(node)), data.load(_node("diabetes", 5))
    assert ds.X_train.shape[0] == fold0.X_train.shape[0] + fold0.X_val.shape[0] == 354
    np.testing.assert_allclose(ds.raw(ds.X_test), fold0.raw(fold0.X_test), rtol=1e-12)
    # another model: all rows trained it
    assert refit.data.metrics["test_mse"] != best_cv.data.metrics["test_mse"]
    table = proc.stdout[proc.stdout.index("run ") :]
    assert "val_mse_fold_std" in table and "folds" in table
    # a summary rebuilt from the store finds the refit made and reuses it

    again = command(
        "sweeper.report",
        "--parent",
        parent.info.run_id,
        "--tracking-uri",
        f"sqlite:///{store}",
        cwd=tmp_path,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr
    assert f"(run {refit.info.run_id})" in again.stdout
    assert [r.info.run_id for r in _runs(store) if r.data.tags.get("refit_of")] == [
        refit.info.run_id
    ]
    # promote ranks the cross-validated runs (the refit's val_* are of its training rows: never a candidate) and pins
    # each chosen one as its refit: the sweep's for the best, a new one for the runner-up (--top 2)
    from sweeper.insight import pinned
    from sweeper.promote import main as promote

    assert (
        promote(
            [
                "--experiment",
                "diabetes",
                "--tracking-uri",
                f"sqlite:///{store}",
                "--out-dir",
                str(tmp_path / "pins"),
                "--name",
                "cv",
                "--top",
                "2",
            ]
        )
        == 0
    )
    first, second = (pinned.read_pinned(tmp_path / "pins" / f"cv_{i}.yaml") for i in (1, 2))
    assert (
        first["run_id"] == refit.info.run_id
        and first["cross_validated"]["run_id"] == best_cv.info.run_id
    )
    assert first["cross_validated"]["folds"] == 5
    assert first["cross_validated"]["val_mse"] == pytest.approx(best_cv.data.metrics["val_mse"])
    runner_up = sorted(children, key=lambda r: r.data.metrics["val_mse"])[1]
    refits = {r.data.tags["refit_of"]: r for r in _runs(store) if r.data.tags.get("refit_of")}
    assert set(refits) == {
        best_cv.info.run_id,
        runner_up.info.run_id,
    }  # the runner-up's refit trained by promote
    assert second["run_id"] == refits[runner_up.info.run_id].info.run_id
    assert second["cross_validated"]["run_id"] == runner_up.info.run_id
    # the refit's config
    assert "folds: 5" not in (tmp_path / "pins" / "cv_1.yaml").read_text().split("pinned:")[0]
    # the pin re-runs the refit: every non-test row trains, and its metrics come back
    rerun_store = tmp_path / "rerun" / "mlflow.db"
    (tmp_path / "rerun").mkdir()
    again = cli(
        tmp_path / "rerun", f"hydra.searchpath=[file://{tmp_path}]", "+pins=cv_1", store=rerun_store
    )
    assert again.returncode == 0, again.stderr[-3000:]
    (rerun,) = _runs(rerun_store)
    assert rerun.data.params["data.val_fraction"] == "0.0"
    rows = pinned.check(first["expected"], rerun.data.metrics)
    assert rows and not any(r.failed for r in rows)


def test_a_tables_encoder_and_a_texts_vocabulary_are_fitted_on_each_folds_training_rows(tmp_path):
    """A table (data=csv): the scaler of each fold is its training rows' (the same rows as a numeric data set's folds);
    text (data=sms): each fold's vocabulary is the one fitted on its training documents alone."""
    from sweeper.data.columns import fit
    from test_columns import N, write_table

    path = write_table(tmp_path / "abalone.csv")
    node = OmegaConf.create(
        {
            **OmegaConf.to_container(
                make_cfg("data=csv", f"data.path={path}", "data.drop=[id]").data, resolve=True
            ),
            "folds": 3,
        }
    )
    loaded = data.load_folds(node)
    assert sum(ds.X_val.shape[0] for ds in loaded) + loaded[0].X_test.shape[0] == N
    raw = data.LOADERS["csv"](node, 0)
    folds, _ = data.split_folds(N, node.test_fraction, 0, 3, raw.y, raw.task)
    for i, ds in enumerate(loaded):
        train = np.sort(np.concatenate([f for j, f in enumerate(folds) if j != i]))
        state = fit(raw.columns, train, 50)
        np.testing.assert_allclose(ds.encoder["x_mean"], state["x_mean"], rtol=1e-12)
    # each fold's own
    assert not np.allclose(loaded[0].encoder["x_mean"], loaded[1].encoder["x_mean"])


@needs_sms
def test_each_text_fold_fits_its_own_vocabulary_and_its_members_group_by_fold():
    from sklearn.feature_extraction.text import TfidfVectorizer

    from test_text import SMS

    node = OmegaConf.to_container(
        make_cfg("data=sms", f"data.path={SMS}", "data.max_features=0").data, resolve=True
    )
    node["folds"] = 3
    raw = data.LOADERS["sms"](OmegaConf.create(node), 0)
    folds, _ = data.split_folds(len(raw.y), node["test_fraction"], 0, 3, raw.y, raw.task)
    vocab = []
    for i, ds in enumerate(data.load_folds(OmegaConf.create(node))):
        train = np.sort(np.concatenate([f for j, f in enumerate(folds) if j != i]))
        alone = TfidfVectorizer(min_df=node["min_df"], ngram_range=(1, node["ngram_max"])).fit(
            raw.X[train]
        )
        assert ds.vectorizer.vocabulary_ == alone.vocabulary_
        vocab.append(set(ds.vectorizer.vocabulary_))
    assert vocab[0] != vocab[1]
    from sweeper.base.backend import resolve
    from sweeper.job.compute import train_and_score
    from sweeper.sweep import launch

    jobs = _jobs(
        *[
            (
                "data=sms",
                f"data.path={SMS}",
                "data.folds=3",
                f"lr={lr}",
                "epochs=30",
                "log_every=10",
                "dtype=float64",
            )
            for lr in (0.5, 2.0)
        ]
    )
    groups, alone = launch.plan(jobs)
    assert not alone and [len(g) for g in groups] == [2]
    computed = launch.compute_group(groups[0])
    cfg = make_cfg(*jobs[1].overrides)
    for i, ds in enumerate(data.load_folds(cfg.data)):
        want = train_and_score(cfg, ds, resolve("cpu")).scores["val_log_loss"]
        assert computed[jobs[1].idx].outcome.scores[f"val_log_loss_fold{i}"] == pytest.approx(
            want, rel=1e-12
        )


def test_the_one_job_path_records_one_run_with_the_fold_mean_curve_and_each_folds_curve(
    tmp_path, store
):
    """hydra/launcher=basic's path (record ∘ compute): the folds train one after another into one run."""
    from conftest import client_for, run_once

    result = run_once(
        tmp_path, "data=iris", "data.folds=3", "epochs=200", "log_every=20", "lr=0.1", store=store
    )
    assert result["status"] == "FINISHED"
    m = result["metrics"]
    folds = [m[f"val_accuracy_fold{i}"] for i in range(3)]
    assert m["val_accuracy"] == pytest.approx(np.mean(folds), rel=1e-15)
    assert m["val_log_loss_std"] == pytest.approx(
        np.std([m[f"val_log_loss_fold{i}"] for i in range(3)]), rel=1e-12
    )
    curves = np.load(tmp_path / "job" / "curves.npz")
    each = np.array([curves[f"val_loss_fold{i}_values"] for i in range(3)])
    np.testing.assert_allclose(curves["val_loss_values"], each.mean(axis=0), rtol=1e-12)
    assert not np.allclose(each[0], each[1])
    c = client_for(store)
    run = c.get_run(result["run_id"])
    assert run.data.tags["folds"] == "3" and run.data.params["data.folds"] == "3"
    logged = [
        p.value
        for p in sorted(c.get_metric_history(run.info.run_id, "val_loss"), key=lambda p: p.step)
    ]
    np.testing.assert_allclose(logged, curves["val_loss_values"], rtol=1e-12)
    # each fold's curve: in curves.npz only
    assert not any(k.startswith("val_loss_fold") for k in run.data.metrics)


def test_the_split_and_fold_keys_read_from_a_config_node_a_mapping_or_a_namespace():
    from types import SimpleNamespace as NS

    assert (
        data.folds_of(OmegaConf.create({"folds": 3})) == 3 and data.folds_of({"folds": None}) == 0
    )
    assert data.folds_of(NS(folds="4")) == 4 and data.folds_of(NS()) == 0 and data.folds_of({}) == 0
    assert data.folds_of({"folds": 5}) == 5  # a mapping's key, not an attribute
    # read before any store: a file's rows, or those a fold count must fit; a built-in split is not
    assert data.read_to_check({"name": "iris", "folds": 3}) and data.read_to_check(
        {"path": "a.csv"}
    )
    assert not data.read_to_check({"name": "iris", "folds": 0}) and not data.read_to_check({})
    assert data.split_seed(OmegaConf.create({"split_seed": 5}), default=9) == 5
    assert data.split_seed({"split_seed": 0}, default=9) == 0  # a seed of 0 is a seed
    assert data.split_seed(NS(split_seed="7")) == 7 and data.split_seed(NS(), default=9) == 9
    assert (
        data.split_seed({}, default=2) == 2
        and data.split_seed(OmegaConf.create({"split_seed": None})) == 0
    )


def test_a_configuration_trains_once_per_fold_or_once_on_its_split_and_its_run_says_k():
    from sweeper.job import crossval
    from sweeper.job.compute import Outcome

    assert data.fold_indexes({"folds": 3}) == (0, 1, 2)
    assert data.fold_indexes({"folds": 0}) == (None,) and data.fold_indexes({}) == (None,)
    assert (
        crossval.run_tags({"folds": 4}) == {"folds": "4"} and crossval.run_tags({"folds": 0}) == {}
    )
    one = Outcome({"val_mse": 2.0}, {}, None)
    assert crossval.outcome([one]) is one  # its one split's, untouched
    two = Outcome({"val_mse": 4.0}, {}, None)
    combined = crossval.outcome([one, two]).scores
    assert combined["val_mse"] == 3.0 and combined["val_mse_std"] == 1.0
    assert (combined["val_mse_fold0"], combined["val_mse_fold1"]) == (2.0, 4.0)


def test_a_configurations_folds_combine_into_sums_counts_means_and_the_first_folds_model():
    """crossval.combine by hand: times summed, group time kept, the longest fold's epochs, the mean best epoch
    rounded, epochs_per_s over the summed time, quality scores averaged in float64 (float32 folds, as a GPU
    leaves them) with ddof=0 std and each fold's, the mean curve on the steps every fold sampled, fold 0's model."""
    from sweeper.job import crossval
    from sweeper.job.compute import Outcome

    f32 = np.float32
    vals = [f32(0.1), f32(0.2), f32(0.7)]  # their float32 mean is not their float64 mean
    loss = [
        np.array([3.0, 2.0, 1.0], f32),
        np.array([5.0, 4.0], f32),
        np.array([0.1, 0.2, 0.3], f32),
    ]
    steps = [np.array([0, 10, 20]), np.array([0, 10]), np.array([0, 10, 20])]
    outs = [
        Outcome(
            {
                "train_time_s": 0.25,
                "warmup_time_s": 1.0 + i,
                "h2d_time_s": 0.5,
                "group_train_time_s": 9.0 + i,
                "epochs_run": e,
                "best_epoch": b,
                "val_mse": vals[i],
                "test_mse": 2.0 * (i + 1),
                "lr_used": 0.1,  # not a quality score: neither averaged nor per fold
            }
            | ({} if i == 1 else {"val_r2": 0.5}),  # fold 1 lacks it: no mean of it
            {"train_loss": (steps[i], loss[i])}
            | ({"val_loss": (steps[i], loss[i])} if i == 0 else {}),
            None,
            [np.full(2, i)],
            np.full(3, float(i)),
            [f"w{i}"],
            f"predict{i}",
        )
        for i, (e, b) in enumerate([(4, 2), (5, 3), (3, 3)])
    ]
    got = crossval.combine(outs)
    mean = (float(vals[0]) + float(vals[1]) + float(vals[2])) / 3
    std = math.sqrt(sum((float(v) - mean) ** 2 for v in vals) / 3)
    assert got.scores == {
        "train_time_s": 0.75,
        "warmup_time_s": 6.0,
        "h2d_time_s": 1.5,
        "group_train_time_s": 9.0,  # the group's: fold 0's, not a sum
        "epochs_run": 5,
        "best_epoch": 3,  # round(8 / 3)
        "epochs_per_s": 12 / 0.75,
        "val_mse": mean,
        "val_mse_std": std,
        **{f"val_mse_fold{i}": float(v) for i, v in enumerate(vals)},
        "test_mse": 4.0,
        **{f"test_mse_fold{i}": 2.0 * (i + 1) for i in range(3)},
    }
    assert got.reason is None and got.error is None
    (s, v), want = got.curves["train_loss"], sum(x[:2].astype(np.float64) for x in loss) / 3
    assert s.tolist() == [0, 10] and v.dtype == np.float64 and v.tolist() == want.tolist()
    assert got.curves["val_loss"][1].tolist() == [
        3.0,
        2.0,
        1.0,
    ]  # fold 0's only curve: fold 0 alone
    assert sorted(got.fold_curves) == [
        "train_loss_fold0",
        "train_loss_fold1",
        "train_loss_fold2",
        "val_loss_fold0",
    ]
    assert got.fold_curves["train_loss_fold1"][1] is loss[1]
    first = outs[0]
    assert (
        (got.params, got.test_pred, got.param_names, got.predict)
        == (first.params, first.test_pred, first.param_names, first.predict)
        and got.params is first.params
        and got.test_pred is first.test_pred
    )

    # a fold without epochs_run or best_epoch: 0 of them; without a time: none summed, 0 epochs a second
    a = Outcome({"epochs_run": 4, "best_epoch": 2, "train_time_s": 1.0}, {}, None)
    got = crossval.combine([a, Outcome({"train_time_s": 1.0}, {}, None)])
    assert got.scores == {
        "train_time_s": 2.0,
        "epochs_run": 4,
        "best_epoch": 1,
        "epochs_per_s": 2.0,
    }
    got = crossval.combine([a, Outcome({"epochs_run": 2, "best_epoch": 5}, {}, None)])
    assert got.scores == {"epochs_run": 4, "best_epoch": 4, "epochs_per_s": 0.0}

    # a fold that failed fails the configuration, named; no mean scores, its error kept
    bad = Outcome(
        {"train_time_s": 0.5, "val_mse": 9.0},
        {"train_loss": (steps[1], loss[1])},
        "diverged",
        error="tb",
    )
    got = crossval.combine([outs[0], bad, outs[2]])
    assert type(got) is Outcome and (got.reason, got.error) == ("fold 1: diverged", "tb")
    assert got.scores["train_time_s"] == 1.0 and "val_mse" not in got.scores and got.params == []
    assert got.curves["train_loss"][1].tolist() == want.tolist()
    assert sorted(got.fold_curves) == [
        "train_loss_fold0",
        "train_loss_fold1",
        "train_loss_fold2",
        "val_loss_fold0",
    ]


def test_a_run_read_back_says_its_k_and_its_refit_keeps_only_the_configurations_overrides():
    from sweeper.job import crossval

    assert crossval.of_run({"folds": "5"}) == 5 and crossval.of_run({"task": "binary"}) == 0
    swept = "lr=0.1 data.folds=5 hydra.job.num=3 resume=true data.val_fraction=0.2 depth=2"
    assert crossval.refit_overrides(swept) == [
        "lr=0.1",
        "depth=2",
        "data.folds=0",
        "data.val_fraction=0",
    ]


def test_what_a_report_shows_of_a_cross_validated_run_and_nothing_of_one_split():
    """The leaderboard's row, columns and legend, a run's standing, promotion's summary and the
    refit's description: each from the run's tag folds=k (and val_<metric>_std), none for one split."""
    from types import SimpleNamespace as NS

    from sweeper.job import crossval

    cv, one = {"folds": "5", "task": "regression"}, {"task": "regression"}
    m = {"val_mse": 1.5, "val_mse_std": 0.25}
    assert crossval.row(cv, m, "mse") == {"folds": 5, "val_mse_fold_std": 0.25}
    assert crossval.row(one, {"val_mse": 1.5}, "mse") == {"folds": None, "val_mse_fold_std": None}
    rows = [crossval.row(one, {}, "mse"), crossval.row(cv, m, "mse")]
    assert crossval.columns(rows, "mse") == ["val_mse_fold_std", "folds"]
    assert crossval.columns(rows[:1], "mse") == []
    assert crossval.legend("r2") == (
        "(folds: k-fold cross-validation (data.folds=k): val_r2 is the mean over a run's k folds, "
        "ranked by it; val_r2_fold_std their std; test_r2 the fold models' mean)"
    )
    assert crossval.said(rows[1], "val_mse") == "val_mse is the mean over its 5 folds"
    assert crossval.said(rows[0], "val_mse") is None
    assert crossval.described(cv) == "cross-validated on 5 folds"
    run = NS(info=NS(run_id="r1"), data=NS(tags=cv, metrics=m))
    assert crossval.summary(run, "val_mse") == {
        "run_id": "r1",
        "folds": 5,
        "val_mse": 1.5,
        "val_mse_std": 0.25,
    }
    assert crossval.OFF == crossval.REFIT_OVERRIDES[0] == "data.folds=0"


def test_the_advisor_reads_a_runs_fold_scores_back_in_fold_order_up_to_a_gap():
    from sweeper.job import crossval

    m = {"val_mse_fold0": 1.0, "val_mse_fold1": "2.5", "val_mse_fold3": 9.0, "val_mse": 1.75}
    assert crossval.scores(m, "val_mse") == [1.0, 2.5]  # fold 2 missing: fold 3 is not read
    assert crossval.scores(m | {"val_mse_fold2": 4.0}, "val_mse") == [1.0, 2.5, 4.0, 9.0]
    assert crossval.scores(m | {"val_mse_fold1": float("nan")}, "val_mse") == []  # one score: none
    assert crossval.scores({"val_mse": 1.0}, "val_mse") == []


def test_one_experiments_jobs_must_share_data_folds_and_other_experiments_may_differ():
    from sweeper.job import crossval

    def job(k, experiment="iris"):
        return (
            [f"data.folds={k}"],
            {"tracking": {"uri": "u", "experiment": experiment}, "data": {"folds": k}},
        )

    assert crossval.mixed([job(3), job(3), ([], None)]) is None
    assert crossval.mixed([job(3), job(0)]).startswith("data.folds=0,3 is not allowed in one sweep")
    assert crossval.mixed([job(0), job(3, "other")]) is None
    other_store = ([], {"tracking": {"uri": "v", "experiment": "iris"}, "data": {"folds": 0}})
    assert crossval.mixed([job(3), other_store]) is None  # the same name in another store
    assert crossval.mixed([job(3), job(0), job(5)]) == (
        "data.folds=0,3,5 is not allowed in one sweep of experiment iris: expected one value; val_ "
        "metrics of one split (0) and of a k-fold mean (k) are no fair ranking against each other: "
        "sweep each value on its own (or into another tracking.experiment)"
    )


def test_a_fraction_takes_at_least_one_row_and_too_few_training_rows_are_refused():
    train, val, test = data.split(10, 0.04, 0.04, 3)  # 0.4 rows each: one row each, not none
    assert (len(train), len(val), len(test)) == (8, 1, 1)
    assert sorted(np.concatenate([train, val, test]).tolist()) == list(range(10))
    # no validation fraction: validate on the training rows
    train, val, test = data.split(10, 0.0, 0.3, 3)
    assert (len(train), len(test)) == (7, 3) and val is train
    node = OmegaConf.create({"val_fraction": 0.25, "test_fraction": 0.25})
    assert len(data._split(4, node, 0, "data=x")[0]) == 2  # 2 training rows: enough
    with pytest.raises(data.DataError) as e:
        data._split(3, node, 0, "data=x")
    assert str(e.value) == (
        "data=x: too few rows (3) for data.val_fraction=0.25 and data.test_fraction=0.25: training "
        "needs at least 2 rows, validation and test 1 each; add rows, or set both fractions to 0 to "
        "score on the training rows"
    )
    # a split without a task is a regression's: folds dealt in the seed's order, unstratified
    order = np.random.default_rng(4).permutation(10)
    test, rest = (
        order[:2],
        order[2:],
    )  # round(10 * 0.2) test rows, then fold i takes every k-th of the rest
    train, val, held = data._split(
        10, OmegaConf.create({"folds": 2, "test_fraction": 0.2}), 4, "data=x", fold=1
    )
    assert (train.tolist(), val.tolist(), held.tolist()) == (
        sorted(rest[0::2]),
        rest[1::2].tolist(),
        test.tolist(),
    )


def test_k_folds_for_classes_regression_and_no_test_split():
    """Multi-class folds hold each class to within one row; a regression target never stratifies; a test fraction of
    0 leaves every row to the folds; the fold count is checked against each class's rows and the rows."""
    raw = data.LOADERS["iris"](None, 0)
    y = raw.y.reshape(-1, 1)  # a column, as the loaders give it
    folds, test = data.split_folds(len(y), 0.2, 0, 4, y, "multiclass")
    rest = np.setdiff1d(np.arange(len(y)), test)
    assert sorted(np.concatenate(folds).tolist()) == rest.tolist()
    for c in np.unique(y):
        counts = [int((y[f].ravel() == c).sum()) for f in folds]
        assert max(counts) - min(counts) <= 1, (c, counts)
    target = np.linspace(0, 1, 30).reshape(-1, 1)  # a regression target: its values are no classes
    reg = data.split_folds(30, 0.2, 0, 3, target, "regression")
    assert all(np.array_equal(a, b) for a, b in zip(reg[0], data.split_folds(30, 0.2, 0, 3)[0]))
    folds, test = data.split_folds(12, 0.0, 0, 3)
    assert sorted(test.tolist()) == list(range(12)) and sorted(
        np.concatenate(folds).tolist()
    ) == list(range(12))
    small = data.split_folds(10, 0.04, 0, 3)[1]
    assert len(small) == 1  # 0.4 test rows: one
    node = OmegaConf.create({"test_fraction": 0.2, "folds": 5})
    with pytest.raises(ValueError, match="^fold 5 of data.folds=5$"):
        data._fold_split(30, node, 0, "data=x", None, "regression", 5, 5)
    labels = np.array([0] * 26 + [1] * 4).reshape(-1, 1)  # one class of 4 rows: not 5 folds of it
    with pytest.raises(data.DataError) as e:
        data._fold_split(30, node, 0, "data=x", labels, "binary", 5, 0)
    rows = int(
        (labels[np.concatenate(data.split_folds(30, 0.2, 0, 5, labels, "binary")[0])] == 1).sum()
    )
    assert str(e.value) == (
        f"data.folds=5 is not allowed for data=x: expected at most {rows}: its smallest class (1) "
        f"has {rows} rows outside the test split, and every fold validates on each class"
    )
    with pytest.raises(data.DataError) as e:
        # 9 non-test rows: 4 folds at most
        data._fold_split(11, node, 0, "data=x", None, "regression", 5, 0)
    assert str(e.value) == (
        "data.folds=5 is not allowed for data=x: expected at most 4 (its 9 non-test rows: every "
        "fold trains and validates on at least 2 rows)"
    )
    train, val, test = data._fold_split(30, node, 0, "data=x", None, "regression", 5, 2)
    assert np.array_equal(val, data.split_folds(30, 0.2, 0, 5)[0][2]) and np.all(np.diff(train) > 0)

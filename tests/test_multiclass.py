"""Multi-class targets and the optimizer keys end to end: accuracy on iris and digits, the depth-0 model
against scikit-learn's multinomial logistic regression, the metrics against scikit-learn's, mini-batch
determinism, the new keys' checks and fingerprints, a batched sweep over them, promote and the pyfunc model."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from omegaconf import OmegaConf

from conftest import all_runs, cli, make_cfg, run_once
from sweeper import data, promote
from sweeper.job import metrics
from sweeper.base.backend import resolve
from sweeper.contract.config import ADDED_DEFAULTS, ConfigError, check_overrides, validate
from sweeper.contract.fingerprint import fingerprint
from sweeper.job.compute import train_and_score


def trained(*overrides: str):
    cfg = make_cfg(*overrides)
    dataset = data.load(cfg.data, cfg.seed)
    return dataset, train_and_score(cfg, dataset, resolve("cpu"))


def test_iris_and_wine_and_digits_load_as_scikit_learn_does():
    from sklearn import datasets

    for name, loader in (
        ("iris", datasets.load_iris),
        ("wine", datasets.load_wine),
        ("digits", datasets.load_digits),
    ):
        raw = data.LOADERS[name](None, 0)
        ref = loader()
        np.testing.assert_array_equal(raw.X, ref.data)
        np.testing.assert_array_equal(raw.y, ref.target)
        assert raw.task == "multiclass" and raw.classes == tuple(str(c) for c in ref.target_names)


def test_iris_depth_1_reaches_93_percent_test_accuracy():
    ds, out = trained("data=iris", "depth=1", "epochs=1000", "lr=0.1")
    assert ds.n_outputs == 3 and out.reason is None
    assert out.scores["test_accuracy"] >= 0.93
    assert out.test_pred.shape == (len(ds.X_test), 3) and np.allclose(
        out.test_pred.sum(axis=1), 1.0
    )
    assert len(out.params[-1][0]) == 3  # three output biases


def test_digits_depth_1_width_64_reaches_95_percent_test_accuracy():
    ds, out = trained("data=digits", "depth=1", "width=64", "epochs=500", "lr=0.5")
    assert ds.n_outputs == 10 and out.scores["test_accuracy"] >= 0.95


def test_depth_0_on_iris_matches_multinomial_logistic_regression():
    from sklearn.linear_model import LogisticRegression

    ds, out = trained("data=iris", "depth=0", "epochs=20000", "lr=0.5", "optimizer=momentum")
    # unpenalised
    ref = LogisticRegression(C=np.inf, max_iter=10_000).fit(ds.X_train, ds.y_train.ravel())
    assert out.scores["test_accuracy"] == pytest.approx(
        ref.score(ds.X_test, ds.y_test.ravel()), abs=1e-12
    )
    np.testing.assert_array_equal(out.test_pred.argmax(axis=1), ref.predict(ds.X_test))


def test_multiclass_metrics_match_scikit_learn():
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, log_loss

    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 200)
    y[:3] = 3  # class 3 is true but (below) never predicted
    prob = rng.dirichlet(np.ones(4), 200)
    prob[:, 3] *= 0.01
    got = metrics.multiclass(y.astype(float), prob)
    pred = prob.argmax(axis=1)
    assert got["accuracy"] == pytest.approx(accuracy_score(y, pred), rel=1e-12)
    assert got["f1_macro"] == pytest.approx(
        f1_score(y, pred, average="macro", zero_division=0), rel=1e-12
    )
    assert got["log_loss"] == pytest.approx(
        log_loss(y, prob / prob.sum(axis=1, keepdims=True)), rel=1e-12
    )
    np.testing.assert_array_equal(
        metrics.confusion(y, prob), confusion_matrix(y, pred, labels=range(4))
    )


def test_mini_batches_are_deterministic_and_seeded():
    args = (
        "data=wine",
        "depth=1",
        "epochs=20",
        "log_every=5",
        "lr=0.01",
        "optimizer=adam",
        "batch_size=16",
    )
    _, a = trained(*args)
    _, b = trained(*args)
    _, other_seed = trained(*args, "seed=1", "data.val_fraction=0.2")
    _, full = trained(*args[:-1], "batch_size=0")
    quality = [k for k in a.scores if k.startswith(("val_", "test_"))]
    assert {k: a.scores[k] for k in quality} == {k: b.scores[k] for k in quality}
    np.testing.assert_array_equal(a.curves["train_loss"][1], b.curves["train_loss"][1])
    assert not np.array_equal(a.curves["train_loss"][1], full.curves["train_loss"][1])
    assert not np.array_equal(a.curves["train_loss"][1], other_seed.curves["train_loss"][1])


@pytest.mark.parametrize(
    "override, allowed",
    [
        ("optimizer=sgd", "one of gd, momentum, adam"),
        ("momentum=1.0", "a number in [0, 1)"),
        ("nesterov=yes", "true or false"),
        ("beta1=-0.1", "a number in [0, 1)"),
        ("beta2=1", "a number in [0, 1)"),
        ("eps=0", "a number > 0"),
        ("batch_size=-1", "an integer >= 0 (0 = the full batch)"),
        ("batch_size=0.5", "an integer >= 0 (0 = the full batch)"),
        ("weight_decay=-1e-3", "a number >= 0"),
    ],
)
def test_new_keys_are_checked_before_any_work(override, allowed):
    key, value = override.split("=")
    with pytest.raises(
        ConfigError,
        match=r"^"
        + key
        + "=.* is not allowed: expected "
        + allowed.replace("(", r"\(").replace(")", r"\)").replace("[", r"\["),
    ):
        check_overrides([override, "lr=0.1"])
    with pytest.raises(ConfigError, match=f"^{key}="):
        check_overrides([f"{key}=0.5,{value}"])  # every value of a sweep


def test_a_bad_new_key_on_the_command_line_is_one_line_and_exit_2(tmp_path, store):
    proc = cli(tmp_path, "-m", "optimizer=gd,rmsprop", "data=iris", store=store)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "sweeper: error: optimizer=rmsprop is not allowed: expected one of gd, momentum, adam"
    ]
    assert not all_runs(store)


def test_new_keys_at_their_defaults_keep_the_old_fingerprint():
    cfg = OmegaConf.to_container(make_cfg("data=iris"), resolve=True)
    old = {k: v for k, v in cfg.items() if k not in ADDED_DEFAULTS}  # a config from before the keys
    validate(make_cfg("data=iris"))
    assert fingerprint(cfg) == fingerprint(old)
    for key, value in [
        ("optimizer", "adam"),
        ("batch_size", 32),
        ("weight_decay", 1e-4),
        ("nesterov", True),
        ("beta2", 0.99),
    ]:
        assert fingerprint({**cfg, key: value}) != fingerprint(cfg), key


@pytest.fixture(scope="module")
def iris_sweep(tmp_path_factory, _template_store):
    import shutil

    tmp = tmp_path_factory.mktemp("iris_sweep")
    db = tmp / "mlflow.db"
    shutil.copy(_template_store, db)
    proc = cli(
        tmp,
        "-m",
        "data=iris",
        "optimizer=gd,adam",
        "batch_size=0,32",
        "lr=0.05,0.1",
        "epochs=60",
        "log_every=10",
        "tracking.log_model=false",
        store=db,
    )
    assert proc.returncode == 0, proc.stderr
    return tmp, db


@pytest.mark.slow
def test_a_sweep_over_optimizer_and_batch_size_runs_every_configuration(iris_sweep):
    tmp, db = iris_sweep
    runs = [r for r in all_runs(db) if "fingerprint" in r.data.tags]
    assert len(runs) == 8 and all(r.info.status == "FINISHED" for r in runs)
    combos = {
        (r.data.params["optimizer"], r.data.params["batch_size"], r.data.params["lr"]) for r in runs
    }
    assert len(combos) == 8 and len({r.data.tags["fingerprint"] for r in runs}) == 8
    for r in runs:
        assert {"val_accuracy", "val_f1_macro", "val_log_loss", "test_accuracy"} <= set(
            r.data.metrics
        )
        assert (
            r.data.tags["sweeper.launcher"] == "batched"
            and r.data.tags["sweeper.group_size"] == "2"
        )  # 4 groups: the lrs
    artifacts = {p.name for p in (tmp / "sweep").glob("*/confusion_matrix.csv")}
    assert (
        artifacts == {"confusion_matrix.csv"}
        and len(list((tmp / "sweep").glob("*/confusion_matrix.csv"))) == 8
    )


def test_promote_ranks_multiclass_runs_by_val_accuracy_and_keeps_the_new_keys(iris_sweep, tmp_path):
    _, db = iris_sweep
    out = tmp_path / "promoted"
    assert (
        promote.main(
            [
                "--tracking-uri",
                f"sqlite:///{db}",
                "--out-dir",
                str(out),
                "--experiment",
                "iris",
                "--name",
                "iris_top",
            ]
        )
        == 0
    )
    doc = yaml.safe_load((out / "iris_top.yaml").read_text())
    assert doc["pinned"]["task"] == "multiclass" and doc["pinned"]["metric"] == "val_accuracy"
    assert (
        doc["optimizer"] in ("gd", "adam")
        and doc["batch_size"] in (0, 32)
        and "weight_decay" in doc
    )
    assert "val_f1_macro" in doc["pinned"]["expected"]


def test_batched_groups_take_every_optimizer_mini_batches_weight_decay_and_classes(tmp_path):
    from sweeper.sweep import launch

    def job(i, *o):
        cfg = make_cfg(*o)
        return launch.Job(i, list(o), cfg, OmegaConf.to_container(cfg, resolve=True))

    base = ("data=diabetes", "epochs=100", "log_every=10")
    jobs = [
        job(0, *base, "lr=0.1"),
        job(1, *base, "lr=0.2"),
        job(2, *base, "optimizer=adam"),
        job(3, *base, "optimizer=adam", "lr=0.2"),
        job(4, *base, "batch_size=32"),
        job(5, *base, "batch_size=32", "lr=0.2"),
        job(6, *base, "weight_decay=0.1"),
        job(7, *base, "weight_decay=0.1", "lr=0.2"),
        job(8, "data=iris", "epochs=100", "log_every=10"),
        job(9, "data=iris", "epochs=100", "log_every=10", "lr=0.2"),
    ]
    groups, alone = launch.plan(jobs)
    assert (
        sorted([j.idx for j in g] for g in groups) == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
        and not alone
    )


def test_the_pyfunc_model_returns_class_probabilities(tmp_path, store):
    import mlflow.pyfunc

    result = run_once(
        tmp_path, "data=iris", "depth=1", "epochs=200", "log_every=20", "lr=0.1", store=store
    )
    assert result["status"] == "FINISHED" and "confusion_matrix.csv" in result["artifacts"]["files"]
    model = mlflow.pyfunc.load_model(str(tmp_path / "job" / result["artifacts"]["models"]["model"]))
    ds = data.load(make_cfg("data=iris").data, 0)
    import pandas as pd

    prob = model.predict(pd.DataFrame(ds.raw(ds.X_test), columns=ds.input_columns))
    assert list(prob.columns) == ["p_setosa", "p_versicolor", "p_virginica"]  # the classes by name
    assert prob.shape == (len(ds.X_test), 3) and np.allclose(prob.sum(axis=1), 1.0)
    saved = pd.read_csv(tmp_path / "job" / "test_predictions.csv")
    np.testing.assert_allclose(prob, saved[list(prob.columns)], rtol=1e-12)
    # labels, not indices
    assert saved["y_pred"].tolist() == [ds.classes[i] for i in prob.to_numpy().argmax(axis=1)]
    assert saved["y_true"].tolist() == [ds.classes[int(i)] for i in ds.y_test.ravel()]

"""depth=0 is linear / logistic regression: the trained models agree with scikit-learn's solvers."""

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LinearRegression, LogisticRegression

from sweeper import data
from conftest import make_cfg, run_once


def test_linear_regression_reaches_least_squares_test_mse(tmp_path, store):
    result = run_once(
        tmp_path, "data=diabetes", "depth=0", "lr=0.1", "epochs=5000", "log_every=100", store=store
    )
    ds = data.load(make_cfg("data=diabetes").data, seed=0)
    ref = LinearRegression().fit(ds.X_train, ds.to_original(ds.y_train).ravel())
    ref_mse = float(np.mean((ref.predict(ds.X_test) - ds.to_original(ds.y_test).ravel()) ** 2))

    assert result["status"] == "FINISHED"
    assert result["metrics"]["test_mse"] == pytest.approx(ref_mse, rel=0.01)


def test_logistic_regression_matches_scikit_learn(tmp_path, store):
    """Unpenalised logistic regression has a unique optimum only on data that are not separable.

    All 30 breast_cancer features separate the training rows (train accuracy 1.0): the maximum-likelihood
    weights are at infinity and scikit-learn's own solvers disagree by up to 2.6 accuracy points.
    On the first two features (mean radius, mean texture) the optimum is unique, and gradient descent
    must reach scikit-learn's coefficients and its test accuracy.
    """
    X, y = load_breast_cancer(return_X_y=True)
    path = tmp_path / "breast_cancer_2.npz"
    np.savez(path, X=X[:, :2], y=y)
    result = run_once(
        tmp_path, "data=csv", f"data.path={path}", "depth=0", "lr=1.0", "epochs=20000", store=store
    )

    ds = data.load(make_cfg("data=csv", f"data.path={path}").data, seed=0)
    ref = LogisticRegression(C=np.inf, tol=1e-10, max_iter=10_000).fit(
        ds.X_train, ds.y_train.ravel()
    )
    ref_accuracy = ref.score(ds.X_test, ds.y_test.ravel())

    assert result["task"] == "binary" and result["status"] == "FINISHED"
    assert abs(result["metrics"]["test_accuracy"] - ref_accuracy) <= 0.01
    ref_log_loss = -np.mean(
        np.log(np.where(ds.y_test.ravel() == 1, *ref.predict_proba(ds.X_test).T[::-1]))
    )
    assert result["metrics"]["test_log_loss"] == pytest.approx(ref_log_loss, rel=1e-4)


@pytest.mark.parametrize("seed", range(5))
def test_binary_metrics_match_scikit_learn(seed):
    from sklearn.metrics import f1_score, log_loss, roc_auc_score

    from sweeper.job.metrics import binary

    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, 200)
    prob = np.round(rng.random(200), 2 if seed % 2 else 6)  # rounding makes ties
    if seed == 4:
        prob[:] = 0.3  # nothing predicted positive: F1 = 0
    got = binary(y.astype(float), prob)
    assert got["f1"] == pytest.approx(f1_score(y, prob >= 0.5, zero_division=0.0), rel=1e-12)
    assert got["log_loss"] == pytest.approx(
        log_loss(y, np.clip(prob, 1e-15, 1 - 1e-15), labels=[0, 1]), rel=1e-12
    )
    assert got["roc_auc"] == pytest.approx(roc_auc_score(y, prob), rel=1e-12)


def test_bundled_data_sets_are_read_as_scikit_learn_returns_them():
    from sklearn.datasets import load_breast_cancer, load_diabetes

    from sweeper.data import loaders

    for ours, theirs in (
        (loaders.diabetes(None, 0), load_diabetes(return_X_y=True)),
        (loaders.breast_cancer(None, 0), load_breast_cancer(return_X_y=True)),
    ):
        np.testing.assert_allclose(ours.X, theirs[0], rtol=1e-12, atol=1e-15)
        np.testing.assert_array_equal(ours.y, theirs[1])

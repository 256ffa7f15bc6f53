"""Data sets: loaders, the seeded split, scaling fitted on the training rows only, clear errors."""

import json

import numpy as np
import pytest

from sweeper import data
from conftest import all_runs, cli, make_cfg, run_once, write_csv
from sweeper.data import DataError


def load(*overrides, seed=0):
    return data.load(make_cfg(*overrides).data, seed)


@pytest.mark.parametrize(
    "name, task, n, d",
    [
        ("xor", "binary", 4, 2),
        ("diabetes", "regression", 442, 10),
        ("breast_cancer", "binary", 569, 30),
    ],
)
def test_bundled_data_sets(name, task, n, d):
    ds = load(f"data={name}")
    assert ds.task == task and ds.n_features == d
    rows = len(ds.X_train) + (len(ds.X_val) + len(ds.X_test) if name != "xor" else 0)
    assert rows == n
    assert ds.y_train.shape == (len(ds.X_train), 1)


def test_split_is_seeded_disjoint_and_scaled_on_train_only():
    a, b, c = load(seed=0), load(seed=0), load(seed=1)
    np.testing.assert_array_equal(a.X_test, b.X_test)
    assert not np.array_equal(a.X_test, c.X_test)
    assert (len(a.X_train), len(a.X_val), len(a.X_test)) == (266, 88, 88)
    np.testing.assert_allclose(a.X_train.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(a.X_train.std(axis=0), 1, atol=1e-12)
    assert np.abs(a.X_test.mean(axis=0)).max() > 1e-3  # test rows did not take part in the fit
    # regression targets are standardised for training and mapped back for scoring
    assert a.y_train.mean() == pytest.approx(0, abs=1e-12)
    raw = np.concatenate(
        [a.to_original(a.y_train), a.to_original(a.y_val), a.to_original(a.y_test)]
    )
    from sklearn.datasets import load_diabetes

    assert sorted(raw.ravel()) == pytest.approx(sorted(load_diabetes().target))


def test_xor_reuses_its_four_points_for_validation_and_test():
    ds = load("data=xor")
    np.testing.assert_array_equal(ds.X_train, ds.X_test)
    np.testing.assert_array_equal(ds.y_val, ds.y_train)


def test_synthetic_has_the_requested_size_and_task():
    ds = load("data=synthetic", "data.n_samples=500", "data.n_features=7", "data.task=binary")
    assert ds.task == "binary" and ds.n_features == 7
    assert len(ds.X_train) + len(ds.X_val) + len(ds.X_test) == 500
    assert set(np.unique(ds.y_train)) == {0.0, 1.0}
    reg = load("data=synthetic", "data.n_samples=300", "data.n_features=3")
    assert reg.task == "regression" and len(np.unique(reg.y_train)) > 100


@pytest.fixture
def table():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((40, 3))
    y = (X[:, 0] > 0).astype(float)
    return X, y


def test_csv_json_and_npz_files_load_alike(tmp_path, table):
    X, y = table
    csv = tmp_path / "t.csv"
    csv.write_text("a,b,label,c\n" + "\n".join(f"{r[0]},{r[1]},{t},{r[2]}" for r, t in zip(X, y)))
    tsv = tmp_path / "t.tsv"
    tsv.write_text("\n".join("\t".join(map(str, [t, *r])) for r, t in zip(X, y)))
    records = tmp_path / "r.json"
    records.write_text(
        json.dumps([{"a": r[0], "b": r[1], "c": r[2], "label": t} for r, t in zip(X, y)])
    )
    columns = tmp_path / "c.json"
    columns.write_text(
        json.dumps({"a": list(X[:, 0]), "b": list(X[:, 1]), "c": list(X[:, 2]), "label": list(y)})
    )
    npz = tmp_path / "t.npz"
    np.savez(npz, X=X, y=y)

    loaded = [
        load("data=csv", f"data.path={csv}", "data.target=label"),
        load("data=csv", f"data.path={tsv}", "data.target=0", "data.header=false", "data.sep=tab"),
        load("data=csv", f"data.path={records}", "data.target=label"),
        load("data=csv", f"data.path={columns}", "data.target=label"),
        load("data=csv", f"data.path={npz}"),
    ]
    for ds in loaded:
        assert ds.task == "binary"
        np.testing.assert_allclose(np.abs(ds.X_train), np.abs(loaded[-1].X_train), atol=1e-9)
        np.testing.assert_array_equal(ds.y_test, loaded[-1].y_test)


@pytest.mark.parametrize(
    "content, overrides, message",
    [
        ("a,b\n1,x\n2,3\n", ["data.target=b"], "column b holds a non-numeric value 'x'"),
        ("a,b\n1,2\n3\n", [], "rows have different numbers of fields"),
        ("a,b\n1,2\n3,4\n", ["data.target=zz"], "data.target=zz is not a column"),
        (
            "a,Price\n1,2\n3,4\n",
            ["data.target=price"],
            r"data.target=price is not a column of .*bad.csv \(did you mean Price\?\): columns are",
        ),
        ("a,b\n1,2\n3,4\n", ["data.target=5"], "data.target=5 is out of range"),
        (
            "a,b\n1,2\n3,4\n5,6\n",
            ["data.task=binary", "data.target=a"],
            "data.task=binary needs two distinct values",
        ),
    ],
)
def test_bad_files_give_one_line_errors(tmp_path, content, overrides, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(DataError, match=message) as err:
        load("data=csv", f"data.path={path}", *overrides)
    assert "\n" not in str(err.value) and str(path) in str(err.value) or "data." in str(err.value)


@pytest.mark.slow
def test_spambase_reaches_90_percent_test_accuracy(tmp_path, store, spambase_path):
    result = run_once(
        tmp_path,
        "data=spambase",
        f"data.path={spambase_path}",
        "depth=1",
        "width=16",
        "lr=0.1",
        "epochs=2000",
        store=store,
    )
    assert result["status"] == "FINISHED"
    assert result["metrics"]["test_accuracy"] >= 0.90


@pytest.mark.parametrize(
    "fractions, said",
    [
        (
            {"val_fraction": 0.0, "test_fraction": 0.2},
            "validation = the training rows (data.val_fraction=0)",
        ),
        (
            {"val_fraction": 0.2, "test_fraction": 0.0},
            "test = the training rows (data.test_fraction=0)",
        ),
    ],
)
def test_a_fraction_of_0_is_a_decision_said_and_tagged(fractions, said):
    """Before: data.val_fraction=0 selected on the training rows without a word."""
    from omegaconf import OmegaConf

    from sweeper import data

    ds = data.load(OmegaConf.create({"name": "diabetes", "split_seed": 0, **fractions}))
    assert ds.decisions["split"].startswith(said)
    assert data.decision_tags(ds)["decided.split"] == ds.decisions["split"]
    assert (
        "split"
        not in data.load(
            OmegaConf.create(
                {"name": "diabetes", "split_seed": 0, "val_fraction": 0.2, "test_fraction": 0.2}
            )
        ).decisions
    )


def test_a_fraction_of_0_is_a_warning_of_the_run(tmp_path, store):
    proc = cli(tmp_path, "data.val_fraction=0", "epochs=5", store=store)
    assert proc.returncode == 0, proc.stderr
    assert (
        "[WARNING] - data: split: validation = the training rows (data.val_fraction=0)"
        in proc.stdout + proc.stderr
    )
    (run,) = all_runs(store)
    assert run.data.tags["decided.split"].startswith("validation = the training rows")


@pytest.mark.parametrize(
    "big, error", [("y", "the target cannot be scaled"), ("b", "column b cannot be scaled")]
)
def test_values_near_1e308_are_refused_as_unscalable_data(tmp_path, big, error):
    from conftest import make_cfg
    from sweeper import data

    rows = [
        (
            i % 7,
            (i * 3) % 5 * (1.5e307 if big == "b" else 1),
            (i + 0.5) * (1.3e306 if big == "y" else 1),
        )
        for i in range(60)
    ]
    cfg = make_cfg("data=csv", f"data.path={write_csv(tmp_path, 'a,b,y', rows)}")
    with pytest.raises(data.DataError, match=error):
        data.load(cfg.data, cfg.seed)

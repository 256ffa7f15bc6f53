"""A table's columns (data=csv): text columns one-hot encoded from the training rows, data.drop/features,
the separator sniffed, and what was decided said on the Dataset, in the run's tags and its first log line."""

import logging

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from conftest import FAST_ARGS, cli, client_for, make_cfg, run_once
from test_data_files import load, refused
from sweeper import data
from sweeper.contract.config import ConfigError, validate
from sweeper.contract.fingerprint import fingerprint
from sweeper.data import encode_rows
from sweeper.data.columns import fit, typed

N = 120
RNG = np.random.default_rng(3)
SEX = RNG.choice(["M", "F", "I"], N)
LENGTH = RNG.uniform(0.1, 0.8, N)
WEIGHT = RNG.uniform(0.0, 2.0, N)
EFFECT = {"M": 2.0, "F": 0.0, "I": -2.0}


def write_table(path, target=None, sep=",", sex=SEX):
    """id, sex (M/F/I), length, weight and a target: by default a number that depends on sex and length."""
    y = (
        [
            3 * x + EFFECT.get(s, 0.0) + 0.05 * e
            for x, s, e in zip(LENGTH, sex, RNG.standard_normal(N))
        ]
        if target is None
        else target
    )
    rows = [sep.join(["id", "sex", "length", "weight", "rings"])]
    rows += [
        sep.join(map(str, [1000 + i, s, f"{x:.4f}", f"{w:.4f}", t]))
        for i, (s, x, w, t) in enumerate(zip(sex, LENGTH, WEIGHT, y))
    ]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_a_text_column_is_one_hot_encoded_from_the_training_rows_and_an_id_is_dropped(tmp_path):
    ds = load(write_table(tmp_path / "abalone.csv"), "data.drop=[id]")
    assert ds.task == "regression" and ds.n_features == 3 + 2  # sex as F, I, M; length; weight
    assert [c["name"] for c in ds.encoder["columns"]] == ["sex", "length", "weight"]
    assert ds.encoder["columns"][0]["categories"] == ["F", "I", "M"]
    onehot = ds.X_train[:, :3]
    # 0/1, not standardised
    assert set(np.unique(onehot)) == {0.0, 1.0} and (onehot.sum(axis=1) == 1).all()
    # numbers are
    assert abs(ds.X_train[:, 3].mean()) < 1e-12 and abs(ds.X_train[:, 3].std() - 1) < 1e-12
    assert ds.decisions["dropped"] == "id" and ds.decisions["encoded"].startswith(
        "sex (3 categories: F, I, M)"
    )
    assert "id" not in [c["name"] for c in ds.encoder["columns"]]
    # without data.drop the id (1000.. in row order) is found and dropped
    auto = load(tmp_path / "abalone.csv")
    assert auto.n_features == 5 and auto.decisions["ids"] == "id"
    # data.keep keeps it, as a number
    assert load(tmp_path / "abalone.csv", "data.keep=[id]").n_features == 6


def test_data_features_keeps_only_those_columns(tmp_path):
    ds = load(write_table(tmp_path / "t.csv"), "data.features=[length,sex]")
    assert [c["name"] for c in ds.encoder["columns"]] == ["length", "sex"] and ds.n_features == 4
    assert ds.decisions["dropped"] == "id, weight"
    # an index too
    assert load(tmp_path / "t.csv", "data.features=[2]", "data.drop=[]").n_features == 1


def test_a_category_seen_only_in_validation_rows_is_all_zeros_not_an_error(tmp_path):
    train, val, test = data.split(N, 0.2, 0.2, seed=0)
    sex = SEX.copy()
    sex[val[0]] = "U"  # one row of a category the training rows never see
    ds = load(write_table(tmp_path / "t.csv", sex=sex), "data.drop=[id]")
    assert ds.encoder["columns"][0]["categories"] == ["F", "I", "M"]
    assert ds.X_val[0, :3].tolist() == [0.0, 0.0, 0.0]
    assert (ds.X_val[1:, :3].sum(axis=1) == 1).all()


def test_the_encoder_takes_raw_rows_as_a_dataframe_records_or_lists():
    cols = [typed("sex", ["M", "F", "I", "M"]), typed("length", ["0.5", "0.25", "0.75", "1"])]
    state = fit(cols, np.arange(4), max_categories=10)
    rows = [
        ["M", 0.5],
        ["X", 0.25],
        [" F ", 2],
    ]  # an unseen category; spaces around a category are not part of it
    expected = encode_rows(state, rows)
    mean, std = np.mean([0.5, 0.25, 0.75, 1]), np.std([0.5, 0.25, 0.75, 1])
    assert np.allclose(
        expected,
        [
            [0, 0, 1, (0.5 - mean) / std],
            [0, 0, 0, (0.25 - mean) / std],
            [1, 0, 0, (2 - mean) / std],
        ],
    )
    records = [{"length": x, "sex": s, "other": 1} for s, x in rows]
    assert np.array_equal(encode_rows(state, records), expected)
    assert np.array_equal(encode_rows(state, pd.DataFrame(records)), expected)


@pytest.mark.slow
def test_a_table_trains_logs_its_decisions_and_its_model_predicts_from_raw_rows(
    tmp_path, store, caplog
):
    import mlflow.pyfunc

    path = write_table(tmp_path / "abalone.csv")
    with caplog.at_level(logging.INFO, logger="sweeper"):
        result = run_once(
            tmp_path,
            "data=csv",
            f"data.path={path}",
            "data.drop=[id]",
            "lr=0.05",
            *FAST_ARGS,
            store=store,
        )
    assert result["status"] == "FINISHED" and result["task"] == "regression"
    # sex moves the target by ±2: the encoded column is used
    assert result["metrics"]["test_mae"] < 1.0
    first = [r.getMessage() for r in caplog.records if r.getMessage().startswith("data: ")]
    assert first and "dropped: id" in first[0] and "encoded: sex (3 categories" in first[0]
    tags = client_for(store).get_run(result["run_id"]).data.tags
    assert (
        tags["decided.task"] == "regression (auto: a numeric target)"
        and tags["decided.dropped"] == "id"
    )
    assert tags["decided.sep"].startswith("comma (sniffed")

    model = mlflow.pyfunc.load_model(str(tmp_path / "job" / "model" / "model"))
    raw = pd.DataFrame({"sex": ["M", "I", "F", "unseen"], "length": [0.5] * 4, "weight": [1.0] * 4})
    pred = model.predict(raw)
    assert np.isfinite(pred).all() and pred[0] - pred[1] > 2  # M vs I: +2 against -2
    # an unseen category is none of the three (all zeros)
    assert min(abs(pred[3] - pred[:3])) > 1e-3


def test_an_integer_target_with_6_values_says_it_was_read_as_classes_and_how_to_choose_regression(
    tmp_path,
):
    path = write_table(tmp_path / "quality.csv", target=np.arange(N) % 6 + 3)
    ds = load(path, "data.drop=[id]")
    assert ds.task == "multiclass" and ds.n_outputs == 6
    assert ds.decisions["task"] == (
        "multiclass (auto: read as 6 classes; pass data.task=regression to predict the number)"
    )
    assert ds.decisions["target"] == "rings: 6 classes 3, 4, 5, 6, 7, 8"
    assert data.ASK_REGRESSION in data.describe(ds)
    forced = load(path, "data.drop=[id]", "data.task=regression")
    assert forced.task == "regression" and forced.decisions["task"] == "regression"
    assert forced.decisions["target"] == "rings: range [3, 8]"
    # a file run as two tasks ranks each in its own experiment
    auto = make_cfg("data=csv", f"data.path={path}").tracking.experiment
    assert (
        auto,
        make_cfg("data=csv", f"data.path={path}", "data.task=regression").tracking.experiment,
    ) == ("csv-quality", "csv-quality-regression")


@pytest.mark.parametrize("sep, name", [(";", "semicolon"), ("\t", "tab"), (",", "comma")])
def test_the_separator_is_sniffed_when_data_sep_is_not_given(tmp_path, sep, name):
    ds = load(write_table(tmp_path / "t.csv", sep=sep), "data.drop=[id]")
    assert ds.n_features == 5 and ds.decisions["sep"].startswith(f"{name} (sniffed: 5 fields")


def test_a_file_read_as_one_column_names_the_likely_separator(tmp_path):
    path = write_table(tmp_path / "t.csv", sep=";")
    assert "each line reads as one column with data.sep=, " in refused(path, 'data.sep=","')
    assert refused(path, 'data.sep=","').endswith(
        "it looks semicolon-separated: set data.sep=semicolon"
    )


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["data.drop=[idd]"],
            "data.drop=[idd] names idd, which is not a column (did you mean id?): columns are "
            "['id', 'sex', 'length', 'weight', 'rings']",
        ),
        (
            ["data.features=[length,Sex]"],
            "data.features=[length,Sex] names Sex, which is not a column (did you mean sex?): "
            "columns are ['id', 'sex', 'length', 'weight', 'rings']",
        ),
        (["data.drop=[9]"], "data.drop=[9]: index 9 is out of range: columns are ['id', 'sex'"),
        (
            ["data.drop=[rings]"],
            "data.drop=[rings] names the target column rings: leave it out of data.drop",
        ),
        (["data.features=[id]", "data.drop=[id]"], "leave no feature column: columns are ['id'"),
    ],
)
def test_bad_column_choices_give_one_line_naming_the_key_and_the_columns(
    tmp_path, overrides, message
):
    assert message in refused(write_table(tmp_path / "t.csv"), *overrides)


def test_a_stray_text_value_among_numbers_is_read_as_text_and_free_text_points_to_data_text(
    tmp_path,
):
    path = tmp_path / "t.csv"
    path.write_text("a,b,y\n" + "".join(f"{i},{i % 4},{i % 2}\n" for i in range(9)) + "oops,1,1\n")
    (a,) = [r for r in load(path, "data.keep=[a]").report if r["column"] == "a"]
    assert a["kind"] == "category" and a["note"].startswith(
        "text: 1 of its 10 values are no number (the first 'oops', row 10), so it is read as categories"
    )
    # SMS layout
    path.write_text(
        "".join(f"{'spam' if i % 2 else 'ham'}\tmessage number {i}\n" for i in range(N))
    )
    assert refused(path, "data.header=false", "data.sep=tab", "data.target=0").endswith(
        "raise data.max_categories, or leave it out with data.drop=[1]; for free text, use data=text data.text=1"
    )


@pytest.mark.parametrize("key, value", [("drop", "id"), ("features", 3), ("max_categories", 0)])
def test_the_column_keys_are_checked_in_one_line(tmp_path, key, value):
    cfg = make_cfg(
        "data=csv", f"data.path={write_table(tmp_path / 't.csv')}", f"data.{key}={value}"
    )
    with pytest.raises(ConfigError, match=f"^data.{key}={value} is not allowed: expected "):
        validate(OmegaConf.to_container(cfg, resolve=True))


def test_the_new_keys_at_their_defaults_keep_a_runs_fingerprint(tmp_path):
    plain = OmegaConf.to_container(
        make_cfg("data=csv", f"data.path={write_table(tmp_path / 't.csv')}"), resolve=True
    )
    before = {
        **plain,
        "data": {
            k: v
            for k, v in plain["data"].items()
            if k not in ("drop", "features", "max_categories")
        }
        | {"sep": ","},
    }  # as a run logged them before these keys and sniffing
    assert fingerprint(plain) == fingerprint(before)
    assert fingerprint(plain) != fingerprint({**plain, "data": {**plain["data"], "drop": ["id"]}})


@pytest.mark.slow
def test_a_bad_column_name_on_the_command_line_is_one_line_and_exit_2(tmp_path, store):
    proc = cli(
        tmp_path,
        "data=csv",
        f"data.path={write_table(tmp_path / 't.csv')}",
        "data.drop=[idd]",
        store=store,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert (
        "data.drop=[idd] names idd, which is not a column (did you mean id?): columns are ['id', "
        "'sex'" in proc.stderr
    )


def test_json_records_encode_text_values_and_name_a_missing_number(tmp_path):
    import json

    records = [
        {"id": i, "sex": str(s), "x": float(x), "y": i % 2}
        for i, (s, x) in enumerate(zip(SEX, LENGTH))
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(records))
    ds = load(path, "data.drop=[id]")
    assert (
        ds.n_features == 4
        and ds.decisions["encoded"].startswith("sex (3 categories")
        and "sep" not in ds.decisions
    )
    records[3]["x"] = None
    path.write_text(json.dumps(records))
    # data.missing=impute (the default) fills it
    assert refused(path, "data.missing=refuse").endswith(
        "column x holds a missing or non-finite value None (row 4); clean it, or leave the column out with "
        "data.drop=[x]"
    )
    ds = load(path)
    assert (
        ds.decisions["missing"].startswith("x: 1 (the training median")
        and np.isfinite(ds.X_train).all()
    )

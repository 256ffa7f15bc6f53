"""Real tables (data=csv): missing cells, a date, an id, a leak, a missing target and integer codes read in one
pass, each column's decision said in the output, the tags and columns.json, and carried into the logged model."""

import json
import logging

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from conftest import FAST_ARGS, client_for, make_cfg, run_once
from test_data_files import load, refused
from sweeper.contract.fingerprint import fingerprint
from sweeper.data import encode_rows

N = 200
RNG = np.random.default_rng(11)


def write_bikes(path, leak=True, gaps=True):
    """A daily bike-rental table: a row id (instant), a date, a weather code 1/2/3, a season as text, a
    temperature with missing cells ('?', NA, empty), casual + registered = cnt (a leak), cnt missing in 3 rows."""
    day = pd.date_range("2011-01-01", periods=N, freq="D")
    temp = RNG.uniform(0, 30, N)
    weather = RNG.integers(1, 4, N)
    season = np.array(["winter", "spring", "summer", "fall"])[(day.month.to_numpy() % 12) // 3]
    cnt = 100 + 20 * temp - 30 * weather + RNG.normal(0, 5, N)
    casual = np.round(cnt * RNG.uniform(0.1, 0.3, N))
    rows = [
        "instant,dteday,season,weathersit,temp,casual,registered,cnt"
        if leak
        else "instant,dteday,season,weathersit,temp,cnt"
    ]
    for i in range(N):
        t = f"{temp[i]:.3f}"
        if gaps and i % 17 == 5:
            t = ["?", "NA", ""][i % 3]
        s = "" if gaps and i % 23 == 7 else season[i]
        c = f"{cnt[i]:.0f}" if not (gaps and i in (10, 50, 90)) else "NA"
        cells = [str(i + 1), day[i].strftime("%Y-%m-%d"), s, str(weather[i]), t]
        cells += (
            [f"{casual[i]:.0f}", f"{float(c) - casual[i]:.0f}" if c != "NA" else "0"]
            if leak
            else []
        )
        rows.append(",".join(cells + [c]))
    path.write_text("\n".join(rows) + "\n")
    return path


def test_one_pass_decides_every_column_of_a_real_looking_table(tmp_path):
    ds = load(write_bikes(tmp_path / "day.csv"))
    d = ds.decisions
    assert d["rows"] == "target cnt: 3 rows have no value: dropped"
    assert d["ids"] == "instant" and d["dates"] == "dteday"
    assert d["codes"].startswith("weathersit: possibly categorical (3 integer codes: 1, 2, 3)")
    assert "data.categorical=[weathersit]" in d["codes"]
    assert "casual + registered (|corr|" in d["leaks"]
    assert d["missing"].startswith("season: ") and "temp: 11 (the training median" in d["missing"]
    assert d["columns"] == "8 columns: 1 target, 1 id, 1 date, 1 category, 4 number"
    spec = {s["name"]: s for s in ds.encoder["columns"]}
    assert "instant" not in spec and spec["dteday"]["date"] and spec["temp"]["indicator"]
    assert "" in spec["season"]["categories"]  # a missing category is a level of its own
    # date parts, season (winter, spring, summer, missing), the code, temp + its indicator, casual, registered
    assert ds.n_features == 5 + 4 + 1 + 2 + 1 + 1
    assert (
        np.isfinite(ds.X_train).all() and len(ds.y_train) + len(ds.y_val) + len(ds.y_test) == N - 3
    )
    kinds = {r["column"]: r["kind"] for r in ds.report}
    assert kinds == {
        "cnt": "target",
        "instant": "id",
        "dteday": "date",
        "season": "category",
        "weathersit": "number",
        "temp": "number",
        "casual": "number",
        "registered": "number",
    }
    assert (
        load(tmp_path / "day.csv", "data.keep=[instant]").encoder["columns"][0]["name"] == "instant"
    )
    coded = load(tmp_path / "day.csv", "data.categorical=[weathersit]")
    assert {s["name"]: s for s in coded.encoder["columns"]}["weathersit"]["categories"] == [
        "1",
        "2",
        "3",
    ]
    assert "codes" not in coded.decisions


def test_imputation_statistics_come_from_the_training_rows_only(tmp_path):
    """The training rows' median fills a missing number (not their mean: the column is skewed, mean != median; not
    the held-out rows' values), and the output says that value."""
    from sweeper import data

    train, val, test = data.split(60, 0.2, 0.2, seed=0)
    x = np.zeros(60)
    # 1, 2, 4, ..., 32, 1, 2, ...: skewed, the mean above the median
    x[train] = 2.0 ** (np.arange(len(train)) % 6)
    x[val], x[test] = 100.0, 100.0  # the held-out rows' median differs
    cells = [f"{v:g}" for v in x]
    for i in (train[0], val[0], test[0]):
        cells[i] = "?"
    known = np.delete(x[train], 0)  # the training cells that are not missing
    median = float(np.median(known))
    assert abs(median - float(np.mean(known))) > 2
    path = tmp_path / "t.csv"
    path.write_text(
        "x,z,y\n"
        + "".join(f"{c},{i % 7},{i % 5 + 0.5 * (c == '?')}\n" for i, c in enumerate(cells))
    )
    ds = load(path)
    spec = ds.encoder["columns"][0]
    assert spec == {"name": "x", "fill": median, "indicator": True}
    raw_val = ds.X_val[list(val).index(val[0])] * ds.x_scale + ds.x_mean
    # filled, flagged as missing
    assert raw_val[0] == pytest.approx(median, abs=1e-12) and raw_val[1] == 1.0
    assert (
        ds.decisions["missing"]
        == f"x: 3 (the training median {median:g} fills them, and x_missing says which)"
    )


def test_refuse_lists_every_offending_column_at_once_and_names_a_missing_target(tmp_path):
    path = write_bikes(tmp_path / "day.csv")
    # the target and both feature columns, in one line
    message = refused(path, "data.missing=refuse")
    assert message.split(": ", 1)[1].startswith(
        "2 problems: target cnt: 3 rows have no value (rows 11, 51, 91); "
        "data.missing=refuse: clean them, or set data.missing=impute to drop "
        "those rows; data.missing=refuse: 2 columns hold missing values"
    )
    no_target_gaps = tmp_path / "t.csv"
    no_target_gaps.write_text(
        "\n".join(ln for ln in path.read_text().splitlines() if not ln.endswith(",NA")) + "\n"
    )
    message = refused(no_target_gaps, "data.missing=refuse")
    assert (
        "data.missing=refuse: 2 columns hold missing values (season: 9 cells, the first '' (row 8), temp: "
        in message
        and message.endswith("or leave them out with data.drop=[season,temp]")
    )
    stray = tmp_path / "s.csv"
    stray.write_text(
        "a,b,c,y\n" + "".join(f"{i},{i * 2},{i % 3},{i % 2}\n" for i in range(30)) + "x,oops,,1\n"
    )
    # a and b: numbers and a text, read as text
    message = refused(stray, "data.missing=refuse", "data.keep=[a]")
    assert message.split(": ", 1)[1].startswith(
        "data.missing=refuse: column c holds a missing or non-finite value"
    )


def test_drop_rows_and_na_values(tmp_path):
    path = write_bikes(tmp_path / "day.csv")
    ds = load(path, "data.missing=drop_rows")
    assert ds.decisions["rows"] == (
        "target cnt: 3 rows have no value: dropped; 20 rows with a missing feature "
        "dropped (data.missing=drop_rows)"
    )
    assert len(ds.y_train) + len(ds.y_val) + len(ds.y_test) == N - 3 - 20
    assert ds.decisions["missing"].startswith(
        "season: 9 (their rows dropped)"
    ) and "indicator" not in str(ds.encoder)
    marked = tmp_path / "m.csv"
    marked.write_text(
        "a,b,y\n" + "".join(f"{'n/a' if i % 9 == 0 else i % 11},{i % 4},{i}\n" for i in range(40))
    )
    # n/a: one of pandas' markers of a missing cell
    assert load(marked).decisions["missing"].startswith("a: 5 (")
    assert load(marked, "data.na_values=[n/a]").encoder["columns"][0]["na"][-1] == "n/a"


def test_fit_fills_a_date_by_its_training_median_a_number_without_one_by_0_and_keeps_an_overflow_inf():
    """The encoder's statistics by hand: a date column's fill is the day number of its training rows' median date (a
    sentinel date among its missing markers is no date); a number with no value in the training rows is filled with 0;
    values near 1e308 give an inf spread (or NaN statistics) that the caller refuses, without a NumPy warning."""
    import datetime
    import warnings

    from sweeper.data.columns import Column, fit

    def day(text):
        return float((datetime.date.fromisoformat(text) - datetime.date(1970, 1, 1)).days)

    dates = np.array(
        ["2011-01-01", "1900-01-01", "2011-03-01", "2011-01-11", "2012-06-30"], dtype=object
    )
    # 2012: held out
    state = fit([Column("d", dates, False, date=True, markers=("1900-01-01",))], np.arange(4), 10)
    assert state["columns"] == [
        {"name": "d", "na": ["1900-01-01"], "date": True, "fill": day("2011-01-11")}
    ]
    empty = Column("x", np.array([np.nan, np.nan, 5.0]), True, gaps=np.array([True, True, False]))
    assert fit([empty], np.arange(2), 10)["columns"] == [
        {"name": "x", "fill": 0.0, "indicator": True}
    ]
    with warnings.catch_warnings():
        # NumPy's overflow and invalid-value warnings would be errors
        warnings.simplefilter("error")
        # mean 0, the square overflows
        wide = fit([Column("a", np.array([1e308, -1e308]), True)], np.arange(2), 10)
        # inf - inf: NaN
        lost = fit([Column("b", np.array([1e308] * 4 + [-1e308] * 4), True)], np.arange(8), 10)
    assert wide["x_mean"].tolist() == [0.0] and wide["x_scale"].tolist() == [np.inf]
    assert np.isnan(lost["x_mean"]).all() and np.isnan(lost["x_scale"]).all()


def test_fit_keeps_a_column_of_max_categories_and_hints_data_text_when_over_half_its_values_differ():
    """A text column of exactly data.max_categories training categories is kept (one-hot: mean 0, scale 1); one of more
    is left out, with the data=text hint only when its distinct values are over half its rows; every column left out
    leaves no feature."""
    from sweeper.data.columns import Column, fit

    def text(name, values):
        return Column(name, np.array(list(values), dtype=object), False)

    state = fit([text("c", "abca")], np.arange(4), 3)
    assert (
        state["columns"] == [{"name": "c", "categories": ["a", "b", "c"]}]
        and state["left_out"] == []
    )
    assert state["x_mean"].tolist() == [0.0] * 3 and state["x_scale"].tolist() == [1.0] * 3
    # 4, 5 and 6 distinct values of 10: 8, 10 and 12 against the 10 rows
    state = fit(
        [text("four", "abcdabcdab"), text("five", "abcdeabcde"), text("six", "abcdefabcd")],
        np.arange(10),
        3,
    )
    hint = "; for free text, use data=text data.text=six"
    assert [(o["name"], o["levels"], o["why"]) for o in state["left_out"]] == [
        (
            name,
            n,
            f"text, {n} categories in the training rows (more than data.max_categories=3): left out; raise "
            f"data.max_categories to keep it{hint if name == 'six' else ''}",
        )
        for name, n in (("four", 4), ("five", 5), ("six", 6))
    ]
    assert state["left_out"][2]["refusal"] == (
        "column six has 6 categories in the training rows, more than "
        f"data.max_categories=3: raise data.max_categories, or leave it out "
        f"with data.drop=[six]{hint}"
    )
    assert (state["columns"], state["used"], state["x_mean"].shape, state["x_scale"].shape) == (
        [],
        [],
        (0,),
        (0,),
    )


def test_a_text_column_of_too_many_categories_is_left_out_with_a_line(tmp_path):
    path = tmp_path / "titanic.csv"
    names = [f"Passenger {i}, Mr. {chr(65 + i % 26)}" for i in range(60)]
    path.write_text(
        "PassengerId,Name,Age,Survived\n"
        + "".join(
            f'{i + 1},"{n}",{"" if i % 6 == 0 else 20 + i % 40},{i % 2}\n'
            for i, n in enumerate(names)
        )
    )
    ds = load(path, "data.max_categories=10")
    assert (
        ds.decisions["left_out"] == "Name (36 categories)" and ds.decisions["ids"] == "PassengerId"
    )
    line = next(r for r in ds.report if r["column"] == "Name")["detail"]
    assert line.startswith(
        "text, 36 categories in the training rows (more than data.max_categories=10): left out"
    )
    assert [s["name"] for s in ds.encoder["columns"]] == ["Age"]


def test_a_category_that_determines_the_class_is_named_a_leak(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(
        "x,room,y\n"
        + "".join(
            f"{RNG.normal():.3f},{'AB'[i % 2]}{i % 4},{'yes' if i % 2 else 'no'}\n"
            for i in range(80)
        )
    )
    assert load(path).decisions["leaks"] == "room (each of its categories holds a single class)"


def test_the_encoder_fills_missing_cells_reads_dates_and_zeroes_unknown_categories(tmp_path):
    ds = load(write_bikes(tmp_path / "day.csv"))
    rows = pd.DataFrame(
        {
            "dteday": ["2011-03-01", None, "2011-03-01 08:00:00"],
            "season": ["spring", None, "moon"],
            "weathersit": [1, 2, 3],
            "temp": [10.0, np.nan, 10.0],
            "casual": [50, 50, 50],
            "registered": [100, 100, 100],
        }
    )
    X = encode_rows(ds.encoder, rows)
    # a date with a time: the same parts
    assert np.isfinite(X).all() and np.allclose(X[0, :5], X[2, :5])
    names = ["dteday", "season", "weathersit", "temp", "casual", "registered"]
    back = X * ds.x_scale + ds.x_mean
    temp = 5 + len(ds.encoder["columns"][1]["categories"]) + 1
    # the missing temp: the median of the training rows' temps (those not missing, as read from the file)
    train = ds.raw(ds.X_train)
    known = np.round(train[train[:, temp + 1] == 0, temp], 3)
    file_temps = (
        pd.read_csv(tmp_path / "day.csv", na_values=["?", "NA", ""])["temp"].dropna().round(3)
    )
    assert set(known.tolist()) <= set(file_temps.tolist()) and len(known) > 100
    assert (
        back[1, temp] == pytest.approx(float(np.median(known)), abs=1e-9)
        and back[1, temp + 1] == 1.0
    )
    assert back[0, :2].tolist() == [2011, 3] and back[0, 2] == 1  # 2011-03-01 was a Tuesday
    assert np.allclose(X, encode_rows(ds.encoder, rows[names[::-1]]))  # by name, in any order


def test_the_new_keys_at_their_defaults_keep_the_fingerprint(tmp_path):
    plain = OmegaConf.to_container(
        make_cfg("data=csv", f"data.path={write_bikes(tmp_path / 't.csv')}"), resolve=True
    )
    new = ("missing", "na_values", "dates", "keep", "categorical", "decimal")
    assert fingerprint(plain) == fingerprint(
        {**plain, "data": {k: v for k, v in plain["data"].items() if k not in new}}
    )
    assert fingerprint(plain) != fingerprint(
        {**plain, "data": {**plain["data"], "missing": "refuse"}}
    )


@pytest.mark.slow
def test_a_real_table_trains_in_one_run_says_each_column_and_its_model_takes_raw_rows(
    tmp_path, store, caplog
):
    import mlflow.pyfunc

    path = write_bikes(tmp_path / "day.csv")
    with caplog.at_level(logging.INFO, logger="sweeper"):
        result = run_once(
            tmp_path, "data=csv", f"data.path={path}", "lr=0.05", *FAST_ARGS, store=store
        )
    assert result["status"] == "FINISHED" and all(
        np.isfinite(v) for v in result["metrics"].values()
    )
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("data: column ")]
    assert (
        "data: column instant: id (distinct integers 1..200 in row order): dropped (data.keep keeps it)"
        in lines
    )
    assert any(
        ln.startswith("data: column temp: number; 11 missing: the training median") for ln in lines
    )
    assert any(
        "LEAK? casual + registered" in r.getMessage() and r.levelno == logging.WARNING
        for r in caplog.records
    )
    tags = client_for(store).get_run(result["run_id"]).data.tags
    assert tags["decided.ids"] == "instant" and tags["decided.dates"] == "dteday"
    assert (
        tags["decided.rows"] == "target cnt: 3 rows have no value: dropped"
        and "casual" in tags["decided.leaks"]
    )
    report = json.loads((tmp_path / "job" / "columns.json").read_text())
    assert [r["column"] for r in report["columns"]][:3] == ["cnt", "instant", "dteday"]
    assert report["decided"]["codes"].startswith("weathersit")

    model = mlflow.pyfunc.load_model(str(tmp_path / "job" / "model" / "model"))
    raw = pd.DataFrame(
        {
            "dteday": ["2011-07-01", "2011-07-01"],
            "season": ["summer", None],
            "weathersit": [1.0, 1.0],
            "temp": [25.0, np.nan],
            "casual": [100.0, 100.0],
            "registered": [500.0, 500.0],
        }
    )
    pred = model.predict(raw)
    assert np.isfinite(pred).all() and len(pred) == 2
    optional = {c.name for c in model.metadata.get_input_schema().inputs if not c.required}
    assert optional == {
        "dteday",
        "season",
        "temp",
    }  # what the model fills; casual, registered are required
    # optional columns left out
    assert np.isfinite(model.predict(raw.drop(columns=["season", "temp"]))).all()
    # the training file as pandas reads it (int64 columns: MLflow took no int64 for a double,
    # "Can not safely convert int64 to float64"), and its integers given as floats, alike
    rows = pd.read_csv(path).dropna(subset=["cnt"]).head(20)
    assert rows["casual"].dtype == np.int64
    assert np.array_equal(model.predict(rows), model.predict(rows.astype({"casual": float})))


@pytest.mark.parametrize(
    "key, value",
    [
        ("missing", "mean"),
        ("na_values", "n/a"),
        ("dates", "day"),
        ("keep", 3),
        ("categorical", "origin"),
        ("decimal", "dot"),
    ],
)
def test_the_new_keys_are_checked_in_one_line(tmp_path, key, value):
    from sweeper.contract.config import ConfigError, validate

    cfg = make_cfg(
        "data=csv", f"data.path={write_bikes(tmp_path / 't.csv')}", f"data.{key}={value}"
    )
    with pytest.raises(ConfigError, match=f"^data.{key}={value} is not allowed: expected "):
        validate(OmegaConf.to_container(cfg, resolve=True))


def test_data_dates_reads_a_named_column_and_names_a_cell_that_is_no_date(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(
        "when,x,y\n"
        + "".join(f"2020/{i % 12 + 1}/{i % 28 + 1},{i % 5},{i % 3 + 0.5 * i}\n" for i in range(40))
    )
    assert load(path).decisions["dates"] == "when"  # 2020/1/1 is found without data.dates
    path.write_text(path.read_text().replace("2020/3/3,", "soon,"))
    assert (
        "column when (a date: data.dates) holds 'soon' (row 3), which is no date pandas can read"
        in refused(path, "data.dates=[when]")
    )
    assert "dates" not in load(path).decisions  # without data.dates: a text column
    assert (
        "data.keep=[zz] names zz, which is not a column: columns are ['when', 'x', 'y']"
        in refused(path, "data.keep=[zz]")
    )


@pytest.mark.slow
def test_a_multirun_says_the_column_report_once(tmp_path, store):
    from conftest import cli

    path = write_bikes(tmp_path / "day.csv")
    proc = cli(
        tmp_path, "-m", "data=csv", f"data.path={path}", "lr=0.05,0.1", *FAST_ARGS, store=store
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-2000:]
    # two columns
    assert (
        out.count("data: column instant: id") == 1 and out.count("LEAK? casual + registered") == 2
    )
    assert out.count("FINISHED") >= 2

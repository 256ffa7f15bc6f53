"""Messy tables in one pass (issue 55, finding 11): a column of numbers with some text is read as text (said), dates
in mixed formats are read where pandas can (said where not), an all-missing target says so, pandas' missing markers
are missing, levels are trimmed of spaces (said); and a logged model fed rows far outside its training rows warns,
naming the column."""

from __future__ import annotations

import csv
import warnings

import numpy as np
import pandas as pd
import pytest

from conftest import make_cfg
from sweeper import data
from sweeper.base import portable
from test_data_files import load, refused


def _report(ds) -> dict[str, dict]:
    return {r["column"]: r for r in ds.report}


def _titanic_like(path, n: int = 80) -> None:
    """Ticket: numbers, and now and then a ticket with letters (Titanic's A/5 21171); a date in three forms and an
    impossible one; a region with stray spaces and another case; n/a for a missing cell."""
    rng = np.random.default_rng(1)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Ticket", "when", "region", "age", "fare"])
        for i in range(n):
            age = rng.normal(30, 10)
            w.writerow(
                [
                    f"A/5 {21171 + i}" if i % 8 == 0 else str(300000 + i % 5),
                    ["2011-01-31", "01/02/2011", "Jan 5, 2011", "31/02/2011"][i % 4],
                    ["East", "east ", " West", "West"][i % 4],
                    "n/a" if i % 10 == 3 else f"{age:.1f}",
                    f"{2 * age + rng.normal():.2f}",
                ]
            )


def test_a_messy_table_is_read_in_one_pass_and_each_decision_is_said(tmp_path):
    """Before: the file was refused at Ticket ('a non-numeric value 'A/5 21171' among numbers'), n/a among the ages
    refused it too, and a mixed-format date column was left out as text."""
    path = tmp_path / "titanic.csv"
    _titanic_like(path)
    report = _report(load(path, "data.target=fare"))
    ticket, when, region, age = report["Ticket"], report["when"], report["region"], report["age"]
    assert ticket["kind"] == "category" and ticket["note"].startswith(
        "text: 10 of its 80 values are no number (the first 'A/5 21171', row 1), so it is read as categories"
    )
    assert when["kind"] == "date" and when["missing"] == 20
    assert "dates in mixed formats ('2011-01-31', '01/02/2011', ...) read by pandas" in when["note"]
    assert (
        "20 cell(s) no date pandas can read (the first '31/02/2011', row 4): missing"
        in when["note"]
    )
    assert region["detail"] == "category, 3 levels (East, West, east)"
    assert region["note"] == (
        "40 cell(s) trimmed of surrounding spaces ('east ' is 'east'); levels that differ only "
        "in case are kept apart ('East' and 'east')"
    )
    assert age["kind"] == "number" and age["missing"] == 8  # n/a: missing, as pandas reads it


def test_mixed_format_dates_mean_the_same_day_in_training_and_in_a_logged_model(tmp_path):
    """The encoder a logged model runs (sweeper/base/portable.py) reads the same forms as the training did."""
    days = portable.date_days(
        ["2011-01-31", "01/31/2011", "31.01.2011", "Jan 31, 2011", "31 Jan 2011", "soon"]
    )
    assert days[:5].tolist() == [
        float(np.datetime64("2011-01-31", "D").astype(np.int64))
    ] * 5 and np.isnan(days[5])
    path = tmp_path / "titanic.csv"
    _titanic_like(path)
    ds = load(path, "data.target=fare")
    raw = pd.DataFrame(dict(zip(ds.input_columns, ds.columns_test)))
    np.testing.assert_allclose(data.encode_rows(ds.encoder, raw), ds.X_test, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "first, dayfirst, order",
    [
        ("31/01/2011", True, "day first, as '31/01/2011' shows"),
        ("01/31/2011", False, "month first, as '01/31/2011' shows"),
        ("01.01.2011", True, "day first, as dates with dots write it"),
    ],
)
def test_a_date_column_reads_every_date_in_the_order_its_dates_show(
    tmp_path, first, dayfirst, order
):
    """Before: each cell on its own (pandas' format="mixed"): in a column of 31/01/2011, 02/03/2011
    was 3 February, and 02.03.2011 too (dates with dots put the day first); the logged model
    now reads them as training did (the encoder's dayfirst)."""
    from sweeper.data.columns import feature_names

    sep = first[2]
    cells = [first] + [f"{d:02d}{sep}{m:02d}{sep}2011" for d, m in [(2, 3)] * 39]
    if not dayfirst:
        cells[1:] = ["03/02/2011"] * 39  # March 2nd, month first
    path = tmp_path / "t.csv"
    path.write_text(
        "when,x,y\n" + "".join(f"{c},{i % 7},{i * 3 % 11}\n" for i, c in enumerate(cells))
    )
    ds = load(path, "data.task=regression")
    when = {r["column"]: r for r in ds.report}["when"]
    assert when["note"].endswith(order)
    march_2 = float(np.datetime64("2011-03-02", "D").astype(np.int64))
    spec = next(s for s in ds.encoder["columns"] if s["name"] == "when")
    assert bool(spec.get("dayfirst")) is dayfirst
    assert portable.date_days(cells[1:2], dayfirst=dayfirst)[0] == march_2
    raw = pd.DataFrame(dict(zip(ds.input_columns, ds.columns_test)))
    np.testing.assert_allclose(data.encode_rows(ds.encoder, raw), ds.X_test, rtol=0, atol=1e-12)
    year_day = [
        i for i, n in enumerate(feature_names(ds.encoder["columns"])) if n == "when.day_of_year"
    ]
    assert set(
        np.round(ds.X_test[:, year_day[0]] * ds.x_scale[year_day[0]] + ds.x_mean[year_day[0]])
    ) <= {1.0, 31.0, 61.0}


def test_day_and_month_first_in_one_column_are_said():
    assert portable.day_first(["31/01/2011", "01/31/2011", "02/03/2011"]) == (
        False,
        "month first where a form is ambiguous; both '31/01/2011' and '01/31/2011' appear",
    )


def test_an_all_missing_target_says_so(tmp_path):
    """Before: 'a text target needs two distinct values ... has 0 ()'."""
    path = tmp_path / "t.csv"
    path.write_text("a,y\n" + "".join(f"{i % 7},n/a\n" for i in range(30)))
    assert refused(path).endswith(
        "target y: every one of its 30 rows has no value (all missing): choose another "
        "column with data.target, or fill it"
    )


def test_a_logged_model_warns_on_rows_far_outside_its_training_rows(tmp_path):
    """Before: the diabetes model, given load_diabetes(scaled=False)'s rows, answered one number for every row, without
    a word. Its rows are load_diabetes()'s (scaled); unscaled ones lie hundreds of training deviations out."""
    import mlflow.pyfunc
    from sklearn.datasets import load_diabetes

    from sweeper.models.mlp import MLP, init_params
    from sweeper.tracking import pyfunc

    cfg = make_cfg("data=diabetes")
    ds = data.load(cfg.data, 0)
    params = init_params([ds.n_features, 8, 1], "tanh", 0, "float64")
    X = ds.test_inputs()
    pred = (
        MLP(np, params, "tanh", ds.task).predict((X - ds.x_mean) / ds.x_scale).ravel() * ds.y_scale
        + ds.y_mean
    )
    model = mlflow.pyfunc.load_model(
        str(pyfunc.save(tmp_path / "model" / "model", params, ds, "tanh", X, pred, cfg.data))
    )
    scaled = pd.DataFrame(load_diabetes().data[:20], columns=ds.input_columns)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rows it was trained on: no warning
        model.predict(scaled)
    unscaled = pd.DataFrame(load_diabetes(scaled=False).data[:20], columns=ds.input_columns)
    with pytest.warns(
        UserWarning,
        match=r"sweeper model: column \w+: 20 of 20 row\(s\) lie up to .* training standard "
        r"deviations from the training mean \(beyond 10\)",
    ):
        model.predict(unscaled)

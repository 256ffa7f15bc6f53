"""User data files (data=csv): what a file's target, header, encoding and size make of a run; one line when refused."""

import json

import numpy as np
import pytest
from omegaconf import OmegaConf

from conftest import FAST_ARGS, client_for, cli, make_cfg, run_once
from sweeper import data
from sweeper.contract import choices
from sweeper.contract.config import ConfigError, check_overrides
from sweeper.data import DataError

RNG = np.random.default_rng(7)
X = RNG.standard_normal((40, 2))


def write_csv(path, target, header="a,b,y", sep=","):
    lines = ([header] if header else []) + [sep.join(map(str, [*r, t])) for r, t in zip(X, target)]
    path.write_text("\n".join(lines) + "\n")
    return path


def load(path, *overrides, seed=0):
    return data.load(make_cfg("data=csv", f"data.path={path}", *overrides).data, seed)


def refused(path, *overrides) -> str:
    with pytest.raises(DataError) as err:
        load(path, *overrides)
    message = str(err.value)
    assert "\n" not in message
    return message


def classes(k):
    return np.arange(len(X)) % k


@pytest.mark.parametrize("k", [3, 20])
def test_auto_reads_a_few_integer_values_as_class_labels(tmp_path, k):
    # labels 5..5+k-1 become indices 0..k-1
    path = write_csv(tmp_path / "classes.csv", classes(k) + 5)
    ds = load(path)
    assert (
        ds.task == "multiclass"
        and ds.classes == tuple(str(c) for c in range(5, 5 + k))
        and ds.n_outputs == k
    )
    ys = np.concatenate([ds.y_train, ds.y_val, ds.y_test]).ravel()
    assert sorted(set(ys)) == list(range(k))
    ds = load(path, "data.task=regression")  # the user's choice: fit the integers as a number
    assert ds.task == "regression" and ds.positive_class is None and ds.classes is None


def test_text_with_several_values_and_task_multiclass_make_classes(tmp_path):
    ds = load(write_csv(tmp_path / "t.csv", np.array(["b", "a", "c", "d"] * 10)))
    assert ds.task == "multiclass" and ds.classes == ("a", "b", "c", "d")
    two = load(write_csv(tmp_path / "two.csv", classes(2)), "data.task=multiclass")
    assert two.task == "multiclass" and two.n_outputs == 2
    many = load(write_csv(tmp_path / "many.csv", classes(21)), "data.task=multiclass")
    assert many.n_outputs == 21


@pytest.mark.parametrize("target", [classes(21), classes(3) + 0.5, X[:, 0] * 3])
def test_many_values_or_non_integers_stay_a_regression(tmp_path, target):
    assert load(write_csv(tmp_path / "t.csv", target)).task == "regression"


@pytest.mark.parametrize(
    "target, positive",
    [
        (np.where(X[:, 0] > 0, 2, 1), "2"),
        (np.where(X[:, 0] > 0, 1, -1), "1"),
        (np.where(X[:, 0] > 0, 1.5, 0.25), "1.5"),
        (np.where(X[:, 0] > 0, "spam", "ham"), "spam"),
        (
            np.where(X[:, 0] > 0, " yes", " no"),
            "yes",
        ),  # spaces after the separator are not part of the label
    ],
)
def test_a_two_valued_target_is_read_as_0_1_with_the_later_value_as_1(tmp_path, target, positive):
    ds = load(write_csv(tmp_path / "t.csv", target))
    assert ds.task == "binary" and ds.positive_class == positive
    ys = np.concatenate([ds.y_train, ds.y_val, ds.y_test]).ravel()
    assert sorted(set(ys)) == [0.0, 1.0] and ys.sum() == (X[:, 0] > 0).sum()


def test_text_targets_load_from_json_and_npz_and_the_positive_class_can_be_chosen(tmp_path):
    labels = np.where(X[:, 0] > 0, "spam", "ham")
    records = tmp_path / "r.json"
    records.write_text(json.dumps([{"a": r[0], "b": r[1], "y": str(t)} for r, t in zip(X, labels)]))
    npz = tmp_path / "t.npz"
    np.savez(npz, X=X, y=labels)
    csv = write_csv(tmp_path / "t.csv", labels)
    loaded = [load(records, "data.target=y"), load(npz), load(csv, "data.task=binary")]
    for ds in loaded:
        assert ds.positive_class == "spam"
        np.testing.assert_array_equal(ds.y_test, loaded[0].y_test)
    flipped = load(csv, "data.positive_class=ham")
    assert flipped.positive_class == "ham"
    np.testing.assert_array_equal(flipped.y_test, 1 - loaded[0].y_test)
    numbers = write_csv(tmp_path / "n.csv", np.where(X[:, 0] > 0, 2, 1))
    assert load(numbers, "data.positive_class=1").positive_class == "1"


@pytest.mark.parametrize(
    "target, overrides, message",
    [
        (
            np.array(["a"] * 40),
            [],
            "the target (column y) holds one value ('a') in every row: there is",
        ),
        (
            classes(3),
            ["data.task=multiclass", "data.positive_class=1"],
            "data.positive_class=1 is for a binary target",
        ),
        (
            np.zeros(len(X)),
            ["data.task=multiclass"],
            "data.task=multiclass needs two or more distinct values",
        ),
        (
            np.where(X[:, 0] > 0, "spam", "ham"),
            ["data.task=regression"],
            "data.task=regression needs a numeric target",
        ),
        (
            np.where(X[:, 0] > 0, "spam", "ham"),
            ["data.positive_class=eggs"],
            "data.positive_class=eggs is not a value of the target: column y of",
        ),
        (
            classes(3),
            ["data.task=binary"],
            "data.task=binary needs two distinct values: column y of",
        ),
        (X[:, 0], ["data.positive_class=1"], "data.positive_class=1 needs two distinct values"),
        (
            classes(2),
            ["data.task=regression", "data.positive_class=1"],
            "data.positive_class=1 is for a binary target",
        ),
        (
            np.array(["1", "x"] * 20),
            [],
            "column y holds a non-numeric value 'x' (row 2)",
        ),  # a stray text value
    ],
)
def test_targets_that_cannot_be_read_give_one_line(tmp_path, target, overrides, message):
    assert message in refused(write_csv(tmp_path / "t.csv", target), *overrides)


def test_a_text_feature_column_is_encoded_not_refused(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("colour,y\n" + "red,ham\nblue,spam\nred,spam\ngreen,ham\n" * 5)
    ds = load(path)
    assert ds.encoder["columns"] == [
        {"name": "colour", "categories": sorted(ds.encoder["columns"][0]["categories"])}
    ]
    assert ds.n_features == len(ds.encoder["columns"][0]["categories"]) and ds.task == "binary"


@pytest.mark.parametrize(
    "target, positive",
    [(np.where(X[:, 0] > 0, 2, 1), "2"), (np.where(X[:, 0] > 0, "spam", "ham"), "spam")],
)
def test_a_two_valued_target_trains_binary_and_logs_its_positive_class(
    tmp_path, store, target, positive
):
    path = write_csv(tmp_path / "mail.csv", target)
    result = run_once(tmp_path, "data=csv", f"data.path={path}", "lr=0.5", *FAST_ARGS, store=store)
    assert result["status"] == "FINISHED" and result["task"] == "binary"
    assert result["metrics"]["test_accuracy"] >= 0.75 and "val_roc_auc" in result["metrics"]
    assert result["config"]["data"]["positive_class"] == positive
    assert (
        client_for(store).get_run(result["run_id"]).data.params["data.positive_class"] == positive
    )


@pytest.mark.parametrize(
    "n, fractions",
    [(1, []), (2, []), (3, []), (1, ["data.val_fraction=0", "data.test_fraction=0"])],
    ids=["1-row", "2-rows", "3-rows", "1-row-unsplit"],
)
def test_too_few_rows_for_the_split_give_one_line(tmp_path, n, fractions):
    path = write_csv(tmp_path / "tiny.csv", classes(2))
    path.write_text("\n".join(path.read_text().splitlines()[: n + 1]) + "\n")
    message = refused(path, *fractions)
    assert message.startswith(f"data.path={path}: too few rows ({n}) for data.val_fraction=")
    assert "training needs at least 2 rows" in message


def test_the_smallest_files_that_split(tmp_path):
    path = write_csv(tmp_path / "t.csv", X[:, 0])
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:5]) + "\n")  # 4 rows: 2 train, 1 validation, 1 test
    ds = load(path)
    assert (len(ds.X_train), len(ds.X_val), len(ds.X_test)) == (2, 1, 1)
    path.write_text("a,b,y\n1,2,0\n2,1,1\n")  # 2 rows, scored on the training rows
    assert len(load(path, "data.val_fraction=0", "data.test_fraction=0").X_test) == 2


@pytest.mark.parametrize(
    "name, content, where",
    [
        ("latin1.csv", "a,caf\xe9,y\n1,2,3\n".encode("latin-1"), "byte 0xe9 at offset 5"),
        ("garbage.json", bytes(range(256)), "byte 0x80 at offset 128"),
        ("bom.csv", b"\xef\xbb\xbfa,b,y\n1,2,\xff\n", "byte 0xff at offset 13"),
    ],
)
def test_bytes_that_are_not_utf8_give_one_line(tmp_path, name, content, where):
    path = tmp_path / name
    path.write_bytes(content)
    assert refused(path) == f"data.path={path} is not UTF-8 text ({where}): save it as UTF-8"


def test_a_utf8_byte_order_mark_is_not_part_of_the_first_name(tmp_path):
    path = write_csv(tmp_path / "t.csv", X[:, 0], header="a,b,y")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert load(path, "data.target=a").n_features == 2


def test_a_headerless_numeric_file_is_not_read_with_its_first_row_as_names(tmp_path):
    path = write_csv(tmp_path / "plain.csv", X[:, 0] * 3, header=None)
    message = refused(path)
    assert message.startswith(f"data.path={path}: the first line (")
    assert "holds only numbers" in message and "set data.header=false" in message
    ds = load(path, "data.header=false")
    assert len(ds.X_train) + len(ds.X_val) + len(ds.X_test) == len(X)  # no row eaten


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("t.npz", b"not an archive", "cannot be read as .npz"),
        (
            "t.csv",
            "a,b,y\n1,2\n3,4\n",
            "the header has 3 names ('a,b,y') but the rows have 2 fields; a title line above "
            "the header? remove it",
        ),
        (  # a total under the table: which row, and what it holds
            "t.csv",
            "a,b,y\n" + "".join(f"{i},{i % 3},{i % 5}\n" for i in range(20)) + "Total,190\n",
            "rows have different numbers of fields [2, 3]: 20 rows have 3, row 21 has 2 "
            "('Total,190'); a line that is no table row (a title, a total)? remove it",
        ),
        ("t.csv", "y\n1\n2\n", "there is no column besides the target y"),
        # readers._json: the file's, or a line's (.jsonl), in one line each
        ("t.json", '[{"a": 1, "y": 2},', "t.json is not valid JSON: Expecting value: line 1"),
        (
            "t.jsonl",
            '{"a": 1, "y": 2}\n\n{"a": 2,\n',
            "t.jsonl: line 3 is not valid JSON: Expecting",
        ),
    ],
)
def test_other_unreadable_files_give_one_line(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert message in refused(path)


def test_an_npz_file_without_x_and_y_or_of_one_array_is_one_line(tmp_path):
    """The .npz reader's own refusal (no X and y) was raised inside its handler and let through by an `except
    DataError: raise` of its own; it is said after the read now, each in the same one line as before."""
    path = tmp_path / "t.npz"
    np.savez(path, a=X[:, 0], b=X[:, 1])
    assert (
        refused(path)
        == f"data.path={path}: an .npz file needs arrays named X and y, found ['a', 'b']"
    )
    with open(path, "wb") as f:
        np.save(f, X)
    assert refused(path) == (
        f"data.path={path} cannot be read as .npz (it holds a single array, not a zip archive of arrays): "
        "save it with numpy.savez(path, X=X, y=y)"
    )


def test_a_target_name_without_a_header_says_to_give_an_index(tmp_path):
    path = write_csv(tmp_path / "t.csv", X[:, 0], header=None)
    assert "data.target=y is a column name, but" in refused(
        path, "data.header=false", "data.target=y"
    )


def test_a_semicolon_separator_by_name_or_quoted(tmp_path):
    path = write_csv(tmp_path / "semi.csv", X[:, 0], header="a;b;y", sep=";")
    assert load(path, "data.sep=semicolon").n_features == 2
    assert load(path, 'data.sep=";"').n_features == 2


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["data=csv", "data.sep=;"],
            "data.sep=; cannot be read by Hydra's override parser: quote the character "
            """('data.sep=";"') or name it: data.sep=tab|space|semicolon""",
        ),
        (["-m", "lr=(0.1"], "lr=(0.1 is not a valid override (extraneous input '('"),
        (["lr=[1,2"], "lr=[1,2 is not a valid override (no viable alternative at input '[1,2')"),
    ],
)
def test_overrides_hydra_cannot_parse_give_one_line(args, message):
    with pytest.raises(ConfigError) as err:
        check_overrides(args)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_option_values_are_left_to_hydra():
    # "job" is no override: Hydra's argument parser reads it
    check_overrides(["--cfg", "job", "lr=0.1"])


def test_each_data_file_has_its_own_experiment(tmp_path):
    def experiment(*overrides):
        return OmegaConf.to_container(make_cfg(*overrides), resolve=True)["tracking"]["experiment"]

    assert experiment("data=csv", f"data.path={tmp_path / 'sales.2024.csv'}") == "csv-sales.2024"
    assert experiment("data=csv", "data.path=/x/churn.json", "tracking=server") == "csv-churn"
    assert experiment("data=csv") == "csv"  # no path yet: validate() says data.path is missing
    assert experiment("data=spambase") == "spambase" and experiment() == "diabetes"
    assert experiment("data=csv", "data.path=/x/churn.json", "tracking.experiment=mine") == "mine"


@pytest.mark.parametrize(
    "args",
    [
        ["data=csv", "data.path={bad}"],
        ["data=csv", "data.sep=;", "data.path={good}"],
        ["-m", "data=csv", "data.path={good},{bad}", "lr=0.1,0.2"],
    ],
    ids=["run", "sep", "multirun"],
)
def test_a_bad_data_file_leaves_no_store_behind(tmp_path, args):
    bad = tmp_path / "latin1.csv"
    bad.write_bytes("a,caf\xe9,y\n1,2,3\n".encode("latin-1"))
    good = write_csv(tmp_path / "good.csv", X[:, 0])
    db = tmp_path / "fresh" / "mlflow.db"
    proc = cli(tmp_path, *[a.format(bad=bad, good=good) for a in args], *FAST_ARGS, store=db)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("sweeper: error: data.")
    assert "not UTF-8 text" in lines[0] or "data.sep=tab|space|semicolon" in lines[0]
    if args[0] == "-m":
        assert "[job 3/4: " in lines[0]  # each file is read once, before the first job
    assert not db.exists() and not db.parent.exists() and not (tmp_path / "sweep").exists()


@pytest.mark.slow
def test_a_promoted_text_target_run_reruns_with_the_same_fingerprint_and_params(
    tmp_path, store, _template_store
):
    """data.positive_class is a param and a key of data=csv: promote writes it and the re-run reads it back."""
    import shutil

    from sweeper import promote
    from sweeper.insight import pinned
    from sweeper.job.context import JobContext
    from sweeper.job.record import run

    path = write_csv(tmp_path / "mail.csv", np.where(X[:, 0] > 0, "spam", "ham"))
    original = run_once(
        tmp_path, "data=csv", f"data.path={path}", "lr=0.5", *FAST_ARGS, store=store
    )
    out = tmp_path / "promoted"  # a folder named like a project group (best) is refused
    assert (
        promote.main(
            [
                "--tracking-uri",
                f"sqlite:///{store}",
                "--out-dir",
                str(out),
                "--experiment",
                "csv-mail",
                "--name",
                "mail",
            ]
        )
        == 0
    )
    again = tmp_path / "again.db"
    shutil.copy(_template_store, again)
    cfg = pinned.compose_file(out / "mail.yaml", f"tracking.uri=sqlite:///{again}")
    assert cfg.data.positive_class == "spam"
    result = run(cfg, JobContext(output_dir=tmp_path / "rerun"))
    assert result["fingerprint"] == original["fingerprint"]
    assert {k: v for k, v in result["metrics"].items() if k.startswith("val_")} == {
        k: v for k, v in original["metrics"].items() if k.startswith("val_")
    }
    params = [
        client_for(db).get_run(r["run_id"]).data.params
        for db, r in ((store, original), (again, result))
    ]
    assert [p["data.positive_class"] for p in params] == ["spam", "spam"]


def test_a_header_that_names_a_column_twice_is_refused_in_one_line(tmp_path):
    """Before: both columns trained under one name, and the logged model's input example dropped one (MLflow:
    "DataFrame columns are not unique"); a run could end behind MLflow's tracebacks."""
    path = write_csv(tmp_path / "dup.csv", X[:, 0], header="a,a,y")
    assert refused(path, "data.target=y") == (
        f"data.path={path}: the header names column 'a' 2 times (columns 1, 2): "
        "give each column its own name in the file's first line"
    )
    assert (
        load(write_csv(tmp_path / "ok.csv", X[:, 0], header="a,b,y"), "data.target=y").n_features
        == 2
    )


def test_a_file_rewritten_between_two_sweeps_of_one_process_is_read_again(tmp_path):
    """load_plain keeps what it read for the sweep's launching process: a notebook's second sweep of an edited CSV
    (same path, same split) trained on the first version of it."""
    path = tmp_path / "t.csv"

    def write(scale: int) -> None:
        path.write_text(
            "a,b,y\n" + "".join(f"{i},{(i * 7) % 5},{scale * (2 * i + 1)}\n" for i in range(40))
        )

    write(1)
    node = {
        **OmegaConf.to_container(choices.option("data", "csv")),
        "path": str(path),
        "target": "y",
    }
    first = data.load_plain(node)
    assert data.load_plain(node) is first  # unchanged: the same Dataset, read once
    write(100)
    second = data.load_plain(node)
    assert second is not first
    assert second.y_mean == pytest.approx(100 * first.y_mean)


def test_a_json_object_or_array_in_a_cell_is_one_line_and_data_drop_leaves_it_out(tmp_path):
    """Before: a traceback (``float() argument must be ... not 'dict'``) from the categories'
    encoder; as the target, "every column must be numeric" (a text target is allowed)."""
    path = tmp_path / "t.json"
    records = [
        {"a": i % 7, "meta": {"k": i}, "tags": ["x"] * (i % 2), "y": i % 5} for i in range(40)
    ]
    path.write_text(json.dumps(records))
    message = refused(path)
    assert message.startswith(f"data.path={path}: 2 problems: column meta holds a JSON object")
    assert '(row 1: {"k": 0})' in message and "leave it out with data.drop=[meta]" in message
    assert "column tags holds a JSON array (row 1: [])" in message
    assert len(load(path, "data.drop=[meta,tags]").X_train[0]) == 1
    assert refused(path, "data.target=meta", "data.drop=[tags]").endswith(
        'the target column meta holds a JSON object (row 1: {"k": 0}); a cell is a number, '
        "text, true/false or null: choose another with data.target"
    )

"""Text data (data=sms, data=text): features fitted on the training rows, sparse training, raw-string models."""

import csv
import re

import numpy as np
import pytest
import scipy.sparse

from conftest import SHARED_DATA, cli, client_for, make_cfg, run_once
from sweeper import data
from sweeper.base.backend import resolve
from sweeper.data import DataError
from sweeper.job.compute import train_and_score

SMS = SHARED_DATA / "SMSSpamCollection.tsv"
needs_sms = pytest.mark.skipif(
    not SMS.is_file(), reason=f"the SMS Spam Collection is not at {SMS} (../shared absent)"
)
TIMINGS = ("time_s", "epochs_per_s")


def sms_cfg(*overrides, store=None):
    return make_cfg("data=sms", f"data.path={SMS}", *overrides, store=store)


def write_docs(path, rows, header=("text", "label"), sep=","):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter=sep)
        if header:
            w.writerow(header)
        w.writerows(rows)
    return path


DOCS = [
    (f"win a free prize now {i}", "spam") if i % 3 == 0 else (f"see you at lunch friend {i}", "ham")
    for i in range(30)
]


@needs_sms
def test_sms_reads_every_message_and_spam_is_one():
    ds = data.load(sms_cfg("data.val_fraction=0.1", "data.test_fraction=0.1").data, 0)
    n = ds.X_train.shape[0] + ds.X_val.shape[0] + ds.X_test.shape[0]
    assert n == 5574  # quote characters inside messages do not merge lines
    y = np.concatenate([ds.y_train, ds.y_val, ds.y_test]).ravel()
    assert ds.task == "binary" and ds.positive_class == "spam" and int(y.sum()) == 747
    assert scipy.sparse.issparse(ds.X_train) and ds.X_train.shape[1] == data.vocabulary_size(
        ds.vectorizer
    )
    capped = data.load(sms_cfg("data.max_features=1000").data, 0)
    assert capped.X_train.shape[1] == 1000 < ds.X_train.shape[1]


@needs_sms
def test_the_vectorizer_is_fitted_on_the_training_rows_only():
    ds = data.load(sms_cfg("data.max_features=0").data, 0)
    analyze = ds.vectorizer.build_analyzer()
    docs = data.LOADERS["sms"](sms_cfg().data, 0).X
    train, val, test = data.split(len(docs), 0.2, 0.2, 0)
    assert (docs[test] == ds.text_test).all()
    train_words = {w for d in docs[train] for w in analyze(d)}
    test_only = {w for d in docs[test] for w in analyze(d)} - train_words
    assert test_only, "the split leaves no word to the test rows alone"
    assert not test_only & set(ds.vectorizer.vocabulary_)
    assert set(ds.vectorizer.vocabulary_) <= train_words


@needs_sms
def test_depth_0_reaches_logistic_regression_on_the_same_features():
    from sklearn.linear_model import LogisticRegression

    cfg = sms_cfg("depth=0", "lr=50", "epochs=2000", "log_every=100")
    ds = data.load(cfg.data, cfg.seed)
    out = train_and_score(cfg, ds, resolve("cpu"))
    ref = LogisticRegression(C=1e4, max_iter=5000).fit(ds.X_train, ds.y_train.ravel())
    ref_acc = ref.score(ds.X_test, ds.y_test.ravel())
    assert out.scores["test_accuracy"] >= ref_acc - 0.01, (out.scores["test_accuracy"], ref_acc)


@needs_sms
def test_sparse_and_dense_training_agree():
    scores = {}
    for sparse in ("true", "false"):
        cfg = sms_cfg(
            "depth=1",
            "width=8",
            "lr=1",
            "epochs=100",
            "log_every=10",
            "data.max_features=2000",
            f"data.sparse={sparse}",
        )
        ds = data.load(cfg.data, cfg.seed)
        assert scipy.sparse.issparse(ds.X_train) == (sparse == "true")
        scores[sparse] = {
            k: v
            for k, v in train_and_score(cfg, ds, resolve("cpu")).scores.items()
            if not k.endswith(TIMINGS)
        }
    assert scores["true"].keys() == scores["false"].keys() and "test_log_loss" in scores["true"]
    for k, v in scores["true"].items():
        assert v == pytest.approx(scores["false"][k], rel=1e-9, abs=1e-12), k


@needs_sms
def test_depth_1_run_logs_the_vocabulary_and_a_model_that_takes_raw_strings(tmp_path, store):
    import mlflow.pyfunc

    result = run_once(
        tmp_path,
        "data=sms",
        f"data.path={SMS}",
        "depth=1",
        "width=16",
        "lr=5",
        "epochs=300",
        "log_every=50",
        store=store,
    )
    assert result["status"] == "FINISHED", result.get("reason")
    assert result["metrics"]["test_accuracy"] >= 0.97
    run = client_for(store).get_run(result["run_id"])
    ds = data.load(sms_cfg().data, 0)
    assert (
        run.data.metrics["vocabulary_size"] == ds.X_train.shape[1]
        and run.data.params["data.max_features"] == "10000"
    )
    # data=sms has no such key: promote could not re-run it
    assert "data.positive_class" not in run.data.params

    model = mlflow.pyfunc.load_model(str(tmp_path / "job" / "model" / "model"))
    inputs = model.metadata.get_input_schema().inputs
    assert [(c.name, c.type.name) for c in inputs] == [("text", "string")]
    logged = np.loadtxt(tmp_path / "job" / "test_predictions.csv", delimiter=",", skiprows=1)[:, 1]
    import pandas as pd

    pred = model.predict(pd.DataFrame({"text": ds.text_test.tolist()}))
    np.testing.assert_allclose(pred, logged, rtol=1e-12, atol=1e-15)
    assert (
        model.predict(
            pd.DataFrame({"text": ["WINNER!! Claim your free prize: call 09061701461 now"]})
        )[0]
        > 0.5
    )


def test_a_text_file_trains_and_counts_features(tmp_path):
    path = write_docs(tmp_path / "docs.csv", DOCS)
    ds = data.load(make_cfg("data=text", f"data.path={path}", "data.features=counts").data, 0)
    assert ds.positive_class == "spam" and scipy.sparse.issparse(ds.X_train)
    assert ds.X_train.max() == 1 and "prize" in ds.vectorizer.vocabulary_
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("".join(f'{{"body": "{t}", "y": "{y}"}}\n' for t, y in DOCS))
    ds = data.load(
        make_cfg(
            "data=text",
            f"data.path={jsonl}",
            "data.text=body",
            "data.target=y",
            "data.features=hashing",
            "data.max_features=64",
        ).data,
        0,
    )
    assert ds.X_train.shape[1] == 64


@pytest.mark.parametrize(
    "rows, overrides, error",
    [
        (
            DOCS,
            ("data.text=body",),
            r"data.text=body is not a column of .*: columns are \['text', 'label'\]",
        ),
        ([("", y) for _, y in DOCS], (), r"the text column text is empty in every row"),
        (
            [(t, "ham") for t, _ in DOCS],
            (),
            r"docs.csv: the target \(column label\) holds one value \('ham'\) in every row: there is "
            "nothing to learn",
        ),
        (
            DOCS,
            ("data.text=label", "data.target=label"),
            r"data.text=label and data.target=label name the same column",
        ),
        (DOCS, ("data.min_df=100",), r"no features from the training documents .* data.min_df=100"),
    ],
)
def test_bad_text_files_are_refused_in_one_line(tmp_path, rows, overrides, error):
    path = write_docs(tmp_path / "docs.csv", rows)
    with pytest.raises(DataError) as err:
        data.load(make_cfg("data=text", f"data.path={path}", *overrides).data, 0)
    assert "\n" not in str(err.value) and re.search(error, str(err.value)), str(err.value)


def test_a_missing_text_value_in_a_jsonl_record_is_refused(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text('{"text": "hello", "label": "ham"}\n{"label": "spam"}\n')
    with pytest.raises(
        DataError, match=r"the text column text holds no value in row 2; every row needs a text"
    ):
        data.load(make_cfg("data=text", f"data.path={path}").data, 0)


def test_cli_refuses_bad_text_input_with_exit_2_and_leaves_the_store_untouched(tmp_path, store):
    bad = tmp_path / "latin1.csv"
    bad.write_bytes(
        "text,label\n".encode() + "".join(f"caf\xe9 {t},{y}\n" for t, y in DOCS).encode("latin-1")
    )
    before = store.read_bytes()
    p = cli(tmp_path, "data=text", f"data.path={bad}", store=store)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith(
        f"sweeper: error: data.path={bad} is not UTF-8 text (byte 0xe9 at offset 14)"
    )
    missing = tmp_path / "nope" / "SMSSpamCollection"
    p = cli(tmp_path, "data=sms", f"data.path={missing}", store=store)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert (
        f"data.path={missing} does not exist: download smsspamcollection.zip from https://archive.ics.uci.edu"
        in p.stderr
    )
    assert store.read_bytes() == before


@needs_sms
def test_mini_batches_of_sparse_features_are_refused_in_one_line(tmp_path, store):
    proc = cli(tmp_path, "data=sms", f"data.path={SMS}", "batch_size=32", "epochs=3", store=store)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "sweeper: error: batch_size=32 is not allowed with sparse text features (data.sparse=true): "
        "expected batch_size=0 (full batch), or data.sparse=false"
    ]

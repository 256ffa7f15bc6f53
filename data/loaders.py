"""Raw loaders: each returns a :class:`Raw`, host arrays ``X`` (n, d) and ``y`` (n,) in
float64 and the task."""

from __future__ import annotations

import csv
import importlib.util
from collections import Counter
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from sweeper.base.fmt import near
from sweeper.data.table import read as read_table
from sweeper.data.columns import Column, ColumnError, choose, json_cell, one_column_hint
from sweeper.data.readers import (
    DataError,
    _parses,
    _read_delimited,
    _read_json,
    _read_jsonl,
    _read_npz,
    _shown,
    _text,
    decimal_mark,
)


__all__ = [
    "ASK_CLASSES",
    "ASK_REGRESSION",
    "DataError",
    "FEATURE_NAMES",
    "LOADERS",
    "TEXT",
    "breast_cancer",
    "diabetes",
]


class Raw(NamedTuple):
    """What a loader returns; a binary target is 0/1 and ``positive_class`` names the
    value read as 1; a multi-class target is the class index 0..k-1 and ``classes``
    names the k classes in that order. A table (data=csv) leaves ``X`` None and gives
    its feature ``columns`` raw, to encode once split; ``decisions`` says in words what
    was read (separator, target, dropped columns) for the run's tags."""

    X: np.ndarray | None
    y: np.ndarray
    task: str
    positive_class: str | None = None
    classes: tuple[str, ...] | None = None
    columns: list[Column] | None = None
    decisions: dict[str, str] | None = None
    report: list[dict[str, Any]] | None = None  # a table's column report (sweeper.data.table.read)


# With data.task=auto, a target of 3..MAX_CLASSES distinct integers looks like class
# labels, not a number.
MAX_CLASSES = 20


# The bundled tables' column names (a logged model's input columns), as scikit-learn's
# loaders name them; the others' columns are x0, x1, ...
FEATURE_NAMES = MappingProxyType(
    {
        "diabetes": ("age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6"),
        "iris": ("sepal_length", "sepal_width", "petal_length", "petal_width"),
    }
)


def xor(cfg: Any, seed: int) -> Raw:
    X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.float64)
    return Raw(X, np.array([0, 1, 1, 0], dtype=np.float64), "binary")


def _bundled(name: str) -> Path:
    """A data file scikit-learn ships (``sklearn/datasets/data/NAME``), found without importing
    scikit-learn (~1 s here: every job process would pay it for a few kB of CSV)."""

    spec = importlib.util.find_spec("sklearn")
    if spec is None or spec.origin is None:
        raise DataError(
            f"the bundled data set {name} comes with scikit-learn, which is not "
            "installed: pip install scikit-learn"
        )
    return Path(spec.origin).parent / "datasets" / "data" / name


def diabetes(cfg: Any, seed: int) -> Raw:
    """scikit-learn's diabetes data as ``load_diabetes()`` returns it: 442 × 10, each
    feature centred and scaled to unit norm (``scale(X) / sqrt(n)``), the target
    a disease-progression score."""
    X = np.loadtxt(_bundled("diabetes_data_raw.csv.gz"))
    y = np.loadtxt(_bundled("diabetes_target.csv.gz"))
    X = (X - X.mean(axis=0)) / X.std(axis=0) / np.sqrt(len(X))
    return Raw(X, y.astype(np.float64), "regression")


def breast_cancer(cfg: Any, seed: int) -> Raw:
    """scikit-learn's Wisconsin breast cancer data: 569 × 30; 1 = benign, as
    ``load_breast_cancer()``."""
    table = np.loadtxt(_bundled("breast_cancer.csv"), delimiter=",", skiprows=1)
    return Raw(table[:, :-1], table[:, -1], "binary")


def _class_table(name: str) -> Raw:
    """One of scikit-learn's class tables (iris.csv, wine_data.csv): a first line
    ``n,d,name_0,name_1,...``, then rows of d features and the class index, as
    ``load_iris()`` / ``load_wine()`` read them."""
    path = _bundled(name)
    with open(path) as f:
        head = f.readline().strip().split(",")
    table = np.loadtxt(path, delimiter=",", skiprows=1)
    return Raw(table[:, :-1], table[:, -1], "multiclass", None, tuple(head[2:]))


def iris(cfg: Any, seed: int) -> Raw:
    """scikit-learn's iris data: 150 × 4, 3 classes (setosa, versicolor, virginica)."""
    return _class_table("iris.csv")


def wine(cfg: Any, seed: int) -> Raw:
    """scikit-learn's wine data: 178 × 13, 3 classes (class_0..class_2)."""
    return _class_table("wine_data.csv")


def digits(cfg: Any, seed: int) -> Raw:
    """scikit-learn's handwritten digits as ``load_digits()``: 1797 8×8 images (64
    pixels, 0..16), 10 classes."""
    table = np.loadtxt(_bundled("digits.csv.gz"), delimiter=",")
    return Raw(table[:, :-1], table[:, -1], "multiclass", None, tuple(str(i) for i in range(10)))


def spambase(cfg: Any, seed: int) -> Raw:
    """UCI Spambase: 57 comma-separated features, then the label (1 = spam); no header."""
    path = Path(cfg.path)
    _, rows, _ = _read_delimited(path, header=False, sep=",")
    if _width(rows, path) != 58:
        raise DataError(
            f"data.path={path}: expected 58 columns (57 features + label), found "
            f"{_width(rows, path)}"
        )
    table = _to_float(rows, None, path)
    return Raw(table[:, :-1], table[:, -1], "binary")


def synthetic(cfg: Any, seed: int) -> Raw:
    """Gaussian features; the target is a linear term plus a smooth non-linear one plus noise.

    Regression: ``y = X w + sin(X v) + noise``; binary: ``y = [X w + sin(X v) + noise > 0]``.
    """
    rng = np.random.default_rng(seed)
    n, d = cfg.n_samples, cfg.n_features
    X = rng.standard_normal((n, d))
    w, v = rng.standard_normal((2, d)) / np.sqrt(d)
    signal = X @ w + np.sin(X @ v) + cfg.noise * rng.standard_normal(n)
    if cfg.task == "binary":
        return Raw(X, (signal > 0).astype(np.float64), "binary")
    return Raw(X, signal, "regression")


def csv_file(cfg: Any, seed: int) -> Raw:
    """A user file: delimited text, JSON (records or columns) or NPZ (arrays ``X`` and ``y``).

    A table's numeric columns are features as read; a column of text (``M``/``F``/``I``) is one-hot
    encoded once split (:mod:`sweeper.data.columns`); ``data.drop`` / ``data.features``
    choose the columns. The target may be text when it holds two or more values
    (``ham``/``spam``); any two-valued target is read as 0/1, the later-sorted value (or
    ``data.positive_class``) being 1.
    """
    path = Path(cfg.path)
    drop, features = getattr(cfg, "drop", None) or [], getattr(cfg, "features", None) or []
    if path.suffix.lower() == ".npz":
        if drop or features:
            raise DataError(
                f"data.path={path}: data.drop and data.features choose columns of a "
                "table, not of an "
                ".npz file's X: leave them empty"
            )
        X, target = _read_npz(path)
        y, task, positive, classes = _target(target, "y", cfg.task, cfg.positive_class, path)
        return Raw(
            X,
            y,
            task,
            positive,
            classes,
            decisions=_decided(y, task, positive, classes, cfg.task, "y", {}),
        )
    names, rows, width, decisions = _table(path, cfg)
    col = _target_index(cfg.target, names, width, path)
    columns = names or list(range(width))  # as the file numbers them, for the errors
    said = decimal_mark(rows, columns, getattr(cfg, "decimal", "auto"), decisions.get("sep", ""))
    if said:
        decisions["numbers"] = said
    label, target = columns[col], [r[col] for r in rows]
    if width == 1:
        raise DataError(
            f"data.path={path}: there is no column besides the target {label}; add feature columns"
        )
    try:
        idx = choose(columns, col, drop, features, names is not None)
        feats, kept, report, read_as = read_table(cfg, columns, rows, col, idx, names is not None)
    except ColumnError as e:
        raise DataError(f"data.path={path}: {e}") from None
    left = [str(columns[j]) for j in range(width) if j != col and j not in idx]
    if left:
        decisions["dropped"] = ", ".join(left)
    decisions |= read_as
    y, task, positive, classes = _target(
        [target[i] for i in kept], label, cfg.task, cfg.positive_class, path
    )
    return Raw(
        None,
        y,
        task,
        positive,
        classes,
        columns=feats,
        decisions=_decided(y, task, positive, classes, cfg.task, label, decisions),
        report=report,
    )


# what an integer target read as classes (data.task=auto) says; sweeper.run logs that
# line as a warning
ASK_REGRESSION = "pass data.task=regression to predict the number"
# what a text target of more than MAX_CLASSES values read as classes (data.task=auto)
# says, also as a warning
ASK_CLASSES = (
    f"more than {MAX_CLASSES} distinct text values, each a class: check data.target names "
    "the label column"
)


def _decided(
    y: np.ndarray,
    task: str,
    positive: str | None,
    classes: tuple[str, ...] | None,
    asked: str,
    label: Any,
    decisions: dict[str, str],
) -> dict[str, str]:
    """``_target``'s reading, with what it decided added to ``decisions`` (the resolved
    task, the target's classes or range); numbers read as classes
    without data.task=multiclass say how to predict the number."""
    label = label if isinstance(label, str) else f"column {label}"
    if task == "regression":
        decisions["task"] = "regression" + (
            "" if asked == "regression" else f" ({asked}: a numeric target)"
        )
        decisions["target"] = f"{label}: range [{y.min():g}, {y.max():g}]"
    elif task == "binary":
        decisions["task"] = "binary" + (
            "" if asked == "binary" else f" ({asked}: two distinct values)"
        )
        decisions["target"] = f"{label}: 1 = {positive}"
    else:
        numbers = all(_parses(c) for c in classes)
        ask = ASK_REGRESSION if numbers else ASK_CLASSES if len(classes) > MAX_CLASSES else ""
        decisions["task"] = "multiclass" + (
            ""
            if asked == "multiclass"
            else f" ({asked}: read as {len(classes)} classes" + (f"; {ask})" if ask else ")")
        )
        decisions["target"] = f"{label}: {len(classes)} classes {_shown(list(classes), 10)}"
    return decisions


def sms(cfg: Any, seed: int) -> Raw:
    """The UCI SMS Spam Collection: ``label<TAB>message`` per line, no header, no quoting; 1 = spam.

    ``X`` holds the messages (an object array of strings): :func:`sweeper.data.load` turns them into
    features fitted on the training rows only."""
    path = Path(cfg.path)
    _, rows, _ = _read_delimited(path, header=False, sep="\t", quoting=csv.QUOTE_NONE)
    if _width(rows, path) != 2:
        raise DataError(
            f"data.path={path}: expected 2 tab-separated fields per line (label, message), "
            f"found {_width(rows, path)}; is it SMSSpamCollection?"
        )
    return Raw(
        np.array([r[1] for r in rows], dtype=object),
        *_target([r[0] for r in rows], 0, "binary", "spam", path),
    )


def text_file(cfg: Any, seed: int) -> Raw:
    """A user file of documents: .csv/.tsv/.txt (delimited), .json (records or columns)
    or .jsonl (one record a line); ``data.text`` names the text column, ``data.target``
    the label (read as by ``data=csv``)."""
    path = Path(cfg.path)
    names, rows, width, decisions = _table(path, cfg)
    col = _target_index(cfg.target, names, width, path)
    tcol = _target_index(cfg.text, names, width, path, key="data.text")
    columns = names or list(range(width))
    if tcol == col:
        raise DataError(
            f"data.text={cfg.text} and data.target={cfg.target} name the same column "
            f"{columns[col]} "
            f"of {path}: the text and the target must be different columns"
        )
    texts = [r[tcol] for r in rows]
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise DataError(
                f"data.path={path}: the text column {columns[tcol]} holds "
                f"{'no value' if t is None else repr(t)} in row {i + 1}; every row needs a text"
            )
    if not any(t.strip() for t in texts):
        raise DataError(
            f"data.path={path}: the text column {columns[tcol]} is empty in every row; "
            "set data.text to the column that holds the documents"
        )
    y, task, positive, classes = _target(
        [r[col] for r in rows], columns[col], cfg.task, cfg.positive_class, path
    )
    _decided(y, task, positive, classes, cfg.task, columns[col], decisions)
    return Raw(np.array(texts, dtype=object), y, task, positive, classes, decisions=decisions)


def _table(path: Path, cfg: Any) -> tuple[list[str] | None, list[list[Any]], int, dict[str, str]]:
    """A delimited, .json or .jsonl file's column names (or None), rows, number of
    fields, and the decisions taken reading it (the separator used)."""
    suffix = path.suffix.lower()
    if suffix == ".gz":  # t.json.gz: read as its own kind, decompressed
        suffix = Path(path.stem).suffix.lower()
    decisions: dict[str, str] = {}
    if suffix == ".json":
        names, rows = _read_json(path)
    elif suffix == ".jsonl":
        names, rows = _read_jsonl(path)
    else:
        names, rows, decisions["sep"] = _read_delimited(path, cfg.header, cfg.sep)
        last = {len(r) for r in rows} if rows else set()
        header_too = names is not None and last == {len(names)} and not names[-1]
        if (
            len(last) == 1
            and (names is None or header_too or last == {len(names) + 1})
            and all(not r[-1].strip() for r in rows)
        ):
            # a separator ending every line (exports do it; some only on the data lines): no
            # column, not the target
            names, rows = names[:-1] if header_too else names, [r[:-1] for r in rows]
            decisions["sep"] += "; every line ends with it: the empty last field left out"
        if names:  # a column without a name is named as pandas names it (its rows' key)
            names = [n or f"Unnamed: {j}" for j, n in enumerate(names)]
    width = _width(rows, path)
    if names is not None and len(names) != width:
        shown = ",".join(map(str, names))
        raise DataError(
            f"data.path={path}: the header has {len(names)} names ({shown[:60]!r}) but the "
            f"rows have {width} fields; a title line above the header? remove it; else check "
            "data.sep and data.header"
        )
    first = _text(path).lstrip().split("\n", 1)[0] if width == 1 and "sep" in decisions else ""
    if one_column_hint(first):
        raise DataError(
            f"data.path={path}: each line reads as one column with data.sep={cfg.sep} "
            f"({_shown([first[:60]], 1)}); {one_column_hint(first)}"
        )
    return names, rows, width, decisions


def _label(v: Any) -> str:
    """A target value as text: ``2`` for 2.0, ``0.5``, or the string itself."""
    if isinstance(v, str):
        return v
    return str(int(v)) if float(v).is_integer() else str(float(v))


def _target(
    values: list[Any], label: Any, task: str, positive: Any, path: Path
) -> tuple[np.ndarray, str, str | None, tuple[str, ...] | None]:
    """The target as float64, its task, for a binary task the value read as 1, for
    a multi-class task the classes.

    A two-valued target (numbers or text) becomes 0/1: the later-sorted value is 1 unless
    ``positive`` (the ``data.positive_class``) names the other. With ``task=auto``, 3 to
    MAX_CLASSES distinct integers, or text with 3 or more values, are class labels
    (multiclass: the index of the value in sorted order); more distinct numbers make a
    regression. ``task=multiclass`` reads any target's distinct values as classes.
    """
    column = f"column {label} of {path}"
    nested = json_cell(label, values)
    if nested:
        raise DataError(f"data.path={path}: the target {nested}: choose another with data.target")
    text = all(isinstance(v, str) and not _parses(v) for v in values)  # labels such as ham/spam
    if text:
        y = np.array([v.strip() for v in values], dtype=object)
        classes = sorted(set(y))
    else:
        # a stray text value: the column's own error
        y = _to_float([[v] for v in values], [label], path).ravel()
        bad = np.flatnonzero(~np.isfinite(y))
        if bad.size:
            raise DataError(
                f"data.path={path}: the target (column {label}) holds a missing or "
                "non-finite value "
                f"(row {bad[0] + 1}); clean it first"
            )
        classes = np.unique(y).tolist()
    labels = [_label(c) for c in classes]
    shown = _shown([repr(c) for c in labels] if text else labels)
    if len(classes) < 2 <= len(values) and (task == "auto" or task == "regression" and not text):
        # a constant: a regression would "learn" it with any weights (val_mse ~0); one class
        # (ham in every row) has nothing to tell apart
        raise DataError(
            f"data.path={path}: the target ({column.split(' of ')[0]}) holds one value "
            f"({shown}) in every "
            "row: there is nothing to learn; choose another target column (data.target)"
        )
    if task == "regression":
        if text:
            raise DataError(
                f"data.task=regression needs a numeric target: {column} holds text ({shown}); "
                "set data.task=auto for a two-valued text target"
            )
        if positive != "auto":
            raise DataError(
                f"data.positive_class={positive} is for a binary target: leave it at auto with "
                "data.task=regression"
            )
        return y, "regression", None, None
    if task == "multiclass" and positive != "auto":
        raise DataError(
            f"data.positive_class={positive} is for a binary target: leave it at auto with "
            "data.task=multiclass"
        )
    labelled = text or (
        3 <= len(classes) <= MAX_CLASSES and all(float(c).is_integer() for c in classes)
    )
    if (
        task == "multiclass"
        or task == "auto"
        and positive == "auto"
        and len(classes) > 2
        and labelled
    ):
        if len(classes) < 2:
            raise DataError(
                f"data.task=multiclass needs two or more distinct values: {column} has "
                f"one ({shown})"
            )
        index = {c: i for i, c in enumerate(classes)}
        return (
            np.array([index[v] for v in y.tolist()], dtype=np.float64),
            "multiclass",
            None,
            tuple(labels),
        )
    if task == "auto" and positive == "auto" and len(classes) != 2 and not text:
        return y, "regression", None, None
    if len(classes) != 2:
        who, hint = (
            ("data.task=binary", "set data.task=multiclass for more classes")
            if task == "binary"
            else (f"data.positive_class={positive}", "leave data.positive_class=auto")
            if positive != "auto"
            else ("a text target", "set data.task=multiclass for more classes")
        )
        raise DataError(
            f"{who} needs two distinct values: {column} has {len(classes)} ({shown}); {hint}"
        )
    want = labels[1] if positive == "auto" else _label(positive)
    if want not in labels:
        raise DataError(
            f"data.positive_class={positive} is not a value of the target: {column} "
            f"holds {labels[0]} "
            f"and {labels[1]}"
        )
    return (y == classes[labels.index(want)]).astype(np.float64), "binary", want, None


def _target_index(
    target: Any, names: list[str] | None, n_cols: int, path: Path, key: str = "data.target"
) -> int:
    """The index of the column ``key`` (``data.target``, ``data.text``) names: a header
    name or an index."""
    if isinstance(target, str):
        if names is None:
            raise DataError(
                f"{key}={target} is a column name, but {path} is read without a header "
                "(data.header=false): give the column's index instead"
            )
        if target not in names:
            raise DataError(
                f"{key}={target} is not a column of {path}{near(target, names)}: "
                f"columns are {names}"
            )
        if names.count(target) > 1:
            where = ", ".join(str(j) for j, n in enumerate(names) if n == target)
            raise DataError(
                f"{key}={target} names {names.count(target)} columns of {path} (indices {where}): "
                f"rename them, or give the column's index ({key}=INDEX)"
            )
        return names.index(target)
    if not -n_cols <= target < n_cols:
        raise DataError(f"{key}={target} is out of range for {path}, which has {n_cols} columns")
    return target % n_cols


def _width(rows: list[list[Any]], path: Path) -> int:
    """The number of fields of every row."""
    if not rows:
        raise DataError(f"data.path={path} holds no rows")
    widths = Counter(len(r) for r in rows)
    if len(widths) != 1:
        most = widths.most_common(1)[0][0]
        i = next(i for i, r in enumerate(rows) if len(r) != most)
        odd = ",".join(map(str, rows[i]))[:60]
        raise DataError(
            f"data.path={path}: rows have different numbers of fields {sorted(widths)}: "
            f"{widths[most]} rows have {most}, row {i + 1} has {len(rows[i])} ({odd!r}); "
            "a line that is no table row (a title, a total)? remove it; else check data.sep"
        )
    return next(iter(widths))


def _to_float(rows: list[list[Any]], names: list[Any] | None, path: Path) -> np.ndarray:
    try:
        return np.asarray(rows, dtype=np.float64)
    except (TypeError, ValueError):
        for j in range(len(rows[0])):
            for i, r in enumerate(rows):
                if not _parses(r[j]):
                    col = names[j] if names else j
                    raise DataError(
                        f"data.path={path}: column {col} holds a non-numeric value "
                        f"{r[j]!r} (row {i + 1}); "
                        "every column must be numeric"
                    ) from None
        raise


LOADERS = MappingProxyType(
    {
        "xor": xor,
        "diabetes": diabetes,
        "breast_cancer": breast_cancer,
        "iris": iris,
        "wine": wine,
        "digits": digits,
        "spambase": spambase,
        "synthetic": synthetic,
        "csv": csv_file,
        "sms": sms,
        "text": text_file,
    }
)
# Data sets whose X holds documents, turned into features by sweeper.data.load (data.features, ...).
TEXT = ("sms", "text")

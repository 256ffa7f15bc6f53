"""data/: load a data set as host arrays, split it with the run's ``data.split_seed``,
and standardise on train only."""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from omegaconf import OmegaConf
from sweeper.base.backend import is_sparse
from sweeper.base.portable import fills_missing
from sweeper.data.columns import _widths, encode_columns, encode_rows, fit
from sweeper.data.columns import describe as encoded
from sweeper.data.loaders import (
    ASK_CLASSES,
    ASK_REGRESSION,
    FEATURE_NAMES,
    LOADERS,
    TEXT,
    DataError,
)
from sweeper.data.table import describe_column, finish_report

__all__ = [
    "ASK_CLASSES",
    "ASK_REGRESSION",
    "DECIDED",
    "DECIDED_COLUMNS",
    "DataError",
    "Dataset",
    "LOADERS",
    "TEXT",
    "column_lines",
    "decision_tags",
    "describe",
    "encode_rows",
    "fold_indexes",
    "folds_of",
    "is_sparse",
    "load",
    "load_folds",
    "load_plain",
    "read_to_check",
    "split",
    "split_folds",
    "split_seed",
    "stack_rows",
    "vectorizer",
    "vectorizer_state",
    "vocabulary_size",
]


@dataclass
class Dataset:
    """Standardised host arrays ``X_*`` (n, d) and targets ``y_*`` (n, 1), float64.

    For regression the target is standardised with the training mean and scale; :meth:`to_original`
    maps predictions back so metrics are in the target's own units. Binary targets are 0/1;
    ``positive_class`` names the file's value read as 1 (user files only, e.g. ``spam``).
    """

    name: str
    task: str  # "regression" | "binary" | "multiclass" (y: the class index)
    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    y_mean: float = 0.0
    y_scale: float = 1.0
    x_mean: np.ndarray | None = None  # (d,) the training scaler, to map raw features in
    x_scale: np.ndarray | None = None
    positive_class: str | None = None
    # a multi-class target's class names, in the order of its indices
    classes: tuple[str, ...] | None = None
    # text data (data=sms|text): the vectorizer fitted on the training rows, and the
    # test rows' documents
    vectorizer: Any = None
    text_test: np.ndarray | None = None
    # a table (data=csv): the encoder fitted on the training rows
    # (sweeper.data.columns.fit: the columns in order, a categorical one's categories,
    # the scaler) and the test rows' raw values, one list per column
    encoder: dict[str, Any] | None = None
    columns_test: list[list[Any]] | None = None
    # what was read from a user file, in words, for the run's tags and first log line:
    # task, target, sep, dropped, encoded (see :func:`describe`)
    decisions: dict[str, str] = field(default_factory=dict)
    # a bundled table's feature names (diabetes: age, sex, bmi, ...); None: x0, x1, ...
    feature_names: tuple[str, ...] | None = None
    # a table's column report: one dict per column of the file (sweeper.data.table), the
    # run's columns.json
    report: list[dict[str, Any]] | None = None

    @property
    def n_features(self) -> int:
        return self.X_train.shape[1]

    @property
    def n_outputs(self) -> int:
        """The model's outputs: one per class for a multi-class task, else one."""
        return len(self.classes) if self.task == "multiclass" else 1

    @property
    def categorical(self) -> bool:
        """Whether a feature column is categorical, a date, or has missing cells: the
        model then takes the file's raw columns (categories and dates as text, missing
        cells as None or NaN)."""
        return bool(self.optional_columns)

    def test_inputs(self) -> Any:
        """The test rows as a model takes them in: raw features, documents (strings) for
        text data, or for a table with a categorical column its raw columns
        (a DataFrame: numbers, and categories as text)."""
        if self.vectorizer is not None:
            return self.text_test
        if self.categorical:
            # lazy: saves ~259 ms at this module's import (measured)
            import pandas as pd

            return pd.DataFrame(
                {
                    str(c["name"]): (
                        np.asarray(v, dtype=np.float64)
                        if not ("categories" in c or c.get("date"))
                        else np.array([None if x is None else str(x) for x in v], dtype=object)
                    )
                    for c, v in zip(self.encoder["columns"], self.columns_test)
                }
            )
        return self.raw(self.X_test)

    @property
    def optional_columns(self) -> list[str]:
        """A table's columns that a logged model fills when a cell is missing: a number
        that had missing cells in training (its median and indicator), a category (a
        level of its own, or all zeros), a date (the median)."""
        if self.encoder is None:
            return []

        return [str(c["name"]) for c in self.encoder["columns"] if fills_missing(c)]

    @property
    def input_columns(self) -> list[str]:
        """The columns a logged model takes: a table's own (a file's header, or ``0``, ``1``, ...
        without one), a bundled data set's feature names (else ``x0``, ``x1``, ...), or ``text``."""
        if self.vectorizer is not None:
            return ["text"]
        if self.encoder is not None:
            return [str(c["name"]) for c in self.encoder["columns"]]
        return list(self.feature_names or [f"x{i}" for i in range(self.n_features)])

    def to_original(self, y: np.ndarray) -> np.ndarray:
        return y * self.y_scale + self.y_mean

    def raw(self, X: np.ndarray) -> np.ndarray:
        """Standardised rows back to the features as read from the file."""
        return X * self.x_scale + self.x_mean


def split(
    n: int, val_fraction: float, test_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seeded train/val/test row indices. A fraction of 0 reuses the training rows (e.g.
    XOR's 4 points)."""
    order = np.random.default_rng(seed).permutation(n)
    n_test = max(1, round(n * test_fraction)) if test_fraction else 0
    n_val = max(1, round(n * val_fraction)) if val_fraction else 0
    test, val, train = order[:n_test], order[n_test : n_test + n_val], order[n_test + n_val :]
    return train, (val if n_val else train), (test if n_test else train)


def split_folds(
    n: int,
    test_fraction: float,
    seed: int,
    k: int,
    y: np.ndarray | None = None,
    task: str = "regression",
) -> tuple[list[np.ndarray], np.ndarray]:
    """``k`` validation folds of the rows outside the test split, and the test rows
    (``data.folds=k``).

    The test rows are the ones :func:`split` draws with the same ``seed`` and ``test_fraction``
    (the same rows as a run without folds); the others, in the seed's order, are dealt out to
    the folds one after another, a class after another for a binary or multi-class ``task``
    (stratified: each fold holds a class's rows to within one). Every non-test row is in
    exactly one fold. Fold ``i``'s training rows are the non-test rows outside it."""
    order = np.random.default_rng(seed).permutation(n)
    n_test = max(1, round(n * test_fraction)) if test_fraction else 0
    test, rest = order[:n_test], order[n_test:]
    # another task: a KeyError
    stratified = {"regression": False, "binary": True, "multiclass": True}[task]
    if stratified and y is not None:
        labels = np.ravel(y)[rest]
        # each class in the seed's order
        dealt = np.concatenate([rest[labels == c] for c in np.unique(labels)])
    else:
        dealt = rest
    # any dtype holds the fold numbers alike
    fold_of = np.empty(n, dtype=np.int64)  # pragma: no mutate
    fold_of[dealt] = np.arange(len(dealt)) % k
    folds = [rest[fold_of[rest] == i] for i in range(k)]  # each fold's rows in the seed's order
    return folds, (test if n_test else rest)


def folds_of(cfg: Any) -> int:
    """``data.folds`` of a ``data`` node (0: one validation split, the default; a node
    without the key: 0)."""
    value = cfg.get("folds") if hasattr(cfg, "get") else getattr(cfg, "folds", None)
    return int(value or 0)


def read_to_check(cfg: Any) -> bool:
    """Whether a ``data`` node is checked only by reading its rows (once, before any store): a
    file's (``data.path``: its columns, its target), or a fold count the rows must allow."""
    return "path" in cfg or bool(folds_of(cfg))


def fold_indexes(cfg: Any) -> tuple[int | None, ...]:
    """The ``fold`` of :func:`load` for each training of a configuration of a ``data`` node:
    ``0..k-1`` with ``data.folds=k``, else ``(None,)`` (its one split)."""
    return tuple(range(folds_of(cfg))) or (None,)


def _scale(a: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    mean, std = a.mean(axis=axis), a.std(axis=axis)
    return mean, np.where(std > 0, std, 1.0)


def stack_rows(a: Any, b: Any) -> Any:
    """``a`` and ``b`` one above the other: ``np.concatenate``, or
    ``scipy.sparse.vstack`` (CSR) for sparse rows."""
    if is_sparse(a):
        # lazy: saves ~143 ms at this module's import (measured)
        import scipy.sparse

        return scipy.sparse.vstack([a, b], format="csr")
    return np.concatenate([a, b])


def vectorizer(cfg: Any) -> Any:
    """The scikit-learn vectorizer ``data.features`` names (imported here only: numeric
    jobs never pay for it).

    ``tfidf`` (default) and ``counts`` keep the ``data.max_features`` most frequent
    terms (0: all) of at least ``data.min_df`` training documents; ``hashing`` hashes
    terms into ``data.max_features`` columns (0: 2**20), l2-normalised, without
    signs. ``data.ngram_max=2`` adds word pairs."""
    # lazy: saves ~1242 ms at this module's import (measured)
    from sklearn.feature_extraction.text import CountVectorizer, HashingVectorizer, TfidfVectorizer

    ngrams = (1, cfg.ngram_max)
    if cfg.features == "hashing":
        return HashingVectorizer(
            n_features=cfg.max_features or 2**20, ngram_range=ngrams, alternate_sign=False
        )
    kind = TfidfVectorizer if cfg.features == "tfidf" else CountVectorizer
    return kind(max_features=cfg.max_features or None, min_df=cfg.min_df, ngram_range=ngrams)


def _features(cfg: Any, docs: np.ndarray, train: np.ndarray, where: str) -> tuple[Any, Any]:
    """The vectorizer fitted on the training documents only, and every row's features
    (CSR, float64)."""
    vec = vectorizer(cfg)
    try:
        vec.fit(docs[train])
    # empty vocabulary: no term in min_df training documents, or no words at all
    except ValueError as e:
        raise DataError(
            f"{where}: no features from the training documents with data.features={cfg.features} "
            f"data.min_df={cfg.min_df} ({str(e).splitlines()[0]}); lower data.min_df or "
            "check data.text"
        ) from None
    return vec, vec.transform(docs).astype(np.float64).tocsr()


def vectorizer_state(vec: Any, cfg: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """What rebuilds a fitted vectorizer without a pickle: its settings (JSON) and arrays (the
    terms in column order, the IDF weights); the logged model's ``portable.py`` rebuilds it."""
    spec = {k: cfg[k] for k in ("features", "max_features", "min_df", "ngram_max")}
    if spec["features"] == "hashing":
        return spec, {}
    arrays = {"terms": np.array(sorted(vec.vocabulary_, key=vec.vocabulary_.get), dtype=str)}
    if spec["features"] == "tfidf":
        arrays["idf"] = vec.idf_
    return spec, arrays


def vocabulary_size(vec: Any) -> int:
    """Columns the fitted vectorizer produces: its vocabulary, or the hashing width."""
    return len(vec.vocabulary_) if hasattr(vec, "vocabulary_") else vec.n_features


def split_seed(cfg: Any, default: int = 0) -> int:
    """The seed that draws a ``data`` node's train/val/test split (and synthetic data):
    ``data.split_seed``, or ``default`` for a node without one (a benchmark's
    namespace). The top-level ``seed`` draws the weights only."""
    value = cfg.get("split_seed") if hasattr(cfg, "get") else getattr(cfg, "split_seed", None)
    return default if value is None else int(value)


def load(cfg: Any, seed: int | None = None, fold: int | None = None) -> Dataset:
    """Load ``cfg.name`` (a ``data`` config node), split it with ``seed`` (default:
    :func:`split_seed`, the node's ``data.split_seed``) and standardise it.

    With ``data.folds=k`` the validation rows are fold ``fold`` (default 0) of :func:`split_folds`
    and the training rows the other folds; the scaler (a vectorizer, a table's encoder) is fitted
    on that fold's training rows only. :func:`load_folds` gives every fold.

    Text data (``data=sms|text``) are vectorised with features fitted on the training rows only, and
    not standardised: the matrix stays sparse (SciPy CSR) unless ``data.sparse=false``. A fraction
    of 0 (the split reuses the training rows) is a decision said in ``decisions["split"]``."""
    ds = _load(cfg, seed, fold)
    said = reused_rows(cfg) if not folds_of(cfg) else ""
    if said:
        ds.decisions = {**ds.decisions, "split": said}
    return ds


def reused_rows(cfg: Any) -> str:
    """What a split with ``data.val_fraction=0`` or ``data.test_fraction=0`` scores on,
    in words ("" when neither)."""
    zero = [k for k in ("val_fraction", "test_fraction") if not getattr(cfg, k, 1)]
    if not zero:
        return ""
    parts = " and ".join({"val_fraction": "validation", "test_fraction": "test"}[k] for k in zero)
    return (
        f"{parts} = the training rows ({', '.join(f'data.{k}=0' for k in zero)}): their "
        "metrics are training "
        "error, not held-out error"
        + (
            ", and choosing on them picks the best fit to the training rows"
            if "val_fraction" in zero
            else ""
        )
    )


def load_folds(cfg: Any, seed: int | None = None) -> list[Dataset]:
    """Every fold's :class:`Dataset` of a ``data`` node with ``data.folds=k``
    (:func:`load` of folds 0..k-1)."""
    return [load(cfg, seed, i) for i in range(folds_of(cfg))]


def _load(cfg: Any, seed: int | None, fold: int | None = None) -> Dataset:
    seed = split_seed(cfg) if seed is None else seed
    raw = LOADERS[cfg.name](cfg, seed)
    X, y, task, positive_class, classes = raw[:5]
    path = getattr(cfg, "path", None)  # a DictConfig, or a plain namespace (the benchmarks)
    where = f"data.path={path}" if path is not None else f"data={cfg.name}"
    if cfg.name in TEXT:
        ds = _text(cfg, seed, X, y, task, positive_class, where, classes, fold)
        ds.decisions = raw.decisions or {}
        return ds
    if raw.columns is not None:
        return _table(cfg, seed, raw, where, fold)
    if not np.isfinite(X).all() or not np.isfinite(y).all():
        raise DataError(f"{where}: the data hold missing or non-finite values; clean them first")
    train, val, test = _split(len(X), cfg, seed, where, y, task, fold)
    mean, std = _scale(X[train])  # fitted on the training rows only
    y_mean, y_scale = _scale(y[train]) if task == "regression" else (0.0, 1.0)

    def rows(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (X[idx] - mean) / std, ((y[idx] - y_mean) / y_scale).reshape(-1, 1)

    return Dataset(
        cfg.name,
        task,
        *rows(train),
        *rows(val),
        *rows(test),
        float(y_mean),
        float(y_scale),
        mean,
        std,
        positive_class,
        classes,
        decisions=raw.decisions or {},
        feature_names=FEATURE_NAMES.get(cfg.name),
    )


def _table(cfg: Any, seed: int, raw: Any, where: str, fold: int | None = None) -> Dataset:
    """A table's columns split, encoded with the encoder fitted on the training rows
    (categories seen in training, medians and median dates for missing cells; numeric
    columns standardised, one-hot columns 0/1), text columns of too many categories left
    out, leaks named, and the decisions said in words."""
    y, task = raw.y, raw.task
    train, val, test = _split(len(y), cfg, seed, where, y, task, fold)
    state = fit(raw.columns, train, getattr(cfg, "max_categories", 50))
    columns = [raw.columns[k] for k in state.pop("used")]
    left_out = state.pop("left_out")
    if not columns:
        raise DataError(
            f"{where}: no feature column is left: " + "; ".join(c["refusal"] for c in left_out)
        )
    unscalable = [
        c["name"]
        for c, m, s in zip(
            state["columns"],
            _per_column(state, state["x_mean"]),
            _per_column(state, state["x_scale"]),
        )
        if "categories" not in c and not (np.isfinite(m).all() and np.isfinite(s).all())
    ]
    # finite values so large (near 1e308) that their mean or spread overflows float64
    if unscalable:
        raise DataError(
            f"{where}: column {unscalable[0]} cannot be scaled: its values are so large "
            "that their mean "
            "or spread overflows float64; divide it by a power of 10 first, or drop it (data.drop)"
        )
    with np.errstate(over="ignore", invalid="ignore"):
        X = encode_columns(state, [c.values for c in columns])
    if not np.isfinite(X).all():
        raise DataError(f"{where}: the data hold missing or non-finite values; clean them first")
    with np.errstate(over="ignore", invalid="ignore"):
        y_mean, y_scale = _scale(y[train]) if task == "regression" else (0.0, 1.0)
    if not (np.isfinite(y_mean) and np.isfinite(y_scale)):
        raise DataError(
            f"{where}: the target cannot be scaled: its values are so large that their "
            "mean or spread "
            "overflows float64; divide it by a power of 10 first"
        )
    decisions = dict(raw.decisions or {})
    if any("categories" in c for c in state["columns"]):
        decisions["encoded"] = encoded(state)

    report = finish_report(raw.report or [], state, left_out, columns, y, train, task, decisions)

    def rows(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return X[idx], ((y[idx] - y_mean) / y_scale).reshape(-1, 1)

    return Dataset(
        cfg.name,
        task,
        *rows(train),
        *rows(val),
        *rows(test),
        float(y_mean),
        float(y_scale),
        state["x_mean"],
        state["x_scale"],
        raw.positive_class,
        raw.classes,
        encoder=state,
        columns_test=[_raw_cells(c, test) for c in columns],
        decisions=decisions,
        report=report,
    )


def _per_column(state: dict[str, Any], a: np.ndarray) -> list[np.ndarray]:
    """A per-feature array split into each column's features."""

    return (
        np.split(np.asarray(a), np.cumsum(_widths(state["columns"]))[:-1])
        if state["columns"]
        else []
    )


def _raw_cells(c: Any, rows: np.ndarray) -> list[Any]:
    """A column's raw cells at these rows, as a logged model takes them: numbers (NaN:
    missing), date text (None: missing), categories as text (None: missing)."""
    part = c.rows(rows)
    if c.numeric:
        return part.values.tolist()
    return [None if g else v for v, g in zip(part.values.tolist(), part.gaps.tolist())]


DECIDED = ("task", "target", "sep", "numbers", "dropped", "encoded", "rows", "split")
# a table's column report (sweeper.data.table): said a line each after the first line, and as tags
DECIDED_COLUMNS = ("columns", "missing", "ids", "dates", "left_out", "codes", "leaks")


def describe(ds: Dataset) -> str:
    """What was decided reading a user file, in one line (empty for a bundled data set)."""
    return "; ".join(f"{k}: {ds.decisions[k]}" for k in DECIDED if k in ds.decisions)


def column_lines(ds: Dataset) -> list[str]:
    """A table's column report, a line per column
    (:func:`sweeper.data.table.describe_column`); empty otherwise."""

    return [describe_column(r) for r in ds.report or []]


def decision_tags(ds: Dataset) -> dict[str, str]:
    """The decisions as run tags ``decided.<what>`` (``decided.task``: multiclass,
    ``decided.missing``, ...), at most 500 characters each."""
    return {
        f"decided.{k}": ds.decisions[k][:500]
        for k in (*DECIDED, *DECIDED_COLUMNS)
        if k in ds.decisions
    }


def _split(
    n: int,
    cfg: Any,
    seed: int,
    where: str,
    y: np.ndarray | None = None,
    task: str = "regression",
    fold: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    k = folds_of(cfg)
    if k:
        return _fold_split(n, cfg, seed, where, y, task, k, fold or 0)
    train, val, test = split(n, cfg.val_fraction, cfg.test_fraction, seed)
    if len(train) < 2:
        raise DataError(
            f"{where}: too few rows ({n}) for data.val_fraction={cfg.val_fraction} and "
            f"data.test_fraction={cfg.test_fraction}: training needs at least 2 rows, "
            "validation and test 1 each; "
            "add rows, or set both fractions to 0 to score on the training rows"
        )
    return train, val, test


def _fold_split(
    n: int, cfg: Any, seed: int, where: str, y: np.ndarray | None, task: str, k: int, fold: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fold ``fold``'s training, validation and test rows (:func:`split_folds`); a fold
    count the rows cannot give (more folds than non-test rows, or than the rows of a
    class) is refused in one line."""
    if not 0 <= fold < k:
        raise ValueError(f"fold {fold} of data.folds={k}")
    folds, test = split_folds(n, cfg.test_fraction, seed, k, y, task)
    rest = np.concatenate(folds)
    if task in ("binary", "multiclass") and y is not None:
        labels, counts = np.unique(np.ravel(y)[rest], return_counts=True)
        if counts.min() < k:
            raise DataError(
                f"data.folds={k} is not allowed for {where}: expected at most "
                f"{int(counts.min())}: its "
                f"smallest class ({labels[counts.argmin()]:g}) has {int(counts.min())} "
                "rows outside the "
                "test split, and every fold validates on each class"
            )
    if len(rest) < 2 * k:
        raise DataError(
            f"data.folds={k} is not allowed for {where}: expected at most {len(rest) // 2} (its "
            f"{len(rest)} non-test rows: every fold trains and validates on at least 2 rows)"
        )
    val = folds[fold]
    train = np.concatenate([f for i, f in enumerate(folds) if i != fold])
    return np.sort(train), val, test


def _text(
    cfg: Any,
    seed: int,
    docs: np.ndarray,
    y: np.ndarray,
    task: str,
    positive_class: str | None,
    where: str,
    classes: tuple[str, ...] | None = None,
    fold: int | None = None,
) -> Dataset:
    """Split the documents, fit the features on the training rows, keep them sparse (or not)."""
    if not np.isfinite(y).all():
        raise DataError(f"{where}: the target holds missing or non-finite values; clean them first")
    train, val, test = _split(len(docs), cfg, seed, where, y, task, fold)
    vec, F = _features(cfg, docs, train, where)
    y_mean, y_scale = _scale(y[train]) if task == "regression" else (0.0, 1.0)

    def rows(idx: np.ndarray) -> tuple[Any, np.ndarray]:
        part = F[idx]
        return (part if cfg.sparse else part.toarray()), ((y[idx] - y_mean) / y_scale).reshape(
            -1, 1
        )

    return Dataset(
        cfg.name,
        task,
        *rows(train),
        *rows(val),
        *rows(test),
        float(y_mean),
        float(y_scale),
        positive_class=positive_class,
        classes=classes,
        vectorizer=vec,
        text_test=docs[test],
    )


def load_plain(node: dict, seed: int | None = None, fold: int | None = None) -> Dataset:
    """:func:`load` of a plain (resolved) ``data`` node, kept for the launching process:
    the sweep's check of its data files, the batched launcher's memory estimate and its
    groups, and every run's record half (:func:`sweeper.job.compute.scored_on`) read
    each (node, split seed, fold) once. The node's own ``split_seed`` is no part of the
    key once ``seed`` says the split: members of one group share the rows of theirs."""

    seed = split_seed(node) if seed is None else seed
    rest = {k: v for k, v in node.items() if k != "split_seed"}
    return _load_plain(json.dumps(rest, sort_keys=True, default=str), seed, fold, _stamp(node))


def _stamp(node: dict) -> tuple:
    """What the node's file is now (size, modification time, inode): a file rewritten since it was
    read is read again (a notebook's second sweep of an edited CSV trained on the first version)."""
    path = node.get("path") if isinstance(node, dict) else None
    try:
        st = os.stat(path) if path else None
    except (OSError, TypeError, ValueError):
        return ()
    return (st.st_size, st.st_mtime_ns, st.st_ino) if st else ()


@functools.lru_cache(maxsize=16)
def _load_plain(node: str, seed: int, fold: int | None = None, stamp: tuple = ()) -> Dataset:

    return load(OmegaConf.create(json.loads(node)), seed, fold)

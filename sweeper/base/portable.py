"""What a logged model needs at load time, in one file that imports only NumPy (SciPy
for text, pandas for a date in another form than ISO): the MLP's forward pass, a table's
encoder (:func:`encode_rows`: missing cells, dates, categories), a fitted text
vectorizer's transform (:func:`vectorize`), and the warning for rows far outside the
training rows (:func:`far_from_training`).

It travels inside every logged model (``code_paths``: the model's ``code/portable.py``,
imported there as ``portable``), so a model loads with MLflow, NumPy, pandas and SciPy
only — no sweeper, OmegaConf, Hydra or scikit-learn. It is also the project's own code
for the encoder (``sweeper.data.columns`` imports it); ``tests/test_portable.py`` checks
the forward pass against :class:`sweeper.models.mlp.MLP` and the vectorizer
against scikit-learn's. Import nothing of sweeper here.
"""

from __future__ import annotations

import importlib
import re
from types import MappingProxyType
from typing import Any, Sequence

import numpy as np


__all__ = [
    "as_number",
    "category",
    "ColumnError",
    "DATE",
    "date_days",
    "date_ordinal",
    "day_first",
    "DATE_PARTS",
    "encode_columns",
    "encode_raw",
    "encode_rows",
    "fills_missing",
    "forward",
    "is_missing",
    "link",
    "MISSING",
    "murmurhash3_32",
    "OTHER_DATE",
    "vectorize",
    "widths",
]


class ColumnError(ValueError):
    """A column choice or column that cannot be used; one line (the loader adds the file)."""


# --- the forward pass: [W_0, b_0, W_1, b_1, ...] → the task's
# output -----------------------------------------


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # as sweeper.models.activations.sigmoid: no overflow


# read-only: a logged model's forward pass reads it, nothing may swap an activation
ACTIVATIONS = MappingProxyType(
    {"relu": lambda z: np.maximum(z, 0), "tanh": np.tanh, "sigmoid": _sigmoid}
)


def forward(params: Sequence[np.ndarray], activation: str, task: str, X: Any) -> np.ndarray:
    """The network's output for standardised features ``X`` (n, d; dense or SciPy
    sparse): the regression output (n, 1), P(y = 1) (n, 1), or the class probabilities
    (n, k) — what ``MLP.predict`` returns."""
    f, A = ACTIVATIONS[activation], X
    for l in range(len(params) // 2 - 1):
        A = f(A @ params[2 * l] + params[2 * l + 1])
    return link(task, A @ params[-2] + params[-1])


def link(task: str, z: np.ndarray) -> np.ndarray:
    """The task's output from a model's ``out``: itself (regression), σ (binary),
    softmax (classes)."""
    if task == "multiclass":
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    return z if task == "regression" else _sigmoid(z)


def user_forward(
    spec: dict[str, Any], params: Sequence[np.ndarray], task: str, X: Any
) -> np.ndarray:
    """A model of the interface's prediction at load: its class (``spec["target"]``,
    importable from the model's ``code/``) built with its hyperparameters, its
    ``predict`` hook or ``forward`` then the task's link."""

    target = spec["target"]
    module, _, name = target.partition(":") if ":" in target else target.rpartition(".")
    net = getattr(importlib.import_module(module), name)(**spec["kwargs"])
    named = dict(zip(spec["names"], params))
    if callable(getattr(net, "predict", None)):
        return np.asarray(net.predict(np, named, X))
    return link(task, np.asarray(net.forward(np, named, X)[0]))


# --- a table's columns: raw values → the standardised
# features -----------------------------------------------

# Cells read as missing, besides None and NaN: pandas' read_csv defaults (n/a, NULL,
# #N/A, ...) and ? and -; data.na_values adds more, kept in the column's spec (``na``)
# so that the logged model reads the same cells as missing.
MISSING = (
    "",
    "NA",
    "N/A",
    "NaN",
    "null",
    "?",
    "-",
    "n/a",
    "nan",
    "NULL",
    "None",
    "<NA>",
    "#N/A",
    "#N/A N/A",
    "#NA",
    "-NaN",
    "-nan",
    "1.#IND",
    "-1.#IND",
    "1.#QNAN",
    "-1.#QNAN",
)


def is_missing(v: Any, markers: Sequence[str] = MISSING) -> bool:
    """Whether a raw cell is missing: None, NaN, or text that is one of ``markers`` once
    stripped."""
    if v is None:
        return True
    if isinstance(v, str):
        return v.strip() in markers
    return isinstance(v, (float, np.floating)) and bool(np.isnan(v))


def as_number(v: Any) -> float | None:
    """``v`` as a float, or None when it is no number (text, missing)."""
    if v is None or isinstance(v, str) and not v.strip():
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def category(v: Any, markers: Sequence[str] = MISSING) -> str:
    """A categorical value as its category: the text without surrounding spaces, ``3``
    for 3.0, ``""`` for a missing value (a category of its own)."""
    if is_missing(v, markers):
        return ""
    if isinstance(v, str):
        return v.strip()
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v)).lower()
    f = float(v)
    return str(int(f)) if f.is_integer() else str(f)


# An ISO-like date (2011-01-31, 2011/1/31, with or without a time after it): its year,
# month and day.
DATE = re.compile(
    r"^\s*(\d{4})[-/](\d{1,2})[-/](\d{1,2})"
    r"(?:[ T]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?\s*(?:Z|[+-]\d{2}:?\d{2})?)?\s*$"
)
# A date in another common form (01/02/2011, 31.01.2011, Jan 5, 2011, 5 Jan 2011; a time
# may follow): read by pandas (format="mixed"; day or month first as the column's dates
# say: day_first), the same in training and in a logged model
OTHER_DATE = re.compile(
    r"^\s*(?:\d{1,2}[-/]\d{1,2}[-/]\d{2,4}|\d{1,2}\.\d{1,2}\.\d{4}|\d{1,2}[ "
    r"-][A-Za-z]{3,9}\.?,?[ -]\d{2,4}|"
    r"[A-Za-z]{3,9}\.? \d{1,2},? \d{4})(?:[ T]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?\s*"
    r"(?:[AaPp][Mm])?\s*(?:Z|[+-]\d{2}:?\d{2})?)?\s*$"
)
DATE_PARTS = ("year", "month", "day_of_week", "day_of_year", "ordinal")


def date_ordinal(v: Any) -> int | None:
    """An ISO-like date as its day number (days since 1970-01-01), or None when ``v`` is
    no such date."""
    m = DATE.match(v) if isinstance(v, str) else None
    if m is None:
        return None
    y, mo, d = map(int, m.groups())
    try:
        return int(np.datetime64(f"{y:04d}-{mo:02d}-{d:02d}", "D").astype(np.int64))
    except ValueError:  # 2011-02-30
        return None


# a date of numbers in another order than the ISO one (31/01/2011, 01.02.2011): its first two
NUMBERED = re.compile(r"^\s*(\d{1,2})[-/.](\d{1,2})[-/.]\d{2,4}")


def day_first(values: Sequence[Any]) -> tuple[bool, str]:
    """Whether a column's numbered dates put the day first, and why, in words: a date whose
    first number is over 12 (31/01/2011) says so for the whole column, one whose second is
    (01/31/2011) says month first; dates with dots (01.02.2011) put the day first; else the
    month goes first, as pandas reads 01/02/2011."""
    firsts = [
        (m.group(0).strip(), int(m[1]), int(m[2]))
        for v in values
        if isinstance(v, str) and (m := NUMBERED.match(v))
    ]
    day = next((t for t, a, _ in firsts if a > 12), None)
    month = next((t for t, _, b in firsts if b > 12), None)
    if day and month:
        return False, f"month first where a form is ambiguous; both {day!r} and {month!r} appear"
    if day or month:
        return bool(day), f"{'day' if day else 'month'} first, as {day or month!r} shows"
    if firsts and all("." in t for t, _, _ in firsts):
        return True, "day first, as dates with dots write it"
    return False, "month first where a form is ambiguous"


def date_days(
    values: Sequence[Any], markers: Sequence[str] = MISSING, dayfirst: bool = False
) -> np.ndarray:
    """A column of dates as day numbers (float64; NaN where a cell is missing or no
    date), read at once; ``dayfirst``: the column's :func:`day_first`."""
    out = np.full(len(values), np.nan)
    found = [
        (i, m.groups())
        for i, v in enumerate(values)
        if isinstance(v, str) and not is_missing(v, markers) and (m := DATE.match(v))
    ]
    if found:
        at = np.array([i for i, _ in found])
        try:
            out[at] = np.array(
                [
                    f"{y}-{m}-{d}" if len(m) == len(d) == 2 else f"{y}-{int(m):02d}-{int(d):02d}"
                    for _, (y, m, d) in found
                ],
                dtype="datetime64[D]",
            ).astype(np.int64)
        except ValueError:  # 2011-02-30 among them: one at a time
            out[at] = [np.nan if (o := date_ordinal(values[i])) is None else o for i in at.tolist()]
    other = [
        i
        for i in np.flatnonzero(np.isnan(out)).tolist()
        if isinstance(values[i], str)
        and OTHER_DATE.match(values[i])
        and not is_missing(values[i], markers)
    ]
    if other:  # 01/02/2011, Jan 5, 2011: pandas reads them (31/02/2011, no date: missing)
        # lazy: saves ~244 ms at this module's import (measured)
        import pandas as pd

        read = pd.to_datetime(
            [values[i] for i in other], format="mixed", dayfirst=dayfirst, errors="coerce"
        )
        days = np.asarray(read.values.astype("datetime64[D]").astype(np.int64), dtype=np.float64)
        out[other] = np.where(read.isna(), np.nan, days)
    return out


def date_parts(days: np.ndarray) -> np.ndarray:
    """Day numbers (n,) → (n, 5): year, month, day of week (0 = Monday), day of year
    (1..366), the day number."""
    d = np.round(np.asarray(days, dtype=np.float64)).astype(np.int64).astype("datetime64[D]")
    year = d.astype("datetime64[Y]")
    return np.column_stack(
        [
            year.astype(np.int64) + 1970,
            d.astype("datetime64[M]").astype(np.int64) % 12 + 1,
            (d.astype(np.int64) + 3) % 7,
            (d - year.astype("datetime64[D]")).astype(np.int64) + 1,
            d.astype(np.int64),
        ]
    ).astype(np.float64)


def _numbers(s: dict[str, Any], values: Sequence[Any]) -> np.ndarray:
    """A numeric column's raw values as float64, NaN where a cell is missing; other text
    is one line."""
    # the file's own numeric column
    if isinstance(values, np.ndarray) and values.dtype == np.float64:
        return values
    markers = s.get("na", MISSING)
    out = np.empty(len(values))
    for i, v in enumerate(values):
        x = np.nan if is_missing(v, markers) else as_number(v)
        if x is None:
            raise ColumnError(f"column {s['name']} is numeric, but row {i + 1} holds {v!r}")
        out[i] = x
    return out


def encode_raw(spec: list[dict[str, Any]], columns: list[Sequence[Any]]) -> np.ndarray:
    """Raw values (one sequence per column, in ``spec``'s order) → features before scaling.

    A number: its value, a missing one the training median (``fill``), and with
    ``indicator`` a 0/1 column that says it was missing. A date: its :data:`DATE_PARTS`
    (a missing or unreadable date: the training median's). A category: one-hot over the
    training categories (one unseen in training: all zeros)."""
    n = len(columns[0]) if columns else 0
    parts = []
    for s, values in zip(spec, columns):
        if s.get("date"):
            days = date_days(values, s.get("na", MISSING), s.get("dayfirst", False))
            parts.append(date_parts(np.where(np.isnan(days), s["fill"], days)))
        elif "categories" not in s:
            x = _numbers(s, values)
            gap = np.isnan(x)
            if gap.any() and "fill" in s:
                x = np.where(gap, s["fill"], x)
            parts.append(x.reshape(n, 1))
            if s.get("indicator"):
                parts.append(gap.astype(np.float64).reshape(n, 1))
        else:
            index = {c: j for j, c in enumerate(s["categories"])}
            markers = s.get("na", MISSING)
            onehot = np.zeros((n, len(index)))
            for i, v in enumerate(values):
                j = index.get(category(v, markers))
                if j is not None:  # a category unseen in training: all zeros
                    onehot[i, j] = 1.0
            parts.append(onehot)
    return np.hstack(parts) if parts else np.zeros((n, 0))


def encode_columns(state: dict[str, Any], columns: list[Sequence[Any]]) -> np.ndarray:
    """Columns of raw values, in the encoder's order → the standardised features (n, d)."""
    return (encode_raw(state["columns"], columns) - np.asarray(state["x_mean"])) / np.asarray(
        state["x_scale"]
    )


def encode_rows(state: dict[str, Any], rows: Any) -> np.ndarray:
    """Raw rows → the standardised features the network takes (n, d), as the training
    rows were encoded.

    ``rows``: a pandas DataFrame or a dict of columns (by the file's column names; other columns are
    ignored), a list of records (dicts), or a 2-D sequence of rows whose values are in
    the encoder's column order. Categories are matched as text (``category``); one
    unseen in training gives zeros."""
    names = [s["name"] for s in state["columns"]]
    if hasattr(rows, "columns") and hasattr(rows, "iloc"):  # a DataFrame: by name, else by position
        there = [n in rows.columns or str(n) in rows.columns for n in names]
        if any(there) and not all(there):  # an optional column left out: every cell of it missing
            absent = [
                s["name"] for s, t in zip(state["columns"], there) if not t and not fills_missing(s)
            ]
            if absent:
                raise ColumnError(
                    f"column {absent[0]} is missing from the rows, which have {list(rows.columns)}"
                )
        cols = (
            [
                _values(rows[n if n in rows.columns else str(n)]) if t else [None] * len(rows)
                for n, t in zip(names, there)
            ]
            if any(there)
            else [_values(rows.iloc[:, j]) for j in range(len(names))]
        )
    elif isinstance(rows, dict):
        cols = [list(rows[_key(rows, n)]) for n in names]
    else:
        rows = list(rows)
        if rows and isinstance(rows[0], dict):
            cols = [[r.get(n, r.get(str(n))) for r in rows] for n in names]
        else:
            rows = [list(r) for r in rows]
            if rows and len(rows[0]) != len(names):
                raise ColumnError(
                    f"rows have {len(rows[0])} values, the model takes {len(names)}: {names}"
                )
            cols = [[r[j] for r in rows] for j in range(len(names))]
    return encode_columns(state, cols)


def widths(spec: list[dict[str, Any]]) -> list[int]:
    """How many features each column's spec encodes to (:func:`encode_raw`)."""
    return [
        len(DATE_PARTS)
        if s.get("date")
        else len(s["categories"])
        if "categories" in s
        else 1 + bool(s.get("indicator"))
        for s in spec
    ]


# A row's number this many training standard deviations from the training mean is far
# outside what the model learned
FAR = 10.0


def far_from_training(spec: list[dict[str, Any]], X: Any) -> str | None:
    """A warning, naming the column, when a number of the rows given (their standardised
    features ``X``, (n, d)) lies beyond :data:`FAR` training standard deviations from
    its training mean; None when none does. Rows in another scale (unscaled where the
    model learned scaled ones) make a model answer nearly alike for every row."""
    if not isinstance(X, np.ndarray) or X.ndim != 2:
        return None
    starts = np.cumsum([0, *widths(spec)])[:-1]
    numbers = [
        (str(s["name"]), int(at))
        for s, at in zip(spec, starts)
        if not s.get("date") and "categories" not in s
    ]
    if not numbers or X.shape[1] < int(starts[-1]) + 1:
        return None
    z = np.abs(np.nan_to_num(X[:, [at for _, at in numbers]], nan=0.0))
    far = z > FAR
    if not far.any():
        return None
    worst = int(np.argmax(np.where(far, z, 0.0).max(axis=0)))
    others = [numbers[k][0] for k in np.flatnonzero(far.any(axis=0)) if k != worst]
    also = f"; so do rows of {', '.join(others[:5])}" if others else ""
    return (
        f"column {numbers[worst][0]}: {int(far[:, worst].sum())} of {len(X)} row(s) lie up to "
        f"{z[:, worst].max():.3g} training standard deviations from the training mean (beyond "
        f"{FAR:g}){also}: "
        "the model learned from rows unlike these, so its answers there mean little; check their "
        "units and scale "
        "(a bundled data set's model takes rows as its loader gives them)"
    )


def fills_missing(s: dict[str, Any]) -> bool:
    """Whether a column may be left out (an optional column of the model's signature): a
    category (its missing level, or zeros), a date (the median date), a number that had
    missing cells in training (median, indicator)."""
    return "categories" in s or bool(s.get("date") or s.get("indicator"))


def _values(series: Any) -> Any:
    """A DataFrame column: a float64 array when it is one (no per-value parse), else its
    values as a list."""
    a = series.to_numpy()
    return a if a.dtype == np.float64 else a.tolist()


def _key(d: dict[Any, Any], name: Any) -> Any:
    if name in d:
        return name
    if str(name) in d:
        return str(name)
    raise ColumnError(f"column {name} is missing from the rows, which have {list(d)}")


# --- text: a fitted vectorizer's transform, as scikit-learn's (lowercase, words of 2+
# characters) ----------

TOKEN = re.compile(r"(?u)\b\w\w+\b")  # scikit-learn's default token_pattern


def terms(doc: str, ngram_max: int) -> list[str]:
    """A document's terms: its lowercase words, then (``ngram_max`` > 1) their n-grams
    joined by spaces."""
    words = TOKEN.findall(doc.lower())
    out = list(words)
    for n in range(2, min(ngram_max, len(words)) + 1):
        out += [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]
    return out


def vectorize(spec: dict[str, Any], arrays: dict[str, np.ndarray], docs: Sequence[str]) -> Any:
    """Documents → their features (SciPy CSR, float64) as the fitted vectorizer gave
    them in training.

    ``spec``: ``features`` (tfidf: counts × IDF, rows l2-normalised; counts; hashing:
    murmurhash3 of each term into ``max_features`` columns (0: 2**20), l2-normalised) and
    ``ngram_max``; ``arrays``: ``terms`` (the vocabulary in column order) and ``idf``."""
    # lazy: saves ~120 ms at this module's import (measured)
    import scipy.sparse

    hashing = spec["features"] == "hashing"
    width = (spec.get("max_features") or 2**20) if hashing else len(arrays["terms"])
    vocab = None if hashing else {t: j for j, t in enumerate(arrays["terms"].tolist())}
    indptr, indices, values = [0], [], []
    for doc in docs:
        counts: dict[int, float] = {}
        for t in terms(str(doc), int(spec.get("ngram_max", 1))):
            j = _hashed(t, width) if hashing else vocab.get(t)
            if j is not None:
                counts[j] = counts.get(j, 0.0) + 1.0
        cols = sorted(counts)
        indices += cols
        values += [counts[j] for j in cols]
        indptr.append(len(indices))
    X = scipy.sparse.csr_matrix(
        (
            np.array(values, dtype=np.float64),
            np.array(indices, dtype=np.int64),
            np.array(indptr, dtype=np.int64),
        ),
        shape=(len(indptr) - 1, width),
    )
    if spec["features"] == "tfidf":
        X.data *= np.asarray(arrays["idf"], dtype=np.float64)[X.indices]
    if spec["features"] != "counts":  # each row divided by its l2 norm
        per_row = np.diff(X.indptr)
        rows = np.repeat(np.arange(X.shape[0]), per_row)
        X.data /= np.sqrt(np.bincount(rows, weights=X.data**2, minlength=X.shape[0]))[rows]
    return X


def _hashed(term: str, width: int) -> int:
    """scikit-learn's FeatureHasher column of a term (alternate_sign=False):
    |murmurhash3_32(term)| mod width."""
    h = murmurhash3_32(term.encode("utf-8"))
    return (2147483647 - (width - 1)) % width if h == -2147483648 else abs(h) % width


def murmurhash3_32(key: bytes, seed: int = 0) -> int:
    """MurmurHash3 (x86, 32-bit) of ``key``, as a signed int (scikit-learn's ``murmurhash3_32``)."""
    c1, c2, mask = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF
    h, n = seed & mask, len(key)
    for i in range(0, n - n % 4, 4):
        k = int.from_bytes(key[i : i + 4], "little")
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        h ^= (k * c2) & mask
        h = ((h << 13) | (h >> 19)) & mask
        h = (h * 5 + 0xE6546B64) & mask
    tail = key[n - n % 4 :]
    if tail:
        k = int.from_bytes(tail, "little")
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        h ^= (k * c2) & mask
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & mask
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & mask
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h

"""A table's feature columns: which to keep (``data.drop``, ``data.features``), numeric or categorical, the
one-hot encoding fitted on the training rows, and the separator of a delimited file when none is given.

The fitted encoder is plain data (:func:`fit` returns it, JSON-able but for the two scaler arrays), and
:func:`encode_rows` maps raw rows (a DataFrame, records, or rows of values in column order; categories as
text) to the standardised features the network takes, so a logged model can take the file's own columns.
"""
from __future__ import annotations

import csv
import io
from typing import Any, NamedTuple, Sequence

import numpy as np

# The encoder's transform lives in the one file a logged model carries (sweeper/base/portable.py).
from sweeper.base.portable import ColumnError, _number, category, encode_columns, encode_rows  # noqa: F401


# Separators tried when data.sep=auto, in order of preference when several read the file alike.
SNIFFED = {",": "comma", ";": "semicolon", "\t": "tab"}
SNIFF_LINES = 50


def sniff(text: str) -> tuple[str, str]:
    """The separator of delimited ``text`` and why: the one of comma, semicolon, tab that splits the first
    lines into the same number (> 1) of fields, the most fields winning; comma when none does."""
    lines = text[: 1 << 16].splitlines()[: SNIFF_LINES + 1]
    if len(text) > 1 << 16 or len(lines) > SNIFF_LINES:
        lines = lines[:-1]  # the last one may be cut short
    lines = [ln for ln in lines if ln.strip()]
    best: tuple[int, str] | None = None
    for sep in SNIFFED:
        try:
            widths = {len(r) for r in csv.reader(io.StringIO("\n".join(lines)), delimiter=sep) if r}
        except csv.Error:
            continue
        if len(widths) == 1 and (w := widths.pop()) > 1 and (best is None or w > best[0]):
            best = (w, sep)
    if best is None:
        return ",", "comma (sniffed: no separator splits the first lines alike)"
    return best[1], f"{SNIFFED[best[1]]} (sniffed: {best[0]} fields on each of the first {len(lines)} lines)"


def one_column_hint(first_line: str) -> str | None:
    """For a file read as a single column: the separator its first line seems to use, as the key to set
    (None when the line holds none of comma, semicolon, tab)."""
    counts = {sep: first_line.count(sep) for sep in SNIFFED}
    sep = max(counts, key=counts.get)
    return f"it looks {SNIFFED[sep]}-separated: set data.sep={SNIFFED[sep]}" if counts[sep] else None


def _names_list(value: Any) -> list[Any]:
    """``data.drop``/``data.features`` as a list (a single name or index is allowed)."""
    if value is None:
        return []
    if isinstance(value, (str, int)):
        return [value]
    return list(value)


def choose(names: list[Any], target: int, drop: Any, features: Any, has_header: bool) -> list[int]:
    """The indices of the feature columns: all but the target (only those ``data.features`` names, if any),
    less those ``data.drop`` names; a name or index that is not a column is one line naming the key."""
    chosen: dict[str, list[int]] = {}
    shown = _columns(names)
    for key, value in (("data.drop", drop), ("data.features", features)):
        picked = []
        for v in _names_list(value):
            if isinstance(v, bool) or not isinstance(v, (str, int)):
                raise ColumnError(f"{key}={_list(value)}: {v!r} is not a column name or index; columns are {shown}")
            if isinstance(v, str) and has_header:
                if v not in names:
                    raise ColumnError(f"{key}={_list(value)} names {v}, which is not a column: columns are {shown}")
                if names.count(v) > 1:
                    raise ColumnError(f"{key}={_list(value)} names {v}, which {names.count(v)} columns are called: "
                                      "rename them, or give column indices")
                j = names.index(v)
            elif isinstance(v, int):
                if not -len(names) <= v < len(names):
                    raise ColumnError(f"{key}={_list(value)}: index {v} is out of range: columns are {shown}")
                j = v % len(names)
            else:
                raise ColumnError(f"{key}={_list(value)} names {v}, but the file is read without a header "
                                  f"(data.header=false): give column indices 0..{len(names) - 1}")
            if j == target:
                raise ColumnError(f"{key}={_list(value)} names the target column {names[j]}: leave it out of "
                                  f"{key} (the target is never a feature); columns are {shown}")
            picked.append(j)
        chosen[key] = picked
    keep = chosen["data.features"] or [j for j in range(len(names)) if j != target]
    idx = [j for j in dict.fromkeys(keep) if j not in set(chosen["data.drop"])]
    if not idx:
        raise ColumnError(f"data.drop={_list(drop)} and data.features={_list(features)} leave no feature column: "
                          f"columns are {shown}")
    return idx


def _columns(names: list[Any], most: int = 20) -> str:
    """The file's columns for an error: the list, or its first ``most`` and how many there are."""
    if names == list(range(len(names))):
        return f"0..{len(names) - 1} (indices: the file is read without a header)"
    if len(names) <= most:
        return str(names)
    return str(names[:most])[:-1] + f", ... ({len(names)} in all)]"


def _list(value: Any) -> str:
    return "[" + ",".join(map(str, _names_list(value))) + "]"


class Column(NamedTuple):
    name: Any
    values: np.ndarray  # float64 for a numeric column, else the categories (object, str)
    numeric: bool


def typed(name: Any, values: Sequence[Any]) -> Column:
    """A column as numbers when every value is one; as categories when fewer than half are numbers (text
    such as M/F/I); a column of numbers with a few text values is refused, naming the first."""
    try:  # every value a number: NumPy reads them at once (text such as " 2.5" too; None as NaN)
        numbers = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        numbers = None
    if numbers is not None:
        bad = np.flatnonzero(~np.isfinite(numbers))
        if bad.size:
            raise ColumnError(f"column {name} holds a missing or non-finite value {values[bad[0]]!r} (row {bad[0] + 1}); "
                              f"clean it, or leave the column out with data.drop=[{name}]")
        return Column(name, numbers, True)
    nums = [_number(v) for v in values]
    bad = [i for i, x in enumerate(nums) if x is None]
    if not bad:
        return Column(name, np.array(nums, dtype=np.float64), True)
    if len(bad) * 2 > len(values):
        return Column(name, np.array([category(v) for v in values], dtype=object), False)
    i = bad[0]
    what = "a missing value" if _number(values[i]) is None and category(values[i]) == "" else \
        f"a non-numeric value {values[i]!r}"
    raise ColumnError(f"column {name} holds {what} (row {i + 1}) among numbers; clean it, or leave the column "
                      f"out with data.drop=[{name}]")


def fit(columns: list[Column], train: np.ndarray, max_categories: int) -> dict[str, Any]:
    """The encoder fitted on the training rows: per column its name and, for a categorical one, its
    categories (sorted); and the scaler (``x_mean``, ``x_scale``): numeric columns are standardised, one-hot
    columns stay 0/1, so a category unseen in training is all zeros."""
    spec, means, scales = [], [], []
    for c in columns:
        if c.numeric:
            part = c.values[train]
            with np.errstate(over="ignore", invalid="ignore"):  # values near 1e308: refused by the caller
                mean, std = part.mean(), part.std()
            spec.append({"name": c.name})
            means.append(mean)
            scales.append(std if std > 0 else 1.0)
            continue
        cats = sorted(set(c.values[train].tolist()))
        if len(cats) > max_categories:
            free = len(set(c.values.tolist())) * 2 > len(c.values)
            raise ColumnError(
                f"column {c.name} has {len(cats)} categories in the training rows, more than data.max_categories="
                f"{max_categories}: raise data.max_categories, or leave it out with data.drop=[{c.name}]"
                + (f"; for free text, use data=text data.text={c.name}" if free else ""))
        spec.append({"name": c.name, "categories": cats})
        means += [0.0] * len(cats)
        scales += [1.0] * len(cats)
    return {"columns": spec, "x_mean": np.array(means, dtype=np.float64), "x_scale": np.array(scales, dtype=np.float64)}


def describe(state: dict[str, Any]) -> str:
    """The encoded columns in words: ``sex (3 categories: F, I, M)``; empty when every column is numeric."""
    out = []
    for s in state["columns"]:
        if "categories" in s:
            cats = s["categories"]
            shown = ", ".join(c or "(empty)" for c in cats[:5]) + (", ..." if len(cats) > 5 else "")
            out.append(f"{s['name']} ({len(cats)} categories: {shown})")
    return "; ".join(out)

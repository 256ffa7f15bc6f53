"""A table's feature columns: which to keep (``data.drop``, ``data.features``), numeric
or categorical, the one-hot encoding fitted on the training rows, and the separator of a
delimited file when none is given.

The fitted encoder is plain data (:func:`fit` returns it, JSON-able but for the two
scaler arrays), and :func:`encode_rows` maps raw rows (a DataFrame, records, or rows of
values in column order; categories as text) to the standardised features the network
takes, so a logged model can take the file's own columns.
"""

from __future__ import annotations

import csv
import io
import json
from types import MappingProxyType
from typing import Any, NamedTuple, Sequence

import numpy as np

# The encoder's transform lives in the one file a logged model carries (sweeper/base/portable.py).
from sweeper.base.fmt import near
from sweeper.base.portable import (
    DATE,
    DATE_PARTS,
    MISSING,
    OTHER_DATE,
    ColumnError,
    encode_raw,
    as_number,
    category,  # noqa: F401 (re-exported)
    date_days,
    day_first,
    date_ordinal,  # noqa: F401 (re-exported)
    encode_columns,  # noqa: F401 (re-exported)
    encode_rows,  # noqa: F401 (re-exported)
    is_missing,
    widths,
)


__all__ = [
    "Column",
    "ColumnError",
    "MISSING",
    "choose",
    "describe",
    "encode_columns",
    "encode_rows",
    "fit",
    "is_missing",
    "json_cell",
    "one_column_hint",
    "resolve",
    "sniff",
    "typed",
]

# Separators tried when data.sep=auto, in order of preference when several read the file alike.
SNIFFED = MappingProxyType({",": "comma", ";": "semicolon", "\t": "tab"})
SNIFF_LINES = 50


def sniff(text: str) -> tuple[str, str]:
    """The separator of delimited ``text`` and why: the one of comma, semicolon, tab
    that splits the first lines into the same number (> 1) of fields, the most fields
    winning; comma when none does."""
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
    return best[
        1
    ], f"{SNIFFED[best[1]]} (sniffed: {best[0]} fields on each of the first {len(lines)} lines)"


def one_column_hint(first_line: str) -> str | None:
    """For a file read as a single column: the separator its first line seems to use, as
    the key to set (None when the line holds none of comma, semicolon, tab)."""
    counts = {sep: first_line.count(sep) for sep in SNIFFED}
    sep = max(counts, key=counts.get)
    return (
        f"it looks {SNIFFED[sep]}-separated: set data.sep={SNIFFED[sep]}" if counts[sep] else None
    )


def _names_list(value: Any) -> list[Any]:
    """``data.drop``/``data.features`` as a list (a single name or index is allowed)."""
    if value is None:
        return []
    if isinstance(value, (str, int)):
        return [value]
    return list(value)


def resolve(key: str, value: Any, names: list[Any], target: int, has_header: bool) -> list[int]:
    """The column indices a key's list (``data.drop``, ``data.dates``, ...) names; a name or
    index that is not a column, or the target, is one line naming the key and the columns."""
    shown = _columns(names)
    picked = []
    for v in _names_list(value):
        if isinstance(v, bool) or not isinstance(v, (str, int)):
            raise ColumnError(
                f"{key}={_list(value)}: {v!r} is not a column name or index; columns are {shown}"
            )
        if isinstance(v, str) and has_header:
            if v not in names:
                raise ColumnError(
                    f"{key}={_list(value)} names {v}, which is not a column{near(v, names)}: "
                    f"columns are {shown}"
                )
            if names.count(v) > 1:
                raise ColumnError(
                    f"{key}={_list(value)} names {v}, which {names.count(v)} columns are called: "
                    "rename them, or give column indices"
                )
            j = names.index(v)
        elif isinstance(v, int):
            if not -len(names) <= v < len(names):
                raise ColumnError(
                    f"{key}={_list(value)}: index {v} is out of range: columns are {shown}"
                )
            j = v % len(names)
        else:
            raise ColumnError(
                f"{key}={_list(value)} names {v}, but the file is read without a header "
                f"(data.header=false): give column indices 0..{len(names) - 1}"
            )
        if j == target:
            raise ColumnError(
                f"{key}={_list(value)} names the target column {names[j]}: leave it out of "
                f"{key} (the target is never a feature); columns are {shown}"
            )
        picked.append(j)
    return picked


def choose(names: list[Any], target: int, drop: Any, features: Any, has_header: bool) -> list[int]:
    """The indices of the feature columns: all but the target (only those
    ``data.features`` names, if any), less those ``data.drop`` names; a name or index
    that is not a column is one line naming the key."""
    dropped = resolve("data.drop", drop, names, target, has_header)
    keep = resolve("data.features", features, names, target, has_header) or [
        j for j in range(len(names)) if j != target
    ]
    idx = [j for j in dict.fromkeys(keep) if j not in set(dropped)]
    if not idx:
        raise ColumnError(
            f"data.drop={_list(drop)} and data.features={_list(features)} leave no feature column: "
            f"columns are {_columns(names)}"
        )
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
    # float64 for a numeric column (NaN: missing), else the categories (object, str; "":
    values: np.ndarray
    numeric: bool  # missing), or a date column's raw text
    date: bool = False
    gaps: np.ndarray | None = None  # (n,) bool: which cells are missing
    markers: tuple[str, ...] = MISSING
    # what reading it decided, in words (text among numbers, dates in mixed formats, levels trimmed)
    said: str = ""
    dayfirst: bool = False  # a date column's order (31/01/2011): portable.day_first

    @property
    def missing(self) -> int:
        return 0 if self.gaps is None else int(self.gaps.sum())

    def rows(self, idx: np.ndarray) -> "Column":
        """The column at these rows only."""
        return self._replace(
            values=self.values[idx], gaps=None if self.gaps is None else self.gaps[idx]
        )


def typed(
    name: Any,
    values: Sequence[Any],
    markers: tuple[str, ...] = MISSING,
    as_date: bool = False,
    as_category: bool = False,
) -> Column:
    """A column as numbers when every value present is one (missing cells: ``markers``,
    None, NaN); as a date when every value present is a date (ISO-like, or another form
    pandas reads: 01/02/2011, Jan 5, 2011), or ``as_date`` (``data.dates``); else as
    categories (text such as M/F/I; ``as_category``: ``data.categorical``, integer codes or
    text). Each decision past the plain ones is said in :attr:`Column.said`: numbers with
    some text read as text, dates in mixed formats and those pandas cannot read (missing),
    levels trimmed of spaces. A non-finite number, a date of ``data.dates`` that is none,
    a non-integer code of ``data.categorical`` are refused, naming the first."""
    if not (as_date or as_category):
        try:  # every value a number (None, "nan": missing): NumPy reads them at once
            numbers = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            numbers = None
        if numbers is not None and numbers.ndim == 1 and not np.isinf(numbers).any():
            return Column(name, numbers, True, gaps=np.isnan(numbers), markers=markers)
    nested = json_cell(name, values)
    if nested:
        raise ColumnError(
            f"{nested}: flatten the records (pandas.json_normalize) or leave it out with "
            f"data.drop=[{name}]"
        )
    gaps = np.fromiter((is_missing(v, markers) for v in values), dtype=bool, count=len(values))
    present = [i for i in range(len(values)) if not gaps[i]]
    if as_category:
        _integer_codes(name, values, present)
        return _categories(name, values, gaps, markers)
    texts = [values[i] for i in present]
    dated = texts and all(
        isinstance(v, str) and (DATE.match(v) or OTHER_DATE.match(v)) for v in texts
    )
    if as_date or dated:
        column = _dates(name, values, gaps, present, markers, as_date)
        if column is not None:
            return column
    nums = np.full(len(values), np.nan)
    bad = []
    for i in present:
        x = as_number(values[i])
        if x is None:
            bad.append(i)
        else:
            nums[i] = x
    if not bad:
        gaps |= np.isnan(nums)  # "nan" as text: read as a missing number
        odd = np.flatnonzero(~np.isfinite(nums) & ~gaps)
        if odd.size:
            raise ColumnError(
                f"column {name} holds a non-finite value {values[odd[0]]!r} (row "
                f"{odd[0] + 1}); clean "
                f"it, or leave the column out with data.drop=[{name}]"
            )
        return Column(name, nums, True, gaps=gaps, markers=markers)
    column = _categories(name, values, gaps, markers)
    if len(bad) * 2 > len(present):
        return column
    i = bad[0]  # mostly numbers, some text (a ticket number A/5 21171 among 21171): text, said
    mixed = (
        f"text: {len(bad)} of its {len(present)} values are no number (the first "
        f"{values[i]!r}, row {i + 1}), so "
        "it is read as categories; if those cells mark missing values, add them to data.na_values"
    )
    return column._replace(said="; ".join(filter(None, [mixed, column.said])))


def json_cell(name: Any, values: Sequence[Any]) -> str | None:
    """Where a column holds a JSON record's object or array, in words (None: nowhere): a
    table's cell is a number, text, true/false or null."""
    at = next((i for i, v in enumerate(values) if isinstance(v, (dict, list))), None)
    if at is None:
        return None
    v = values[at]
    return (
        f"column {name} holds a JSON {'object' if isinstance(v, dict) else 'array'} (row "
        f"{at + 1}: {json.dumps(v)[:60]}); a cell is a number, text, true/false or null"
    )


def _integer_codes(name: Any, values: Sequence[Any], present: list[int]) -> None:
    """ColumnError when ``data.categorical`` names a column of numbers that are no
    integer codes (2.5)."""
    for i in present:
        x = values[i] if isinstance(values[i], (int, float)) else as_number(values[i])
        if x is not None and not float(x).is_integer():
            raise ColumnError(
                f"data.categorical names column {name}, whose value {values[i]!r} (row "
                f"{i + 1}) is no "
                "integer code: a category column holds codes such as 1/2/3, or text; "
                f"leave {name} out "
                "of data.categorical (it is read as a number)"
            )


def _categories(
    name: Any, values: Sequence[Any], gaps: np.ndarray, markers: tuple[str, ...]
) -> Column:
    """A column of categories (:func:`category`: the text without surrounding spaces,
    ``3`` for 3.0), and in words the cells trimmed of spaces and the levels that differ
    only in case (kept apart)."""
    texts = [v for v, g in zip(values, gaps) if not g and isinstance(v, str)]
    padded = [v for v in texts if v != v.strip()]
    by_case: dict[str, set[str]] = {}
    for v in set(texts):
        by_case.setdefault(v.strip().casefold(), set()).add(v.strip())
    twins = [sorted(v) for v in by_case.values() if len(v) > 1]
    said = (
        [
            f"{len(padded)} cell(s) trimmed of surrounding spaces ({padded[0]!r} is "
            f"{padded[0].strip()!r})"
        ]
        if padded
        else []
    )
    if twins:
        said.append(
            f"levels that differ only in case are kept apart ({' and '.join(map(repr, twins[0]))}"
            + (f", and {len(twins) - 1} more such" if len(twins) > 1 else "")
            + ")"
        )
    return Column(
        name,
        np.array([category(v, markers) for v in values], dtype=object),
        False,
        gaps=gaps,
        markers=markers,
        said="; ".join(said),
    )


def _dates(
    name: Any,
    values: Sequence[Any],
    gaps: np.ndarray,
    present: list[int],
    markers: tuple[str, ...],
    named: bool,
) -> Column | None:
    """A date column (``named``: ``data.dates``), None when fewer than half its values
    are dates. A form other than ISO is read by pandas (format="mixed"), day or month first
    for the whole column as its dates show (:func:`sweeper.base.portable.day_first`), said;
    a cell no date: refused when named, else missing (said)."""
    dayfirst, order = day_first([values[i] for i in present])
    days = date_days(values, markers, dayfirst)
    bad = [i for i in present if np.isnan(days[i])]
    if bad and named:
        raise ColumnError(
            f"column {name} (a date: data.dates) holds {values[bad[0]]!r} (row {bad[0] + 1}), "
            "which is no date pandas can read; fix it, or leave the column out of data.dates"
        )
    if len(bad) * 2 > len(present):
        return None
    forms = [values[i] for i in present if not DATE.match(values[i])]
    said = (
        [
            f"dates in mixed formats ({values[present[0]]!r}, {forms[0]!r}, ...) read by "
            f"pandas, {order}"
        ]
        if forms
        else []
    )
    if bad:
        said.append(
            f"{len(bad)} cell(s) no date pandas can read (the first {values[bad[0]]!r}, "
            f"row {bad[0] + 1}): "
            "missing"
        )
    gaps = gaps | np.isnan(days)
    return Column(
        name,
        np.array(values, dtype=object),
        False,
        date=True,
        gaps=gaps,
        markers=markers,
        said="; ".join(said),
        dayfirst=dayfirst,
    )


def fit(columns: list[Column], train: np.ndarray, max_categories: int) -> dict[str, Any]:
    """The encoder fitted on the training rows: per column its name and, for a categorical one, its
    categories (sorted); for a number its training median (``fill``, what a missing cell
    becomes) and ``indicator`` when some cell is missing; for a date the median date's
    ordinal; and the scaler (``x_mean``, ``x_scale``): numeric features are
    standardised, one-hot columns stay 0/1, so a category unseen in training is all zeros.
    A text column with more than ``max_categories`` training categories is left out:
    ``left_out`` names it and why; ``used`` holds the indices of the columns encoded."""
    spec, used, left = [], [], []
    for k, c in enumerate(columns):
        s: dict[str, Any] = {"name": c.name}
        if c.markers != MISSING:
            s["na"] = list(c.markers)
        if c.numeric or c.date:
            if c.date:
                ords = date_days(c.values[train], c.markers, c.dayfirst)
                s["date"] = True
                if c.dayfirst:
                    s["dayfirst"] = True
            else:
                ords = c.values[train]
            known = ords[~np.isnan(ords)]
            s["fill"] = float(np.median(known)) if known.size else 0.0
            if c.numeric and c.missing:
                s["indicator"] = True
        else:
            cats = sorted(set(c.values[train].tolist()))
            if len(cats) > max_categories:
                free = len(set(c.values.tolist())) * 2 > len(c.values)
                hint = f"; for free text, use data=text data.text={c.name}" if free else ""
                left.append(
                    {
                        "name": c.name,
                        "levels": len(cats),
                        "why": f"text, {len(cats)} categories in the training rows (more than "
                        "data.max_categories="
                        f"{max_categories}): left out; raise data.max_categories to keep it{hint}",
                        "refusal": f"column {c.name} has {len(cats)} categories in the training "
                        "rows, more than "
                        f"data.max_categories={max_categories}: raise "
                        "data.max_categories, or leave "
                        f"it out with data.drop=[{c.name}]{hint}",
                    }
                )
                continue
            s["categories"] = cats
        spec.append(s)
        used.append(k)
    kept = [columns[k] for k in used]
    # a feature's own flag
    onehot = np.repeat(["categories" in s for s in spec], _widths(spec)).astype(bool)
    with np.errstate(over="ignore", invalid="ignore"):  # values near 1e308: refused by the caller
        F = encode_raw(spec, [c.values for c in kept])[train] if kept else np.zeros((len(train), 0))
        means, stds = F.mean(axis=0), F.std(axis=0)  # float64
    # one-hot features stay 0/1 (onehot and means are one feature each: an index, no broadcast)
    means[onehot] = 0.0
    scales = np.where(onehot | ~(stds > 0), 1.0, stds)
    # an overflowing spread stays inf: the caller refuses it
    scales = np.where(np.isfinite(stds), scales, stds)
    return {"columns": spec, "x_mean": means, "x_scale": scales, "used": used, "left_out": left}


_widths = widths  # how many features each column's spec encodes to (sweeper.base.portable)


def feature_names(spec: list[dict[str, Any]]) -> list[str]:
    """The encoded features' names: ``age``, ``age_missing``, ``sex=F``, ``day.year``, ..."""
    out = []
    for s in spec:
        n = str(s["name"])
        if s.get("date"):
            out += [f"{n}.{p}" for p in DATE_PARTS]
        elif "categories" in s:
            out += [f"{n}={c}" for c in s["categories"]]
        else:
            out += [n] + ([f"{n}_missing"] if s.get("indicator") else [])
    return out


def describe(state: dict[str, Any]) -> str:
    """The encoded columns in words: ``sex (3 categories: F, I, M)``; empty when every
    column is numeric."""
    out = []
    for s in state["columns"]:
        if "categories" in s:
            cats = s["categories"]
            shown = ", ".join(c or "(missing)" for c in cats[:5]) + (
                ", ..." if len(cats) > 5 else ""
            )
            out.append(f"{s['name']} ({len(cats)} categories: {shown})")
    return "; ".join(out)

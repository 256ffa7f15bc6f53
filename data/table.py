"""A table's columns read in one pass (data=csv): what each column is (number, category, date,
id, text), its missing cells and what is done with them, integer codes that may be categories,
and features that leak the target — every decision said in one report (:func:`report_lines`, the
run's ``decided.*`` tags and its ``columns.json``), every problem of the file listed at once."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from sweeper.data.columns import MISSING, Column, ColumnError, _list, is_missing, resolve, typed

__all__ = ["describe_column", "finish_report", "read"]

# A column named like an identifier: id, ID, row_id, customer.id, index, uuid;
# PassengerId but not "valid".
ID_NAME = re.compile(r"^(?:id|index|idx|uuid|key|row_?id)$|[_ .-]id$", re.IGNORECASE)
ID_NAME_CASED = re.compile(r"[a-z0-9]I[dD]$")  # PassengerId, but not "valid" or "paid"
MIN_ROW_ORDER = 10  # increasing integers in fewer rows may be a feature
MAX_CODES = 10  # a numeric column of 3..MAX_CODES distinct integers may hold category codes
# |correlation| with the target on the training rows above which a feature is named a leak
LEAK = 0.999
MAX_PAIRS = 60  # sums of two are tried among at most this many numeric columns


def id_like(name: Any) -> bool:
    n = str(name)
    return bool(ID_NAME.search(n) or ID_NAME_CASED.search(n))


def id_reason(c: Column) -> str | None:
    """Why a column looks like a row id (all values distinct and present, integers in
    row order, or named like an id), or None."""
    n = len(c.values)
    if c.date or c.missing or n < 2:
        return None
    if c.numeric:
        v = c.values
        if not np.all(v == np.round(v)) or len(np.unique(v)) != n:
            return None
        if n >= MIN_ROW_ORDER and np.all(np.diff(v) > 0):
            return f"id (distinct integers {v[0]:g}..{v[-1]:g} in row order)"
        return "id (distinct integers, named like an id)" if id_like(c.name) else None
    if len(set(c.values.tolist())) == n and id_like(c.name):
        return "id (a distinct value in every row, named like an id)"
    return None


def code_note(c: Column) -> str | None:
    """For a numeric column of a few distinct integers (1/2/3): that it may be
    categorical, and how to say so."""
    if not c.numeric:
        return None
    v = c.values[~np.isnan(c.values)]
    levels = np.unique(v)
    if (
        not 3 <= len(levels) <= MAX_CODES
        or not np.all(levels == np.round(levels))
        or len(v) < 4 * len(levels)
    ):
        return None
    shown = ", ".join(f"{x:g}" for x in levels[:6]) + (", ..." if len(levels) > 6 else "")
    return (
        f"possibly categorical ({len(levels)} integer codes: {shown}): "
        f"data.categorical=[{c.name}] encodes it"
    )


def read(
    cfg: Any, columns: list[Any], rows: list[list[Any]], col: int, idx: list[int], has_header: bool
) -> tuple[list[Column], np.ndarray, list[dict[str, Any]], dict[str, str]]:
    """The feature columns of ``idx`` typed, the rows kept (a missing target is
    dropped; ``drop_rows``: a missing feature too), the per-column report and the
    decisions (``rows``, ``ids``, ``dates``, ``codes``).

    Every problem (a column that cannot be read; under ``data.missing=refuse`` every
    column with a missing cell) is collected and refused at once in one line."""
    mode = getattr(cfg, "missing", None) or "impute"
    markers = MISSING + tuple(str(m) for m in getattr(cfg, "na_values", None) or [])
    named = _named(cfg, columns, col, idx, has_header)
    decisions: dict[str, str] = {}
    problems: list[str] = []
    keep_rows, report = _target_rows(rows, col, columns[col], markers, mode, problems, decisions)
    feats, gapped, found = _features(
        columns, rows, idx, keep_rows, markers, named, report, problems
    )
    if mode == "refuse" and gapped:
        problems.append(_refusal(gapped))
    if problems:
        head = f"{len(problems)} problems: " if len(problems) > 1 else ""
        raise ColumnError(head + "; ".join(problems))
    for j in range(len(columns)):
        if j != col and j not in idx:
            report.append(
                {
                    "column": str(columns[j]),
                    "kind": "dropped",
                    "detail": "left out by data.drop / data.features",
                }
            )
    if mode == "drop_rows" and gapped:
        bad = np.zeros(len(keep_rows), dtype=bool)
        for c, _ in gapped:
            bad |= c.gaps
        dropped = f"{int(bad.sum())} rows with a missing feature dropped (data.missing=drop_rows)"
        decisions["rows"] = "; ".join(filter(None, [decisions.get("rows"), dropped]))
        feats = [c.rows(np.flatnonzero(~bad)) for c in feats]
        keep_rows = keep_rows[~bad]
        for r in report:
            if r.get("missing") and r["kind"] != "target":
                r["filled"] = "their rows dropped"
    if not feats:
        raise ColumnError(
            "no feature column is left: "
            + "; ".join(
                f"{r['column']}: {r.get('detail', r['kind'])}"
                for r in report
                if r["kind"] != "target"
            )
        )
    for k, v in found.items():
        if v:
            decisions[k] = ", ".join(v) if k != "codes" else "; ".join(v)
    return feats, keep_rows, report, decisions


def _named(
    cfg: Any, columns: list[Any], col: int, idx: list[int], has_header: bool
) -> dict[str, set[int]]:
    """The columns ``data.dates``, ``data.keep`` and ``data.categorical`` name, each a
    feature, no column both a date and a category."""
    named = {
        k: set(resolve(f"data.{k}", getattr(cfg, k, None) or [], columns, col, has_header))
        for k in ("dates", "keep", "categorical")
    }
    for k in ("dates", "keep", "categorical"):
        stray = [columns[j] for j in named[k] if j not in idx]
        if stray:
            raise ColumnError(
                f"data.{k}={_list(getattr(cfg, k))} names {', '.join(map(str, stray))}, "
                "which is not "
                "a feature (left out by data.drop or data.features)"
            )
    both = named["dates"] & named["categorical"]
    if both:
        raise ColumnError(
            f"data.dates and data.categorical both name {columns[min(both)]}: choose one"
        )
    return named


def _target_rows(
    rows: list[list[Any]],
    col: int,
    label: Any,
    markers: tuple[str, ...],
    mode: str,
    problems: list[str],
    decisions: dict[str, str],
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """The rows kept for the target (one without a value is dropped, or under ``refuse``
    a problem), and the report's first line."""
    target = [r[col] for r in rows]
    no_target = np.fromiter((is_missing(v, markers) for v in target), dtype=bool, count=len(target))
    if no_target.all() and len(target):
        problems.append(
            f"target {label}: every one of its {len(target)} rows has no value (all "
            "missing): choose "
            "another column with data.target, or fill it"
        )
    elif no_target.any():
        k = int(no_target.sum())
        at = ", ".join(str(i + 1) for i in np.flatnonzero(no_target)[:5]) + (
            ", ..." if k > 5 else ""
        )
        if mode == "refuse":
            problems.append(
                f"target {label}: {k} rows have no value (rows {at}); "
                "data.missing=refuse: clean them, "
                "or set data.missing=impute to drop those rows"
            )
        decisions["rows"] = f"target {label}: {k} rows have no value: dropped"
    report = [{"column": str(label), "kind": "target", "missing": int(no_target.sum())}]
    return (np.flatnonzero(~no_target) if mode != "refuse" else np.arange(len(rows))), report


def _features(
    columns: list[Any],
    rows: list[list[Any]],
    idx: list[int],
    keep_rows: np.ndarray,
    markers: tuple[str, ...],
    named: dict[str, set[int]],
    report: list[dict[str, Any]],
    problems: list[str],
) -> tuple[list[Column], list[tuple[Column, list[Any]]], dict[str, list[str]]]:
    """Each feature column typed (a column that cannot be read: a problem), an id column
    dropped unless kept; the features, those with missing cells, and the ids, dates and
    integer codes found (each column reported)."""
    feats, gapped = [], []
    found: dict[str, list[str]] = {"ids": [], "dates": [], "codes": []}
    for j in idx:
        values = [rows[i][j] for i in keep_rows]
        try:
            c = typed(
                columns[j],
                values,
                markers,
                as_date=j in named["dates"],
                as_category=j in named["categorical"],
            )
        except ColumnError as e:
            problems.append(str(e))
            continue
        # nothing to learn from: constant, and its indicator too
        if len(values) and c.missing == len(values):
            report.append(
                {"column": str(c.name), "kind": "empty", "detail": "every cell missing: left out"}
            )
            continue
        why = None if j in named["keep"] else id_reason(c)
        if why:
            found["ids"].append(str(c.name))
            report.append(
                {
                    "column": str(c.name),
                    "kind": "id",
                    "detail": why + ": dropped (data.keep keeps it)",
                }
            )
            continue
        if c.missing:
            gapped.append((c, values))
        if c.date:
            found["dates"].append(str(c.name))
        code = code_note(c) if j not in named["categorical"] else None
        if code:
            found["codes"].append(f"{c.name}: {code}")
        feats.append(c)
        # what reading it decided: text among numbers, dates, levels
        note = "; ".join(filter(None, [c.said, code]))
        report.append(
            {
                "column": str(c.name),
                "kind": "date" if c.date else "number" if c.numeric else "category",
                "missing": c.missing,
                **({"note": note} if note else {}),
            }
        )
    return feats, gapped, found


def _refusal(gapped: list[tuple[Column, list[Any]]]) -> str:
    """data.missing=refuse: one line naming every column with a missing cell (the first
    such cell of each)."""

    def first(c: Column, values: list[Any]) -> tuple[str, int]:
        i = int(np.flatnonzero(c.gaps)[0])
        return repr(values[i]), i + 1

    if len(gapped) == 1:
        ((c, values),) = gapped
        raw, row = first(c, values)
        return (
            f"data.missing=refuse: column {c.name} holds a missing or non-finite value "
            f"{raw} (row {row}); "
            f"clean it, or leave the column out with data.drop=[{c.name}]"
        )
    cells = ", ".join(
        f"{c.name}: {c.missing} cells, the first {'{} (row {})'.format(*first(c, v))}"
        for c, v in gapped
    )
    return (
        f"data.missing=refuse: {len(gapped)} columns hold missing values ({cells}); "
        "clean them, set "
        "data.missing=impute or data.missing=drop_rows, or leave them out with "
        f"data.drop=[{','.join(str(c.name) for c, _ in gapped)}]"
    )


def leaks(
    columns: list[Column], state: dict[str, Any], y: np.ndarray, train: np.ndarray, task: str
) -> list[str]:
    """Features that predict the target almost exactly on the training rows: a number
    (or the sum of two) whose |correlation| with the target exceeds :data:`LEAK`, or a
    category whose every training level holds a single class."""
    out: list[str] = []
    yt = y[train].astype(np.float64)
    if len(train) < 3 or yt.std() == 0:
        return out
    spec = {s["name"]: s for s in state["columns"]}
    nums = [
        (
            c.name,
            np.where(np.isnan(c.values[train]), spec[c.name].get("fill", 0.0), c.values[train]),
        )
        for c in columns
        if c.numeric and c.name in spec
    ]
    nums = [(n, v) for n, v in nums if v.std() > 0]
    if nums:
        X = np.column_stack([v for _, v in nums])
        Xc, yc = X - X.mean(axis=0), yt - yt.mean()
        C, cy, vy = Xc.T @ Xc / len(yt), Xc.T @ yc / len(yt), yc @ yc / len(yt)
        single = np.abs(cy) / np.sqrt(np.diag(C) * vy)
        for k in np.flatnonzero(single > LEAK):
            out.append(f"{nums[k][0]} (|corr| {single[k]:.4f} with the target)")
        m = min(len(nums), MAX_PAIRS)
        if m >= 2:
            d = np.diag(C)[:m]
            with np.errstate(invalid="ignore", divide="ignore"):
                pair = np.abs(cy[:m, None] + cy[None, :m]) / np.sqrt(
                    (d[:, None] + d[None, :] + 2 * C[:m, :m]) * vy
                )
            pair[np.tril_indices(m)] = 0
            pair[single[:m] > LEAK, :] = pair[:, single[:m] > LEAK] = 0
            for a, b in zip(*np.nonzero(np.nan_to_num(pair) > LEAK)):
                out.append(f"{nums[a][0]} + {nums[b][0]} (|corr| {pair[a, b]:.4f} with the target)")
    if task != "regression":
        for c in columns:
            if c.numeric or c.date or c.name not in spec or "categories" not in spec[c.name]:
                continue
            levels = c.values[train]
            if len(set(levels.tolist())) < 2 or len(set(levels.tolist())) * 2 > len(train):
                continue
            pure = all(len(set(yt[levels == v].tolist())) == 1 for v in set(levels.tolist()))
            if pure:
                out.append(f"{c.name} (each of its categories holds a single class)")
    return out


def describe_column(r: dict[str, Any]) -> str:
    """One column's line of the report: ``age: number; 177 missing: the training median
    28 fills them, ...``."""
    kind = r["kind"]
    parts = [r.get("detail") or kind]
    if r.get("missing") and kind != "target":
        parts.append(f"{r['missing']} missing: {r.get('filled', 'filled')}")
    elif r.get("missing"):
        parts.append(f"{r['missing']} rows without a value dropped")
    if r.get("note"):
        parts.append(r["note"])
    if r.get("leak"):
        parts.append("LEAK? " + r["leak"])
    return f"{r['column']}: " + "; ".join(parts)


def finish_report(
    report: list[dict[str, Any]],
    state: dict[str, Any],
    left_out: list[dict[str, Any]],
    columns: list[Column],
    y: np.ndarray,
    train: np.ndarray,
    task: str,
    decisions: dict[str, str],
) -> list[dict[str, Any]]:
    """The report of :func:`read` with what the encoder fitted on the training rows
    decided (the median that fills a number, the levels of a category, a date's parts),
    the text columns left out and the leaks; the summaries go into ``decisions``
    (``columns``, ``missing``, ``left_out``, ``leaks``)."""
    spec = {str(s["name"]): s for s in state["columns"]}
    gone = {str(c["name"]): c for c in left_out}
    found = leaks(columns, state, y, train, task)
    missing = []
    for r in report:
        name, s = r["column"], spec.get(r["column"])
        if r["kind"] == "category" and name in gone:
            r["kind"], r["detail"] = "text", gone[name]["why"]
        elif s is not None and r["kind"] == "date":
            r["detail"] = "date: numeric parts (year, month, day_of_week, day_of_year, ordinal)"
            r.setdefault("filled", "the training median date's parts fill them")
        elif s is not None and "categories" in s:
            cats = s["categories"]
            shown = ", ".join(c or "(missing)" for c in cats[:5]) + (
                ", ..." if len(cats) > 5 else ""
            )
            r["detail"] = f"category, {len(cats)} levels ({shown})"
            r.setdefault("filled", "a level of its own")
        elif s is not None:
            r["detail"] = "number"
            r.setdefault(
                "filled",
                f"the training median {s['fill']:g} fills them"
                + (f", and {name}_missing says which" if s.get("indicator") else ""),
            )
        if r.get("missing") and r["kind"] not in ("target", "text", "id"):
            missing.append(f"{name}: {r['missing']} ({r['filled']})")
        hit = [x for x in found if x.split(" (")[0].split(" + ")[0] == name or f" + {name} (" in x]
        if hit:
            r["leak"] = "; ".join(hit)
    kinds: dict[str, int] = {}
    for r in report:
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    decisions["columns"] = f"{len(report)} columns: " + ", ".join(
        f"{n} {k}" for k, n in kinds.items()
    )
    wide = [f"{c['name']} ({c['levels']} categories)" for c in left_out]
    for key, items in (("missing", missing), ("left_out", wide), ("leaks", found)):
        if items:
            decisions[key] = "; ".join(items)
    return report

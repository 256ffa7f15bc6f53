"""How sweeper prints numbers and reads them back: every table, line and tag goes
through :func:`cell` (4 significant digits) or :func:`text_cell`; :func:`parse_param`
reads MLflow's param text. Imports nothing of ours."""

from __future__ import annotations

import math
from typing import Any


__all__ = ["cell", "finite", "number", "parse_param", "text_cell"]


def number(value: Any) -> float | None:
    """``float(value)`` (a number, or a number's text such as ``" 2.5"``; inf and nan kept);
    None when it is no number (missing, text)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def finite(value: Any) -> float | None:
    """A value read back as a finite float (a number, or a number's text); None when it is no
    number, or not finite (missing, text, inf, nan)."""
    v = number(value)
    return v if v is not None and math.isfinite(v) else None


def cell(v: Any) -> str:
    """How sweeper prints a value, in every table and line it shows: a float to 4
    significant digits, an integral float below 1e15 as the integer it is (MLflow keeps
    counts such as epochs_run as floats), None as ``-``, anything else (an int, a name,
    an id) as it is. Param and override text goes through :func:`text_cell`."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() and abs(v) < 1e15 else f"{v:.4g}"
    return str(v)


def text_cell(text: Any) -> str:
    """A param's or an override's value as sweeper prints it: the number it holds, through
    :func:`cell`, when 4 significant digits change it (Optuna's ``0.006260326907499732`` →
    ``0.00626``), else as written (``1e-3``, ``200``, ``tanh``). Commands keep the
    exact text: a resumed sweep must match the runs it reuses."""
    x = parse_param(str(text)) if text is not None else None
    if isinstance(x, float) and math.isfinite(x) and float(cell(x)) != x:
        return cell(x)
    return cell(text)


def parse_param(text: str) -> Any:
    """A logged MLflow param (always a string) back to the value Hydra had: int, float, bool,
    None, str, or a list of those (``data.drop=['id', 2]``, logged as Python writes it)."""
    if text.startswith("[") and text.endswith("]"):
        import ast

        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = None
        if isinstance(value, list):
            return value
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"True": True, "False": False, "None": None}.get(text, text)

"""How sweeper prints numbers and reads them back: every table, line and tag goes
through :func:`cell` (4 significant digits) or :func:`text_cell`; :func:`parse_param`
reads MLflow's param text; a job's overrides as its run's :func:`label` and as the command
that resumes its sweep. Imports nothing of ours."""

from __future__ import annotations

import ast
import difflib
import math
import shlex
from typing import Any


__all__ = [
    "PYTHON_CALL",
    "cell",
    "finite",
    "label",
    "near",
    "number",
    "parse_param",
    "python_call",
    "resume_command",
    "text_cell",
]


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


PYTHON_CALL = "sweeper.multirun("


def python_call(args: list[str]) -> str:
    """The Python form of a sweep's next command: ``sweeper.multirun([...])``
    with ``resume=true`` last."""
    kept = [a for a in args if a.lstrip("+~").partition("=")[0] != "resume"]
    return f"{PYTHON_CALL}{[*kept, 'resume=true']!r})"


def resume_command(args: list[str]) -> str:
    """The command line that finishes an interrupted sweep: the same arguments, ``resume=true``."""
    kept = [a for a in args if a.lstrip("+~").partition("=")[0] != "resume"]
    return shlex.join(["python", "-m", "sweeper", *kept, "resume=true"])


def label(overrides: list[str], device: str | None = None, keys: list[str] | None = None) -> str:
    """A readable name from a job's overrides (those of ``keys`` only, when given), without where it
    logs: ``lr=0.005,depth=2,cpu``; a value that 4 significant digits change (Optuna's)
    is rounded to them (the run's params keep it whole)."""
    parts = [o for o in overrides if not o.lstrip("+~").startswith(("tracking", "hydra"))]
    parts = [
        f"{k.removeprefix('++')}={text_cell(v)}" if eq else k
        for k, eq, v in (o.partition("=") for o in parts)
    ]
    if keys is not None:
        parts = [o for o in parts if o.lstrip("+~").partition("=")[0] in keys]
    if device is None:
        return ",".join(parts) or "defaults"
    parts = [o.split("=", 1)[1] if o.startswith("device=") else o for o in parts]
    return ",".join(parts + ([] if device in parts else [device]))


def near(key: str, known: Any, prefix: str = "") -> str:
    """`` (did you mean width?)`` for a key a typo or a case away from one of ``known``
    (``widht``, ``Width``), else ""; ``prefix`` goes before the suggestion (``data.``)."""
    lower = {str(k).lower(): k for k in known}  # Sex for sex: the case alone
    close = difflib.get_close_matches(str(key).lower(), list(lower), n=1, cutoff=0.75)
    return f" (did you mean {prefix}{lower[close[0]]}?)" if close else ""

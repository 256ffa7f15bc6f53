"""Reading user files as text rows: delimited text (the separator given or sniffed),
JSON, JSON Lines, NPZ."""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import json
import re
import zipfile
import zlib
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from sweeper.base.fmt import number
from sweeper.base.output import one_line
from sweeper.contract.config import SEP_NAMES
from sweeper.data.columns import sniff


__all__ = ["DataError", "decimal_mark"]


class DataError(ValueError):
    """A data set that cannot be read; the message is one line naming the file and what
    is wrong (a line break in a value it quotes, a column's name or a cell, is written
    ``\\n``: :func:`sweeper.base.output.one_line`)."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


def _parses(v: Any) -> bool:
    """Whether ``float(v)`` reads the value: a number, or text such as ``" 2.5"``."""
    return number(v) is not None


def _shown(labels: list[str], most: int = 6) -> str:
    return ", ".join(
        labels[:most] + ([f"... ({len(labels)} in all)"] if len(labels) > most else [])
    )


# what a file that is no text is, by its first bytes: a workbook or an archive says so
_NOT_TEXT = (
    (b"PK\x03\x04", "a zip archive (an .xlsx workbook is one)"),
    (b"\xd0\xcf\x11\xe0", "an Excel 97-2003 workbook (.xls)"),
)


def _text(path: Path) -> str:
    """The file's text: UTF-8 (a leading byte-order mark is dropped), or UTF-16 after its
    byte-order mark; gzip-compressed (a .csv.gz) decompressed; else one line saying where it
    is not."""
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":  # gzip's magic, whatever the name
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:  # a cut or corrupt .gz too
        raise DataError(
            f"data.path={path} cannot be read: {getattr(e, 'strerror', None) or e}"
        ) from None
    for magic, what in _NOT_TEXT:
        if raw.startswith(magic):
            raise DataError(
                f"data.path={path} is {what}, not text: save the table as CSV (UTF-8) and "
                "give that file"
            )
    # UTF-16 after its byte-order mark (Excel's "Unicode text"), else UTF-8 (its mark dropped)
    utf16 = raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
    codec = "UTF-16" if utf16 else "UTF-8"
    skip = len(codecs.BOM_UTF8) if not utf16 and raw.startswith(codecs.BOM_UTF8) else 0
    try:
        return raw[skip:].decode(codec)
    except UnicodeDecodeError as e:
        at = skip + e.start
        raise DataError(
            f"data.path={path} is not {codec} text (byte 0x{raw[at]:02x} at offset {at}): "
            "save it as UTF-8"
        ) from None


# the line Excel reads (and some exports write) before a CSV's header to name its separator
EXCEL_SEP = re.compile(r"sep=([^\r\n])\r?\n")


def _read_delimited(
    path: Path, header: bool, sep: str, quoting: int = csv.QUOTE_MINIMAL
) -> tuple[list[str] | None, list[list[str]], str]:
    """The header's names (or None), the non-empty rows as text, and the separator used in words
    (``data.sep=auto``: sniffed from the first lines, :func:`sweeper.data.columns.sniff`)."""
    text = _text(path)
    hint = EXCEL_SEP.match(text)
    if hint:  # Excel's first line "sep=;": the separator, and no row
        text = text[hint.end() :]
    if sep == "auto" and hint:
        sep, used = hint[1], f"{hint[1]!r} (the file's first line {hint[0].strip()!r}, Excel's)"
    elif sep == "auto":
        sep, used = sniff(text)
    else:
        sep = SEP_NAMES.get(sep, sep)
        used = f"{sep!r} (data.sep)"
    try:
        rows = [
            r
            for r in csv.reader(io.StringIO(text, newline=""), delimiter=sep, quoting=quoting)
            if r and (len(r) > 1 or r[0].strip())  # a line of spaces is a blank line
        ]
    except csv.Error as e:
        raise DataError(f"data.path={path} cannot be read as delimited text: {e}") from None
    if not header or not rows:
        return None, rows, used
    names = [c.strip() for c in rows.pop(0)]
    if all(_parses(c) for c in names):
        raise DataError(
            f"data.path={path}: the first line ({_shown(names, 4)}) holds only numbers, "
            "so it looks like "
            "data, not column names: set data.header=false for a file without a header line"
        )
    twice = [n for n in dict.fromkeys(names) if n and names.count(n) > 1]
    if twice:
        at = [i + 1 for i, n in enumerate(names) if n == twice[0]]
        raise DataError(
            f"data.path={path}: the header names column {twice[0]!r} {len(at)} times (columns "
            f"{', '.join(map(str, at))}): give each column its own name in the file's first line"
        )
    return names, rows, used


def _json(text: str, path: Path, where: str = "") -> Any:
    """``text`` parsed as JSON (the file's, or ``where``: one line of it); else one line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(
            f"data.path={path}: {where} is not valid JSON: {e}"
            if where
            else f"data.path={path} is not valid JSON: {e}"
        ) from None


def _read_json(path: Path) -> tuple[list[str], list[list[Any]]]:
    obj = _json(_text(path), path)
    if isinstance(obj, list) and obj and all(isinstance(r, dict) for r in obj):  # records
        return _records(obj)
    cols = obj.values() if isinstance(obj, dict) else []
    # columns
    if cols and all(isinstance(c, list) for c in cols) and len({len(c) for c in cols}) == 1:
        return list(obj), [list(r) for r in zip(*obj.values())]
    raise DataError(
        f"data.path={path}: JSON must be a list of records or an object of equal-length columns"
    )


def _read_jsonl(path: Path) -> tuple[list[str], list[list[Any]]]:
    """JSON Lines: one record (an object) a line; blank lines are skipped."""
    records = []
    for i, line in enumerate(_text(path).splitlines()):
        if not line.strip():
            continue
        r = _json(line, path, f"line {i + 1}")
        if not isinstance(r, dict):
            raise DataError(
                f"data.path={path}: line {i + 1} is not a JSON object; .jsonl needs one "
                "record a line"
            )
        records.append(r)
    return _records(records)


def _records(records: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """Records as rows: every key any record has is a column (a key a record lacks: a
    missing cell). The first record's keys keep their order, its last still the last column
    (the default target, data.target=-1); keys later records add come in before it."""
    first = list(records[0])
    added = [k for k in dict.fromkeys(k for r in records for k in r) if k not in records[0]]
    names = first[:-1] + added + first[-1:]
    return names, [[r.get(k) for k in names] for r in records]


def _read_npz(path: Path) -> tuple[np.ndarray, list[Any]]:
    """``X`` (n, d) as float64 and ``y``'s n values (numbers or text)."""
    try:
        z = np.load(path)
        if not isinstance(z, np.lib.npyio.NpzFile):
            raise ValueError("it holds a single array, not a zip archive of arrays")
        with z:
            found = sorted(z.files)
            X, y = (
                (np.asarray(z["X"], dtype=np.float64), z["y"])
                if {"X", "y"} <= {*found}
                else (None, None)
            )
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        why = str(e).strip().splitlines()
        raise DataError(
            f"data.path={path} cannot be read as .npz ({why[0] if why else type(e).__name__}): "
            "save it with numpy.savez(path, X=X, y=y)"
        ) from None
    if X is None:
        raise DataError(f"data.path={path}: an .npz file needs arrays named X and y, found {found}")
    if X.ndim != 2 or len(X) != y.size:
        raise DataError(
            f"data.path={path}: X must be (n, d) and y (n,), got {X.shape} and {y.shape}"
        )
    return X, y.ravel().tolist()


# Numbers as tables write them past float()'s form (data.decimal): "point": 1,234.5 (commas
# group the thousands); "comma": 14,23, 1.234,5 or 1 234,5 (a decimal comma; points or
# spaces group). A cell is read by its file's mark only when it matches the whole pattern.
WRITTEN = MappingProxyType(
    {
        "point": re.compile(r"[+-]?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d*)?"),
        "comma": re.compile(r"[+-]?(?:[1-9]\d{0,2}(?:[. \u00a0\u202f]\d{3})+|\d*)(?:,\d+)?"),
    }
)
# a column of decimal commas with nothing else in it, read whole (:func:`_plain_commas`)
PLAIN_COMMAS = re.compile(r"(?:[+-]?\d*(?:,\d+)?\n)*[+-]?\d*(?:,\d+)?")
# the rows whose numbers decide the file's decimal mark (the separator: the first 50 lines)
SNIFF_ROWS = 1000
COMMA_GROUPS = ". \u00a0\u202f"  # what groups a decimal comma's thousands: 1.234,5, 1 234,5
_GROUPS = MappingProxyType({"point": re.compile(","), "comma": re.compile("[. \u00a0\u202f]")})


def _marked(v: str, mark: str) -> str | None:
    """A cell written with the decimal ``mark`` as float() reads it (``1,234.5`` →
    ``1234.5``, ``1.065`` → ``1065`` for a comma), or None when it is no such number. A cell
    with a comma is one float() cannot read; one without is only a group's (1.065, 1 234)."""
    # a shortcut only (the pattern below decides): spares the regex for most cells
    marked = "," in v or mark == "comma" and any(g in v for g in COMMA_GROUPS)  # pragma: no mutate
    if not marked:  # pragma: no mutate
        return None
    t = v.strip()
    if not WRITTEN[mark].fullmatch(t):
        return None
    return _GROUPS[mark].sub("", t).replace(",", ".")


def decimal_mark(rows: list[list[Any]], names: list[Any], asked: str, sep: str) -> str | None:
    """The decimal mark of the file's numbers, as decided, in words; each cell written with
    it is rewritten in place as float() reads it (``rows``: of one width, ``_table``'s).

    ``"point"`` when a cell reads 1,234.5 or 1,234,567 (commas group the thousands),
    ``"comma"`` when one reads 14,23 or 1.234,5 (so the file's 1.065 is 1065); cells that
    read either way (15,100) follow the separator ``sep`` (in words): a semicolon-separated
    file writes decimal commas, another groups with commas. ``asked`` (``data.decimal``)
    decides instead unless it is ``auto``. The mark is read from the first
    :data:`SNIFF_ROWS` rows; a later cell written another way stays text (its column says
    so). None: no cell is written so. Both forms in one file: neither is read, said."""
    seen: dict[str, tuple[int, int]] = {}  # form → its first cell (row, column)
    for i, r in enumerate(rows[:SNIFF_ROWS]):
        for j, v in enumerate(r):
            if isinstance(v, str) and "," in v:  # float() reads no comma
                point, comma = (WRITTEN[m].fullmatch(v.strip()) for m in ("point", "comma"))
                if point or comma:
                    seen.setdefault(
                        "either" if point and comma else "point" if point else "comma", (i, j)
                    )
    semi = sep.startswith(("semicolon", "';'"))
    if asked != "auto":
        mark, why = asked, "data.decimal"
    elif "point" in seen and "comma" in seen:
        return (
            f"written both ways ({_cell(rows, names, seen['point'])}, "
            f"{_cell(rows, names, seen['comma'])}): read as text; data.decimal=point or "
            "data.decimal=comma reads one of them"
        )
    elif not seen:
        return None
    else:
        mark = "point" if "point" in seen else "comma" if "comma" in seen or semi else "point"
        why = "sniffed: " + _cell(rows, names, seen.get(mark) or seen["either"])
        if mark not in seen:
            why += (
                ", which reads either way: decimal commas in a semicolon-separated file"
                if semi
                else ", which reads either way: commas group in a file not semicolon-separated"
            )
    done = _plain_commas(rows) if mark == "comma" else set()  # pragma: no mutate  (a shortcut)
    left = [j for j in range(len(rows[0]) if rows else 0) if j not in done]  # pragma: no mutate
    grouped = None  # the first cell whose point or space groups (1.065 read as 1065)
    for j in left:
        cells = [(r, r[j]) for r in rows if isinstance(r[j], str)]
        # a column that writes a number with a decimal point (0.5, 2.25) keeps its 2.500 too
        points = mark == "comma" and any(
            "." in v and number(v) is not None and not WRITTEN["comma"].fullmatch(v.strip())
            for _, v in cells
        )
        for r, v in cells:
            plain = None if points and "," not in v else _marked(v, mark)
            if plain is not None:
                if grouped is None and "," not in v and plain != v.strip():
                    grouped = f"{v} read as {plain}"
                r[j] = plain
    other = "comma" if mark == "point" else "point"
    said = "decimal comma" if mark == "comma" else "decimal point, commas grouping"
    return (
        f"{said} ({'; '.join(filter(None, [why, grouped]))}; "
        f"data.decimal={other} reads the other way)"
    )


def _plain_commas(rows: list[list[Any]]) -> set[int]:
    """The columns whose every cell is a decimal comma's number, a plain integer or empty
    (14,23, -0,5, 3: most of such a file), rewritten at once, in place; the others are left
    to the cell-by-cell reading."""
    done: set[int] = set()
    # a shortcut only: any column it leaves is read cell by cell (the same values, slower)
    for j in range(len(rows[0]) if rows else 0):  # pragma: no mutate
        column = [r[j] for r in rows]
        if not all(isinstance(v, str) for v in column):  # pragma: no mutate
            continue  # pragma: no mutate
        text = "\n".join(column)  # pragma: no mutate
        if "," in text and PLAIN_COMMAS.fullmatch(text):  # pragma: no mutate
            for r, v in zip(rows, text.replace(",", ".").split("\n")):
                r[j] = v
            done.add(j)
    return done


def _cell(rows: list[list[Any]], names: list[Any], at: tuple[int, int]) -> str:
    """The cell at (row, column) and its column, in words."""
    i, j = at
    name = names[j]
    return f"{rows[i][j]} in {name if isinstance(name, str) else f'column {name}'}"

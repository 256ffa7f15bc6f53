"""data.readers: a file's header read once, its faults refused as it is read."""

from __future__ import annotations


import numpy as np
import pytest

from conftest import write_csv


def test_a_duplicated_column_name_is_refused_whatever_names_it(tmp_path):
    """A header that names a column twice is refused as the file is read (before: refused only where a key named
    it; otherwise both trained and the logged model's input example dropped one)."""
    from conftest import make_cfg
    from sweeper import data

    path = write_csv(tmp_path, "a,a,y", [(i % 7, i % 3, i % 5) for i in range(60)])
    for override in ("data.target=a", "data.drop=[a]", "data.target=y"):
        cfg = make_cfg("data=csv", f"data.path={path}", override)
        with pytest.raises(data.DataError, match="the header names column 'a' 2 times"):
            data.load(cfg.data, cfg.seed)


def _table(path, sep, rows):
    path.write_text("\n".join(sep.join(r) for r in rows) + "\n")
    return path


def _plain_and(tmp_path, sep, write):
    """The same 60-row table twice: plain (1065.5) and as ``write`` writes each number; the
    second's decision on its numbers."""
    from test_data_files import load

    cells = [
        [f"{1000 + 7 * i + 0.25 * ((i + 1) % 2):.2f}", f"{i % 9 + 0.5:.1f}", str(i % 3)]
        for i in range(60)
    ]
    plain = load(
        _table(tmp_path / "plain.csv", sep, [["a", "b", "y"], *cells]), "data.task=regression"
    )
    marked = _table(
        tmp_path / "marked.csv", sep, [["a", "b", "y"]] + [[write(c) for c in r] for r in cells]
    )
    return plain, marked


def _same(ds, plain):
    assert np.array_equal(ds.X_train, plain.X_train) and np.array_equal(ds.y_train, plain.y_train)


def test_decimal_commas_and_point_groups_are_read_as_the_numbers_they_are_and_said(tmp_path):
    """Before: 1.071,25 and 4,5 were text (categories, or left out past data.max_categories),
    and 1.065 (no decimals, a point grouping) silently 1.065."""
    from sweeper import data
    from test_data_files import load

    def european(v):  # as a German Excel writes 1071.25: 1.071,25
        whole, _, frac = v.partition(".")
        whole = f"{int(whole):,}".replace(",", ".")
        return whole + ("," + frac if frac and frac.strip("0") else "")

    plain, path = _plain_and(tmp_path, ";", european)
    ds = load(path, "data.task=regression")
    _same(ds, plain)
    said = ds.decisions["numbers"]
    # said in the run's first line and tagged (decided.numbers)
    assert (
        f"numbers: {said}" in data.describe(ds)
        and data.decision_tags(ds)["decided.numbers"] == said
    )
    # the grouped cell named, not the first decimal one (1.000,25 in row 1)
    assert said == (
        "decimal comma (sniffed: 1.000,25 in a; 1.007 read as 1007; data.decimal=point reads "
        "the other way)"
    )


def test_comma_grouped_thousands_are_read_as_numbers_and_the_target_too(tmp_path):
    """Before: the quoted "1,071.25" was text and the target "15,100" made 60 classes."""
    from test_data_files import load

    plain, path = _plain_and(tmp_path, ",", lambda v: f'"{float(v):,}"' if "." in v else v)
    ds = load(path, "data.task=regression")
    _same(ds, plain)
    assert ds.decisions["numbers"] == (
        "decimal point, commas grouping (sniffed: 1,000.25 in a; data.decimal=comma reads the "
        "other way)"
    )
    rows = [["x", "y"]] + [[str(i * 7 % 40), f'"{10 + i},{100 + i}"'] for i in range(40)]
    ds = load(_table(tmp_path / "t.csv", ",", rows))
    assert ds.task == "regression" and ds.decisions["target"] == "y: range [10100, 49139]"
    assert ds.decisions["numbers"] == (
        "decimal point, commas grouping (sniffed: 10,100 in y, which reads either way: commas "
        "group in a file not semicolon-separated; data.decimal=comma reads the other way)"
    )
    # one "1,234.5" in a semicolon-separated file says commas group, whatever the separator
    rows = [["x", "y"]] + [[f"{i + 1},{100 + i}.5", str(i)] for i in range(40)]
    semi = load(_table(tmp_path / "s.csv", ";", rows), "data.task=regression")
    assert semi.decisions["numbers"].startswith("decimal point, commas grouping (sniffed: 1,100.5")


def test_cells_that_read_either_way_follow_the_separator_and_data_decimal_decides(tmp_path):
    from test_data_files import load

    rows = [["x", "y"]] + [[f"{i % 7 + 1},{100 + i}", str(i)] for i in range(40)]
    semi = load(_table(tmp_path / "semi.csv", ";", rows), "data.task=regression")
    assert semi.decisions["numbers"] == (
        "decimal comma (sniffed: 1,100 in x, which reads either way: decimal commas in a "
        "semicolon-separated file; data.decimal=point reads the other way)"
    )
    named = load(
        _table(tmp_path / "semi.csv", ";", rows), "data.task=regression", "data.sep=semicolon"
    )
    assert named.decisions["numbers"].startswith("decimal comma (sniffed: 1,100 in x, which")
    asked = load(
        _table(tmp_path / "semi.csv", ";", rows), "data.task=regression", "data.decimal=point"
    )
    assert asked.decisions["numbers"].startswith("decimal point, commas grouping (data.decimal;")
    raw = lambda ds: ds.X_train * ds.x_scale + ds.x_mean  # noqa: E731
    # 1,100 .. 7,139: as decimals they stay under 8; as groups, 1100..7139
    assert raw(semi).max() < 8 < 1100 <= raw(asked).min()
    quoted = [["x", "y"]] + [[f'"{i % 7 + 1},{100 + i}"', str(i)] for i in range(40)]
    comma = load(
        _table(tmp_path / "c.csv", ",", quoted), "data.task=regression", "data.decimal=comma"
    )
    assert raw(comma).max() < 8 and comma.decisions["numbers"].startswith(
        "decimal comma (data.decimal;"
    )


def test_a_file_that_writes_numbers_both_ways_reads_neither_and_says_so(tmp_path):
    from test_data_files import load

    rows = [["a", "b", "y"]] + [[f"1,{200 + i}.5", f"{i},5", str(i)] for i in range(40)]
    ds = load(
        _table(tmp_path / "t.csv", ";", rows), "data.task=regression", "data.max_categories=100"
    )
    assert ds.decisions["numbers"] == (
        "written both ways (1,200.5 in a, 0,5 in b): read as text; data.decimal=point or "
        "data.decimal=comma reads one of them"
    )
    assert {r["column"]: r["kind"] for r in ds.report}["a"] == "category"


def test_a_gzip_compressed_table_is_read_as_its_kind_and_a_workbook_gets_one_line(tmp_path):
    """Before: a .csv.gz or .json.gz was "not UTF-8 text (byte 0x8b at offset 1)", and so
    was an .xlsx workbook ("save it as UTF-8")."""
    import gzip
    import json
    import zipfile

    from sweeper.contract.config import experiment_name
    from test_data_files import load, refused

    rows = [(i * 7 % 40, i % 3, i % 5) for i in range(40)]
    plain = load(write_csv(tmp_path, "a,b,y", rows), "data.task=regression")
    text = (tmp_path / "t.csv").read_bytes()
    (tmp_path / "t.csv.gz").write_bytes(gzip.compress(text))
    records = json.dumps([dict(zip("aby", r)) for r in rows]).encode()
    (tmp_path / "t.json.gz").write_bytes(gzip.compress(records))
    for name in ("t.csv.gz", "t.json.gz"):
        ds = load(tmp_path / name, "data.task=regression")
        assert np.array_equal(ds.X_train, plain.X_train) and np.array_equal(ds.y_test, plain.y_test)
    assert experiment_name("csv", str(tmp_path / "sales.csv.gz")) == "csv-sales"
    with zipfile.ZipFile(tmp_path / "t.xlsx", "w") as z:
        z.writestr("xl/workbook.xml", "<workbook/>")
    (tmp_path / "t.xls").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504))
    (tmp_path / "cut.csv.gz").write_bytes(gzip.compress(text)[:20])
    for name, what in [
        ("t.xlsx", "a zip archive (an .xlsx workbook is one), not text"),
        ("t.xls", "an Excel 97-2003 workbook (.xls), not text"),
        ("cut.csv.gz", "cannot be read: Compressed file ended before"),
    ]:
        assert refused(tmp_path / name).startswith(
            f"data.path={tmp_path / name} is {what}".replace("is cannot", "cannot")
        )
    assert refused(tmp_path / "t.xls").endswith(
        "not text: save the table as CSV (UTF-8) and give that file"
    )


def test_blank_lines_of_spaces_utf16_text_and_records_of_differing_keys_are_read(tmp_path):
    """Before: a line of spaces was a row of one field ("rows have different numbers of fields
    [1, 3]"); Excel's "Unicode text" (UTF-16, a byte-order mark, tabs) was "not UTF-8 text";
    a key that the first JSON record lacks was silently no column."""
    import json

    from test_data_files import load

    rows = [(i * 7 % 40, i % 3, i % 5) for i in range(40)]
    plain = load(write_csv(tmp_path, "a,b,y", rows), "data.task=regression")
    text = "a\tb\ty\n" + "".join(
        f"{a}\t{b}\t{y}\n" + ("   \n" if i == 5 else "") for i, (a, b, y) in enumerate(rows)
    )
    for name, encoded in [("spaces.tsv", text.encode()), ("unicode.txt", text.encode("utf-16"))]:
        (tmp_path / name).write_bytes(encoded)
        ds = load(tmp_path / name, "data.task=regression")
        assert np.array_equal(ds.X_train, plain.X_train) and np.array_equal(ds.y_val, plain.y_val)
    records = [
        {"a": a, "y": y} if i % 2 else {"a": a, "b": b, "y": y} for i, (a, b, y) in enumerate(rows)
    ]
    records[0] = {"a": rows[0][0], "y": rows[0][2]}  # the first record lacks b
    records[1] = {"y": rows[1][2], "b": rows[1][1], "a": rows[1][0]}  # another order: y not last
    path = tmp_path / "r.json"
    path.write_text(json.dumps(records))
    report = {r["column"]: r for r in load(path, "data.task=regression").report}
    assert report["y"]["kind"] == "target"  # still the first record's last key
    assert report["b"]["kind"] == "number" and report["b"]["missing"] > 0


def test_a_column_of_point_decimals_in_a_decimal_comma_file_keeps_them(tmp_path):
    """A file of decimal commas whose one column writes decimal points (0.5, 2.500): that
    column's 2.500 stays 2.5, not 2500; a column of 1.065 and 680 reads 1065; 0,500 is a
    decimal (no group starts with 0)."""
    from test_data_files import load

    rows = [["a", "b", "c", "y"]] + [
        [f"{i % 9},{i % 7 + 1}", ["0.5", "2.500", "1.25"][i % 3], ["1.065", "680"][i % 2], str(i)]
        for i in range(60)
    ]
    ds = load(_table(tmp_path / "t.csv", ";", rows), "data.task=regression")
    raw = ds.X_train * ds.x_scale + ds.x_mean
    assert sorted(set(np.round(raw[:, 1], 9))) == [0.5, 1.25, 2.5]
    assert sorted(set(raw[:, 2])) == [680, 1065]
    assert raw[:, 0].max() < 9 and "1.065 read as 1065" in ds.decisions["numbers"]
    quoted = [["x", "y"]] + [[f'"0,{500 + i}"', str(i)] for i in range(40)]  # comma-separated
    ds = load(_table(tmp_path / "q.csv", ",", quoted), "data.task=regression")
    assert ds.decisions["numbers"].startswith("decimal comma (sniffed: 0,500 in x;")


def test_excels_sep_line_names_the_separator_and_is_no_row(tmp_path):
    """Before: 'sep=;' (Excel's hint before the header) made the sniffing fail ('no separator
    splits the first lines alike'), read as comma, one column: refused."""
    from test_data_files import load

    rows = [(i * 7 % 40, i % 3, i % 5) for i in range(40)]
    plain = load(write_csv(tmp_path, "a,b,y", rows), "data.task=regression")
    path = tmp_path / "excel.csv"
    path.write_text(
        "sep=;\r\na;b;y\r\n" + "".join(f"{a};{b};{y}\r\n" for a, b, y in rows), newline=""
    )
    for given in ([], ["data.sep=semicolon"]):
        ds = load(path, "data.task=regression", *given)
        assert np.array_equal(ds.X_train, plain.X_train) and np.array_equal(ds.y_test, plain.y_test)
    assert ds.decisions["sep"] == "';' (data.sep)"
    assert load(path).decisions["sep"] == "';' (the file's first line 'sep=;', Excel's)"


def test_a_decimal_comma_column_with_empty_cells_and_one_of_both_marks_reads_each_cell(tmp_path):
    """A column of decimal commas with missing cells (read at once: each cell in its row), one
    of point decimals with a 1,5 in it (the 1,5 read too), and ragged rows (one line, no
    IndexError)."""
    from test_data_files import load, refused

    rows = [["a", "b", "y"]] + [
        ["" if i % 5 == 2 else f"{i % 9},{i % 4}", "1,5" if i == 3 else f"{i % 4}.25", str(i)]
        for i in range(40)
    ]
    ds = load(_table(tmp_path / "t.csv", ";", rows), "data.task=regression")
    report = {r["column"]: r for r in ds.report}
    assert report["a"]["kind"] == "number" and report["a"]["missing"] > 0
    assert report["b"]["kind"] == "number"
    raw = ds.X_train * ds.x_scale + ds.x_mean
    assert set(np.round(raw[:, -1], 9)) <= {0.25, 1.25, 1.5, 2.25, 3.25}
    rows[7] = rows[7][:2]
    assert "rows have different numbers of fields [2, 3]" in refused(
        _table(tmp_path / "r.csv", ";", rows), "data.sep=semicolon"
    )


def test_a_utf16_file_cut_mid_character_is_one_line(tmp_path):
    from test_data_files import refused

    path = tmp_path / "t.txt"
    path.write_bytes("a\tb\n1\t2\n".encode("utf-16") + b"\x00")
    assert refused(path) == (
        f"data.path={path} is not UTF-16 text (byte 0x00 at offset 18): save it as UTF-8"
    )


def test_a_file_that_cannot_be_read_says_why_in_words(tmp_path):
    """The OS's words (strerror), not Python's "[Errno 21] Is a directory: '...'"."""
    from sweeper.data.readers import DataError, _text

    with pytest.raises(DataError) as err:
        _text(tmp_path)
    assert str(err.value) == f"data.path={tmp_path} cannot be read: Is a directory"

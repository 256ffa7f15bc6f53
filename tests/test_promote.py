"""sweeper.promote: names and folders refused in one line before the store is read."""

from __future__ import annotations


from conftest import one_line


def test_promote_refuses_a_name_too_long_for_a_file(tmp_path, capsys):
    from sweeper import promote

    code = promote.main(
        [
            "--experiment",
            "x",
            "--name",
            "n" * 300,
            "--out-dir",
            str(tmp_path / "out"),
            "--tracking-uri",
            f"sqlite:///{tmp_path / 'none.db'}",
        ]
    )
    assert code == 2 and "--name=nnn" in one_line(capsys.readouterr().err)
    assert not (tmp_path / "none.db").exists()


def test_promote_refuses_an_out_dir_under_a_file(tmp_path, capsys):
    from sweeper import promote

    (tmp_path / "f").write_text("")
    code = promote.main(
        [
            "--experiment",
            "x",
            "--out-dir",
            str(tmp_path / "f" / "out"),
            "--tracking-uri",
            f"sqlite:///{tmp_path / 'none.db'}",
        ]
    )
    assert code == 2 and "expected a folder" in one_line(capsys.readouterr().err)

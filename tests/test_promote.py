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


def test_a_store_that_fails_is_one_line_and_a_bug_is_raised(tmp_path, monkeypatch):
    """promotion._open_candidates (the store's reads) and promote's registration: a store that fails (a
    database driver not installed, a server that went down: tracking.failures) is the command's one line;
    an error that is no store's (a bug) is raised with its traceback."""
    from types import SimpleNamespace

    import pytest
    from mlflow.exceptions import MlflowException

    from sweeper import promote, tracking
    from sweeper.insight import promotion

    monkeypatch.setattr(tracking, "check_readable", lambda uri: None)
    uri = "postgresql://127.0.0.1:9/db"
    monkeypatch.setattr(
        tracking, "client", lambda uri: (_ for _ in ()).throw(ModuleNotFoundError("no psycopg"))
    )
    with pytest.raises(promotion.PromoteError) as refused:
        promotion._open_candidates(uri, "e", [], False)
    assert (
        str(refused.value)
        == f"--tracking-uri={uri} is not allowed: ModuleNotFoundError: no psycopg"
    )
    monkeypatch.setattr(tracking, "client", lambda uri: (_ for _ in ()).throw(TypeError("ours")))
    with pytest.raises(TypeError, match="ours"):
        promotion._open_candidates(uri, "e", [], False)

    monkeypatch.setattr(tracking, "client", lambda uri: None)
    args = SimpleNamespace(tracking_uri=uri, register="m")
    run = SimpleNamespace(info=SimpleNamespace(run_id="r1"))
    for raised in (MlflowException("the server went away"), TypeError("ours")):
        monkeypatch.setattr(
            tracking, "register", lambda *a, raised=raised: (_ for _ in ()).throw(raised)
        )
        expected = promotion.PromoteError if isinstance(raised, MlflowException) else TypeError
        with pytest.raises(expected) as e:
            promote._registrar(args, [])(run)
    assert str(e.value) == "ours"

"""sweeper.base.environment: a bad SWEEPER_* value is one line before anything runs."""

from __future__ import annotations


import pytest

from conftest import cli, one_line


@pytest.mark.parametrize(
    "name, value, error",
    [
        ("SWEEPER_THREADS", "two", "SWEEPER_THREADS=two is not allowed: expected an integer >= 1"),
        ("SWEEPER_WRITER", "no", "SWEEPER_WRITER=no is not allowed: expected on or off"),
        ("SWEEPER_PLOTS", "no", "SWEEPER_PLOTS=no is not allowed: expected on or off"),
        (
            "SWEEPER_HEARTBEAT_S",
            "-1",
            "SWEEPER_HEARTBEAT_S=-1 is not allowed: expected a number of seconds > 0",
        ),
        ("SWEEPER_AHEAD_BULK", "many", "SWEEPER_AHEAD_BULK=many is not allowed"),
        # a number's text that is none (fmt.number: None), and one that is not finite
        (
            "SWEEPER_HEARTBEAT_S",
            "soon",
            "SWEEPER_HEARTBEAT_S=soon is not allowed: expected a number",
        ),
        (
            "SWEEPER_AHEAD_AFTER_S",
            "inf",
            "SWEEPER_AHEAD_AFTER_S=inf is not allowed: expected a number",
        ),
        (
            "SWEEPER_WRITR",
            "off",
            "SWEEPER_WRITR is not one sweeper reads: expected one of SWEEPER_WRITER",
        ),
    ],
)
def test_a_bad_sweeper_environment_value_is_one_line(name, value, error):
    """Before: accepted (a typo, SWEEPER_WRITER=no), read as the default, or "group failed as a whole"."""
    from sweeper.base.environment import problem

    assert error in problem({name: value})
    assert (
        problem({name: ""}) is None
        and problem({"SWEEPER_THREADS": "2", "SWEEPER_WRITER": "off"}) is None
    )


def test_a_bad_sweeper_environment_value_stops_the_command_before_anything(tmp_path):
    proc = cli(tmp_path, "epochs=5", store=tmp_path / "s.db", env={"SWEEPER_THREADS": "two"})
    assert proc.returncode == 2
    assert "SWEEPER_THREADS=two is not allowed" in one_line(proc.stderr)
    assert not (tmp_path / "s.db").exists()


def test_a_machine_cache_file_is_read_whole_or_not_at_all_and_written_beside_its_other_keys(
    tmp_path,
):
    """read_cached / write_cached: the one owner of the machine cache's files (the gradient checks, the activation
    forms' probe, the packing costs each read and wrote their own, with four handlers for the same decision: a cache
    that cannot be read or written is no cache)."""
    import json

    from sweeper.base.environment import read_cached, write_cached

    path = tmp_path / "cache" / "costs.json"
    assert read_cached(path) is None  # not there
    write_cached(path, {"epochs": {"a": 1.0}}, "m1")
    write_cached(path, {"epochs": {"b": 2.0}}, "m2")  # beside the other machine's key
    assert json.loads(path.read_text()) == {
        "m1": {"epochs": {"a": 1.0}},
        "m2": {"epochs": {"b": 2.0}},
    }
    assert read_cached(path, lambda d: d["m2"]["epochs"]["b"]) == 2.0
    assert read_cached(path, lambda d: d["m3"]["epochs"]) is None  # another version's shape
    assert [p.name for p in path.parent.iterdir()] == ["costs.json"]  # no temporary file left
    path.write_text('{"m1": {"epo')  # cut short
    assert read_cached(path) is None
    write_cached(path, [1, 2], "m1")  # a file that was no cache is replaced
    assert read_cached(path) == {"m1": [1, 2]}
    # a value JSON cannot hold is the caller's bug, not a cache that cannot be written: it raises (the gradient
    # checks, the forms' probe and the packing costs each write floats, strings and dicts of them; their tests read
    # the files back), before any file is touched
    for key in (None, "m2"):
        with pytest.raises(TypeError, match="not JSON serializable"):
            write_cached(path, {"x": object()}, key)
    assert read_cached(path) == {"m1": [1, 2]}
    assert [p.name for p in path.parent.iterdir()] == ["costs.json"]
    blocked = tmp_path / "file"
    blocked.write_text("")
    write_cached(blocked / "costs.json", {"a": 1})  # a folder that cannot be made: no cache
    assert not (blocked / "costs.json").exists() and blocked.read_text() == ""

"""sweeper.base.environment: a bad SWEEPER_* value is one line before anything runs."""

from __future__ import annotations


import pytest

from conftest import cli, one_line


@pytest.mark.parametrize(
    "name, value, error",
    [
        ("SWEEPER_THREADS", "two", "SWEEPER_THREADS=two is not allowed: expected an integer >= 1"),
        ("SWEEPER_WRITER", "no", "SWEEPER_WRITER=no is not allowed: expected on or off"),
        (
            "SWEEPER_HEARTBEAT_S",
            "-1",
            "SWEEPER_HEARTBEAT_S=-1 is not allowed: expected a number of seconds > 0",
        ),
        ("SWEEPER_AHEAD_BULK", "many", "SWEEPER_AHEAD_BULK=many is not allowed"),
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

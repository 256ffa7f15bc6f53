"""bench/versus_bench.py: a checkout against another, interleaved (issue 58's "every benchmark
within 5 % of the day the issue was filed"). Its verdicts, its refusals, and one real pair."""

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import versus_bench  # noqa: E402


def test_a_wall_is_within_when_at_most_5_percent_longer():
    assert versus_bench.row("g", "wall s", [10.0, 9.0, 11.0], [10.4], "")[4:] == ["+4.0 %", "yes"]
    assert versus_bench.row("g", "wall s", [10.0], [10.6], "")[4:] == ["+6.0 %", "NO"]
    assert versus_bench.row("g", "wall s", [10.0], [5.0], "")[4:] == ["-50.0 %", "yes"]


def test_a_rate_is_within_when_at_most_5_percent_lower():
    assert versus_bench.row("t", "epochs/s", [1000.0], [960.0], "")[4:] == ["-4.0 %", "yes"]
    assert versus_bench.row("t", "epochs/s", [1000.0], [940.0], "")[4:] == ["-6.0 %", "NO"]
    assert versus_bench.row("t", "epochs/s", [1000.0], [2000.0], "")[2:] == [
        "1,000",
        "2,000",
        "+100.0 %",
        "yes",
    ]


def test_an_error_is_a_row_of_its_own():
    assert versus_bench.row("g", "wall s", [1.0], [], "boom")[2:4] == ["error", "boom"]


def test_pairs_alternate_which_side_goes_first():
    order = []

    def measure(side):
        order.append(side)
        return float(len(order)), None

    base, head, error = versus_bench.interleaved(measure, ("b", "h"), 3)
    assert order == ["b", "h", "h", "b", "b", "h"]
    assert (base, head, error) == ([1.0, 4.0, 5.0], [2.0, 3.0, 6.0], "")


def test_a_sweep_it_does_not_know_is_refused_in_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        versus_bench.main(["--base-python", sys.executable, "--sweeps", "grid-8"])
    assert e.value.code == 2
    assert "--sweeps 'grid-8': expected some of one run, grid-16" in capsys.readouterr().err


def test_a_python_without_sweeper_is_refused_in_one_line(tmp_path):
    bare = tmp_path / "bare-python"  # this Python without site-packages: no sweeper
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I -S "$@"\n')
    bare.chmod(0o755)
    with pytest.raises(SystemExit, match="cannot import sweeper: ModuleNotFoundError"):
        versus_bench.Side(str(bare))
    with pytest.raises(SystemExit, match="No such file"):
        versus_bench.Side(str(tmp_path / "python"))


@pytest.mark.slow
def test_this_checkout_against_itself_gives_both_figures(tmp_path):
    out = tmp_path / "versus.md"
    bench = Path(versus_bench.__file__)
    cmd = [sys.executable, str(bench), "--base-python", sys.executable, "--repeats", "1"]
    cmd += ["--sweeps", "one run", "--workloads", "", "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    (line,) = [r for r in out.read_text().splitlines() if r.startswith("| one run")]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1] == "wall s"
    assert 0.3 < float(cells[2]) < 120 and 0.3 < float(cells[3]) < 120
    assert cells[5] in ("yes", "NO")

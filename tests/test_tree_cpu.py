"""tests/tree_cpu.py: the CPU of a command's whole process tree, the orphans its processes left included."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).parent / "tree_cpu.py"
BURN = 0.5  # CPU-s the orphan spends after its parent ended
# a parent that starts a child and ends without waiting for it: the child, an orphan, then burns BURN CPU-s
ORPHANING = (
    "import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
    f"'import time\\nt = time.process_time()\\nwhile time.process_time() - t < {BURN}: pass'])"
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a child subreaper is Linux's")
def test_the_cpu_of_an_orphan_is_counted_where_a_waited_for_childs_count_misses_it():
    proc = subprocess.run(
        [sys.executable, str(TOOL), sys.executable, "-c", ORPHANING + "; sys.exit(3)"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stderr  # the command's exit status
    (total,) = re.findall(r"= (\d+\.\d) CPU-s$", proc.stderr.strip().splitlines()[-1])
    assert float(total) >= BURN
    # what time(1) counts (the children waited for): the orphan is not among them
    waited = subprocess.run(
        [
            sys.executable,
            "-c",
            "import resource, subprocess, sys; subprocess.call([sys.executable, '-c', sys.argv[1]]); "
            "r = resource.getrusage(resource.RUSAGE_CHILDREN); print(r.ru_utime + r.ru_stime)",
            ORPHANING,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert float(waited.stdout) < BURN, waited.stderr

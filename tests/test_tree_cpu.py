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


# the command: a child forks a grandchild, which ends at once, and ends: the grandchild is an orphan; then the
# command watches the orphan's /proc entry until it is gone (reaped) or, when the hang guard ends the watch, still
# there as a zombie
WATCH = (
    "import os, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import os, sys\\npid = os.fork()\\npid or os._exit(0)\\n"
    "print(pid)'], stdout=subprocess.PIPE)\n"
    "orphan = int(child.stdout.read())\n"
    "child.wait()\n"
    "deadline = time.monotonic() + 60\n"
    "stat = f'/proc/{orphan}/stat'\n"
    "while os.path.exists(stat) and time.monotonic() < deadline:\n"
    "    time.sleep(0.05)\n"
    "print('reaped' if not os.path.exists(stat) else open(stat).read().rpartition(')')[2].split()[0])\n"
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a child subreaper is Linux's")
def test_an_orphan_that_ends_while_the_command_runs_is_reaped_then_not_left_a_zombie():
    proc = subprocess.run(
        [sys.executable, str(TOOL), sys.executable, "-c", WATCH],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["reaped"], (proc.stdout, proc.stderr)

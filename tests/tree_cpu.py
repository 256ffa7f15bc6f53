"""``python tests/tree_cpu.py COMMAND...``: run COMMAND and print, last on stderr, the CPU seconds (user + system) of
every process of its tree, the orphans included.

``/usr/bin/time`` (and the shell's ``time``) adds a process's waited-for children only: a process whose parent ended
without waiting for it is reparented to init, and its CPU is counted nowhere. The suite has such processes: a forked
``python -m sweeper`` run (``tests/forked_cli.py``) ends before its painter, which then quits on its own. Here this
process is a child subreaper (Linux's ``PR_SET_CHILD_SUBREAPER``): the tree's orphans are reparented to it, and it
reaps each as it ends, as init does (a zombie left until COMMAND's end is a process that ``kill(pid, 0)`` still
finds: a check of whether a lock's holder still lives, or a test waiting for a process to go, would wait on it), and
waits for every one before it reads its children's CPU. Exit status: COMMAND's.

    python tests/tree_cpu.py python -m pytest -n 2 -m "not slow" -p no:cacheprovider
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python tests/tree_cpu.py COMMAND [ARGS...]", file=sys.stderr)
        return 2
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("tree_cpu: this system has no child subreaper (Linux only)", file=sys.stderr)
        return 2
    command = subprocess.Popen(argv)
    code = 0
    while True:  # COMMAND and the orphans reparented here, each reaped as it ends, so that its CPU is counted
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid == command.pid:
            code = os.waitstatus_to_exitcode(status)
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"tree CPU: {r.ru_utime:.1f} s user + {r.ru_stime:.1f} s system = "
        f"{r.ru_utime + r.ru_stime:.1f} CPU-s",
        file=sys.stderr,
    )
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

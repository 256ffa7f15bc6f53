"""A sweep at a glance, built from the MLflow store alone:
leaderboard, plots and the parent's metrics.

The end of every multirun publishes it on the parent run; ``python -m sweeper.report`` rebuilds the
same from the store when that step never ran (a job crashed, the launcher was killed):

    python -m sweeper.report --experiment diabetes          # the latest sweep of the experiment
    python -m sweeper.report --parent RUN_ID [--tracking-uri URI]
"""

from __future__ import annotations

import argparse
import sys

from sweeper import tracking
from sweeper.base.tags import PID, booked
from sweeper.tracking.ui import ui_line
from sweeper.contract.helptext import Parser, describe
from sweeper.insight.publish import (
    close,
    holder_alive,
    latest_parent,
    mark_orphans,
    publish,
    single,
)
from sweeper.tracking.store_errors import guarded


__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m sweeper.report", description=describe(__doc__))
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--experiment", help="report the latest sweep of this experiment (with --latest, or alone)"
    )
    which.add_argument(
        "--parent",
        help="report the sweep with this parent run id (a run id that is no sweep's "
        "parent gets a report of that single run)",
    )
    which.add_argument("--run", help="report this single run")
    ap.add_argument(
        "--latest", action="store_true", help="with --experiment: its latest sweep (the default)"
    )
    ap.add_argument(
        "--tracking-uri", default=tracking.DEFAULT_URI, help=f"default: {tracking.DEFAULT_URI}"
    )
    args = ap.parse_args(argv)
    if args.latest and not args.experiment:
        print(
            "sweeper: error: --latest needs --experiment NAME: expected --experiment NAME --latest",
            file=sys.stderr,
        )
        return 2
    return guarded(args.tracking_uri, lambda: _report(args))


def _report(args: argparse.Namespace) -> int:
    c = tracking.client(args.tracking_uri)
    # an unknown experiment or run: one line from guarded
    if args.experiment:
        parent = latest_parent(c, args.experiment, args.tracking_uri)
    else:
        parent = c.get_run(args.parent or args.run)
    if args.run or "sweep_dir" not in parent.data.tags:
        # its process died (SIGKILL)
        if parent.info.status == "RUNNING" and holder_alive(parent) is False:
            mark_orphans(c, [parent], False)
            print(
                f"run {parent.info.run_id} was RUNNING but its process (pid "
                f"{booked(parent.data.tags, PID)}) is gone: "
                "marked FAILED (orphaned)"
            )
            parent = c.get_run(parent.info.run_id)
        single(c, parent, args.tracking_uri)
        return 0
    print(f"Sweep {parent.info.run_name} (parent run {parent.info.run_id})")
    board, counts = publish(c, parent.info.run_id)
    if parent.info.status == "RUNNING" and holder_alive(parent):
        print(
            f"the sweep is still running (pid {booked(parent.data.tags, PID)}): its parent run "
            "stays RUNNING"
        )
    else:  # its end-of-sweep step never ran, or its runs now support another status (re-closed)
        close(c, c.get_run(parent.info.run_id), counts)
    print(f"browse with: {ui_line(args.tracking_uri, board.address)}")
    return 0


if __name__ == "__main__":
    from sweeper import main_exit

    main_exit(main)

"""The sweep advisor: what a finished sweep says to try next, each
finding with its evidence and a next step.

The end of every multirun prints the findings after the leaderboard and logs them on the parent run
(``advice.md``, and tags ``advice.*`` a program can read); ``python -m sweeper.advise``
rebuilds them from the store alone:

    python -m sweeper.advise --experiment diabetes          # the latest sweep of the experiment
    python -m sweeper.advise --parent RUN_ID [--tracking-uri URI]

Only validation metrics drive the findings: the test split is reported in the
leaderboard, never used to choose. The last line is a command that applies the findings;
with ``resume=true`` it trains only the configurations that have not finished yet.
"""

from __future__ import annotations

import argparse

from sweeper.contract.helptext import Parser, describe
from sweeper.insight.advice.advisor import publish


__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m sweeper.advise", description=describe(__doc__))
    ap.add_argument("--experiment", help="advise on the latest sweep of this experiment")
    ap.add_argument(
        "--parent",
        help="advise on the sweep with this parent run id (of --experiment, if given too)",
    )
    ap.add_argument(
        "--tracking-uri", help="default: the embedded store, mlruns/mlflow.db in the repository"
    )
    ap.add_argument(
        "--log",
        action="store_true",
        help="write advice.md and advice.* tags into the parent run even "
        "when sweeper did not make the sweep (a sweep of sweeper's always gets them)",
    )
    args = ap.parse_args(argv)
    if not (args.experiment or args.parent):
        ap.error("one of --experiment or --parent is required")
    # MLflow: after the arguments, so --help and a usage error stay fast
    # lazy: saves ~24 ms at this module's import (measured)
    from sweeper import (
        tracking,
    )

    # lazy: saves ~22 ms at this module's import (measured: it loads sweeper.tracking too)
    from sweeper.tracking.store_errors import guarded

    uri = args.tracking_uri or tracking.DEFAULT_URI
    return guarded(uri, lambda: _advise(args, uri))


def _advise(args: argparse.Namespace, uri: str) -> int:
    # lazy: saves ~152 ms at this module's import (measured)
    from sweeper import tracking
    from sweeper.insight.leaderboard import build
    from sweeper.insight.publish import children, latest_parent

    c = tracking.client(uri)
    # an unknown experiment or run: one line from guarded
    if args.parent:
        parent = c.get_run(args.parent)
        if (
            args.experiment
            and tracking.named_experiment(c, args.experiment, uri).experiment_id
            != parent.info.experiment_id
        ):
            raise tracking.TrackingError(
                f"--parent={args.parent} is not a run of --experiment={args.experiment}"
            )
    else:
        parent = latest_parent(c, args.experiment, uri)
    runs = children(c, parent)
    print(f"Sweep {parent.info.run_name} (parent run {parent.info.run_id})")
    publish(
        c, parent, runs, [row["run_id"] for row in build(runs).rows], log=True if args.log else None
    )
    return 0


if __name__ == "__main__":
    from sweeper import main_exit

    main_exit(main)

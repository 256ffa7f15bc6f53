"""``python -m sweeper.summary SWEEP_DIR``: the end-of-multirun
summary, rebuilt from the sweep folder.

Use it when Hydra skipped its end-of-multirun callback (a job raised, the launcher was killed):
it prints the table from each job's result.json and closes the parent run(s) in MLflow.
"""

import sys
from pathlib import Path

from sweeper.base.files import SWEEP_FILE
from sweeper.contract.helptext import Parser, describe
from sweeper.job.sweepdir import SweepFileError
from sweeper.sweep import life as sweep


__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m sweeper.summary", description=describe(__doc__))
    parser.add_argument(
        "sweep_dir",
        type=Path,
        help="the multirun folder (hydra.sweep.dir), e.g. multirun/2026-11-29/21-30-00",
    )
    args = parser.parse_args(argv)
    if not (args.sweep_dir / SWEEP_FILE).is_file():
        print(
            f"sweeper: error: sweep_dir={args.sweep_dir} holds no {SWEEP_FILE}: expected a "
            "multirun folder",
            file=sys.stderr,
        )
        return 2

    try:
        return sweep.finish(args.sweep_dir.absolute())
    except SweepFileError as e:
        print(f"sweeper: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    from sweeper import main_exit

    main_exit(main)

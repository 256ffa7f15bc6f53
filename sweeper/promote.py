"""``python -m sweeper.promote --experiment NAME``: freeze the best
finished runs as ``conf/best/*.yaml``.

Runs are ranked by a validation metric — never a test one, since choosing on the test split leaks it
into the choice. Each written file re-runs its run with ``python -m sweeper +best=NAME``
and pins the run's val_/test_ metrics, which ``pytest`` (tests/test_best.py) then guards.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from sweeper.contract.helptext import Parser
from sweeper import tracking
from sweeper.base import stop
from sweeper.base.fmt import cell
from sweeper.base.files import MAX_NAME_BYTES
from sweeper.insight import pinned
from sweeper.insight.promotion import PromoteError, not_allowed, promote


__all__ = ["main"]


def _number(cast: type, option: str, text: str, allowed: str) -> Any:
    try:
        return cast(text)
    except ValueError:
        raise not_allowed(option, text, f"expected {allowed}") from None


def _check_place(name: str | None, out_dir: Path) -> None:
    """Before any store work: a --name that cannot be a file name (NAME_10.yaml)
    and an --out-dir that cannot be written are refused in one line."""
    size = len(f"{name}_10.yaml".encode("utf-8", "surrogateescape")) if name is not None else 0
    if size > MAX_NAME_BYTES:  # its characters are promotion's to check (it becomes +best=NAME)
        raise not_allowed(
            "--name",
            name[:60] + "...",
            f"{size} bytes with its suffix (_10.yaml): expected a name that "
            f"makes a file name of at most {MAX_NAME_BYTES} bytes",
        )
    existing = out_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise not_allowed("--out-dir", out_dir, f"expected a folder: {existing} is not one")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise not_allowed(
            "--out-dir",
            out_dir,
            f"expected a folder this user can write: {existing} is not writable",
        )


def main(argv: list[str] | None = None) -> int:
    parser = Parser(
        prog="python -m sweeper.promote",
        description="Freeze the best finished runs of an experiment as conf/best/NAME.yaml, "
        "ranked by a validation "
        "metric; python -m sweeper +best=NAME re-runs one, python -m pytest tests/test_best.py "
        "checks them all.",
        epilog="example: python -m sweeper.promote --experiment diabetes --top 2",
    )
    parser.add_argument(
        "--experiment",
        required=True,
        help="the MLflow experiment to rank (required; python -m sweeper names it after the data "
        "set, "
        "e.g. diabetes; python -m sweeper.runs lists them)",
    )
    parser.add_argument(
        "--metric",
        help="validation metric to rank by "
        "(default: val_mse for regression, val_accuracy for binary and multiclass)",
    )
    parser.add_argument("--top", default="1", help="how many configurations to promote (default 1)")
    parser.add_argument(
        "--name",
        help="the file name (top 1) or its prefix: NAME_1, NAME_2, ... "
        "(default: the experiment's name)",
    )
    parser.add_argument(
        "--model",
        help="rank the runs of this model only: its short name as sweeper.runs shows it "
        "(mlp, my_nets.TwoLayerNet) or its import path; all: every model together (default: when "
        "the "
        "runs trained several models, the best run's)",
    )
    parser.add_argument(
        "--force", action="store_true", help="overwrite existing files of the same names (re-pin)"
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=pinned.BEST_DIR,
        help="where to write (default: conf/best); a folder F elsewhere is re-run with "
        "hydra.searchpath=[file://<F's parent>] +F=NAME (the command is printed)",
    )
    parser.add_argument(
        "--tracking-uri",
        default=tracking.DEFAULT_URI,
        help=f"the MLflow store, read only unless --register (default: {tracking.DEFAULT_URI})",
    )
    parser.add_argument(
        "--rtol",
        help="relative tolerance of every pinned metric "
        "(default: 1e-6 for float64 runs, 1e-3 for float32; see sweeper/pinned.py)",
    )
    parser.add_argument(
        "--run-id", action="append", default=[], help="consider only these runs (repeatable)"
    )
    parser.add_argument(
        "--latest",
        action="store_true",
        help="consider only the newest finished run: re-pin after an intended change with "
        "python -m sweeper +best=NAME, then --latest --name NAME --force",
    )
    parser.add_argument(
        "--register",
        metavar="NAME",
        help="also register the best run's model in the Model Registry as NAME, with the alias "
        f"{tracking.CHAMPION}: mlflow.pyfunc.load_model('models:/NAME@{tracking.CHAMPION}')",
    )
    args = parser.parse_args(argv)
    try:
        top = _number(int, "--top", args.top, "an integer >= 1")
        rtol = (
            None
            if args.rtol is None
            else _number(float, "--rtol", args.rtol, "a relative tolerance in [0, 1)")
        )
        _check_place(args.name, args.out_dir)
        registered: list[Any] = []
        done = promote(
            args.experiment,
            args.tracking_uri,
            args.metric,
            top,
            args.name,
            args.force,
            args.out_dir,
            rtol,
            args.run_id,
            args.latest,
            before_write=_registrar(args, registered) if args.register else None,
            model=args.model,
        )
    # (a store that is not there or does not answer: tracking.check_readable's one line)
    except (PromoteError, tracking.TrackingError) as e:
        # an error that a Ctrl-C caused on its way through Hydra (its cleanup raised its own)
        stop.raise_signalled(e)
        print(f"sweeper: error: {e}", file=sys.stderr)
        return 2
    # a folder that cannot be written after all (a read-only file system, a full disk)
    except OSError as e:
        print(
            f"sweeper: error: --out-dir={args.out_dir} cannot be written: {e.strerror or e}"
            + (f" ({e.filename})" if e.filename else ""),
            file=sys.stderr,
        )
        return 2
    lower = pinned.direction(done[0].metric) == "lower"
    among = f", {done[0].among}" if done[0].among else ""
    print(
        f"promoted {len(done)} run(s) of experiment '{args.experiment}' by {done[0].metric} "
        f"({'lower' if lower else 'higher'} is better){among}:"
    )
    for d in done:
        print(f"  {_shown(d.path)}  run {d.run_id}  {d.metric}={cell(d.value)}  {d.knobs}")
    own = (
        ""
        if done[0].rerun == [f"+best={done[0].name}"]
        else f" --best-dir {pinned.suite_dir(args.out_dir)}"
    )
    print(f"re-run one: {shlex.join(['python', '-m', 'sweeper', *done[0].rerun])}")
    print(f"check them all: python -m pytest tests/test_best.py{own}  (in sweeper's checkout)")
    if registered:
        print(
            f"registered run {done[0].run_id}'s model as {args.register} version "
            f"{registered[0].version}, alias "
            f"{tracking.CHAMPION}: mlflow.pyfunc.load_model('models:/{args.register}@"
            f"{tracking.CHAMPION}') "
            f"with MLFLOW_TRACKING_URI={args.tracking_uri}"
        )
    return 0


def _registrar(args: argparse.Namespace, registered: list[Any]) -> Any:
    """Register the best run's model (before its pin is written: a
    failed registration writes nothing)."""

    def register(run: Any) -> None:
        try:
            registered.append(
                tracking.register(
                    tracking.client(args.tracking_uri), run.info.run_id, args.register
                )
            )
        # the store refused it, a server went down: one line, no pin
        except tracking.failures() as e:
            raise not_allowed(
                "--register",
                args.register,
                f"registration failed: {type(e).__name__}: {tracking.first_line(e)}",
            ) from None

    return register


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    from sweeper import main_exit

    main_exit(main)

"""``python -m sweeper [-m] key=value ...``: one run, or a Hydra multirun, tracked in MLflow.

``@hydra.main`` must sit in this file: under ``python -m`` Hydra resolves ``../conf`` against this
file's folder, whereas in an importable module it would turn into ``pkg://conf``.
"""

import importlib
import os
import sys

from sweeper.base import stop
from sweeper.base.environment import problem

__all__: list[str] = []

INTERRUPTED = stop.INTERRUPTED  # 130: the shell's code for a process ended by SIGINT (143: SIGTERM)
NOTHING = "sweeper: interrupted before any run started: nothing recorded"

try:
    import hydra
    from omegaconf import DictConfig

    from sweeper.contract.config import (
        ConfigError,
        check_overrides,
    )  # also registers the ${sweeper_root:} resolver
    from sweeper.contract.helptext import COMMANDS
except KeyboardInterrupt as e:  # Ctrl-C right at the start (SIGTERM is handled from cli() on)
    print(NOTHING, file=sys.stderr)
    sys.exit(stop.exit_code(e))


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> float:
    """One job. Returns its primary validation metric (NaN when it has
    none), the objective of search sweepers."""
    # lazy: saves ~244 ms at this module's import (measured)
    from sweeper.contract import hydra_args
    from sweeper.job.task import main as run_main, objective

    hydra_args.TASK_STARTED = True

    return objective(run_main(cfg))


def cli() -> "int | None":
    # SIGTERM as Ctrl-C from here on; both stop training threads too (sweeper.base.stop)
    stop.install()
    args = sys.argv[1:]

    # python -m sweeper report ...: python -m sweeper.report ... (a bare word is no Hydra
    # override, so the word can only mean the command)
    if args and args[0] in COMMANDS:
        return importlib.import_module(f"sweeper.{args[0]}").main(args[1:])
    # ours, built from conf/ and the rules; --hydra-help stays Hydra's
    if "--help" in args or "-h" in args:
        # lazy: saves ~4.1 ms at this module's import (measured)
        from sweeper.contract.helptext import main_help

        sys.stdout.write(main_help([a for a in args if a not in ("--help", "-h")]))
        return
    # Optuna's log lines (colorlog) carry colour codes even into a pipe or a file
    if not sys.stderr.isatty():
        os.environ.setdefault("NO_COLOR", "1")
    # baselines=linear,boosting names two references, not a sweep
    # over them: Hydra reads it as the list it means
    sys.argv[1:] = args = [
        f"{a.partition('=')[0]}=[{a.partition('=')[2]}]"
        if a.lstrip("+").startswith("baselines=") and "," in a and "[" not in a
        else a
        for a in args
    ]
    try:
        bad = problem()
        if bad:
            raise ConfigError(bad)
        # before Hydra: bad input fails in one line (Hydra itself raises no ConfigError)
        check_overrides(args, whole=True)
        # lazy: saves ~148 ms at this module's import (measured)
        from sweeper.contract.model import model_overrides

        # model.<hyperparameter>=...: added to the model's section
        sys.argv[1:] = args = model_overrides(args)

        # lazy: saves ~8.5 ms at this module's import (measured)
        from sweeper.contract.hydra_args import chdir_paths, one_line_errors

        # hydra.job.chdir=true: a relative data.path read from here
        sys.argv[1:] = args = chdir_paths(args)

        one_line_errors(ConfigError)  # what Hydra refuses while composing: one line too
        # lazy: saves ~1.3 ms at this module's import (measured)
        from sweeper.base.output import quiet_unwritable_files

        # a job log on a full disk: one line, not a traceback per line logged
        quiet_unwritable_files()
        # lazy: saves ~36 ms at this module's import (measured)
        from sweeper.tracking import writer

        writer.prestart(args)  # a long multirun's writer imports MLflow while Hydra starts
        main()
    except ConfigError as e:
        print(f"sweeper: error: {e}", file=sys.stderr)
        sys.exit(2)
    # Ctrl-C, SIGTERM (stop.Terminated), a training thread's stop.Stopped
    except KeyboardInterrupt as e:
        sys.exit(_interrupted(args, stop.exit_code(e)))


def _interrupted(args: list[str], code: int = INTERRUPTED) -> int:
    """Ctrl-C or SIGTERM: close what was running in the store, say so in
    one line (no traceback); exit ``code`` (130, or 143 for SIGTERM).

    Nothing new is imported here: Ctrl-C may have cut an import short (mlflow's, say), and importing
    it again would fail. Hydra imports sweeper.sweep.callbacks before it runs anything of ours.
    """
    stop.STOP.set()  # training threads end now
    stop.ignore()  # a second Ctrl-C (or a SIGTERM) must not cut the bookkeeping short
    callbacks = sys.modules.get("sweeper.sweep.callbacks")
    # a store that fails now: callbacks.interrupted's line says so, still without a traceback
    print((callbacks.interrupted(args) if callbacks else None) or NOTHING, file=sys.stderr)
    return code


if __name__ == "__main__":
    from sweeper import main_exit

    main_exit(cli, goes_on="the sweep goes on and records every run in the store")

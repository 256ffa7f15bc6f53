"""Hydra callbacks: the launching process opens and closes every multirun (see ``sweeper.sweep``)."""
from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from sweeper import sweep
from sweeper.config import ConfigError
from sweeper.tracking import TrackingError


class SweepCallback(Callback):
    """Checks all jobs and creates the parent run(s) before the first job; prints the summary after the last.

    Hydra skips ``on_multirun_end`` when a job raised; jobs therefore record their expected outcomes
    instead of raising, and ``python -m sweeper.summary <sweep dir>`` does the same work by hand.
    """

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            sweep.start(config)
        except (ConfigError, TrackingError) as e:
            print(f"sweeper: error: {e}", file=sys.stderr)
            sys.exit(2)
        except Exception as e:  # a bug: Hydra would only warn and launch the jobs without a parent run
            traceback.print_exc()
            print(f"sweeper: error: the sweep could not start: {type(e).__name__}: {e}", file=sys.stderr)
            sys.exit(1)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        code = sweep.finish(Path(config.hydra.sweep.dir).absolute())
        if code:
            sys.exit(code)

"""``python -m sweeper [-m] key=value ...``: one run, or a Hydra multirun, tracked in MLflow.

``@hydra.main`` must sit in this file: under ``python -m`` Hydra resolves ``../conf`` against this
file's folder, whereas in an importable module it would turn into ``pkg://conf``.
"""
import sys

import hydra
from omegaconf import DictConfig

from sweeper.config import ConfigError, check_overrides  # also registers the ${sweeper_root:} resolver


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> float:
    """One job. Returns its primary validation metric (NaN when it has none), the objective of search sweepers."""
    from sweeper.run import main as run_main, objective

    return objective(run_main(cfg))


def cli() -> None:
    try:
        check_overrides(sys.argv[1:])
    except ConfigError as e:
        print(f"sweeper: error: {e}", file=sys.stderr)
        sys.exit(2)
    main()


if __name__ == "__main__":
    cli()

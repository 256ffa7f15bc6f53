"""sweeper: sweep the hyperparameters of from-scratch NumPy/CuPy models with Hydra, track every run in MLflow.

The package is used from its repository (``pip install -e .``): Hydra reads ``conf/`` beside it and the
embedded MLflow store lives in ``mlruns/`` beside it. ``${sweeper_root:}`` in a config is that folder
(the resolver is registered by ``sweeper.config``). Importing the package itself pulls in nothing
heavy, so ``sweeper.backend`` and the benchmarks run where only NumPy (and CuPy) are installed.
"""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONF_DIR = ROOT / "conf"

"""sweeper: sweep the hyperparameters of from-scratch NumPy/CuPy models with Hydra, track every run in MLflow.

The package is used from its repository (``pip install -e .``): Hydra reads ``conf/`` beside it and the
embedded MLflow store lives in ``mlruns/`` beside it. ``${sweeper_root:}`` in a config is that folder.
"""
from pathlib import Path

from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parent.parent
CONF_DIR = ROOT / "conf"

if not OmegaConf.has_resolver("sweeper_root"):
    OmegaConf.register_new_resolver("sweeper_root", lambda: ROOT.as_posix())

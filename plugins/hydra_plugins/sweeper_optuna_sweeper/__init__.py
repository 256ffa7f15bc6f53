"""sweeper's search sweeper for Hydra over Optuna >= 4 (ask-and-tell):
``+sweep=optuna`` (conf/sweep/optuna.yaml)."""

__all__: list[str] = []

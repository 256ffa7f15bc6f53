"""sweeper's batched launcher for Hydra: ``hydra/launcher=batched``
(the default of ``conf/config.yaml``)."""

__all__: list[str] = []

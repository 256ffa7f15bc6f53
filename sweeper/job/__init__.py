"""One job: compute one configuration (``compute``: data → model → train → score, no
MLflow) and record it (``record``: one MLflow run and ``result.json``), with what it
reads from its sweep's folder (``sweepdir``), where it runs (``context``), its files
(``artifacts``), its scores (``metrics``) and the Hydra task (``task``)."""

__all__: list[str] = []

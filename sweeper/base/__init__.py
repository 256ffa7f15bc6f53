"""The bottom layer: a job's files (``files``), a run's tags (``tags``), how numbers print
(``fmt``), processes (``process``) and the array backend, NumPy or CuPy (``backend``).
Nothing here imports a module of ours above it."""

__all__: list[str] = []

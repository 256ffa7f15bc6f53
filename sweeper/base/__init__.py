"""The bottom layer: names every layer shares (``names``), how numbers are printed
(``fmt``), processes (``process``) and the array backend, NumPy or CuPy (``backend``).
Nothing here imports a module of ours above it."""

__all__: list[str] = []

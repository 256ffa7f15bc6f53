"""A sweep: its jobs planned (``plan``), launched in batched groups (``launch``: the batched
launcher's work), its life in the launching process (``life``: start, finish, interrupt),
Hydra's callbacks (``callbacks``) and joblib's warm workers (``joblib_warm``)."""

__all__: list[str] = []

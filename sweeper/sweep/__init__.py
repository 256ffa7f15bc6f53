"""A sweep: its jobs planned (``plan``), launched in batched groups (``launch``: the batched
launcher's work), its life in the launching process (``life``: start, finish, interrupt) and
Hydra's callbacks (``callbacks``)."""

__all__: list[str] = []

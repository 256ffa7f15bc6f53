"""The package list, computed (everything else is in pyproject.toml): every subpackage
of ``sweeper``, the repository's ``models/`` and ``data/`` folders as ``sweeper.models``
and ``sweeper.data``, and every Hydra plugin under ``plugins/hydra_plugins/``.

``hydra_plugins`` itself is listed (a namespace package: it has no ``__init__.py``) with its
folder in pyproject.toml's package-dir, so that an editable install (``pip install -e .``)
puts that folder on the namespace's ``__path__``: Hydra's plugin scan (pkgutil) then lists
every plugin in it, as it does in site-packages after a regular install.
"""

from setuptools import find_packages, setup

setup(
    packages=[
        *find_packages(include=["sweeper", "sweeper.*"]),
        "sweeper.models",
        "sweeper.data",
        "hydra_plugins",
        *(f"hydra_plugins.{p}" for p in find_packages("plugins/hydra_plugins")),
    ]
)

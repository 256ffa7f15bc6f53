"""Tracking: the MLflow store (``store``; its file: ``storefile``), a run's
records (``records``), system metrics (``system``), the tracked run of one job
(``run``), the writer process (``writer``) and the logged model (``pyfunc``).

``from sweeper import tracking`` gives the store's, the experiments', the records' and the system
metrics' functions under one name (``tracking.client``, ``tracking.finish_run``,
``tracking.UNREACHABLE``): each module's ``__all__``, nothing it imports (tests/test_public_api.py);
``run``, ``writer`` and ``pyfunc`` (which imports MLflow) are imported by name where they are used.
"""

from sweeper.tracking import experiments as _experiments
from sweeper.tracking import records as _records
from sweeper.tracking import store as _store
from sweeper.tracking import storefile as _storefile
from sweeper.tracking import system as _system
from sweeper.tracking.experiments import *  # noqa: F401,F403
from sweeper.tracking.records import *  # noqa: F401,F403
from sweeper.tracking.store import *  # noqa: F401,F403
from sweeper.tracking.storefile import *  # noqa: F401,F403
from sweeper.tracking.system import *  # noqa: F401,F403

# the five modules' names; UNREACHABLE (built when first asked) stays out: ``import *`` builds it
__all__ = sorted(
    {
        *_experiments.__all__,
        *_records.__all__,
        *_store.__all__,
        *_storefile.__all__,
        *_system.__all__,
    }
)


def __getattr__(name: str):
    """``UNREACHABLE``, built by the store's module when first asked (it imports
    nothing of MLflow's). Nothing else passes through: the package's names are
    the five modules' ``__all__`` (no ``tracking.os``, no private helper)."""
    if name != "UNREACHABLE":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = _store.UNREACHABLE
    if name in vars(_store):  # complete (every class loaded): kept here too
        globals()[name] = value
    return value

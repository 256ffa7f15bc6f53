"""The stand-in's ``xp``: CuPy's module-level functions, as NumPy's on device arrays,
returning device arrays.

Each name below is one CuPy has; it is backed by NumPy's function of the same name. Three kinds:

- device functions take device arrays (a host ``numpy.ndarray`` argument raises CuPy's
  ``TypeError``);
- creation functions take shapes and scalars (``empty``, ``full``, ``arange``, ...);
- transfers take host data too (``asarray``, ``array``, ``ascontiguousarray``): a host
  array or scalar becomes a device array with one counted host→device copy; ``asnumpy``
  is the way back (a counted copy).

``copyto`` refuses a non-scalar host source and ``take`` has no ``mode`` (both as CuPy's);
``random.RandomState`` draws its own orders (below). A name not here raises
``AttributeError`` naming it; a NumPy function called on device arrays (``np.sum(x)``) runs
the function of the same name here, or raises NumPy's ``TypeError`` when there is none.
"""

from __future__ import annotations

from functools import wraps
from typing import Any, Callable

import numpy as np

from sweeper.base import state
from sweeper.base.strict.array import UFUNCS, DeviceArray, argument, unsupported, wrap
from sweeper.base.strict.ledger import LEDGER

__all__ = ["xp"]

DEVICE = """
sum mean max min amax amin prod std var argmax argmin all any cumsum cumprod diff clip dot vdot
inner outer tensordot einsum concatenate stack vstack hstack column_stack split array_split reshape
ravel transpose swapaxes moveaxis squeeze expand_dims broadcast_to broadcast_arrays atleast_1d
atleast_2d tile repeat flip where sort argsort argpartition take_along_axis isclose allclose
array_equal count_nonzero trace diagonal tril triu cov nan_to_num average median empty_like
zeros_like ones_like full_like copy
""".split()
CREATION = "empty zeros ones full arange linspace eye identity".split()
TRANSFERS = "asarray array ascontiguousarray asfortranarray".split()
METADATA = "shape ndim size result_type isscalar can_cast promote_types dtype finfo iinfo".split()
CONSTANTS = (
    "nan inf pi e newaxis float16 float32 float64 complex64 complex128 int8 int16 int32 int64 "
    "uint8 uint16 "
    "uint32 uint64 bool_ intp"
).split()


def _device(fn: Callable[..., Any]) -> Callable[..., Any]:
    """NumPy's ``fn`` on device arrays: host arrays refused (an ``out`` too), the result
    on the device."""

    @wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        out = kwargs.get("out")
        if out is not None and type(out) is not DeviceArray:
            raise unsupported(out)
        return wrap(fn(*argument(args), **{k: argument(v) for k, v in kwargs.items()}))

    return call


def _metadata(fn: Callable[..., Any]) -> Callable[..., Any]:
    """NumPy's ``fn`` on what an array is (its shape, its dtype), of a device array or any other."""

    @wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*(a._a if type(a) is DeviceArray else a for a in args), **kwargs)

    return call


def _transfer(name: str) -> Callable[..., Any]:
    fn = getattr(np, name)

    @wraps(fn)
    def call(obj: Any, *args: Any, **kwargs: Any) -> Any:
        if type(obj) is DeviceArray:
            return wrap(fn(obj._a, *args, **kwargs))
        if getattr(type(obj), "_device_sparse", False):
            raise unsupported(obj)
        LEDGER.record("h2d", f"xp.{name}(host data)")
        return DeviceArray(np.array(fn(obj, *args, **kwargs), copy=True))

    return call


def copyto(dst: Any, src: Any, casting: str = "same_kind", where: Any = True) -> None:
    """CuPy's: a scalar or a device array into a device array; a host array only when it
    holds one value."""
    if type(dst) is not DeviceArray:
        raise unsupported(dst)
    if isinstance(src, np.ndarray):
        if src.size != 1:
            raise ValueError("non-scalar numpy.ndarray cannot be used for copyto")
        src = src.item()
    np.copyto(dst._a, argument(src), casting=casting, where=argument(where))


def take(a: Any, indices: Any, axis: int | None = None, out: Any = None) -> Any:
    """CuPy's ``take`` (no ``mode``: an index out of range wraps)."""
    if out is not None and type(out) is not DeviceArray:
        raise unsupported(out)
    return wrap(np.take(argument(a), argument(indices), axis=axis, out=argument(out), mode="wrap"))


def asnumpy(a: Any, stream: Any = None, order: str = "C", out: Any = None) -> np.ndarray:
    """``cupy.asnumpy``: a device array's copy on the host (counted); a host array as it is."""
    if type(a) is DeviceArray:
        LEDGER.record("d2h", "cupy.asnumpy")
        return np.array(a._a, order=order, copy=True)
    if getattr(type(a), "_device_sparse", False):
        raise TypeError("cupy.asnumpy does not take a sparse matrix: use its .get()")
    return np.asarray(a, order=order)


class RandomState:
    """``cupy.random.RandomState``: seeded draws on the device. Its orders are not NumPy's: CuPy's
    ``shuffle`` sorts random 32-bit keys (cuRAND's), so the stand-in sorts keys of its own
    generator too — code that needs the CPU's order on the GPU cannot get it from ``xp.random``."""

    def __init__(self, seed: int | None = None) -> None:
        self._rng = np.random.Generator(np.random.Philox(seed))

    def _keys(self, n: int) -> np.ndarray:
        return np.argsort(self._rng.integers(0, 2**32, n, dtype=np.uint32), kind="stable")

    def shuffle(self, a: Any) -> None:
        if type(a) is not DeviceArray:
            raise TypeError("The array must be cupy.ndarray")
        if a.ndim == 0:
            raise TypeError("An array whose ndim is 0 is not supported")
        a._a[:] = a._a[self._keys(len(a))]

    def permutation(self, a: Any) -> Any:
        if isinstance(a, int):
            return DeviceArray(self._keys(a))
        return DeviceArray(argument(a)[self._keys(len(a))])

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"the strict device stand-in does not model cupy.random.RandomState.{name}"
        )


class Namespace:
    """A module-like object: the functions and constants above as attributes; any other
    name raises."""

    def __init__(self, name: str, members: dict[str, Any]) -> None:
        self.__name__ = name
        self.__dict__.update(members)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"the strict device stand-in does not model {self.__name__}.{name}: add it to "
            "sweeper/base/strict/namespace.py if the GPU path needs it"
        )


LINALG = ("lstsq", "solve", "norm", "inv")


def _members() -> dict[str, Any]:
    # ufuncs dispatch
    members: dict[str, Any] = {name: getattr(np, name) for name in UFUNCS if hasattr(np, name)}
    members |= {name: _device(getattr(np, name)) for name in DEVICE + CREATION}
    members |= {name: _transfer(name) for name in TRANSFERS}
    members |= {name: _metadata(getattr(np, name)) for name in METADATA}
    members |= {name: getattr(np, name) for name in CONSTANTS}
    members |= {"copyto": copyto, "take": take, "asnumpy": asnumpy, "ndarray": DeviceArray}
    members["random"] = Namespace("cupy.random", {"RandomState": RandomState})
    members["linalg"] = Namespace(
        "cupy.linalg", {name: _device(getattr(np.linalg, name)) for name in LINALG}
    )
    return members


xp = Namespace("cupy", _members())
# what a NumPy function called on device arrays runs (DeviceArray.__array_function__)
state.process().device_functions.update(
    {
        ("numpy", name): getattr(xp, name)
        for name in [*DEVICE, *CREATION, *METADATA, "copyto", "take"]
    }
)
state.process().device_functions.update(
    {("numpy.linalg", name): getattr(xp.linalg, name) for name in LINALG}
)

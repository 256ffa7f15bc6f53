"""The stand-in's device array: a NumPy array behind the boundary a CuPy array keeps.

Metadata (``shape``, ``dtype``, ``flags``, ``len``) and views are free, as on CuPy. An
operation whose operands are device arrays and scalars (Python's or NumPy's) runs on NumPy
and gives a device array — a reduction or an element too gives a 0-d device array, as CuPy
does, never a host scalar. A host ``numpy.ndarray`` operand (even 0-d), output or
``where`` raises CuPy's ``TypeError: Unsupported type <class 'numpy.ndarray'>``;
``np.asarray(device_array)`` raises CuPy's implicit-conversion error. Reading a value on
the host (``float``, ``int``, ``bool``, ``.item()``, ``.tolist()``, ``repr``) is a counted
sync, ``.get()`` a counted copy (:mod:`.ledger`). A method or ufunc the table does not
name raises (``AttributeError`` or NumPy's ``TypeError``): nothing passes unmodelled.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sweeper.base import state
from sweeper.base.strict.ledger import LEDGER

__all__ = ["DeviceArray", "IMPLICIT", "SCALARS", "UFUNCS", "argument", "unsupported", "wrap"]

IMPLICIT = (
    "Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a "
    "NumPy array "
    "explicitly."
)
SCALARS = (bool, int, float, complex, np.generic)

# NumPy ufuncs CuPy has that the stand-in runs (CuPy has more; one not named here raises
# until it is added).
UFUNCS = frozenset(
    """
add subtract multiply divide true_divide floor_divide negative positive power float_power remainder
mod fmod absolute fabs sign sqrt cbrt square reciprocal exp exp2 expm1 log log2 log10 log1p
logaddexp logaddexp2 tanh sinh cosh arctanh sin cos tan arcsin arccos arctan arctan2 hypot maximum
minimum fmax fmin greater greater_equal less less_equal equal not_equal logical_and logical_or
logical_xor logical_not isfinite isnan isinf signbit copysign floor ceil trunc rint bitwise_and
bitwise_or bitwise_xor invert left_shift right_shift matmul conjugate heaviside clip
""".split()
)
# ufunc.reduce
REDUCING = frozenset(("add", "multiply", "maximum", "minimum", "logical_and", "logical_or"))

# ndarray methods CuPy has that the stand-in runs on the device; "sync" ones read on the
# host (CuPy synchronises).
METHODS = frozenset(
    """
copy astype reshape ravel flatten transpose swapaxes squeeze sum mean max min prod std var argmax
argmin all any cumsum cumprod clip dot take fill repeat round conj view diagonal trace sort argsort
""".split()
)


def unsupported(x: Any) -> TypeError:
    """CuPy's refusal of an operand it cannot put on the device."""
    return TypeError(f"Unsupported type {type(x)}")


def operand(x: Any) -> Any:
    """An operand of a device kernel as NumPy takes it: a device array's buffer, a
    scalar as it is; else CuPy's refusal (a host array, a list, a sparse matrix)."""
    if type(x) is DeviceArray:
        return x._a
    if isinstance(x, SCALARS):
        return x
    raise unsupported(x)


def argument(x: Any) -> Any:
    """An argument of a CuPy function (arrays inside sequences too): a device array's
    buffer; a host array refused; shapes, axes, dtypes, slices and the like as they are."""
    t = type(x)
    if t is DeviceArray:
        return x._a
    if t is list or t is tuple:
        return t(argument(v) for v in x)
    if isinstance(x, np.ndarray) or getattr(t, "_device_sparse", False):
        raise unsupported(x)
    return x


def wrap(r: Any) -> Any:
    """A result on the device: arrays and NumPy scalars become device arrays (0-d for a
    scalar, as CuPy's)."""
    if isinstance(r, np.ndarray):
        return DeviceArray(r)
    if isinstance(r, np.generic):
        return DeviceArray(np.asarray(r))
    if type(r) is tuple or type(r) is list:
        return type(r)(wrap(v) for v in r)
    return r


def _index(key: Any) -> Any:
    """An index: device arrays as they are (a boolean mask makes CuPy count its entries:
    a sync); a host index array or list goes to the device first (CuPy converts it: a
    counted host→device copy)."""
    if type(key) is tuple:
        return tuple(_index(k) for k in key)
    if type(key) is DeviceArray:
        if key.dtype == bool:
            LEDGER.record("sync", "a boolean mask index")
        return key._a
    if isinstance(key, (np.ndarray, list)):
        LEDGER.record("h2d", "a host index array")
        return np.asarray(key)
    return key


class DeviceArray:
    """An array "on the device" (see the module's docstring)."""

    __slots__ = ("_a",)
    _device_sparse = False
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, a: np.ndarray) -> None:
        self._a = a

    # -- metadata:
    # free ------------------------------------------------------------------------------------
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    T = property(lambda self: DeviceArray(self._a.T))

    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self) -> Any:
        if self._a.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (DeviceArray(self._a[i]) for i in range(len(self._a)))

    # -- the host reads:
    # counted -----------------------------------------------------------------------------
    def get(self, stream: Any = None, order: str = "C", out: Any = None) -> np.ndarray:
        """The explicit copy to the host (CuPy's ``.get()``)."""
        LEDGER.record("d2h", ".get()")
        return np.array(self._a, order=order, copy=True)

    def _read(self, what: str) -> np.ndarray:
        LEDGER.record("sync", what)
        return self._a

    def __float__(self) -> float:
        return float(self._read("float()"))

    def __int__(self) -> int:
        return int(self._read("int()"))

    def __index__(self) -> int:
        return self._read("an index (__index__)").__index__()

    def __complex__(self) -> complex:
        return complex(self._read("complex()"))

    def __bool__(self) -> bool:
        return bool(self._read("bool()"))

    def item(self, *args: Any) -> Any:
        return self._read(".item()").item(*args)

    def tolist(self) -> Any:
        return self._read(".tolist()").tolist()

    def __repr__(self) -> str:
        return repr(self._read("repr()"))

    def __str__(self) -> str:
        return str(self._read("str()"))

    def __format__(self, spec: str) -> str:
        return format(self._read("format()"), spec)

    def nonzero(self) -> Any:
        return wrap(self._read(".nonzero() (its count)").nonzero())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if not LEDGER.implicit:
            raise TypeError(IMPLICIT)
        LEDGER.record("sync", "__array__ (allowed)")
        return np.array(self._a, dtype=dtype, copy=True)

    # --
    # indexing
    # ----------------------------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> "DeviceArray":
        return wrap(self._a[_index(key)])

    def __setitem__(self, key: Any, value: Any) -> None:
        # CuPy fills with a scalar, or copies a device array
        if isinstance(value, np.ndarray) and value.ndim:
            raise ValueError("non-scalar numpy.ndarray cannot be used for fill")
        if isinstance(value, np.ndarray):
            value = value.item()
        elif type(value) is not DeviceArray and not isinstance(value, SCALARS):
            raise unsupported(value)
        self._a[_index(key)] = value._a if type(value) is DeviceArray else value

    # -- NumPy's protocols: a device operation, or CuPy's
    # refusal -----------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        name = ufunc.__name__
        if name not in UFUNCS or not (
            method == "__call__" or (method == "reduce" and name in REDUCING)
        ):
            return NotImplemented
        args = [operand(x) for x in inputs]
        outs = kwargs.pop("out", None)
        if outs is not None:
            outs = outs if type(outs) is tuple else (outs,)
            for o in outs:
                if type(o) is not DeviceArray:
                    raise unsupported(o)
            kwargs["out"] = tuple(o._a for o in outs)
        if "where" in kwargs and kwargs["where"] is not True:
            kwargs["where"] = operand(kwargs["where"])
        result = getattr(ufunc, method)(*args, **kwargs)
        if outs is not None:
            return outs[0] if len(outs) == 1 else outs
        return wrap(result)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        # CuPy's ``__array_function__`` runs its own function of the same name
        functions = state.process().device_functions
        impl = functions.get((getattr(func, "__module__", ""), func.__name__))
        if impl is None or any(
            t is not DeviceArray and not issubclass(t, np.ndarray) for t in types
        ):
            return NotImplemented  # NumPy raises: no implementation found for 'numpy.<name>'
        return impl(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name in METHODS:
            method = getattr(self._a, name)
            return lambda *args, **kwargs: wrap(method(*argument(args), **_keywords(kwargs)))
        raise AttributeError(
            f"the strict device stand-in does not model ndarray.{name} (CuPy's cupy.ndarray."
            f"{name}): "
            "add it to sweeper/base/strict/array.py if the GPU path needs it"
        )


def _keywords(kwargs: dict[str, Any]) -> dict[str, Any]:
    out = kwargs.get("out")
    if out is not None and type(out) is not DeviceArray:
        raise unsupported(out)
    return {k: argument(v) for k, v in kwargs.items()}


def _operators() -> None:
    """The arithmetic operators as the ufuncs behind them (so a host operand is refused
    the same way); a sparse operand gets its own turn (its ``__rmatmul__``)."""
    pairs = {
        "add": np.add,
        "sub": np.subtract,
        "mul": np.multiply,
        "truediv": np.true_divide,
        "floordiv": np.floor_divide,
        "mod": np.remainder,
        "pow": np.power,
        "matmul": np.matmul,
        "and": np.bitwise_and,
        "or": np.bitwise_or,
        "xor": np.bitwise_xor,
    }
    for name, uf in pairs.items():

        def op(self: DeviceArray, other: Any, uf: Any = uf) -> Any:
            return (
                NotImplemented if getattr(type(other), "_device_sparse", False) else uf(self, other)
            )

        def rop(self: DeviceArray, other: Any, uf: Any = uf) -> Any:
            return uf(other, self)

        def iop(self: DeviceArray, other: Any, uf: Any = uf) -> Any:
            return uf(self, other, out=(self,))

        setattr(DeviceArray, f"__{name}__", op)
        setattr(DeviceArray, f"__r{name}__", rop)
        setattr(DeviceArray, f"__i{name}__", iop)
    for name, uf in {
        "lt": np.less,
        "le": np.less_equal,
        "gt": np.greater,
        "ge": np.greater_equal,
        "eq": np.equal,
        "ne": np.not_equal,
    }.items():
        setattr(DeviceArray, f"__{name}__", lambda self, other, uf=uf: uf(self, other))
    for name, uf in {
        "neg": np.negative,
        "pos": np.positive,
        "abs": np.absolute,
        "invert": np.invert,
    }.items():
        setattr(DeviceArray, f"__{name}__", lambda self, uf=uf: uf(self))


_operators()

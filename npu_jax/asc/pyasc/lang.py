"""pyasc's language helpers, on the emulator: ``ConstExpr``, ``range``, ``static_range``, ``ceildiv``,
``property`` and its constants, ``PipeID``, ``CubeFormat``, ``ShapeInfo`` / ``array``, ``ascend_is_aic``
/ ``ascend_is_aiv``, and the integers of a tiling struct (which have ``.ceildiv``).

pyasc compiles a kernel's Python (its loops become the device's loops); here the kernel's Python runs,
so these are plain Python: ``asc.range`` and ``asc.static_range`` both unroll, a ``ConstExpr`` is a
value, and ``asc.property(asc.TOTAL_L1_SIZE)`` reads the launch's chip.
"""

from __future__ import annotations

import builtins
import dataclasses
import enum
import numbers
import typing

from npu_jax.asc import runtime
from npu_jax.asc.pyasc import state as pstate
from npu_jax.asc.runtime import config
from npu_jax.asc.types import DType, dtype_of

T = typing.TypeVar("T")


class ConstExpr(typing.Generic[T]):
    """``asc.ConstExpr[int]`` (or bare ``asc.ConstExpr``): a parameter annotation that makes the
    argument a compile-time constant. Every non-array argument is static on the emulator already; the
    annotation is honoured by checking the value's type (``ConstExpr[int]`` takes an integer)."""

    def __init__(self, value):
        self.value = value.value if isinstance(value, ConstExpr) else value

    @staticmethod
    def unwrap(obj):
        """``obj``'s value if it is a ConstExpr, else ``obj``."""
        return obj.value if isinstance(obj, ConstExpr) else obj

    def __repr__(self) -> str:
        return f"asc.ConstExpr({self.value!r})"


def is_constexpr(annotation) -> bool:
    """``annotation`` is ``ConstExpr`` or ``ConstExpr[T]``."""
    origin = typing.get_origin(annotation) or annotation
    return isinstance(origin, type) and issubclass(origin, ConstExpr)


def check_constexpr(name: str, annotation, value) -> None:
    """A ``ConstExpr[T]`` argument of type T (int: an integer, float: a real, bool: a bool)."""
    args = typing.get_args(annotation)
    want = args[0] if args else None
    ok = {
        int: lambda v: isinstance(v, numbers.Integral),
        float: lambda v: isinstance(v, numbers.Real),
        bool: lambda v: isinstance(v, (bool, numbers.Integral)),
    }.get(want)
    if ok is not None and not ok(value):
        raise TypeError(f"argument {name!r} is a ConstExpr[{want.__name__}], got {value!r}.")


def range(*args):  # noqa: A001 (pyasc's name)
    """``asc.range(stop)``, ``(start, stop)``, ``(start, stop, step)``: the device's loop in pyasc; the
    emulator runs the kernel's Python, so the loop unrolls (its index is a Python int)."""
    return _range("range", args)


def static_range(*args):
    """``asc.static_range(...)``: a loop unrolled at compile time (as every Python loop is here)."""
    return _range("static_range", args)


def _range(name: str, args):
    if not 1 <= len(args) <= 3 or not all(isinstance(a, numbers.Integral) for a in args):
        raise TypeError(
            f"asc.{name} takes 1 to 3 ints (stop | start, stop | start, stop, step), got {args!r}."
        )
    return builtins.range(*(int(a) for a in args))


def ceildiv(x: int, y: int) -> int:
    """``asc.ceildiv(x, y)``: ``(x + y - 1) // y``."""
    return -(-x // y)


class Int(int):
    """An int field of a tiling struct, read in a kernel: an int with pyasc's ``.ceildiv(y)``."""

    def ceildiv(self, other) -> Int:
        return Int(-(-int(self) // int(other)))


@dataclasses.dataclass(frozen=True)
class Property:
    """An Ascend C constant of the chip (``asc.property(asc.TOTAL_L1_SIZE)``)."""

    name: str
    dtype: DType


DEFAULT_C0_SIZE = Property("DEFAULT_C0_SIZE", dtype_of("int32"))  # bytes of a C0 block (32)
ONE_BLK_SIZE = Property("ONE_BLK_SIZE", dtype_of("int16"))  # bytes of a UB block (32)
TOTAL_L1_SIZE = Property("TOTAL_L1_SIZE", dtype_of("int32"))
TOTAL_L0C_SIZE = Property("TOTAL_L0C_SIZE", dtype_of("int32"))


def property(prop: Property) -> int:  # noqa: A001 (pyasc's name)
    """``asc.property(asc.X)``: the constant's value on the launch's chip (outside a launch: the chip of
    ``config.set_platform``): DEFAULT_C0_SIZE and ONE_BLK_SIZE the UB block (32 B), TOTAL_L1_SIZE and
    TOTAL_L0C_SIZE the L1's and the L0C's bytes."""
    if not isinstance(prop, Property):
        raise TypeError(f"asc.property takes an asc constant (asc.TOTAL_L1_SIZE ...), got {prop!r}.")
    hw = _hw()
    values = {
        "DEFAULT_C0_SIZE": hw.alignment("UB"),
        "ONE_BLK_SIZE": hw.alignment("UB"),
        "TOTAL_L1_SIZE": hw.l1_bytes,
        "TOTAL_L0C_SIZE": hw.l0c_bytes,
    }
    return Int(values[prop.name])


def _hw():
    try:
        return runtime.current().hw
    except runtime.AscError:
        return config.hardware()


class PipeID(str, enum.Enum):
    """``PipeID``: the pipes of ``asc.pipe_barrier`` (``asc.PipeID.PIPE_ALL``)."""

    PIPE_S = "S"
    PIPE_V = "V"
    PIPE_M = "M"
    PIPE_MTE1 = "MTE1"
    PIPE_MTE2 = "MTE2"
    PIPE_MTE3 = "MTE3"
    PIPE_ALL = "ALL"
    PIPE_MTE4 = "MTE4"  # not on the emulated cores: pipe_barrier names the pipes it has
    PIPE_MTE5 = "MTE5"
    PIPE_V2 = "V2"
    PIPE_FIX = "FIX"


class CubeFormat(enum.IntEnum):
    """``CubeFormat`` of a Matmul operand: ND (row-major) or NZ (fractals)."""

    ND = 0
    NZ = 1


class DataFormat(enum.IntEnum):
    """``DataFormat`` of a ShapeInfo."""

    ND = 0
    NZ = 1
    NCHW = 2
    NC1HWC0 = 3
    NHWC = 4


class LayoutMode(enum.IntEnum):
    """``LayoutMode`` of a MatmulType (NONE: a plain matrix)."""

    NONE = 0
    NORMAL = 1
    BSNGD = 2
    SBNGD = 3
    BNGS1S2 = 4


class Array(list):
    """``asc.array(dtype, ...)``: a small array of scalars (a list with a dtype)."""

    def __init__(self, dtype, values):
        super().__init__(values)
        self.dtype = dtype_of(dtype)


def array(dtype, length_or_values, fill_value=None) -> Array:
    """``asc.array(dtype, length[, fill_value])`` or ``asc.array(dtype, values)``."""
    if isinstance(length_or_values, numbers.Integral):
        return Array(dtype, [0 if fill_value is None else fill_value] * int(length_or_values))
    if fill_value is not None:
        raise TypeError("asc.array(dtype, values) takes no fill_value.")
    return Array(dtype, list(length_or_values))


class ShapeInfo:
    """``ShapeInfo(shape, original_shape=None, data_format=DataFormat.ND)``: the logical shape a
    LocalTensor carries (``t.set_shape_info(info)``) for the high-level APIs (softmax's rows)."""

    def __init__(self, shape=None, original_shape=None, data_format=None):
        self.dims = () if shape is None else tuple(int(d) for d in shape)
        self.original_dims = self.dims if original_shape is None else tuple(int(d) for d in original_shape)
        self.data_format = DataFormat.ND if data_format is None else data_format

    def shape(self, dim: int) -> int:
        return self.dims[dim]

    def __getitem__(self, dim: int) -> int:  # the shape's dims, as a tuple's
        return self.dims[dim]

    def __len__(self) -> int:
        return len(self.dims)

    def original_shape(self, dim: int) -> int:
        return self.original_dims[dim]

    def __repr__(self) -> str:
        return f"asc.ShapeInfo({self.dims}, {self.data_format.name})"


def get_shape_size(shape_info: ShapeInfo) -> int:
    """The elements of a ShapeInfo's shape."""
    n = 1
    for d in shape_info.dims:
        n *= d
    return n


def ascend_is_aic() -> bool:
    """``ASCEND_IS_AIC``: the kernel runs on the cube side (an AIC_ONLY kernel: ``matmul_cube_only``).
    Static per kernel type: a branch on it is a Python ``if``."""
    return pstate.state().side == pstate.AIC


def ascend_is_aiv() -> bool:
    """``ASCEND_IS_AIV``: the kernel's code runs on the vector side (AIV_ONLY, and the vector side of
    a MIX kernel, whose Cube work the Matmul asks for)."""
    return pstate.state().side != pstate.AIC

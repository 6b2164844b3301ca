"""Tensors as the vendor's kernels see them: GM addresses, ``GlobalTensor`` and ``LocalTensor``.

A GM argument is flat memory, as the vendor's ``GM_ADDR`` pointer is: ``x + off`` offsets it by
``off`` elements (a traced offset is fine: ``get_block_idx() * block_length``). A ``LocalTensor`` is
a buffer of a queue, a ``TBuf`` or a static allocation: one stage of an allocation of the emulated
core, ``length`` elements from ``offset``. Views (``t[off:]``) share the underlying buffer.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from npu_jax.asc import runtime
from npu_jax.asc.runtime import AscError
from npu_jax.asc.types import CacheMode, DType, dtype_of
from npu_jax.core.isa import lanes


@dataclasses.dataclass(frozen=True)
class GlobalAddress:
    """A pointer into one GM argument: its name, an element offset (int or traced) and its dtype."""

    name: str
    offset: object
    dtype: DType
    size: int  # elements of the argument

    def __add__(self, off) -> GlobalAddress:
        _check_offset(off, "GlobalAddress + offset")
        return dataclasses.replace(self, offset=self.offset + off)

    __radd__ = __add__

    def __repr__(self) -> str:
        return f"GlobalAddress({self.name!r} + {self.offset}, {self.dtype})"


def _check_offset(off, what: str) -> None:
    if isinstance(off, bool) or not (hasattr(off, "__index__") or hasattr(off, "dtype")):
        raise TypeError(f"{what}: an offset is an int number of elements, got {off!r}.")


class GlobalTensor:
    """``GlobalTensor<T>``: a typed view of GM memory, given by :meth:`set_global_buffer`.

    Example:
        >>> x_gm = asc.GlobalTensor()                                        # doctest: +SKIP
        >>> x_gm.set_global_buffer(x + asc.get_block_idx() * 2048, 2048)     # doctest: +SKIP
        >>> asc.data_copy(x_local, x_gm[i * 128:], 128)                      # doctest: +SKIP
    """

    def __init__(self, dtype=None):
        self.dtype = None if dtype is None else dtype_of(dtype)
        self.addr: GlobalAddress | None = None
        self.length: int | None = None
        self.where = runtime.where()

    def set_global_buffer(self, addr: GlobalAddress, length: int | None = None) -> GlobalTensor:
        """``SetGlobalBuffer(ptr + offset[, length])``."""
        if not isinstance(addr, GlobalAddress):
            raise TypeError(
                f"set_global_buffer takes a GM argument of the kernel (asc.GlobalAddress, e.g. x + offset), "
                f"got {type(addr).__name__}."
            )
        if length is not None and (isinstance(length, bool) or not isinstance(length, int) or length < 0):
            raise ValueError(f"set_global_buffer: length is a count of elements >= 0, got {length!r}.")
        self.addr = addr
        self.dtype = self.dtype or addr.dtype
        self.length = length
        return self

    def set_l2_cache_hint(self, mode) -> None:
        """``SetL2CacheHint(mode)``: ``asc.CacheMode.CACHE_MODE_DISABLE`` reads this GM argument past the
        chip's L2 (for data read once: it then takes no room there); the model applies the hint to every
        access of the argument, through any GlobalTensor. Call after ``set_global_buffer``."""
        if not isinstance(mode, CacheMode):
            raise TypeError(
                f"set_l2_cache_hint takes an asc.CacheMode (e.g. CACHE_MODE_DISABLE), got {mode!r}."
            )
        if self.addr is None:
            raise AscError(
                f"set_l2_cache_hint at {runtime.where()}: the GlobalTensor has no memory yet; call "
                "set_global_buffer first."
            )
        use = runtime.current().gm_use.setdefault(self.addr.name, runtime.GmUse())
        use.l2_bypass = use.l2_bypass or mode == CacheMode.CACHE_MODE_DISABLE

    def view(self, off) -> GlobalTensor:
        _check_offset(off, "GlobalTensor[offset:]")
        g = GlobalTensor.__new__(GlobalTensor)
        g.dtype, g.where = self.dtype, self.where
        g.addr = None if self.addr is None else self.addr + off
        g.length = None if self.length is None else self.length - off if isinstance(off, int) else self.length
        return g

    def __getitem__(self, key) -> GlobalTensor:
        if isinstance(key, slice) and key.stop is None and key.step is None:
            return self.view(0 if key.start is None else key.start)
        if not isinstance(key, (slice, bool)) and (isinstance(key, int) or hasattr(key, "dtype")):
            return self.view(key)  # pyasc's gm[i]: a view at element i, as gm[i:]
        raise TypeError("a GlobalTensor view is gm[offset:] (an element offset, open-ended) or gm[offset].")

    def get_size(self) -> int | None:
        return self.length

    def set_shape_info(self, shape_info) -> None:
        """``SetShapeInfo(info)``: the logical shape the high-level APIs read (``get_shape_info``)."""
        self.shape_info = shape_info

    def get_shape_info(self):
        """The ShapeInfo set by ``set_shape_info`` (None before)."""
        return getattr(self, "shape_info", None)

    def __repr__(self) -> str:
        return f"GlobalTensor({self.addr!r}, length={self.length})"


class Token:
    """The state of one queue buffer as the vendor's debug build tracks it: FREE, OCCUPIED (allocated),
    ENQUE, DEQUE; shared by a tensor and its views."""

    def __init__(self, queue, where: str):
        self.queue = queue
        self.state = "OCCUPIED"
        self.where = where


_CONSTRUCTOR: list = [None]  # pyasc's LocalTensor(dtype, pos, addr, tile_size) (npu_jax.asc.pyasc.auto)


def register_constructor(fn) -> None:
    """Set the function behind pyasc's form ``LocalTensor(dtype, pos, addr, tile_size)`` (a static tensor
    at a byte address; the buffer code builds on this module, so it registers itself)."""
    _CONSTRUCTOR[0] = fn


class _LocalTensorType(type):
    """``LocalTensor(...)`` with a dtype first (pyasc's static tensor) builds one through the
    registered constructor; the fields' form (a buffer request first) is the dataclass's own."""

    def __call__(cls, *args, **kwargs):
        first = args[0] if args else kwargs.get("dtype")
        if cls is LocalTensor and "request" not in kwargs and not isinstance(first, runtime.BufferRequest):
            if _CONSTRUCTOR[0] is None:
                raise TypeError("LocalTensor(dtype, pos, addr, tile_size) needs npu_jax.asc imported.")
            return _CONSTRUCTOR[0](*args, **kwargs)
        return super().__call__(*args, **kwargs)


@dataclasses.dataclass(frozen=True)
class LocalTensor(metaclass=_LocalTensorType):
    """``LocalTensor<T>``: ``length`` elements of ``dtype`` from ``offset`` in one buffer (a stage of an
    allocation of the emulated core). ``token`` tracks a queue buffer's state (None otherwise)."""

    request: object  # runtime.BufferRequest
    slot: object  # the stage: int or traced
    offset: object  # elements from the stage's start: int or traced
    length: int
    dtype: DType
    token: Token | None = None

    @property
    def position(self):
        return self.request.position

    @property
    def buffer(self) -> str:
        return self.request.buffer

    def __getitem__(self, key) -> LocalTensor:
        if isinstance(key, slice) and key.stop is None and key.step is None:
            off = 0 if key.start is None else key.start
            _check_offset(off, "LocalTensor[offset:]")
            if isinstance(off, int) and not 0 <= off <= self.length:
                raise IndexError(
                    f"LocalTensor[{off}:] of a {self.length}-element tensor: the offset must lie in 0..{self.length}."
                )
            length = self.length - off if isinstance(off, int) else self.length
            return dataclasses.replace(self, offset=self.offset + off, length=length)
        raise TypeError("a LocalTensor view is t[offset:] (an element offset, open-ended).")

    def get_size(self) -> int:
        """Elements of the tensor (``GetSize()``)."""
        return self.length

    def set_shape_info(self, shape_info) -> None:
        """``SetShapeInfo(info)``: the logical shape the high-level APIs read (``get_shape_info``); kept
        by this tensor object (not by its views)."""
        object.__setattr__(self, "shape_info", shape_info)

    def get_shape_info(self):
        """The ShapeInfo set by ``set_shape_info`` (None before)."""
        return getattr(self, "shape_info", None)

    def _element(self, index, call: str):
        """Element ``index`` as a one-lane operand of the core (None in the plan pass)."""
        run = runtime.current()
        if run.on_operand is not None:
            run.on_operand(self, "S")
        if self.buffer != "UB":
            raise AscError(
                f"{call} at {runtime.where()}: reads and writes UB tensors (VECIN / VECCALC / VECOUT); this one is in {self.buffer}."
            )
        if isinstance(index, bool) or not (isinstance(index, int) or hasattr(index, "dtype")):
            raise TypeError(f"{call}: index is an int number of elements, got {index!r}.")
        if isinstance(index, int) and not 0 <= index < self.length:
            raise AscError(
                f"{call} at {runtime.where()}: index {index} is outside the tensor's {self.length} elements."
            )
        if run.planning:
            return None
        alloc = run.allocs[self.request.index]
        one = lanes.Pattern(np.zeros((1, 1), np.int64), np.ones((1, 1), bool))
        dtype = None if alloc.dtype == self.dtype.fmt else self.dtype.fmt
        return lanes.Lanes(alloc, self.slot, (self.offset + index,), pattern=one, dtype=dtype)

    def get_value(self, index):
        """``GetValue(index)``: one element, read through the Scalar pipe (S). After a vector write of it
        the vendor needs ``set_flag``/``wait_flag(HardEvent.V_S)`` first (racecheck says so otherwise).
        The value is traced: use it as a scalar argument (``asc.duplicate(t, v, n)``), not in an ``if``."""
        op = self._element(index, "get_value")
        run = runtime.current()
        run.reads_data = True
        if op is None:
            return 0.0 if self.dtype.fmt in ("fp16", "bf16", "fp32") else 0
        run.core, value = run.core.get_value(op)
        return value

    def set_value(self, index, value) -> None:
        """``SetValue(index, value)``: one element written through the Scalar pipe (S), converted to the
        tensor's type. Before the vector unit reads it the vendor needs ``S_V`` flags (a
        ``pipe_barrier(PIPE_V)`` and ``set_flag``/``wait_flag(HardEvent.S_V)``)."""
        op = self._element(index, "set_value")
        if op is not None:
            run = runtime.current()
            run.core = run.core.set_value(op, value)

    def get_length(self) -> int:
        """Bytes of the tensor (``GetLength()``)."""
        return self.length * self.dtype.itemsize

    def reinterpret_cast(self, dtype) -> LocalTensor:
        """``ReinterpretCast<U>()``: the same bytes read as ``dtype`` (a buffer used as two types is stored
        as bytes, so each use sees the other's bits). Offset and length convert by the two types' sizes."""
        dtype = dtype_of(dtype)
        isz, nsz = self.dtype.itemsize, dtype.itemsize
        if self.request.shape is not None:
            raise NotImplementedError(
                f"asc: reinterpret_cast of a Cube tile ({self.position.name}) is not supported; see docs/kernels.md."
            )
        if isinstance(self.offset, int) and (self.offset * isz) % nsz:
            raise AscError(
                f"reinterpret_cast at {runtime.where()}: the view starts {self.offset * isz} B in, not a whole number of "
                f"{dtype} ({nsz} B)."
            )
        runtime.use_dtype(self.request, dtype)
        return dataclasses.replace(
            self, offset=self.offset * isz // nsz, length=self.length * isz // nsz, dtype=dtype
        )

    def __repr__(self) -> str:
        return (
            f"LocalTensor({self.position.name}, {self.dtype}, {self.length} elements at +{self.offset}, "
            f"buffer {self.slot})"
        )


def check_live(t: LocalTensor, call: str, role: str) -> None:
    """A tensor freed by FreeTensor is not used again (its buffer may already hold the next tile)."""
    if t.token is not None and t.token.state == "FREE":
        raise AscError(
            f"{call} at {runtime.where()}: the {role} (allocated at {t.token.where}) was freed by FreeTensor; "
            f"a freed buffer may already hold the next tile. Use it before free_tensor, or allocate anew."
        )

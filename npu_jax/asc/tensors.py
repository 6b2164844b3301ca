"""Tensors as the vendor's kernels see them: GM addresses, ``GlobalTensor`` and ``LocalTensor``.

A GM argument is flat memory, as the vendor's ``GM_ADDR`` pointer is: ``x + off`` offsets it by
``off`` elements (a traced offset is fine: ``get_block_idx() * block_length``). A ``LocalTensor`` is
a buffer of a queue, a ``TBuf`` or a static allocation: one stage of an allocation of the emulated
core, ``length`` elements from ``offset``. Views (``t[off:]``) share the underlying buffer.
"""

from __future__ import annotations

import dataclasses

from npu_jax.asc import runtime
from npu_jax.asc.runtime import AscError
from npu_jax.asc.types import CacheMode, DType, dtype_of


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
        raise TypeError("a GlobalTensor view is gm[offset:] (an element offset, open-ended).")

    def get_size(self) -> int | None:
        return self.length

    def __repr__(self) -> str:
        return f"GlobalTensor({self.addr!r}, length={self.length})"


class Token:
    """The state of one queue buffer as the vendor's debug build tracks it: FREE, OCCUPIED (allocated),
    ENQUE, DEQUE; shared by a tensor and its views."""

    def __init__(self, queue, where: str):
        self.queue = queue
        self.state = "OCCUPIED"
        self.where = where


@dataclasses.dataclass(frozen=True)
class LocalTensor:
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

    def get_length(self) -> int:
        """Bytes of the tensor (``GetLength()``)."""
        return self.length * self.dtype.itemsize

    def reinterpret_cast(self, dtype):
        raise NotImplementedError(
            "asc: LocalTensor.reinterpret_cast is not supported (a buffer keeps the dtype of its first "
            "use); see docs/kernels.md."
        )

    def __repr__(self) -> str:
        return (
            f"LocalTensor({self.position.name}, {self.dtype}, {self.length} elements at +{self.offset}, "
            f"buffer {self.slot})"
        )

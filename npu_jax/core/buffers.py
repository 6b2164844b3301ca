"""On-chip allocations: a static allocator per buffer, checked at trace time.

An :class:`Alloc` is a named typed array living in one buffer (L1, L0A, L0B, L0C, UB) at a fixed
byte offset, optionally with a leading stage axis for double buffering. The :class:`Plan` hands
out offsets, enforcing capacity and alignment with errors that say how to fix the tiling.
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np

from npu_jax.errors import AlignmentError, CapacityError
from npu_jax.hw.config import BUFFERS, FRACTAL_ROWS, HardwareConfig
from npu_jax.hw.formats import FORMAT_BYTES, itemsize

# The formats the emulator stores, as jnp dtypes (their sizes are declared in hw/formats.py).
DTYPES = {
    "fp16": jnp.float16,
    "bf16": jnp.bfloat16,
    "fp32": jnp.float32,
    "int32": jnp.int32,
    "int8": jnp.int8,
    "int16": jnp.int16,
    "uint8": jnp.uint8,
    "uint16": jnp.uint16,
    "uint32": jnp.uint32,
}
assert all(jnp.dtype(d).itemsize == FORMAT_BYTES[f] for f, d in DTYPES.items())
# Layout tags. In L1 and UB the stored array *is* the layout: ND (rows, cols); NZ (C1, rows, C0);
# NC1HWC0 feature-map tiles (C1, H, W, C0). In L0A/L0B/L0C the tags ZZ / ZN / NZ name the
# hardware's fractal arrangement, but the emulator stores the logical (M, K) / (K, N) / (M, N)
# matrix: the arrangement inside L0 changes no value and no cost beyond "whole fractals", and
# keeping the Cube's operands logical lets XLA run each Mmad as one plain dot (docs/design.md).
# ``formats.fractal_view`` shows any L0 tile in its hardware arrangement.
FORMATS = ("ND", "NZ", "ZZ", "ZN", "NC1HWC0")


@dataclasses.dataclass(frozen=True)
class Alloc:
    """A static allocation: ``stages`` copies of a ``shape`` array of ``dtype`` in ``buffer``."""

    name: str
    buffer: str
    shape: tuple[int, ...]
    dtype: str
    stages: int
    offset: int  # bytes from the buffer's start
    stage_bytes: int  # bytes of one stage, rounded up to the buffer's alignment
    fmt: str = "ND"

    @property
    def nbytes(self) -> int:
        return self.stages * self.stage_bytes

    @property
    def jdtype(self):
        return DTYPES[self.dtype]

    def __getitem__(self, stage) -> Ref:
        return Ref(self, stage)

    def at(self, stage=0, offset: tuple | None = None) -> Ref:
        return Ref(self, stage, offset)

    def address(self, stage=0):
        """The byte address of stage ``stage`` (an int, or traced) in its buffer."""
        return self.offset + stage * self.stage_bytes

    def describe(self) -> str:
        st = f", {self.stages} stages" if self.stages > 1 else ""
        return f"{self.name!r} {self.shape} {self.dtype}{st} = {self.nbytes} B at +{self.offset}"


@dataclasses.dataclass(frozen=True)
class Ref:
    """One stage of an allocation (the stage may be traced), optionally a sub-block at ``offset``."""

    alloc: Alloc
    stage: object = 0
    offset: tuple | None = None

    @property
    def buffer(self) -> str:
        return self.alloc.buffer

    @property
    def elem(self) -> str:
        """The format the operand's elements are read and written as: the allocation's, unless a
        view reinterprets a byte allocation (``isa.data.View.dtype``)."""
        return self.alloc.dtype


class Plan:
    """Static allocator for one kernel: offsets per buffer, capacity and alignment checked.

    Example:
        >>> from npu_jax.hw import presets
        >>> plan = Plan(presets.ascend910b())
        >>> a = plan.alloc("L0A", "a", (8, 4, 16, 16), "fp16", stages=2, fmt="ZZ")
        >>> a.nbytes
        32768
    """

    def __init__(self, hw: HardwareConfig, *, capacity: bool = True):
        """``capacity=False``: shapes only, no capacity check -- the container of a bound (a
        kernel sized for the largest of a batch of tilings, each of which fits on its own)."""
        self.hw = hw
        self.capacity = capacity
        self._top = {b: 0 for b in BUFFERS}
        self.allocs: list[Alloc] = []
        self._names: set[str] = set()

    def free(self, buffer: str) -> int:
        return self.hw.buffer_bytes(buffer) - self._top[buffer]

    def alloc(
        self,
        buffer: str,
        name: str,
        shape,
        dtype: str = "fp16",
        *,
        stages: int = 1,
        fmt: str = "ND",
        offset: int | None = None,
    ) -> Alloc:
        if buffer not in BUFFERS:
            raise ValueError(f"buffer must be one of {BUFFERS}, got {buffer!r}.")
        if dtype not in DTYPES:
            raise TypeError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}.")
        if fmt not in FORMATS:
            raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}.")
        if name in self._names:
            raise ValueError(f"an allocation named {name!r} already exists; names must be unique.")
        shape = tuple(map(int, shape))
        if not shape or min(shape) <= 0:
            raise CapacityError(
                f"allocation {name!r} in {buffer} needs a shape of positive sizes, got {shape}."
            )
        if not isinstance(stages, int) or stages < 1:
            raise ValueError(f"stages must be an int >= 1, got {stages!r}.")
        align = self.hw.alignment(buffer)
        raw = math.prod(shape) * itemsize(dtype)
        if buffer in ("L0A", "L0B", "L0C"):
            _check_fractal_alloc(self.hw, buffer, name, shape, dtype, fmt)
        stage_bytes = -(-raw // align) * align
        if offset is None:
            offset = self._top[buffer]
        elif offset % align:
            raise AlignmentError(
                f"{buffer} allocations start on {align}-B boundaries; {name!r} asked for offset "
                f"{offset} B ({offset % align} B off). Use offset={offset - offset % align} or "
                f"{offset - offset % align + align}, or leave offset=None."
            )
        elif offset < self._top[buffer]:
            raise AlignmentError(
                f"{buffer} offset {offset} B for {name!r} overlaps earlier allocations ending at "
                f"{self._top[buffer]} B; use offset >= {self._top[buffer]} or offset=None."
            )
        need = stages * stage_bytes
        cap = self.hw.buffer_bytes(buffer)
        if self.capacity and offset + need > cap:
            there = "; ".join(a.describe() for a in self.allocs if a.buffer == buffer) or "none"
            hint = " or set stages=1" if stages > 1 else ""
            raise CapacityError(
                f"{buffer} holds {cap} B but {name!r} {shape} {dtype} x {stages} stage(s) needs "
                f"{need} B ({stages} x {stage_bytes} B) with {cap - offset} B free at +{offset} "
                f"(already there: {there}). Lower the tile size{hint}."
            )
        a = Alloc(name, buffer, shape, dtype, stages, offset, stage_bytes, fmt)
        self._top[buffer] = offset + need
        self.allocs.append(a)
        self._names.add(name)
        return a

    def used(self) -> dict[str, int]:
        return dict(self._top)


# each L0 buffer's fractal format, and the shapes it holds (formatted only for an error)
_FRACTAL = {
    "L0A": ("ZZ", "(M, K) with M % {f} == 0 and K % K0 == 0"),
    "L0B": ("ZN", "(K, N) with K % K0 == 0 and N % {f} == 0"),
    "L0C": ("NZ", "(M, N) fp32 (int32 from int8 operands) with M % {f} == 0 and N % {f} == 0"),
}


def _check_fractal_alloc(hw, buffer, name, shape, dtype, fmt):
    """L0 tiles are whole fractals (FRACTAL_ROWS x K0 elements; FRACTAL_ROWS x FRACTAL_ROWS fp32 in
    L0C): (M, K) for L0A with M % FRACTAL_ROWS and K % K0 == 0, (K, N) for L0B, (M, N) fp32 (or int32,
    the int8 path's accumulator) for L0C."""
    k0, f = hw.k0(itemsize(dtype)), FRACTAL_ROWS
    if buffer == "L0A":
        ok = len(shape) == 2 and shape[0] % f == 0 and shape[1] % k0 == 0
    elif buffer == "L0B":
        ok = len(shape) == 2 and shape[0] % k0 == 0 and shape[1] % f == 0
    else:
        ok = len(shape) == 2 and shape[0] % f == 0 and shape[1] % f == 0 and dtype in ("fp32", "int32")
    want = _FRACTAL[buffer]
    if fmt != want[0] or not ok:
        want = (want[0], want[1].format(f=f))
        raise AlignmentError(
            f"{buffer} holds whole fractals: allocation {name!r} must be fmt={want[0]!r} of shape "
            f"{want[1]} (K0={k0} for {dtype}); got fmt={fmt!r} shape={shape} {dtype}. Round the "
            f"tile up to whole fractals."
        )


def poison(alloc: Alloc) -> jnp.ndarray:
    """Fresh contents of an allocation: NaN for floats, so unwritten reads show (initcheck-lite)."""
    shape = (alloc.stages,) + alloc.shape
    if jnp.issubdtype(alloc.jdtype, jnp.floating):
        return jnp.full(shape, np.nan, alloc.jdtype)
    if alloc.dtype == "uint8":  # a byte allocation (one buffer used as several types): all ones, a NaN
        return jnp.full(shape, 0xFF, alloc.jdtype)  # in every float format read from it
    return jnp.full(shape, np.iinfo(np.int32).min, alloc.jdtype)

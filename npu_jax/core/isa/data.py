"""The data path the instructions share: reading and writing allocation stages and GM windows.

Data moves with ``lax.dynamic_slice`` / ``dynamic_update_slice``; every write is predicated by
``when`` (a bool, possibly traced). In timing-only mode (``ctx.move_data`` false) writes are
no-ops and XLA drops the data work entirely. Nothing here charges time or touches checker state.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from jax import lax

from npu_jax.core.buffers import DTYPES, Ref
from npu_jax.core.state import Core, GmWindow
from npu_jax.errors import WindowError
from npu_jax.hw.formats import itemsize

_i32 = jnp.int32


@dataclasses.dataclass(frozen=True)
class View(Ref):
    """A strided block of an allocation stage: ``shape`` elements from ``offset``, every ``step``-th
    along each dim (the vector unit's block and repeat strides). A vector source (or, with unit
    steps, a destination) that is not the whole stage: a pooling window's tap over a UB tile."""

    shape: tuple = ()
    step: tuple | None = None
    # the format the view's elements are read and written as, where it is not the allocation's: a byte
    # allocation (one buffer used as several types, ``LocalTensor.reinterpret_cast``) seen as any type;
    # ``offset`` then counts elements of this format
    dtype: str | None = None

    @property
    def elem(self) -> str:
        return self.dtype or self.alloc.dtype

    @property
    def steps(self) -> tuple:
        return self.step or (1,) * len(self.shape)

    @property
    def extent(self) -> tuple:
        """Elements of the allocation the view spans per dim: (shape - 1) * step + 1."""
        return tuple((n - 1) * s + 1 for n, s in zip(self.shape, self.steps))


def view_block(core: Core, v: View) -> jax.Array:
    """The elements of a :class:`View` (offset and stage may be traced; shape and step static)."""
    blk = stage_block(core, v, v.extent)
    return blk[tuple(slice(None, None, s) for s in v.steps)]


def stage_block(core: Core, ref: Ref, shape) -> jax.Array:
    """The ``shape`` block of an allocation stage at ``ref.offset`` (0s if none)."""
    a = ref.alloc
    if ref.elem != a.dtype:
        return _raw_block(core, ref, shape)
    off = ref.offset or (0,) * len(a.shape)
    full = core.buf[a.name]
    blk = lax.dynamic_slice(full, (jnp.asarray(ref.stage, _i32),) + tuple(off), (1,) + tuple(shape))
    return blk[0]


def _raw_check(ref: Ref) -> None:
    a = ref.alloc
    if a.dtype != "uint8" or len(a.shape) != 1:
        raise TypeError(
            f"{a.name!r} is a {a.dtype} {a.shape} allocation; only a flat byte (uint8) allocation is read as "
            f"another type ({ref.elem})."
        )


def _raw_block(core: Core, ref: Ref, shape) -> jax.Array:
    """``shape`` elements of ``ref.elem`` from a byte allocation: the bytes at ``offset`` elements of
    that type, reinterpreted (the buffer is memory; its type is how an instruction reads it)."""
    _raw_check(ref)
    isz = itemsize(ref.elem)
    n = math.prod(shape)
    start = jnp.asarray((ref.offset or (0,))[0], _i32) * isz
    raw = lax.dynamic_slice(core.buf[ref.alloc.name], (jnp.asarray(ref.stage, _i32), start), (1, n * isz))[0]
    return bytes_to(raw, ref.elem).reshape(shape)


def bytes_to(raw, fmt: str) -> jax.Array:
    """A flat uint8 array read as elements of ``fmt`` (little-endian, as the chip stores them)."""
    isz = itemsize(fmt)
    dt = DTYPES[fmt]
    if isz == 1:
        return lax.bitcast_convert_type(raw, dt)
    return lax.bitcast_convert_type(raw.reshape(-1, isz), dt)


def to_bytes(x) -> jax.Array:
    """Elements (any format) as their flat uint8 bytes (the inverse of :func:`bytes_to`)."""
    return lax.bitcast_convert_type(x, jnp.uint8).reshape(-1)


def write_ref(core: Core, ref: Ref, block, when) -> Core:
    """Write ``block`` into an allocation stage at ``ref.offset`` where ``when``."""
    if not core.ctx.move_data:  # timing-only: XLA drops the now-unused data work entirely
        return core
    a = ref.alloc
    if ref.elem != a.dtype:  # a byte allocation written as another type: the block's bytes
        _raw_check(ref)
        raw = to_bytes(block.astype(DTYPES[ref.elem]))
        start = jnp.asarray((ref.offset or (0,))[0], _i32) * itemsize(ref.elem)
        return write_ref(core, Ref(a, ref.stage, (start,)), raw, when)
    off = ref.offset or (0,) * len(a.shape)
    if len(block.shape) != len(a.shape) or any(
        isinstance(o, int) and o + s > t for o, s, t in zip(off, block.shape, a.shape)
    ):
        raise WindowError(
            f"memcheck: block {tuple(block.shape)} at {tuple(off)} does not fit allocation "
            f"{a.name!r} of shape {a.shape}; shrink the block or move its offset."
        )
    idx = (jnp.asarray(ref.stage, _i32),) + tuple(jnp.asarray(o, _i32) for o in off)
    full = core.buf[a.name]
    block = block.astype(a.jdtype)[None]
    old = lax.dynamic_slice(full, idx, block.shape)
    new = jnp.where(jnp.asarray(when), block, old)
    return core.replace(buf={**core.buf, a.name: lax.dynamic_update_slice(full, new, idx)})


def valid_extents(core: Core, win: GmWindow):
    """Per dim, how much of the window lies inside the tensor (and inside ``win.limit``)."""
    shape = core.gm_shape[win.name]
    ext = [
        jnp.clip(shape[d] - jnp.asarray(st, _i32), 0, size)
        for d, (st, size) in enumerate(zip(win.starts, win.sizes))
    ]
    if win.limit is not None:
        ext = [
            e if lim is None else jnp.clip(jnp.minimum(e, jnp.asarray(lim, _i32)), 0, None)
            for e, lim in zip(ext, win.limit)
        ]
    return tuple(ext)


def mask(shape, valid):
    """Boolean array of ``shape``: true on the leading ``valid`` extent of every dim."""
    m = jnp.ones(shape, jnp.bool_)
    for d, v in enumerate(valid):
        iota = lax.broadcasted_iota(_i32, shape, d)
        m = m & (iota < v)
    return m


def gm_bursts(core: Core, win: GmWindow, valid):
    """(bytes, bursts) of a GM window in the tensor's logical row-major layout.

    A dimension whose trailing dimensions are all covered whole (start 0, full extent) merges with
    them into one contiguous run; every other dimension multiplies the number of bursts.
    """
    spec = core.ctx.gm_spec(win.name)
    nd = len(spec.shape)
    shape = core.gm_shape[win.name]
    nbytes = jnp.asarray(math.prod(valid), _i32) * itemsize(spec.dtype)
    bursts = jnp.asarray(1, _i32)
    suffix_full = jnp.asarray(True)
    for d in range(nd - 1, -1, -1):
        bursts = bursts * jnp.where(suffix_full, 1, valid[d])
        full = (jnp.asarray(win.starts[d], _i32) == 0) & (valid[d] == shape[d])
        suffix_full = suffix_full & full
    return nbytes, jnp.where(nbytes > 0, bursts, 0)


def rows_to_window(x, sizes):
    """The first prod(sizes[:-1]) rows and sizes[-1] columns of a 2-D tile, shaped as a window."""
    lead = math.prod(sizes[:-1])
    return x[:lead, : sizes[-1]].reshape(sizes)


def window_valid(core: Core, win: GmWindow, m, n):
    """Valid extents of a window written from an (m, n) tile: GM bounds, and m, n limits (m bounds
    the first dim of a 2-D window; for higher ranks the window's own bounds decide)."""
    gv = list(valid_extents(core, win))
    gv[-1] = jnp.minimum(gv[-1], n)
    if len(gv) == 2:
        gv[0] = jnp.minimum(gv[0], m)
    return tuple(gv)


def squeeze_shape(shape, rank: int):
    """Drop leading 1s of a window shape down to ``rank`` dims (a (1, 128) row into a (128,) tile)."""
    shape = tuple(shape)
    while len(shape) > rank and shape[0] == 1:
        shape = shape[1:]
    return shape


def squeeze_to(x, rank: int):
    """Drop leading 1s; a window of higher rank still lands in a 2-D tile row-major."""
    x = x.reshape(squeeze_shape(x.shape, rank))
    if x.ndim > rank == 2:
        x = x.reshape(-1, x.shape[-1])
    return x


def write_gm(core: Core, dst: GmWindow, block, valid, when) -> tuple[Core, jax.Array | None]:
    """Write the ``valid`` part of ``block`` into a GM output window and mark it written.

    Returns (core, the mask of the window's elements written), for ``issue`` to hand to the
    sanitizers (``gm_writes``: racecheck names the instruction behind each element). The marks are
    kept in timing-only mode too when racecheck is on, so that overlaps between cores are caught
    there as well, and when the data is computed apart (``ctx.mark_writes``); with none of these
    the mask is None.
    """
    race = bool(core.san) and core.ctx.checks.race
    if not core.ctx.move_data and not race and not core.ctx.mark_writes:
        return core, None
    spec = core.ctx.gm_spec(dst.name)
    starts = tuple(jnp.asarray(s, _i32) for s in dst.starts)
    m = mask(dst.sizes, valid) & jnp.asarray(when)
    wold = lax.dynamic_slice(core.gm_written[dst.name], starts, dst.sizes)
    core = core.replace(
        gm_written={
            **core.gm_written,
            spec.name: lax.dynamic_update_slice(core.gm_written[spec.name], wold | m, starts),
        }
    )
    if not core.ctx.move_data:
        return core, m
    old = lax.dynamic_slice(core.gm[dst.name], starts, dst.sizes)
    new = jnp.where(m, block.astype(old.dtype), old)
    gm = {**core.gm, dst.name: lax.dynamic_update_slice(core.gm[dst.name], new, starts)}
    return core.replace(gm=gm), m


def broadcast_row(core: Core, ref: Ref, cols: int) -> jax.Array:
    """``cols`` values of a (1, N') row allocation from column ``ref.offset[1]`` (0 if none), as
    (1, cols): a broadcast operand (on hardware, a source with repeat stride 0)."""
    a = ref.alloc
    if len(a.shape) != 2 or a.shape[0] != 1 or a.shape[1] < cols:
        raise ValueError(f"a broadcast row must be a (1, >= {cols}) allocation, got {a.name!r} {a.shape}.")
    col = 0 if ref.offset is None else ref.offset[1]
    full = core.buf[a.name]
    return lax.dynamic_slice(
        full, (jnp.asarray(ref.stage, _i32), jnp.asarray(0, _i32), jnp.asarray(col, _i32)), (1, 1, cols)
    )[0]

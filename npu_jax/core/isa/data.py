"""The data path the instructions share: reading and writing allocation stages and GM windows.

Data moves with ``lax.dynamic_slice`` / ``dynamic_update_slice``; every write is predicated by
``when`` (a bool, possibly traced). In timing-only mode (``ctx.move_data`` false) writes are
no-ops and XLA drops the data work entirely. Nothing here charges time; the one piece of checker state
touched is racecheck's record of who wrote each GM output element (:func:`write_gm`).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from npu_jax.core.buffers import DTYPES, Ref
from npu_jax.core.checks.sites import current_table
from npu_jax.core.shared import over_cores
from npu_jax.core.state import Core, GmWindow, gm_values
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


def _ints(core):
    """(array module, integer type) of a core's address arithmetic: jax's int32, or numpy's int64 on
    the timing Board (``core/board.py``, whose GM side calls the functions below)."""
    return (np, np.int64) if getattr(core, "on_board", False) else (jnp, _i32)


def valid_extents(core: Core, win: GmWindow):
    """Per dim, how much of the window lies inside the tensor (and inside ``win.limit``)."""
    xp, i = _ints(core)
    shape = core.gm_shape[win.name]
    ext = [
        xp.clip(shape[d] - xp.asarray(st, i), 0, size)
        for d, (st, size) in enumerate(zip(win.starts, win.sizes))
    ]
    if win.limit is not None:
        ext = [
            e if lim is None else xp.clip(xp.minimum(e, xp.asarray(lim, i)), 0, None)
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
    xp, i = _ints(core)
    spec = core.ctx.gm_spec(win.name)
    nd = len(spec.shape)
    shape = core.gm_shape[win.name]
    nbytes = xp.asarray(math.prod(valid), i) * itemsize(spec.dtype)
    bursts = xp.asarray(1, i)
    suffix_full = xp.asarray(True)
    for d in range(nd - 1, -1, -1):
        bursts = bursts * xp.where(suffix_full, 1, valid[d])
        full = (xp.asarray(win.starts[d], i) == 0) & (valid[d] == shape[d])
        suffix_full = suffix_full & full
    return nbytes, xp.where(nbytes > 0, bursts, 0)


def rows_to_window(x, sizes):
    """The first prod(sizes[:-1]) rows and sizes[-1] columns of a 2-D tile, shaped as a window."""
    lead = math.prod(sizes[:-1])
    return x[:lead, : sizes[-1]].reshape(sizes)


def window_valid(core: Core, win: GmWindow, m, n):
    """Valid extents of a window written from an (m, n) tile: GM bounds, and m, n limits (m bounds
    the first dim of a 2-D window; for higher ranks the window's own bounds decide)."""
    xp = _ints(core)[0]
    gv = list(valid_extents(core, win))
    gv[-1] = xp.minimum(gv[-1], n)
    if len(gv) == 2:
        gv[0] = xp.minimum(gv[0], m)
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


UNWRITTEN, CLASH = -1, -2  # a GM output element's writer (``core.gm_written``): none yet, or several


def write_gm(
    core: Core, dst: GmWindow, block, valid, when, atomic: str | None = None
) -> tuple[Core, jax.Array | None]:
    """Write the ``valid`` part of ``block`` into a GM output window and record who wrote it.

    GM outputs are shared by the cores (:mod:`npu_jax.core.shared`): under ``vmap`` the cores write
    one array, core after core. ``core.gm_written[name]`` holds each element's writer: ``UNWRITTEN``,
    the block index of the last core that wrote it, or ``CLASH`` once a second core wrote other bits
    than the element held (a race: the result depends on the cores' order; a core rewriting what it
    wrote, or several writing the same bits, is not one). ``atomic`` ("add", "max", "min": SetAtomicAdd
    ...) combines the block with GM's content (an add in fp32, rounded once to the output's type) and
    is never a race. With racecheck on, each element written also records the instruction's site
    (``core.san["gm_site"]``) and the first race the two writers' cores and sites
    (``core.san["gm_clash"]``), so the finding names both instructions.

    Returns (core, the mask of the window's elements written; the instruction's ``Effect`` lists the
    window in ``gm_writes``, which its declaration must allow). The writers are recorded in timing-only
    mode too when racecheck is on (without values, every second core's write is a race), and when the
    data is computed apart (``ctx.mark_writes``); with none of these nothing is written and the mask is
    None.
    """
    ctx = core.ctx
    race = bool(core.san) and ctx.checks.race
    if not ctx.move_data and not race and not ctx.mark_writes:
        return core, None
    spec = ctx.gm_spec(dst.name)
    gid = [g.name for g in ctx.gm if g.output].index(dst.name)
    site = current_table().next_id() if race else 0  # the id issue's hook gives this instruction
    write = _shared_write(tuple(dst.sizes), spec.shape, spec.dtype, ctx.move_data, atomic, race, gid, site)
    starts = jnp.stack([jnp.asarray(s, _i32) for s in dst.starts])
    m = mask(dst.sizes, valid) & jnp.asarray(when)
    state = ((core.gm[dst.name],) if ctx.move_data else ()) + (core.gm_written[dst.name],)
    if race:
        state += (core.san["gm_site"][dst.name], core.san["gm_clash"])
    blk = block if ctx.move_data else jnp.zeros((), jnp.bool_)
    out = write(*state, starts, blk, m, core.block)
    if ctx.move_data:
        core = core.replace(gm={**core.gm, dst.name: out[0]})
        out = out[1:]
    core = core.replace(gm_written={**core.gm_written, dst.name: out[0]})
    if race:
        sites = {**core.san["gm_site"], dst.name: out[1]}
        core = core.replace(san={**core.san, "gm_site": sites, "gm_clash": out[2]})
    return core, m


def _bits(x):
    """``x``'s bits as unsigned ints (equal NaNs compare equal; -0 and +0 differ)."""
    if x.dtype == jnp.bool_:
        return x
    return lax.bitcast_convert_type(x, jnp.dtype(f"uint{x.dtype.itemsize * 8}"))


def _combine(old, block, atomic: str):
    """An atomic copy's values: GM's content combined with the block."""
    block = block.astype(old.dtype)
    if atomic == "add":
        if jnp.issubdtype(old.dtype, jnp.floating):
            return (old.astype(jnp.float32) + block.astype(jnp.float32)).astype(old.dtype)
        return old + block
    return jnp.maximum(old, block) if atomic == "max" else jnp.minimum(old, block)


def _shared_write(sizes, shape, fmt: str, data: bool, atomic, race: bool, gid: int, site: int):
    """One core's write of a window of static ``sizes`` into the shared output of logical ``shape``:
    ``f(*state, starts, block, mask, block_idx) -> state``, state = (values if ``data``), writers,
    (sites, first race if ``race``); the cores' writes in index order under ``vmap``."""
    strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]

    def one(*args):
        # Every read of a shared array's old window must run before that array's in-place update, or
        # XLA copies the whole array (in the loop over cores: for each core of each instruction). So
        # the updates are chained by data: the race record reads the old writers and sites, then the
        # writers and sites are updated (``ok``: true, computed from the record), then the values
        # (``keep``: true, read from the updated writers), whose old window the writers' update read.
        *state, starts, block, m, me = args
        at = tuple(starts[d] for d in range(len(sizes)))
        if data:
            vals, owner, *rest = state
            old_v = gm_values(lax.dynamic_slice(vals, at, sizes), fmt)
            new_v = _combine(old_v, block, atomic) if atomic else block.astype(old_v.dtype)
            differ = _bits(old_v) != _bits(new_v)
        else:
            owner, *rest = state
            differ = True
        old_o = lax.dynamic_slice(owner, at, sizes)
        me = me.astype(owner.dtype)
        clash = m & (old_o >= 0) & (old_o != me) & differ & (atomic is None)
        new_o = jnp.where(m, jnp.where(clash | (old_o == CLASH), CLASH, me), old_o)
        tail = ()
        if race:
            sites, first = rest
            old_s = lax.dynamic_slice(sites, at, sizes)
            k = jnp.argmax(clash.reshape(-1)).astype(_i32)
            idx = jnp.unravel_index(k, sizes)
            flat = sum((starts[d] + idx[d]) * strides[d] for d in range(len(sizes)))
            rec = jnp.stack(
                [
                    gid,
                    flat,
                    old_o.reshape(-1)[k].astype(_i32),
                    old_s.reshape(-1)[k] - 1,
                    me.astype(_i32),
                    site,
                ]
            )
            first = jnp.where((first[0] < 0) & jnp.any(clash), rec, first)
            ok = first[0] != -3  # always true (-1 or an output's index)
            new_o = jnp.where(ok, new_o, old_o)
            sites = lax.dynamic_update_slice(sites, jnp.where(m & ok, jnp.int32(site + 1), old_s), at)
            tail = (sites, first)
        owner = lax.dynamic_update_slice(owner, new_o, at)
        if not data:
            return (owner, *tail)
        keep = lax.dynamic_slice(owner, at, sizes) != -3  # always true (a writer, or -1, -2)
        # selected as bits (bf16 is kept as its bits: state.gm_stored): XLA:CPU computes a select or an
        # update of bf16 values in fp32, converting the whole array there and back
        win = jnp.where(m & keep, _bits(new_v), _bits(old_v))
        win = win if vals.dtype == win.dtype else lax.bitcast_convert_type(win, vals.dtype)
        return (lax.dynamic_update_slice(vals, win, at), owner, *tail)

    return over_cores(one, int(data) + 1 + 2 * int(race))


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

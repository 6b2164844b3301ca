"""The instruction set: pure functions ``Core -> Core`` that move or compute data and charge a pipe.

Data moves with ``lax.dynamic_slice`` / ``dynamic_update_slice``; the Cube is one ``einsum`` on
fractal layouts at HIGHEST precision. Every instruction takes ``when`` (a bool, possibly traced):
when false it is a no-op that costs nothing -- how kernels predicate edge or idle iterations
without Python control flow. Data is computed in program order; overlap between pipes shows only
in time (see ``sync.py``).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from jax import lax

from npu_jax.core import formats, sanitize, wide
from npu_jax.core.buffers import Ref, itemsize
from npu_jax.core.rounding import round_to
from npu_jax.core.state import Core, GmWindow
from npu_jax.core.timing import (
    COUNTER_INDEX,
    OP_INDEX,
    PIPE_INDEX,
    ceil_div,
    gm_transfer_cycles,
    mmad_cycles,
    onchip_cycles,
    vector_cycles,
)
from npu_jax.errors import WindowError

_i32 = jnp.int32


# ---- bookkeeping shared by all instructions ----------------------------------------------------
def _onehot(n: int, i, extra_dims: int = 1):
    """Boolean one-hot of length n at i (static or traced), shaped to broadcast over wide limbs.

    Updates use ``where(onehot, new, old)`` rather than ``.at[i].set``: elementwise selects fuse
    into one XLA loop, scatters do not -- per-instruction bookkeeping stays cheap in a fori_loop.
    """
    oh = jnp.arange(n, dtype=_i32) == jnp.asarray(i, _i32)
    return oh.reshape((n,) + (1,) * extra_dims)


def issue(
    core: Core, pipe: str, cost, op: str, when=True, *, reads=(), writes=(), oob=(), gm_writes=()
) -> Core:
    """Run one instruction of ``cost`` cycles on ``pipe`` (in order), recording it in the trace.

    ``reads``/``writes`` name the allocation stages the instruction touches (a read may be
    ``(ref, cond)``) and ``oob`` its memcheck conditions; the sanitizers (``sanitize.py``) check
    them here, the one bookkeeping point every instruction goes through.
    """
    p = PIPE_INDEX[pipe]
    for ref in [r[0] if isinstance(r, tuple) else r for r in reads] + list(writes):
        sanitize.check_ref_static(ref, op)
    if core.san:
        core = sanitize.on_issue(core, pipe, op, when, reads, writes, oob, gm_writes=gm_writes)
    when = jnp.asarray(when, jnp.bool_)
    cost = jnp.where(when, jnp.asarray(cost, _i32), 0)
    start = core.pipe_free[p]
    end = wide.add_int(start, cost)
    oh = _onehot(core.pipe_free.shape[0], p)
    core = core.replace(
        pipe_free=jnp.where(oh, end, core.pipe_free),
        pipe_busy=jnp.where(oh, wide.add_int(core.pipe_busy, cost), core.pipe_busy),
        n_instr=core.n_instr + oh[:, 0] * when.astype(_i32),
    )
    if core.trace:
        # one slot written per instruction (a dynamic-update-slice), not a select over the whole
        # buffer: tracing costs the same whatever its capacity
        t = core.trace
        cap = t["pipe"].shape[0]
        i = jnp.minimum(t["n"], cap - 1)
        keep = when & (t["n"] < cap)
        core = core.replace(
            trace={
                "pipe": t["pipe"].at[i].set(jnp.where(keep, p, t["pipe"][i])),
                "op": t["op"].at[i].set(jnp.where(keep, OP_INDEX[op], t["op"][i])),
                "start": t["start"].at[i].set(jnp.where(keep, start, t["start"][i])),
                "end": t["end"].at[i].set(jnp.where(keep, end, t["end"][i])),
                "n": t["n"] + when.astype(_i32),
            }
        )
    return core


def count(core: Core, name: str, amount, when=True) -> Core:
    amount = jnp.where(jnp.asarray(when), jnp.asarray(amount, _i32), 0)
    oh = _onehot(core.counters.shape[0], COUNTER_INDEX[name])
    return core.replace(counters=jnp.where(oh, wide.add_int(core.counters, amount), core.counters))


def _stage_block(core: Core, ref: Ref, shape) -> jax.Array:
    a = ref.alloc
    off = ref.offset or (0,) * len(a.shape)
    full = core.buf[a.name]
    blk = lax.dynamic_slice(full, (jnp.asarray(ref.stage, _i32),) + tuple(off), (1,) + tuple(shape))
    return blk[0]


def _write_ref(core: Core, ref: Ref, block, when) -> Core:
    if not core.ctx.move_data:  # timing-only: XLA drops the now-unused data work entirely
        return core
    a = ref.alloc
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


def _valid_extents(core: Core, win: GmWindow):
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


def _mask(shape, valid):
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


# ---- DataCopy (MTE2 / MTE3) --------------------------------------------------------------------
def data_copy(
    core: Core, *, dst, src, layout: str | None = None, kernel=None, block_n=None, when=True
) -> Core:
    """DataCopy between GM and L1/UB: GM->L1, GM->UB on MTE2; UB->GM on MTE3.

    ``src``/``dst`` are a :class:`GmWindow` (``core.gm_window(...)``) and an allocation
    :class:`Ref`. ``layout`` converts on the way in: ``"nz"`` (2-D ND window -> NZ),
    ``"nc1hwc0"`` (a (C, H, W) NCHW window -> (C1, H, W, C0), channels zero-padded) or
    ``"oihw_to_kn"`` (an (O, C, kh, kw) weight window -> the (C1*kh*kw*C0, O) matrix whose rows
    follow Load3D's K order; ``kernel=(kh, kw)`` when the layer's kernel is smaller than the
    window's). The cost is
    the window's bytes at the GM rate plus a gap per discontiguous burst of the *source* layout.
    """
    hw = core.hw
    if isinstance(src, GmWindow) and isinstance(dst, Ref):
        if dst.buffer not in ("L1", "UB"):
            raise ValueError(
                f"DataCopy from GM goes to L1 or UB, not {dst.buffer}; use "
                f"load2d/load3d to fill L0A/L0B from L1."
            )
        spec = core.ctx.gm_spec(src.name)
        if spec.dtype != dst.alloc.dtype:
            raise TypeError(
                f"DataCopy does not convert: GM {src.name!r} is {spec.dtype} but "
                f"{dst.alloc.name!r} is {dst.alloc.dtype}; cast on the vector unit."
            )
        valid = _valid_extents(core, src)
        starts = tuple(jnp.asarray(s, _i32) for s in src.starts)
        tile = lax.dynamic_slice(core.gm[src.name], starts, src.sizes)
        tile = jnp.where(_mask(tile.shape, valid), tile, jnp.zeros((), tile.dtype))
        c0 = formats.c0_of(tile.dtype)
        if layout == "nz":
            if tile.ndim != 2 or tile.shape[1] % c0:
                raise ValueError(
                    f"layout='nz' needs a 2-D window with cols a multiple of {c0}, got {tile.shape}."
                )
            tile = formats.nd_to_nz(tile, c0)
        elif layout == "nc1hwc0":
            tile = tile.reshape(tile.shape[-3:]) if tile.ndim == 4 and tile.shape[0] == 1 else tile
            if tile.ndim != 3:
                raise ValueError(f"layout='nc1hwc0' needs a (C, H, W) window, got {tile.shape}.")
            tile = formats.chw_to_c1hwc0(tile, c0)
        elif layout == "oihw_to_kn":
            if tile.ndim != 4:
                raise ValueError(f"layout='oihw_to_kn' needs an (O, C, kh, kw) window, got {tile.shape}.")
            kh, kw = kernel if kernel is not None else (None, None)
            tile = formats.oihw_to_kn(tile, c0, kh, kw, block_n)
        elif layout is not None:
            raise ValueError(f"layout must be None, 'nz', 'nc1hwc0' or 'oihw_to_kn', got {layout!r}.")
        tile = _squeeze_to(tile, len(dst.alloc.shape))
        nbytes, bursts = gm_bursts(core, src, valid)
        cost = gm_transfer_cycles(nbytes, bursts, core.ctx.gm_rate, hw.assumed.mte2_startup, hw)
        core = _write_ref(core, dst, tile, when)
        core = count(core, f"GM->{dst.buffer}", nbytes, when)
        return issue(core, "MTE2", cost, "DataCopy", when, writes=(dst,), oob=sanitize.gm_oob(core, src))
    if isinstance(src, Ref) and isinstance(dst, GmWindow):
        if src.buffer != "UB":
            raise ValueError(
                f"DataCopy to GM comes from UB (MTE3), not {src.buffer}; L0C leaves "
                f"through fixpipe (910B) or l0c_to_ub (910/310P)."
            )
        spec = core.ctx.gm_spec(dst.name)
        if not spec.output:
            raise ValueError(f"GM tensor {dst.name!r} is an input; kernels write only outputs.")
        sq = _squeeze_shape(dst.sizes, len(src.alloc.shape))
        if len(sq) == len(src.alloc.shape):
            block = _stage_block(core, src, sq).reshape(dst.sizes)
        elif len(src.alloc.shape) == 2:  # a (positions, channels) tile into an (…, ho, wo, c) window
            block = rows_to_window(_stage_block(core, src, src.alloc.shape), dst.sizes)
        else:
            raise ValueError(f"UB tile {src.alloc.shape} cannot fill window {dst.sizes}.")
        valid = _valid_extents(core, dst)
        nbytes, bursts = gm_bursts(core, dst, valid)
        rate = min(hw.ub_to_gm_rate, core.ctx.gm_rate)
        cost = gm_transfer_cycles(nbytes, bursts, rate, hw.assumed.mte3_startup, hw)
        oob = sanitize.gm_oob(core, dst)
        core, written = write_gm(core, dst, block, valid, when)
        core = count(core, "UB->GM", nbytes, when)
        return issue(core, "MTE3", cost, "DataCopy", when, reads=(src,), oob=oob, gm_writes=((dst, written),))
    raise ValueError(
        f"DataCopy supports GM->L1, GM->UB and UB->GM; got {type(src).__name__} -> {type(dst).__name__}."
    )


def rows_to_window(x, sizes):
    """The first prod(sizes[:-1]) rows and sizes[-1] columns of a 2-D tile, shaped as a window."""
    lead = math.prod(sizes[:-1])
    return x[:lead, : sizes[-1]].reshape(sizes)


def _window_valid(core: Core, win: GmWindow, m, n):
    """Valid extents of a window written from an (m, n) tile: GM bounds, and m, n limits (m bounds
    the first dim of a 2-D window; for higher ranks the window's own bounds decide)."""
    gv = list(_valid_extents(core, win))
    gv[-1] = jnp.minimum(gv[-1], n)
    if len(gv) == 2:
        gv[0] = jnp.minimum(gv[0], m)
    return tuple(gv)


def _squeeze_shape(shape, rank: int):
    """Drop leading 1s of a window shape down to ``rank`` dims (a (1, 128) row into a (128,) tile)."""
    shape = tuple(shape)
    while len(shape) > rank and shape[0] == 1:
        shape = shape[1:]
    return shape


def _squeeze_to(x, rank: int):
    """Drop leading 1s; a window of higher rank still lands in a 2-D tile row-major."""
    x = x.reshape(_squeeze_shape(x.shape, rank))
    if x.ndim > rank == 2:
        x = x.reshape(-1, x.shape[-1])
    return x


def write_gm(core: Core, dst: GmWindow, block, valid, when) -> tuple[Core, jax.Array | None]:
    """Write the ``valid`` part of ``block`` into a GM output window and mark it written; returns
    (core, the written mask over the window).

    With racecheck on, ``issue`` hands the mask to the sanitizers (``gm_writes``), which record the
    instruction that wrote each element; the marks are kept in timing-only mode too, so that
    overlaps between cores are caught there as well.
    """
    race = bool(core.san) and core.ctx.checks.race
    if not core.ctx.move_data and not race:
        return core, None
    spec = core.ctx.gm_spec(dst.name)
    starts = tuple(jnp.asarray(s, _i32) for s in dst.starts)
    m = _mask(dst.sizes, valid) & jnp.asarray(when)
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
    return core.replace(gm={**core.gm, dst.name: lax.dynamic_update_slice(core.gm[dst.name], new, starts)}), m


# ---- LoadData 2D and Load3D (MTE1) -------------------------------------------------------------
def _l0_window_shape(dst: Ref):
    """The logical (rows, cols) an L0 tile holds: (M, K) for L0A, (K, N) for L0B."""
    if dst.buffer not in ("L0A", "L0B"):
        raise ValueError(f"LoadData fills L0A or L0B, not {dst.buffer}.")
    return dst.alloc.shape


def load2d(core: Core, *, dst: Ref, src: Ref, start=(0, 0), valid=None, when=True) -> Core:
    """LoadData 2D: an (R, C) window of a 2-D L1 matrix (ND or NZ) into L0A (ZZ) or L0B (ZN).

    (L0 tiles are stored logically; see ``buffers.py`` for why.)

    ``start`` is the window's (row, col) in the L1 matrix (traced allowed). For L0A the window is
    (M, K); for L0B it is (K, N). ``valid`` = (rows, cols) actually meaningful, for the cost of an
    edge tile; whole fractals move either way.
    """
    a = src.alloc
    if a.buffer != "L1":
        raise ValueError(f"LoadData 2D reads L1, not {a.buffer}.")
    if a.dtype != dst.alloc.dtype:
        raise TypeError(
            f"LoadData does not convert: {a.name!r} is {a.dtype}, {dst.alloc.name!r} is {dst.alloc.dtype}."
        )
    rows, cols = _l0_window_shape(dst)
    k0 = core.hw.k0(itemsize(a.dtype))
    r0, c0 = (jnp.asarray(s, _i32) for s in start)
    full = core.read(a, src.stage)
    if a.fmt == "ND":
        oob = sanitize.window_oob(core, a, start, (rows, cols), a.shape, "LoadData2D")
        nd = lax.dynamic_slice(full, (r0, c0), (rows, cols))
    elif a.fmt == "NZ":
        cz = a.shape[2]
        # (col, row) of the ND matrix: columns in whole C0 blocks
        oob = sanitize.window_oob(
            core,
            a,
            (start[1], start[0]),
            (cols, rows),
            (a.shape[0] * cz, a.shape[1]),
            "LoadData2D",
            align=(cz, None),
        )
        nd = formats.nz_to_nd(lax.dynamic_slice(full, (c0 // cz, r0, 0), (cols // cz, rows, cz)))
    else:
        raise ValueError(f"LoadData 2D reads an ND or NZ matrix, {a.name!r} is {a.fmt}.")
    tile = nd  # stored logically; formats.fractal_view gives the ZZ / ZN arrangement
    isz = itemsize(a.dtype)
    if valid is None:
        nbytes = rows * cols * isz
    else:
        vr, vc = valid
        # Whole fractals move: rows/cols round up to 16 / K0.
        if dst.buffer == "L0A":
            nbytes = ceil_div(vr, 16) * 16 * ceil_div(vc, k0) * k0 * isz
        else:
            nbytes = ceil_div(vr, k0) * k0 * ceil_div(vc, 16) * 16 * isz
    rate = core.hw.l1_to_l0a_bytes_per_cycle if dst.buffer == "L0A" else core.hw.l0b_rate
    cost = onchip_cycles(nbytes, rate, core.hw.assumed.mte1_startup)
    core = _write_ref(core, dst, tile, when)
    core = count(core, f"L1->{dst.buffer}", nbytes, when)
    return issue(core, "MTE1", cost, "LoadData2D", when, reads=(src,), writes=(dst,), oob=oob)


@dataclasses.dataclass(frozen=True)
class Load3DGeometry:
    """Geometry of an img2col: kernel, stride, dilation (ints, or traced in a bounded kernel) and
    output positions per row of the tile (static)."""

    kh: int
    kw: int
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    out_w: int = 1  # output positions per row of this L1 tile (M index = oh * out_w + ow)

    def __post_init__(self):
        if not all(isinstance(v, int) for v in (self.kh, self.kw, *self.stride, *self.dilation)):
            return  # traced geometry (a bounded kernel): checked where it was canonicalised
        for name, v, hi in (("kh", self.kh, 255), ("kw", self.kw, 255)):
            if not 1 <= v <= hi:
                raise ValueError(f"Load3D {name} must be in 1..{hi}, got {v}.")
        if not all(1 <= s <= 63 for s in self.stride):
            raise ValueError(f"Load3D stride must be in 1..63, got {self.stride}.")
        if not all(1 <= d <= 255 for d in self.dilation):
            raise ValueError(f"Load3D dilation must be in 1..255, got {self.dilation}.")
        if self.out_w < 1:
            raise ValueError(f"Load3D out_w must be >= 1, got {self.out_w}.")


def img2col_tile(
    x,
    geom: Load3DGeometry,
    *,
    k_start,
    m_start,
    m_ext: int,
    k_ext: int,
    pad_top,
    pad_left,
    h_valid,
    w_valid,
    m_valid,
):
    """The (m_ext, k_ext) window of the virtual img2col matrix of an NC1HWC0 tile (C1, H, W, C0).

    Row m is output position (m // out_w, m % out_w); column k = ((c1 * kh + i) * kw + j) * C0 + c0.
    Input row of (oh, i) is oh * sh + i * dh - pad_top; anything outside [0, h_valid) x
    [0, w_valid), or past the window's first ``m_valid`` rows, or past the tile's C1, reads as zero.
    """
    c1n, h, w, c0 = x.shape
    kf = k_ext // c0
    m = jnp.asarray(m_start, _i32) + jnp.arange(m_ext, dtype=_i32)
    f = jnp.asarray(k_start, _i32) // c0 + jnp.arange(kf, dtype=_i32)
    c1 = f // (geom.kh * geom.kw)
    ij = f % (geom.kh * geom.kw)
    i, j = ij // geom.kw, ij % geom.kw
    oh, ow = m // geom.out_w, m % geom.out_w
    ih = oh[:, None] * geom.stride[0] + i[None, :] * geom.dilation[0] - jnp.asarray(pad_top, _i32)
    iw = ow[:, None] * geom.stride[1] + j[None, :] * geom.dilation[1] - jnp.asarray(pad_left, _i32)
    ok = (
        (ih >= 0)
        & (ih < h_valid)
        & (iw >= 0)
        & (iw < w_valid)
        & (c1 < c1n)[None, :]
        & ((m - jnp.asarray(m_start, _i32)) < m_valid)[:, None]
    )
    g = x[jnp.clip(c1, 0, c1n - 1)[None, :], jnp.clip(ih, 0, h - 1), jnp.clip(iw, 0, w - 1)]
    return jnp.where(ok[..., None], g, jnp.zeros((), x.dtype)).reshape(m_ext, k_ext)


def load3d(
    core: Core,
    *,
    dst: Ref,
    src: Ref,
    geom: Load3DGeometry,
    k_start=0,
    m_start=0,
    pad_top=0,
    pad_left=0,
    h_valid=None,
    w_valid=None,
    m_valid=None,
    when=True,
) -> Core:
    """Load3D: img2col of an NC1HWC0 feature-map tile in L1 straight into L0A fractals (ZZ).

    Fills ``dst`` (an (M, K) tile, ZZ fractals on the hardware) with the (M, K) window at (``m_start``, ``k_start``) of the
    tile's img2col matrix; ``k_start`` is a multiple of C0. ``pad_top``/``pad_left`` place output
    position 0's window (negative padding = a tile starting inside the map); rows >= ``h_valid``
    or cols >= ``w_valid`` read as bottom/right padding. Costs whole fractals at the L1->L0A rate.
    """
    a = src.alloc
    if a.buffer != "L1" or a.fmt != "NC1HWC0":
        raise ValueError(f"Load3D reads an NC1HWC0 tile in L1; {a.name!r} is {a.fmt} in {a.buffer}.")
    if dst.buffer != "L0A":
        raise ValueError(f"Load3D writes L0A, not {dst.buffer}.")
    if a.dtype != dst.alloc.dtype:
        raise TypeError(
            f"Load3D does not convert: {a.name!r} is {a.dtype}, {dst.alloc.name!r} is {dst.alloc.dtype}."
        )
    m_ext, k_ext = _l0_window_shape(dst)
    c1n, h, w, c0 = a.shape
    if k_ext % c0:
        raise ValueError(f"Load3D: L0A tile K ({k_ext}) must be a multiple of the tile's C0 ({c0}).")
    x = core.read(a, src.stage)
    m_valid = m_ext if m_valid is None else m_valid
    nd = img2col_tile(
        x,
        geom,
        k_start=k_start,
        m_start=m_start,
        m_ext=m_ext,
        k_ext=k_ext,
        pad_top=pad_top,
        pad_left=pad_left,
        h_valid=h if h_valid is None else h_valid,
        w_valid=w if w_valid is None else w_valid,
        m_valid=m_valid,
    )
    tile = nd
    nbytes = ceil_div(jnp.minimum(jnp.asarray(m_valid, _i32), m_ext), 16) * 16 * k_ext * itemsize(a.dtype)
    cost = onchip_cycles(nbytes, core.hw.l1_to_l0a_bytes_per_cycle, core.hw.assumed.mte1_startup)
    core = _write_ref(core, dst, tile, when)
    core = count(core, "L1->L0A", nbytes, when)
    k_tile = c1n * geom.kh * geom.kw * c0  # K of the tile's img2col matrix (traced in bounded kernels)
    if isinstance(k_tile, int):
        oob = sanitize.window_oob(core, a, (k_start,), (1,), (k_tile,), "Load3D k_start", align=(c0,))
    elif core.ctx.checks.mem:
        ks = jnp.asarray(k_start, _i32)
        oob = (
            ((ks < 0) | (ks >= k_tile), sanitize.BUF_OOB, a.name, 0, ks),
            (ks % c0 != 0, sanitize.MISALIGNED, a.name, 0, ks),
        )
    else:
        oob = ()
    return issue(core, "MTE1", cost, "Load3D", when, reads=(src,), writes=(dst,), oob=oob)


# ---- Mmad (M) ----------------------------------------------------------------------------------
def mmad(core: Core, *, dst: Ref, a: Ref, b: Ref, m, n, k, init=False, when=True) -> Core:
    """Mmad: C (L0C, fp32) = A (L0A) @ B (L0B) [+ C], over the leading m x n x k.

    ``init`` (traced allowed) zeroes C first (``cmatrixInitVal``). Entries of C outside m x n are
    untouched; A/B entries outside m, n, k are ignored. The running sum follows the policy's
    ``accumulate``: fp32 (hardware), or an fp16 what-if rounded per Mmad, per K0 step or per
    multiply-add (products exact in fp32; each sum rounded to fp32, then to fp16).
    """
    if (a.buffer, b.buffer, dst.buffer) != ("L0A", "L0B", "L0C"):
        raise ValueError(
            f"Mmad reads L0A and L0B and writes L0C; got {a.buffer}, {b.buffer} -> {dst.buffer}."
        )
    A = core.read(a.alloc, a.stage)  # (M, K)
    B = core.read(b.alloc, b.stage)  # (K, N)
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"Mmad K mismatch: A is {A.shape}, B is {B.shape}.")
    M, K = A.shape
    N = B.shape[1]
    if dst.alloc.shape != (M, N) or dst.alloc.dtype != "fp32":
        raise ValueError(
            f"Mmad destination must be an fp32 ({M}, {N}) L0C tile, got {dst.alloc.dtype} {dst.alloc.shape}."
        )
    m_, n_, k_ = (jnp.asarray(v, _i32) for v in (m, n, k))
    rows = jnp.arange(M, dtype=_i32) < m_
    cols = jnp.arange(N, dtype=_i32) < n_
    kk = jnp.arange(K, dtype=_i32) < k_
    A32 = jnp.where(rows[:, None] & kk[None, :], A.astype(jnp.float32), 0.0)
    B32 = jnp.where(kk[:, None] & cols[None, :], B.astype(jnp.float32), 0.0)
    C = core.read(dst.alloc, dst.stage)
    C0 = jnp.where(jnp.asarray(init), 0.0, C)
    acc = core.ctx.policy.accumulate
    hp = lax.Precision.HIGHEST
    k0 = core.hw.k0(itemsize(a.alloc.dtype))
    if acc == "fp16_step":
        # The running sum is rounded to fp16 after every K0-deep fractal step.
        def step(c, ab):
            a_k, b_k = ab  # (M, K0), (K0, N)
            return round_to(c + jnp.dot(a_k, b_k, precision=hp), "fp16").astype(jnp.float32), None

        a_steps = A32.reshape(M, K // k0, k0).transpose(1, 0, 2)
        b_steps = B32.reshape(K // k0, k0, N)
        Cn, _ = lax.scan(step, C0, (a_steps, b_steps))
    elif acc == "fp16_mac":
        # A true fp16 running sum: rounded after every multiply-add (rank-1 update per k).
        def mac(c, ab):
            a_k, b_k = ab  # (M,), (N,)
            return round_to(c + a_k[:, None] * b_k[None, :], "fp16").astype(jnp.float32), None

        Cn, _ = lax.scan(mac, C0, (A32.T, B32))
    else:
        Cn = C0 + jnp.dot(A32, B32, precision=hp, preferred_element_type=jnp.float32)
        if acc == "fp16_tile":
            Cn = round_to(Cn, "fp16").astype(jnp.float32)
    Cn = jnp.where(rows[:, None] & cols[None, :], Cn, C)
    core = _write_ref(core, dst, Cn, when)
    kq = k0
    core = count(core, "flops", 2 * m_ * n_ * k_, when)
    issued = 2 * (ceil_div(m_, 16) * 16) * (ceil_div(n_, 16) * 16) * (ceil_div(k_, kq) * kq)
    core = count(core, "flops_issued", issued, when)
    oob = sanitize.extent_oob(core, dst.alloc, {"m": m, "n": n, "k": k}, {"m": M, "n": N, "k": K}, "Mmad")
    return issue(
        core,
        "M",
        mmad_cycles(m_, n_, k_, kq, core.hw),
        "Mmad",
        when,
        reads=(a, b, (dst, ~jnp.asarray(init, jnp.bool_))),
        writes=(dst,),
        oob=oob,
    )


# ---- leaving L0C: Fixpipe (910B) and L0C->UB (910/310P) ----------------------------------------
def _l0c_nd(core: Core, src: Ref):
    if src.buffer != "L0C":
        raise ValueError(f"expected an L0C source, got {src.buffer}.")
    return core.read(src.alloc, src.stage)


def _activation(x, act: str | None, alpha: float, clip: float | None):
    if act == "relu":
        x = jnp.maximum(x, 0.0)
    elif act == "leaky_relu":
        x = jnp.where(x >= 0, x, x * jnp.float32(alpha))
    elif act is not None:
        raise ValueError(f"activation must be None, 'relu' or 'leaky_relu', got {act!r}.")
    if clip is not None:
        x = jnp.minimum(x, jnp.float32(clip))
    return x


def fixpipe(
    core: Core,
    *,
    dst,
    src: Ref,
    m,
    n,
    relu: bool = False,
    activation: str | None = None,
    alpha: float = 0.0,
    clip: float | None = None,
    bias: Ref | None = None,
    when=True,
) -> Core:
    """Fixpipe (910B): L0C (fp32; NZ fractals on chip) -> GM window or L1 (ND), converted to the
    policy's output format and rounding (nearest-even by default), optional bias add (fp32, before the
    activation), ReLU / leaky ReLU / clipped ReLU. ``bias`` is a (1, N') fp32 row in L1, read from
    column ``bias.offset[1]`` on (the bias table load is folded into the Fixpipe's cost: assumed).

    ``m``, ``n`` (traced allowed) bound the meaningful part; only that part is written. A GM window
    of rank > 2 takes L0C's rows in row-major order over its leading dims (an (ho, wo) output
    tile of a conv) and its columns along the last dim.
    """
    hw = core.hw
    if hw.coupled:
        raise ValueError(
            f"{hw.name} has no Fixpipe (coupled data path): move L0C with "
            f"l0c_to_ub and finish the epilogue on the vector unit."
        )
    if relu and activation not in (None, "relu"):
        raise ValueError(f"fixpipe: relu=True conflicts with activation={activation!r}; pass one.")
    act = "relu" if relu else activation
    pol = core.ctx.policy
    nd = _l0c_nd(core, src)
    if bias is not None:
        nd = nd + _row(core, bias, nd.shape[1]).astype(jnp.float32)
    nd = _activation(nd, act, alpha, clip)
    m_, n_ = jnp.asarray(m, _i32), jnp.asarray(n, _i32)
    l0c_bytes = ceil_div(m_, 16) * 16 * ceil_div(n_, 16) * 16 * 4
    oob = sanitize.extent_oob(
        core, src.alloc, {"m": m, "n": n}, {"m": src.alloc.shape[0], "n": src.alloc.shape[-1]}, "Fixpipe"
    )
    writes, gm_writes = (), ()
    if isinstance(dst, GmWindow):
        spec = core.ctx.gm_spec(dst.name)
        if not spec.output:
            raise ValueError(f"GM tensor {dst.name!r} is an input; kernels write only outputs.")
        out = pol.convert_out(nd, spec.dtype, hw, jnp.sum(core.n_instr), *dst.starts)
        block = rows_to_window(out, dst.sizes)
        valid = _window_valid(core, dst, m_, n_)
        nbytes, bursts = gm_bursts(core, dst, valid)
        gaps = jnp.maximum(bursts - 1, 0) * hw.assumed.gm_burst_overhead
        cyc = hw.assumed.fixpipe_startup + jnp.maximum(
            ceil_div(l0c_bytes, hw.assumed.fixpipe_bytes_per_cycle), ceil_div(nbytes, core.ctx.gm_rate) + gaps
        )
        cost = jnp.where(nbytes > 0, cyc, 0)
        oob = oob + sanitize.gm_oob(core, dst)
        core, written = write_gm(core, dst, block, valid, when)
        gm_writes = ((dst, written),)
        core = count(core, "L0C->GM", nbytes, when)
    elif isinstance(dst, Ref) and dst.buffer == "L1":
        out = pol.convert_out(nd, dst.alloc.dtype, hw, jnp.sum(core.n_instr))
        shape = dst.alloc.shape if dst.offset is None else None
        if shape is None or len(shape) != 2:
            raise ValueError("Fixpipe to L1 writes a whole 2-D ND allocation stage.")
        blk = out[: shape[0], : shape[1]]
        keep = _mask(shape, (m_, n_))
        blk = jnp.where(keep, blk, _stage_block(core, dst, shape))
        nbytes = m_ * n_ * itemsize(dst.alloc.dtype)
        cost = onchip_cycles(l0c_bytes, hw.assumed.fixpipe_bytes_per_cycle, hw.assumed.fixpipe_startup)
        core = _write_ref(core, dst, blk, when)
        core = count(core, "L0C->L1", nbytes, when)
        writes = (dst,)
    else:
        raise ValueError("Fixpipe writes to a GM window or an L1 allocation.")
    return issue(
        core, "FIX", cost, "Fixpipe", when, reads=(src,), writes=writes, oob=oob, gm_writes=gm_writes
    )


def _row(core: Core, ref: Ref, cols: int) -> jax.Array:
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


def l0c_to_ub(core: Core, *, dst: Ref, src: Ref, m, n, when=True) -> Core:
    """L0C -> UB on the Vector pipe (910/310P coupled path), converting to ``dst``'s format.

    ``dst`` is a 2-D ND UB allocation; the top-left (M, N) block of L0C lands there.
    """
    hw = core.hw
    if not hw.coupled:
        raise ValueError(f"{hw.name} has no L0C->UB path (separated data path): use fixpipe.")
    if dst.buffer != "UB" or len(dst.alloc.shape) != 2:
        raise ValueError(f"l0c_to_ub writes a 2-D UB allocation, got {dst.alloc.shape} in {dst.buffer}.")
    nd = _l0c_nd(core, src)
    shape = dst.alloc.shape
    out = core.ctx.policy.convert_out(nd[: shape[0], : shape[1]], dst.alloc.dtype, hw, jnp.sum(core.n_instr))
    m_, n_ = jnp.asarray(m, _i32), jnp.asarray(n, _i32)
    out = jnp.where(_mask(shape, (m_, n_)), out, _stage_block(core, dst, shape))
    nbytes = ceil_div(m_, 16) * 16 * ceil_div(n_, 16) * 16 * 4
    cost = onchip_cycles(nbytes, hw.l0c_to_ub_bytes_per_cycle, hw.assumed.vector_startup)
    core = _write_ref(core, dst, out, when)
    core = count(core, "L0C->UB", m_ * n_ * itemsize(dst.alloc.dtype), when)
    lim = {"m": min(shape[0], src.alloc.shape[0]), "n": min(shape[1], src.alloc.shape[-1])}
    oob = sanitize.extent_oob(core, src.alloc, {"m": m, "n": n}, lim, "L0CToUB")
    return issue(core, "V", cost, "L0CToUB", when, reads=(src,), writes=(dst,), oob=oob)


# ---- Vector unit (V) ---------------------------------------------------------------------------
def _pairwise_sum(flat, fmt: str):
    """Sum of ``flat`` as a pairwise tree with every partial sum rounded to ``fmt`` (fp32: the
    adds' own rounding). The order is fixed by the tree, so the bits do not depend on how XLA
    compiles the reduction (``jnp.sum`` gave eager and jitted runs sums one ulp apart)."""
    n = 1 << max(0, (flat.shape[0] - 1).bit_length())
    v = jnp.pad(flat.astype(jnp.float32), (0, n - flat.shape[0]))
    while v.shape[0] > 1:
        v = v[0::2] + v[1::2]
        if fmt != "fp32":
            v = round_to(v, fmt).astype(jnp.float32)
    return v[0]


_BINARY = {
    "VAdd": jnp.add,
    "VSub": jnp.subtract,
    "VMul": jnp.multiply,
    "VMax": jnp.maximum,
    "VMin": jnp.minimum,
}
_SCALAR = {"VAdds": jnp.add, "VMuls": jnp.multiply, "VMaxs": jnp.maximum, "VMins": jnp.minimum}


def vector(
    core: Core,
    op: str,
    dst: Ref,
    *srcs: Ref,
    scalar=None,
    alpha: float = 0.0,
    mode: str = "nearest_even",
    count_elems=None,
    when=True,
) -> Core:
    """One vector instruction over whole UB allocation stages (same shape), computed in fp32 and
    rounded once to ``dst``'s format (exact for one fp16 op: fp32 has p >= 2 * 11 + 2).

    ``op``: VAdd VSub VMul VMax VMin (two sources; the second may be a (1, N') row allocation,
    broadcast over the rows from column ``offset[1]``: a bias), VAdds VMuls VMaxs VMins (one
    source and ``scalar``),
    VRelu VLeakyRelu VExp VCopy VCast (one source; VCast rounds with ``mode``), VReduceSum (sum of
    all elements into element 0 of ``dst``). Cost: one 256-B repeat per cycle over the widest
    operand, plus start-up; ``count_elems`` (traced allowed) charges only a partial tile.
    """
    for r in (dst,) + srcs:
        if r.buffer != "UB":
            raise ValueError(f"vector ops work on UB, {r.alloc.name!r} is in {r.buffer}.")
    shape = dst.alloc.shape

    def operand(i, s):
        a = s.alloc
        if (
            i == 1
            and op in _BINARY
            and len(shape) == 2
            and len(a.shape) == 2
            and a.shape[0] == 1
            and shape[0] > 1
        ):
            return jnp.broadcast_to(_row(core, s, shape[1]), shape)
        return _stage_block(core, s, a.shape)

    xs = [operand(i, s).astype(jnp.float32) for i, s in enumerate(srcs)]
    for s, x in zip(srcs, xs):
        if op != "VReduceSum" and x.shape != shape:
            raise ValueError(f"{op}: source {s.alloc.name!r} {x.shape} != destination {shape}.")
    nsrc = {
        **{k: 2 for k in _BINARY},
        **{k: 1 for k in _SCALAR},
        "VRelu": 1,
        "VLeakyRelu": 1,
        "VExp": 1,
        "VCopy": 1,
        "VCast": 1,
        "VReduceSum": 1,
    }
    if op not in nsrc:
        raise ValueError(f"unknown vector op {op!r}; known: {sorted(nsrc)}.")
    if len(srcs) != nsrc[op]:
        raise ValueError(f"{op} takes {nsrc[op]} source(s), got {len(srcs)}.")
    if op in _BINARY:
        y = _BINARY[op](xs[0], xs[1])
    elif op in _SCALAR:
        if scalar is None:
            raise ValueError(f"{op} needs scalar=.")
        y = _SCALAR[op](xs[0], jnp.asarray(scalar, jnp.float32))
    elif op == "VRelu":
        y = jnp.maximum(xs[0], 0.0)
    elif op == "VLeakyRelu":
        y = jnp.where(xs[0] >= 0, xs[0], xs[0] * jnp.float32(alpha))
    elif op == "VExp":
        y = jnp.exp(xs[0])
    elif op == "VReduceSum":
        flat = xs[0].reshape(-1)
        if count_elems is not None:
            flat = jnp.where(jnp.arange(flat.shape[0]) < jnp.asarray(count_elems, _i32), flat, 0.0)
        total = _pairwise_sum(flat, core.ctx.policy.vector)
        y = _stage_block(core, dst, shape).astype(jnp.float32).reshape(-1).at[0].set(total).reshape(shape)
    else:  # VCopy, VCast
        y = xs[0]
    over = core.ctx.policy.overflow_mode(core.hw)
    vfmt = core.ctx.policy.vector
    if vfmt != "fp32" and op != "VCast":  # the op runs in the policy's vector format
        y = round_to(y, vfmt, overflow=over).astype(jnp.float32)
    out = round_to(y, dst.alloc.dtype, mode if op == "VCast" else "nearest_even", overflow=over)
    n_el = math.prod(shape) if count_elems is None else count_elems
    if count_elems is not None:
        keep = (jnp.arange(math.prod(shape)) < jnp.asarray(count_elems, _i32)).reshape(shape)
        out = jnp.where(keep, out, _stage_block(core, dst, shape))
    width = max([itemsize(dst.alloc.dtype)] + [itemsize(s.alloc.dtype) for s in srcs])
    if op == "VReduceSum":
        n_el = math.prod(srcs[0].alloc.shape) if count_elems is None else count_elems
    nbytes = jnp.asarray(n_el, _i32) * width
    core = _write_ref(core, dst, out, when)
    core = count(core, "vector_bytes", nbytes, when)
    oob = (
        ()
        if count_elems is None
        else sanitize.extent_oob(
            core,
            (srcs[0] if op == "VReduceSum" else dst).alloc,
            {"count_elems": count_elems},
            {"count_elems": math.prod((srcs[0] if op == "VReduceSum" else dst).alloc.shape)},
            op,
        )
    )
    return issue(core, "V", vector_cycles(nbytes, core.hw), op, when, reads=srcs, writes=(dst,), oob=oob)


def scalar(core: Core, cycles: int, when=True) -> Core:
    """Charge ``cycles`` of scalar work (address arithmetic, loop control) on pipe S."""
    return issue(core, "S", cycles, "Scalar", when)

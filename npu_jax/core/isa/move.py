"""The data semantics of the moves: DataCopy (MTE2 / MTE3), LoadData 2D and Load3D (MTE1).

Each function here is the ``semantics`` of one declaration in ``isa/table.py``: it checks its
operands, computes and writes the data, and returns an :class:`Effect` (the cost rule's operands,
the bytes per path, what it read and wrote). (L0 tiles are stored logically; see ``buffers.py``.)
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
from jax import lax

from npu_jax.core import formats, l2, sanitize
from npu_jax.core.buffers import Ref
from npu_jax.core.isa.data import (
    gm_bursts,
    mask,
    rows_to_window,
    squeeze_shape,
    squeeze_to,
    stage_block,
    valid_extents,
    write_gm,
    write_ref,
)
from npu_jax.core.isa.decl import Effect
from npu_jax.core.state import Core, GmWindow, gm_values
from npu_jax.hw import costs
from npu_jax.hw.formats import itemsize

_i32 = jnp.int32


# ---- DataCopy (MTE2 / MTE3) --------------------------------------------------------------------
def data_copy_in(
    core: Core, h, when, *, dst: Ref, src: GmWindow, layout=None, kernel=None, block_n=None, outside="zero"
):
    """DataCopy GM -> L1 / UB (MTE2), converting the layout on the way in (see ``data_copy``)."""
    if outside not in ("zero", "keep") or (outside == "keep" and layout is not None):
        raise ValueError(
            f"DataCopy outside= is 'zero' or 'keep' (the latter with no layout conversion), got "
            f"outside={outside!r} with layout={layout!r}."
        )
    if dst.buffer not in ("L1", "UB"):
        raise ValueError(
            f"DataCopy from GM goes to L1 or UB, not {dst.buffer}; use load2d/load3d to fill L0A/L0B from L1."
        )
    spec = core.ctx.gm_spec(src.name)
    if spec.dtype != dst.elem:
        raise TypeError(
            f"DataCopy does not convert: GM {src.name!r} is {spec.dtype} but "
            f"{dst.alloc.name!r} is {dst.elem}; cast on the vector unit."
        )
    valid = valid_extents(core, src)
    starts = tuple(jnp.asarray(s, _i32) for s in src.starts)
    tile = gm_values(
        lax.dynamic_slice(core.gm[src.name], starts, src.sizes), core.ctx.gm_spec(src.name).dtype
    )
    inside = mask(tile.shape, valid)
    tile = jnp.where(inside, tile, jnp.zeros((), tile.dtype))
    c0 = formats.c0_of(core.hw, tile.dtype)
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
        tile = tile[0] if tile.ndim == 5 and tile.shape[0] == 1 else tile  # one group of (G, O, C, kh, kw)
        if tile.ndim != 4:
            raise ValueError(f"layout='oihw_to_kn' needs an (O, C, kh, kw) window, got {tile.shape}.")
        kh, kw = kernel if kernel is not None else (None, None)
        tile = formats.oihw_to_kn(tile, c0, kh, kw, block_n)
    elif layout is not None:
        raise ValueError(f"layout must be None, 'nz', 'nc1hwc0' or 'oihw_to_kn', got {layout!r}.")
    tile = squeeze_to(tile, len(dst.alloc.shape))
    if len(dst.alloc.shape) == 1 and tile.ndim > 1:  # rows of a GM matrix into a flat buffer, in order
        tile, inside = tile.reshape(-1), inside.reshape(-1)
    elif 1 == tile.ndim < len(dst.alloc.shape) and tile.size == math.prod(dst.alloc.shape):
        # a flat run of GM that fills a whole shaped tile (an NC1HWC0 map in L1), in order
        tile, inside = tile.reshape(dst.alloc.shape), inside.reshape(dst.alloc.shape)
    if outside == "keep":  # only the valid bursts move: the rest of the block keeps what UB held
        tile = jnp.where(squeeze_to(inside, tile.ndim), tile, stage_block(core, dst, tile.shape))
    nbytes, bursts = gm_bursts(core, src, valid)
    rate = costs.gm_rate(h, core.active_cores)
    core, hit = l2.read(core, src, valid, when, nbytes)
    core = write_ref(core, dst, tile, when)
    return Effect(
        core,
        cost=dict(nbytes=nbytes, bursts=bursts, rate=rate, hit_bytes=hit),
        counts=((f"GM->{dst.buffer}", nbytes), ("HBM->L2", nbytes - hit)),
        writes=(dst,),
        oob=sanitize.gm_oob(core, src),
    )


def data_copy_out(core: Core, h, when, *, dst: GmWindow, src: Ref, atomic: str | None = None):
    """DataCopy UB -> GM (MTE3): a UB tile into a GM output window; ``atomic`` ("add", "max", "min":
    SetAtomicAdd ...) combines it with GM's content instead of overwriting it."""
    if src.buffer != "UB":
        raise ValueError(
            f"DataCopy to GM comes from UB (MTE3), not {src.buffer}; L0C leaves "
            f"through fixpipe (910B) or l0c_to_ub (910/310P)."
        )
    spec = core.ctx.gm_spec(dst.name)
    if not spec.output:
        raise ValueError(f"GM tensor {dst.name!r} is an input; kernels write only outputs.")
    sq = squeeze_shape(dst.sizes, len(src.alloc.shape))
    if len(sq) == len(src.alloc.shape):
        block = stage_block(core, src, sq).reshape(dst.sizes)
    elif len(src.alloc.shape) == 1:  # a flat buffer into rows of a GM matrix, in order
        block = stage_block(core, src, (math.prod(dst.sizes),)).reshape(dst.sizes)
    elif len(src.alloc.shape) == 2:  # a (positions, channels) tile into an (…, ho, wo, c) window
        block = rows_to_window(stage_block(core, src, src.alloc.shape), dst.sizes)
    else:
        raise ValueError(f"UB tile {src.alloc.shape} cannot fill window {dst.sizes}.")
    valid = valid_extents(core, dst)
    nbytes, bursts = gm_bursts(core, dst, valid)
    oob = sanitize.gm_oob(core, dst)
    core, written = write_gm(core, dst, block, valid, when, atomic=atomic)
    core = l2.enter(core, nbytes, when)  # write-allocate: the bytes enter L2 (its clock, recency)
    return Effect(
        core,
        cost=dict(nbytes=nbytes, bursts=bursts, rate=costs.write_rate(h, core.active_cores)),
        counts=(
            ("UB->GM", nbytes),
            ("L2->HBM", nbytes if l2.write_back(core.hw, core.ctx.gm, dst.name) else 0 * nbytes),
        ),
        reads=(src,),
        oob=oob,
        gm_writes=((dst, written),),
    )


# ---- LoadData 2D (MTE1) ------------------------------------------------------------------------
def _l0_window_shape(dst: Ref):
    """The logical (rows, cols) an L0 tile holds: (M, K) for L0A, (K, N) for L0B."""
    if dst.buffer not in ("L0A", "L0B"):
        raise ValueError(f"LoadData fills L0A or L0B, not {dst.buffer}.")
    return dst.alloc.shape


def load2d(core: Core, h, when, *, dst: Ref, src: Ref, start=(0, 0), valid=None, transpose=False, shape=None):
    """LoadData 2D: an (R, C) window of a 2-D L1 matrix (ND or NZ) into L0A (ZZ) or L0B (ZN);
    ``transpose``: the (C, R) window at ``start``, transposed (each square fractal turned on the way,
    LoadData2DParams.ifTranspose: a B stored [N, K] loaded as (K, N)). ``shape``: a window of the
    destination tile (whole fractals) at ``dst.offset``, not all of it (the vendor's per-strip loads)."""
    a = src.alloc
    if a.buffer != "L1":
        raise ValueError(f"LoadData 2D reads L1, not {a.buffer}.")
    if a.dtype != dst.alloc.dtype:
        raise TypeError(
            f"LoadData does not convert: {a.name!r} is {a.dtype}, {dst.alloc.name!r} is {dst.alloc.dtype}."
        )
    rows, cols = _l0_window_shape(dst) if shape is None else shape
    if transpose:
        rows, cols = cols, rows
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
    if transpose:
        nd, rows, cols = nd.T, cols, rows
    isz = itemsize(a.dtype)
    if valid is None:
        nbytes = rows * cols * isz
    else:  # whole fractals move: rows / cols round up to fractal rows and K0
        whole = costs.load_l0a_bytes if dst.buffer == "L0A" else costs.load_l0b_bytes
        nbytes = whole(h, valid[0], valid[1], isz)
    core = write_ref(core, dst, nd, when)  # stored logically; formats.fractal_view gives ZZ / ZN
    return Effect(
        core,
        cost=dict(nbytes=nbytes),
        counts=((f"L1->{dst.buffer}", nbytes),),
        reads=(src,),
        writes=(dst,),
        oob=oob,
    )


# ---- Load3D (MTE1) -----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Load3DGeometry:
    """Geometry of an img2col: kernel, stride, dilation (ints, or traced in a bounded kernel) and
    output positions per row of the tile (an int, or traced under a tiling bound)."""

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
        if isinstance(self.out_w, int) and self.out_w < 1:
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
    h,
    when,
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
    k_valid=None,
):
    """Load3D: img2col of an NC1HWC0 feature-map tile in L1 straight into L0A fractals (ZZ)."""
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
    c1n, hh, ww, c0 = a.shape
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
        h_valid=hh if h_valid is None else h_valid,
        w_valid=ww if w_valid is None else w_valid,
        m_valid=m_valid,
    )
    # whole fractals of the valid rows move (k_ext is whole K0 blocks: L0A tiles are whole fractals)
    rows = jnp.minimum(jnp.asarray(m_valid, _i32), m_ext)
    cols = k_ext if k_valid is None else jnp.minimum(jnp.asarray(k_valid, _i32), k_ext)
    nbytes = costs.load_l0a_bytes(h, rows, cols, itemsize(a.dtype))
    core = write_ref(core, dst, nd, when)
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
    return Effect(
        core, cost=dict(nbytes=nbytes), counts=(("L1->L0A", nbytes),), reads=(src,), writes=(dst,), oob=oob
    )

"""The public instruction functions, ``Core -> Core``: each picks its declaration and issues it.

These are the functions behind Core's methods (``core.mmad(...)`` is ``mmad(core, ...)``; this
module binds them, and the flag operations of ``sync.py``, into ``state.py``). Every one takes
``when`` (a bool, possibly traced): false makes it a no-op that costs nothing.
"""

from __future__ import annotations

from npu_jax.core import state, sync
from npu_jax.core.buffers import Ref
from npu_jax.core.isa import lanes, table
from npu_jax.core.isa.execute import issue
from npu_jax.core.isa.move import Load3DGeometry
from npu_jax.core.isa.vector import VECTOR_OPS
from npu_jax.core.state import Core, GmWindow


def data_copy(
    core: Core,
    *,
    dst,
    src,
    layout: str | None = None,
    kernel=None,
    block_n=None,
    outside: str = "zero",
    atomic: str | None = None,
    when=True,
) -> Core:
    """DataCopy between GM and L1/UB: GM->L1, GM->UB on MTE2; UB->GM on MTE3.

    ``src``/``dst`` are a :class:`GmWindow` (``core.gm_window(...)``) and an allocation
    :class:`Ref`. ``layout`` converts on the way in: ``"nz"`` (2-D ND window -> NZ),
    ``"nc1hwc0"`` (a (C, H, W) NCHW window -> (C1, H, W, C0), channels zero-padded) or
    ``"oihw_to_kn"`` (an (O, C, kh, kw) weight window -> the (C1*kh*kw*C0, O) matrix whose rows
    follow Load3D's K order; ``kernel=(kh, kw)`` when the layer's kernel is smaller than the
    window's). The cost (``costs.dma_in`` / ``dma_out``) is the window's bytes at the GM rate plus
    a gap per discontiguous burst of the *source* layout.

    ``outside`` (GM -> L1/UB, no layout): what the destination block holds where the window leaves
    the tensor (or its ``limit``): ``"zero"`` (zeros are written there) or ``"keep"`` (nothing is
    written there, as a DMA of only the valid bursts: a pooling kernel's padding stays as it was
    filled). ``dst`` may carry an ``offset`` (the block lands there; traced allowed).
    """
    if isinstance(src, GmWindow) and isinstance(dst, Ref):
        return issue(
            core,
            table.DATA_COPY_IN,
            when,
            dst=dst,
            src=src,
            layout=layout,
            kernel=kernel,
            block_n=block_n,
            outside=outside,
        )
    if isinstance(src, Ref) and isinstance(dst, GmWindow):
        if outside != "zero":
            raise ValueError("DataCopy UB -> GM takes no outside=; it writes only the window's valid part.")
        return issue(core, table.DATA_COPY_OUT, when, dst=dst, src=src, atomic=atomic)
    raise ValueError(
        f"DataCopy supports GM->L1, GM->UB and UB->GM; got {type(src).__name__} -> {type(dst).__name__}."
    )


def load2d(
    core: Core, *, dst: Ref, src: Ref, start=(0, 0), valid=None, when=True, transpose=False, shape=None
) -> Core:
    """LoadData 2D: an (R, C) window of a 2-D L1 matrix (ND or NZ) into L0A (ZZ) or L0B (ZN).

    (L0 tiles are stored logically; see ``buffers.py`` for why.)

    ``start`` is the window's (row, col) in the L1 matrix (traced allowed). For L0A the window is
    (M, K); for L0B it is (K, N). ``valid`` = (rows, cols) actually meaningful, for the cost of an
    edge tile; whole fractals move either way. ``transpose``: the window is read as (cols, rows) and
    transposed on the way (ifTranspose).
    """
    instr = table.LOAD2D_L0B if dst.buffer == "L0B" else table.LOAD2D_L0A
    return issue(
        core, instr, when, dst=dst, src=src, start=start, valid=valid, transpose=transpose, shape=shape
    )


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
    k_valid=None,
    when=True,
) -> Core:
    """Load3D: img2col of an NC1HWC0 feature-map tile in L1 straight into L0A fractals (ZZ).

    Fills ``dst`` (an (M, K) tile, ZZ fractals on the hardware) with the (M, K) window at
    (``m_start``, ``k_start``) of the tile's img2col matrix (``geom``);
    ``k_start`` is a multiple of C0. ``pad_top``/``pad_left`` place output position 0's window
    (negative padding = a tile starting inside the map); rows >= ``h_valid`` or cols >= ``w_valid``
    read as bottom/right padding; ``m_valid`` bounds the meaningful rows; ``k_valid`` (traced
    allowed; None = the tile's K) the columns that move, for a kernel whose tile is sized for a
    larger tiling (a tiling bound). Costs whole fractals at the L1->L0A rate.
    """
    return issue(
        core,
        table.LOAD3D,
        when,
        dst=dst,
        src=src,
        geom=geom,
        k_start=k_start,
        m_start=m_start,
        pad_top=pad_top,
        pad_left=pad_left,
        h_valid=h_valid,
        w_valid=w_valid,
        m_valid=m_valid,
        k_valid=k_valid,
    )


def mmad(core: Core, *, dst: Ref, a: Ref, b: Ref, m, n, k, init=False, when=True) -> Core:
    """Mmad: C (L0C, fp32) = A (L0A) @ B (L0B) [+ C], over the leading m x n x k.

    ``init`` (traced allowed) zeroes C first (``cmatrixInitVal``). Entries of C outside m x n are
    untouched; A/B entries outside m, n, k are ignored. The running sum follows the policy's
    ``accumulate``: fp32 (hardware), or an fp16 what-if rounded per Mmad, per K0 step or per
    multiply-add (products exact in fp32; each sum rounded to fp32, then to fp16). Cost: one
    (cube_m x K0 x cube_n) block per cycle (``costs.mmad``).
    """
    return issue(core, table.MMAD, when, dst=dst, a=a, b=b, m=m, n=n, k=k, init=init)


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
    scale=None,
    offset: int = 0,
    when=True,
) -> Core:
    """Fixpipe (910B): L0C (fp32; NZ fractals on chip) -> GM window or L1 (ND), converted to the
    policy's output format and rounding (nearest-even by default), optional bias add (fp32, before the
    activation), ReLU / leaky ReLU / clipped ReLU. ``bias`` is a (1, N') fp32 row in L1, read from
    column ``bias.offset[1]`` on (the bias table load is folded into the Fixpipe's cost: assumed).

    An int32 L0C (int8 operands) leaves as int32, or with ``scale`` dequantised to fp16 / requantised
    to int8 (``offset``: the int8 zero point) by :func:`npu_jax.requantize`'s formula: the
    quantisation stage (``QuantMode_t`` DEQF16 / REQ8 with a scalar ``scale``, VDEQF16 / VREQ8 with a
    (1, N') fp32 row in L1, read like ``bias``).

    ``m``, ``n`` (traced allowed) bound the meaningful part; only that part is written. A GM window
    of rank > 2 takes L0C's rows in row-major order over its leading dims (an (ho, wo) output
    tile of a conv) and its columns along the last dim.
    """
    instr = table.FIXPIPE_GM if isinstance(dst, GmWindow) else table.FIXPIPE_L1
    return issue(
        core,
        instr,
        when,
        dst=dst,
        src=src,
        m=m,
        n=n,
        relu=relu,
        activation=activation,
        alpha=alpha,
        clip=clip,
        bias=bias,
        scale=scale,
        offset=offset,
    )


def l0c_to_ub(
    core: Core,
    *,
    dst: Ref,
    src: Ref,
    m,
    n,
    scale=None,
    offset: int = 0,
    activation: str | None = None,
    alpha: float = 0.0,
    clip: float | None = None,
    when=True,
) -> Core:
    """L0C -> UB on the Vector pipe (910/310P coupled path), converting to ``dst``'s format.

    ``dst`` is a 2-D ND UB allocation; the top-left (M, N) block of L0C lands there. An int32 L0C
    (int8 operands) is copied as int32, or with ``scale`` (a scalar, or a (1, N') fp32 row in UB)
    and ``offset`` dequantised / requantised on the way (the vector unit's deq conversion,
    :func:`npu_jax.requantize`'s formula), with its fused ``activation`` (``relu`` /
    ``leaky_relu`` with slope ``alpha``, then ``clip``) as the 910 / 310P's conversion has.
    """
    kw = dict(scale=scale, offset=offset, activation=activation, alpha=alpha, clip=clip)
    return issue(core, table.L0C_TO_UB, when, dst=dst, src=src, m=m, n=n, **kw)


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
    VRelu VLeakyRelu VExp VAbs VCopy VCast (one source; VCast rounds with ``mode``), VReduceSum (sum of
    all elements into element 0 of ``dst``), VDup (no source: every element of ``dst`` = ``scalar``).
    Cost: one repeat (``hw.vector_repeat_bytes``) per cycle over the widest operand, plus start-up;
    ``count_elems`` (traced allowed) charges only a partial tile (the leading elements, row-major).

    A source may be a :class:`~npu_jax.core.isa.data.View` (a strided block of a stage: the
    instruction's block and repeat strides, e.g. one tap of a pooling window) and the destination a
    contiguous one; the op's shape is then the destination view's.
    """
    if op not in table.VECTOR:
        raise ValueError(f"unknown vector op {op!r}; known: {sorted(VECTOR_OPS)}.")
    return issue(
        core,
        table.VECTOR[op],
        when,
        dst=dst,
        srcs=srcs,
        scalar=scalar,
        alpha=alpha,
        mode=mode,
        count_elems=count_elems,
    )


def vector_lanes(
    core: Core, op: str, dst, *srcs, scalar=None, mode: str = "nearest_even", args: tuple = (), when=True
) -> Core:
    """One vector instruction in the lane form (``lanes.py``): each operand a
    :class:`~npu_jax.core.isa.lanes.Lanes` (its walk of repeats, blocks, strides and mask over a
    flat UB stage), the op any of ``vector.LANE_OPS``; the result written to the destination's lanes
    that run. Cost: ``costs.vector_op`` (the destination's repeats at the op's class's rate)."""
    if op not in table.VECTOR_LANES:
        raise ValueError(f"unknown lane-form vector op {op!r}; known: {sorted(table.VECTOR_LANES)}.")
    return issue(core, table.VECTOR_LANES[op], when, dst=dst, srcs=srcs, scalar=scalar, mode=mode, args=args)


def get_value(core: Core, src, when=True):
    """GetValue: (core, the value) of one UB element (a one-lane ``Lanes``), read on the Scalar pipe."""
    value = lanes.read(core, src)[0, 0]
    return issue(core, table.GET_VALUE, when, src=src), value


def set_value(core: Core, dst, value, when=True) -> Core:
    """SetValue: one UB element (a one-lane ``Lanes``) written on the Scalar pipe."""
    return issue(core, table.SET_VALUE, when, dst=dst, value=value)


def scalar(core: Core, cycles: int, when=True) -> Core:
    """Charge ``cycles`` of scalar work (address arithmetic, loop control) on pipe S."""
    return issue(core, table.SCALAR, when, cycles=cycles)


state.bind_instructions(
    data_copy=data_copy,
    load2d=load2d,
    load3d=load3d,
    mmad=mmad,
    fixpipe=fixpipe,
    l0c_to_ub=l0c_to_ub,
    vector=vector,
    vector_lanes=vector_lanes,
    get_value=get_value,
    set_value=set_value,
    scalar=scalar,
    set_flag=sync.set_flag,
    wait_flag=sync.wait_flag,
    pipe_barrier=sync.pipe_barrier,
)

"""The Cube side of ``asc``: DataCopy GM -> L1 (ND -> NZ), LoadData, Mmad, Fixpipe, and L0C -> UB.

These tensors are tiles with a shape, as the core's L1 / L0 allocations are (NZ in L1, (M, K) in
L0A, (K, N) in L0B, (M, N) fp32 in L0C): the plan pass gives each Cube-side buffer the shape of its
first shaped use (the Nd2Nz copy that fills it, the Mmad that reads or writes it, the copy of an
L0C tile to UB), and every later use must agree. ``data_copy`` here is the public one: it takes the
Cube's copies and hands every other to :func:`npu_jax.asc.ops.data_copy`.
"""

from __future__ import annotations

import dataclasses

from npu_jax.asc import ops, runtime
from npu_jax.asc.runtime import AscError
from npu_jax.asc.tensors import GlobalTensor, LocalTensor
from npu_jax.asc.types import (
    FixpipeParamsV220,
    LoadData2DParams,
    LoadData3DParamsV2,
    MmadParams,
    Nd2NzParams,
    QuantMode,
)
from npu_jax.core.isa.execute import charge
from npu_jax.core.isa.move import Load3DGeometry
from npu_jax.hw import costs
from npu_jax.hw.config import FRACTAL_ROWS
from npu_jax.hw.costs import round_up
from npu_jax.hw.formats import acc_format

UNIT_FLAGS = (0, 2, 3)  # MmadParams.unitFlag: off, on, on and the block's last Mmad


def _shaped(t: LocalTensor, shape: tuple, fmt: str, call: str, role: str):
    """``t`` as a whole tile of ``shape`` (fixed by the plan at its first shaped use): its core operand."""
    run = runtime.current()
    if not isinstance(t, LocalTensor):
        raise TypeError(f"{call}: the {role} must be an asc LocalTensor, got {type(t).__name__}.")
    ops.check_live(t, call, role)
    req = t.request
    need = 1
    for s in shape:
        need *= s
    if need * t.dtype.itemsize > req.nbytes:
        raise AscError(
            f"{call} at {runtime.where()}: the {role} is a {shape} {t.dtype} tile ({need * t.dtype.itemsize} B) but its "
            f"{req.position.name} buffer holds {req.nbytes} B (init_buffer at {req.where})."
        )
    if req.shape is None:
        if run.planning:
            req.shape, req.fmt = tuple(shape), fmt
    elif req.shape != tuple(shape):
        raise NotImplementedError(
            f"asc: the {req.position.name} buffer made at {req.where} is used as a {req.shape} tile and as a "
            f"{tuple(shape)} one at {runtime.where()}; a Cube buffer keeps the shape of its first use "
            f"(see docs/kernels.md)."
        )
    if not (isinstance(t.offset, int) and t.offset == 0):
        raise NotImplementedError(
            f"asc: {call} takes whole Cube tiles, not views (t[off:]); see docs/kernels.md."
        )
    if run.planning:
        return None
    return run.allocs[req.index].at(t.slot)


def _need(t: LocalTensor, buffers: tuple, call: str, role: str):
    if not isinstance(t, LocalTensor) or t.buffer not in buffers:
        where = t.buffer if isinstance(t, LocalTensor) else type(t).__name__
        raise AscError(
            f"{call} at {runtime.where()}: the {role} must be a tensor in {' or '.join(buffers)}, got {where}."
        )


def _c0(t: LocalTensor) -> int:
    return runtime.current().hw.c0(t.dtype.itemsize)


def _int(v, name: str, call: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise AscError(f"{call} at {runtime.where()}: {name} is a positive Python int, got {v!r}.")
    return v


# ---- DataCopy -------------------------------------------------------------------------------------
def data_copy(dst, src, params=None, *, count=None, repeat_params=None, intri_params=None) -> None:
    """``DataCopy(dst, src, count | DataCopyParams | Nd2NzParams)``: GM -> UB / L1, UB -> GM, UB -> UB,
    GM (ND) -> L1 (NZ) with ``Nd2NzParams``, and on coupled chips L0C (CO1) -> UB (CO2). pyasc's
    keywords: ``count=``, ``repeat_params=``, ``intri_params=``."""
    given = [v for v in (params, count, repeat_params, intri_params) if v is not None]
    if len(given) != 1:
        raise TypeError("data_copy(dst, src, count | DataCopyParams | Nd2NzParams): give one of them.")
    params = given[0]
    if isinstance(params, Nd2NzParams):
        return _nd2nz(dst, src, params)
    if isinstance(src, LocalTensor) and src.buffer == "L0C":
        return _co1_to_co2(dst, src)
    return ops.data_copy(dst, src, params)


def _nd2nz(dst: LocalTensor, src: GlobalTensor, p: Nd2NzParams) -> None:
    """GM rows (``n_value`` x ``d_value``, ``src_d_value`` apart) into an L1 NZ tile (C1, rows, C0)."""
    call = "DataCopy(Nd2Nz)"
    _need(dst, ("L1",), call, "destination")
    if not isinstance(src, GlobalTensor):
        raise AscError(f"{call} at {runtime.where()}: Nd2Nz copies from GM, got {type(src).__name__}.")
    if p.nd_num != 1 or p.dst_nz_n_stride not in (0, 1):
        raise NotImplementedError(
            "asc: Nd2NzParams with nd_num != 1 or dst_nz_n_stride != 1 is not supported yet; see docs/kernels.md."
        )
    n, d = _int(p.n_value, "n_value", call), _int(p.d_value, "d_value", call)
    c0 = _c0(dst)
    rows = p.dst_nz_c0_stride or round_up(n, FRACTAL_ROWS)
    if rows < n or rows % FRACTAL_ROWS or d % c0:
        raise AscError(
            f"{call} at {runtime.where()}: the NZ tile holds {rows} rows (dst_nz_c0_stride) of {d} columns; rows must "
            f"be >= n_value {n} and a multiple of {FRACTAL_ROWS}, columns a multiple of C0 = {c0}."
        )
    ref = _shaped(dst, (d // c0, rows, c0), "NZ", call, "destination")
    pitch = p.src_d_value or d
    win = ops.gm_window(src, d, call, "MTE2", write=False, rows=n, pitch=pitch)
    if ref is not None and win is not None:
        ops.issue(lambda c: c.data_copy(dst=ref, src=win, layout="nz"))


def _co1_to_co2(dst: LocalTensor, src: LocalTensor) -> None:
    """L0C -> UB on the Vector pipe (coupled chips: 910, 310P), converted to ``dst``'s dtype."""
    call = "DataCopy(CO1 -> CO2)"
    run = runtime.current()
    if not run.hw.coupled:
        raise AscError(
            f"{call} at {runtime.where()}: {run.hw.name} moves L0C out with fixpipe (no L0C -> UB path); "
            f"use asc.fixpipe."
        )
    _need(dst, ("UB",), call, "destination")
    shape = src.request.shape
    if shape is None:
        raise AscError(f"{call} at {runtime.where()}: the L0C tensor holds nothing yet (no mmad wrote it).")
    c = _shaped(src, shape, "NZ", call, "source")
    u = _shaped(dst, shape, "ND", call, "destination")
    if c is not None and u is not None:
        ops.issue(lambda core: core.l0c_to_ub(dst=u, src=c, m=shape[0], n=shape[1]))


# ---- LoadData, Load3D -----------------------------------------------------------------------------
def load_data(dst: LocalTensor, src: LocalTensor, params: LoadData2DParams) -> None:
    """``LoadData(dst, src, LoadData2DParams)``: L1 (NZ) -> L0A / L0B. One call fills the whole
    destination tile from fractal ``start_index`` of the source (fractals run down a column block of
    the NZ tile, then across); ``repeat_times`` is the destination's fractal count."""
    call = "LoadData"
    if isinstance(params, LoadData3DParamsV2):
        return load_3d(dst, src, params)
    _need(dst, ("L0A", "L0B"), call, "destination")
    _need(src, ("L1",), call, "source")
    if not isinstance(params, LoadData2DParams):
        raise TypeError("load_data(dst, src, asc.LoadData2DParams(...) | asc.LoadData3DParamsV2(...)).")
    if params.if_transpose and dst.buffer != "L0B":
        raise NotImplementedError(
            "asc.load_data with if_transpose=True fills L0B only (a B stored [N, K]); see docs/kernels.md."
        )
    if params.addr_mode:
        raise NotImplementedError(
            f"asc.load_data at {runtime.where()}: addr_mode=1 (a decrementing source) is the GM -> L1 path's; see "
            "docs/kernels.md."
        )
    whole = params.src_stride in (0, 1) and params.dst_gap == 0 and _at(dst, 0) and _at(src, 0)
    if not whole:
        return _load_fractals(dst, src, params)
    run = runtime.current()
    if dst.request.shape is None or src.request.shape is None:
        if run.planning:  # shapes come from the copy that fills src and the mmad that reads dst
            return
        raise AscError(
            f"{call} at {runtime.where()}: its tiles have no shape (no Nd2Nz copy or mmad uses them)."
        )
    rows_dst, cols_dst = dst.request.shape
    _, rows_src, c0 = src.request.shape
    frac = (
        (rows_dst // FRACTAL_ROWS) * (cols_dst // _c0(dst))
        if dst.buffer == "L0A"
        else ((rows_dst // _c0(dst)) * (cols_dst // FRACTAL_ROWS))
    )
    if params.repeat_times not in (0, frac):
        raise NotImplementedError(
            f"asc: load_data moves whole destination tiles ({frac} fractals); repeat_times={params.repeat_times} at "
            f"{runtime.where()} is not supported yet (see docs/kernels.md)."
        )
    blocks = rows_src // FRACTAL_ROWS
    start = params.start_index
    row, col = (start % blocks) * FRACTAL_ROWS, (start // blocks) * c0
    d = _shaped(dst, (rows_dst, cols_dst), dst.request.fmt, call, "destination")
    s = _shaped(src, src.request.shape, "NZ", call, "source")
    tr = bool(params.if_transpose)  # the (N, K) window at (row, col) of an NZ B^T, turned into (K, N)
    if d is not None and s is not None:
        ops.issue(lambda core: core.load2d(dst=d, src=s, start=(row, col), transpose=tr))


def _at(t: LocalTensor, off: int) -> bool:
    return isinstance(t.offset, int) and t.offset == off


def _load_fractals(dst: LocalTensor, src: LocalTensor, p: LoadData2DParams) -> None:
    """LoadData2D as the vendor writes it on the 910B: ``repeat_times`` fractals, the r-th read from
    source fractal ``start_index + r * src_stride`` (counted from the source view, down the NZ tile's
    column blocks, then across) and written to destination fractal ``r * (dst_gap + 1)`` (from the
    destination view: L0A's fractals M-block-major (ZZ), L0B's K-block-major). The vendor's Nz -> Zz
    split (one call per 16 rows of A, ``src_stride`` = the tile's row blocks) and Nz -> Zn (B with
    ``if_transpose``, one call per 16 rows of K) are such walks: the fractals of one call lie along one
    row (or column) of fractals of both tiles, one window, one instruction."""
    call = "LoadData"
    run = runtime.current()
    if dst.request.shape is None or src.request.shape is None:
        if run.planning:
            return
        raise AscError(
            f"{call} at {runtime.where()}: its tiles have no shape (no Nd2Nz copy or mmad uses them)."
        )
    c0 = _c0(dst)
    rows_d, cols_d = dst.request.shape
    _, rows_s, _ = src.request.shape
    if dst.buffer == "L0B" and (not p.if_transpose or c0 != FRACTAL_ROWS):
        raise NotImplementedError(
            f"asc.load_data at {runtime.where()}: a fractal walk into L0B is the Nz -> Zn load of 2-byte data "
            f"(if_transpose=True, the vendor's: 'only b16'); see docs/kernels.md."
        )
    frac = FRACTAL_ROWS * c0
    for t, role in ((dst, "destination"), (src, "source")):
        if not isinstance(t.offset, int) or t.offset % frac:
            raise AscError(
                f"{call} at {runtime.where()}: the {role} view starts {t.offset} elements in; a fractal walk starts "
                f"on a whole fractal ({frac} elements of {t.dtype})."
            )
    n = _int(p.repeat_times, "repeat_times", call)
    blocks_s = rows_s // FRACTAL_ROWS
    per_row_d = cols_d // (c0 if dst.buffer == "L0A" else FRACTAL_ROWS)
    src_at = [
        (f % blocks_s * FRACTAL_ROWS, f // blocks_s * c0)
        for f in (src.offset // frac + p.start_index + r * p.src_stride for r in range(n))
    ]
    dst_at = [
        (f // per_row_d * FRACTAL_ROWS, f % per_row_d * (c0 if dst.buffer == "L0A" else FRACTAL_ROWS))
        for f in (dst.offset // frac + r * (p.dst_gap + 1) for r in range(n))
    ]
    steps = {(b[0] - a[0], b[1] - a[1]) for seq in (src_at, dst_at) for a, b in zip(seq, seq[1:])}
    if len(steps) > 1 or (steps and steps.pop() not in ((0, c0), (FRACTAL_ROWS, 0))):
        raise NotImplementedError(
            f"asc.load_data at {runtime.where()}: fractals {src_at} -> {dst_at} do not lie along one row or column of "
            f"fractals of both tiles; such a walk is not supported (see docs/kernels.md)."
        )
    along_row = n == 1 or dst_at[1][1] != dst_at[0][1]
    shape = (FRACTAL_ROWS, n * c0) if along_row else (n * FRACTAL_ROWS, c0)
    if dst_at[0][0] + shape[0] > rows_d or dst_at[0][1] + shape[1] > cols_d:
        raise AscError(
            f"{call} at {runtime.where()}: {n} fractals from {dst_at[0]} leave the {dst.request.shape} tile."
        )
    d = _shaped(dataclasses.replace(dst, offset=0), dst.request.shape, dst.request.fmt, call, "destination")
    s = _shaped(dataclasses.replace(src, offset=0), src.request.shape, "NZ", call, "source")
    if d is not None and s is not None:
        d = d.alloc.at(d.stage, dst_at[0])
        ops.issue(lambda core: core.load2d(dst=d, src=s, start=src_at[0], shape=shape))


def load_3d(dst: LocalTensor, src: LocalTensor, params: LoadData3DParamsV2) -> None:
    """``LoadData(dst, src, LoadData3DParamsV2)``: img2col of an NC1HWC0 feature-map tile in L1
    (``channel_size`` channels of ``l1_h`` x ``l1_w``, filled by a plain ``data_copy`` of its C1 x H x W
    x C0 elements) into an L0A tile of ``m_extension`` x ``k_extension``: the window at (``m_start_pt``,
    ``k_start_pt``) of the img2col matrix (row = output position oh * out_w + ow, column = ((c1 * kh +
    i) * kw + j) * C0 + c0), zero where the filter hangs over ``pad_list`` (left, right, top, bottom)."""
    call = "LoadData(3D)"
    _need(dst, ("L0A",), call, "destination")
    _need(src, ("L1",), call, "source")
    if not isinstance(params, LoadData3DParamsV2):
        raise TypeError("load_3d(dst, src, asc.LoadData3DParamsV2(...)).")
    p = params
    for name in (
        "en_transpose",
        "en_small_k",
        "pad_value",
        "filter_size_w",
        "filter_size_h",
        "f_matrix_ctrl",
    ):
        if getattr(p, name):
            raise NotImplementedError(
                f"asc.load_3d with {name}={getattr(p, name)!r} is not supported yet; see docs/kernels.md."
            )
    vals = {
        n: _int(getattr(p, n), n, call)
        for n in (
            "l1_h", "l1_w", "channel_size", "k_extension", "m_extension", "stride_w", "stride_h",
            "filter_w", "filter_h", "dilation_filter_w", "dilation_filter_h",
        )
    }  # fmt: skip
    pads = tuple(p.pad_list)
    if len(pads) != 4 or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in pads):
        raise AscError(
            f"{call} at {runtime.where()}: pad_list is 4 ints >= 0 (left, right, top, bottom), got {pads}."
        )
    left, right, top, _ = pads
    c0 = _c0(src)
    if vals["channel_size"] % c0 or vals["k_extension"] % c0:
        raise AscError(
            f"{call} at {runtime.where()}: channel_size ({vals['channel_size']}) and k_extension "
            f"({vals['k_extension']}) are multiples of C0 = {c0}."
        )
    kh, kw = vals["filter_h"], vals["filter_w"]
    span_w = (kw - 1) * vals["dilation_filter_w"] + 1
    out_w = (vals["l1_w"] + left + right - span_w) // vals["stride_w"] + 1
    if out_w < 1:
        raise AscError(
            f"{call} at {runtime.where()}: the filter ({span_w} wide, dilated) is wider than the padded map."
        )
    k_tile = vals["channel_size"] // c0 * kh * kw * c0
    ks = p.k_start_pt
    if isinstance(ks, int) and (ks < 0 or ks % c0 or ks + vals["k_extension"] > k_tile):
        raise AscError(
            f"{call} at {runtime.where()}: k_start_pt {ks} + k_extension {vals['k_extension']} leave the img2col "
            f"matrix's {k_tile} columns (k_start_pt a multiple of C0 = {c0})."
        )
    geom = Load3DGeometry(
        kh,
        kw,
        (vals["stride_h"], vals["stride_w"]),
        (vals["dilation_filter_h"], vals["dilation_filter_w"]),
        out_w,
    )
    s = _shaped(src, (vals["channel_size"] // c0, vals["l1_h"], vals["l1_w"], c0), "NC1HWC0", call, "source")
    m = round_up(vals["m_extension"], FRACTAL_ROWS)
    d = _shaped(dst, (m, vals["k_extension"]), "ZZ", call, "destination")
    if d is not None and s is not None:
        ops.issue(
            lambda core: core.load3d(
                dst=d, src=s, geom=geom, k_start=ks, m_start=p.m_start_pt, pad_top=top, pad_left=left,
                m_valid=vals["m_extension"],
            )
        )  # fmt: skip


# ---- Mmad -----------------------------------------------------------------------------------------
def mmad(c: LocalTensor, a: LocalTensor, b: LocalTensor, params: MmadParams) -> None:
    """``Mmad(c, a, b, MmadParams(m, n, k, unit_flag, cmatrix_source, cmatrix_init_val))``: C (L0C, fp32)
    = A (L0A) @ B (L0B), plus C unless ``cmatrix_init_val`` (a traced bool is fine: ``k_step == 0``)."""
    call = "Mmad"
    _need(c, ("L0C",), call, "destination (c)")
    _need(a, ("L0A",), call, "left operand (a)")
    _need(b, ("L0B",), call, "right operand (b)")
    if not isinstance(params, MmadParams):
        raise TypeError("mmad(c, a, b, asc.MmadParams(m, n, k, ...)).")
    if params.cmatrix_source:
        raise NotImplementedError(
            "asc.mmad with cmatrix_source (bias from C2) is not supported yet; see docs/kernels.md."
        )
    if params.unit_flag not in UNIT_FLAGS:
        raise AscError(
            f"{call} at {runtime.where()}: unit_flag is 0 (off), 2 (on) or 3 (on, and the last Mmad into this L0C "
            f"block: a Fixpipe with unit_flag 3 drains it unit by unit), got {params.unit_flag!r}."
        )
    acc = acc_format(a.dtype.fmt)  # int8 x int8 sums exactly into int32, floats into float32
    if c.dtype.fmt != acc:
        raise AscError(
            f"{call} at {runtime.where()}: L0C accumulates {a.dtype} products in {acc}; c is {c.dtype}."
        )
    m, n, k = (_int(v, name, call) for v, name in ((params.m, "m"), (params.n, "n"), (params.k, "k")))
    c0 = _c0(a)
    mm, nn, kk = round_up(m, FRACTAL_ROWS), round_up(n, FRACTAL_ROWS), round_up(k, c0)
    if c.request.shape is not None and b.request.shape is not None:  # an edge block in whole tiles
        mm, nn = max(mm, c.request.shape[0]), max(nn, c.request.shape[1])
    c.request.unit_mmad = (m, n, k, a.dtype.itemsize) if params.unit_flag == 3 else None
    cr = _shaped(c, (mm, nn), "NZ", call, "destination (c)")
    ar = _shaped(a, (mm, kk), "ZZ", call, "left operand (a)")
    br = _shaped(b, (kk, nn), "ZN", call, "right operand (b)")
    init = params.cmatrix_init_val
    if cr is not None:
        ops.issue(lambda core: core.mmad(dst=cr, a=ar, b=br, m=m, n=n, k=k, init=init))


# ---- Fixpipe --------------------------------------------------------------------------------------
def bias_row(t: LocalTensor, call: str = "bias") -> None:
    """Make ``t``'s L1 buffer a (1, N) float32 row of bias values (the plan pass; before its first copy)."""
    _need(t, ("L1",), call, "bias")
    if t.dtype.fmt != "fp32":
        raise NotImplementedError(f"asc: a bias row is float32 (got {t.dtype}); see docs/kernels.md.")
    req = t.request
    if req.shape is None and runtime.current().planning:
        req.shape, req.fmt = (1, req.nbytes // 4), "ND"
    elif req.shape is None or len(req.shape) != 2 or req.shape[0] != 1:
        raise AscError(
            f"{call} at {runtime.where()}: the bias buffer (init_buffer at {req.where}) is not a bias row."
        )


def fixpipe(
    dst: GlobalTensor, src: LocalTensor, params: FixpipeParamsV220, bias: LocalTensor | None = None
) -> None:
    """``Fixpipe(dst_gm, c, FixpipeParamsV220)`` (910B): an ``m_size`` x ``n_size`` block of L0C into GM
    rows ``dst_stride`` elements apart, converted per ``quant_pre`` (round to nearest even), ReLU if
    ``relu_en``. ``bias`` (the emulator's: a float32 row in L1, from ``bias[offset:]`` on) is added to
    every row in fp32 before the ReLU and the conversion: the chip's bias table (C1 -> C2 -> BT) with its
    load folded into the Fixpipe, as the built-in kernels' fused bias is."""
    call = "Fixpipe"
    _need(src, ("L0C",), call, "source")
    bref = None
    if bias is not None:
        bias_row(bias, call)
        ops.check_live(bias, call, "bias")
        width = bias.request.shape[1] if bias.request.shape else None
        if width is not None and isinstance(bias.offset, int) and bias.offset + params.n_size > width:
            raise AscError(
                f"{call} at {runtime.where()}: bias[{bias.offset}:] holds {width - bias.offset} values, n_size is "
                f"{params.n_size}."
            )
        if not runtime.current().planning:
            bref = runtime.current().allocs[bias.request.index].at(bias.slot, (0, bias.offset))
    if not isinstance(params, FixpipeParamsV220):
        raise TypeError("fixpipe(dst, c, asc.FixpipeParamsV220(...)).")
    run = runtime.current()
    if run.hw.coupled:
        raise AscError(
            f"{call} at {runtime.where()}: {run.hw.name} has no Fixpipe (coupled data path): copy L0C (CO1) to UB "
            f"(CO2) with asc.data_copy and out with MTE3."
        )
    if params.nd_num != 1:
        raise NotImplementedError("asc.fixpipe with nd_num != 1 is not supported yet; see docs/kernels.md.")
    unit = getattr(src.request, "unit_mmad", None) if params.unit_flag else None
    if params.unit_flag and (params.unit_flag != 3 or unit is None):
        raise AscError(
            f"{call} at {runtime.where()}: a Fixpipe with unit_flag drains an L0C block whose last Mmad had "
            f"unit_flag 3 (MmadParams.unit_flag); got unit_flag {params.unit_flag!r} on a block with "
            f"{'no such Mmad' if unit is None else 'one'}."
        )
    if not isinstance(dst, GlobalTensor):
        raise NotImplementedError("asc.fixpipe into L1 is not supported yet (GM only); see docs/kernels.md.")
    quant = params.quant_pre if isinstance(params.quant_pre, QuantMode) else None
    gm_fmt = (dst.dtype or (dst.addr.dtype if dst.addr else None)).fmt
    l0c_fmt = src.dtype.fmt
    want = None if quant is None else quant.target(l0c_fmt)
    if want != gm_fmt:
        raise AscError(
            f"{call} at {runtime.where()}: quant_pre {params.quant_pre} converts {l0c_fmt} to {want or '?'} but the GM "
            f"tensor holds {gm_fmt}; use the QuantMode of the destination's dtype (from float: F322F16 for half, "
            f"NoQuant for float; from int32: DEQF16 for half, REQ8 for int8, NoQuant for int32)."
        )
    scaled = {"scale": float(params.deq_scalar), "offset": 0} if quant.scales else {}
    m, n = _int(params.m_size, "m_size", call), _int(params.n_size, "n_size", call)
    shape = src.request.shape
    if shape is None:
        if run.planning:
            return
        raise AscError(f"{call} at {runtime.where()}: the L0C tensor holds nothing yet (no mmad wrote it).")
    if m > shape[0] or n > shape[1]:
        raise AscError(f"{call} at {runtime.where()}: {m} x {n} is larger than the L0C tile {shape}.")
    if params.src_stride not in (0, shape[0]):  # L0C's column blocks lie M (rounded to 16) rows apart
        raise NotImplementedError(
            f"asc.fixpipe with src_stride={params.src_stride} (the L0C tile is {shape[0]} rows: src_stride is its "
            f"rows or 0) is not supported; see docs/kernels.md."
        )
    c = _shaped(src, shape, "NZ", call, "source")
    win = ops.gm_window(dst, n, call, "FIX", write=True, rows=m, pitch=params.dst_stride or n)
    if c is not None and win is not None:
        ops.issue(
            lambda core: core.fixpipe(
                dst=win, src=c, m=m, n=n, relu=bool(params.relu_en), bias=bref, **scaled
            )
        )
        if unit is not None:  # unit flag: the Fixpipe drains the last Mmad's units as they complete
            wait = costs.unit_flag_fixpipe_wait(costs.HwNumbers.of(run.hw), m, n, *unit)
            if wait:
                ops.issue(lambda core: charge(core, "FIX", wait, "Fixpipe"))

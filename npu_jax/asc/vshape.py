"""The vector calls whose destination is not lane for lane their sources': Brcb, Compare and Select,
CreateVecIndex, Gather, Transpose, Copy (the reductions: ``reduce.py``).

Each builds the walk of every operand (``core/isa/lanes.py``) from the vendor's arguments and issues
one instruction of the lane form with the op's arithmetic (``core/isa/vecops.SHAPED``); the
whole-tensor ReduceSum / ReduceMax / ReduceMin, which the vendor implements in software, issue the
instructions it is built of (a per-repeat reduction into the work tensor, then one across the repeats),
so their cost is theirs. Layouts, units and orders are the vendor's (asc-devkit's pages, quoted in
docs/kernels.md): a WholeReduceMax writes [value, index] pairs, the index's bits in a value's slot;
Compare packs one bit a lane, least significant first; Gather's offsets count bytes.
"""

from __future__ import annotations

import warnings

import numpy as np

from npu_jax.asc import runtime
from npu_jax.asc.operands import Form, check_ub, issue_lanes, mask_arg, parse, patterns, scalar_of, static_int
from npu_jax.asc.ops import AscWarning
from npu_jax.asc.reduce import floats_only, issue_shaped, pattern_of
from npu_jax.asc.runtime import AscError
from npu_jax.asc.tensors import LocalTensor
from npu_jax.asc.types import (
    CMPMODE,
    SELMODE,
    BinaryRepeatParams,
    BrcbRepeatParams,
    CopyRepeatParams,
    UnaryRepeatParams,
    uint8,
)
from npu_jax.core.isa import lanes as L


# ---- Brcb -------------------------------------------------------------------------------------------
def brcb(dst: LocalTensor, src: LocalTensor, repeat_times: int, repeat_params: BrcbRepeatParams) -> None:
    """``Brcb(dst, src, repeat_times, BrcbRepeatParams(dst_blk_stride, dst_rep_stride))``: each of 8
    source elements a repeat fills one 32-B block of dst (V): the way a row's max or sum is spread back
    over the row. The source is read contiguously (8 a repeat)."""
    if not isinstance(repeat_params, BrcbRepeatParams):
        raise TypeError(
            f"asc.brcb: repeat_params is an asc.BrcbRepeatParams, got {type(repeat_params).__name__}."
        )
    check_ub(dst, "brcb", "destination")
    check_ub(src, "brcb", "source")
    if dst.dtype.fmt != src.dtype.fmt:
        raise AscError(
            f"asc.brcb at {runtime.where()}: dst and src are one type, got {dst.dtype} and {src.dtype}."
        )
    r = static_int(repeat_times, "brcb", "repeat_times", 0, L.MAX_REPEATS)
    if r == 0:
        return
    per = L.per_block(dst.dtype.fmt)
    blk = static_int(repeat_params.dst_blk_stride, "brcb", "dst_blk_stride", 0) or 1
    rep = static_int(repeat_params.dst_rep_stride, "brcb", "dst_rep_stride", 0)
    j, e = np.divmod(np.arange(8 * per), per)
    idx = (np.arange(r)[:, None] * rep + j[None, :] * blk) * per + e[None, :]
    sp = pattern_of(np.arange(r)[:, None] * 8 + np.arange(8)[None, :])
    issue_shaped("VBrcb", "brcb", dst, pattern_of(idx), [src], [sp], per=per)


# ---- Compare, Select ----------------------------------------------------------------------------------
def _cmp_mode(m) -> int:
    if not isinstance(m, CMPMODE):
        raise TypeError(f"asc.compare: cmp_mode is an asc.CMPMODE (LT, GT, EQ, LE, GE, NE), got {m!r}.")
    return m.value


def _whole_repeats(count: int, t: LocalTensor, call: str) -> int:
    nbytes = count * t.dtype.itemsize
    if nbytes % 256:
        warnings.warn(
            f"{call} at {runtime.where()}: {count} elements of {t.dtype} = {nbytes} B is not a multiple of 256 B; the "
            f"vendor's count form compares whole 256-B repeats only, and so does the emulator ({nbytes // 256 * 256} B).",
            AscWarning,
            stacklevel=3,
        )
    return nbytes // 256


def _cmp_common(call, op, dst, srcs, cmp, form: Form, strides, scalar=None):
    check_ub(dst, call, "destination")
    for s in srcs:
        check_ub(s, call, "source")
    if dst.dtype.fmt not in ("uint8", "int8"):
        raise AscError(
            f"asc.{call} at {runtime.where()}: the destination is a uint8 (or int8) bit mask, got {dst.dtype}."
        )
    if srcs[0].dtype.fmt not in ("fp16", "fp32", "int32"):
        raise AscError(
            f"asc.{call} at {runtime.where()}: compares half, float or int32, got {srcs[0].dtype}."
        )
    if srcs[0].dtype.fmt == "int32" and cmp != CMPMODE.EQ.value:
        raise AscError(f"asc.{call} at {runtime.where()}: int32 compares only by CMPMODE.EQ (the vendor's).")
    lanes = L.lanes_per_repeat(srcs[0].dtype.fmt)
    r = _whole_repeats(form.count, srcs[0], call) if form.count is not None else form.repeats
    if r == 0:
        return
    on = np.ones((r, lanes), bool)  # the mask is a reserved parameter on the 910B and the 310P: every lane
    sps = [
        L.repeat_pattern(
            s.dtype.fmt,
            lanes,
            r,
            static_int(b, call, "a block stride"),
            static_int(p, call, "a repeat stride"),
            on,
        )
        for s, (b, p) in zip(srcs, strides)
    ]
    dp = pattern_of(
        np.arange(r)[:, None] * (lanes // 8) + np.arange(lanes // 8)[None, :]
    )  # packed, repeat after repeat
    s = None if scalar is None else scalar_of(scalar, srcs[0].dtype.fmt)
    issue_shaped(
        op,
        call,
        dst.reinterpret_cast(uint8) if dst.dtype.fmt != "uint8" else dst,
        dp,
        list(srcs),
        sps,
        scalar=s,
        cmp=cmp,
    )


def compare(*args, **kwargs) -> None:
    """``Compare(dst, src0, src1, cmp_mode, count | mask, repeat_times, BinaryRepeatParams)``: one bit a
    lane into dst (uint8), bit i % 8 of byte i / 8 set where src0 REL src1 (V). On the 910B and the 310P
    the mask is a reserved parameter (every lane compares) and the count form takes whole 256-B repeats;
    the bits of consecutive repeats are packed together. NE with a NaN gives 0 (the vendor's note)."""
    if len(args) >= 3 and not isinstance(args[2], LocalTensor) or "dst" not in kwargs and len(args) < 4:
        raise NotImplementedError(
            "asc.compare into the CmpMask register (no dst) is not supported; compare into a uint8 tensor "
            "(see docs/kernels.md)."
        )
    dst, src0, src1, cmp_mode, *rest = args
    form = parse("compare", rest, kwargs, BinaryRepeatParams)
    p = form.params or BinaryRepeatParams()
    strides = [(p.src0_blk_stride, p.src0_rep_stride), (p.src1_blk_stride, p.src1_rep_stride)]
    _cmp_common("compare", "VCompare", dst, (src0, src1), _cmp_mode(cmp_mode), form, strides)


def compares(dst: LocalTensor, src0: LocalTensor, src1_scalar, cmp_mode, *args, **kwargs) -> None:
    """``Compares(dst, src0, scalar, cmp_mode, count | mask, repeat_times, UnaryRepeatParams)``
    (``CompareScalar``): :func:`compare` against a scalar."""
    form = parse("compares", args, kwargs, UnaryRepeatParams)
    p = form.params or UnaryRepeatParams()
    _cmp_common(
        "compares",
        "VCompares",
        dst,
        (src0,),
        _cmp_mode(cmp_mode),
        form,
        [(p.src_blk_stride, p.src_rep_stride)],
        src1_scalar,
    )


compare_scalar = compares


def select(
    dst: LocalTensor, sel_mask: LocalTensor, src0: LocalTensor, src1, sel_mode: SELMODE, *args, **kwargs
) -> None:
    """``Select(dst, sel_mask, src0, src1, sel_mode, count | mask, repeat_times, BinaryRepeatParams)``:
    dst = src0 where the mask bit is 1, else src1 (V). ``VSEL_CMPMASK_SPR`` (0) reuses the first 256 /
    sizeof(T) bits on every repeat; ``VSEL_TENSOR_SCALAR_MODE`` (1, src1 a scalar) and
    ``VSEL_TENSOR_TENSOR_MODE`` (2) walk on through sel_mask repeat after repeat. sel_mask is uint8 /
    uint16 / uint32 bits, lane i at bit i of the little-endian whole (Compare's)."""
    if not isinstance(sel_mode, SELMODE):
        raise TypeError(f"asc.select: sel_mode is an asc.SELMODE, got {sel_mode!r}.")
    scalar_src = not isinstance(src1, LocalTensor)
    if scalar_src != (sel_mode == SELMODE.VSEL_TENSOR_SCALAR_MODE):
        raise AscError(
            f"asc.select at {runtime.where()}: VSEL_TENSOR_SCALAR_MODE takes a scalar src1, the other modes a tensor."
        )
    form = parse("select", args, kwargs, BinaryRepeatParams)
    tensors = (dst, src0) + (() if scalar_src else (src1,))
    floats_only("select", *tensors)
    check_ub(sel_mask, "select", "sel_mask")
    if sel_mask.dtype.fmt not in ("uint8", "uint16", "uint32", "int8", "int16", "int32"):
        raise AscError(
            f"asc.select at {runtime.where()}: sel_mask holds bits (uint8 / uint16 / uint32), got {sel_mask.dtype}."
        )
    lanes = L.lanes_per_repeat(dst.dtype.fmt)
    if form.count is not None:
        pats = [L.count_pattern(form.count, lanes)] * len(tensors)
        r = pats[0].shape[0]
        if form.count == 0:
            return
    else:
        p = form.params or BinaryRepeatParams()
        strides = [(p.dst_blk_stride, p.dst_rep_stride), (p.src0_blk_stride, p.src0_rep_stride)]
        strides += [] if scalar_src else [(p.src1_blk_stride, p.src1_rep_stride)]
        pats, empty = patterns(form, tensors, strides, "select")
        r = pats[0].shape[0]
        if empty:
            return
    words = lanes // (8 * sel_mask.dtype.itemsize)
    step = 0 if sel_mode == SELMODE.VSEL_CMPMASK_SPR else words
    mp = pattern_of(np.arange(r)[:, None] * step + np.arange(words)[None, :])
    srcs = [sel_mask, src0] + ([] if scalar_src else [src1])
    s = scalar_of(src1, dst.dtype.fmt) if scalar_src else None
    op = "VSelects" if scalar_src else "VSelect"
    issue_shaped(
        op, "select", dst, pats[0], srcs, [mp] + list(pats[1:]), scalar=s, mode=sel_mode.value, lanes=lanes
    )


# ---- CreateVecIndex, Gather --------------------------------------------------------------------------
def create_vec_index(dst: LocalTensor, first_value, *args, **kwargs) -> None:
    """``CreateVecIndex(dst, first_value, count | mask, repeat_times, dst_blk_stride, dst_rep_stride)``:
    dst = first_value, first_value + 1, ... over the lanes in order (V; half, float, int16, int32)."""
    check_ub(dst, "create_vec_index", "destination")
    if dst.dtype.fmt not in ("fp16", "fp32", "int16", "int32"):
        raise AscError(
            f"asc.create_vec_index at {runtime.where()}: takes half, float, int16 or int32, got {dst.dtype}."
        )
    lanes = L.lanes_per_repeat(dst.dtype.fmt)
    args = list(args)
    if len(args) == 1 or "count" in kwargs:
        count = static_int(args[0] if args else kwargs["count"], "create_vec_index", "count")
        if count == 0:
            return
        p = L.count_pattern(count, lanes)
    else:
        names = ["mask", "repeat_times", "dst_blk_stride", "dst_rep_stride"]
        v = dict(zip(names, args), **kwargs)
        form = Form(
            mask=mask_arg("create_vec_index", v["mask"]),
            repeats=static_int(v["repeat_times"], "create_vec_index", "repeat_times", 0, 255),
        )
        (p,), empty = patterns(form, (dst,), [(v["dst_blk_stride"], v["dst_rep_stride"])], "create_vec_index")
        if empty:
            return
    issue_shaped(
        "VCreateVecIndex",
        "create_vec_index",
        dst,
        p,
        [],
        [],
        first=scalar_of(first_value, dst.dtype.fmt),
        lanes=lanes,
    )


def gather(
    dst: LocalTensor, src: LocalTensor, src_offset: LocalTensor, src_base_addr: int, *args, **kwargs
) -> None:
    """``Gather(dst, src, src_offset, src_base_addr, count | mask, repeat_times, dst_rep_stride)``:
    dst[i] = src[(src_base_addr + src_offset[i]) / sizeof(T)], the offsets uint32 BYTES (V; 5 elements a
    cycle). An offset past src reads its last element (the chip's is undefined)."""
    check_ub(dst, "gather", "destination")
    check_ub(src, "gather", "source")
    check_ub(src_offset, "gather", "offsets")
    if src_offset.dtype.fmt != "uint32":
        raise AscError(
            f"asc.gather at {runtime.where()}: src_offset is a uint32 tensor of byte offsets, got {src_offset.dtype}."
        )
    if dst.dtype.fmt != src.dtype.fmt:
        raise AscError(
            f"asc.gather at {runtime.where()}: dst and src are one type, got {dst.dtype} and {src.dtype}."
        )
    base = static_int(src_base_addr, "gather", "src_base_addr")
    lanes = L.lanes_per_repeat(dst.dtype.fmt)
    args = list(args)
    if len(args) == 1 or "count" in kwargs:
        count = static_int(args[0] if args else kwargs["count"], "gather", "count")
        if count == 0:
            return
        dp = L.count_pattern(count, lanes)
    else:
        names = ["mask", "repeat_times", "dst_rep_stride"]
        v = dict(zip(names, args), **kwargs)
        form = Form(
            mask=mask_arg("gather", v["mask"]),
            repeats=static_int(v["repeat_times"], "gather", "repeat_times", 0, 255),
        )
        (dp,), empty = patterns(form, (dst,), [(1, v["dst_rep_stride"])], "gather")
        if empty:
            return
    r = dp.shape[0]
    op_p = pattern_of(np.arange(r * lanes).reshape(r, lanes), dp.on)
    sp = pattern_of(np.arange(src.length))
    issue_shaped(
        "VGather", "gather", dst, dp, [src, src_offset], [sp, op_p], base=base, isz=src.dtype.itemsize
    )


# ---- Transpose, Copy --------------------------------------------------------------------------------
def transpose(dst: LocalTensor, src: LocalTensor, *args, **kwargs) -> None:
    """``Transpose(dst, src)``: one 16 x 16 matrix of 2-byte elements transposed (V; 2 cycles). The
    enhanced form ``(dst, src, shared_tmp_buffer, TransposeParamsExt)`` is not supported."""
    if args or kwargs:
        raise NotImplementedError(
            "asc.transpose with TransposeParamsExt (NCHW <-> NHWC) is not supported; the plain 16 x 16 form is "
            "(see docs/kernels.md)."
        )
    check_ub(dst, "transpose", "destination")
    check_ub(src, "transpose", "source")
    if dst.dtype.itemsize != 2 or src.dtype.fmt != dst.dtype.fmt:
        raise AscError(
            f"asc.transpose at {runtime.where()}: a 16 x 16 matrix of int16 / uint16 / half, got {src.dtype} -> {dst.dtype}."
        )
    i = np.arange(256)
    sp = pattern_of(i)
    side = L.per_block(src.dtype.fmt)  # 16: a block row of 2-byte elements
    dp = pattern_of((i % side) * side + i // side)  # element (r, c) of the source lands at (c, r)
    issue_shaped("VTranspose", "transpose", dst, dp, [src], [sp])


def copy(
    dst: LocalTensor,
    src: LocalTensor,
    mask,
    repeat_time: int,
    repeat_params: CopyRepeatParams,
    is_set_mask: bool = True,
) -> None:
    """``Copy(dst, src, mask, repeat_time, CopyRepeatParams(dst_stride, src_stride, dst_repeat_size,
    src_repeat_size))``: UB -> UB on the vector unit, blocks ``*_stride`` and repeats ``*_repeat_size``
    32-B blocks apart (V)."""
    if not isinstance(repeat_params, CopyRepeatParams):
        raise TypeError(
            f"asc.copy: repeat_params is an asc.CopyRepeatParams, got {type(repeat_params).__name__}."
        )
    check_ub(dst, "copy", "destination")
    check_ub(src, "copy", "source")
    form = Form(
        mask=mask_arg("copy", mask if is_set_mask else runtime.current().vector_mask),
        repeats=static_int(repeat_time, "copy", "repeat_time", 0, 255),
        params=repeat_params,
    )
    p = repeat_params
    issue_lanes(
        "VCopy",
        "copy",
        dst,
        (src,),
        form,
        [(p.dst_stride, p.dst_repeat_size), (p.src_stride, p.src_repeat_size)],
    )


def bilinear_interpolation(
    dst: LocalTensor,
    src0: LocalTensor,
    src0_offset: LocalTensor,
    src1: LocalTensor,
    mask,
    h_repeat: int,
    repeat_mode: bool,
    dst_blk_stride: int,
    v_r_offset: int,
    v_repeat: int,
    shared_tmp_buffer: LocalTensor | None = None,
) -> None:
    """``BilinearInterpolation(dst, src0, src0Offset, src1, mask, hRepeat, repeatMode, dstBlkStride,
    vROffset, vRepeat, sharedTmpBuffer)`` (half): for each of ``v_repeat`` vertical repeats, the sum over
    ``h_repeat`` horizontal repeats of the 8 32-B blocks of src0 at that repeat's 8 uint32 *byte*
    offsets, times src1[repeat] (or, with ``repeat_mode``, src1[repeat * 8 + block]); products and
    partial sums rounded to half; written ``v_r_offset`` elements apart, blocks ``dst_blk_stride``
    apart. The mask is the lanes of the output that are written (128 = all). Charged one repeat per
    horizontal repeat (v_repeat x h_repeat); the vendor publishes no rate. An offset past src0 reads
    its last elements (the chip's is undefined)."""
    call = "bilinear_interpolation"
    for t, role in ((dst, "destination"), (src0, "src0"), (src1, "src1")):
        check_ub(t, call, role)
        if t.dtype.fmt != "fp16":
            raise AscError(
                f"asc.{call} at {runtime.where()}: the {role} is half (the vendor's), got {t.dtype}."
            )
    check_ub(src0_offset, call, "src0_offset")
    if shared_tmp_buffer is not None:
        check_ub(shared_tmp_buffer, call, "shared_tmp_buffer")
    if src0_offset.dtype.fmt != "uint32":
        raise AscError(
            f"asc.{call} at {runtime.where()}: src0_offset holds uint32 byte offsets, got {src0_offset.dtype}."
        )
    h = static_int(h_repeat, call, "h_repeat", 1, 255)
    v = static_int(v_repeat, call, "v_repeat", 1, 255)
    blk = static_int(dst_blk_stride, call, "dst_blk_stride", 1)
    vro = static_int(v_r_offset, call, "v_r_offset", 0)
    lanes = L.lanes_per_repeat("fp16")
    per = L.per_block("fp16")
    on = L.mask_lanes(mask_arg(call, mask), lanes, v)
    j, e = np.divmod(np.arange(lanes), per)
    dp = pattern_of(np.arange(v)[:, None] * vro + j[None, :] * blk * per + e[None, :], on)
    op = pattern_of(np.arange(v * h * 8).reshape(v * h, 8))
    s1 = pattern_of(np.arange(src1.length))
    s0 = pattern_of(np.arange(src0.length))
    args = dict(h_repeat=h, repeat_mode=bool(repeat_mode), isz=src0.dtype.itemsize, per=per)
    issue_shaped("VBilinear", call, dst, dp, [src0_offset, src0, src1], [op, s0, s1], **args)

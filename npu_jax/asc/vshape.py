"""The vector calls whose destination is not lane for lane their sources': reductions, Brcb, Compare
and Select, CreateVecIndex, Gather, Transpose, Copy.

Each builds the walk of every operand (``core/isa/lanes.py``) from the vendor's arguments and issues
one instruction of the lane form with the op's arithmetic (``core/isa/vecops.SHAPED``); the
whole-tensor ReduceSum / ReduceMax / ReduceMin, which the vendor implements in software, issue the
instructions it is built of (a per-repeat reduction into the work tensor, then one across the repeats),
so their cost is theirs. Layouts, units and orders are the vendor's (asc-devkit's pages, quoted in
docs/kernels.md): a WholeReduceMax writes [value, index] pairs, the index's bits in a value's slot;
Compare packs one bit a lane, least significant first; Gather's offsets count bytes.
"""

from __future__ import annotations

import builtins
import math
import warnings

import numpy as np

from npu_jax.asc import ops, runtime
from npu_jax.asc.ops import AscWarning
from npu_jax.asc.runtime import AscError
from npu_jax.asc.tensors import LocalTensor
from npu_jax.asc.types import (
    CMPMODE,
    SELMODE,
    BinaryRepeatParams,
    BrcbRepeatParams,
    CopyRepeatParams,
    MaskMode,
    ReduceOrder,
    UnaryRepeatParams,
)
from npu_jax.asc.vec import Form, _check, _mask, _static_int, operand, parse, scalar_of
from npu_jax.core.isa import lanes as L


def _floats(call: str, *ts) -> None:
    for t in ts:
        _check(t, call, "operand")
        if t.dtype.fmt not in ("fp16", "fp32"):
            raise AscError(f"asc.{call} at {runtime.where()}: takes half or float tensors, got {t.dtype}.")


def _pattern(idx, on=None) -> L.Pattern:
    idx = np.asarray(idx, np.int64)
    if idx.ndim == 1:
        idx = idx[None, :]
    on = np.ones(idx.shape, bool) if on is None else np.broadcast_to(on, idx.shape).copy()
    return L.Pattern(idx, on)


def _issue(op: str, call: str, dst, dst_p, srcs, src_ps, *, scalar=None, **args) -> None:
    roles = [f"source {i}" if len(srcs) > 1 else "source" for i in range(len(srcs))]
    d = operand(dst, dst_p, call, "destination")
    s = [operand(t, p, call, r) for t, p, r in zip(srcs, src_ps, roles)]
    if runtime.current().planning:
        return
    kw = tuple(sorted(args.items()))
    ops.issue(lambda c: c.vector_lanes(op, d, *s, scalar=scalar, args=kw))


def _walk(src: LocalTensor, mask, repeats: int, blk: int, rep: int, call: str, lanes: int | None = None):
    """The source walk of a mask + repeat call, and its lanes per repeat."""
    run = runtime.current()
    lanes = lanes or L.lanes_per_repeat(src.dtype.fmt)
    counter = run.mask_mode == MaskMode.COUNTER
    mask = lanes if mask is None else mask
    if counter:
        repeats = builtins.max(1, math.ceil(mask / lanes))
    elif isinstance(mask, int) and not 0 <= mask <= lanes:
        raise AscError(
            f"asc.{call} at {runtime.where()}: mask {mask} counts lanes of a repeat, [1, {lanes}]."
        )
    on = L.mask_lanes(mask, lanes, builtins.max(repeats, 1), counter=counter)
    blk = _static_int(blk, call, "src_blk_stride", 0)
    rep = _static_int(rep, call, "src_rep_stride", 0)
    return L.repeat_pattern(src.dtype.fmt, lanes, builtins.max(repeats, 1), blk, rep, on), repeats, lanes


def _reduce_args(call, args, kwargs, names):
    vals = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise TypeError(f"asc.{call}: unexpected argument {k!r}; takes {', '.join(names)}.")
        vals[k] = v
    missing = [n for n in names if n not in vals and n not in ("order", "is_set_mask")]
    if missing:
        raise TypeError(
            f"asc.{call} at {runtime.where()}: missing {', '.join(missing)} (takes {', '.join(names)})."
        )
    vals.setdefault("is_set_mask", True)
    vals["mask"] = _mask(call, vals["mask"] if vals["is_set_mask"] else runtime.current().vector_mask)
    vals["repeat_time"] = _static_int(vals["repeat_time"], call, "repeat_time", 0, L.MAX_REPEATS)
    return vals


# ---- reductions within a repeat ---------------------------------------------------------------------
_WR_NAMES = [
    "mask",
    "repeat_time",
    "dst_rep_stride",
    "src_blk_stride",
    "src_rep_stride",
    "order",
    "is_set_mask",
]


def _whole_reduce(kind: str):
    op = {"sum": "VWholeReduceSum", "max": "VWholeReduceMax", "min": "VWholeReduceMin"}[kind]
    name = f"whole_reduce_{kind}"

    def f(dst: LocalTensor, src: LocalTensor, *args, **kwargs) -> None:
        names = _WR_NAMES if kind != "sum" else [n for n in _WR_NAMES if n != "order"]
        v = _reduce_args(name, args, kwargs, names)
        _floats(name, dst, src)
        order = v.get("order", ReduceOrder.ORDER_VALUE_INDEX)
        if not isinstance(order, ReduceOrder):
            raise TypeError(f"asc.{name}: order is an asc.ReduceOrder, got {order!r}.")
        if kind != "sum" and runtime.current().hw.coupled and order.value > 1:
            raise AscError(
                f"asc.{name} at {runtime.where()}: {order.name} is not on {runtime.current().hw.name} (the 310P / 910 "
                f"write ORDER_VALUE_INDEX or ORDER_INDEX_VALUE)."
            )
        sp, r, _ = _walk(src, v["mask"], v["repeat_time"], v["src_blk_stride"], v["src_rep_stride"], name)
        if r == 0:
            return
        stride = _static_int(v["dst_rep_stride"], name, "dst_rep_stride", 0)
        width = 1 if kind == "sum" else (2, 2, 1, 4 // dst.dtype.itemsize)[order.value]
        outs = width if kind == "sum" or order.value < 3 else 1
        idx = np.arange(builtins.max(r, 1))[:, None] * stride * width + np.arange(outs)[None, :]
        if kind != "sum" and order.value == 3:  # a uint32 index: its two halves in a half tensor
            return _issue(
                op, name, dst.reinterpret_cast(_u32()), _pattern(idx // width), [src], [sp], order=3
            )
        _issue(op, name, dst, _pattern(idx), [src], [sp], order=order.value)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (
        f"``WholeReduce{kind.capitalize()}(dst, src, mask, repeat_time, dst_rep_stride, src_blk_stride, "
        f"src_rep_stride{', order' if kind != 'sum' else ''}, is_set_mask=True)``: one {kind} of the lanes that run per "
        f"repeat (V; 7 cycles a repeat). "
        + (
            "A binary tree of adds, each rounded (half saturating)."
            if kind == "sum"
            else "[value, index] pairs by default (``asc.ReduceOrder``): the index within the repeat, its bits in a T slot."
        )
    )
    return f


def _u32():
    from npu_jax.asc.types import uint32

    return uint32


whole_reduce_sum = _whole_reduce("sum")
whole_reduce_max = _whole_reduce("max")
whole_reduce_min = _whole_reduce("min")


def _block_reduce(kind: str):
    op = f"VBlockReduce{kind.capitalize()}"
    name = f"block_reduce_{kind}"
    names = ["repeat_time", "mask", "dst_rep_stride", "src_blk_stride", "src_rep_stride", "is_set_mask"]

    def f(dst: LocalTensor, src: LocalTensor, *args, **kwargs) -> None:
        if "repeat" in kwargs:
            kwargs["repeat_time"] = kwargs.pop("repeat")
        v = _reduce_args(name, args, kwargs, names)
        _floats(name, dst, src)
        sp, r, lanes = _walk(src, v["mask"], v["repeat_time"], v["src_blk_stride"], v["src_rep_stride"], name)
        if r == 0:
            return
        stride = _static_int(v["dst_rep_stride"], name, "dst_rep_stride", 0)
        idx = np.arange(r)[:, None] * stride * 8 + np.arange(8)[None, :]
        _issue(op, name, dst, _pattern(idx), [src], [sp], per=32 // src.dtype.itemsize)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (
        f"``BlockReduce{kind.capitalize()}(dst, src, repeat_time, mask, dst_rep_stride, src_blk_stride, "
        f"src_rep_stride)``: one {kind} per 32-B block, 8 a repeat, written together (V; note repeat_time comes "
        f"before mask, as the vendor's)."
    )
    return f


block_reduce_sum = _block_reduce("sum")
block_reduce_max = _block_reduce("max")
block_reduce_min = _block_reduce("min")


def pair_reduce_sum(dst: LocalTensor, src: LocalTensor, *args, **kwargs) -> None:
    """``PairReduceSum(dst, src, repeat_time, mask, dst_rep_stride, src_blk_stride, src_rep_stride)``:
    (a0 + a1, a2 + a3, ...) per repeat, half a repeat out (V). A pair whose two lanes are both off leaves
    its output as it was."""
    names = ["repeat_time", "mask", "dst_rep_stride", "src_blk_stride", "src_rep_stride", "is_set_mask"]
    v = _reduce_args("pair_reduce_sum", args, kwargs, names)
    _floats("pair_reduce_sum", dst, src)
    sp, r, lanes = _walk(
        src, v["mask"], v["repeat_time"], v["src_blk_stride"], v["src_rep_stride"], "pair_reduce_sum"
    )
    if r == 0:
        return
    stride = _static_int(v["dst_rep_stride"], "pair_reduce_sum", "dst_rep_stride", 0)
    half = lanes // 2
    idx = np.arange(r)[:, None] * stride * half + np.arange(half)[None, :]
    on = sp.on[:, 0::2] | sp.on[:, 1::2]
    _issue("VPairReduceSum", "pair_reduce_sum", dst, _pattern(idx, on), [src], [sp])


def repeat_reduce_sum(dst: LocalTensor, src: LocalTensor, *args, **kwargs) -> None:
    """``RepeatReduceSum(dst, src, repeat_time, mask, dst_blk_stride, src_blk_stride, dst_rep_stride,
    src_rep_stride)``: one sum per repeat (V), the mask a count only; dst_blk_stride has no effect (the
    vendor's)."""
    names = [
        "repeat_time",
        "mask",
        "dst_blk_stride",
        "src_blk_stride",
        "dst_rep_stride",
        "src_rep_stride",
        "is_set_mask",
    ]
    v = _reduce_args("repeat_reduce_sum", args, kwargs, names)
    if isinstance(v["mask"], list):
        raise AscError(f"asc.repeat_reduce_sum at {runtime.where()}: the mask is a count (no bit mask form).")
    _floats("repeat_reduce_sum", dst, src)
    sp, r, _ = _walk(
        src, v["mask"], v["repeat_time"], v["src_blk_stride"], v["src_rep_stride"], "repeat_reduce_sum"
    )
    if r == 0:
        return
    stride = _static_int(v["dst_rep_stride"], "repeat_reduce_sum", "dst_rep_stride", 0)
    _issue(
        "VRepeatReduceSum", "repeat_reduce_sum", dst, _pattern(np.arange(r)[:, None] * stride), [src], [sp]
    )


# ---- whole-tensor reductions (the vendor's software ones) ------------------------------------------
def _whole(kind: str):
    name = f"reduce_{kind}"

    def f(dst: LocalTensor, src: LocalTensor, shared_tmp_buffer: LocalTensor, *args, **kwargs) -> None:
        run = runtime.current()
        cal_index = bool(kwargs.pop("cal_index", False))
        args = list(args)
        if kind != "sum" and len(args) in (2, 4) and isinstance(args[-1], (bool, np.bool_)):
            cal_index = bool(args.pop())
        _floats(name, dst, src, shared_tmp_buffer)
        lanes = L.lanes_per_repeat(src.dtype.fmt)
        if len(args) + len(kwargs) == 1:  # the count form
            count = _static_int(args[0] if args else kwargs.pop("count"), name, "count", 0)
            if kwargs:
                raise TypeError(f"asc.{name}: unexpected {sorted(kwargs)}.")
            r = builtins.max(1, math.ceil(count / lanes))
            sp = L.count_pattern(count, lanes)
            seq = not run.hw.coupled  # the 910B adds the repeats' sums in order, the 310P as a tree
            if count == 0:
                return
        else:
            names = ["mask", "repeat_time", "src_rep_stride"]
            vals = dict(zip(names, args), **kwargs)
            if set(vals) != set(names):
                raise TypeError(
                    f"asc.{name} at {runtime.where()}: takes (dst, src, work, count) or (dst, src, work, mask, "
                    f"repeat_time, src_rep_stride){'' if kind == 'sum' else ', cal_index'}."
                )
            rt = _static_int(vals["repeat_time"], name, "repeat_time", 0)
            sp, r, _ = _walk(src, _mask(name, vals["mask"]), rt, 1, vals["src_rep_stride"], name)
            seq = False
            if r == 0:
                return
        width = 1 if kind == "sum" else 2
        work_p = _pattern(np.arange(r)[:, None] * width + np.arange(width)[None, :])
        op1 = f"VWholeReduce{kind.capitalize()}"
        _issue(op1, name, shared_tmp_buffer, work_p, [src], [sp], order=0)
        # the second pass reads the first's results, a repeat of lanes at a time
        n = r * width
        rr = math.ceil(n / lanes)
        flat = np.arange(rr * lanes).reshape(rr, lanes)
        read_p = _pattern(flat, flat < n)
        outs = 2 if (kind != "sum" and cal_index) else 1
        args2 = dict(seq=seq, n=r) if kind == "sum" else dict(lanes=lanes, n=r, cal_index=cal_index)
        _issue(
            f"VReduceAcross{kind.capitalize()}",
            name,
            dst,
            _pattern(np.arange(outs)),
            [shared_tmp_buffer],
            [read_p],
            **args2,
        )

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (
        f"``Reduce{kind.capitalize()}(dst, src, work, count{'' if kind == 'sum' else '[, cal_index]'})`` or "
        f"``(dst, src, work, mask, repeat_time, src_rep_stride{'' if kind == 'sum' else '[, cal_index]'})``: the "
        f"{kind} of the whole tensor into dst[0]"
        + ("" if kind == "sum" else " (and with cal_index its index into dst[1], its bits in a T slot)")
        + ", as the vendor builds it: one reduction per repeat into ``work``, then one across them (on the 910B "
        "the count form adds the repeats' sums in order, a tree otherwise)."
    )
    return f


reduce_sum = _whole("sum")
reduce_max = _whole("max")
reduce_min = _whole("min")


# ---- Brcb -------------------------------------------------------------------------------------------
def brcb(dst: LocalTensor, src: LocalTensor, repeat_times: int, repeat_params: BrcbRepeatParams) -> None:
    """``Brcb(dst, src, repeat_times, BrcbRepeatParams(dst_blk_stride, dst_rep_stride))``: each of 8
    source elements a repeat fills one 32-B block of dst (V): the way a row's max or sum is spread back
    over the row. The source is read contiguously (8 a repeat)."""
    if not isinstance(repeat_params, BrcbRepeatParams):
        raise TypeError(
            f"asc.brcb: repeat_params is an asc.BrcbRepeatParams, got {type(repeat_params).__name__}."
        )
    _check(dst, "brcb", "destination")
    _check(src, "brcb", "source")
    if dst.dtype.fmt != src.dtype.fmt:
        raise AscError(
            f"asc.brcb at {runtime.where()}: dst and src are one type, got {dst.dtype} and {src.dtype}."
        )
    r = _static_int(repeat_times, "brcb", "repeat_times", 0, L.MAX_REPEATS)
    if r == 0:
        return
    per = 32 // dst.dtype.itemsize
    blk = _static_int(repeat_params.dst_blk_stride, "brcb", "dst_blk_stride", 0) or 1
    rep = _static_int(repeat_params.dst_rep_stride, "brcb", "dst_rep_stride", 0)
    j, e = np.divmod(np.arange(8 * per), per)
    idx = (np.arange(r)[:, None] * rep + j[None, :] * blk) * per + e[None, :]
    sp = _pattern(np.arange(r)[:, None] * 8 + np.arange(8)[None, :])
    _issue("VBrcb", "brcb", dst, _pattern(idx), [src], [sp], per=per)


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
    _check(dst, call, "destination")
    for s in srcs:
        _check(s, call, "source")
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
            _static_int(b, call, "a block stride"),
            _static_int(p, call, "a repeat stride"),
            on,
        )
        for s, (b, p) in zip(srcs, strides)
    ]
    dp = _pattern(
        np.arange(r)[:, None] * (lanes // 8) + np.arange(lanes // 8)[None, :]
    )  # packed, repeat after repeat
    s = None if scalar is None else scalar_of(scalar, srcs[0].dtype.fmt)
    _issue(
        op,
        call,
        dst.reinterpret_cast(_u8()) if dst.dtype.fmt != "uint8" else dst,
        dp,
        list(srcs),
        sps,
        scalar=s,
        cmp=cmp,
    )


def _u8():
    from npu_jax.asc.types import uint8

    return uint8


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
    _floats("select", *tensors)
    _check(sel_mask, "select", "sel_mask")
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
        from npu_jax.asc.vec import patterns

        pats, empty = patterns(form, tensors, strides, "select")
        r = pats[0].shape[0]
        if empty:
            return
    words = lanes // (8 * sel_mask.dtype.itemsize)
    step = 0 if sel_mode == SELMODE.VSEL_CMPMASK_SPR else words
    mp = _pattern(np.arange(r)[:, None] * step + np.arange(words)[None, :])
    srcs = [sel_mask, src0] + ([] if scalar_src else [src1])
    s = scalar_of(src1, dst.dtype.fmt) if scalar_src else None
    op = "VSelects" if scalar_src else "VSelect"
    _issue(
        op, "select", dst, pats[0], srcs, [mp] + list(pats[1:]), scalar=s, mode=sel_mode.value, lanes=lanes
    )


# ---- CreateVecIndex, Gather --------------------------------------------------------------------------
def create_vec_index(dst: LocalTensor, first_value, *args, **kwargs) -> None:
    """``CreateVecIndex(dst, first_value, count | mask, repeat_times, dst_blk_stride, dst_rep_stride)``:
    dst = first_value, first_value + 1, ... over the lanes in order (V; half, float, int16, int32)."""
    _check(dst, "create_vec_index", "destination")
    if dst.dtype.fmt not in ("fp16", "fp32", "int16", "int32"):
        raise AscError(
            f"asc.create_vec_index at {runtime.where()}: takes half, float, int16 or int32, got {dst.dtype}."
        )
    lanes = L.lanes_per_repeat(dst.dtype.fmt)
    args = list(args)
    if len(args) == 1 or "count" in kwargs:
        count = _static_int(args[0] if args else kwargs["count"], "create_vec_index", "count")
        if count == 0:
            return
        p = L.count_pattern(count, lanes)
    else:
        names = ["mask", "repeat_times", "dst_blk_stride", "dst_rep_stride"]
        v = dict(zip(names, args), **kwargs)
        form = Form(
            mask=_mask("create_vec_index", v["mask"]),
            repeats=_static_int(v["repeat_times"], "create_vec_index", "repeat_times", 0, 255),
        )
        from npu_jax.asc.vec import patterns

        (p,), empty = patterns(form, (dst,), [(v["dst_blk_stride"], v["dst_rep_stride"])], "create_vec_index")
        if empty:
            return
    _issue(
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
    _check(dst, "gather", "destination")
    _check(src, "gather", "source")
    _check(src_offset, "gather", "offsets")
    if src_offset.dtype.fmt != "uint32":
        raise AscError(
            f"asc.gather at {runtime.where()}: src_offset is a uint32 tensor of byte offsets, got {src_offset.dtype}."
        )
    if dst.dtype.fmt != src.dtype.fmt:
        raise AscError(
            f"asc.gather at {runtime.where()}: dst and src are one type, got {dst.dtype} and {src.dtype}."
        )
    base = _static_int(src_base_addr, "gather", "src_base_addr")
    lanes = L.lanes_per_repeat(dst.dtype.fmt)
    args = list(args)
    if len(args) == 1 or "count" in kwargs:
        count = _static_int(args[0] if args else kwargs["count"], "gather", "count")
        if count == 0:
            return
        dp = L.count_pattern(count, lanes)
    else:
        names = ["mask", "repeat_times", "dst_rep_stride"]
        v = dict(zip(names, args), **kwargs)
        form = Form(
            mask=_mask("gather", v["mask"]),
            repeats=_static_int(v["repeat_times"], "gather", "repeat_times", 0, 255),
        )
        from npu_jax.asc.vec import patterns

        (dp,), empty = patterns(form, (dst,), [(1, v["dst_rep_stride"])], "gather")
        if empty:
            return
    r = dp.shape[0]
    op_p = _pattern(np.arange(r * lanes).reshape(r, lanes), dp.on)
    sp = _pattern(np.arange(src.length))
    _issue("VGather", "gather", dst, dp, [src, src_offset], [sp, op_p], base=base, isz=src.dtype.itemsize)


# ---- Transpose, Copy --------------------------------------------------------------------------------
def transpose(dst: LocalTensor, src: LocalTensor, *args, **kwargs) -> None:
    """``Transpose(dst, src)``: one 16 x 16 matrix of 2-byte elements transposed (V; 2 cycles). The
    enhanced form ``(dst, src, shared_tmp_buffer, TransposeParamsExt)`` is not supported."""
    if args or kwargs:
        raise NotImplementedError(
            "asc.transpose with TransposeParamsExt (NCHW <-> NHWC) is not supported; the plain 16 x 16 form is "
            "(see docs/kernels.md)."
        )
    _check(dst, "transpose", "destination")
    _check(src, "transpose", "source")
    if dst.dtype.itemsize != 2 or src.dtype.fmt != dst.dtype.fmt:
        raise AscError(
            f"asc.transpose at {runtime.where()}: a 16 x 16 matrix of int16 / uint16 / half, got {src.dtype} -> {dst.dtype}."
        )
    i = np.arange(256)
    sp = _pattern(i)
    dp = _pattern((i % 16) * 16 + i // 16)  # element (r, c) of the source lands at (c, r)
    _issue("VTranspose", "transpose", dst, dp, [src], [sp])


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
    from npu_jax.asc.vec import issue_lanes

    _check(dst, "copy", "destination")
    _check(src, "copy", "source")
    form = Form(
        mask=_mask("copy", mask if is_set_mask else runtime.current().vector_mask),
        repeats=_static_int(repeat_time, "copy", "repeat_time", 0, 255),
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

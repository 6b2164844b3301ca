"""The vector unit's reductions: within a repeat (WholeReduce*, RepeatReduceSum), within a 32-B block
(BlockReduce*), over pairs (PairReduceSum), and the whole-tensor ReduceSum / ReduceMax / ReduceMin the
vendor builds in software from them.

Each builds its operands' walks (``core/isa/lanes.py``) from the vendor's arguments and issues one
lane-form instruction with the op's arithmetic (``core/isa/vecops.SHAPED``). Layouts and units are the
vendor's pages': a WholeReduceMax writes [value, index] pairs, the index (within the repeat) as bits in
a value's slot; ``dst_rep_stride`` counts a repeat's results (pairs, values, 8 block values, half a
repeat); sums add as a binary tree, each partial sum rounded (half saturating at 65504). The
whole-tensor reductions issue a per-repeat reduction into the work tensor, then one across the repeats
(on the 910B the count form adds the repeats' sums in order, as the vendor's page says), so their cost
is the instructions'.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from npu_jax.asc import runtime
from npu_jax.asc.operands import check_ub, mask_arg, operand, static_int
from npu_jax.asc.runtime import AscError
from npu_jax.asc.tensors import LocalTensor
from npu_jax.asc.types import MaskMode, ReduceOrder, uint32
from npu_jax.core.isa import lanes as L


def floats_only(call: str, *ts) -> None:
    for t in ts:
        check_ub(t, call, "operand")
        if t.dtype.fmt not in ("fp16", "fp32"):
            raise AscError(f"asc.{call} at {runtime.where()}: takes half or float tensors, got {t.dtype}.")


def pattern_of(idx, on=None) -> L.Pattern:
    idx = np.asarray(idx, np.int64)
    if idx.ndim == 1:
        idx = idx[None, :]
    on = np.ones(idx.shape, bool) if on is None else np.broadcast_to(on, idx.shape).copy()
    return L.Pattern(idx, on)


def issue_shaped(op: str, call: str, dst, dst_p, srcs, src_ps, *, scalar=None, **args) -> None:
    roles = [f"source {i}" if len(srcs) > 1 else "source" for i in range(len(srcs))]
    d = operand(dst, dst_p, call, "destination")
    s = [operand(t, p, call, r) for t, p, r in zip(srcs, src_ps, roles)]
    if runtime.current().planning:
        return
    kw = tuple(sorted(args.items()))
    runtime.issue(lambda c: c.vector_lanes(op, d, *s, scalar=scalar, args=kw))


def walk(src: LocalTensor, mask, repeats: int, blk: int, rep: int, call: str, lanes: int | None = None):
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
    blk = static_int(blk, call, "src_blk_stride", 0)
    rep = static_int(rep, call, "src_rep_stride", 0)
    return L.repeat_pattern(src.dtype.fmt, lanes, builtins.max(repeats, 1), blk, rep, on), repeats, lanes


def reduce_args(call, args, kwargs, names):
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
    vals["mask"] = mask_arg(call, vals["mask"] if vals["is_set_mask"] else runtime.current().vector_mask)
    vals["repeat_time"] = static_int(vals["repeat_time"], call, "repeat_time", 0, L.MAX_REPEATS)
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
        v = reduce_args(name, args, kwargs, names)
        floats_only(name, dst, src)
        order = v.get("order", ReduceOrder.ORDER_VALUE_INDEX)
        if not isinstance(order, ReduceOrder):
            raise TypeError(f"asc.{name}: order is an asc.ReduceOrder, got {order!r}.")
        if kind != "sum" and runtime.current().hw.coupled and order.value > 1:
            raise AscError(
                f"asc.{name} at {runtime.where()}: {order.name} is not on {runtime.current().hw.name} (the 310P / 910 "
                f"write ORDER_VALUE_INDEX or ORDER_INDEX_VALUE)."
            )
        sp, r, _ = walk(src, v["mask"], v["repeat_time"], v["src_blk_stride"], v["src_rep_stride"], name)
        if r == 0:
            return
        stride = static_int(v["dst_rep_stride"], name, "dst_rep_stride", 0)
        width = 1 if kind == "sum" else (2, 2, 1, 4 // dst.dtype.itemsize)[order.value]
        outs = width if kind == "sum" or order.value < 3 else 1
        idx = np.arange(builtins.max(r, 1))[:, None] * stride * width + np.arange(outs)[None, :]
        if kind != "sum" and order.value == 3:  # a uint32 index: its two halves in a half tensor
            return issue_shaped(
                op, name, dst.reinterpret_cast(uint32), pattern_of(idx // width), [src], [sp], order=3
            )
        issue_shaped(op, name, dst, pattern_of(idx), [src], [sp], order=order.value)

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
        v = reduce_args(name, args, kwargs, names)
        floats_only(name, dst, src)
        sp, r, lanes = walk(src, v["mask"], v["repeat_time"], v["src_blk_stride"], v["src_rep_stride"], name)
        if r == 0:
            return
        stride = static_int(v["dst_rep_stride"], name, "dst_rep_stride", 0)
        idx = np.arange(r)[:, None] * stride * 8 + np.arange(8)[None, :]
        issue_shaped(op, name, dst, pattern_of(idx), [src], [sp], per=L.per_block(src.dtype.fmt))

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
    v = reduce_args("pair_reduce_sum", args, kwargs, names)
    floats_only("pair_reduce_sum", dst, src)
    sp, r, lanes = walk(
        src, v["mask"], v["repeat_time"], v["src_blk_stride"], v["src_rep_stride"], "pair_reduce_sum"
    )
    if r == 0:
        return
    stride = static_int(v["dst_rep_stride"], "pair_reduce_sum", "dst_rep_stride", 0)
    half = lanes // 2
    idx = np.arange(r)[:, None] * stride * half + np.arange(half)[None, :]
    on = sp.on[:, 0::2] | sp.on[:, 1::2]
    issue_shaped("VPairReduceSum", "pair_reduce_sum", dst, pattern_of(idx, on), [src], [sp])


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
    v = reduce_args("repeat_reduce_sum", args, kwargs, names)
    if isinstance(v["mask"], list):
        raise AscError(f"asc.repeat_reduce_sum at {runtime.where()}: the mask is a count (no bit mask form).")
    floats_only("repeat_reduce_sum", dst, src)
    sp, r, _ = walk(
        src, v["mask"], v["repeat_time"], v["src_blk_stride"], v["src_rep_stride"], "repeat_reduce_sum"
    )
    if r == 0:
        return
    stride = static_int(v["dst_rep_stride"], "repeat_reduce_sum", "dst_rep_stride", 0)
    issue_shaped(
        "VRepeatReduceSum", "repeat_reduce_sum", dst, pattern_of(np.arange(r)[:, None] * stride), [src], [sp]
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
        floats_only(name, dst, src, shared_tmp_buffer)
        lanes = L.lanes_per_repeat(src.dtype.fmt)
        if len(args) + len(kwargs) == 1:  # the count form
            count = static_int(args[0] if args else kwargs.pop("count"), name, "count", 0)
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
            rt = static_int(vals["repeat_time"], name, "repeat_time", 0)
            sp, r, _ = walk(src, mask_arg(name, vals["mask"]), rt, 1, vals["src_rep_stride"], name)
            seq = False
            if r == 0:
                return
        width = 1 if kind == "sum" else 2
        work_p = pattern_of(np.arange(r)[:, None] * width + np.arange(width)[None, :])
        op1 = f"VWholeReduce{kind.capitalize()}"
        issue_shaped(op1, name, shared_tmp_buffer, work_p, [src], [sp], order=0)
        # the second pass reads the first's results, a repeat of lanes at a time
        n = r * width
        rr = math.ceil(n / lanes)
        flat = np.arange(rr * lanes).reshape(rr, lanes)
        read_p = pattern_of(flat, flat < n)
        outs = 2 if (kind != "sum" and cal_index) else 1
        args2 = dict(seq=seq, n=r) if kind == "sum" else dict(lanes=lanes, n=r, cal_index=cal_index)
        issue_shaped(
            f"VReduceAcross{kind.capitalize()}",
            name,
            dst,
            pattern_of(np.arange(outs)),
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

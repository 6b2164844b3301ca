"""The vector unit's calls in both of the vendor's forms, and its mask.

Every element-wise call takes either the **count form**, ``asc.add(dst, a, b, count)`` (the first
``count`` elements), or the **mask + repeat form**, ``asc.add(dst, a, b, mask, repeat_times,
asc.BinaryRepeatParams(...)[, is_set_mask])``: ``repeat_times`` repeats of 256 B, ``mask`` the lanes
of each repeat that run (an int: the first ``mask`` lanes; a list of two 64-bit words, ``[low,
high]``: lane ``l`` runs where bit ``l % 64`` of word ``l // 64`` is set), each operand walking its
own block and repeat strides (in 32-B blocks). With ``is_set_mask=False`` the call takes the mask
set before by ``asc.set_vector_mask``; ``asc.set_mask_count()`` makes a mask count elements over
all repeats (the counter mode) until ``asc.set_mask_norm()``. Keywords are pyasc's (``count=``,
``mask=``, ``repeat_times=``, ``repeat_params=``, ``is_set_mask=``).

Both forms issue one instruction of the lane form (``core/isa/lanes.py``); the walk is static, the
tensors' offsets may be traced. A lane that would leave its tensor is a memcheck finding at the
call (and does not run).
"""

from __future__ import annotations

import builtins
import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from npu_jax.asc import ops, runtime
from npu_jax.asc.runtime import AscError
from npu_jax.asc.tensors import LocalTensor
from npu_jax.asc.types import (
    BinaryRepeatParams,
    MaskMode,
    RoundMode,
    UnaryRepeatParams,
)
from npu_jax.core.buffers import DTYPES
from npu_jax.core.isa import lanes as L
from npu_jax.core.isa import vecops

FLOATS = vecops.FLOATS


# ---- the mask state ---------------------------------------------------------------------------------
def set_mask_count() -> None:
    """``SetMaskCount()``: a mask counts elements over all repeats (the counter mode)."""
    runtime.current().mask_mode = MaskMode.COUNTER


def set_mask_norm() -> None:
    """``SetMaskNorm()``: a mask selects lanes of each repeat (the normal mode, the default)."""
    runtime.current().mask_mode = MaskMode.NORMAL


def set_vector_mask(*args, dtype=None, mode: MaskMode | None = None) -> None:
    """``SetVectorMask<T, mode>(len)`` or ``SetVectorMask<T, mode>(mask_high, mask_low)``: the mask the
    calls with ``is_set_mask=False`` use. ``mode`` (``asc.MaskMode``) NORMAL or COUNTER (pyasc's
    keyword; None keeps the current mode)."""
    run = runtime.current()
    if mode is not None:
        if not isinstance(mode, MaskMode):
            raise TypeError(f"set_vector_mask: mode is an asc.MaskMode, got {mode!r}.")
        run.mask_mode = mode
    if len(args) == 1:
        run.vector_mask = _static_int(args[0], "set_vector_mask", "length", lo=0)
    elif len(args) == 2:
        hi, lo = (_static_int(a, "set_vector_mask", n, lo=0) for a, n in zip(args, ("mask_high", "mask_low")))
        run.vector_mask = [lo, hi]
    else:
        raise TypeError("set_vector_mask(length) or set_vector_mask(mask_high, mask_low).")


def reset_mask() -> None:
    """``ResetMask()``: every lane on again (the mask the ``is_set_mask=False`` calls use)."""
    runtime.current().vector_mask = None


# ---- arguments ----------------------------------------------------------------------------------------
def _static_int(v, call: str, name: str, lo: int = 0, hi: int | None = None) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        kind = "a traced value" if isinstance(v, jax.core.Tracer) else repr(v)
        raise AscError(
            f"asc.{call} at {runtime.where()}: {name} is a Python int (the emulator needs it at trace time), got "
            f"{kind}."
        )
    v = int(v)
    if v < lo or (hi is not None and v > hi):
        rng = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise AscError(f"asc.{call} at {runtime.where()}: {name} must be in {rng}, got {v}.")
    return v


@dataclasses.dataclass
class Form:
    """One call's form: ``count`` elements, or ``mask`` / ``repeats`` / ``params``."""

    count: int | None = None
    mask: object = None
    repeats: int = 0
    params: object = None


def parse(call: str, args, kwargs, params_cls, *, set_mask: bool = True) -> Form:
    """The count form ``(count)`` or the mask + repeat form ``(mask, repeat_times, params[,
    is_set_mask])``, positional or by pyasc's keywords; anything else names the forms."""
    args, kwargs = list(args), dict(kwargs)
    names = ["mask", "repeat_times", "repeat_params"] + (["is_set_mask"] if set_mask else [])
    if "repeat_time" in kwargs:
        kwargs["repeat_times"] = kwargs.pop("repeat_time")
    is_set = kwargs.pop("is_set_mask", True)
    if "count" in kwargs or (len(args) == 1 and not any(n in kwargs for n in names[:3])):
        if len(args) + ("count" in kwargs) != 1 or kwargs.keys() - {"count"}:
            raise TypeError(_forms_msg(call, params_cls))
        count = kwargs.pop("count") if "count" in kwargs else args[0]
        return Form(count=_static_int(count, call, "count"))
    vals = dict(zip(names, args))
    for k in list(kwargs):
        if k in names and k not in vals:
            vals[k] = kwargs.pop(k)
    if kwargs or not {"mask", "repeat_times", "repeat_params"} <= vals.keys() or len(args) > len(names):
        raise TypeError(_forms_msg(call, params_cls))
    is_set = vals.get("is_set_mask", is_set)
    params = vals["repeat_params"]
    if not isinstance(params, params_cls):
        raise TypeError(
            f"asc.{call} at {runtime.where()}: repeat_params is an asc.{params_cls.__name__}, got "
            f"{type(params).__name__}."
        )
    repeats = _static_int(vals["repeat_times"], call, "repeat_times", 0, L.MAX_REPEATS)
    mask = vals["mask"] if is_set else runtime.current().vector_mask
    return Form(mask=_mask(call, mask), repeats=repeats, params=params)


def _mask(call: str, mask):
    if mask is None:
        return None
    if isinstance(mask, (list, tuple)):
        if not 1 <= len(mask) <= 2:
            raise AscError(
                f"asc.{call} at {runtime.where()}: a bit mask is a list of one or two 64-bit words, got {mask!r}."
            )
        return [_static_int(w, call, "mask word", 0, (1 << 64) - 1) for w in mask]
    return _static_int(mask, call, "mask", 0)


def _forms_msg(call: str, params_cls) -> str:
    return (
        f"asc.{call} at {runtime.where()}: takes (..., count) or (..., mask, repeat_times, "
        f"asc.{params_cls.__name__}(...)[, is_set_mask]) after its tensors (pyasc's keywords: count=, mask=, "
        f"repeat_times=, repeat_params=, is_set_mask=)."
    )


def scalar_of(scalar, fmt: str):
    """The vendor's scalar argument is a ``T``: a Python number, or a value read with
    ``get_value`` (traced), converted to the tensor's type first as the C++ call converts it."""
    dt = DTYPES[fmt]
    if isinstance(scalar, (jax.Array, np.ndarray, np.generic)) and not isinstance(scalar, bool):
        return jnp.asarray(scalar).astype(dt)
    if isinstance(scalar, bool) or not isinstance(scalar, (int, float)):
        raise TypeError(
            f"a scalar argument is a number (or a get_value result), got {type(scalar).__name__}."
        )
    if fmt in FLOATS:
        return float(np.asarray(float(scalar), dtype=dt))
    return int(np.asarray(int(scalar)).astype(dt))


# ---- operands -----------------------------------------------------------------------------------------
def _check(t, call: str, role: str) -> None:
    if not isinstance(t, LocalTensor):
        raise TypeError(f"asc.{call}: the {role} must be an asc LocalTensor, got {type(t).__name__}.")
    ops.check_live(t, call, role)
    if t.buffer != "UB":
        raise AscError(
            f"asc.{call} at {runtime.where()}: vector instructions work on UB; the {role} is in {t.buffer}."
        )


def operand(t: LocalTensor, pattern: L.Pattern, call: str, role: str, pipe: str = "V"):
    """``t`` walked by ``pattern``, as a lane operand of the core (None in the plan pass): the
    vendor's checks first (a start off 32 B, lanes past the tensor: findings at the call; such lanes
    do not run)."""
    _check(t, call, role)
    run = runtime.current()
    isz = t.dtype.itemsize
    if isinstance(t.offset, int) and (t.offset * isz) % 32:
        run.finding(
            "memcheck",
            "misaligned",
            call,
            pipe,
            f"the {role}'s UB address is {t.offset * isz} B past its buffer's start, not a multiple of 32 B "
            f"(UB operands of vector instructions start on 32-B boundaries).",
            f"offset the view by a multiple of {32 // isz} elements of {t.dtype}.",
            alloc=t.position.name,
        )
    if pattern.extent > t.length:
        over = pattern.on & (pattern.idx >= t.length)
        run.finding(
            "memcheck",
            "illegal write" if role == "destination" else "illegal read",
            call,
            pipe,
            f"{int(over.sum())} lane(s) of the {role} reach element {pattern.extent - 1} of its {t.length}-element "
            f"{t.position.name} tensor ({(pattern.extent - t.length) * isz} B past its end).",
            "keep count (or repeats, strides and mask) within the tensor.",
            alloc=t.position.name,
        )
        pattern = L.Pattern(pattern.idx, pattern.on & ~over)
    if run.planning:
        return None
    alloc = run.allocs[t.request.index]
    dtype = None if alloc.dtype == t.dtype.fmt else t.dtype.fmt
    return L.Lanes(alloc, t.slot, (t.offset,), pattern=pattern, dtype=dtype)


def patterns(form: Form, tensors, strides, call: str):
    """Each tensor's walk under ``form``: ``strides`` per tensor ``(blk, rep)`` (the repeat form's)."""
    fmts = [t.dtype.fmt for t in tensors]
    lanes = L.lanes_per_repeat(*fmts)
    if form.count is not None:
        p = L.count_pattern(form.count, lanes)
        return [p] * len(tensors), form.count == 0
    run = runtime.current()
    counter = run.mask_mode == MaskMode.COUNTER
    mask = lanes if form.mask is None else form.mask
    if counter:
        if isinstance(mask, list):
            raise AscError(
                f"asc.{call} at {runtime.where()}: the counter mode takes a count as its mask, not bits."
            )
        repeats = builtins.max(1, math.ceil(mask / lanes))
    else:
        repeats = form.repeats
        if isinstance(mask, int) and not 0 <= mask <= lanes:
            raise AscError(
                f"asc.{call} at {runtime.where()}: mask {mask} in the normal mode counts lanes of a repeat: "
                f"[1, {lanes}] for {fmts[0]} (256 B of the widest operand)."
            )
    on = L.mask_lanes(mask, lanes, builtins.max(repeats, 1), counter=counter)
    out = []
    for f, (blk, rep) in zip(fmts, strides):
        blk = _static_int(blk, call, "a block stride", 0)
        rep = _static_int(rep, call, "a repeat stride", 0)
        out.append(L.repeat_pattern(f, lanes, builtins.max(repeats, 1), blk, rep, on))
    return out, repeats == 0 or not on.any()


def issue_lanes(op: str, call: str, dst, srcs, form: Form, strides, scalar=None, mode: str = "nearest_even"):
    """Check and issue one lane-form instruction ``op`` on ``dst`` and ``srcs`` under ``form``."""
    tensors = (dst, *srcs)
    pats, empty = patterns(form, tensors, strides, call)
    roles = ["destination"] + [f"source {i}" if len(srcs) > 1 else "source" for i in range(len(srcs))]
    operands = [operand(t, p, call, r) for t, p, r in zip(tensors, pats, roles)]
    if runtime.current().planning or empty:
        return
    ops.issue(lambda c: c.vector_lanes(op, operands[0], *operands[1:], scalar=scalar, mode=mode))


def _types(o: vecops.VecOp, dst, srcs, call: str) -> None:
    fmts = {t.dtype.fmt for t in (dst, *srcs)}
    if len(fmts) > 1:
        raise AscError(
            f"asc.{call} at {runtime.where()}: dst and sources are one type here, got "
            f"{sorted(str(t.dtype) for t in (dst, *srcs))}; convert with asc.cast first."
        )
    if dst.dtype.fmt not in o.types:
        raise AscError(
            f"asc.{call} at {runtime.where()} on {dst.dtype}: the vendor's {call} takes {', '.join(o.types)}."
        )


# ---- the families -------------------------------------------------------------------------------------
_COUNT_FORM = {
    "VAdd",
    "VSub",
    "VMul",
    "VDiv",
    "VMax",
    "VMin",
    "VAdds",
    "VMuls",
    "VMaxs",
    "VMins",
    "VAbs",
    "VExp",
}
_COUNT_FORM |= {"VLn", "VSqrt", "VRelu", "VLeakyRelu"}


def _tiles(*ts) -> bool:
    """Some operand is a 2-D tile (an L0C result moved to UB): the count form's whole-tile path."""
    return any(getattr(t, "request", None) is not None and t.request.shape is not None for t in ts)


def _binary(op: str, name: str, doc: str):
    o = vecops.OPS[op]

    def f(dst: LocalTensor, src0: LocalTensor, src1: LocalTensor, *args, **kwargs) -> None:
        form = parse(name, args, kwargs, BinaryRepeatParams)
        if form.count is not None and op in _COUNT_FORM and _tiles(dst, src0, src1):
            return ops.legacy_vector(op, dst, (src0, src1), form.count, name)
        _types(o, dst, (src0, src1), name)
        p = form.params or BinaryRepeatParams()
        strides = [
            (p.dst_blk_stride, p.dst_rep_stride),
            (p.src0_blk_stride, p.src0_rep_stride),
            (p.src1_blk_stride, p.src1_rep_stride),
        ]
        issue_lanes(op, name, dst, (src0, src1), form, strides)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc + _FORMS_DOC.format(params="BinaryRepeatParams")
    return f


def _with_scalar(op: str, name: str, doc: str):
    o = vecops.OPS[op]

    def f(dst: LocalTensor, src: LocalTensor, scalar, *args, **kwargs) -> None:
        form = parse(name, args, kwargs, UnaryRepeatParams)
        s = scalar_of(scalar, dst.dtype.fmt if isinstance(dst, LocalTensor) else "fp32")
        if form.count is not None and op in _COUNT_FORM and _tiles(dst, src):
            kw = {"alpha": s} if op == "VLeakyRelu" else {"scalar": s}
            return ops.legacy_vector(op, dst, (src,), form.count, name, **kw)
        _types(o, dst, (src,), name)
        p = form.params or UnaryRepeatParams()
        strides = [(p.dst_blk_stride, p.dst_rep_stride), (p.src_blk_stride, p.src_rep_stride)]
        issue_lanes(op, name, dst, (src,), form, strides, scalar=s)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc + _FORMS_DOC.format(params="UnaryRepeatParams")
    return f


def _unary(op: str, name: str, doc: str):
    o = vecops.OPS[op]

    def f(dst: LocalTensor, src: LocalTensor, *args, **kwargs) -> None:
        form = parse(name, args, kwargs, UnaryRepeatParams)
        if form.count is not None and op in _COUNT_FORM and _tiles(dst, src):
            return ops.legacy_vector(op, dst, (src,), form.count, name)
        _types(o, dst, (src,), name)
        p = form.params or UnaryRepeatParams()
        strides = [(p.dst_blk_stride, p.dst_rep_stride), (p.src_blk_stride, p.src_rep_stride)]
        issue_lanes(op, name, dst, (src,), form, strides)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc + _FORMS_DOC.format(params="UnaryRepeatParams")
    return f


_FORMS_DOC = """

    Forms: ``(..., count)``, or ``(..., mask, repeat_times, asc.{params}(...), is_set_mask=True)`` with
    ``mask`` an int (lanes) or ``[low, high]`` (bits); see :mod:`npu_jax.asc.vec`."""

add = _binary("VAdd", "add", "``Add``: dst = src0 + src1 (V; half, float, int16, int32).")
sub = _binary("VSub", "sub", "``Sub``: dst = src0 - src1 (V; half, float, int16, int32).")
mul = _binary("VMul", "mul", "``Mul``: dst = src0 * src1 (V; half, float, int16, int32).")
div = _binary("VDiv", "div", "``Div``: dst = src0 / src1 (V; half, float; a division-class instruction).")
max = _binary("VMax", "max", "``Max``: dst = max(src0, src1) (V).")  # noqa: A001
min = _binary("VMin", "min", "``Min``: dst = min(src0, src1) (V).")  # noqa: A001
add_relu = _binary("VAddRelu", "add_relu", "``AddRelu``: dst = max(src0 + src1, 0) (V).")
sub_relu = _binary("VSubRelu", "sub_relu", "``SubRelu``: dst = max(src0 - src1, 0) (V).")
bitwise_and = _binary("VAnd", "bitwise_and", "``And``: dst = src0 & src1 (V; int16, uint16).")
bitwise_or = _binary("VOr", "bitwise_or", "``Or``: dst = src0 | src1 (V; int16, uint16).")
mul_add_dst = _binary("VMulAddDst", "mul_add_dst", "``MulAddDst``: dst = src0 * src1 + dst (V).")
fused_mul_add = _binary("VFusedMulAdd", "fused_mul_add", "``FusedMulAdd``: dst = src0 * dst + src1 (V).")
fused_mul_add_relu = _binary(
    "VFusedMulAddRelu", "fused_mul_add_relu", "``FusedMulAddRelu``: dst = max(src0 * dst + src1, 0) (V)."
)

adds = _with_scalar("VAdds", "adds", "``Adds``: dst = src + scalar (V); the scalar is a T.")
muls = _with_scalar("VMuls", "muls", "``Muls``: dst = src * scalar (V); the scalar is a T.")
maxs = _with_scalar("VMaxs", "maxs", "``Maxs``: dst = max(src, scalar) (V).")
mins = _with_scalar("VMins", "mins", "``Mins``: dst = min(src, scalar) (V).")
leaky_relu = _with_scalar(
    "VLeakyRelu", "leaky_relu", "``LeakyRelu``: dst = src if src >= 0 else scalar * src (V)."
)
shift_left = _with_scalar("VShiftLeft", "shift_left", "``ShiftLeft``: dst = src << scalar (V; integers).")
shift_right = _with_scalar("VShiftRight", "shift_right", "``ShiftRight``: dst = src >> scalar (V; integers).")
axpy = _with_scalar("VAxpy", "axpy", "``Axpy``: dst = src * scalar + dst (V).")

abs = _unary("VAbs", "abs", "``Abs``: dst = |src| (V).")  # noqa: A001
exp = _unary("VExp", "exp", "``Exp``: dst = e^src (V; a transcendental-class instruction).")
ln = _unary("VLn", "ln", "``Ln``: dst = ln(src) (V; transcendental).")
sqrt = _unary("VSqrt", "sqrt", "``Sqrt``: dst = sqrt(src) (V; transcendental).")
rsqrt = _unary("VRsqrt", "rsqrt", "``Rsqrt``: dst = 1 / sqrt(src) (V; transcendental).")
reciprocal = _unary("VReciprocal", "reciprocal", "``Reciprocal``: dst = 1 / src (V; division).")
relu = _unary("VRelu", "relu", "``Relu``: dst = max(src, 0) (V).")
bitwise_not = _unary("VNot", "bitwise_not", "``Not``: dst = ~src (V; int16, uint16).")


def cast(dst: LocalTensor, src: LocalTensor, round_mode: RoundMode, *args, **kwargs) -> None:
    """``Cast(dst, src, round_mode, ...)``: convert to ``dst``'s type with ``round_mode`` (V): float to
    float, float to integer (rounded by the mode, saturated), integer to float. ``CAST_ODD`` rounds to
    odd (float to a narrower float)."""
    if not isinstance(round_mode, RoundMode):
        raise TypeError(
            f"cast: round_mode is an asc.RoundMode (e.g. asc.RoundMode.CAST_RINT), got {round_mode!r}."
        )
    form = parse("cast", args, kwargs, UnaryRepeatParams)
    if form.count is not None and _tiles(dst, src) and round_mode != RoundMode.CAST_ODD:
        return ops.legacy_vector("VCast", dst, (src,), form.count, "cast", mode=round_mode.value)
    _check(dst, "cast", "destination")
    _check(src, "cast", "source")
    p = form.params or UnaryRepeatParams()
    strides = [(p.dst_blk_stride, p.dst_rep_stride), (p.src_blk_stride, p.src_rep_stride)]
    issue_lanes("VCast", "cast", dst, (src,), form, strides, mode=round_mode.value)


def duplicate(dst: LocalTensor, scalar, *args, **kwargs) -> None:
    """``Duplicate(dst, scalar, count)`` or ``Duplicate(dst, scalar, mask, repeat_times,
    dst_block_stride, dst_repeat_stride)``: every lane = scalar, converted to dst's type (V)."""
    s = scalar_of(scalar, dst.dtype.fmt if isinstance(dst, LocalTensor) else "fp32")
    args = list(args)
    if len(args) >= 3 or {"dst_block_stride", "dst_repeat_stride"} & kwargs.keys():
        names = ["mask", "repeat_times", "dst_block_stride", "dst_repeat_stride", "is_set_mask"]
        vals = dict(zip(names, args))
        vals.update(kwargs)
        blk, rep = vals.pop("dst_block_stride", 1), vals.pop("dst_repeat_stride", 8)
        form = parse("duplicate", [], {**vals, "repeat_params": UnaryRepeatParams()}, UnaryRepeatParams)
        strides = [(blk, rep)]
    else:
        form = parse("duplicate", args, kwargs, UnaryRepeatParams)
        if form.count is not None and _tiles(dst):
            return ops.legacy_vector("VDup", dst, (), form.count, "duplicate", scalar=s)
        strides = [(1, 8)]
    _check(dst, "duplicate", "destination")
    issue_lanes("VDup", "duplicate", dst, (), form, strides, scalar=s)

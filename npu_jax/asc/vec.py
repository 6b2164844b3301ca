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

from npu_jax.asc import ops, runtime
from npu_jax.asc.operands import (
    check_ub,
    issue_lanes,
    parse,
    reset_mask,
    scalar_of,
    set_mask_count,
    set_mask_norm,
    set_vector_mask,
)
from npu_jax.asc.runtime import AscError
from npu_jax.asc.tensors import LocalTensor
from npu_jax.asc.types import (
    BinaryRepeatParams,
    RoundMode,
    UnaryRepeatParams,
)
from npu_jax.core.isa import vecops

__all__ = ["reset_mask", "set_mask_count", "set_mask_norm", "set_vector_mask"]


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
    check_ub(dst, "cast", "destination")
    check_ub(src, "cast", "source")
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
    check_ub(dst, "duplicate", "destination")
    issue_lanes("VDup", "duplicate", dst, (), form, strides, scalar=s)

"""The data semantics of the Vector unit (V) and of scalar work (S).

``vector`` is the ``semantics`` of every vector op's declaration in ``isa/table.py`` (one
declaration per op, all sharing this function): whole UB allocation stages, computed in fp32 and
rounded once to the destination's format.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
from jax import lax

from npu_jax.core import sanitize
from npu_jax.core.buffers import DTYPES, Ref
from npu_jax.core.isa import lanes, vecops
from npu_jax.core.isa.data import View, broadcast_row, stage_block, view_block, write_ref
from npu_jax.core.isa.decl import Effect
from npu_jax.core.isa.lanes import Lanes
from npu_jax.core.quant import INT_RANGES, to_int
from npu_jax.core.rounding import round_to
from npu_jax.core.state import Core
from npu_jax.hw import costs
from npu_jax.hw.formats import itemsize

_i32 = jnp.int32

BINARY = {
    "VAdd": jnp.add,
    "VSub": jnp.subtract,
    "VMul": jnp.multiply,
    "VMax": jnp.maximum,
    "VMin": jnp.minimum,
    "VDiv": jnp.divide,
}
WITH_SCALAR = {"VAdds": jnp.add, "VMuls": jnp.multiply, "VMaxs": jnp.maximum, "VMins": jnp.minimum}
UNARY = ("VRelu", "VLeakyRelu", "VExp", "VCast", "VReduceSum", "VCopy", "VAbs", "VLn", "VSqrt", "VReduceMax")
REDUCE = ("VReduceSum", "VReduceMax")  # a whole source into element 0 of the destination
FILL = ("VDup",)  # Ascend C ``Duplicate`` (TBE ``vector_dup``): every element of dst = scalar
# every vector op, in the order of the trace's op names (ops added later go last: the ids stay)
_ADDED = ("VDiv", "VLn", "VSqrt", "VReduceMax")
VECTOR_OPS = tuple(o for o in tuple(BINARY) + tuple(WITH_SCALAR) + UNARY + FILL if o not in _ADDED) + _ADDED


# every op the lane form runs (lanes_vector): the table's, and Cast and Duplicate
LANE_OPS = tuple(vecops.OPS) + ("VCast", "VDup") + tuple(vecops.SHAPED)


def sources(op: str) -> int:
    """How many source operands ``op`` takes."""
    return 2 if op in BINARY else 0 if op in FILL else 1


def _shape(r: Ref) -> tuple:
    """The elements an operand covers: a view's shape, or its allocation stage's."""
    return r.shape if isinstance(r, View) else r.alloc.shape


def _view_oob(core: Core, v: View, op: str):
    """memcheck of a strided view inside its allocation (static offsets raise now)."""
    a = v.alloc
    if len(v.shape) != len(a.shape) or len(v.steps) != len(a.shape) or min(v.steps) < 1:
        raise ValueError(
            f"{op}: a view of {a.name!r} {a.shape} needs one size and one step >= 1 per dim, got "
            f"shape {v.shape} step {v.step}."
        )
    off = v.offset or (0,) * len(a.shape)
    return sanitize.window_oob(core, a, off, v.extent, a.shape, op)


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


def elementwise(op: str, xs, *, scalar=None, alpha: float = 0.0):
    """The fp32 result of an element-wise vector op (not ``VReduceSum`` / ``VDup``) on fp32 sources:
    the arithmetic alone (``vecops.OPS``), shared by the instruction and by the data path computed
    apart from the timing (``kernels/values.py``)."""
    if op == "VCast":
        return xs[0]
    if op not in vecops.OPS:
        raise ValueError(f"{op} is not an element-wise vector op.")
    o = vecops.OPS[op]
    if op == "VLeakyRelu":
        return o.fn(xs, jnp.float32(alpha))
    if o.scalar:
        if scalar is None:
            raise ValueError(f"{op} needs scalar=.")
        return o.fn(xs, jnp.asarray(scalar, jnp.float32))
    return o.fn(xs)


def store(y, op: str, fmt: str, policy, hw, mode: str = "nearest_even"):
    """A vector op's fp32 result as stored in a ``fmt`` destination: rounded to the policy's vector
    format first (every op but ``VCast``), then to ``fmt`` (``VCast`` in its own ``mode``). An
    integer destination (int8, int32) takes a ``VCast`` (rounded by its mode, saturated) or a
    ``VCopy`` of integers: the vector unit's arithmetic is float (quantise: ``VMuls`` by the scale,
    ``VAdds`` the offset, then ``VCast`` to int8, as the vendor's ``AscendQuant``)."""
    if fmt in INT_RANGES:
        if op not in ("VCast", "VCopy"):
            raise ValueError(
                f"{op} computes in float and cannot write an {fmt} destination: compute in fp16 / fp32 and VCast "
                f"to {fmt} last."
            )
        return to_int(y, fmt, mode if op == "VCast" else "nearest_even")
    over = policy.overflow_mode(hw)
    if policy.vector != "fp32" and op != "VCast":  # the op runs in the policy's vector format
        y = round_to(y, policy.vector, overflow=over).astype(jnp.float32)
    if op == "VCast" and mode == "odd":
        return round_odd(y, fmt, over)
    return round_to(y, fmt, mode if op == "VCast" else "nearest_even", overflow=over)


def round_odd(y, fmt: str, overflow: str = "inf"):
    """``Cast`` with ``CAST_ODD``: ``y`` (fp32) to ``fmt`` rounded to odd (von Neumann rounding: toward
    zero, then the last bit set where the result is inexact), the rounding that keeps a later
    rounding to a narrower format correct."""
    if fmt == "fp32":
        return y.astype(jnp.float32)
    t = round_to(y, fmt, "toward_zero", overflow=overflow)
    bits = lax.bitcast_convert_type(t, jnp.uint16)
    inexact = (t.astype(jnp.float32) != y) & jnp.isfinite(y)
    return lax.bitcast_convert_type(bits | inexact.astype(jnp.uint16), t.dtype)


def ub_address(r, xp=jnp):
    """The UB byte address a vector operand's elements start at, where they are one contiguous run
    read from the start (a whole allocation stage, or a one-dimensional view: Ascend C's local
    tensors), else None (a sub-block or strided view: its beats' rows are not modelled). ``xp``:
    numpy on the timing Board (``core/board.py``)."""
    i = _i32 if xp is jnp else np.int64
    a = r.alloc
    base = a.address(xp.asarray(r.stage, i))
    if isinstance(r, View):
        if len(a.shape) != 1 or any(s != 1 for s in r.steps):
            return None
        return base + xp.asarray(r.offset[0], i) * itemsize(a.dtype)
    return base if r.offset is None else None


def _read_conflict(core: Core, h, op: str, shape, srcs) -> object:
    """Whether a binary op's two sources collide in a UB bank group (``costs.ub_read_conflict``):
    both contiguous runs of the destination's shape (a broadcast row or a strided view: not modelled)."""
    if op not in BINARY or not core.hw.ub_bank_groups:
        return False
    addrs = [ub_address(s) for s in srcs]
    if any(a is None for a in addrs) or any(_shape(s) != tuple(shape) for s in srcs):
        return False
    return costs.ub_read_conflict(h, addrs[0], addrs[1])


def vector(
    core: Core,
    h,
    when,
    *,
    op: str,
    dst: Ref,
    srcs: tuple[Ref, ...],
    scalar=None,
    alpha: float = 0.0,
    mode: str = "nearest_even",
    count_elems=None,
):
    """One vector instruction over whole UB allocation stages (see ``isa.vector``)."""
    for r in (dst,) + srcs:
        if r.buffer != "UB":
            raise ValueError(f"vector ops work on UB, {r.alloc.name!r} is in {r.buffer}.")
    views = tuple(r for r in (dst,) + srcs if isinstance(r, View))
    view_oob = sum((_view_oob(core, v, op) for v in views), ())
    if isinstance(dst, View) and any(s != 1 for s in dst.steps):
        raise ValueError(f"{op}: a destination view is contiguous (steps 1), got step {dst.step}.")
    shape = dst.shape if isinstance(dst, View) else dst.alloc.shape

    def operand(i, s):
        a = s.alloc
        if isinstance(s, View):
            return view_block(core, s)
        if (
            i == 1
            and op in BINARY
            and len(shape) == 2
            and len(a.shape) == 2
            and a.shape[0] == 1
            and shape[0] > 1
        ):
            return jnp.broadcast_to(broadcast_row(core, s, shape[1]), shape)
        return stage_block(core, s, a.shape)

    xs = [operand(i, s).astype(jnp.float32) for i, s in enumerate(srcs)]
    for s, x in zip(srcs, xs):
        if op not in REDUCE and x.shape != shape:
            raise ValueError(f"{op}: source {s.alloc.name!r} {x.shape} != destination {shape}.")
    if len(srcs) != sources(op):
        raise ValueError(f"{op} takes {sources(op)} source(s), got {len(srcs)}.")
    if op in FILL:
        if scalar is None:
            raise ValueError(f"{op} needs scalar=.")
        y = jnp.full(shape, jnp.asarray(scalar, jnp.float32))
    elif op in REDUCE:
        flat = xs[0].reshape(-1)
        fill = 0.0 if op == "VReduceSum" else -jnp.inf
        if count_elems is not None:
            flat = jnp.where(jnp.arange(flat.shape[0]) < jnp.asarray(count_elems, _i32), flat, fill)
        if op == "VReduceSum":
            total = _pairwise_sum(flat, core.ctx.policy.vector)
        else:  # a max rounds nothing
            total = jnp.max(flat)
        y = stage_block(core, dst, shape).astype(jnp.float32).reshape(-1).at[0].set(total).reshape(shape)
    else:
        y = elementwise(op, xs, scalar=scalar, alpha=alpha)
    out = store(y, op, dst.alloc.dtype, core.ctx.policy, core.hw, mode)
    n_el = math.prod(shape) if count_elems is None else count_elems
    if count_elems is not None:
        keep = (jnp.arange(math.prod(shape)) < jnp.asarray(count_elems, _i32)).reshape(shape)
        out = jnp.where(keep, out, stage_block(core, dst, shape))
    width = max([itemsize(dst.alloc.dtype)] + [itemsize(s.alloc.dtype) for s in srcs])
    counted = srcs[0] if op in REDUCE else dst  # the operand whose elements are processed
    if op in REDUCE:
        n_el = math.prod(_shape(srcs[0])) if count_elems is None else count_elems
    count_cap = math.prod(shape) if counted is dst else math.prod(_shape(counted))
    nbytes = jnp.asarray(n_el, _i32) * width
    core = write_ref(core, dst, out, when)
    oob = (
        ()
        if count_elems is None
        else sanitize.extent_oob(
            core,
            counted.alloc,
            {"count_elems": count_elems},
            {"count_elems": count_cap},
            op,
        )
    )
    return Effect(
        core,
        cost=dict(
            nbytes=nbytes,
            conflict=_read_conflict(core, h, op, shape, srcs),
            cpr=vecops.cycles_per_repeat(op, width),
        ),
        counts=(("vector_bytes", nbytes),),
        reads=srcs,
        writes=(dst,),
        oob=oob + view_oob,
    )


def scalar(core: Core, h, when, *, cycles):
    """Scalar work (address arithmetic, loop control): no data, ``cycles`` on pipe S."""
    return Effect(core, cost=dict(cycles=cycles))


# ---- the lane form: repeats, masks and strides (lanes.py) -----------------------------------------
def _lane_oob(core: Core, op: Lanes, name: str):
    """memcheck of a lane operand whose start is traced: its walk must stay inside its stage."""
    n = op.alloc.shape[0] * itemsize(op.alloc.dtype) // itemsize(op.elem)  # the stage in elements
    ext = op.pattern.extent
    if isinstance(op.start, int):
        if op.start < 0 or op.start + ext > n:
            raise ValueError(
                f"{name}: the lanes of {op.alloc.name!r} reach element {op.start + ext} of {n}; keep the walk "
                f"(offset, repeats and strides) inside the tensor."
            )
        return ()
    return sanitize.window_oob(core, op.alloc, (op.start,), (ext,), (n,), name)


def _lane_inputs(core: Core, o, dst: Lanes, srcs, fmts):
    """The sources' lanes in the op's compute type (and the destination's, for an op that reads it)."""
    ct = vecops.compute_type(dst.elem)
    xs = [lanes.read(core, s).astype(ct) for s in srcs]
    if o is not None and o.reads_dst:
        xs.append(lanes.read(core, dst).astype(ct))
    return xs


def store_lanes(y, op: str, fmt: str, policy, hw, mode: str = "nearest_even"):
    """A lane op's result as stored in ``fmt``: floats as :func:`store` rounds them; an integer
    result wraps to the destination's width (an integer op's own arithmetic), except a ``VCast``
    into an integer type, which rounds by its mode and saturates."""
    if fmt in vecops.INTS and op != "VCast" and jnp.issubdtype(y.dtype, jnp.integer):
        return y.astype(DTYPES[fmt])
    return store(y, op, fmt, policy, hw, mode)


def lanes_vector(
    core: Core,
    h,
    when,
    *,
    op: str,
    dst: Lanes,
    srcs: tuple[Lanes, ...],
    scalar=None,
    mode: str = "nearest_even",
    args: tuple = (),
):
    """One vector instruction in the lane form: the walk of each operand (``lanes.Pattern``: repeats,
    blocks, strides, mask), the arithmetic of ``vecops.OPS[op]`` (or ``VCast`` / ``VDup``, or a shaped
    op of ``vecops.SHAPED``: a reduction, Brcb, Compare, Select, Gather... with its static ``args``),
    the result rounded to the destination's type and written to the lanes that run. Cost: the op's
    rate (``costs.vector_op``) over its repeats."""
    for r in (dst,) + srcs:
        if r.buffer != "UB":
            raise ValueError(f"vector ops work on UB, {r.alloc.name!r} is in {r.buffer}.")
        if not isinstance(r, Lanes):
            raise TypeError(f"{op}: a lane-form operand is a lanes.Lanes, got {type(r).__name__}.")
    oob = sum((_lane_oob(core, r, op) for r in (dst,) + srcs), ())
    o = vecops.OPS.get(op)
    shaped = vecops.SHAPED.get(op)
    repeats = dst.pattern.shape[0]
    if shaped is not None:
        if len(srcs) != shaped.n_src:
            raise ValueError(f"{op} takes {shaped.n_src} source(s), got {len(srcs)}.")
        xs = [lanes.read(core, s) for s in srcs]
        y = shaped.fn(xs, [s.pattern.on for s in srcs], dst.elem, scalar=scalar, **dict(args))
        if y.shape != dst.pattern.shape:
            raise ValueError(f"{op}: the result's lanes {y.shape} != the destination's {dst.pattern.shape}.")
        if shaped.repeats == "src" and srcs:
            repeats = srcs[0].pattern.shape[0]
        if shaped.raw:
            out = y.astype(DTYPES[dst.elem])
        elif dst.elem in vecops.INTS:
            out = y.astype(jnp.int32).astype(DTYPES[dst.elem])
        else:
            out = store(y, op, dst.elem, core.ctx.policy, core.hw, mode)
    elif op == "VDup":
        y = jnp.full(dst.pattern.shape, jnp.asarray(scalar, vecops.compute_type(dst.elem)))
    elif op == "VCast":
        y = lanes.read(core, srcs[0])
        y = y.astype(jnp.float32) if srcs[0].elem in vecops.FLOATS or dst.elem in vecops.FLOATS else y
    elif o is not None:
        if len(srcs) != o.n_src:
            raise ValueError(f"{op} takes {o.n_src} source(s), got {len(srcs)}.")
        xs = _lane_inputs(core, o, dst, srcs, None)
        if o.scalar:
            s = jnp.asarray(scalar, vecops.compute_type(dst.elem))
            y = o.fn(xs, s)
        else:
            y = o.fn(xs)
    else:
        raise ValueError(f"{op} has no lane form; known: {sorted(LANE_OPS)}.")
    if shaped is None:
        for s in srcs:
            if s.pattern.shape != dst.pattern.shape:
                raise ValueError(
                    f"{op}: source lanes {s.pattern.shape} != destination lanes {dst.pattern.shape}."
                )
        out = store_lanes(y, op, dst.elem, core.ctx.policy, core.hw, mode)
    core = lanes.write(core, dst, out, when)
    width = max(itemsize(r.elem) for r in (dst,) + srcs)
    nbytes = jnp.asarray(dst.pattern.elements() * width, _i32)
    conflict = False
    if o is not None and o.n_src == 2 and core.hw.ub_bank_groups:
        a0, a1 = (lane_address(s) for s in srcs)
        conflict = costs.ub_read_conflict(h, a0, a1)
    return Effect(
        core,
        cost=dict(repeats=repeats, cpr=vecops.cycles_per_repeat(op, width), conflict=conflict),
        counts=(("vector_bytes", nbytes),),
        reads=srcs + ((dst,) if o is not None and o.reads_dst else ()),
        writes=(dst,),
        oob=oob,
    )


def lane_address(r: Lanes, xp=jnp):
    """The UB byte address a lane operand starts at (``xp``: numpy on the timing Board)."""
    i = _i32 if xp is jnp else np.int64
    return r.alloc.address(xp.asarray(r.stage, i)) + xp.asarray(r.start, i) * itemsize(r.elem)


# ---- the Scalar pipe's access to UB (LocalTensor::GetValue / SetValue) ----------------------------
def scalar_get(core: Core, h, when, *, src: Lanes):
    """GetValue: one UB element read on the Scalar pipe; the value itself is read by the caller
    (``lanes.read`` at the same point of the program), this charges and logs it."""
    cycles = core.hw.assumed.scalar_ub_cycles  # unpublished (Assumed)
    return Effect(core, cost=dict(cycles=cycles), reads=(src,), oob=_lane_oob(core, src, "GetValue"))


def scalar_set(core: Core, h, when, *, dst: Lanes, value):
    """SetValue: one UB element written on the Scalar pipe, converted to its type."""
    v = jnp.reshape(jnp.asarray(value), (1, 1))
    if dst.elem in vecops.FLOATS:
        v = round_to(v.astype(jnp.float32), dst.elem)
    else:
        v = v.astype(DTYPES[dst.elem])
    core = lanes.write(core, dst, v, when)
    cycles = core.hw.assumed.scalar_ub_cycles
    return Effect(core, cost=dict(cycles=cycles), writes=(dst,), oob=_lane_oob(core, dst, "SetValue"))

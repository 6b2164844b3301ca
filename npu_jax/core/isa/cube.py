"""The data semantics of the Cube and of leaving L0C: Mmad (M), Fixpipe (FIX), L0C -> UB (V).

Each function here is the ``semantics`` of one declaration in ``isa/table.py``: it checks its
operands, computes and writes the data, and returns an :class:`Effect`. The Cube works on logical
(M, K) x (K, N) tiles, in the order of products and sums that ``isa/mac.py`` promises.
"""

from __future__ import annotations

import jax.numpy as jnp

from npu_jax.core import l2, sanitize
from npu_jax.core.buffers import Ref
from npu_jax.core.isa.data import (
    broadcast_row,
    gm_bursts,
    mask,
    rows_to_window,
    stage_block,
    window_valid,
    write_gm,
    write_ref,
)
from npu_jax.core.isa.decl import Effect
from npu_jax.core.isa.mac import accumulate
from npu_jax.core.quant import activate, requantize
from npu_jax.core.state import Core
from npu_jax.hw import costs
from npu_jax.hw.formats import acc_format, itemsize

_i32 = jnp.int32


# ---- Mmad (M) ----------------------------------------------------------------------------------
def mmad(core: Core, h, when, *, dst: Ref, a: Ref, b: Ref, m, n, k, init=False):
    """Mmad: C (L0C, fp32) = A (L0A) @ B (L0B) [+ C], over the leading m x n x k (see ``isa.mmad``);
    int8 operands sum exactly into an int32 C."""
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
    for r in (a, b):
        if r.alloc.dtype not in core.hw.cube_operands:
            raise ValueError(
                f"Mmad: {core.hw.name}'s Cube takes {' / '.join(core.hw.cube_operands)} operands (the vendor's Mmad "
                f"page); {r.buffer} holds {r.alloc.dtype}. Convert the operands (a Cast on the vector unit, or "
                f"policy=npu_jax.Policy(operand='fp16')), or run on a chip that has them (presets.ascend910b())."
            )
    ints = a.alloc.dtype == "int8"
    if ints != (b.alloc.dtype == "int8"):
        raise ValueError(
            f"Mmad operands are both int8 or both float; got {a.alloc.dtype} and {b.alloc.dtype}."
        )
    acc = acc_format(a.alloc.dtype)  # int8 x int8 sums exactly into int32, floats into fp32
    if dst.alloc.shape != (M, N) or dst.alloc.dtype != acc:
        raise ValueError(
            f"Mmad destination must be an {acc} ({M}, {N}) L0C tile, got {dst.alloc.dtype} {dst.alloc.shape}."
        )
    m_, n_, k_ = (jnp.asarray(v, _i32) for v in (m, n, k))
    rows = jnp.arange(M, dtype=_i32) < m_
    cols = jnp.arange(N, dtype=_i32) < n_
    kk = jnp.arange(K, dtype=_i32) < k_
    work = jnp.int32 if ints else jnp.float32
    A32 = jnp.where(rows[:, None] & kk[None, :], A.astype(work), 0)
    B32 = jnp.where(kk[:, None] & cols[None, :], B.astype(work), 0)
    C = core.read(dst.alloc, dst.stage)
    C0 = jnp.where(jnp.asarray(init), jnp.zeros((), C.dtype), C)
    isz = itemsize(a.alloc.dtype)
    mode = "int32" if ints else core.ctx.policy.accumulate
    # the order of the products and sums is the emulator's promise (isa/mac.py), not XLA's choice
    Cn = accumulate(C0, A32, B32, mode, core.hw.k0(isz), a.alloc.dtype == "fp32")
    Cn = jnp.where(rows[:, None] & cols[None, :], Cn, C)
    core = write_ref(core, dst, Cn, when)
    counts = (("flops", 2 * m_ * n_ * k_), ("flops_issued", costs.mmad_flops_issued(h, m_, n_, k_, isz)))
    oob = sanitize.extent_oob(core, dst.alloc, {"m": m, "n": n, "k": k}, {"m": M, "n": N, "k": K}, "Mmad")
    return Effect(
        core,
        cost=dict(m=m_, n=n_, k=k_, itemsize=isz),
        counts=counts,
        reads=(a, b, (dst, ~jnp.asarray(init, jnp.bool_))),
        writes=(dst,),
        oob=oob,
    )


# ---- leaving L0C: Fixpipe (910B) and L0C->UB (910/310P) ----------------------------------------
def _l0c_nd(core: Core, src: Ref):
    if src.buffer != "L0C":
        raise ValueError(f"expected an L0C source, got {src.buffer}.")
    return core.read(src.alloc, src.stage)


def fixpipe_values(acc, bias_row, act: str | None, alpha: float = 0.0, clip: float | None = None):
    """Fixpipe's arithmetic on fp32 L0C values, before the output conversion: the bias row (fp32,
    broadcast over rows) added, then one activation, then the clip. Shared by the instruction and
    by the data path computed apart from the timing (``kernels/values.py``)."""
    if bias_row is not None:
        acc = acc + bias_row.astype(jnp.float32)
    return activate(acc, act, alpha, clip)


def leave_l0c(
    core: Core, nd, fmt: str, scale, offset: int, cols: int, *salt, activation=None, alpha=0.0, clip=None
):
    """L0C values on their way out, in ``fmt``: fp32 sums converted by the policy; int32 sums (int8
    operands) as they are (``fmt`` int32), or scaled (``scale``: a Ref to a fp32 row, or a number)
    by :func:`npu_jax.requantize` to fp16 / int8 with ``offset`` and the fused activation."""
    if nd.dtype != jnp.int32:
        if scale is not None or offset:
            raise ValueError(
                "scale / offset apply to an int32 accumulator (int8 operands); this L0C is fp32."
            )
        return core.ctx.policy.convert_out(nd, fmt, core.hw, *salt)
    if fmt == "int32":
        if scale is not None or offset:
            raise ValueError("an int32 accumulator written as int32 takes no scale or offset.")
        return nd
    if scale is None:
        raise ValueError(
            f"an int32 accumulator (int8 operands) leaves L0C as {fmt} only through a scale: pass scale= (a "
            "number, or an fp32 row), or write int32."
        )
    s = broadcast_row(core, scale, cols)[0] if isinstance(scale, Ref) else jnp.float32(scale)
    over = core.ctx.policy.overflow_mode(core.hw)
    return requantize(nd, s, offset, fmt, overflow=over, activation=activation, alpha=alpha, clip=clip)


def _fixpipe_common(core: Core, src: Ref, m, n, relu, activation, alpha, clip, bias):
    """What both Fixpipe destinations share: the checks, L0C read, bias and activation (fp32)."""
    hw = core.hw
    if hw.coupled:
        raise ValueError(
            f"{hw.name} has no Fixpipe (coupled data path): move L0C with "
            f"l0c_to_ub and finish the epilogue on the vector unit."
        )
    if relu and activation not in (None, "relu"):
        raise ValueError(f"fixpipe: relu=True conflicts with activation={activation!r}; pass one.")
    act = "relu" if relu else activation
    nd = _l0c_nd(core, src)
    if nd.dtype == jnp.int32 and bias is not None:
        raise ValueError("an int8 kernel's Fixpipe takes no fp32 bias: its way out is the (re)quantisation.")
    row = None if bias is None else broadcast_row(core, bias, nd.shape[1])
    ints = nd.dtype == jnp.int32  # an int32 L0C's activation runs in its requantisation (leave_l0c)
    nd = nd if ints else fixpipe_values(nd, row, act, alpha, clip)
    m_, n_ = jnp.asarray(m, _i32), jnp.asarray(n, _i32)
    oob = sanitize.extent_oob(
        core, src.alloc, {"m": m, "n": n}, {"m": src.alloc.shape[0], "n": src.alloc.shape[-1]}, "Fixpipe"
    )
    return nd, m_, n_, oob, (dict(activation=act, alpha=alpha, clip=clip) if ints else {})


def fixpipe_gm(
    core: Core,
    h,
    when,
    *,
    dst,
    src: Ref,
    m,
    n,
    relu=False,
    activation=None,
    alpha=0.0,
    clip=None,
    bias=None,
    scale=None,
    offset=0,
):
    """Fixpipe L0C -> a GM output window, converted to the policy's output format."""
    nd, m_, n_, oob, acts = _fixpipe_common(core, src, m, n, relu, activation, alpha, clip, bias)
    spec = core.ctx.gm_spec(dst.name)
    if not spec.output:
        raise ValueError(f"GM tensor {dst.name!r} is an input; kernels write only outputs.")
    salt = (jnp.sum(core.n_instr), *dst.starts)
    out = leave_l0c(core, nd, spec.dtype, scale, offset, nd.shape[1], *salt, **acts)
    block = rows_to_window(out, dst.sizes)
    valid = window_valid(core, dst, m_, n_)
    nbytes, bursts = gm_bursts(core, dst, valid)
    oob = oob + sanitize.gm_oob(core, dst)
    core, written = write_gm(core, dst, block, valid, when)
    core = l2.enter(core, nbytes, when)  # write-allocate: the bytes enter L2 (its clock, recency)
    return Effect(
        core,
        cost=dict(m=m_, n=n_, out_bytes=nbytes, bursts=bursts, rate=costs.write_rate(h, core.active_cores)),
        counts=(
            ("L0C->GM", nbytes),
            ("L2->HBM", nbytes if l2.write_back(core.hw, core.ctx.gm, dst.name) else 0 * nbytes),
        ),
        reads=(src,),
        oob=oob,
        gm_writes=((dst, written),),
    )


def fixpipe_l1(
    core: Core,
    h,
    when,
    *,
    dst,
    src: Ref,
    m,
    n,
    relu=False,
    activation=None,
    alpha=0.0,
    clip=None,
    bias=None,
    scale=None,
    offset=0,
):
    """Fixpipe L0C -> a whole 2-D ND allocation stage in L1."""
    nd, m_, n_, oob, acts = _fixpipe_common(core, src, m, n, relu, activation, alpha, clip, bias)
    if not (isinstance(dst, Ref) and dst.buffer == "L1"):
        raise ValueError("Fixpipe writes to a GM window or an L1 allocation.")
    out = leave_l0c(core, nd, dst.alloc.dtype, scale, offset, nd.shape[1], jnp.sum(core.n_instr), **acts)
    shape = dst.alloc.shape if dst.offset is None else None
    if shape is None or len(shape) != 2:
        raise ValueError("Fixpipe to L1 writes a whole 2-D ND allocation stage.")
    blk = out[: shape[0], : shape[1]]
    blk = jnp.where(mask(shape, (m_, n_)), blk, stage_block(core, dst, shape))
    core = write_ref(core, dst, blk, when)
    return Effect(
        core,
        cost=dict(m=m_, n=n_),
        counts=(("L0C->L1", m_ * n_ * itemsize(dst.alloc.dtype)),),
        reads=(src,),
        writes=(dst,),
        oob=oob,
    )


def l0c_to_ub(
    core: Core,
    h,
    when,
    *,
    dst: Ref,
    src: Ref,
    m,
    n,
    scale=None,
    offset=0,
    activation=None,
    alpha=0.0,
    clip=None,
):
    """L0C -> UB on the Vector pipe (910/310P coupled path), converting to ``dst``'s format."""
    hw = core.hw
    if not hw.coupled:
        raise ValueError(f"{hw.name} has no L0C->UB path (separated data path): use fixpipe.")
    if dst.buffer != "UB" or len(dst.alloc.shape) != 2:
        raise ValueError(f"l0c_to_ub writes a 2-D UB allocation, got {dst.alloc.shape} in {dst.buffer}.")
    nd = _l0c_nd(core, src)
    shape = dst.alloc.shape
    acts = dict(activation=activation, alpha=alpha, clip=clip)
    if nd.dtype != jnp.int32 and (activation is not None or clip is not None):
        raise ValueError("L0C -> UB applies an activation only in an int32 accumulator's deq conversion.")
    out = leave_l0c(
        core,
        nd[: shape[0], : shape[1]],
        dst.alloc.dtype,
        scale,
        offset,
        shape[1],
        jnp.sum(core.n_instr),
        **acts,
    )
    m_, n_ = jnp.asarray(m, _i32), jnp.asarray(n, _i32)
    out = jnp.where(mask(shape, (m_, n_)), out, stage_block(core, dst, shape))
    core = write_ref(core, dst, out, when)
    lim = {"m": min(shape[0], src.alloc.shape[0]), "n": min(shape[1], src.alloc.shape[-1])}
    oob = sanitize.extent_oob(core, src.alloc, {"m": m, "n": n}, lim, "L0CToUB")
    return Effect(
        core,
        cost=dict(m=m_, n=n_),
        counts=(("L0C->UB", m_ * n_ * itemsize(dst.alloc.dtype)),),
        reads=(src,),
        writes=(dst,),
        oob=oob,
    )

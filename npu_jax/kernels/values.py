"""A Conv2D kernel's output values computed apart from its timing: the same arithmetic, in whole-tensor
operations instead of instruction by instruction.

Every output element of a Conv2D plan is one L0C accumulator: the Cube's fractal sums over the K
order of Load3D (``(c1, kh, kw, c0)``, channels zero-padded to whole fractals), added into L0C in
ascending k (``isa/mac.py``'s promise), then converted on the way out (Fixpipe, or L0C -> UB and the
vector unit). Nothing of that depends on the tiling: cores, output tiles and Cout blocks choose which
accumulator an Mmad works on, never the order of its adds; a K step the kernel masks past the end
adds whole fractals of +0, which leave an L0C value unchanged (it is never -0: it starts at +0, and
an IEEE add gives -0 only from two -0s). So the values are a function of the layer, the weights
and the policy alone, and can be computed in a few large operations:

1. the im2col matrix of every image, in Load3D's K order (exact copies, zeros for padding), built
   k-major as the scan over fractals reads it; a narrow layer's fractals on fewer lanes
   (:func:`lanes`);
2. :func:`npu_jax.core.isa.mac.accumulate` over the whole K, on every output at once (the Mmad
   instruction's own arithmetic); under ``fp16_tile`` once per Mmad of the kernel's K steps, whose
   boundaries (``k_l1`` parts, ``k_l0`` steps) it then rounds at. In chunks of images, blocks of
   columns and blocks of rows sized for the host's caches, which decide no add;
3. the output step's own functions: ``fixpipe_values`` and the policy's conversion (910B), or the
   conversion to UB and each vector instruction's ``elementwise`` / ``store`` (910/310P).

``run_plan`` uses this for the data and runs the kernel timing-only (its report unchanged, its GM
writes still marked, so coverage and overlaps are checked as before); ``data_path="instructions"``
moves the data through every instruction instead. The two are held bit-identical by
``tests/test_values.py``. Not covered (they run the instructions): stochastic rounding (its bits
are keyed by instruction counts and tile offsets), layers inside a bound, tilings under a bound,
and fused epilogues of grouped layers.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from npu_jax.core.buffers import DTYPES
from npu_jax.core.formats import oihw_to_kn
from npu_jax.core.isa.cube import fixpipe_values
from npu_jax.core.isa.mac import accumulate, int_dot
from npu_jax.core.isa.vector import elementwise, store
from npu_jax.core.policy import Policy
from npu_jax.core.quant import requantize
from npu_jax.hw.costs import cdiv, round_up
from npu_jax.hw.formats import itemsize
from npu_jax.mapping.conv import ConvPlan

# output rows per block of the accumulation: its accumulator (rows x Cout fp32) stays in cache
_ROWS_BYTES = 1 << 19
# columns per block of the accumulation: a fractal's rows of the fp32 right operand (16 x this) stay in L1
_COLS = 128
# ... when there are at least this many rows (fewer make small loops, whose launches cost more)
_COL_BLOCK_ROWS = 256
# images per im2col chunk: as many as fit this many bytes of im2col (a laptop CPU's L2/L3 share)
_IM2COL_BYTES = 1 << 22


def covers(p: ConvPlan, policy: Policy) -> bool:
    """Whether :func:`conv_values` computes this plan's output (else the instructions move it)."""
    return (
        policy.rounding != "stochastic"
        and p.bound is None
        and p.tiling_bound is None
        and not (p.epi is not None and p.sgroups > 1 and (p.epi.int8_chain or not p.epi.has("dequant")))
    )


def mmad_bounds(p: ConvPlan) -> tuple[int, ...]:
    """The K offsets at which the kernel's Mmads end, in order (each a multiple of the fractal):
    ``k_l1``-deep parts of ``k_l0``-deep steps, the last of each part (and the last part) short."""
    ends = []
    for pi in range(p.n_parts):
        for q in range(p.steps_per_part):
            ks = pi * p.k_l1 + q * p.t.k_l0
            kv = min(p.k_l1 - q * p.t.k_l0, p.k_total - ks, p.t.k_l0)
            if kv > 0:
                ends.append(ks + kv)
    return tuple(ends)


def lanes(p: ConvPlan) -> int:
    """Channels per fractal the values need: ``p.c0``, or for a narrow layer (C' < C0, one fractal
    per tap, so a fractal is one tap's channels) C' rounded up to a power of two. The lanes past C'
    hold zeros in both operands, whose products are zeros: in the pairwise tree over C0 terms
    (``isa/mac.py``) they fill whole subtrees past the first power of two >= C', which sum to
    zero and leave each fractal's sum unchanged (its sign of zero aside, which an L0C value, never
    -0, does not keep). So the values work on 4 lanes of 16 for ResNet-50's conv1 (C = 3), the
    same bits. The kernel's instructions still move and multiply all C0 (its timing)."""
    c = p.gv.c
    return p.c0 if c >= p.c0 else 1 << (c - 1).bit_length()


def im2col(x, p: ConvPlan, c0: int | None = None):
    """The im2col matrix k-major, (K_total, N' * Ho * Wo): row ``((c1 * kh + i) * kw + j) * c0 + c``
    in Load3D's K order, columns in (n, ho, wo) order, from x (N', C', H, W) of the dense view:
    exact copies of x, zeros where the window leaves the padded image or a channel is past C'.
    Built k-major, as the scan over fractals reads it: from NCHW each tap is a strided window with
    (ho, wo) innermost, so no transpose is needed at N' = 1. ``c0``: channels per fractal (default
    ``p.c0``; :func:`lanes` for a narrow layer)."""
    g, c0 = p.gv, p.c0 if c0 is None else c0
    n, c, _, _ = x.shape
    c1 = cdiv(c, c0)
    pt, pb, pl, pr = g.pads
    xp = jnp.pad(x, ((0, 0), (0, c1 * c0 - c), (pt, pb), (pl, pr)))
    xp = xp.reshape(n, c1, c0, xp.shape[2], xp.shape[3])
    (sh, sw), (dh, dw) = g.stride, g.dilation
    taps = [
        xp[..., i * dh : i * dh + (g.ho - 1) * sh + 1 : sh, j * dw : j * dw + (g.wo - 1) * sw + 1 : sw]
        for i in range(g.kh)
        for j in range(g.kw)
    ]  # each (N', C1, C0, Ho, Wo)
    t = jnp.stack(taps, axis=2)  # (N', C1, kh * kw, C0, Ho, Wo)
    if n > 1:
        t = t.transpose(1, 2, 3, 0, 4, 5)
    return t.reshape(c1 * g.kh * g.kw * c0, n * g.ho * g.wo)


def accumulators(at, b, ends: tuple[int, ...], mode: str, k0: int, split: bool):
    """fp32 L0C values (R, N) of the rows of ``at`` (K, R), given k-major, against ``b`` (K, N):
    the Mmad's ``accumulate`` (``mode``: ``Policy.accumulate``) once per K range ending at each of
    ``ends`` (the kernel's Mmads under ``fp16_tile``; else one range, the whole K), every range a
    multiple of ``k0`` deep (zeros past the operands' K).

    In blocks, for the host's caches (no add depends on them): with many rows, blocks of at most
    ``_COLS`` columns (``lax.map``), so that a fractal's rows of ``b`` stay in L1 while every row is
    worked; in each, blocks of rows (``lax.map``) whose accumulator stays in L2 across the K loop.

    ``int32`` (int8 operands): the exact int32 sums, one integer dot (any order gives the same
    bits: :func:`~npu_jax.core.isa.mac.accumulate`)."""
    if mode == "int32":
        return int_dot(at, b, kmajor=True)
    depth, rows = at.shape
    kp, n = ends[-1], b.shape[1]
    cols = n if rows < _COL_BLOCK_ROWS else cdiv(n, cdiv(n, _COLS))
    col_blocks = cdiv(n, cols)
    b = jnp.pad(b.astype(jnp.float32), ((0, kp - depth), (0, col_blocks * cols - n)))
    blocks = cdiv(rows, max(8, _ROWS_BYTES // (4 * cols)))
    per = round_up(cdiv(rows, blocks), 8)  # blocks of equal size: little padding
    at = jnp.pad(at, ((0, kp - depth), (0, blocks * per - rows)))

    def block(i, b):
        a = lax.dynamic_slice_in_dim(at, i * per, per, axis=1).astype(jnp.float32)
        c, k = jnp.zeros((per, b.shape[1]), jnp.float32), 0
        for e in ends:
            c = accumulate(c, a[k:e], b[k:e], mode, k0, split, kmajor=True)
            k = e
        return c

    def col_block(b):  # (K, cols) -> (rows, cols)
        return lax.map(lambda i: block(i, b), jnp.arange(blocks)).reshape(blocks * per, cols)[:rows]

    if col_blocks == 1:
        return col_block(b)
    out = lax.map(col_block, b.reshape(kp, col_blocks, cols).transpose(1, 0, 2))
    return out.transpose(1, 0, 2).reshape(rows, col_blocks * cols)[:, :n]


def _out_step(acc, p: ConvPlan, policy: Policy, bias, residual):
    """The output step on (N, Ho, Wo, K) accumulators: what leaves L0C for GM (``p.output``)."""
    hw, e = p.hw, p.epi
    if e is None and acc.dtype == jnp.int32:  # int8 operands, int32 out: the sums as they are
        return acc
    if e is None:  # Fixpipe and L0C -> UB convert alike; MTE3 copies UB to GM as it is
        return policy.convert_out(acc, p.output, hw)
    if e.has("dequant"):  # Fixpipe and L0C -> UB (re)quantise alike: the row is the scales
        y = requantize(acc, bias, e.offset, p.output, overflow=policy.overflow_mode(hw), **e.deq_args())
        if not e.int8_chain:
            return y
        # a residual chain goes on from the fp16 tile the deq conversion wrote
    elif e.where == "fixpipe":
        args = e.fixpipe_args()
        nd = fixpipe_values(
            acc,
            bias if e.has("bias") else None,
            args.get("activation"),
            args.get("alpha", 0.0),
            args.get("clip"),
        )
        return policy.convert_out(nd, p.output, hw)
    else:
        y = policy.convert_out(acc, e.vector, hw)  # L0C -> UB
    cur = y.astype(jnp.float32)
    clip = [s.arg for s in e.steps if s.op == "clipped_relu"]
    alpha = [s.arg for s in e.steps if s.op == "leaky_relu"]
    fmt = e.vector
    res = None if residual is None else residual.astype(jnp.float32)
    for op, role in e.vector_ops():  # the instructions of kernels/epilogue.emit, in its order
        xs = [cur]
        if role == "bias":
            xs.append(bias.astype(jnp.float32))
        elif role == "residual":
            xs.append(res)
        if role == "widen_residual":  # the residual tile, in its GM format, converted to the vector's
            res = store(elementwise(op, [residual.astype(jnp.float32)]), op, e.vector, policy, hw)
            res = res.astype(jnp.float32)
            continue
        if role == "cast":
            fmt = e.output
        scalar = 0.0 if op == "VMaxs" else clip[0] if op == "VMins" else None
        y = elementwise(op, xs, scalar=scalar, alpha=alpha[0] if alpha else 0.0)
        cur = store(y, op, fmt, policy, hw).astype(jnp.float32)
    return cur.astype(DTYPES[fmt])


@functools.partial(jax.jit, static_argnames=("p", "policy"))
def conv_values(p: ConvPlan, policy: Policy, x, w, bias=None, residual=None):
    """The output run_plan's kernel writes, from x (N, C, H, W) and w (K, C / groups, kh, kw) in the
    operand format: y (N, Ho, Wo, K) NHWC, or (N, Ho, Wo, G', K') with super-groups, in the
    output's format. ``bias`` (K,) and ``residual`` (N, Ho, Wo, K) as run_plan takes them."""
    if not covers(p, policy):
        raise ValueError(f"conv_values does not cover this plan/policy ({p.strategy}, {policy}).")
    user, g, G = p.g, p.gv, p.sgroups
    # a super-group's channels are contiguous: x viewed (G' * N, C', H, W), super-group-major
    xv = x.reshape(user.n, G, g.c, g.h, g.w).transpose(1, 0, 2, 3, 4).reshape(G * user.n, g.c, g.h, g.w)
    wb = block_diagonal(w, user, p.pack)  # (G', K', C', kh, kw), or (K', C', kh, kw) when G' = 1
    wb = wb.reshape((G,) + wb.shape[-4:])
    c0 = lanes(p)
    bk = jax.vmap(lambda a: oihw_to_kn(a, c0, g.kh, g.kw))(wb)  # (G', K_total, K')
    ends = mmad_bounds(p) if policy.accumulate == "fp16_tile" else (p.k_total,)
    ends = tuple(e // p.c0 * c0 for e in ends)  # every Mmad ends on a fractal: a tap, at C1 = 1
    k0, split = c0, p.operand == "fp32"  # a fractal is C0 = K0 deep (hw.c0 is hw.k0)
    # im2col a chunk of images at a time (each chunk's matrix stays in cache while its blocks of
    # rows are accumulated): as many whole images as fit _IM2COL_BYTES, in chunks of equal size
    image_bytes = ends[-1] * g.ho * g.wo * itemsize(p.operand)
    chunks = cdiv(user.n, max(1, min(user.n, _IM2COL_BYTES // image_bytes)))
    nb = cdiv(user.n, chunks)

    def chunk(xc, b):  # (nb, C', H, W) images of one super-group -> (nb * Ho * Wo, K')
        return accumulators(im2col(xc, p, c0), b, ends, policy.accumulate, k0, split)

    accs = []
    for s in range(G):
        xs = xv[s * user.n : (s + 1) * user.n]
        if chunks == 1:
            accs.append(chunk(xs, bk[s]))
            continue
        xs = jnp.pad(xs, ((0, chunks * nb - user.n), (0, 0), (0, 0), (0, 0)))
        out = lax.map(lambda xc, b=bk[s]: chunk(xc, b), xs.reshape((chunks, nb) + xs.shape[1:]))
        accs.append(out.reshape(chunks * nb * g.ho * g.wo, g.k)[: user.n * g.ho * g.wo])
    acc = jnp.stack(accs, axis=1).reshape(user.n, g.ho, g.wo, G, g.k)
    if G == 1:
        acc = acc[:, :, :, 0]
    return _out_step(acc, p, policy, bias, residual)


def block_diagonal(w, g, pack: int):
    """Grouped weights (K, C / groups, kh, kw) as the dense weights of each super-group of ``pack``
    groups, zero off the diagonal blocks: (G', pack * K / groups, pack * C / groups, kh, kw), laid
    out offline as the vendor's FRACTAL_Z_G weights are (one super-group: its dense weights alone).
    Dense weights are returned as they are."""
    if g.groups == 1:
        return w
    sg, kg, cg = g.groups // pack, g.k // g.groups, g.c // g.groups
    w6 = w.reshape(sg, pack, kg, 1, cg, g.kh, g.kw)
    diag = jnp.eye(pack, dtype=jnp.bool_)[None, :, None, :, None, None, None]
    wd = jnp.where(diag, w6, jnp.zeros((), w.dtype))  # (G', pack, Kg, pack, Cg, kh, kw)
    wd = wd.reshape(sg, pack * kg, pack * cg, g.kh, g.kw)
    return wd[0] if sg == 1 else wd


__all__ = ["accumulators", "block_diagonal", "conv_values", "covers", "im2col", "lanes", "mmad_bounds"]

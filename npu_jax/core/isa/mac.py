"""The arithmetic inside one Mmad: the order of the Cube's products and sums, a promise of the emulator.

A dot leaves the order of its sums to the kernel that runs it, and XLA:CPU picks that kernel by host:
its dots and reductions run in YNNPACK, which chooses kernels from the CPU it finds (AVX-512 or AVX2,
whatever ``--xla_cpu_max_isa`` says), and its fused elementwise code contracts ``a * b + c`` into one
FMA where the instruction set has it (AVX2, not AVX). An Mmad written as ``jnp.dot`` therefore gave
different fp32 bits on different CPUs. Here an Mmad is written as elementwise IEEE operations in an
order fixed by the emulator, so it gives the same bits on every host:

1. **Products.** Each product ``a[m, k] * b[k, n]`` is formed exactly in fp32. fp16 and bf16 operands
   have 11- and 8-bit significands, so their products (22 and 16 bits) are exact in fp32's 24. An fp32
   operand is split into a high part (its top 12 significant bits) and a low part (the other 12), the
   Cube's four partial products ``hi*hi, hi*lo, lo*hi, lo*lo`` are each exact, and the product is
   ``(hh + hl) + (lh + ll)``, every add rounded to fp32 (within 1.5 units in the last place of the
   rounded product). Exactness is what makes an FMA harmless: ``fma(a, b, c)`` equals
   ``fl(fl(a * b) + c)`` when ``a * b`` is exact, so XLA may contract or not.
2. **A fractal.** K is taken one fractal of ``K0 = hw.k0(itemsize)`` elements at a time (16 for
   fp16/bf16, 8 for fp32: one Cube step), in ascending k. For one output, a fractal's K0 products are
   summed as a pairwise tree over adjacent k, ``((p0 + p1) + (p2 + p3)) + ...``, each add rounded to fp32
   nearest-even (the Cube's adder tree).
3. **L0C.** The fractal sums are added into the L0C value in ascending k,
   ``C = ((C + s0) + s1) + ...``, each add rounded to fp32; an Mmad with ``init`` starts from zero.

The error of this chain is below the classical bound of a sequential fp32 sum of K terms:
``gamma_{log2 K0 + ceil(K / K0)} <= gamma_K`` (``precision.budgets`` bounds with ``gamma_K``).

Limits: products outside fp32's normal range (|a * b| < 2^-126, an fp32 product below ~2^-102 whose
low partial product is subnormal, or past fp32's max: bf16 operands reach both) are rounded, flushed or
overflowed by the host's arithmetic, where an FMA may keep what a multiply loses: their bits are not
promised. NaN and inf follow IEEE: a non-finite operand's product is the plain ``a * b``.

The fp16 what-ifs of the policy hook in after each fractal (``fp16_step``: ``K0``-deep fractals) or
after each product (``fp16_mac``: fractals one element deep, ``fl16(fl32(c + a*b))``).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from npu_jax.core.rounding import round_to

# sign, exponent and the top 11 of fp32's 23 fraction bits: a 12-bit significand, so the product of
# two such halves (24 bits) is exact in fp32
_HI_MASK = np.int32(-(1 << 12))
# products per step of the scan over K, at least: shallower fractals go several to a step
_STEP_TERMS = 16


def split_fp32(x):
    """(hi, lo) with ``hi + lo == x`` exactly and 12 significant bits at most in each (finite x)."""
    hi = lax.bitcast_convert_type(lax.bitcast_convert_type(x, jnp.int32) & _HI_MASK, jnp.float32)
    return hi, x - hi


def _tree(terms: list):
    """Pairwise sum over adjacent terms: ((t0 + t1) + (t2 + t3)) + ...; a lone last term carries up."""
    while len(terms) > 1:
        nxt = [terms[i] + terms[i + 1] for i in range(0, len(terms) - 1, 2)]
        terms = nxt + terms[-1:] if len(terms) % 2 else nxt
    return terms[0]


def _outer(x, y):
    return x[:, None] * y[None, :]


def _products(a_rows, b_rows, split: bool) -> list:
    """The (M, N) products of each k of one fractal, exact in fp32 (see the module's point 1).

    ``a_rows`` and ``b_rows`` hold the fractal's operands k-major: for fp16/bf16 ``(K0, M)`` and
    ``(K0, N)``; for fp32 the tuple (x, hi, lo, finite) of each.
    """
    if not split:
        return [_outer(a_rows[i], b_rows[i]) for i in range(a_rows.shape[0])]
    a, ah, al, af = a_rows
    b, bh, bl, bf = b_rows
    out = []
    for i in range(a.shape[0]):
        exact = (_outer(ah[i], bh[i]) + _outer(ah[i], bl[i])) + (_outer(al[i], bh[i]) + _outer(al[i], bl[i]))
        out.append(jnp.where(af[i][:, None] & bf[i][None, :], exact, _outer(a[i], b[i])))
    return out


def _tree_stacked(p):
    """:func:`_tree` over the leading axis of one array: the same adds in the same order."""
    while p.shape[0] > 1:
        n = p.shape[0] - p.shape[0] % 2
        pairs = p[0:n:2] + p[1:n:2]
        p = jnp.concatenate([pairs, p[n:]]) if n < p.shape[0] else pairs
    return p[0]


def _products_stacked(a_rows, b_rows, split: bool):
    """:func:`_products` as one (K0, M, N) array: the same values, in a few large operations."""

    def outer(x, y):
        return x[:, :, None] * y[:, None, :]

    if not split:
        return outer(a_rows, b_rows)
    a, ah, al, af = a_rows
    b, bh, bl, bf = b_rows
    exact = (outer(ah, bh) + outer(ah, bl)) + (outer(al, bh) + outer(al, bl))
    return jnp.where(af[:, :, None] & bf[:, None, :], exact, outer(a, b))


def _operand_rows(x, k0: int, split: bool):
    """(K, X) k-major operand rows, grouped (F, K0, X) by fractal; fp32 carries its split."""
    rows = x.reshape(x.shape[0] // k0, k0, x.shape[1])
    if not split:
        return rows
    finite = jnp.isfinite(rows)
    hi, lo = split_fp32(jnp.where(finite, rows, 0.0))
    return rows, hi, lo, finite


def mmad_sum(c, a, b, *, k0: int, split: bool, after_fractal: Callable | None = None, kmajor: bool = False):
    """``c + a @ b`` in the Cube's order (module docstring): fp32 (M, N) from fp32 (M, K) and (K, N).

    Args:
        c: the L0C value the Mmad accumulates into (zeros for ``init``).
        a, b: the operands, already in fp32 (exact copies of fp16/bf16/fp32 values), masked to the
            Mmad's extents (zeros outside).
        k0: the fractal depth; K must be a multiple of it.
        split: True for fp32 operands (products via the hi/lo split), False for fp16/bf16.
        after_fractal: applied to the L0C value after each fractal's sum is added (the fp16
            what-ifs round there); None for the hardware's fp32 L0C.
        kmajor: ``a`` is given transposed, (K, M), as the scan over fractals reads it (a caller
            that builds it so saves the transpose).
    """
    K = a.shape[0] if kmajor else a.shape[1]
    if K % k0:
        raise ValueError(f"Mmad K={K} is not a multiple of the fractal depth K0={k0}.")
    if not split or k0 & (k0 - 1):
        return _ordered(c, a, b, k0, split, after_fractal, kmajor)

    def interleaved(c, a, b):
        # finite fp32 operands: the partial products as terms of their own, hh hl lh ll adjacent per k,
        # so the pairwise tree over 4 K0 terms is (hh + hl) + (lh + ll) per product, then the tree over
        # the K0 products (K0 a power of two): the same adds as below, on the fast fp16 path
        (ah, al), (bh, bl) = split_fp32(a), split_fp32(b)
        if kmajor:
            a4 = jnp.stack([ah, ah, al, al], axis=1).reshape(4 * K, a.shape[1])
        else:
            a4 = jnp.stack([ah, ah, al, al], axis=2).reshape(a.shape[0], 4 * K)
        b4 = jnp.stack([bh, bl, bh, bl], axis=1).reshape(4 * K, b.shape[1])
        return _ordered(c, a4, b4, 4 * k0, False, after_fractal, kmajor)

    def with_specials(c, a, b):
        return _ordered(c, a, b, k0, True, after_fractal, kmajor)

    finite = jnp.all(jnp.isfinite(a)) & jnp.all(jnp.isfinite(b))
    return lax.cond(finite, interleaved, with_specials, c, a, b)


def _ordered(c, a, b, k0: int, split: bool, after_fractal, kmajor: bool):
    """The scan over fractals (see :func:`mmad_sum`)."""
    at = a if kmajor else a.T
    # Traced (the kernels run under jit): one fused loop per step, which XLA compiles best from
    # per-k products; a step takes shallow fractals (K0 < _STEP_TERMS) several at a time, added
    # in order, so that each pass over the accumulator does as much work as a 16-deep fractal.
    # Run eagerly (``jax.disable_jit``), every operation is a dispatch, so the same products and
    # adds go as a few (K0, M, N) operations instead, one fractal a step.
    traced = any(isinstance(v, jax.core.Tracer) for v in (c, a, b))
    per = max(1, _STEP_TERMS // k0) if traced else 1
    if per > 1:  # whole steps: fractals of zeros past K add +0, which leave every L0C value as it is
        pad = -(at.shape[0] // k0) % per * k0
        at, b = jnp.pad(at, ((0, pad), (0, 0))), jnp.pad(b, ((0, pad), (0, 0)))
    xs = (_operand_rows(at, k0 * per, split), _operand_rows(b, k0 * per, split))

    def step(acc, ab):
        for j in range(per):
            frac = jax.tree.map(lambda r, j=j: r[j * k0 : (j + 1) * k0], ab)
            s = _tree(_products(*frac, split)) if traced else _tree_stacked(_products_stacked(*frac, split))
            acc = acc + s
            acc = acc if after_fractal is None else after_fractal(acc)
        return acc, None

    out, _ = lax.scan(step, c, xs)
    return out


def int_dot(a, b, kmajor: bool = False):
    """The exact int32 (M, N) sums of int8-valued (M, K) (or (K, M) k-major) and (K, N) operands."""
    a = a.astype(jnp.int32)
    dims = (((0,), (0,)), ((), ())) if kmajor else (((1,), (0,)), ((), ()))
    return lax.dot_general(a, b.astype(jnp.int32), dims, preferred_element_type=jnp.int32)


def _to_fp16(x):
    return round_to(x, "fp16").astype(jnp.float32)


def accumulate(c, a, b, mode: str, k0: int, split: bool, kmajor: bool = False):
    """One Mmad's ``c + a @ b`` under the policy's accumulation ``mode`` (``Policy.accumulate``):
    ``fp32`` (the hardware's L0C), ``fp16_step`` (rounded to fp16 after every ``k0``-deep fractal),
    ``fp16_mac`` (after every product: fractals one deep) or ``fp16_tile`` (once, at the Mmad's
    end). The arithmetic of the Mmad instruction, and of the data path computed apart from the
    timing (``kernels/values.py``), which calls it once per Mmad of the kernel for ``fp16_tile``
    and once over the whole K otherwise (a sum continued fractal by fractal: the same adds).
    ``kmajor``: ``a`` is given (K, M) (:func:`mmad_sum`).

    ``int32`` (int8 operands): ``c`` and the operands are int32 (exact int8 values), the products
    and sums exact integers; int32 addition wraps and is associative, so any order gives the
    same bits and one integer dot is the Cube's sum."""
    if mode == "int32":
        return c + int_dot(a, b, kmajor)
    if mode == "fp16_mac":
        out = mmad_sum(c, a, b, k0=1, split=split, after_fractal=_to_fp16, kmajor=kmajor)
    else:
        after = _to_fp16 if mode == "fp16_step" else None
        out = mmad_sum(c, a, b, k0=k0, split=split, after_fractal=after, kmajor=kmajor)
        out = _to_fp16(out) if mode == "fp16_tile" else out
    # an L0C value is never -0: it starts at +0 and an add gives -0 only from two -0s. Said here as
    # well, as XLA may fold +0 + s into s (a one-step scan over a zero accumulator), keeping s's -0
    return jnp.where(out == 0, jnp.zeros_like(out), out)

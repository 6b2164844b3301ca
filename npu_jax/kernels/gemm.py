"""Tiled GEMM on the Cube: C (M, N) = A (M, K) @ B (K, N), written on the instruction set.

Each output block (m x n) accumulates in L0C over K. A and B stream through L1 in K slices of
``k_l1`` (ND -> NZ on the way in, MTE2), then through L0A/L0B in slices of ``k_l0`` (LoadData 2D,
MTE1) into the Cube (Mmad, M). L1 and L0 are ping-pong buffered, with the vendor's flag pattern
("slot free" flags set in the prologue). The block leaves through Fixpipe on 910B, or
L0C -> UB (V) -> GM (MTE3) on 910/310P. Output blocks are spread round-robin over the cores.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

from npu_jax.core import board
from npu_jax.core.board import fori_loop
from npu_jax.core.policy import Policy
from npu_jax.core.quant import requantize
from npu_jax.hw.costs import round_up
from npu_jax.hw.formats import itemsize
from npu_jax.kernels.common import output_step, set_all, slot_flags, wait_all
from npu_jax.kernels.values import accumulators
from npu_jax.mapping.gemm import MatmulTiling


def build_kernel(M: int, N: int, K: int, hw, t: MatmulTiling, a: dict, cores: int, quant: dict | None = None):
    """The GEMM program for one shape and tiling over the allocations ``a`` (``allocate_gemm``);
    ``quant``: an int8 kernel's ``scale`` (a number: the Fixpipe's scalar, ``deqScalar``) and
    ``offset`` on the way out."""
    a_l1, b_l1, a_l0, b_l0, c_l0, c_ub = (a[k] for k in ("a_l1", "b_l1", "a_l0", "b_l0", "c_l0", "c_ub"))
    nbm, nbn = math.ceil(M / t.m), math.ceil(N / t.n)
    n_blocks = nbm * nbn
    bpc = math.ceil(n_blocks / cores)
    nk = math.ceil(K / t.k_l1)
    nkk = t.k_l1 // t.k_l0

    slots = slot_flags(hw, range(t.l1_stages), t.l0_stages)

    def kernel(core, b):
        xp = board.xp(core)
        core = set_all(core, slots)

        def outer(step, core):
            j, kt = step // nk, step % nk
            blk = b + j * cores
            live = blk < n_blocks
            bm, bn = blk // nbn, blk % nbn
            s = step % t.l1_stages
            kbase = kt * t.k_l1
            kv = xp.clip(K - kbase, 0, t.k_l1)
            core = core.at_tile(block=blk, k_l1=kt)
            mv = xp.clip(M - bm * t.m, 0, t.m)
            nv = xp.clip(N - bn * t.n, 0, t.n)
            # MTE2: A and B slices into the free L1 slot
            core = core.wait_flag("MTE1_MTE2", s, live)
            core = core.data_copy(
                dst=a_l1[s], src=core.gm_window("a", (bm * t.m, kbase), (t.m, t.k_l1)), layout="nz", when=live
            )
            core = core.data_copy(
                dst=b_l1[s], src=core.gm_window("b", (kbase, bn * t.n), (t.k_l1, t.n)), layout="nz", when=live
            )
            core = core.set_flag("MTE2_MTE1", s, live)
            core = core.wait_flag("MTE2_MTE1", s, live)

            def inner(kk, core):
                u = (step * nkk + kk) % t.l0_stages
                kvv = xp.clip(kv - kk * t.k_l0, 0, t.k_l0)
                go = live & (kvv > 0)
                core = core.wait_flag("M_MTE1", u, go)
                core = core.load2d(dst=a_l0[u], src=a_l1[s], start=(0, kk * t.k_l0), valid=(mv, kvv), when=go)
                core = core.load2d(dst=b_l0[u], src=b_l1[s], start=(kk * t.k_l0, 0), valid=(kvv, nv), when=go)
                core = core.set_flag("MTE1_M", u, go)
                core = core.wait_flag("MTE1_M", u, go)
                core = core.mmad(
                    dst=c_l0[0], a=a_l0[u], b=b_l0[u], m=mv, n=nv, k=kvv, init=(kt == 0) & (kk == 0), when=go
                )
                return core.set_flag("M_MTE1", u, go)

            core = fori_loop(0, nkk, inner, core)
            core = core.set_flag("MTE1_MTE2", s, live)
            last = live & (kt == nk - 1)
            c_win = core.gm_window("c", (bm * t.m, bn * t.n), (t.m, t.n))
            return output_step(core, hw, c_l0, c_ub, c_win, mv, nv, last, quant=quant)

        core = fori_loop(0, bpc * nk, outer, core)
        return wait_all(core, slots)

    return kernel


def mmad_bounds(K: int, t: MatmulTiling, k0: int) -> tuple[int, ...]:
    """Where the kernel's Mmads end along K (``k_l1`` slices of ``k_l0`` steps), each rounded up to
    the fractal: the last Mmad's masked tail is a fractal's zeros."""
    ends = []
    for kt in range(math.ceil(K / t.k_l1)):
        kv = min(K - kt * t.k_l1, t.k_l1)
        for kk in range(t.k_l1 // t.k_l0):
            kvv = min(max(kv - kk * t.k_l0, 0), t.k_l0)
            if kvv > 0:
                ends.append(round_up(kt * t.k_l1 + kk * t.k_l0 + kvv, k0))
    return tuple(ends)


@functools.partial(jax.jit, static_argnames=("hw", "t", "policy", "offset"))
def gemm_values(a, b, hw, t: MatmulTiling, policy: Policy, scale=None, offset: int = 0):
    """The kernel's output C (M, N) in ``policy.output``, computed apart from its timing (as
    ``kernels/values.py`` does for Conv2D): every block's L0C sums its fractals in K order, the
    tiling decides no add, so one :func:`~npu_jax.kernels.values.accumulators` over all rows, and
    the output step's conversion (Fixpipe or L0C -> UB convert alike; an int8 kernel's int32 sums
    as they are, or scaled by ``scale`` and ``offset``)."""
    k0 = hw.k0(itemsize(policy.operand))
    K = a.shape[1]
    ends = mmad_bounds(K, t, k0) if policy.accumulate == "fp16_tile" else (round_up(K, k0),)
    acc = accumulators(a.T, b, ends, policy.accumulate, k0, policy.operand == "fp32")
    if acc.dtype == jnp.int32:
        if policy.output == "int32":
            return acc
        return requantize(acc, scale, offset, policy.output, overflow=policy.overflow_mode(hw))
    return policy.convert_out(acc, policy.output, hw)


__all__ = ["build_kernel", "gemm_values", "mmad_bounds"]

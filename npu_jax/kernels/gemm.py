"""Tiled GEMM on the Cube: C (M, N) = A (M, K) @ B (K, N), written on the instruction set.

Each output block (m x n) accumulates in L0C over K. A and B stream through L1 in K slices of
``k_l1`` (ND -> NZ on the way in, MTE2), then through L0A/L0B in slices of ``k_l0`` (LoadData 2D,
MTE1) into the Cube (Mmad, M). L1 and L0 are ping-pong buffered, with the vendor's flag pattern
("slot free" flags set in the prologue). The block leaves through Fixpipe on 910B, or
L0C -> UB (V) -> GM (MTE3) on 910/310P. Output blocks are spread round-robin over the cores.
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
from jax import lax

from npu_jax.core.buffers import DTYPES, Plan, itemsize
from npu_jax.core.policy import Policy
from npu_jax.core.run import launch
from npu_jax.core.state import Context, GmSpec, padded_shape
from npu_jax.errors import AlignmentError, CapacityError, TilingError
from npu_jax.hw.config import HardwareConfig
from npu_jax.kernels.common import output_step, set_all, slot_flags, wait_all
from npu_jax.kernels.conv_geometry import check_common, tiling_hint


@dataclasses.dataclass(frozen=True, kw_only=True)
class MatmulTiling:
    """Tile sizes of the GEMM kernel (all multiples of 16; ``k_l1`` a multiple of ``k_l0``).

    Attributes:
        m, n: the output block held in L0C (fp32): m * n * 4 B <= L0C.
        k_l1: K slice per L1 stage; k_l0: K slice per L0A/L0B stage.
        l1_stages, l0_stages: 2 = ping-pong (double buffering), 1 = serial.
        cores: cores to spread output blocks over (None = all of the preset's, capped by blocks).
    """

    m: int = 128
    n: int = 256
    k_l1: int = 256
    k_l0: int = 64
    l1_stages: int = 2
    l0_stages: int = 2
    cores: int | None = None

    def __post_init__(self):
        for name in ("m", "n", "k_l1", "k_l0"):
            v = getattr(self, name)
            if not isinstance(v, int) or v <= 0 or v % 16:
                raise TilingError(f"MatmulTiling.{name} must be a positive multiple of 16, got {v!r}.")
        if self.k_l1 % self.k_l0:
            raise TilingError(
                f"MatmulTiling.k_l1 ({self.k_l1}) must be a multiple of k_l0 "
                f"({self.k_l0}); try k_l1={self.k_l1 - self.k_l1 % self.k_l0 or self.k_l0}."
            )
        for name in ("l1_stages", "l0_stages"):
            if getattr(self, name) not in (1, 2):
                raise TilingError(f"MatmulTiling.{name} must be 1 or 2, got {getattr(self, name)!r}.")
        if self.cores is not None and (not isinstance(self.cores, int) or self.cores < 1):
            raise TilingError(f"MatmulTiling.cores must be None or an int >= 1, got {self.cores!r}.")


def _r16(x: int) -> int:
    return -(-x // 16) * 16


def default_tiling(M: int, N: int, K: int, hw: HardwareConfig, operand: str = "fp16") -> MatmulTiling:
    """A legal tiling that keeps the Cube fed: the largest L0C block, then the deepest K slices."""
    isz = itemsize(operand)
    m = min(_r16(M), 128)
    n = min(_r16(N), 256)
    while m * n * 4 > hw.l0c_bytes:
        if n >= m and n > 16:
            n //= 2
        else:
            m //= 2
        m, n = max(16, _r16(m)), max(16, _r16(n))
    k_l0 = 16
    for cand in (128, 64, 32, 16):
        if 2 * m * cand * isz <= hw.l0a_bytes and 2 * cand * n * isz <= hw.l0b_bytes:
            k_l0 = cand
            break
    k_l0 = min(k_l0, _r16(K))
    k_l1 = k_l0
    while (
        k_l1 + k_l0 <= _r16(K)
        and k_l1 + k_l0 <= 1024
        and 2 * (m + n) * (k_l1 + k_l0) * isz <= hw.l1_bytes // 2
    ):
        k_l1 += k_l0
    return MatmulTiling(m=m, n=n, k_l1=k_l1, k_l0=k_l0)


def matmul(
    a,
    b,
    *,
    hw: HardwareConfig | None = None,
    tiling: MatmulTiling | None = None,
    policy: Policy | None = None,
    trace: bool | int = False,
    checks=None,
):
    """C = A @ B on the emulated Cube. Returns ``(c, report)``.

    Args:
        a: (M, K) array; b: (K, N) array. Converted to ``policy.operand`` (default fp16) at the
            boundary, as a host would before the kernel.
        hw: hardware config (default ``presets.ascend910b()``).
        tiling: a :class:`MatmulTiling` (default: :func:`default_tiling`).
        policy: precision :class:`~npu_jax.core.policy.Policy` (fp16 in, fp32 accumulate, fp16 out).
        trace: keep a per-core event trace (True = 4096 events, or an int capacity).
        checks: sanitizers to run (``"all"``, ``"none"``, names, or a ``Checks``); None = the
            process default (``npu_jax.default_checks``). Findings raise a SanitizerError.

    Example:
        >>> import jax.numpy as jnp, npu_jax
        >>> c, rep = npu_jax.matmul(jnp.ones((64, 32)), jnp.ones((32, 48)),
        ...                         hw=npu_jax.presets.tiny())
        >>> float(c[0, 0]), rep.flops
        (32.0, 196608)
    """

    hw, policy, checks, cap = check_common(hw, policy, checks, trace, "matmul")
    for name, arr in (("a", a), ("b", b)):
        if arr is None or isinstance(arr, (str, bytes, dict)):
            raise TypeError(f"matmul: {name} must be an array, got {type(arr).__name__}.")
    a, b = jnp.asarray(a), jnp.asarray(b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(
            f"matmul takes 2-D a (M, K) and b (K, N); got a{tuple(a.shape)} and b{tuple(b.shape)}."
        )
    if a.shape[1] != b.shape[0]:
        raise ValueError(
            f"matmul: a is {tuple(a.shape)} and b is {tuple(b.shape)}: a's K "
            f"({a.shape[1]}) must equal b's K ({b.shape[0]})."
        )
    for name, x in (("a", a), ("b", b)):
        if not jnp.issubdtype(x.dtype, jnp.floating):
            raise TypeError(f"matmul: {name} must be a float array, got {x.dtype}.")
        if 0 in x.shape:
            raise ValueError(f"matmul: {name} has an empty dimension {tuple(x.shape)}.")
    M, K = a.shape
    N = b.shape[1]
    tiling = default_tiling(M, N, K, hw, policy.operand) if tiling is None else tiling
    if not isinstance(tiling, MatmulTiling):
        raise TypeError(f"tiling must be a MatmulTiling or None, got {type(tiling).__name__}.")
    op = policy.operand
    out = policy.output
    n_blocks = math.ceil(M / tiling.m) * math.ceil(N / tiling.n)
    if tiling.cores is not None and tiling.cores > hw.num_cores:
        raise TilingError(
            f"MatmulTiling.cores={tiling.cores} exceeds {hw.name}'s {hw.num_cores} cores; "
            f"use cores <= {hw.num_cores} or None."
        )
    cores = min(hw.num_cores if tiling.cores is None else tiling.cores, n_blocks)
    try:
        plan, kern = _build(M, N, K, hw, tiling, op, out, cores)
    except (CapacityError, AlignmentError) as e:
        raise tiling_hint(
            e,
            {
                "a_l1": ("m", "k_l1", "l1_stages"),
                "b_l1": ("n", "k_l1", "l1_stages"),
                "a_l0": ("m", "k_l0", "l0_stages"),
                "b_l0": ("n", "k_l0", "l0_stages"),
                "c_l0c": ("m", "n"),
                "c_ub": ("m", "n"),
            },
            tiling,
        ) from None
    gm = (
        GmSpec("a", (M, K), padded_shape((M, K), (tiling.m, tiling.k_l1)), op),
        GmSpec("b", (K, N), padded_shape((K, N), (tiling.k_l1, tiling.n)), op),
        GmSpec("c", (M, N), padded_shape((M, N), (tiling.m, tiling.n)), out, output=True),
    )
    ctx = Context(
        hw=hw,
        allocs=tuple(plan.allocs),
        gm=gm,
        policy=policy,
        n_cores=cores,
        trace_capacity=cap,
        checks=checks,
    )
    # launch raises the sanitizers' findings (and overlapping writes) once the run is concrete
    outs, report = launch(
        kern,
        ctx,
        {"a": a.astype(DTYPES[op]), "b": b.astype(DTYPES[op])},
        name="matmul",
        workload=f"({M}x{K}) @ ({K}x{N}) {op}",
        operand=op,
    )
    return outs["c"], report


def _build(M, N, K, hw, t: MatmulTiling, op: str, out: str, cores: int):
    """Allocate buffers and return (plan, kernel) for one GEMM shape and tiling."""
    isz = itemsize(op)
    c0 = 32 // isz
    plan = Plan(hw)
    a_l1 = plan.alloc("L1", "a_l1", (t.k_l1 // c0, t.m, c0), op, stages=t.l1_stages, fmt="NZ")
    b_l1 = plan.alloc("L1", "b_l1", (t.n // c0, t.k_l1, c0), op, stages=t.l1_stages, fmt="NZ")
    a_l0 = plan.alloc("L0A", "a_l0", (t.m, t.k_l0), op, stages=t.l0_stages, fmt="ZZ")
    b_l0 = plan.alloc("L0B", "b_l0", (t.k_l0, t.n), op, stages=t.l0_stages, fmt="ZN")
    c_l0 = plan.alloc("L0C", "c_l0c", (t.m, t.n), "fp32", fmt="NZ")
    c_ub = plan.alloc("UB", "c_ub", (t.m, t.n), out) if hw.coupled else None

    nbm, nbn = math.ceil(M / t.m), math.ceil(N / t.n)
    n_blocks = nbm * nbn
    bpc = math.ceil(n_blocks / cores)
    nk = math.ceil(K / t.k_l1)
    nkk = t.k_l1 // t.k_l0

    slots = slot_flags(hw, range(t.l1_stages), t.l0_stages)

    def kernel(core, b):
        core = set_all(core, slots)

        def outer(step, core):
            j, kt = step // nk, step % nk
            blk = b + j * cores
            live = blk < n_blocks
            bm, bn = blk // nbn, blk % nbn
            s = step % t.l1_stages
            kbase = kt * t.k_l1
            kv = jnp.clip(K - kbase, 0, t.k_l1)
            core = core.at_tile(block=blk, k_l1=kt)
            mv = jnp.clip(M - bm * t.m, 0, t.m)
            nv = jnp.clip(N - bn * t.n, 0, t.n)
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
                kvv = jnp.clip(kv - kk * t.k_l0, 0, t.k_l0)
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

            core = lax.fori_loop(0, nkk, inner, core)
            core = core.set_flag("MTE1_MTE2", s, live)
            last = live & (kt == nk - 1)
            c_win = core.gm_window("c", (bm * t.m, bn * t.n), (t.m, t.n))
            return output_step(core, hw, c_l0, c_ub, c_win, mv, nv, last)

        core = lax.fori_loop(0, bpc * nk, outer, core)
        return wait_all(core, slots)

    return plan, kernel


__all__ = ["MatmulTiling", "default_tiling", "matmul"]

"""The public GEMM entry point: C = A @ B on the emulated Cube."""

from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np

from npu_jax.api.validate import as_array, check_common, check_quant, int8_operand, no_grad, state_bytes
from npu_jax.core.buffers import DTYPES
from npu_jax.core.policy import Policy, notes_default_cast
from npu_jax.core.run import kept_report, launch, timing_apart
from npu_jax.core.state import Context, GmSpec, padded_shape
from npu_jax.errors import (
    AlignmentError,
    CapacityError,
    InputError,
    InputTypeError,
    TilingError,
    check_choice,
)
from npu_jax.hw.config import HardwareConfig
from npu_jax.kernels.gemm import build_kernel, gemm_values
from npu_jax.kernels.launch import DATA_PATHS
from npu_jax.mapping.gemm import MatmulTiling, allocate_gemm, default_tiling
from npu_jax.mapping.hints import tiling_hint


@notes_default_cast("a", "b")
def matmul(
    a,
    b,
    *,
    hw: HardwareConfig | None = None,
    tiling: MatmulTiling | None = None,
    policy: Policy | None = None,
    trace: bool | int = False,
    checks=None,
    data_path: str = "values",
    scale=None,
    offset: int = 0,
):
    """C = A @ B on the emulated Cube. Returns ``(c, report)``.

    Dtypes: c's dtype is ``policy.output``, not the inputs'. With no ``policy`` the hardware's
    default applies (fp16 operands, fp32 accumulation, fp16 output): fp32 or bf16 inputs are
    converted to fp16 and c comes back fp16, and an :class:`~npu_jax.OperandCastWarning` says so
    once per process. ``policy=Policy(operand="bf16", output="bf16")`` keeps bf16 end to end;
    ``Policy(output="fp32")`` returns the fp32 accumulator's values.

    int8: ``policy=Policy(operand="int8", output=...)`` takes integer a and b in [-128, 127] and sums
    their products exactly in int32 on the Cube (twice the fp16 MAC rate); ``output="int32"``
    returns the sums, ``"fp16"`` / ``"int8"`` scale them on the way out by ``scale`` (one number:
    the Fixpipe's scalar; per-channel scales run through ``conv2d`` with a 1x1 kernel) and
    ``offset``, :func:`npu_jax.requantize`'s formula.

    Args:
        a: (M, K) array, converted to ``policy.operand`` (default fp16) at the boundary, as a host
            would before the kernel.
        b: (K, N) array, converted likewise.
        hw: hardware config (default ``presets.ascend910b()``).
        tiling: a :class:`MatmulTiling` (default: :func:`default_tiling`).
        policy: precision :class:`~npu_jax.core.policy.Policy` (fp16 in, fp32 accumulate, fp16 out).
        trace: keep a per-core event trace (True = 4096 events, or an int capacity).
        checks: sanitizers to run (``"all"``, ``"none"``, names, or a ``Checks``); None = the
            process default (``npu_jax.default_checks``). Findings raise a SanitizerError.
        data_path: ``"values"`` (default): C computed apart from the timing in whole-matrix
            operations with the Mmad's own arithmetic, the kernel run timing-only (its report
            computed once per shape, tiling and policy and kept); ``"instructions"``: the data moved
            through every instruction. The same bits and report (``docs/performance.md``).
        scale: int8 operands with fp16 / int8 output: the multiplier of the int32 sums (a number).
        offset: int8 output: its zero point, an int in [-128, 127].

    Example:
        >>> import jax.numpy as jnp, npu_jax
        >>> c, rep = npu_jax.matmul(jnp.ones((64, 32)), jnp.ones((32, 48)),
        ...                         hw=npu_jax.presets.tiny())
        >>> float(c[0, 0]), rep.flops
        (32.0, 196608)
    """

    hw, policy, checks, cap = check_common(hw, policy, checks, trace, "matmul")
    check_choice("matmul", "data_path", data_path, DATA_PATHS)
    if policy.quantised:
        a, b = int8_operand("matmul", "a", a), int8_operand("matmul", "b", b)
    else:
        a, b = as_array("matmul", "a", a), as_array("matmul", "b", b)
    if a.ndim != 2 or b.ndim != 2:
        raise InputError(
            f"matmul takes 2-D a (M, K) and b (K, N); got a{tuple(a.shape)} and b{tuple(b.shape)}."
        )
    if a.shape[1] != b.shape[0]:
        raise InputError(
            f"matmul: a is {tuple(a.shape)} and b is {tuple(b.shape)}: a's K "
            f"({a.shape[1]}) must equal b's K ({b.shape[0]})."
        )
    for name, x in (("a", a), ("b", b)):
        if 0 in x.shape:
            raise InputError(f"matmul: {name} has an empty dimension {tuple(x.shape)}.")
    if tiling is not None and not isinstance(tiling, MatmulTiling):
        raise InputTypeError(f"matmul: tiling must be a MatmulTiling or None, got {type(tiling).__name__}.")
    M, K = a.shape
    N = b.shape[1]
    quant = _scalar_quant(policy, scale, offset)
    tiling = default_tiling(M, N, K, hw, policy.operand) if tiling is None else tiling
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
        plan, allocs = allocate_gemm(hw, tiling, op, out)
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
    kern = build_kernel(M, N, K, hw, tiling, allocs, cores, quant)
    gm = (
        GmSpec("a", (M, K), padded_shape((M, K), (tiling.m, tiling.k_l1)), op),
        GmSpec("b", (K, N), padded_shape((K, N), (tiling.k_l1, tiling.n)), op),
        GmSpec("c", (M, N), padded_shape((M, N), (tiling.m, tiling.n)), out, output=True),
    )
    # each core holds its copy of the padded GM tensors (and the output's written mask)
    gm_bytes = sum(math.prod(g.padded) * (4 + g.output) for g in gm)
    state_bytes("matmul", hw, cores, gm_bytes, cap, checks)
    a, b = no_grad("matmul", a, b)
    ctx = Context.of(plan, gm, policy, cores, trace_capacity=cap, checks=checks)
    a, b = a.astype(DTYPES[op]), b.astype(DTYPES[op])
    workload = f"({M}x{K}) @ ({K}x{N}) {op}"
    key = ("matmul", M, N, K, tiling, cores, tuple(sorted(quant.items())))

    def run(ctx, gm):
        # launch raises the sanitizers' findings (and overlapping writes) once the run is concrete
        return launch(kern, ctx, gm, name="matmul", workload=workload, operand=op, key=key, board=True)

    # stochastic rounding's bits key on the instructions; a mutation sweep changes the program
    if data_path == "instructions" or policy.rounding == "stochastic" or not timing_apart():
        outs, report = run(ctx, {"a": a, "b": b})
        return outs["c"], report
    # the data computed apart (kernels/gemm.gemm_values); the kernel timing-only, its writes marked
    tctx = dataclasses.replace(ctx, move_data=False, mark_writes=True, policy=policy.timing())
    zeros = {"a": np.zeros((M, K), DTYPES[op]), "b": np.zeros((K, N), DTYPES[op])}
    traced = isinstance(a, jax.core.Tracer) or isinstance(b, jax.core.Tracer)
    report = kept_report((key, tctx, workload), lambda: run(tctx, zeros)[1], traced)
    return gemm_values(a, b, hw, tiling, policy, quant.get("scale"), quant.get("offset", 0)), report


def _scalar_quant(policy: Policy, scale, offset) -> dict:
    """An int8 matmul's way out: ``{"scale": float, "offset": int}`` (empty when there is none)."""
    if scale is not None and np.ndim(scale) != 0:
        raise InputError(
            f"matmul: scale must be one number (the Fixpipe's scalar), got shape {np.shape(scale)}; per-channel "
            "scales: conv2d with a 1x1 kernel, or int32 output and npu_jax.requantize."
        )
    if isinstance(scale, jax.core.Tracer):
        raise InputError(
            "matmul: scale is a constant of the kernel (the Fixpipe's scalar register): pass a number."
        )
    s, off = check_quant("matmul", policy, scale, offset, 1)
    return {} if s is None else {"scale": float(s[0]), "offset": off}


__all__ = ["matmul"]

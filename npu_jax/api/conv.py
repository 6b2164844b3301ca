"""The public Conv2D entry points: arguments checked once, the tiling chosen, the plan launched."""

from __future__ import annotations

import jax.numpy as jnp

from npu_jax.api.validate import check_arrays, check_bound, check_common, check_flag, no_grad, state_bytes
from npu_jax.api.validate import conv_gm_bytes as _gm_bytes
from npu_jax.core.buffers import DTYPES
from npu_jax.core.policy import Policy, notes_default_cast
from npu_jax.errors import InputTypeError, check_choice
from npu_jax.hw.config import HardwareConfig
from npu_jax.kernels.launch import run_plan
from npu_jax.mapping.conv import STRATEGIES, ConvTiling, make_plan
from npu_jax.search.choose import choose_tiling
from npu_jax.workload.conv import ConvGeometry, canonicalize


# ---- running it ----------------------------------------------------------------------------------
@notes_default_cast("x", "w")
def conv2d(
    x,
    w,
    stride=1,
    padding=0,
    dilation=1,
    strategy: str = "img2col",
    hw: HardwareConfig | None = None,
    tiling: ConvTiling | None = None,
    policy: Policy | None = None,
    *,
    groups: int = 1,
    trace: bool | int = False,
    timing_only: bool = False,
    checks=None,
):
    """Conv2D on the emulated AI Core. Returns ``(y, report)``.

    Dtypes: the result's dtype is ``policy.output``, not the input's. With no ``policy`` the
    hardware's default applies (fp16 operands, fp32 accumulation, fp16 output): fp32 or bf16 inputs
    are converted to fp16 and y comes back fp16, and an :class:`~npu_jax.OperandCastWarning` says so
    once per process. ``policy=Policy(operand="bf16", output="bf16")`` keeps bf16 end to end;
    ``Policy(output="fp32")`` returns the fp32 accumulator's values.

    Args:
        x: (N, C, H, W) input, converted to ``policy.operand`` (fp16 by default) at the boundary.
        w: (K, C, kh, kw) weights (PyTorch/ONNX layout), converted likewise.
        stride: int or (sh, sw).
        padding: int, pair, ((top, bottom), (left, right)), "SAME" or "VALID".
        dilation: int or (dh, dw).
        strategy: "output_tiled", "input_tiled", "relayout" or "img2col" (``docs/conv2d.md``).
        hw: hardware (default ``presets.ascend910b()``).
        tiling: a :class:`~npu_jax.ConvTiling`, or None for the chooser's pick.
        policy: precision :class:`~npu_jax.Policy`; None = ``Policy()``, the hardware's default
            (see Dtypes above).
        groups: only 1 (dense Conv2D); any other value is refused with the fix (split a grouped
            conv into per-group calls).
        trace: keep per-core event traces (True = 4096 events, or a capacity).
        timing_only: run the same kernel with no data work (y is then all zeros): every cycle
            and byte of the report is unchanged, in a fraction of the time.
        checks: sanitizers (``"all"``, ``"none"``, names, or a ``Checks``; None = the process
            default, see ``npu_jax.default_checks``). Findings raise a SanitizerError.

    Returns:
        y (N, K, Ho, Wo) in ``policy.output`` format, and a Report. For ``relayout`` and
        ``img2col`` the NC1HWC0 relayout kernel's own report is ``report.extras["relayout"]``.

    Example:
        >>> import numpy as np, npu_jax
        >>> x = np.random.default_rng(0).standard_normal((1, 16, 8, 8))
        >>> w = np.random.default_rng(1).standard_normal((32, 16, 3, 3))
        >>> y, rep = npu_jax.conv2d(x, w, padding=1, hw=npu_jax.presets.tiny())
        >>> y.shape, rep.flops
        ((1, 32, 8, 8), 589824)
    """
    hw, policy, checks, cap = check_common(hw, policy, checks, trace, "conv2d")
    x, w = check_arrays(x, w)
    g = canonicalize(x.shape, w.shape, stride, padding, dilation, groups)
    check_choice("conv2d", "strategy", strategy, STRATEGIES)
    timing_only = check_flag("timing_only", timing_only)
    _check_tiling(tiling)
    state_bytes("conv2d", hw, hw.num_cores, _gm_bytes(g), cap, checks)
    x, w = no_grad("conv2d", x, w)
    op = policy.operand
    if tiling is None:
        tiling = choose_tiling(g, strategy, hw, op, policy.output)
    p = make_plan(g, strategy, tiling, hw, op, policy.output)
    y, report = run_plan(
        p, x.astype(DTYPES[op]), w.astype(DTYPES[op]), policy, cap, move_data=not timing_only, checks=checks
    )
    return jnp.transpose(y, (0, 3, 1, 2)), report


@notes_default_cast("x", "w")
def conv2d_bounded(
    x,
    w,
    g: ConvGeometry,
    *,
    bound: ConvGeometry,
    strategy: str,
    tiling: ConvTiling,
    hw: HardwareConfig | None = None,
    policy: Policy | None = None,
    timing_only: bool = False,
    checks=None,
):
    """Conv2D of layer ``g`` (fields may be traced) inside arrays shaped for ``bound`` (static).

    ``x`` is (B.n, B.c, B.h, B.w) with the layer's data in the leading corner, ``w`` likewise
    (B.k, B.c, B.kh, B.kw). One compiled program serves every layer that fits the bound: the
    property tests draw hundreds of layers through four compiles. Returns y (B.n, B.k, Ho_max,
    Wo_max) with the layer's output in the leading corner (zeros elsewhere) and the report. Dtypes
    as :func:`conv2d`: with no ``policy`` the inputs become fp16 and so does y.
    """
    hw, policy, checks, _ = check_common(hw, policy, checks, False, "conv2d_bounded")
    timing_only = check_flag("timing_only", timing_only, "conv2d_bounded")
    x, w = check_arrays(x, w, "conv2d_bounded")
    check_choice("conv2d_bounded", "strategy", strategy, STRATEGIES)
    check_bound("conv2d_bounded", g, bound, x, w)
    if not isinstance(tiling, ConvTiling):
        raise InputTypeError(f"conv2d_bounded: tiling must be a ConvTiling, got {type(tiling).__name__}.")
    state_bytes("conv2d_bounded", hw, hw.num_cores, _gm_bytes(bound), 0, checks)
    x, w = no_grad("conv2d_bounded", x, w)
    op = policy.operand
    p = make_plan(g, strategy, tiling, hw, op, policy.output, bound)
    y, report = run_plan(
        p, x.astype(DTYPES[op]), w.astype(DTYPES[op]), policy, move_data=not timing_only, checks=checks
    )
    return jnp.transpose(y, (0, 3, 1, 2)), report


def _check_tiling(tiling) -> None:
    if tiling is not None and not isinstance(tiling, ConvTiling):
        raise InputTypeError(f"tiling must be a ConvTiling or None, got {type(tiling).__name__} {tiling!r}.")


__all__ = ["conv2d", "conv2d_bounded", "run_plan"]

"""The public Conv2D entry points: arguments checked once, the tiling chosen, the plan launched."""

from __future__ import annotations

import jax.numpy as jnp

from npu_jax.api.validate import (
    check_arrays,
    check_bound,
    check_common,
    check_flag,
    check_quant,
    check_shared_scale,
    int8_operand,
    no_grad,
    state_bytes,
)
from npu_jax.api.validate import conv_gm_bytes as _gm_bytes
from npu_jax.core.buffers import DTYPES
from npu_jax.core.policy import Policy, notes_default_cast
from npu_jax.errors import InputError, InputTypeError, check_choice
from npu_jax.hw.config import HardwareConfig
from npu_jax.kernels.launch import DATA_PATHS, run_plan
from npu_jax.mapping.conv import STRATEGIES, ConvTiling, make_plan
from npu_jax.mapping.epilogue import split
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
    tiling_bound: ConvTiling | None = None,
    data_path: str = "values",
    scale=None,
    offset: int = 0,
):
    """Conv2D on the emulated AI Core. Returns ``(y, report)``.

    Dtypes: the result's dtype is ``policy.output``, not the input's. With no ``policy`` the
    hardware's default applies (fp16 operands, fp32 accumulation, fp16 output): fp32 or bf16 inputs
    are converted to fp16 and y comes back fp16, and an :class:`~npu_jax.OperandCastWarning` says so
    once per process. ``policy=Policy(operand="bf16", output="bf16")`` keeps bf16 end to end;
    ``Policy(output="fp32")`` returns the fp32 accumulator's values.

    int8: ``policy=Policy(operand="int8", output=...)`` takes integer x and w in [-128, 127] (already
    quantised) and sums their products exactly in int32 on the Cube, at twice the fp16 MAC rate.
    ``output="int32"`` returns the sums; ``"fp16"`` / ``"int8"`` scale them on the way out by
    ``scale`` (and ``offset``), :func:`npu_jax.requantize`'s formula (``docs/precision.md``).

    Args:
        x: (N, C, H, W) input, converted to ``policy.operand`` (fp16 by default) at the boundary.
        w: (K, C / groups, kh, kw) weights (PyTorch/ONNX layout), converted likewise.
        stride: int or (sh, sw).
        padding: int, pair, ((top, bottom), (left, right)), "SAME" or "VALID".
        dilation: int or (dh, dw).
        strategy: "output_tiled", "input_tiled", "relayout" or "img2col" (``docs/conv2d.md``).
        hw: hardware (default ``presets.ascend910b()``).
        tiling: a :class:`~npu_jax.ConvTiling`, or None for the chooser's pick.
        policy: precision :class:`~npu_jax.Policy`; None = ``Policy()``, the hardware's default
            (see Dtypes above).
        groups: channel groups (1 = dense, C = depthwise): a positive int dividing C and K, with
            w (K, C / groups, kh, kw). Every strategy runs it in one launch: groups are packed into
            super-groups of block-diagonal weights that fill the Cube's 16-channel fractals, as the
            vendor's compiler does (``docs/conv2d.md``); ``report.flops`` counts only the real
            2 N Ho Wo K (C / groups) kh kw. With several super-groups, ``weights_resident`` tilings
            are refused (the chooser never picks them).
        trace: keep per-core event traces (True = 4096 events, or a capacity).
        timing_only: run the same kernel with no data work (y is then all zeros): every cycle
            and byte of the report is unchanged, in a fraction of the time.
        checks: sanitizers (``"all"``, ``"none"``, names, or a ``Checks``; None = the process
            default, see ``npu_jax.default_checks``). Findings raise a SanitizerError.
        tiling_bound: a concrete :class:`~npu_jax.ConvTiling` at least as large as ``tiling`` in
            every field (``weights_resident`` True if it may be) with the same ``cores``
            (``ConvTiling.bound(tilings)`` makes one from a batch). Buffers, windows and the launch
            are then sized for the bound, so ``tiling``'s fields may be traced: ``jax.vmap`` over
            stacked tilings runs them all in one compiled timing-only program (needs
            ``timing_only=True``), each with its own run's cycles, per-pipe busy and bytes (the
            report's ``n_cores`` counts the launched cores). Each tiling must be legal on its own:
            a traced one cannot be checked. See docs/search.md.
        data_path: ``"values"`` (default): y computed apart from the timing in whole-tensor
            operations with the instructions' own arithmetic, the kernel run timing-only (its
            report computed once per layer, plan, policy and checks, and kept: a repeat call, or a
            jitted caller, does only the data work); ``"instructions"``: the data moved through
            every instruction. The same bits and the same report either way
            (``docs/performance.md``); stochastic rounding always runs the instructions.
        scale: int8 operands with fp16 / int8 output: the multiplier of the int32 sums, a number or
            one per output channel (K,) (``x_scale * w_scale[k]``, over ``y_scale`` for int8 output).
        offset: int8 output: its zero point, added after rounding (an int in [-128, 127]).

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

        Many tilings of one layer, timing-only, in one compiled program (entry ``i`` of the
        batched report is tiling ``i``'s report):

        >>> import jax, jax.numpy as jnp
        >>> ts = [npu_jax.ConvTiling(ho=h, wo=8, n=16, cin1=1, k_l0=16 * k) for h in (2, 4) for k in (1, 3)]
        >>> stacked = jax.tree.map(lambda *a: jnp.asarray(a), *ts)
        >>> run = lambda t: npu_jax.conv2d(x, w, padding=1, hw=npu_jax.presets.tiny(), tiling=t,
        ...     tiling_bound=npu_jax.ConvTiling.bound(ts), timing_only=True)[1]
        >>> reps = jax.vmap(run)(stacked)
        >>> cycles = [jax.tree.map(lambda a: a[i], reps).cycles for i in range(len(ts))]
        >>> cycles == [npu_jax.conv2d(x, w, padding=1, hw=npu_jax.presets.tiny(), tiling=t,
        ...     timing_only=True)[1].cycles for t in ts]
        True
    """
    hw, policy, checks, cap = check_common(hw, policy, checks, trace, "conv2d")
    if policy.quantised:
        x, w = int8_operand("conv2d", "x", x), int8_operand("conv2d", "w", w)
    else:
        x, w = check_arrays(x, w)
    g = canonicalize(x.shape, w.shape, stride, padding, dilation, groups)
    scale, offset = check_quant("conv2d", policy, scale, offset, g.k)
    check_choice("conv2d", "strategy", strategy, STRATEGIES)
    timing_only = check_flag("timing_only", timing_only)
    check_choice("conv2d", "data_path", data_path, DATA_PATHS)
    _check_tiling(tiling)
    _check_tiling_bound("conv2d", tiling, tiling_bound, timing_only)
    state_bytes("conv2d", hw, hw.num_cores, _gm_bytes(g), cap, checks)
    x, w = no_grad("conv2d", x, w)
    op = policy.operand
    epi = split((), hw, policy, True, offset)[0]  # an int8 kernel's (re)quantisation, else None
    if epi is not None:
        check_shared_scale("conv2d", g, hw, scale)
    if tiling is None:
        tiling = choose_tiling(g, strategy, hw, op, policy.output, epi)
    p = make_plan(g, strategy, tiling, hw, op, policy.output, tiling_bound=tiling_bound, epi=epi)
    y, report = run_plan(
        p,
        x.astype(DTYPES[op]),
        w.astype(DTYPES[op]),
        policy,
        cap,
        scale=scale,
        move_data=not timing_only,
        checks=checks,
        data_path=data_path,
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
    tiling_bound: ConvTiling | None = None,
):
    """Conv2D of layer ``g`` (fields may be traced) inside arrays shaped for ``bound`` (static).

    ``x`` is (B.n, B.c, B.h, B.w) with the layer's data in the leading corner, ``w`` likewise
    (B.k, B.c, B.kh, B.kw). One compiled program serves every layer that fits the bound: the
    property tests draw hundreds of layers through four compiles. Returns y (B.n, B.k, Ho_max,
    Wo_max) with the layer's output in the leading corner (zeros elsewhere) and the report. Dtypes
    as :func:`conv2d`: with no ``policy`` the inputs become fp16 and so does y. ``tiling_bound``
    as :func:`conv2d`: the tiling may then be traced too (timing-only).
    """
    hw, policy, checks, _ = check_common(hw, policy, checks, False, "conv2d_bounded")
    timing_only = check_flag("timing_only", timing_only, "conv2d_bounded")
    x, w = check_arrays(x, w, "conv2d_bounded")
    check_choice("conv2d_bounded", "strategy", strategy, STRATEGIES)
    if getattr(g, "groups", 1) != 1 or getattr(bound, "groups", 1) != 1:
        raise InputError(
            f"conv2d_bounded runs dense layers (groups=1); got groups={g.groups} (bound: {bound.groups}). "
            f"Run a grouped conv with npu_jax.conv2d(..., groups=...)."
        )
    check_bound("conv2d_bounded", g, bound, x, w)
    if not isinstance(tiling, ConvTiling):
        raise InputTypeError(f"conv2d_bounded: tiling must be a ConvTiling, got {type(tiling).__name__}.")
    _check_tiling_bound("conv2d_bounded", tiling, tiling_bound, timing_only)
    state_bytes("conv2d_bounded", hw, hw.num_cores, _gm_bytes(bound), 0, checks)
    x, w = no_grad("conv2d_bounded", x, w)
    op = policy.operand
    p = make_plan(g, strategy, tiling, hw, op, policy.output, bound, tiling_bound=tiling_bound)
    y, report = run_plan(
        p, x.astype(DTYPES[op]), w.astype(DTYPES[op]), policy, move_data=not timing_only, checks=checks
    )
    return jnp.transpose(y, (0, 3, 1, 2)), report


def _check_tiling(tiling) -> None:
    if tiling is not None and not isinstance(tiling, ConvTiling):
        raise InputTypeError(f"tiling must be a ConvTiling or None, got {type(tiling).__name__} {tiling!r}.")


def _check_tiling_bound(fn: str, tiling, tiling_bound, timing_only: bool) -> None:
    if tiling_bound is None:
        return
    if not isinstance(tiling_bound, ConvTiling):
        raise InputTypeError(
            f"{fn}: tiling_bound must be a ConvTiling or None, got {type(tiling_bound).__name__}."
        )
    if tiling is None:
        raise ValueError(f"{fn}: tiling_bound bounds a given tiling; pass tiling= too.")
    if not timing_only:
        raise ValueError(
            f"{fn}: tiling_bound runs the timing-only program (the data of a traced tiling is not "
            f"laid out); pass timing_only=True."
        )


__all__ = ["conv2d", "conv2d_bounded", "run_plan"]

"""Conv2D with an element-wise epilogue, fused into the Conv's way out of L0C or run as a second kernel."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from npu_jax.api.eltwise import run_eltwise
from npu_jax.api.validate import (
    as_array,
    check_arrays,
    check_bound,
    check_common,
    check_flag,
    check_quant,
    int8_operand,
    no_grad,
    state_bytes,
)
from npu_jax.core.buffers import DTYPES
from npu_jax.core.policy import Policy, notes_default_cast
from npu_jax.core.sanitize import Checks
from npu_jax.errors import InputError, InputTypeError, check_choice
from npu_jax.hw.config import HardwareConfig
from npu_jax.kernels.launch import run_plan
from npu_jax.mapping.conv import STRATEGIES, ConvTiling, make_plan
from npu_jax.mapping.eltwise import make_eltwise_plan
from npu_jax.mapping.epilogue import Step, canonical_steps, split
from npu_jax.report.sequence import SequenceReport
from npu_jax.search.choose import choose_tiling
from npu_jax.workload.conv import canonicalize


@notes_default_cast("x", "w")
def conv2d_fused(
    x,
    w,
    epilogue=("relu",),
    *,
    bias=None,
    residual=None,
    stride=1,
    padding=0,
    dilation=1,
    fused: bool = True,
    strategy: str = "img2col",
    hw: HardwareConfig | None = None,
    tiling: ConvTiling | None = None,
    policy: Policy | None = None,
    trace: bool | int = False,
    timing_only: bool = False,
    checks=None,
    scale=None,
    offset: int = 0,
):
    """Conv2D followed by an element-wise ``epilogue`` chain, on the emulated chip.

    ``fused=True`` applies the chain on chip before the single write of the result: in the
    Fixpipe on separated chips (910B: bias, one activation, cast -- a residual add, which needs a
    UB, and anything after it still runs as a vector kernel on the AIV cores), or L0C -> UB ->
    vector steps -> GM on coupled chips (910/310P: the whole chain). ``fused=False`` is the
    baseline: the Conv writes its output to GM, a vector kernel (CopyIn -> Compute -> CopyOut,
    double-buffered) reads it back, applies the chain and writes the result.

    Dtypes: as :func:`npu_jax.conv2d`, the result is in ``policy.output`` (or the chain's cast),
    not the input's dtype: with no ``policy``, fp32 or bf16 inputs are converted to fp16 and the
    result is fp16 (an :class:`~npu_jax.OperandCastWarning` says so once per process).

    Args:
        x: (N, C, H, W); w: (K, C, kh, kw). Converted to ``policy.operand``.
        epilogue: steps, in order: ``"bias"``, ``"relu"``, ``("leaky_relu", slope)``,
            ``("clipped_relu", ceiling)``, ``"residual"``, ``("cast", fmt)`` (last).
        bias: (K,) per-channel values, when the chain has ``"bias"``. Held in fp32 for the
            Fixpipe, in ``policy.vector`` format on UB.
        residual: (N, K, Ho, Wo), when the chain has ``"residual"``. Fused in UB (coupled chips) it
            is read as an activation, in ``policy.output`` (widened in UB to ``policy.vector``);
            in the vector kernel after the Cube kernel, in ``policy.vector``.
        stride, padding, dilation, strategy, hw, tiling, policy, trace, timing_only, checks: as
            :func:`npu_jax.conv2d` (``checks`` covers both kernels).
        scale, offset: int8 operands (``Policy(operand="int8", output="int8" | "fp16")``): the
            requantisation's, as :func:`npu_jax.conv2d`'s. Its chain is one activation (``relu``,
            ``leaky_relu``, ``clipped_relu``) fused in the requantisation on either chip, applied to the
            scaled value before its rounding (a ReLU of an int8 output clamps at its zero point); or,
            on a 910 / 310P with ``output="fp16"``, a residual chain (``"residual"`` with ``"abs"`` and
            activations around it): the deq conversion writes the fp16 tile and the vector unit adds the
            fp16 residual and applies the rest in fp16 before the one write (the vendor's conv +
            dequant + vadd + ReLU kernel). ``tiling=None`` lets the chooser pick under the fused
            kernel's own constraints (its UB / L1 buffers count too).

    Returns:
        y (N, K, Ho, Wo) in the chain's final format (the cast's, else ``policy.output``), and a
        :class:`~npu_jax.report.sequence.SequenceReport`: one part per kernel launched (``conv``,
        then ``eltwise`` when part of the chain ran on its own).

    Example:
        >>> import numpy as np, npu_jax, fusion
        >>> x = np.random.default_rng(0).standard_normal((1, 16, 8, 8))
        >>> w = np.random.default_rng(1).standard_normal((32, 16, 3, 3))
        >>> y, rep = fusion.conv2d_fused(x, w, ["bias", "relu"], bias=np.ones(32), padding=1,
        ...                              hw=npu_jax.presets.tiny())
        >>> y.shape, [label for label, _ in rep.parts]
        ((1, 32, 8, 8), ['conv'])
    """

    fn = "conv2d_fused"
    hw, policy, checks, cap = check_common(hw, policy, checks, trace, fn)
    fused = check_flag("fused", fused, fn)
    timing_only = check_flag("timing_only", timing_only, fn)
    if policy.quantised:
        x, w = int8_operand(fn, "x", x), int8_operand(fn, "w", w)
        if not fused:
            raise InputError(f"{fn}: an int8 chain runs in the kernel's requantisation: fused=True.")
    else:
        x, w = check_arrays(x, w, fn)
    g = canonicalize(x.shape, w.shape, stride, padding, dilation)
    quant = check_quant(fn, policy, scale, offset, g.k)
    check_choice(fn, "strategy", strategy, STRATEGIES)
    steps = _steps(epilogue)
    if tiling is not None and not isinstance(tiling, ConvTiling):
        raise InputTypeError(f"{fn}: tiling must be a ConvTiling or None, got {type(tiling).__name__}.")
    if tiling is None:
        epi, _, mid, _ = split(steps, hw, policy, fused, quant[1])
        tiling = choose_tiling(g, strategy, hw, policy.operand, mid, epi)
    return _run(
        x,
        w,
        g,
        None,
        steps,
        bias,
        residual,
        fused,
        strategy,
        tiling,
        hw,
        policy,
        cap,
        timing_only,
        checks,
        quant,
    )


@notes_default_cast("x", "w")
def conv2d_fused_bounded(
    x,
    w,
    g,
    *,
    bound,
    epilogue,
    bias=None,
    residual=None,
    fused: bool = True,
    strategy: str = "img2col",
    tiling: ConvTiling,
    hw: HardwareConfig,
    policy: Policy | None = None,
    timing_only: bool = False,
    checks=None,
):
    """:func:`conv2d_fused` of layer ``g`` (fields may be traced) inside arrays shaped for ``bound``.

    As :func:`npu_jax.conv2d_bounded`: x, w (and residual (B.n, B.k, Ho_max, Wo_max), bias (B.k,))
    hold the layer in their leading corner; one compiled program serves every layer inside the
    bound. The vector kernel of an unfused run sweeps the bound's whole output tensor.
    """
    fn = "conv2d_fused_bounded"
    hw, policy, checks, _ = check_common(hw, policy, checks, False, fn)
    fused = check_flag("fused", fused, fn)
    timing_only = check_flag("timing_only", timing_only, fn)
    x, w = check_arrays(x, w, fn)
    check_choice(fn, "strategy", strategy, STRATEGIES)
    check_bound(fn, g, bound, x, w)
    if not isinstance(tiling, ConvTiling):
        raise InputTypeError(f"{fn}: tiling must be a ConvTiling, got {type(tiling).__name__}.")
    return _run(
        x,
        w,
        g,
        bound,
        _steps(epilogue),
        bias,
        residual,
        fused,
        strategy,
        tiling,
        hw,
        policy,
        0,
        timing_only,
        checks,
    )


def _run(
    x,
    w,
    g,
    bound,
    steps,
    bias,
    residual,
    fused,
    strategy,
    tiling,
    hw,
    policy,
    cap,
    timing_only,
    checks,
    quant=(None, 0),
):
    B = g if bound is None else bound
    ho_b, wo_b = (g.ho, g.wo) if bound is None else (B.h + B.pads[0] + B.pads[1], B.w + B.pads[2] + B.pads[3])
    names = {s.op for s in steps}
    bias = _operand("bias", bias, "bias" in names, (B.k,))
    residual = _operand("residual", residual, "residual" in names, (B.n, B.k, ho_b, wo_b))
    gm = 4 * (B.n * B.c * B.h * B.w + B.k * B.c * B.kh * B.kw + B.k) + 9 * B.n * B.k * ho_b * wo_b
    state_bytes("conv2d_fused", hw, hw.num_cores, gm, cap, Checks.parse(checks))
    x, w = no_grad("conv2d_fused", x, w)
    bias = None if bias is None else no_grad("conv2d_fused", bias)[0]
    residual = None if residual is None else no_grad("conv2d_fused", residual)[0]
    res_nhwc = None if residual is None else jnp.transpose(residual, (0, 2, 3, 1))
    epi, rest, mid, final = split(steps, hw, policy, fused, quant[1])
    op = policy.operand
    p = make_plan(g, strategy, tiling, hw, op, mid, bound=bound, epi=epi)
    y, rep = run_plan(
        p,
        x.astype(DTYPES[op]),
        w.astype(DTYPES[op]),
        policy,
        cap,
        bias=bias,
        residual=res_nhwc,
        scale=quant[0],
        move_data=not timing_only,
        checks=checks,
        name=f"conv2d[{strategy}]" + (f"+{epi}" if epi is not None else ""),
    )
    parts = [("conv", rep)]
    if rest:
        rows = B.n * ho_b * wo_b
        ep = make_eltwise_plan(rest, rows, B.k, mid, final, policy.vector, hw)
        z, rep2 = run_eltwise(
            ep,
            y.reshape(rows, B.k),
            policy,
            bias=bias,
            residual=None if res_nhwc is None else res_nhwc.reshape(rows, B.k),
            trace_capacity=cap,
            move_data=not timing_only,
            checks=checks,
            name="eltwise[" + " -> ".join(map(str, rest)) + "]",
            l2_resident=rep.l2_kept,  # the conv's output (and bias, residual) where L2 kept them
        )
        if not timing_only and bound is None and not isinstance(rep2.overlapping_writes, jax.core.Tracer):
            rep2.check()
        y = z.reshape(B.n, ho_b, wo_b, B.k)
        parts.append(("eltwise", rep2))
    label = " -> ".join(["conv2d"] + [str(s) for s in steps])
    kind = "fused" if fused else "unfused"
    return jnp.transpose(y, (0, 3, 1, 2)), SequenceReport(tuple(parts), f"{label} ({kind})")


@notes_default_cast("x", "w")
def conv_relu(
    x,
    w,
    bias=None,
    stride=1,
    padding=0,
    dilation=1,
    fused: bool = True,
    hw: HardwareConfig | None = None,
    tiling: ConvTiling | None = None,
    policy: Policy | None = None,
    *,
    strategy: str = "img2col",
    trace: bool | int = False,
    timing_only: bool = False,
):
    """``relu(conv2d(x, w) + bias)`` on the emulated chip; the headline use of :func:`conv2d_fused`.

    ``fused=True``: ReLU (and the bias) in the Conv's epilogue, one write to GM. ``fused=False``:
    the Conv kernel, then a ReLU vector kernel over its output in GM. Returns (y, report).

    Dtypes: as :func:`npu_jax.conv2d`, y is in ``policy.output``: with no ``policy`` the hardware's
    default applies (fp16 operands, fp32 accumulation, fp16 out), so fp32 or bf16 inputs give an
    fp16 y and an :class:`~npu_jax.OperandCastWarning` once per process. Pass
    ``policy=npu_jax.Policy(operand="bf16", output="bf16")`` (or ``output="fp32"``) to choose.

    Example:
        >>> import numpy as np, npu_jax, fusion
        >>> x = np.random.default_rng(0).standard_normal((1, 16, 8, 8))
        >>> w = np.random.default_rng(1).standard_normal((32, 16, 3, 3))
        >>> y, rep = fusion.conv_relu(x, w, padding=1, hw=npu_jax.presets.tiny())
        >>> bool((np.asarray(y) >= 0).all())
        True
    """
    steps = (["bias"] if bias is not None else []) + ["relu"]
    return conv2d_fused(
        x,
        w,
        steps,
        bias=bias,
        stride=stride,
        padding=padding,
        dilation=dilation,
        fused=fused,
        strategy=strategy,
        hw=hw,
        tiling=tiling,
        policy=policy,
        trace=trace,
        timing_only=timing_only,
    )


def _steps(epilogue, fn: str = "conv2d_fused"):
    """The epilogue canonicalised (:func:`canonical_steps`), its errors the package's, naming it."""
    if epilogue is not None and not isinstance(epilogue, (str, Step, tuple, list)):
        raise InputTypeError(
            f"{fn}: epilogue must be a step name, a (name, arg) pair or a list of them, e.g. "
            f"['bias', 'relu']; got {type(epilogue).__name__} {epilogue!r}."
        )
    try:
        return canonical_steps(epilogue)
    except (TypeError, ValueError) as e:
        raise InputError(f"{fn}: epilogue: {e}") from None


def _operand(name: str, arr, wanted: bool, shape):
    if arr is None:
        if wanted:
            raise InputError(
                f"the epilogue has a {name!r} step but {name}=None; pass a {name} of shape {shape}."
            )
        return None
    if not wanted:
        raise InputError(f"{name} was given but the epilogue has no {name!r} step; add it to epilogue=[...].")
    arr = as_array("conv2d_fused", name, arr)
    if tuple(arr.shape) != tuple(shape):
        raise InputError(f"conv2d_fused: {name} must have shape {tuple(shape)}, got {tuple(arr.shape)}.")
    return arr

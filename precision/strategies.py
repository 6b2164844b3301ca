"""Precision strategies for a stack of 3x3 convolutions with ReLU, run on the emulator.

Every layer's convolution is ``npu_jax.conv2d``'s on the emulated core: its numbers, computed by its
own data path (:func:`stack_conv`), and its cycles (:func:`conv_cycles`). What a strategy changes is
the Policy of that conv and what happens between layers:

=================  ========================================================================
``fp32``           fp32 operands, fp32 accumulation, fp32 storage (the baseline)
``fp16``           pure FP16: fp16 storage and an fp16 accumulator (``fp16_mac``: the running
                   sum rounded to fp16 after every multiply-add -- a what-if, L0C is fp32 on chip)
``mixed``          fp16 operands, fp32 accumulation in L0C, fp32 epilogue (ReLU before the
                   Fixpipe's conversion), fp16 storage: the hardware's default
``normalisation``  mixed, plus every ``period`` layers the fp32 result is rescaled to unit RMS
                   before it is stored in fp16; the product of the factors is carried in fp32
``scaling_current``  per-tensor power-of-two scaling from this tensor's own amax (the fp32
                   result), scale = 2^floor(log2(max / amax)) / 2^margin, kept in fp32
``scaling_delayed``  the same scale from an amax history of earlier iterations (FP8-style
                   "delayed scaling"): the scale is known before the conv runs, so the Fixpipe
                   applies it on the way out and the output is fp16 directly
``int8``           int8 inference: weights symmetric per output channel, activations symmetric
                   per tensor with scales calibrated (min-max) on a separate batch; each conv
                   int8 x int8 -> int32 on the Cube, requantised to int8 by the Fixpipe (scale
                   ``s_x * s_w[k] / s_y``); ReLU on the int8 result (exact: zero point 0)
=================  ========================================================================

The network input is a tensor like the others: the scaling strategies scale it and
normalisation normalises it before its cast to fp16.

Cycles. The convs' cycles are the emulator's, read from the closed-form model that equals its
report (:func:`npu_jax.cost.conv.predict`), so a stack compiles no timing-only kernel. A strategy's
extra pass over an activation (RMS or amax reduction, rescale and cast of an fp32 result) is priced
in closed form from the same cost table the emulator uses (:mod:`npu_jax.hw.costs`): a DMA in,
vector repeats and a DMA out on the vector cores, pipelined; see :func:`vector_pass_cycles`. The delayed-scaling multiply is a
Fixpipe feature (the 910B's quantisation scale) the emulator's Fixpipe does not model: its
numbers are the fp32 result scaled and converted exactly as that Fixpipe would, its cycles the
fp16-output kernel's. ReLU is free in the Fixpipe (``fusion.conv_relu`` is where a fused kernel
slots in); here it is applied to the kernel's output (exact in every format).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

import npu_jax
from npu_jax.core.policy import Policy
from npu_jax.cost.conv import predict
from npu_jax.errors import InputTypeError, check_choice, check_int, check_number, check_seed, check_size
from npu_jax.hw import costs
from npu_jax.hw.formats import itemsize
from npu_jax.kernels.values import conv_values, covers
from npu_jax.mapping.conv import ConvPlan, make_plan
from npu_jax.mapping.epilogue import split
from npu_jax.search.choose import choose_tiling
from npu_jax.workload.conv import canonicalize
from precision.formats import FORMATS
from precision.metrics import Metrics, compare
from precision.quantization import quantize
from precision.rounding import round_to

STRATEGIES = ("fp32", "fp16", "mixed", "normalisation", "scaling_current", "scaling_delayed", "int8")
POLICIES = {
    "fp32": Policy(operand="fp32", accumulate="fp32", output="fp32"),
    "fp16": Policy(operand="fp16", accumulate="fp16_mac", output="fp16"),
    "mixed": Policy(operand="fp16", accumulate="fp32", output="fp16"),
    "mixed_fp32_out": Policy(operand="fp16", accumulate="fp32", output="fp32"),
    "int8": Policy(operand="int8", accumulate="int32", output="int8"),
}
FP16_MAX = FORMATS["fp16"].max


# ---- the emulated conv, compiled once per (hw, strategy, policy, shapes) ---------------------------
@functools.lru_cache(maxsize=64)
def conv_fn(hw, conv_strategy: str, policy: Policy, x_shape: tuple, w_shape: tuple):
    """A jitted ``npu_jax.conv2d`` (stride 1, padding 1) for one configuration, reused by every
    layer and every call with these shapes (the tiling is the chooser's, picked once)."""

    def f(x, w):
        return npu_jax.conv2d(x, w, stride=1, padding=1, strategy=conv_strategy, hw=hw, policy=policy)

    return jax.jit(f)


def conv(x, w, *, hw, policy: Policy, conv_strategy: str = "img2col"):
    """(y, report) of one emulated 3x3 conv, padding 1. x and w are converted to the operand
    format first (as conv2d does at its boundary), so every call of a configuration shares one
    compiled program whatever format the caller's arrays are in."""
    dt = FORMATS[policy.operand].dtype
    x, w = jnp.asarray(x).astype(dt), jnp.asarray(w).astype(dt)
    return conv_fn(hw, conv_strategy, policy, tuple(x.shape), tuple(w.shape))(x, w)


@functools.lru_cache(maxsize=64)
def conv_plan(hw, conv_strategy: str, policy: Policy, x_shape: tuple, w_shape: tuple) -> ConvPlan:
    """The plan ``npu_jax.conv2d`` runs for the stack's 3x3 conv (stride 1, padding 1) under
    ``policy``: the chooser's tiling, in the policy's operand and output formats."""
    g = canonicalize(x_shape, w_shape, 1, 1)
    epi = split((), hw, policy, True)[0]  # an int8 conv's requantisation, else None
    t = choose_tiling(g, conv_strategy, hw, policy.operand, policy.output, epi)
    return make_plan(g, conv_strategy, t, hw, policy.operand, policy.output, epi=epi)


def stack_conv(x, w, *, hw, policy: Policy, conv_strategy: str = "img2col", scale=None):
    """y (N, K, H, W) of one stack conv: the values ``npu_jax.conv2d`` returns for it, bit for bit,
    computed by its own data path (``npu_jax.kernels.values``, held to the instructions by
    tests/test_values.py) without its timing-only program, whose cycles :func:`conv_cycles` reads
    from the closed-form model instead (tests/test_precision_layer.py holds both to conv2d).
    ``scale``: an int8 policy's per-channel requantisation scales (int8 x and w)."""
    if policy.quantised:
        x, w = jnp.asarray(x, jnp.int8), jnp.asarray(w, jnp.int8)
        p = conv_plan(hw, conv_strategy, policy, tuple(x.shape), tuple(w.shape))
        return jnp.transpose(conv_values(p, policy, x, w, jnp.asarray(scale, jnp.float32)), (0, 3, 1, 2))
    dt = FORMATS[policy.operand].dtype
    x, w = jnp.asarray(x).astype(dt), jnp.asarray(w).astype(dt)
    p = conv_plan(hw, conv_strategy, policy, tuple(x.shape), tuple(w.shape))
    if not covers(p, policy):  # (no policy of POLICIES: stochastic rounding runs the instructions)
        return conv(x, w, hw=hw, policy=policy, conv_strategy=conv_strategy)[0]
    return jnp.transpose(conv_values(p, policy, x, w), (0, 3, 1, 2))


def conv_cycles(hw, conv_strategy: str, policy: Policy, x_shape, w_shape) -> int:
    """Cycles of the stack conv: the closed-form model's (:func:`npu_jax.cost.conv.predict`), which
    equal the emulator's report of ``npu_jax.conv2d`` (the conv kernel; its NC1HWC0 relayout kernel
    is not counted, as ``report.cycles`` does not), so no timing-only program compiles."""
    return int(predict(conv_plan(hw, conv_strategy, policy, tuple(x_shape), tuple(w_shape))).cycles)


def vector_pass_cycles(n_elems: int, in_fmt: str, out_fmt: str | None, vector_ops: int, hw) -> int:
    """Closed-form cycles of one element-wise pass over ``n_elems`` on the vector cores: GM -> UB
    (MTE2), ``vector_ops`` instructions on the fp32 working copy (one 256-B repeat per cycle),
    UB -> GM (MTE3, skipped when ``out_fmt`` is None, e.g. a pure reduction), the three pipes
    overlapped (double-buffered), plus the start-ups of the cost table."""
    cores = max(1, min(hw.num_vector_cores, n_elems // 256 or 1))
    per = -(-n_elems // cores)
    h = costs.HwNumbers.of(hw)
    rate = costs.gm_rate(h, cores)  # the core's share of GM, exact (a fraction where the chip binds)
    b_in = per * itemsize(in_fmt)
    b_out = 0 if out_fmt is None else per * itemsize(out_fmt)
    return int(costs.vector_pass(h, b_in, b_out, per * 4, vector_ops, rate))


# ---- workloads and reference ------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class StackSpec:
    """A ResNet-like stack: ``depth`` 3x3 convs (C -> C, stride 1, pad 1), each followed by ReLU.

    Attributes:
        depth, channels, height, width, batch: the shapes.
        gain: weight multiplier on He init (N(0, 2/K)): 1 keeps activations level; > 1 makes them
            grow ~gain per layer.
        input_scale: the input is N(0, 1) * input_scale.
        seed: seed of the weights and inputs.
    """

    depth: int = 8
    channels: int = 16
    height: int = 8
    width: int = 8
    batch: int = 1
    gain: float = 1.0
    input_scale: float = 1.0
    seed: int = 0

    def __post_init__(self):
        for k in ("depth", "channels", "height", "width", "batch"):
            check_int("StackSpec", k, getattr(self, k), 1)
        for k in ("gain", "input_scale"):
            check_number("StackSpec", k, getattr(self, k), 0.0, open_lo=True)
        check_seed("StackSpec", "seed", self.seed)
        # the stack's weights (fp32) and the activations every strategy keeps per layer (float64 for
        # the references), estimated before any is drawn: a depth of 10**8 is refused, not run out of memory
        c, act = self.channels, self.batch * self.channels * self.height * self.width
        check_size(
            "StackSpec",
            {
                f"weights of {self.depth} layers": self.depth * c * c * 9 * 4,
                "activations": self.depth * act * 8 * 4,
            },
        )

    @property
    def K(self) -> int:
        return self.channels * 9

    @property
    def x_shape(self) -> tuple:
        return (self.batch, self.channels, self.height, self.width)

    @property
    def w_shape(self) -> tuple:
        return (self.channels, self.channels, 3, 3)

    def weights(self) -> list[np.ndarray]:
        rng = np.random.default_rng([self.seed, 1])
        std = math.sqrt(2.0 / self.K) * self.gain
        return [(rng.standard_normal(self.w_shape) * std).astype(np.float32) for _ in range(self.depth)]

    def inputs(self, iteration: int = 0) -> np.ndarray:
        rng = np.random.default_rng([self.seed, 2, iteration])
        return (rng.standard_normal(self.x_shape) * self.input_scale).astype(np.float32)


def conv3x3_ref(x, w) -> np.ndarray:
    """float64 cross-correlation, stride 1, padding 1, NCHW x OIHW.

    Summed term by term in a fixed order (tap (i, j), then input channel c) with elementwise
    numpy multiplies and adds, which are IEEE and the same on every host; a BLAS or einsum
    reduction would pick its order, and so its last bits, by the CPU it runs on."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    H, W = x.shape[2], x.shape[3]
    out = np.zeros((x.shape[0], w.shape[0], H, W))
    for i in range(3):
        for j in range(3):
            for c in range(x.shape[1]):
                out += xp[:, None, c, i : i + H, j : j + W] * w[None, :, c, i, j, None, None]
    return out


def reference(x, ws) -> list[np.ndarray]:
    """float64 activations after each layer (conv then ReLU)."""
    a, outs = np.asarray(x, np.float64), []
    for w in ws:
        a = np.maximum(conv3x3_ref(a, w), 0.0)
        outs.append(a)
    return outs


# ---- running a strategy ------------------------------------------------------------------------------
@dataclasses.dataclass
class StackRun:
    """One strategy on one stack: the activations after each layer (float64, unscaled), the
    emulated cycles per layer (conv + extra passes), and the scales applied."""

    strategy: str
    outputs: list
    cycles: list
    scales: list
    notes: list = dataclasses.field(default_factory=list)

    @property
    def total_cycles(self) -> int:
        return int(sum(self.cycles))

    def metrics(self, refs) -> list[Metrics]:
        return [
            compare(o, r, fmt="fp32" if self.strategy == "fp32" else "fp16")
            for o, r in zip(self.outputs, refs)
        ]


def pow2_scale(amax: float, prev: float = 1.0, margin: int = 1, fmax: float = FP16_MAX) -> float:
    """Power-of-two scale 2^floor(log2(fmax / amax)) / 2^margin; ``prev`` when amax is 0 or not
    finite (the FP8 recipe's rule)."""
    if not (np.isfinite(amax) and amax > 0):
        return prev
    return float(2.0 ** (math.floor(math.log2(fmax / amax)) - margin))


def run_strategy(
    strategy: str,
    spec: StackSpec,
    *,
    hw=None,
    conv_strategy: str = "img2col",
    period: int = 2,
    margin: int = 1,
    iterations: int = 3,
    history: int = 16,
) -> StackRun:
    """Run ``strategy`` on the stack ``spec`` on the emulator.

    Args:
        strategy: one of :data:`STRATEGIES`.
        spec: the stack.
        hw: hardware preset (default ``presets.tiny()``).
        conv_strategy: the Conv2D kernel (``img2col`` ...).
        period: normalisation every ``period`` layers.
        margin: scaling headroom in powers of two.
        iterations: ``scaling_delayed`` runs this many batches (the inputs of iterations 0, 1,
            ...) and reports the last: the first has no history (scale 1).
        history: amax history length of ``scaling_delayed``.
    """
    check_choice("run_strategy", "strategy", strategy, STRATEGIES)
    if not isinstance(spec, StackSpec):
        raise InputTypeError(f"run_strategy: spec must be a StackSpec, got {type(spec).__name__} {spec!r}.")
    for name, v in (("period", period), ("iterations", iterations), ("history", history)):
        check_int("run_strategy", name, v, 1)
    check_int("run_strategy", "margin", margin, 0, 64)
    hw = npu_jax.presets.tiny() if hw is None else hw
    ws = spec.weights()
    if strategy == "scaling_delayed":
        amax_hist: list[list[float]] = [[] for _ in range(spec.depth + 1)]
        run = None
        for it in range(max(1, iterations)):
            run = _run_once(
                strategy, spec, spec.inputs(it), ws, hw, conv_strategy, period, margin, amax_hist, history
            )
        run.notes.append(f"iteration {iterations - 1} of {iterations} (history of {history})")
        return run
    if strategy == "int8":
        return _run_int8(spec, spec.inputs(0), ws, hw, conv_strategy)
    return _run_once(strategy, spec, spec.inputs(0), ws, hw, conv_strategy, period, margin, None, history)


def _sym_scale(amax) -> np.ndarray:
    """Symmetric int8 scale(s) over [-127, 127]: amax / 127 (1 where amax is 0), fp32."""
    amax = np.asarray(amax, np.float64)
    return np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)


def _run_int8(spec, x, ws, hw, cs) -> StackRun:
    """The ``int8`` strategy: scales calibrated on batch 1's float64 activations, run on batch 0."""
    calib = [np.asarray(spec.inputs(1), np.float64)] + reference(spec.inputs(1), ws)
    s_act = [_sym_scale(np.max(np.abs(a))) for a in calib]  # layer i reads s_act[i], writes s_act[i + 1]
    pol = POLICIES["int8"]
    a = np.asarray(quantize(x, scale=s_act[0], zero_point=0).q)
    n = int(np.prod(spec.x_shape))
    outs, cyc = [], []
    for i, w in enumerate(ws):
        s_w = _sym_scale(np.max(np.abs(w), axis=(1, 2, 3)))
        wq = np.asarray(
            quantize(
                w, granularity="per_channel", axis=0, scale=s_w, zero_point=np.zeros_like(s_w, np.int8)
            ).q
        )
        scale = (s_act[i] * s_w / s_act[i + 1]).astype(np.float32)  # fp32, as the Fixpipe's
        y = stack_conv(a, wq, hw=hw, policy=pol, conv_strategy=cs, scale=scale)
        a = jnp.maximum(y, 0)  # ReLU of an int8 value with zero point 0: exact
        outs.append(np.asarray(a, np.float64) * np.float64(s_act[i + 1]))
        quant_in = vector_pass_cycles(n, "fp32", "int8", 2, hw) if i == 0 else 0  # x / s, then Cast
        cyc.append(conv_cycles(hw, cs, pol, spec.x_shape, spec.w_shape) + quant_in)
    return StackRun("int8", outs, cyc, [float(1.0 / s) for s in s_act[1:]])


def _run_once(strategy, spec, x, ws, hw, cs, period, margin, amax_hist, history) -> StackRun:
    n = int(np.prod(spec.x_shape))
    xs, wsh = spec.x_shape, spec.w_shape
    pol = POLICIES["fp32" if strategy == "fp32" else "fp16" if strategy == "fp16" else "mixed"]
    if strategy in ("fp32", "fp16", "mixed"):
        a, outs, cyc = jnp.asarray(x), [], []
        for w in ws:
            y = stack_conv(a, w, hw=hw, policy=pol, conv_strategy=cs)
            a = jnp.maximum(y, 0)  # ReLU: exact in any format
            outs.append(np.asarray(a).astype(np.float64))
            cyc.append(conv_cycles(hw, cs, pol, xs, wsh))
        return StackRun(strategy, outs, cyc, [1.0] * len(ws))
    # strategies that rescale: activations are stored in fp16 as value * scale (scale in fp32)
    f32 = POLICIES["mixed_fp32_out"]
    cyc, outs, scales = [], [], []
    x32 = jnp.asarray(x, jnp.float32)
    scale = np.float32(1.0)
    if strategy == "normalisation":
        scale = np.float32(1.0 / float(jnp.sqrt(jnp.mean(x32 * x32))))
        cyc_in = vector_pass_cycles(n, "fp32", "fp16", 3, hw)
    elif strategy == "scaling_current":
        scale = np.float32(pow2_scale(float(jnp.max(jnp.abs(x32))), 1.0, margin))
        cyc_in = vector_pass_cycles(n, "fp32", None, 1, hw) + vector_pass_cycles(n, "fp32", "fp16", 2, hw)
    else:  # delayed: the input's scale from its own history
        scale = np.float32(_delayed(amax_hist[0], margin, 1.0))
        amax_hist[0].append(float(jnp.max(jnp.abs(x32))))
        del amax_hist[0][:-history]
        cyc_in = vector_pass_cycles(n, "fp32", "fp16", 2, hw)
    a = round_to(x32 * scale, "fp16")
    total = np.float32(scale)  # value = stored / total
    for i, w in enumerate(ws):
        y = stack_conv(a, w, hw=hw, policy=f32, conv_strategy=cs)
        y = jnp.maximum(y, 0.0)  # fp32 epilogue
        extra = cyc_in if i == 0 else 0
        if strategy == "normalisation":
            if (i + 1) % period == 0:
                rms = float(jnp.sqrt(jnp.mean(y * y)))
                s = np.float32(1.0 / rms) if np.isfinite(rms) and rms > 0 else np.float32(1.0)
                a = round_to(y * s, "fp16")
                total = np.float32(total * s)
                c = conv_cycles(hw, cs, f32, xs, wsh) + vector_pass_cycles(n, "fp32", "fp16", 3, hw)
            else:
                a = round_to(y, "fp16")
                c = conv_cycles(hw, cs, POLICIES["mixed"], xs, wsh)
        elif strategy == "scaling_current":
            s = np.float32(pow2_scale(float(jnp.max(y)), 1.0, margin))
            a = round_to(y * s, "fp16")
            total = np.float32(total * s)
            c = (
                conv_cycles(hw, cs, f32, xs, wsh)
                + vector_pass_cycles(n, "fp32", None, 1, hw)
                + vector_pass_cycles(n, "fp32", "fp16", 2, hw)
            )
        else:
            h = amax_hist[i + 1]
            s = np.float32(_delayed(h, margin, float(total)))
            a = round_to(y * s, "fp16")  # what a scaling Fixpipe stores
            h.append(float(jnp.max(y)) / float(total))  # the fp32 result's amax, unscaled
            del h[:-history]
            total = np.float32(total * s)
            c = conv_cycles(hw, cs, POLICIES["mixed"], xs, wsh) + vector_pass_cycles(n, "fp16", None, 1, hw)
        cyc.append(c + extra)
        scales.append(float(total))
        outs.append(np.asarray(a).astype(np.float64) / np.float64(total))
    return StackRun(strategy, outs, cyc, scales)


def _delayed(hist: list[float], margin: int, total: float) -> float:
    """This layer's scale from the history of its unscaled amax: the result arrives multiplied
    by ``total`` (the scales so far), so its expected amax is max(history) * total; 1 with no
    finite history (the first iteration runs unscaled, as the FP8 recipe's first step does)."""
    seen = [v for v in hist if np.isfinite(v) and v > 0]  # an overflowed iteration teaches nothing
    if not seen:
        return 1.0
    return pow2_scale(max(seen) * total, 1.0, margin)


__all__ = [
    "POLICIES",
    "STRATEGIES",
    "StackRun",
    "StackSpec",
    "conv",
    "conv3x3_ref",
    "conv_cycles",
    "conv_fn",
    "conv_plan",
    "pow2_scale",
    "reference",
    "run_strategy",
    "stack_conv",
    "vector_pass_cycles",
]

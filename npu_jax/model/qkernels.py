"""Kernel adapters of a quantised model's layers (:mod:`npu_jax.model.quant`), beside
:mod:`npu_jax.model.kernels`' and with the same signatures.

* qconv / qgemm, run: the int8 Cube kernel on the emulator (``npu_jax.conv2d`` / ``npu_jax.matmul``
  with ``Policy(operand="int8", output="int32")``: the exact int32 sums), the input padded with its
  zero point beforehand, then the layer's int32 bias (``QSpec.bias32``: the model's bias minus
  ``x_zp * sum(w_q)``) added to the accumulator and :func:`npu_jax.requantize` (int8 out, clamped for a
  ReLU / Clip the graph had) or the dequantisation to fp16 (float out).
* qconv / qgemm, estimate: the kernel the chip would deploy, priced like any conv / GEMM under
  ``Policy(operand="int8", output=int8 | fp16 | int32)``: the requantisation in the Fixpipe (910B) or
  the L0C -> UB conversion (310P), the zero-point padding in Load3D. Its cycles therefore differ from the
  run's, which writes int32 and pads explicitly to compute the values with the public calls.
* quantize / dequantize: ONNX's QuantizeLinear / DequantizeLinear formulas in jnp; no kernel is
  priced (on the chip the conversion rides in the neighbouring vector kernel's load or store).
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from npu_jax.api.conv import conv2d
from npu_jax.api.gemm import matmul
from npu_jax.core.buffers import DTYPES
from npu_jax.core.policy import Policy
from npu_jax.core.quant import requantize, to_int8
from npu_jax.mapping.epilogue import int8_chain_fuses
from npu_jax.model.kernels import Setting, _vector_cost, conv_flops, estimate_conv, estimate_gemm
from npu_jax.model.plan import Layer
from npu_jax.model.report import KernelCost

INT32 = Policy(operand="int8", output="int32")


def int8_setting(s: Setting, fmt: str) -> Setting:
    """``s`` with int8 operands and ``fmt`` (int8, fp16 or int32) out of the accumulator."""
    return dataclasses.replace(s, policy=Policy(operand="int8", output=fmt))


def float_setting(s: Setting) -> Setting:
    """The setting of a quantised model's float layers: ``s``, or the default policy when ``s`` asks
    for int8 operands (vector kernels compute in a float format)."""
    return dataclasses.replace(s, policy=Policy()) if s.policy.quantised else s


def _cube_layer(layer: Layer, op: str) -> Layer:
    """The int8 layer as a plain conv / gemm layer with no chain, for the pricing of kernels.py."""
    return dataclasses.replace(layer, op=op, steps=(), bias=None)


def _finish(acc, q, axis: int):
    """The int32 accumulator to the layer's output: bias, then requantise (and clamp) or dequantise."""
    if q.out == "int32":
        return acc
    shape = [1] * acc.ndim
    shape[axis] = -1
    acc = acc + jnp.asarray(q.bias32(0 if acc.ndim == 4 else 1)).reshape(shape)
    if q.out == "float":
        return requantize(acc, q.scale(), 0, "fp16", axis=axis)
    y = requantize(acc, q.scale(), int(q.y_zp), "int8", axis=axis)
    if q.lo > -128 or q.hi < 127:
        y = jnp.clip(y, q.lo, q.hi).astype(jnp.int8)
    return y


# ---- int8 conv ------------------------------------------------------------------------------------------
def estimate_qconv(layer: Layer, shapes, s: Setting, cache: dict, l2=None):
    """An int8 QDQ conv: priced as the layer schedule prices it, whatever the schedule (``l2``)
    leaves in L2 (its run goes through ``npu_jax.conv2d``, which takes nothing resident)."""
    q = layer.attrs["q"]
    return estimate_conv(_cube_layer(layer, "conv"), shapes, int8_setting(s, q.fmt()), cache)


def run_qconv(layer: Layer, inputs, s: Setting, cache: dict, l2=None):
    q, a = layer.attrs["q"], layer.attrs
    x = jnp.asarray(inputs[0]).astype(jnp.int8)
    pads = a["pads"]
    if q.x_zp != 0 and any(v for p in pads for v in p):  # the padding holds the zero point, not 0
        x = jnp.pad(x, ((0, 0), (0, 0), pads[0], pads[1]), constant_values=np.int8(q.x_zp))
        pads = ((0, 0), (0, 0))
    acc, rep = conv2d(
        x,
        jnp.asarray(layer.weight),
        a["stride"],
        pads,
        a["dilation"],
        strategy=s.strategy,
        hw=s.hw,
        policy=INT32,
        groups=a["groups"],
        checks=s.checks,
    )
    kc = KernelCost.of("conv", rep, flops=conv_flops(layer, inputs[0].shape, acc.shape))
    by = "chooser (int32 out" + (", input padded with its zero point)" if pads != a["pads"] else ")")
    return _finish(acc, q, 1), [kc], (None, by)


# ---- int8 matmul ----------------------------------------------------------------------------------------
def estimate_qgemm(layer: Layer, shapes, s: Setting, cache: dict, l2=None):
    q = layer.attrs["q"]
    return estimate_gemm(_cube_layer(layer, "gemm"), shapes, int8_setting(s, q.fmt()), cache)


def run_qgemm(layer: Layer, inputs, s: Setting, cache: dict, l2=None):
    q = layer.attrs["q"]
    a = jnp.asarray(inputs[0]).astype(jnp.int8)
    m, k = a.shape
    acc, rep = matmul(a, jnp.asarray(layer.weight), hw=s.hw, policy=INT32, checks=s.checks)
    kc = KernelCost.of("gemm", rep, flops=2 * m * k * layer.weight.shape[1])
    return _finish(acc, q, 1), [kc], (None, "default_tiling (int32 out)")


# ---- the conversions -------------------------------------------------------------------------------------
def quantize(x, scale: float, zp: int):
    """ONNX QuantizeLinear into the int8 domain: ``x / scale`` rounded half to even, plus the zero
    point, saturated."""
    return to_int8(jnp.asarray(x, jnp.float32) / jnp.float32(scale), int(zp))


def dequantize(q, scale: float, zp: int, fmt: str):
    """ONNX DequantizeLinear, ``(q - zp) * scale`` in fp32, stored in ``fmt``."""
    v = (jnp.asarray(q).astype(jnp.int32) - int(zp)).astype(jnp.float32) * jnp.float32(scale)
    return v.astype(DTYPES[fmt])


def no_kernel(layer: Layer, shapes, s: Setting, cache: dict, l2=None):
    return [], (None, "conversion")


def run_quantize(layer: Layer, inputs, s: Setting, cache: dict, l2=None):
    return quantize(inputs[0], layer.attrs["scale"], layer.attrs["zp"]), [], (None, "conversion")


def run_dequantize(layer: Layer, inputs, s: Setting, cache: dict, l2=None):
    fmt = float_setting(s).policy.output
    return dequantize(inputs[0], layer.attrs["scale"], layer.attrs["zp"], fmt), [], (None, "conversion")


# ---- a float network priced as int8 -----------------------------------------------------------------------
# the leading steps an int8 kernel's way out carries: the bias as int32 in the accumulator, ReLU and
# clipped ReLU as the int8 output's clamp
CARRIED = ("bias", "relu", "clipped_relu")


def estimate_as_int8(layer: Layer, shapes, s: Setting, cache: dict, l2=None):
    """A float conv / GEMM under an int8 policy: the int8 Cube kernel (``s.policy``'s output; fp16
    when a vector kernel follows), its bias and leading ReLU / clipped ReLU carried by the
    requantisation, and the rest of the chain (a residual add and what follows it, a leaky ReLU) in a
    vector kernel in fp16 after it -- or, on a coupled chip (910 / 310P) with ``s.fused``, a conv's
    residual chain fused after its dequantisation, in UB (the vendor's conv + dequant + vadd + ReLU
    kernel; :func:`npu_jax.mapping.epilogue.int8_chain_fuses`), its output fp16."""
    k = 0
    while k < len(layer.steps) and layer.steps[k].op in CARRIED:
        k += 1
    rest = layer.steps[k:]
    fmt = "fp16" if rest and s.policy.output != "int32" else s.policy.output
    op = "conv" if layer.op == "conv" else "gemm"
    s16 = int8_setting(s, "fp16")
    if op == "conv" and rest and int8_chain_fuses(rest, s.hw, s16.policy, s.fused):
        fused = dataclasses.replace(layer, steps=rest, bias=None)
        return estimate_conv(fused, shapes, s16, cache, l2=l2)
    cube = estimate_conv if op == "conv" else estimate_gemm
    kernels, tiling = cube(_cube_layer(layer, op), shapes, int8_setting(s, fmt), cache, l2=l2)
    if rest:
        y = shapes[0]
        if op == "conv":
            kh, kw = layer.weight.shape[2:]
            a = layer.attrs
            ho = [
                (y[2 + i] + sum(a["pads"][i]) - a["dilation"][i] * ((kh, kw)[i] - 1) - 1) // a["stride"][i]
                + 1
                for i in range(2)
            ]
            rows, cols = y[0] * ho[0] * ho[1], layer.weight.shape[0]
        else:
            rows, cols = y[0], layer.weight.shape[1]
        # the residual and the bias where the schedule left them (the Cube kernel's fp16 output is
        # not taken as resident here, as before the schedules)
        resident = tuple({"res": "res", "row": "bias"}[r] for r in (l2 or ()) if r in ("res", "row"))
        kernels = [
            *kernels,
            _vector_cost("eltwise", rest, rows, cols, "fp16", "fp16", float_setting(s), cache, resident),
        ]
    return kernels, tiling


QADAPTERS = {
    "qconv": (estimate_qconv, run_qconv),
    "qgemm": (estimate_qgemm, run_qgemm),
    "quantize": (no_kernel, run_quantize),
    "dequantize": (no_kernel, run_dequantize),
}
CONVERSIONS = ("quantize", "dequantize")

__all__ = [
    "CONVERSIONS",
    "QADAPTERS",
    "estimate_as_int8",
    "dequantize",
    "float_setting",
    "int8_setting",
    "quantize",
]

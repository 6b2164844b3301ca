"""The vendor's high-level normalisation and activation calls, written in asc's basic calls: LayerNorm,
RmsNorm, Gelu, FasterGelu, Silu, Swish, Sigmoid, Tanh, and the math library's Exp and Log.

Each issues the instructions the vendor's implementation is built of, so its values follow those
instructions and its cost is theirs. Formulas are the vendor's pages' (asc-devkit
``docs/zh/api/SIMD-API/高阶API``; the activations' from its implementation's comments): ``gelu(x) = x /
(1 + e^-y)``, ``y = 1.5957691 (x + 0.044715 x^3)``; ``fast_gelu(x) = x / (1 + e^(-1.702 x))``;
``silu(x) = x / (1 + e^-x)``; LayerNorm ``(x - mean) * exp(-0.5 ln(var + eps)) * gamma + beta`` with the
variance as an output; RmsNorm ``x / sqrt(mean(x^2) + eps) * gamma``. Half data is computed in float.
"""

from __future__ import annotations

import dataclasses
import math

from npu_jax.asc import runtime, vec
from npu_jax.asc.operands import static_int
from npu_jax.asc.rows import (
    Tmp,
    check_rows,
    floats_of,
    row_chunks,
    rows_apply,
    rows_reduce,
    rows_spread,
    rows_tmp_bytes,
    split_tmp,
    store_floats,
)
from npu_jax.asc.runtime import AscError
from npu_jax.asc.tensors import LocalTensor
from npu_jax.asc.types import BinaryRepeatParams


@dataclasses.dataclass
class LayerNormTiling:
    """The [B, S, H] LayerNorm's shape (the vendor's ``LayerNormTiling`` carries it among its fields)."""

    b_length: int = 1
    s_length: int = 1
    h_length: int = 0
    original_h_length: int = 0


@dataclasses.dataclass
class RmsNormTiling:
    """The [B, S, H] RmsNorm's shape (the vendor's ``RmsNormTiling`` carries it among its fields)."""

    b_length: int = 1
    s_length: int = 1
    h_length: int = 0
    original_h_length: int = 0


# ---- LayerNorm, RmsNorm ---------------------------------------------------------------------------
def _norm_shape(call, tiling) -> tuple[int, int]:
    if tiling is None or not getattr(tiling, "h_length", 0):
        raise AscError(
            f"asc.{call} at {runtime.where()}: give the shape as asc.{type(tiling).__name__ if tiling else 'LayerNormTiling'}(b_length, s_length, h_length)."
        )
    return int(tiling.b_length) * int(tiling.s_length), int(tiling.h_length)


def _gamma_rows(op, dst: LocalTensor, src: LocalTensor, g: LocalTensor, m: int, k: int) -> None:
    """dst[i, :] = src[i, :] op g[:] for every row (g read again each row: a repeat stride of 0)."""
    lanes, per = 64, 8
    for r0, n in row_chunks(m):
        for c in range(math.ceil(k / lanes)):
            o = r0 * k + c * lanes
            op(
                dst[o:],
                src[o:],
                g[c * lanes :],
                min(lanes, k - c * lanes),
                n,
                BinaryRepeatParams(1, 1, 1, k // per, k // per, 0),
            )


def layer_norm(output, output_mean, output_variance, input_x, gamma, beta, *args, **kwargs) -> None:
    """``LayerNorm(output, outputMean, outputVariance, inputX, gamma, beta[, sharedTmpBuffer], epsilon,
    tiling)``: over H of [B, S, H]: ``mean = sum(x / H)``, ``var = sum((x - mean)^2 / H)``, ``output =
    (x - mean) * exp(-0.5 ln(var + eps)) * gamma + beta`` (the vendor's steps: Muls, ReduceSum, Adds, Ln,
    Muls, Exp); mean and variance [B * S]."""
    tmp_buf, rest = split_tmp(args)
    eps = kwargs.get("epsilon", rest[0] if rest else None)
    tiling = kwargs.get("tiling", rest[1] if len(rest) > 1 else None)
    m, k = _norm_shape("layer_norm", tiling)
    check_rows("layer_norm", m, k, input_x, output)
    tmp = Tmp(tmp_buf, rows_tmp_bytes(m, k, input_x.dtype.itemsize) + 2 * m * k * 4 + 2 * k * 4, "layer_norm")
    x = floats_of(input_x, m * k, tmp)
    gf, bf = floats_of(gamma, k, tmp), floats_of(beta, k, tmp)
    rows8 = math.ceil(m / 8) * 8
    vals, blocks = tmp.take(rows8), tmp.take(rows8 * 8)
    t = tmp.take(m * k)
    vec.muls(t, x, 1.0 / k, m * k)
    rows_reduce("sum", vals, t, m, k, tmp)
    store_floats(output_mean, vals, m)
    rows_spread(blocks, vals, m)
    rows_apply(vec.sub, t, x, blocks, m, k)  # x - mean
    d = tmp.take(m * k)
    vec.mul(d, t, t, m * k)
    vec.muls(d, d, 1.0 / k, m * k)
    rows_reduce("sum", vals, d, m, k, tmp)
    store_floats(output_variance, vals, m)
    vec.adds(vals, vals, float(eps), m)
    vec.ln(vals, vals, m)
    vec.muls(vals, vals, -0.5, m)
    vec.exp(vals, vals, m)
    rows_spread(blocks, vals, m)
    rows_apply(vec.mul, t, t, blocks, m, k)
    _gamma_rows(vec.mul, t, t, gf, m, k)
    _gamma_rows(vec.add, t, t, bf, m, k)
    store_floats(output, t, m * k)


def rms_norm(dst, src, gamma, *args, **kwargs) -> None:
    """``RmsNorm(dst, src, gamma[, sharedTmpBuffer], epsilon, tiling)``: ``dst = x / sqrt(mean(x^2) +
    eps) * gamma`` over H of [B, S, H] (rstd as the vendor's ``exp(-0.5 ln(.))``)."""
    tmp_buf, rest = split_tmp(args)
    eps = kwargs.get("epsilon", rest[0] if rest else None)
    tiling = kwargs.get("tiling", rest[1] if len(rest) > 1 else None)
    m, k = _norm_shape("rms_norm", tiling)
    check_rows("rms_norm", m, k, src, dst)
    tmp = Tmp(tmp_buf, rows_tmp_bytes(m, k, src.dtype.itemsize) + m * k * 4 + k * 4, "rms_norm")
    x = floats_of(src, m * k, tmp)
    gf = floats_of(gamma, k, tmp)
    rows8 = math.ceil(m / 8) * 8
    vals, blocks = tmp.take(rows8), tmp.take(rows8 * 8)
    t = tmp.take(m * k)
    vec.mul(t, x, x, m * k)
    vec.muls(t, t, 1.0 / k, m * k)
    rows_reduce("sum", vals, t, m, k, tmp)
    vec.adds(vals, vals, float(eps), m)
    vec.ln(vals, vals, m)
    vec.muls(vals, vals, -0.5, m)
    vec.exp(vals, vals, m)
    rows_spread(blocks, vals, m)
    rows_apply(vec.mul, t, x, blocks, m, k)
    _gamma_rows(vec.mul, t, t, gf, m, k)
    store_floats(dst, t, m * k)


# ---- activations and the math library ----------------------------------------------------------------
def _unary_call(call: str, dst: LocalTensor, src: LocalTensor, args, kwargs, steps: int):
    """(tmp, x float, y float, n) of an element-wise high-level call (count last, or data_size=)."""
    tmp_buf, rest = split_tmp(list(args))
    n = kwargs.get("data_size", kwargs.get("cal_count", kwargs.get("count", rest[0] if rest else dst.length)))
    n = static_int(n, call, "count")
    tmp = Tmp(tmp_buf, (steps + 2) * (n * 4 + 32), call)
    x = floats_of(src, n, tmp)
    y = dst if dst.dtype.fmt == "fp32" and dst is not src else tmp.take(n)
    return tmp, x, y, n


def _sigmoid_into(y, x, n, tmp, scale: float = -1.0):
    """y = x / (1 + e^(scale * x)) with scale < 0, i.e. x * sigmoid(-scale * x): Muls, Exp, Adds, Div."""
    t = tmp.take(n)
    vec.muls(t, x, scale, n)
    vec.exp(t, t, n)
    vec.adds(t, t, 1.0, n)
    vec.div(y, x, t, n)


def gelu(dst: LocalTensor, src: LocalTensor, *args, **kwargs) -> None:
    """``Gelu(dst, src[, sharedTmpBuffer], dataSize)``: the tanh form, ``x / (1 + e^-y)``, ``y =
    1.5957691216057308 (x + 0.044715 x^3)`` (the vendor's)."""
    tmp, x, y, n = _unary_call("gelu", dst, src, args, kwargs, 3)
    t = tmp.take(n)
    vec.mul(t, x, x, n)
    vec.muls(t, t, 0.044715, n)
    vec.adds(t, t, 1.0, n)
    vec.mul(t, t, x, n)
    vec.muls(t, t, -1.5957691216057308, n)  # -y
    vec.exp(t, t, n)
    vec.adds(t, t, 1.0, n)
    vec.div(y, x, t, n)
    if y is not dst:
        store_floats(dst, y, n)


def faster_gelu(dst: LocalTensor, src: LocalTensor, *args, **kwargs) -> None:
    """``FasterGelu(dst, src[, sharedTmpBuffer], dataSize)``: ``x / (1 + e^(-1.702 x))``."""
    tmp, x, y, n = _unary_call("faster_gelu", dst, src, args, kwargs, 2)
    _sigmoid_into(y, x, n, tmp, -1.702)
    if y is not dst:
        store_floats(dst, y, n)


def silu(dst: LocalTensor, src: LocalTensor, *args, **kwargs) -> None:
    """``Silu(dst, src, dataSize)``: ``x / (1 + e^-x)``."""
    tmp, x, y, n = _unary_call("silu", dst, src, args, kwargs, 2)
    _sigmoid_into(y, x, n, tmp, -1.0)
    if y is not dst:
        store_floats(dst, y, n)


def swish(dst: LocalTensor, src: LocalTensor, data_size: int, scalar_value) -> None:
    """``Swish(dst, src, dataSize, beta)``: ``x / (1 + e^(-beta x))``."""
    tmp, x, y, n = _unary_call("swish", dst, src, (data_size,), {}, 2)
    _sigmoid_into(y, x, n, tmp, -float(scalar_value))
    if y is not dst:
        store_floats(dst, y, n)


def sigmoid(dst: LocalTensor, src: LocalTensor, *args, **kwargs) -> None:
    """``Sigmoid(dst, src[, sharedTmpBuffer][, calCount])``: ``1 / (1 + e^-x)``."""
    tmp, x, y, n = _unary_call("sigmoid", dst, src, args, kwargs, 2)
    t = tmp.take(n)
    vec.muls(t, x, -1.0, n)
    vec.exp(t, t, n)
    vec.adds(t, t, 1.0, n)
    vec.reciprocal(y, t, n)
    if y is not dst:
        store_floats(dst, y, n)


def tanh(dst: LocalTensor, src: LocalTensor, *args, **kwargs) -> None:
    """``Tanh(dst, src[, sharedTmpBuffer][, calCount])``: ``(e^2x - 1) / (e^2x + 1)``, x clipped to
    [-9, 9] first (where tanh is +-1 in float) so that e^2x stays finite."""
    tmp, x, y, n = _unary_call("tanh", dst, src, args, kwargs, 3)
    t, u = tmp.take(n), tmp.take(n)
    vec.mins(t, x, 9.0, n)
    vec.maxs(t, t, -9.0, n)
    vec.muls(t, t, 2.0, n)
    vec.exp(t, t, n)
    vec.adds(u, t, 1.0, n)
    vec.adds(t, t, -1.0, n)
    vec.div(y, t, u, n)
    if y is not dst:
        store_floats(dst, y, n)


def exp_math(
    dst: LocalTensor, src: LocalTensor, count: int, taylor_expand_level: int = 0, *args, **kwargs
) -> None:
    """The math library's ``Exp<T, taylorExpandLevel>(dst, src[, tmp], calCount)``. With level 0 it is the
    Exp instruction; with a Taylor level the vendor splits x into floor(x) and a fraction summed as a
    series; the emulator issues the instruction for both (the series' own error is not modelled)."""
    vec.exp(dst, src, count)


def log(dst: LocalTensor, src: LocalTensor, *args, **kwargs) -> None:
    """``Log(dst, src[, calCount])``: the natural logarithm (the Ln instruction)."""
    n = args[0] if args else kwargs.get("cal_count", kwargs.get("count", dst.length))
    vec.ln(dst, src, n)

"""Leaving an int32 accumulator: the dequantisation (int32 -> fp16) and requantisation (int32 -> int8).

The Cube sums int8 x int8 products exactly into int32 in L0C. On the way out the chip scales them:
the Fixpipe's quantisation stage on the 910B (``QuantMode_t::DEQF16`` / ``VDEQF16`` to half, ``REQ8``
/ ``VREQ8`` to int8, a scalar or a per-channel vector of scales), the vector unit on the 910 / 310P
(the accumulator moved to UB as int32, converted, multiplied by the scale row, converted again). Both
compute the same thing, written once here:

1. the int32 value converted to fp32 (round to nearest even: exact below 2^24);
2. multiplied by the fp32 scale (per tensor, or per output channel), rounded to fp32;
3. a fused activation (ReLU, leaky ReLU, a clip), in fp32;
4. to fp16: converted, nearest even (the policy's overflow mode); to int8: rounded to the nearest
   integer (ties to even), the offset (the output's zero point) added, saturated to [-128, 127] --
   ONNX QuantizeLinear's order (round, then add the zero point, then saturate), which onnxruntime's
   QLinearConv requantisation follows.

The 910B's Fixpipe packs the scale into a uint64 with the offset beside it; its internal width is
not published, so the emulator assumes the fp32 arithmetic above (``docs/precision.md``).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from npu_jax.core.rounding import round_to
from npu_jax.errors import InputError

INT8_MIN, INT8_MAX = -128, 127
QUANT_OUTPUTS = ("fp16", "int8")
INT_RANGES = {
    "int8": (INT8_MIN, INT8_MAX),
    "int32": (-(2**31), 2**31 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint8": (0, 255),
    "uint16": (0, 2**16 - 1),
}
_ROUND = {
    "nearest_even": jnp.round,  # ties to even
    "toward_zero": jnp.trunc,
    "up": jnp.ceil,
    "down": jnp.floor,
    "away": lambda v: jnp.sign(v) * jnp.floor(jnp.abs(v) + 0.5),
}


def to_int(x, fmt: str, mode: str = "nearest_even"):
    """fp32 ``x`` converted to the integer format ``fmt`` (``int8``, ``int32``) as the vector unit's
    ``Cast`` does: rounded by ``mode`` (``RoundMode``: RINT nearest-even, TRUNC, CEIL, FLOOR, ROUND
    away), saturated to the format's range; NaN gives 0."""
    if mode not in _ROUND:
        raise ValueError(f"a cast to {fmt} rounds by one of {tuple(_ROUND)}, got {mode!r}.")
    lo, hi = INT_RANGES[fmt]
    r = _ROUND[mode](jnp.asarray(x, jnp.float32))
    r = jnp.clip(jnp.where(jnp.isnan(r), 0.0, r), lo, 2.0**31)
    # fp32 has no 2^31 - 1: a value at 2^31 saturates to the int32 maximum before the conversion
    i = jnp.where(r >= 2.0**31, 0, r).astype(jnp.int32)
    i = jnp.where(r >= 2.0**31, hi, jnp.minimum(i, hi))
    return i.astype(
        {"int8": jnp.int8, "int16": jnp.int16, "uint8": jnp.uint8, "uint16": jnp.uint16}.get(fmt, jnp.int32)
    )


def to_int8(x, offset=0):
    """fp32 ``x`` to int8 as the chip's conversion does: nearest integer, ties to even, then
    ``offset`` added, then saturated to [-128, 127]; NaN gives ``offset`` (saturated)."""
    # the rounding is Cast's (to_int); held near the int8 range first, so adding the offset cannot wrap
    r = jnp.clip(to_int(x, "int32"), 2 * INT8_MIN, 2 * INT8_MAX + 1) + jnp.asarray(offset, jnp.int32)
    return jnp.clip(r, INT8_MIN, INT8_MAX).astype(jnp.int8)


def _scale_row(scale, n: int, axis: int, ndim: int):
    """``scale`` (a scalar or ``n`` values) as fp32, broadcastable along ``axis`` of an ``ndim`` array."""
    s = jnp.asarray(scale, jnp.float32)
    if s.ndim == 0:
        return s
    if s.ndim != 1 or s.shape[0] != n:
        raise InputError(
            f"requantize: scale must be a scalar or one value per output channel ({n}), got shape "
            f"{tuple(s.shape)}."
        )
    shape = [1] * ndim
    shape[axis] = n
    return s.reshape(shape)


def activate(x, activation: str | None, alpha: float = 0.0, clip: float | None = None):
    """One fused activation on fp32 values, then the clip: ``relu``, ``leaky_relu`` (slope ``alpha``)
    or None. The Fixpipe's (and the deq conversion's) activation stage, written once."""
    if activation == "relu":
        x = jnp.maximum(x, 0.0)
    elif activation == "leaky_relu":
        x = jnp.where(x >= 0, x, x * jnp.float32(alpha))
    elif activation is not None:
        raise ValueError(f"activation must be None, 'relu' or 'leaky_relu', got {activation!r}.")
    if clip is not None:
        x = jnp.minimum(x, jnp.float32(clip))
    return x


def requantize(
    acc,
    scale,
    offset=0,
    fmt: str = "int8",
    *,
    axis: int = -1,
    overflow: str = "saturate",
    activation: str | None = None,
    alpha: float = 0.0,
    clip: float | None = None,
):
    """Scale int32 accumulators on their way out of L0C, as the chip does (see the module docstring).

    Args:
        acc: int32 accumulators (the Cube's exact sums), any shape.
        scale: the multiplier, fp32: a scalar (per tensor) or one value per output channel along
            ``axis``. For an int8 network: ``x_scale * w_scale[k] / y_scale`` to int8,
            ``x_scale * w_scale[k]`` to fp16.
        offset: the int8 output's zero point (an int); must be 0 for fp16.
        fmt: ``"int8"`` (requantise) or ``"fp16"`` (dequantise).
        axis: the output-channel axis of ``acc`` a per-channel ``scale`` runs along (-1 for a
            matmul's (M, N) and NHWC; 1 for NCHW).
        overflow: fp16's overflow past 65504: ``saturate`` (the chip's default) or ``inf``.
        activation, alpha, clip: a fused activation (:func:`activate`) on the scaled fp32 value, before
            the conversion: relu / leaky_relu / a clip of the real value, in the output's units
            (a ReLU of an int8 output is a clamp at its zero point).

    Example:
        >>> import numpy as np
        >>> requantize(np.array([[100, -7, 5]], np.int32), np.float32(0.05), offset=3)
        Array([[ 8,  3,  3]], dtype=int8)
    """
    if fmt not in QUANT_OUTPUTS:
        raise InputError(f"requantize: fmt must be one of {QUANT_OUTPUTS}, got {fmt!r}.")
    acc = jnp.asarray(acc)
    if acc.dtype != jnp.int32:
        raise InputError(f"requantize: acc must be int32 accumulators, got {acc.dtype}.")
    if not isinstance(offset, int | np.integer) or not INT8_MIN <= int(offset) <= INT8_MAX:
        raise InputError(f"requantize: offset must be an int in [-128, 127], got {offset!r}.")
    if fmt != "int8" and offset != 0:
        raise InputError(
            f"requantize: an offset (zero point) applies to int8 outputs only; got {offset} for fp16."
        )
    ax = axis % acc.ndim if acc.ndim else 0
    v = acc.astype(jnp.float32) * _scale_row(scale, acc.shape[ax] if acc.ndim else 1, ax, acc.ndim)
    v = activate(v, activation, alpha, clip)
    if fmt == "int8":
        return to_int8(v, int(offset))
    return round_to(v, "fp16", "nearest_even", overflow=overflow)


__all__ = [
    "INT8_MAX",
    "INT8_MIN",
    "INT_RANGES",
    "QUANT_OUTPUTS",
    "requantize",
    "to_int",
    "to_int8",
]

"""int8 / uint8 quantisation with the semantics of ONNX QuantizeLinear / DequantizeLinear.

``q = saturate(round_half_to_even(x / scale) + zero_point)`` to [-128, 127] (int8) or [0, 255]
(uint8), and back ``x' = (q - zero_point) * scale``, both in float32 as onnxruntime's CPU kernels
compute them. When no scale is given it is derived from ``x``'s range by onnxruntime's
``compute_scale_zp`` (``quantization/quant_utils.py``), rule for rule:

* the range is widened to include 0 (so 0 is exactly representable);
* symmetric: the range becomes [-max|x|, max|x|] over the *restricted* int8 range [-127, 127], so
  ``scale = max|x| / 127`` and ``zero_point = 0`` (uint8: [0, 255], ``scale = 2 max|x| / 255``,
  ``zero_point = 128``);
* asymmetric: ``scale = (max - min) / 255`` and ``zero_point = round(qmin - min / scale)``
  (``round(-min / scale) - 128`` for int8), with the quotient taken in float64 and the scale stored
  in float32;
* a range whose scale would be below float32's smallest normal (all-zero data) gets
  ``scale = 1.0, zero_point = 0``.

That rule is written once, in numpy (:func:`scale_zero_point`), and runs under ``jax.jit`` through
``jax.pure_callback``: jitted and eager calls give the same bits, and both give onnxruntime's.

Example:
    >>> import numpy as np
    >>> from precision import quantize
    >>> r = quantize(np.array([-1.0, 0.25, 0.5], np.float32))
    >>> r.q.tolist(), float(r.scale), int(r.zero_point)
    ([-127, 32, 64], 0.007874015718698502, 0)
    >>> [round(float(v), 4) for v in r.dequantize()]
    [-1.0, 0.252, 0.5039]
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from npu_jax.errors import InputError, InputTypeError, check_choice, check_int

QTYPES = {"int8": (-128, 127), "uint8": (0, 255)}
SCHEMES = ("symmetric", "asymmetric")
GRANULARITIES = ("per_tensor", "per_channel")
_NP_DTYPE = {"int8": np.int8, "uint8": np.uint8}


def qrange(dtype: str, symmetric: bool) -> tuple[int, int]:
    """The integer range the scale maps onto: onnxruntime restricts symmetric int8 to [-127, 127]."""
    return (-127, 127) if symmetric and dtype == "int8" else QTYPES[dtype]


def scale_zero_point(rmin, rmax, *, symmetric: bool, dtype: str = "int8"):
    """onnxruntime's ``compute_scale_zp`` for float32 ranges, elementwise over channels.

    Returns ``(scale float32, zero_point int8/uint8)`` with ``rmin``'s shape.

    Example:
        >>> s, z = scale_zero_point(np.float32(-1.0), np.float32(3.0), symmetric=False)
        >>> float(s), int(z)
        (0.01568627543747425, -64)
    """
    qmin, qmax = qrange(dtype, symmetric)
    rmin = np.minimum(np.asarray(rmin, np.float32), np.float32(0))
    rmax = np.maximum(np.asarray(rmax, np.float32), np.float32(0))
    if symmetric:
        absmax = np.maximum(np.abs(rmin), np.abs(rmax))
        rmin, rmax = -absmax, absmax
    scale64 = (rmax.astype(np.float64) - rmin.astype(np.float64)) / float(qmax - qmin)
    degenerate = scale64 < np.finfo(np.float32).tiny
    if symmetric:
        zp = np.full(scale64.shape, np.round((qmin + qmax) / 2.0))
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            zp = np.round(qmin - rmin.astype(np.float64) / scale64)
    scale = np.where(degenerate, np.float32(1.0), scale64.astype(np.float32)).astype(np.float32)
    zp = np.where(degenerate, 0.0, zp).astype(_NP_DTYPE[dtype])
    return scale, zp


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["q", "scale", "zero_point"],
    meta_fields=["axis", "dtype"],
)
@dataclasses.dataclass(frozen=True)
class QuantizedTensor:
    """A quantised tensor: ``x ~ (q - zero_point) * scale``; a pytree, so jit may return it.

    Attributes:
        q: the integers, ``x``'s shape, int8 or uint8.
        scale: float32, shape () (per tensor) or (C,) (per channel, C = ``x.shape[axis]``).
        zero_point: int8 / uint8, ``scale``'s shape.
        axis: the channel axis (non-negative), None per tensor.
        dtype: "int8" or "uint8".
    """

    q: jax.Array
    scale: jax.Array
    zero_point: jax.Array
    axis: int | None
    dtype: str

    def dequantize(self) -> jax.Array:
        """``(q - zero_point) * scale`` in float32 (:func:`dequantize`)."""
        return dequantize(self.q, self.scale, self.zero_point, axis=self.axis)

    def bounds(self) -> tuple[jax.Array, jax.Array]:
        """The representable range ``scale * (qmin - zp)``, ``scale * (qmax - zp)``, per channel."""
        qmin, qmax = QTYPES[self.dtype]
        z = jnp.asarray(self.zero_point, jnp.int32)
        return (qmin - z).astype(jnp.float32) * self.scale, (qmax - z).astype(jnp.float32) * self.scale


def _concrete(v):
    """``v`` as a numpy array, or None when it is a tracer (values are unknown under jit)."""
    try:
        return np.asarray(v)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def _float_input(fn: str, x) -> jax.Array:
    if x is None or isinstance(x, (str, bytes, dict)):
        raise InputTypeError(f"{fn}: x must be a floating array, got {type(x).__name__}.")
    if not isinstance(x, jax.Array):
        try:
            x = np.asarray(x)
        except (TypeError, ValueError) as e:
            raise InputTypeError(f"{fn}: x must be an array-like of numbers ({e}).") from None
    dt = jnp.dtype(x.dtype)
    if not jnp.issubdtype(dt, jnp.floating):
        raise InputTypeError(
            f"{fn}: x must be a floating array (float32, float16 or bfloat16), got dtype {dt}; "
            f"cast it with x.astype(jnp.float32)."
        )
    if x.size == 0:
        raise InputError(f"{fn}: x is empty (shape {tuple(x.shape)}): there is nothing to quantise.")
    xv = _concrete(x)
    if xv is not None and not np.all(np.isfinite(xv)):
        bad = np.argwhere(~np.isfinite(xv))[0]
        raise InputError(
            f"{fn}: x must be finite, found {int(np.sum(~np.isfinite(xv)))} NaN/inf values (first "
            f"{xv[tuple(bad)]!r} at index {tuple(int(i) for i in bad)}); clean or clip x first."
        )
    return jnp.asarray(x).astype(jnp.float32)


def _axis(fn: str, axis, ndim: int) -> int:
    if ndim == 0:
        raise InputError(f"{fn}: per-channel quantisation needs an array with a channel axis, got a scalar.")
    a = check_int(fn, "axis", axis, -ndim, ndim - 1, fix=f"x has {ndim} dimensions")
    return a % ndim


def _check_params(fn: str, scale, zero_point, dtype: str, shape: tuple) -> tuple[jax.Array, jax.Array]:
    """A user's scale / zero point: shape ``shape``, scale finite and > 0, zero point in range."""
    s = jnp.asarray(scale, jnp.float32)
    if s.shape != shape:
        what = "a scalar (per_tensor)" if shape == () else f"shape {shape}: one per channel"
        raise InputError(f"{fn}: scale has shape {tuple(s.shape)}, expected {what}.")
    sv = _concrete(scale)
    if sv is not None and not np.all(np.isfinite(sv) & (sv > 0)):
        raise InputError(
            f"{fn}: scale must be finite and > 0 everywhere, got {sv.ravel()[~(np.isfinite(sv.ravel()) & (sv.ravel() > 0))][:4]!r}; "
            f"compute it with precision.calibrate(...) or leave it None."
        )
    if zero_point is None:
        return s, jnp.zeros(shape, _NP_DTYPE[dtype])
    zv = _concrete(zero_point)
    z = jnp.asarray(zero_point)
    if z.shape != shape:
        raise InputError(f"{fn}: zero_point has shape {tuple(z.shape)}, expected scale's shape {shape}.")
    if not jnp.issubdtype(z.dtype, jnp.integer):
        raise InputTypeError(f"{fn}: zero_point must be integer, got dtype {z.dtype}.")
    lo, hi = QTYPES[dtype]
    if zv is not None and (np.any(zv < lo) or np.any(zv > hi)):
        raise InputError(
            f"{fn}: zero_point must lie in [{lo}, {hi}] for {dtype}, got {zv.ravel()[:4]!r}; "
            f"use dtype='{'uint8' if dtype == 'int8' else 'int8'}' or a zero point in range."
        )
    return s, z.astype(_NP_DTYPE[dtype])


def _range_params(x: jax.Array, reduce_axes: tuple, symmetric: bool, dtype: str):
    """Scale and zero point from ``x``'s range: the reductions in jax (exact), the rule on the host."""
    rmin, rmax = jnp.min(x, axis=reduce_axes), jnp.max(x, axis=reduce_axes)
    out = (
        jax.ShapeDtypeStruct(rmin.shape, jnp.float32),
        jax.ShapeDtypeStruct(rmin.shape, _NP_DTYPE[dtype]),
    )
    rule = functools.partial(scale_zero_point, symmetric=symmetric, dtype=dtype)
    return jax.pure_callback(rule, out, rmin, rmax, vmap_method="sequential")


def _expand(v: jax.Array, axis: int | None, ndim: int) -> jax.Array:
    """A per-channel vector shaped to broadcast along ``axis`` of an ``ndim`` array."""
    if axis is None or v.ndim == 0:
        return v
    return v.reshape([-1 if d == axis else 1 for d in range(ndim)])


def quantize(
    x,
    *,
    scheme: str = "symmetric",
    granularity: str = "per_tensor",
    axis: int = 0,
    scale=None,
    zero_point=None,
    dtype: str = "int8",
) -> QuantizedTensor:
    """Quantise ``x`` as ONNX QuantizeLinear does, deriving scale and zero point if not given.

    Args:
        x: floating array (taken in float32; float64 numpy input is rounded to float32 first).
        scheme: "symmetric" (zero point 0, scale max|x| / 127) or "asymmetric" (the range
            [min, max] widened to include 0 over 255 steps). Ignored when ``scale`` is given.
        granularity: "per_tensor" (one scale) or "per_channel" (one per slice along ``axis``:
            for weights, the output-channel axis).
        axis: the channel axis for per_channel.
        scale: float32 scale (scalar, or (C,) per channel); None derives it from ``x``.
        zero_point: integer zero point, ``scale``'s shape; None means 0 when ``scale`` is given.
        dtype: "int8" or "uint8".

    Values are checked when concrete (finite ``x``, ``scale > 0``, zero point in range); under
    ``jax.jit`` only shapes and dtypes are. Works under ``jax.jit`` and ``jax.vmap``.

    Example:
        >>> import numpy as np
        >>> w = np.array([[0.5, -0.25], [2.0, 1.0]], np.float32)
        >>> r = quantize(w, granularity="per_channel", axis=0)
        >>> r.q.tolist(), r.scale.tolist()
        ([[127, -64], [127, 64]], [0.003937007859349251, 0.015748031437397003])
    """
    fn = "quantize"
    check_choice(fn, "scheme", scheme, SCHEMES)
    check_choice(fn, "granularity", granularity, GRANULARITIES)
    check_choice(fn, "dtype", dtype, tuple(QTYPES))
    x = _float_input(fn, x)
    ch = _axis(fn, axis, x.ndim) if granularity == "per_channel" else None
    shape = () if ch is None else (x.shape[ch],)
    if scale is None:
        if zero_point is not None:
            raise InputError(
                f"{fn}: zero_point={zero_point!r} was given without scale; give both, or neither to "
                f"derive them from x."
            )
        reduce_axes = tuple(d for d in range(x.ndim) if d != ch)
        s, z = _range_params(x, reduce_axes, scheme == "symmetric", dtype)
    else:
        s, z = _check_params(fn, scale, zero_point, dtype, shape)
    qmin, qmax = QTYPES[dtype]
    se, ze = _expand(s, ch, x.ndim), _expand(z.astype(jnp.float32), ch, x.ndim)
    # XLA rewrites x / broadcast(s) as x * (1 / s), which misrounds ties (onnxruntime divides): the
    # barrier hides the broadcast from that rewrite, so the quotient is IEEE's
    divisor = jax.lax.optimization_barrier(jnp.broadcast_to(se, x.shape))
    q = jnp.clip(jnp.round(x / divisor) + ze, qmin, qmax).astype(_NP_DTYPE[dtype])
    return QuantizedTensor(q=q, scale=s, zero_point=z, axis=ch, dtype=dtype)


def dequantize(q, scale, zero_point=None, *, axis: int | None = None) -> jax.Array:
    """``(q - zero_point) * scale`` in float32, as ONNX DequantizeLinear.

    Args:
        q: int8 or uint8 array.
        scale: float32 scalar, or (C,) with ``axis`` naming the channel axis of ``q``.
        zero_point: ``scale``'s shape, in ``q``'s range; None means 0.
        axis: the channel axis for a per-channel scale (None for a scalar scale).

    Example:
        >>> import numpy as np
        >>> dequantize(np.array([-128, 0, 127], np.int8), 0.5, np.int8(-128)).tolist()
        [0.0, 64.0, 127.5]
    """
    fn = "dequantize"
    if q is None or isinstance(q, (str, bytes, dict)):
        raise InputTypeError(f"{fn}: q must be an int8 or uint8 array, got {type(q).__name__}.")
    q = q if isinstance(q, jax.Array) else np.asarray(q)
    names = {np.dtype(v): k for k, v in _NP_DTYPE.items()}
    if np.dtype(q.dtype) not in names:
        raise InputTypeError(
            f"{fn}: q must be int8 or uint8 (quantize(...).q), got dtype {q.dtype}; cast it explicitly."
        )
    if q.size == 0:
        raise InputError(f"{fn}: q is empty (shape {tuple(q.shape)}).")
    dtype = names[np.dtype(q.dtype)]
    if axis is None:
        ch, shape = None, ()
    else:
        ch = _axis(fn, axis, q.ndim)
        shape = (q.shape[ch],)
    s, z = _check_params(fn, scale, zero_point, dtype, shape)
    diff = jnp.asarray(q, jnp.int32) - _expand(z.astype(jnp.int32), ch, q.ndim)
    return diff.astype(jnp.float32) * _expand(s, ch, q.ndim)


__all__ = [
    "GRANULARITIES",
    "QTYPES",
    "SCHEMES",
    "QuantizedTensor",
    "dequantize",
    "qrange",
    "quantize",
    "scale_zero_point",
]

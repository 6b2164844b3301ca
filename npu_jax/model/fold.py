"""Folding linear per-channel operations into a Conv's (or Gemm's) weights and bias, as a model
compiler does at load: BatchNormalization (inference), Mul by a constant, Add of a constant.

Each fold is computed in float64 (a chain of folds stays in float64) and :func:`finish` casts once to
float32 (the ONNX model's own precision), so the folded layer equals the unfolded ops up to that one
rounding:

    BatchNormalization:  s = gamma / sqrt(var + eps);  w' = w * s;  b' = (b - mean) * s + beta
    Mul by c:            w' = w * c;  b' = b * c
    Add of c:            b' = b + c
"""

from __future__ import annotations

import numpy as np


def per_channel(c, channels: int, axis_len: int) -> np.ndarray | None:
    """A constant as one value per output channel (float64), or None if it is not one: a scalar, a
    ``(K,)`` vector or a ``(K, 1, 1)`` / ``(1, K, 1, 1)`` tensor broadcasting along the channel axis
    of a rank-``axis_len`` activation (axis 1)."""
    c = np.asarray(c, np.float64)
    if c.size == 1:
        return np.full(channels, float(c.reshape(())))
    shape = c.shape
    # right-aligned broadcasting against (N, K, ...): the channel axis is index 1 of axis_len dims
    if len(shape) > axis_len:
        return None
    full = (1,) * (axis_len - len(shape)) + shape
    if full[1] != channels or any(v != 1 for i, v in enumerate(full) if i != 1):
        return None
    return c.reshape(channels)


def _out(w64, b64):
    return w64, b64


def finish(w, b):
    """The folded (w, b), kept in float64 through every fold, cast once to float32."""
    return np.asarray(w, np.float64).astype(np.float32), None if b is None else np.asarray(b).astype(
        np.float32
    )


def batchnorm(w, b, gamma, beta, mean, var, eps: float, axis: int = 0):
    """(w', b') with BatchNormalization folded in; ``axis``: the output-channel axis of ``w``."""
    w64, b64 = np.asarray(w, np.float64), _bias(b, np.shape(w)[axis])
    s = np.asarray(gamma, np.float64) / np.sqrt(np.asarray(var, np.float64) + float(eps))
    return _out(
        _scale_axis(w64, s, axis), (b64 - np.asarray(mean, np.float64)) * s + np.asarray(beta, np.float64)
    )


def scale(w, b, s, axis: int = 0):
    """(w', b') with a multiplication by ``s`` (one value per output channel) folded in."""
    w64, b64 = np.asarray(w, np.float64), _bias(b, np.shape(w)[axis])
    return _out(_scale_axis(w64, np.asarray(s, np.float64), axis), b64 * s)


def shift(w, b, c, axis: int = 0):
    """(w, b') with an addition of ``c`` (one value per output channel) folded into the bias."""
    return _out(np.asarray(w, np.float64), _bias(b, np.shape(w)[axis]) + np.asarray(c, np.float64))


def _bias(b, k: int) -> np.ndarray:
    return np.zeros(k, np.float64) if b is None else np.asarray(b, np.float64).reshape(k)


def _scale_axis(w64, s, axis: int):
    shape = [1] * w64.ndim
    shape[axis] = -1
    return w64 * s.reshape(shape)


__all__ = ["batchnorm", "finish", "per_channel", "scale", "shift"]

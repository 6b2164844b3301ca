"""Calibration: the int8 range of a tensor from sample data, as onnxruntime's and TensorRT's calibrators.

``calibrate(samples, method)`` runs on the host (numpy) and returns a :class:`Calibration` with the
clipping range ``[low, high]`` and the scale and zero point :mod:`precision.quantization` takes.

* **minmax** (onnxruntime's MinMaxCalibrater): ``[min, max]``; symmetric: ``[-max|x|, max|x|]``.
* **percentile** (onnxruntime's PercentileCalibrater, TensorRT's percentile): symmetric, a
  ``num_bins`` histogram of ``|x|`` over ``[min|x|, max|x|]``, the threshold the lower edge of the bin
  where the CDF reaches ``percentile``; asymmetric, a histogram of ``x`` over ``[-max|x|, max|x|]``
  cut by ``(100 - percentile) / 2`` percent on each side. Thresholds are clipped to ``[min, max]``.
* **entropy** (TensorRT's KL-divergence calibration, pytorch-quantization's
  ``_compute_amax_entropy``): a ``num_bins`` histogram of ``|x|`` over ``[0, max|x|]``, its first bin
  set to the second's (so a spike of exact zeros, ReLU's, does not decide the threshold); for every
  candidate ``i >= num_quantized_bins`` bins, the reference ``p`` is the first ``i`` bins with the
  outliers added to the last, and the candidate ``q`` merges those ``i`` bins into
  ``num_quantized_bins`` (128: int8's magnitudes) and spreads each merged count evenly over its
  non-empty source bins; the threshold is the upper edge of the ``i`` with the least KL(p || q)
  (the last one on ties). Asymmetric: ``[max(-T, min), min(T, max)]``. (onnxruntime's own
  EntropyCalibrater histograms signed values and truncates ``q`` to integers; this is TensorRT's.)

Example:
    >>> import numpy as np
    >>> x = np.random.default_rng(0).standard_normal(100_000).astype(np.float32)
    >>> c = calibrate(x, "minmax")
    >>> bool(c.high == np.abs(x).max()), bool(c.low == -c.high)
    (True, True)
    >>> calibrate(x, "entropy").high < c.high
    np.True_
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from npu_jax.errors import InputError, InputTypeError, check_bool, check_choice, check_int, check_number
from precision.quantization import QTYPES, QuantizedTensor, quantize, scale_zero_point

METHODS = ("minmax", "percentile", "entropy")


@dataclasses.dataclass(frozen=True)
class Calibration:
    """A calibrated int8 range and the quantisation parameters it gives.

    Attributes:
        method: "minmax", "percentile" or "entropy".
        low, high: the clipping range (float32; shape () or (C,) per channel).
        scale, zero_point: onnxruntime's ``compute_scale_zp`` of ``[low, high]`` (float32; int8/uint8).
        symmetric: whether the range was made symmetric.
        dtype: "int8" or "uint8".
        axis: the channel axis of a per-channel calibration, None per tensor.
    """

    method: str
    low: np.ndarray
    high: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    symmetric: bool
    dtype: str
    axis: int | None

    def quantize(self, x) -> QuantizedTensor:
        """Quantise ``x`` with this calibration's scale and zero point (values outside saturate)."""
        g = "per_tensor" if self.axis is None else "per_channel"
        ax = 0 if self.axis is None else self.axis
        return quantize(
            x, granularity=g, axis=ax, scale=self.scale, zero_point=self.zero_point, dtype=self.dtype
        )


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    """KL(p || q) of two unnormalised histograms (scipy.stats.entropy's rule: inf where q = 0 < p)."""
    p = p / p.sum()
    q = q / q.sum()
    nz = p > 0
    if np.any(q[nz] == 0):
        return np.inf
    return float(np.sum(p[nz] * np.log(p[nz] / q[nz])))


def entropy_threshold(hist: np.ndarray, edges: np.ndarray, num_quantized_bins: int = 128) -> float:
    """TensorRT's KL threshold of a histogram of ``|x|`` (``edges[0] = 0``); see the module text."""
    bins = hist.astype(np.float64).copy()
    bins[0] = bins[1]
    n = bins.size
    tail = np.concatenate([np.cumsum(bins[::-1])[::-1], [0.0]])  # tail[i] = sum(bins[i:])
    best, best_i = np.inf, n
    for i in range(num_quantized_bins, n + 1):
        ref = bins[:i]
        group = (
            np.arange(i) * num_quantized_bins
        ) // i  # = np.digitize(range(i), linspace(0, i, nq + 1)) - 1
        used = ref != 0
        counts = np.bincount(group, weights=ref, minlength=num_quantized_bins)
        nonempty = np.bincount(group, weights=used, minlength=num_quantized_bins)
        q = np.where(used, counts[group] / np.maximum(nonempty[group], 1), 0.0)
        p = ref.copy()
        p[-1] += tail[i]
        if p.sum() == 0 or q.sum() == 0:
            continue
        kl = _kl(p, q)
        if kl <= best:
            best, best_i = kl, i
    return float(edges[best_i])


def _range(x: np.ndarray, method: str, symmetric: bool, percentile: float, num_bins: int, nq: int):
    """(low, high) of one flat float32 array."""
    lo, hi = x.min(), x.max()
    a = np.abs(x)
    amax = a.max()
    if method == "minmax" or amax == 0:
        return (-amax, amax) if symmetric else (lo, hi)
    if method == "percentile":
        if symmetric:
            hist, edges = np.histogram(a, bins=num_bins)
            cdf = np.cumsum(hist / hist.sum())
            t = edges.astype(np.float32)[np.searchsorted(cdf, percentile / 100.0)]
            low, high = -t, t
        else:
            hist, edges = np.histogram(x, bins=num_bins, range=(-amax, amax))
            edges = edges.astype(np.float32)
            cdf = np.cumsum(hist / hist.sum())
            cut = (100.0 - percentile) / 200.0
            low, high = edges[np.searchsorted(cdf, cut)], edges[np.searchsorted(cdf, 1.0 - cut)]
        return max(low, lo), min(high, hi)
    hist, edges = np.histogram(a, bins=num_bins, range=(0.0, float(amax)))
    t = np.float32(entropy_threshold(hist, edges, nq))
    return (-t, t) if symmetric else (max(-t, lo), min(t, hi))


def _samples(fn: str, samples, axis) -> np.ndarray:
    if samples is None or isinstance(samples, (str, bytes, dict)):
        raise InputTypeError(
            f"{fn}: samples must be an array or a list of arrays, got {type(samples).__name__}."
        )
    parts = list(samples) if isinstance(samples, (list, tuple)) else [samples]
    if axis is not None and len(parts) != 1:
        raise InputError(
            f"{fn}: a per-channel calibration (axis={axis}) takes one array (the weights), got "
            f"{len(parts)}; stack the samples into one array first."
        )
    arrs = []
    for k, p in enumerate(parts):
        try:
            a = np.asarray(p)
        except (TypeError, ValueError, jax.errors.TracerArrayConversionError) as e:
            raise InputTypeError(f"{fn}: samples[{k}] must be a concrete array of numbers ({e}).") from None
        if a.dtype.kind != "f" and a.dtype.kind not in "iu":
            raise InputTypeError(f"{fn}: samples[{k}] must be a real numeric array, got dtype {a.dtype}.")
        arrs.append(a.astype(np.float32))
    if any(a.size == 0 for a in arrs):
        raise InputError(f"{fn}: samples contain an empty array: there is no range to calibrate.")
    for k, a in enumerate(arrs):
        if not np.all(np.isfinite(a)):
            raise InputError(
                f"{fn}: samples[{k}] has {int(np.sum(~np.isfinite(a)))} NaN/inf values; calibrate on finite "
                f"data (drop or clip the bad values)."
            )
    return arrs[0] if axis is not None else np.concatenate([a.ravel() for a in arrs])


def calibrate(
    samples,
    method: str = "minmax",
    *,
    percentile: float = 99.999,
    num_bins: int = 2048,
    num_quantized_bins: int = 128,
    symmetric: bool = True,
    dtype: str = "int8",
    axis: int | None = None,
) -> Calibration:
    """The int8 range of ``samples`` by ``method``, with onnxruntime's scale and zero point for it.

    Args:
        samples: an array, or a list of arrays (calibration batches, pooled); concrete (host) data.
        method: "minmax", "percentile" or "entropy" (see the module text for each).
        percentile: for "percentile", in (0, 100].
        num_bins: histogram bins for "percentile" and "entropy" (>= ``num_quantized_bins``).
        num_quantized_bins: the candidate's bins for "entropy" (128 for int8).
        symmetric: a range symmetric about 0 (zero point 0 for int8) or [min, max].
        dtype: "int8" or "uint8".
        axis: None for one range; an axis of ``samples`` for one range per slice along it
            (per-channel weights).

    Example:
        >>> import numpy as np
        >>> w = np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32)
        >>> c = calibrate(w, "percentile", percentile=99.0, axis=0)
        >>> c.scale.shape, bool(np.all(c.high <= np.abs(w).max(axis=1)))
        ((4,), True)
    """
    fn = "calibrate"
    check_choice(fn, "method", method, METHODS)
    check_choice(fn, "dtype", dtype, tuple(QTYPES))
    symmetric = check_bool(fn, "symmetric", symmetric)
    percentile = check_number(fn, "percentile", percentile, 0.0, 100.0, open_lo=True)
    nq = check_int(fn, "num_quantized_bins", num_quantized_bins, 2, fix="128 for int8")
    num_bins = check_int(
        fn, "num_bins", num_bins, nq, fix=f"the histogram needs at least num_quantized_bins={nq} bins"
    )
    x = _samples(fn, samples, axis)
    if axis is None:
        low, high = _range(x, method, symmetric, percentile, num_bins, nq)
        low, high = np.float32(low), np.float32(high)
    else:
        if x.ndim == 0:
            raise InputError(f"{fn}: axis={axis} needs an array with a channel axis, got a scalar.")
        axis = check_int(fn, "axis", axis, -x.ndim, x.ndim - 1, fix=f"samples have {x.ndim} dimensions")
        axis %= x.ndim
        rows = np.moveaxis(x, axis, 0).reshape(x.shape[axis], -1)
        pairs = [_range(r, method, symmetric, percentile, num_bins, nq) for r in rows]
        low = np.array([p[0] for p in pairs], np.float32)
        high = np.array([p[1] for p in pairs], np.float32)
    scale, zp = scale_zero_point(low, high, symmetric=symmetric, dtype=dtype)
    return Calibration(
        method=method,
        low=low,
        high=high,
        scale=scale,
        zero_point=zp,
        symmetric=symmetric,
        dtype=dtype,
        axis=axis,
    )


__all__ = ["METHODS", "Calibration", "calibrate", "entropy_threshold"]

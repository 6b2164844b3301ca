"""The quantisation parameters of a quantised model's tensors and int8 layers (read by
:mod:`npu_jax.model.quant`, which finds them in the graph, and :mod:`npu_jax.model.qkernels`, which
runs them)."""

from __future__ import annotations

import dataclasses

import numpy as np

from npu_jax.errors import InputError


@dataclasses.dataclass(frozen=True)
class QParams:
    """One quantised activation: ``scale`` (fp32), ``zp`` (its zero point in the int8 domain) and
    ``stored`` (``"uint8"`` or ``"int8"``: the ONNX type, a uint8 value held as int8 - 128)."""

    scale: float
    zp: int
    stored: str = "int8"

    def to_onnx(self, q: np.ndarray) -> np.ndarray:
        """An int8-domain array as its ONNX type (uint8: + 128)."""
        q = np.asarray(q)
        return (q.astype(np.int16) + 128).astype(np.uint8) if self.stored == "uint8" else q.astype(np.int8)

    def from_onnx(self, q: np.ndarray) -> np.ndarray:
        """An array of the ONNX type's values (integers in [0, 255] for uint8) in the int8 domain."""
        q = np.asarray(q)
        lo, hi = (0, 255) if self.stored == "uint8" else (-128, 127)
        if not np.issubdtype(q.dtype, np.integer) or q.size and (q.min() < lo or q.max() > hi):
            raise InputError(f"an {self.stored} tensor takes integers in [{lo}, {hi}]; got {q.dtype} values.")
        q = q.astype(np.int16)
        return (q - 128 if self.stored == "uint8" else q).astype(np.int8)


@dataclasses.dataclass(frozen=True, eq=False)
class QSpec:
    """An int8 conv / matmul: int8 input (``x_scale``, ``x_zp``), int8 weights ``w`` (conv OIHW, matmul
    (K, N)) with per-channel ``w_scale``, the model's int32 ``bias`` (scale ``x_scale * w_scale``) or
    None, and its output: ``"int8"`` (requantised to ``y_scale`` / ``y_zp``, then clamped to
    [``lo``, ``hi``] for a ReLU / Clip the graph had before its QuantizeLinear), ``"float"``
    (dequantised: the accumulator times ``out_scale``) or ``"int32"`` (the accumulator)."""

    x_scale: float
    x_zp: int
    w: np.ndarray
    w_scale: np.ndarray
    bias: np.ndarray | None
    out: str
    y_scale: float = 1.0
    y_zp: int = 0
    lo: int = -128
    hi: int = 127
    out_scale: np.ndarray | None = None

    def bias32(self, axis: int) -> np.ndarray:
        """The int32 added to the accumulator: the model's bias minus ``x_zp * sum(w_q)`` per output
        channel (``axis``: the weights' output-channel axis), so the zero-padded input's sum equals
        ``sum((x_q - x_zp) * w_q)`` over an input padded with ``x_zp``."""
        w = self.w.astype(np.int64)
        k = w.shape[axis]
        wsum = np.moveaxis(w, axis, 0).reshape(k, -1).sum(1)
        b = np.zeros(k, np.int64) if self.bias is None else self.bias.astype(np.int64)
        out = b - int(self.x_zp) * wsum
        if np.abs(out).max(initial=0) >= 2**31:
            raise InputError("int8 layer: the int32 bias overflows int32.")
        return out.astype(np.int32)

    def scale(self) -> np.ndarray:
        """The requantisation's fp32 multiplier per output channel: ``x_scale * w_scale / y_scale``
        for int8 out (in fp32, as onnxruntime computes it), ``out_scale`` for float out."""
        if self.out == "float":
            return np.asarray(self.out_scale, np.float32)
        xs, ys = np.float32(self.x_scale), np.float32(self.y_scale)
        return (xs * self.w_scale.astype(np.float32) / ys).astype(np.float32)

    def fmt(self) -> str:
        """The format the Cube kernel's way out writes: int8, fp16 (dequantised) or int32."""
        return {"int8": "int8", "float": "fp16", "int32": "int32"}[self.out]


def quantize_value(v: float, s: float, z: int) -> int:
    """ONNX QuantizeLinear of one value into the int8 domain."""
    return int(np.clip(np.round(np.float32(v) / np.float32(s)) + z, -128, 127))


__all__ = ["QParams", "QSpec", "quantize_value"]

"""Pooling geometry (ONNX MaxPool / AveragePool / GlobalAveragePool), canonicalised once at the boundary.

Output sizes follow ONNX exactly: ``floor((H + pt + pb - kh) / sh) + 1``, or with ``ceil_mode`` the
ceiling, less one when the last window would start in the bottom (right) padding. Average pooling's
divisor per output position is the number of cells its window covers: input cells only
(``count_include_pad=False``), or input and padding cells (``True``), never cells past the padded
input that ``ceil_mode``'s last window reaches (ONNX's reference and onnxruntime agree).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from npu_jax.errors import InputError, InputTypeError, is_int

KINDS = ("max", "avg")
AUTO_PADS = ("VALID", "SAME", "SAME_UPPER", "SAME_LOWER")


@dataclasses.dataclass(frozen=True)
class PoolGeometry:
    """A 2-D pooling layer, strictly: x (N, C, H, W), a kh x kw window, stride, pads, ceil_mode."""

    n: int
    c: int
    h: int
    w: int
    kh: int
    kw: int
    stride: tuple[int, int]
    pads: tuple[int, int, int, int]  # top, bottom, left, right
    ceil_mode: bool = False

    def _out(self, size: int, k: int, s: int, p0: int, p1: int) -> int:
        span = size + p0 + p1 - k
        if not self.ceil_mode:
            return span // s + 1
        out = -(-span // s) + 1
        return out - 1 if (out - 1) * s >= size + p0 else out

    @property
    def ho(self) -> int:
        return self._out(self.h, self.kh, self.stride[0], self.pads[0], self.pads[1])

    @property
    def wo(self) -> int:
        return self._out(self.w, self.kw, self.stride[1], self.pads[2], self.pads[3])

    @property
    def reach(self) -> tuple[int, int]:
        """Rows and cols past the input the last window reaches (bottom / right padding, plus what
        ``ceil_mode`` adds), 0 if it ends inside."""
        return (
            max(0, (self.ho - 1) * self.stride[0] + self.kh - self.pads[0] - self.h),
            max(0, (self.wo - 1) * self.stride[1] + self.kw - self.pads[2] - self.w),
        )

    def counts(self, include_pad: bool) -> tuple[np.ndarray, np.ndarray]:
        """(per output row, per output col) cells of the window that count for the average: the
        divisor at (r, c) is ``rows[r] * cols[c]``."""

        def axis(out, k, s, p0, p1, size):
            start = np.arange(out) * s - p0
            end = np.minimum(start + k, size + p1 if include_pad else size)
            return end - (start if include_pad else np.maximum(start, 0))

        sh, sw = self.stride
        pt, pb, pl, pr = self.pads
        return axis(self.ho, self.kh, sh, pt, pb, self.h), axis(self.wo, self.kw, sw, pl, pr, self.w)

    def describe(self) -> str:
        return (
            f"x({self.n},{self.c},{self.h},{self.w}) {self.kh}x{self.kw} s{self.stride} p{self.pads}"
            f"{' ceil' if self.ceil_mode else ''} -> y({self.n},{self.c},{self.ho},{self.wo})"
        )


def _pair(fn: str, name: str, v) -> tuple[int, int]:
    if isinstance(v, (bool, np.bool_, str, bytes)):
        raise InputTypeError(f"{fn}: {name} must be an int or a pair of ints, got {v!r}.")
    if is_int(v):
        v = (v, v)
    try:
        a, b = v
    except (TypeError, ValueError):
        raise InputTypeError(f"{fn}: {name} must be an int or a pair of ints, got {v!r}.") from None
    if not all(is_int(t) and not isinstance(t, (bool, np.bool_)) for t in (a, b)):
        raise InputTypeError(f"{fn}: {name} must hold ints, got {v!r}.")
    return int(a), int(b)


def _pads(fn: str, padding, size, k, s) -> tuple[int, int, int, int]:
    if isinstance(padding, str):
        mode = padding.upper()
        if mode not in AUTO_PADS:
            raise InputError(
                f"{fn}: padding must be an int, a pair, ((top, bottom), (left, right)) or one of "
                f"{AUTO_PADS} (ONNX auto_pad), got {padding!r}."
            )
        if mode == "VALID":
            return (0, 0, 0, 0)
        out = []
        for d in range(2):
            total = max((-(-size[d] // s[d]) - 1) * s[d] + k[d] - size[d], 0)
            small, big = total // 2, total - total // 2
            out.append((big, small) if mode == "SAME_LOWER" else (small, big))
        return out[0] + out[1]
    if is_int(padding) and not isinstance(padding, (bool, np.bool_)):
        return (int(padding),) * 4
    try:
        a, b = padding
    except (TypeError, ValueError):
        raise InputTypeError(
            f"{fn}: padding must be an int, a pair, ((top, bottom), (left, right)) or one of {AUTO_PADS}, "
            f"got {padding!r} (ONNX pads [t, l, b, r] become ((t, b), (l, r)))."
        ) from None
    if is_int(a) and is_int(b):
        ph, pw = _pair(fn, "padding", (a, b))
        return (ph, ph, pw, pw)
    (pt, pb), (pl, pr) = _pair(fn, "padding[0]", a), _pair(fn, "padding[1]", b)
    return (pt, pb, pl, pr)


def canonicalize(
    fn: str, x_shape, kernel, stride=1, padding=0, *, dilation=1, ceil_mode: bool = False
) -> PoolGeometry:
    """Check and canonicalise pooling arguments on an NCHW input.

    Args:
        kernel: int, (kh, kw), or ``"global"`` (the whole H x W: GlobalAverage/MaxPool; stride 1, no
            padding then).
        padding: int, (ph, pw), ((top, bottom), (left, right)), or an ONNX auto_pad: ``"VALID"``,
            ``"SAME_UPPER"`` (or ``"SAME"``), ``"SAME_LOWER"``.
        dilation: only 1 (ONNX ``dilations`` other than 1 are refused).
    Raises:
        InputError / InputTypeError naming the parameter, the value and the fix.
    """
    if isinstance(x_shape, (str, bytes)) or not all(is_int(d) for d in x_shape):
        raise InputTypeError(f"{fn}: x's shape must be a tuple of ints, got {x_shape!r}.")
    x_shape = tuple(int(d) for d in x_shape)
    if len(x_shape) != 4:
        raise InputError(
            f"{fn}: x must be 4-D NCHW (N, C, H, W), got shape {x_shape}; add a batch axis with x[None] "
            f"(1-D and 3-D pooling are not supported)."
        )
    if min(x_shape) <= 0:
        raise InputError(f"{fn}: x {x_shape} must have positive sizes.")
    n, c, h, w = x_shape
    dh, dw = _pair(fn, "dilation", dilation)
    if (dh, dw) != (1, 1):
        raise InputError(
            f"{fn}: dilation={dilation!r} is not supported: the pooling kernel reads contiguous windows "
            f"(ONNX dilations 1). Use dilation=1."
        )
    if isinstance(kernel, str):
        if kernel != "global":
            raise InputError(f"{fn}: kernel must be an int, a pair or 'global', got {kernel!r}.")
        if not (stride in (1, (1, 1)) and padding in (0, (0, 0), "VALID") and not ceil_mode):
            raise InputError(
                f"{fn}: kernel='global' pools the whole H x W: leave stride=1, padding=0, ceil_mode=False "
                f"(got stride={stride!r}, padding={padding!r}, ceil_mode={ceil_mode!r})."
            )
        return PoolGeometry(n, c, h, w, h, w, (1, 1), (0, 0, 0, 0), False)
    kh, kw = _pair(fn, "kernel", kernel)
    sh, sw = _pair(fn, "stride", stride)
    if min(kh, kw) < 1:
        raise InputError(f"{fn}: kernel must be >= 1 on both axes, got {(kh, kw)}.")
    if min(sh, sw) < 1:
        raise InputError(f"{fn}: stride must be >= 1 on both axes, got {(sh, sw)}.")
    pads = _pads(fn, padding, (h, w), (kh, kw), (sh, sw))
    if min(pads) < 0:
        raise InputError(f"{fn}: padding must be >= 0 on every side, got (top, bottom, left, right)={pads}.")
    if max(pads[:2]) >= kh or max(pads[2:]) >= kw:
        raise InputError(
            f"{fn}: padding {pads} (top, bottom, left, right) must be smaller than the kernel {(kh, kw)} "
            f"on its axis (ONNX, onnxruntime): a window wholly in the padding has no input to pool."
        )
    if h + pads[0] + pads[1] < kh or w + pads[2] + pads[3] < kw:
        raise InputError(
            f"{fn}: kernel {kh}x{kw} is larger than the padded input {h + pads[0] + pads[1]}x"
            f"{w + pads[2] + pads[3]}; pad more or use a smaller kernel."
        )
    return PoolGeometry(n, c, h, w, kh, kw, (sh, sw), pads, bool(ceil_mode))


__all__ = ["AUTO_PADS", "KINDS", "PoolGeometry", "canonicalize"]

"""Conv2D geometry: lenient user arguments canonicalised once, at the boundary (STYLE 6).

``stride=2`` becomes ``(2, 2)``; ``padding="SAME"`` becomes ``((t, b), (l, r))``; everything inside
the kernels takes the strict :class:`ConvGeometry` (a pytree: its fields may be traced).
"""

from __future__ import annotations

import dataclasses
import math

import jax

from npu_jax.errors import InputError, InputTypeError, is_int


def _pair(name: str, v) -> tuple[int, int]:
    if isinstance(v, (bool, str, bytes)) or type(v).__name__ == "bool":
        raise InputTypeError(f"{name} must be an int or a pair of ints, got {v!r}.")
    if is_int(v):
        v = (v, v)
    try:
        a, b = v
    except (TypeError, ValueError):
        raise InputTypeError(f"{name} must be an int or a pair of ints, got {v!r}.") from None
    if not all(is_int(t) for t in (a, b)):
        raise InputTypeError(f"{name} must hold ints, got {v!r}.")
    return int(a), int(b)


@dataclasses.dataclass(frozen=True)
class ConvGeometry:
    """A Conv2D layer, strictly: x (N, C, H, W), w (K, C / groups, kh, kw), stride, dilation, pads.

    ``groups`` (static: it fixes the program's shape) splits the channels into ``groups`` independent
    convs of C / groups inputs and K / groups outputs each (depthwise: groups = C)."""

    n: int
    c: int
    h: int
    w: int
    k: int  # output channels (Cout)
    kh: int
    kw: int
    stride: tuple[int, int]
    dilation: tuple[int, int]
    pads: tuple[int, int, int, int]  # top, bottom, left, right
    groups: int = 1

    @property
    def ho(self) -> int:
        pt, pb = self.pads[0], self.pads[1]
        return (self.h + pt + pb - (self.kh - 1) * self.dilation[0] - 1) // self.stride[0] + 1

    @property
    def wo(self) -> int:
        pl, pr = self.pads[2], self.pads[3]
        return (self.w + pl + pr - (self.kw - 1) * self.dilation[1] - 1) // self.stride[1] + 1

    @property
    def flops(self) -> int:
        """Useful FLOPs: 2 * N * Ho * Wo * K * (C / groups) * kh * kw."""
        return 2 * self.n * self.ho * self.wo * self.k * (self.c // self.groups) * self.kh * self.kw

    def packing(self, c0: int, n0: int) -> int:
        """Groups packed into one *super-group* (a dense conv whose weights are block-diagonal), as the
        vendor's compiler does (``mag_factor``): enough groups that a super-group's input channels
        fill whole channel blocks of ``c0`` and its output channels whole fractals of ``n0``, at most
        ``groups``; here also a divisor of ``groups`` (every super-group whole). 1 for a dense conv."""
        if self.groups == 1:
            return 1
        cg, kg = self.c // self.groups, self.k // self.groups
        mag = math.lcm(math.lcm(cg, c0) // cg, math.lcm(kg, n0) // kg)
        return max(d for d in range(1, min(mag, self.groups) + 1) if self.groups % d == 0)

    def dense_view(self, c0: int, n0: int) -> ConvGeometry:
        """The dense conv the kernel runs per super-group (:meth:`packing`), the super-groups as an
        outer batch axis: x (N * G', C', H, W) is a free view of x (N, C, H, W) (a super-group's
        channels are contiguous), w (G', K', C', kh, kw) block-diagonal. ``self`` when dense."""
        if self.groups == 1:
            return self
        p = self.packing(c0, n0)
        sg = self.groups // p
        return dataclasses.replace(self, n=self.n * sg, c=self.c // sg, k=self.k // sg, groups=1)

    def supergroups(self, c0: int, n0: int) -> int:
        """G': super-groups of :meth:`packing` groups each (1 for a dense conv)."""
        return self.groups // self.packing(c0, n0)

    def in_extent(self, out_tile: int, axis: int) -> int:
        """Input rows (axis 0) or cols (axis 1) an output tile of ``out_tile`` needs, halo included."""
        s, d, k = self.stride[axis], self.dilation[axis], (self.kh, self.kw)[axis]
        return (out_tile - 1) * s + (k - 1) * d + 1

    def describe(self) -> str:
        grp = f" groups={self.groups}" if self.groups != 1 else ""
        return (
            f"x({self.n},{self.c},{self.h},{self.w}) w({self.k},{self.c // self.groups},{self.kh},{self.kw}) "
            f"s{self.stride} d{self.dilation} p{self.pads}{grp} -> y({self.n},{self.k},{self.ho},{self.wo})"
        )


def canonicalize(x_shape, w_shape, stride=1, padding=0, dilation=1, groups: int = 1) -> ConvGeometry:
    """Check and canonicalise Conv2D arguments (NCHW input, OIHW weights (K, C / groups, kh, kw)).

    Args:
        padding: int, (ph, pw), ((top, bottom), (left, right)), "SAME" or "VALID".
        groups: a positive int dividing C and K (depthwise: groups = C).
    Raises:
        ValueError / TypeError naming the parameter, the value and the fix.
    """
    for name, shape in (("x", x_shape), ("w", w_shape)):
        if (
            isinstance(shape, (str, bytes))
            or not hasattr(shape, "__iter__")
            or not all(is_int(d) for d in shape)
        ):
            raise InputTypeError(f"{name} shape must be a tuple of ints, got {shape!r}.")
    x_shape = tuple(int(d) for d in x_shape)
    w_shape = tuple(int(d) for d in w_shape)
    if len(x_shape) != 4:
        raise InputError(
            f"x must be 4-D NCHW (N, C, H, W), got shape {x_shape}; add a batch axis "
            f"with x[None] for a single image."
        )
    if len(w_shape) != 4:
        raise InputError(f"w must be 4-D OIHW (K, C, kh, kw), got shape {w_shape}.")
    if not is_int(groups):
        raise InputTypeError(f"groups must be a positive int (1 = dense, C = depthwise), got {groups!r}.")
    groups = int(groups)
    if groups < 1:
        raise InputError(f"groups must be a positive int (1 = dense, C = depthwise), got groups={groups}.")
    n, c, h, w = x_shape
    k, cw, kh, kw = w_shape
    if min(x_shape) <= 0 or min(w_shape) <= 0:
        raise InputError(f"x {x_shape} and w {w_shape} must have positive sizes.")
    if c % groups or k % groups:
        raise InputError(
            f"groups={groups} must divide the input channels C={c} (x.shape[1]) and the output channels "
            f"K={k} (w.shape[0]); use a divisor of both (depthwise: groups=C)."
        )
    if cw * groups != c:
        raise InputError(
            f"channel mismatch: x has C={c} channels (x.shape[1]), so with groups={groups} w.shape[1] "
            f"must be C / groups = {c // groups}, got {cw}; w must be OIHW (K, C / groups, kh, kw)."
        )
    sh, sw = _pair("stride", stride)
    if sh < 1 or sw < 1:
        raise InputError(f"stride must be >= 1, got {(sh, sw)}.")
    dh, dw = _pair("dilation", dilation)
    if dh < 1 or dw < 1:
        raise InputError(f"dilation must be >= 1, got {(dh, dw)}.")
    eff_h, eff_w = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            pads = (0, 0, 0, 0)
        elif mode == "SAME":

            def same(size, s, eff):
                out = -(-size // s)
                total = max((out - 1) * s + eff - size, 0)
                return total // 2, total - total // 2

            pads = same(h, sh, eff_h) + same(w, sw, eff_w)
        else:
            raise InputError(
                f"padding must be an int, a pair, ((t, b), (l, r)), 'SAME' or 'VALID'; got {padding!r}."
            )
    elif is_int(padding):
        pads = (int(padding),) * 4
    else:
        try:
            a, b = padding
        except (TypeError, ValueError):
            raise InputTypeError(
                f"padding must be an int, a pair, ((t, b), (l, r)), 'SAME' or 'VALID'; got {padding!r}."
            ) from None
        if is_int(a) and is_int(b):
            pads = (int(a), int(a), int(b), int(b))
        else:
            (pt, pb), (pl, pr) = _pair("padding[0]", a), _pair("padding[1]", b)
            pads = (pt, pb, pl, pr)
    if min(pads) < 0:
        raise InputError(f"padding must be >= 0 on every side, got (top, bottom, left, right)={pads}.")
    if max(pads) > 255:
        raise InputError(f"padding {pads} exceeds Load3D's 0..255 per side.")
    if h + pads[0] + pads[1] < eff_h or w + pads[2] + pads[3] < eff_w:
        raise InputError(
            f"kernel {kh}x{kw} with dilation {(dh, dw)} spans {eff_h}x{eff_w}, larger than the padded "
            f"input {h + pads[0] + pads[1]}x{w + pads[2] + pads[3]}; pad more or use a smaller kernel."
        )
    if max(kh, kw) > 255 or max(dh, dw) > 255 or max(sh, sw) > 63:
        raise InputError(
            f"Load3D supports kernel <= 255, dilation <= 255, stride <= 63; got "
            f"kernel {(kh, kw)}, dilation {(dh, dw)}, stride {(sh, sw)}."
        )
    return ConvGeometry(n, c, h, w, k, kh, kw, (sh, sw), (dh, dw), pads, groups)


jax.tree_util.register_dataclass(
    ConvGeometry,
    data_fields=["n", "c", "h", "w", "k", "kh", "kw", "stride", "dilation", "pads"],
    meta_fields=["groups"],
)

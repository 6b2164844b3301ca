"""Data layouts of the Cube and the feature-map format, as reshapes and transposes.

2-D matrices: ND (rows, cols); NZ (C1, rows, C0), the L1 "big-N small-z" layout; ZZ
(M1, K1, M0, K0) for A in L0A; ZN (K1, N1, N0, K0) for B in L0B; L0C's NZ (N1, M1, M0, N0).
Feature maps: NC1HWC0 with C0 = one fractal row (``hw.cube_k_bytes``) / itemsize (16 for fp16).
Shapes must already be whole fractals (callers pad); the inverse of each is given for reading
results back.
"""

from __future__ import annotations

import jax.numpy as jnp

from npu_jax.hw.config import FRACTAL_ROWS as F  # fractal rows (M0 / N0)
from npu_jax.hw.config import HardwareConfig


def c0_of(hw: HardwareConfig, dtype) -> int:
    """C0 of an array dtype on ``hw``: one fractal row of elements (``hw.c0``)."""
    return hw.c0(jnp.dtype(dtype).itemsize)


def nd_to_nz(x, c0: int):
    r, c = x.shape
    return x.reshape(r, c // c0, c0).transpose(1, 0, 2)


def nz_to_nd(x):
    c1, r, c0 = x.shape
    return x.transpose(1, 0, 2).reshape(r, c1 * c0)


def nd_to_zz(x, k0: int):
    m, k = x.shape
    return x.reshape(m // F, F, k // k0, k0).transpose(0, 2, 1, 3)


def zz_to_nd(x):
    m1, k1, m0, k0 = x.shape
    return x.transpose(0, 2, 1, 3).reshape(m1 * m0, k1 * k0)


def nd_to_zn(x, k0: int):
    k, n = x.shape
    return x.reshape(k // k0, k0, n // F, F).transpose(0, 2, 3, 1)


def zn_to_nd(x):
    k1, n1, n0, k0 = x.shape
    return x.transpose(0, 3, 1, 2).reshape(k1 * k0, n1 * n0)


def nd_to_l0c(x):
    m, n = x.shape
    return x.reshape(m // F, F, n // F, F).transpose(2, 0, 1, 3)


def l0c_to_nd(x):
    n1, m1, m0, n0 = x.shape
    return x.transpose(1, 2, 0, 3).reshape(m1 * m0, n1 * n0)


def chw_to_c1hwc0(x, c0: int):
    """(C, H, W) -> (C1, H, W, C0), channels zero-padded to a multiple of C0."""
    c, h, w = x.shape
    c1 = -(-c // c0)
    x = jnp.pad(x, ((0, c1 * c0 - c), (0, 0), (0, 0)))
    return x.reshape(c1, c0, h, w).transpose(0, 2, 3, 1)


def nchw_to_nc1hwc0(x, c0: int):
    """The whole-tensor relayout (N, C, H, W) -> (N, C1, H, W, C0)."""
    n, c, h, w = x.shape
    c1 = -(-c // c0)
    x = jnp.pad(x, ((0, 0), (0, c1 * c0 - c), (0, 0), (0, 0)))
    return x.reshape(n, c1, c0, h, w).transpose(0, 1, 3, 4, 2)


def oihw_to_kn(w, c0: int, kh=None, kw=None, block_n: int | None = None):
    """(O, C, KH, KW) weights -> (C1 * KH * KW * C0, O): row k = ((c1 * kh + i) * kw + j) * C0 + c0,
    the K order of Load3D's img2col, channels zero-padded to C1 * C0.

    ``kh``/``kw`` (traced allowed) may be smaller than the array's KH/KW (a layer inside a larger
    bound): rows then follow the smaller kernel's order and the rows past C1 * kh * kw * C0 are 0.
    ``block_n`` returns the matrix Cout-block-major instead: (O / block_n * K, block_n).
    """
    out = _oihw_to_kn(w, c0, kh, kw)
    if block_n is None:
        return out
    k, o = out.shape
    return out.reshape(k, o // block_n, block_n).transpose(1, 0, 2).reshape(-1, block_n)


def _oihw_to_kn(w, c0, kh, kw):
    o, c, KH, KW = w.shape
    c1 = -(-c // c0)
    w = jnp.pad(w, ((0, 0), (0, c1 * c0 - c), (0, 0), (0, 0)))
    if kh is None or (isinstance(kh, int) and isinstance(kw, int) and (kh, kw) == (KH, KW)):
        return w.reshape(o, c1, c0, KH, KW).transpose(1, 3, 4, 2, 0).reshape(c1 * KH * KW * c0, o)
    r = jnp.arange(c1 * KH * KW * c0, dtype=jnp.int32)
    f = r // c0
    j, i, c1i = f % kw, (f // kw) % kh, f // (kw * kh)
    ok = c1i < c1
    g = w[:, jnp.clip(c1i * c0 + r % c0, 0, c1 * c0 - 1), jnp.clip(i, 0, KH - 1), jnp.clip(j, 0, KW - 1)]
    return jnp.where(ok[None, :], g, jnp.zeros((), w.dtype)).T


def nc1hwc0_to_nchw(x, c: int):
    n, c1, h, w, c0 = x.shape
    return x.transpose(0, 1, 4, 2, 3).reshape(n, c1 * c0, h, w)[:, :c]


def fractal_view(x, fmt: str, k0: int | None = None):
    """A logical L0 tile in its hardware arrangement: ZZ (M1, K1, F, K0) for an (M, K) L0A tile,
    ZN (K1, N1, F, K0) for a (K, N) L0B tile, NZ (N1, M1, F, F) for an (M, N) L0C tile
    (F = FRACTAL_ROWS; ``k0`` = ``hw.k0(itemsize)``, 16 for fp16, needed for ZZ and ZN)."""
    if fmt in ("ZZ", "ZN") and k0 is None:
        raise ValueError(f"fractal_view of a {fmt} tile needs k0= (hw.k0(itemsize), 16 for fp16).")
    if fmt == "ZZ":
        return nd_to_zz(x, k0)
    if fmt == "ZN":
        return nd_to_zn(x, k0)
    if fmt == "NZ":
        return nd_to_l0c(x)
    raise ValueError(f"fmt must be 'ZZ', 'ZN' or 'NZ', got {fmt!r}.")

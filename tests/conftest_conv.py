"""Helpers shared by the Conv2D tests (imported by test_conv2d.py and test_conv2d_props.py).

Reference. The kernel rounds x and w to the operand format at the boundary; the reference is the
same convolution in float64 numpy on those rounded values (``conv_ref``), cross-checked against
``lax.conv_general_dilated`` at ``Precision.HIGHEST`` in test_conv2d.py.

Error bound. The emulator multiplies and accumulates in fp32 and rounds once to the output format.
With K = C * kh * kw, S = (|x| * |w|) the same convolution of absolute values and
gamma_K = K u / (1 - K u), u = 2^-24, the fp32 sum s obeys |s - ref| <= gamma_K * S whatever the
summation order or tiling (Higham, eq. 3.5; it also covers rounded fp32 x fp32 products). The one
rounding to the output format adds at most u_out * |s| (or half the smallest subnormal spacing,
``tiny``, below the normal range), and |s| <= |ref| + gamma_K S, so

    |y - ref| <= u_out |ref| + (1 + u_out) gamma_K S + tiny (+ the float64 reference's own
                 gamma_K(2^-53) S).

u_out = 2^-11 (fp16), 2^-8 (bf16), 2^-24 (fp32). ``conv_error_bound`` returns this per element;
every numerical check of the Conv2D tests goes through ``assert_conv_close``.
"""

from __future__ import annotations

import functools
import os
import secrets

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from npu_jax.api.conv import conv2d_bounded
from npu_jax.core.policy import Policy
from npu_jax.mapping.conv import ConvTiling
from npu_jax.workload.conv import ConvGeometry

NP_DTYPE = {"fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16), "fp32": np.dtype(np.float32)}
U_OUT = {"fp16": 2.0**-11, "bf16": 2.0**-8, "fp32": 2.0**-24}
# half the spacing of the format's subnormals: the largest rounding error below the normal range
TINY = {"fp16": 2.0**-25, "bf16": 2.0**-134, "fp32": 2.0**-150}
C0 = {"fp16": 16, "bf16": 16, "fp32": 8}


def new_seed() -> int:
    """A fresh seed per call; ``NPU_JAX_TEST_SEED`` replays one. Put it in every failure message."""
    env = os.environ.get("NPU_JAX_TEST_SEED")
    return int(env) if env else secrets.randbits(63)


def gamma(k: int, u: float = 2.0**-24) -> float:
    assert k * u < 1, f"gamma_{k} is meaningless at u={u}"
    return k * u / (1 - k * u)


def rounded(a, fmt: str) -> np.ndarray:
    """``a`` rounded to the operand format (round-to-nearest-even), as float64."""
    return np.asarray(a, np.float32).astype(NP_DTYPE[fmt]).astype(np.float64)


def conv_ref(x, w, g: ConvGeometry) -> np.ndarray:
    """Cross-correlation of x (N, C, H, W) with w (K, C, kh, kw) in float64, NCHW out."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    pt, pb, pl, pr = g.pads
    sh, sw = g.stride
    dh, dw = g.dilation
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    out = np.zeros((x.shape[0], w.shape[0], g.ho, g.wo))
    for i in range(w.shape[2]):
        for j in range(w.shape[3]):
            patch = xp[
                :, :, i * dh : i * dh + (g.ho - 1) * sh + 1 : sh, j * dw : j * dw + (g.wo - 1) * sw + 1 : sw
            ]
            out += np.einsum("nchw,kc->nkhw", patch, w[:, :, i, j])
    return out


def conv_error_bound(x, w, g: ConvGeometry, operand: str, output: str):
    """(ref, bound): the float64 reference on the operand-rounded inputs and the per-element bound
    on |y - ref| derived in the module docstring."""
    xr, wr = rounded(x, operand), rounded(w, operand)
    ref = conv_ref(xr, wr, g)
    s = conv_ref(np.abs(xr), np.abs(wr), g)
    K = g.c * g.kh * g.kw
    u = U_OUT[output]
    bound = u * np.abs(ref) + (1 + u) * gamma(K) * s + gamma(K, 2.0**-53) * s + TINY[output]
    return ref, bound


def assert_conv_close(y, x, w, g: ConvGeometry, operand: str, output: str, what: str = ""):
    """y (N, K, Ho, Wo) against the reference within ``conv_error_bound``; ``what`` (with the seed)
    goes in the failure message."""
    y = np.asarray(y)
    assert y.dtype == NP_DTYPE[output], f"{what}: y is {y.dtype}, expected {output}"
    assert y.shape == (g.n, g.k, g.ho, g.wo), f"{what}: y {y.shape} != {(g.n, g.k, g.ho, g.wo)}"
    ref, bound = conv_error_bound(x, w, g, operand, output)
    y64 = y.astype(np.float64)
    assert np.all(np.isfinite(y64)), f"{what}: {int(np.sum(~np.isfinite(y64)))} non-finite outputs"
    err = np.abs(y64 - ref)
    bad = err > bound
    if bad.any():
        i = np.unravel_index(np.argmax(err / bound), err.shape)
        raise AssertionError(
            f"{what}: {int(bad.sum())}/{bad.size} outputs outside the fp32-accumulation bound; worst "
            f"at {tuple(int(v) for v in i)}: y={y64[i]!r} ref={ref[i]!r} err={err[i]:.3e} "
            f"bound={bound[i]:.3e} (err/bound={err[i] / bound[i]:.2f}); {g.describe()}"
        )


def bits(a) -> np.ndarray:
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}")


def assert_bits_equal(a, b, what: str = ""):
    ba, bb = bits(a), bits(b)
    assert ba.shape == bb.shape, f"{what}: shape {ba.shape} != {bb.shape}"
    n = int(np.sum(ba != bb))
    assert n == 0, f"{what}: {n}/{ba.size} elements differ bitwise"


def random_layer(rng, x_shape, w_shape):
    """Fresh standard-normal x and w (fp32), never zero."""
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    return x, w


def pad_into(a, shape, fill=0.0) -> np.ndarray:
    """``a`` in the leading corner of an array of ``shape`` (the bound's), ``fill`` elsewhere."""
    out = np.full(shape, fill, np.float32)
    out[tuple(slice(0, s) for s in a.shape)] = a
    return out


def traced_geometry(g: ConvGeometry) -> ConvGeometry:
    """The layer with every int field as an int32 array, for passing into a jitted bounded kernel."""
    return jax.tree.map(jnp.int32, g)


def bound_shapes(bound: ConvGeometry):
    return (bound.n, bound.c, bound.h, bound.w), (bound.k, bound.c, bound.kh, bound.kw)


def bound_out_hw(bound: ConvGeometry) -> tuple[int, int]:
    """(Ho_max, Wo_max) of a bounded run: the bound's input plus its pads (stride 1, 1 tap)."""
    pt, pb, pl, pr = bound.pads
    return bound.h + pt + pb, bound.w + pl + pr


@functools.cache
def bounded_fn(
    bound: ConvGeometry, strategy: str, tiling: ConvTiling, hw, policy: Policy, timing_only: bool = False
):
    """One jitted conv2d_bounded per (bound, strategy, tiling, hw, policy): compiled once, reused by
    every layer inside the bound (its geometry is a traced argument)."""

    def f(x, w, g):
        return conv2d_bounded(
            x,
            w,
            g,
            bound=bound,
            strategy=strategy,
            tiling=tiling,
            hw=hw,
            policy=policy,
            timing_only=timing_only,
        )

    return jax.jit(f)


def run_bounded(bound, strategy, tiling, hw, policy, x, w, g, fill=0.0):
    """Run layer ``g`` (x, w at the layer's shapes) through the bound's compiled program.
    Returns (y at the bound's output shape as numpy, report)."""
    xs, ws = bound_shapes(bound)
    fn = bounded_fn(bound, strategy, tiling, hw, policy)
    y, rep = fn(pad_into(x, xs, fill), pad_into(w, ws, fill), traced_geometry(g))
    return np.asarray(y), rep


def check_bounded_output(yb, x, w, g, bound, operand, output, what=""):
    """The leading corner of a bounded run within the bound; everything else exactly +0."""
    ho_max, wo_max = bound_out_hw(bound)
    assert yb.shape == (bound.n, bound.k, ho_max, wo_max), f"{what}: y shape {yb.shape}"
    corner = yb[: g.n, : g.k, : g.ho, : g.wo]
    assert_conv_close(corner, x, w, g, operand, output, what)
    rest = bits(yb).copy()
    rest[: g.n, : g.k, : g.ho, : g.wo] = 0
    nz = int(np.count_nonzero(rest))
    assert nz == 0, f"{what}: {nz} elements outside the layer's output are not +0.0"

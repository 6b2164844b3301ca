"""One layer on the emulator against theory: bounds, sqrt(K) growth, every kernel honouring the policy.

The reference is the float64 conv of the operand-rounded inputs (what the machine was given) and
S = the same conv on |x| and |w|. Layers are drawn fresh (``rng``); the kernels are compiled once
per (policy, shape); the stacks' own path (``precision.strategies.stack_conv`` and ``conv_cycles``)
is held to them bit for bit and cycle for cycle here.
"""

from __future__ import annotations

import numpy as np
import pytest

import npu_jax
from npu_jax import Policy
from precision import (
    assert_within_budget,
    compare,
    gamma_K,
    int8_bounds,
    layer_bounds,
    layer_budget,
    quantize,
    round_to,
)
from precision.formats import get_format
from precision.strategies import POLICIES, conv, conv3x3_ref, conv_cycles, stack_conv

HW = npu_jax.presets.tiny()
C_SMALL = 16  # the stack tests' layer: K = 144
C_BOUND = 256  # one kernel for K = 144 ... 2304: channels past c are zero (exact in any sum)


def _layer(rng, c, c_bound=None, k=16, size=8):
    cb = c if c_bound is None else c_bound
    x = np.zeros((1, cb, size, size), np.float32)
    w = np.zeros((k, cb, 3, 3), np.float32)
    x[:, :c] = rng.standard_normal((1, c, size, size))
    w[:, :c] = rng.standard_normal((k, c, 3, 3)) * np.sqrt(2.0 / (9 * c))
    return x, w


def _ref(x, w, operand):
    dt = get_format(operand).np_dtype
    xr, wr = x.astype(dt).astype(np.float64), w.astype(dt).astype(np.float64)
    return conv3x3_ref(xr, wr), conv3x3_ref(np.abs(xr), np.abs(wr))


def _check_elementwise(y, ref, S, bounds, kind, what):
    err = np.abs(np.asarray(y).astype(np.float64) - ref)
    lim = bounds.limit(S, kind)
    bad = err > lim
    assert not bad.any(), (
        f"{what}: {int(bad.sum())} outputs past the {kind} bound; worst err/limit "
        f"{np.max(err / lim):.3g}; {bounds.describe}"
    )


# the conv policies of the strategies: fp32, pure FP16, mixed, and mixed with an fp32 result (used
# by normalisation and scaling, whose rescale-and-store adds one fp16 rounding: the mixed bound)
@pytest.mark.parametrize("name", ["fp32", "fp16", "mixed", "mixed_fp32_out"])
def test_single_layer_inside_gamma_K_and_probabilistic_bound(rng, name):
    pol = POLICIES[name]
    x, w = _layer(rng, C_SMALL)
    y, rep = conv(x, w, hw=HW, policy=pol)
    ref, S = _ref(x, w, pol.operand)
    K = 9 * C_SMALL
    b = layer_bounds(K, pol, k_tile=64)
    m = compare(y, ref, abs_ref=S)
    assert b.deterministic < 1  # gamma_K < 1 at K = 144 in every format here
    _check_elementwise(y, ref, S, b, "deterministic", name)
    _check_elementwise(y, ref, S, b, "probabilistic", name)
    assert_within_budget(m, layer_budget(f"conv3x3 K={K} {name}", b))
    # the textbook gamma_K of the accumulator's format holds too (it is the looser figure)
    acc_fmt = "fp16" if pol.accumulate != "fp32" else "fp32"
    assert m.componentwise <= gamma_K(K, acc_fmt) + (
        2.0**-11 if pol.output == "fp16" and acc_fmt == "fp32" else 0
    )
    assert m.n_nan == 0 and m.n_overflow == 0 and rep.cycles > 0
    # the stacks' path (their data path apart, the model's cycles): conv2d's bits and cycles
    y_stack = stack_conv(x, w, hw=HW, policy=pol)
    np.testing.assert_array_equal(np.asarray(y_stack).view(np.uint8), np.asarray(y).view(np.uint8))
    assert conv_cycles(HW, "img2col", pol, x.shape, w.shape) == rep.cycles


def test_fp16_accumulation_error_grows_like_sqrt_K(rng):
    """A true fp16 running sum (``fp16_mac``): relative L2 ~ 0.3 sqrt(K) u (the facts sheet), so a
    16x longer inner product has ~4x the error; every K stays inside the lambda = 6 bound, and
    inside gamma_K where gamma_K < 1 (not at K = 2304: gamma_K = 1.1, no bound)."""
    pol = Policy(accumulate="fp16_mac")
    u = 2.0**-11
    Ks, errs = [], []
    for c in (16, 64, 256):
        x, w = _layer(rng, c, C_BOUND)
        y, _ = conv(x, w, hw=HW, policy=pol)
        ref, S = _ref(x, w, "fp16")
        K = 9 * c
        m = compare(y, ref, abs_ref=S)
        b = layer_bounds(K, pol)
        if b.deterministic < 1:
            _check_elementwise(y, ref, S, b, "deterministic", f"K={K}")
        else:
            assert gamma_K(K, "fp16") >= 1
        _check_elementwise(y, ref, S, b, "probabilistic", f"K={K}")
        Ks.append(K)
        errs.append(m.rel_l2)
        assert 0.1 <= m.rel_l2 / (np.sqrt(K) * u) <= 0.6, f"K={K}: {m.rel_l2:.3g} is not ~0.3 sqrt(K) u"
    slope = np.polyfit(np.log(Ks), np.log(errs), 1)[0]
    assert 0.35 <= slope <= 0.65, f"error ~ K^{slope:.2f}, expected K^0.5 ({dict(zip(Ks, errs))})"


def test_fp32_accumulation_error_is_flat_in_K(rng):
    """With L0C in fp32 the error is the output rounding, ~u_fp16 whatever K (facts: 2-4e-4 flat)."""
    errs = []
    for _ in range(2):
        x, w = _layer(rng, C_SMALL)
        y, _ = conv(x, w, hw=HW, policy=POLICIES["mixed"])
        errs.append(compare(y, _ref(x, w, "fp16")[0]).rel_l2)
    assert all(1e-4 <= e <= 4e-4 for e in errs), errs


def test_other_conv_strategies_honour_the_policy(rng):
    """output_tiled with toward-zero output rounding: every output is truncated (balance ~ 1,
    |y| <= |ref| up to fp32's own error), and within the directed-rounding bound (2u)."""
    pol = Policy(rounding="toward_zero")
    x, w = _layer(rng, C_SMALL)
    y, _ = conv(x, w, hw=HW, policy=pol, conv_strategy="output_tiled")
    ref, S = _ref(x, w, "fp16")
    y64 = np.asarray(y).astype(np.float64)
    b = layer_bounds(9 * C_SMALL, pol)
    _check_elementwise(y, ref, S, b, "deterministic", "output_tiled toward_zero")
    assert np.all(np.abs(y64) <= np.abs(ref) + gamma_K(9 * C_SMALL, "fp32") * S)
    m = compare(np.abs(y64), np.abs(ref))  # magnitudes: truncation biases them all one way
    assert m.balance > 0.9, m.balance
    # the same layer through img2col with the hardware's nearest-even is balanced
    y_ne = np.asarray(conv(x, w, hw=HW, policy=POLICIES["mixed"])[0]).astype(np.float64)
    m_ne = compare(np.abs(y_ne), np.abs(ref))
    assert m_ne.balance < 0.2 and m.rel_l2 > 1.3 * m_ne.rel_l2, (m.rel_l2, m_ne.rel_l2, m_ne.balance)


def test_gemm_fp16_running_sum_is_bitwise_the_model(rng):
    """``npu_jax.matmul`` under ``fp16_mac`` computes c = fl16(fl32(c + a_k b_k)) in K order, exactly."""
    M, N, K = 16, 16, 96
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c, _ = npu_jax.matmul(a, b, hw=HW, policy=Policy(accumulate="fp16_mac"))
    acc = np.zeros((M, N), np.float16)
    for k in range(K):
        prod = a[:, k : k + 1].astype(np.float32) * b[k : k + 1, :].astype(np.float32)  # exact
        acc = (acc.astype(np.float32) + prod).astype(np.float16)
    np.testing.assert_array_equal(np.asarray(c).view(np.uint16), acc.view(np.uint16))
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert np.any(np.asarray(c).astype(np.float64) != exact.astype(np.float16).astype(np.float64))


def test_policy_validation_and_output_modes():
    with pytest.raises(ValueError, match="Policy.rounding"):
        Policy(rounding="nearest")
    with pytest.raises(ValueError, match="Policy.accumulate"):
        Policy(accumulate="fp8")
    with pytest.raises(ValueError, match="Policy.subnormals"):
        Policy(subnormals="no")
    p = Policy(rounding="stochastic", seed=5)
    x = np.linspace(1, 2, 64, dtype=np.float32) + np.float32(2.0**-13)
    a = np.asarray(p.convert_out(x, "fp16", HW, 1))
    b = np.asarray(p.convert_out(x, "fp16", HW, 2))
    assert np.any(a != b)  # the salt changes the random bits
    lo, hi = np.asarray(round_to(x, "fp16", "down")), np.asarray(round_to(x, "fp16", "up"))
    assert np.all((a == lo) | (a == hi))
    sat = Policy(overflow="saturate").convert_out(np.array([1e6, -np.inf, np.nan], np.float32), "fp16", HW)
    np.testing.assert_array_equal(np.asarray(sat).astype(np.float32), [65504, -65504, 0])


def test_vector_format_policy(rng):
    """``Policy.vector``: fp32 rounds a vector op once to the destination; fp16 rounds the op's
    result to fp16 first, and VReduceSum sums pairwise with every partial sum in fp16."""
    import jax.numpy as jnp
    from conftest import make_core

    from npu_jax.core.buffers import Plan

    n = 256
    v = (1 + rng.random(n) * 2.0**-6).astype(np.float16)  # partial sums reach 256: fp16 ulp 0.25
    hw = npu_jax.presets.tiny()
    out = {}
    for fmt in ("fp32", "fp16"):
        plan = Plan(hw)
        x = plan.alloc("UB", "x", (16, 16), "fp16")
        acc = plan.alloc("UB", "acc", (8,), "fp32")
        prod = plan.alloc("UB", "prod", (16, 16), "fp32")
        core = make_core(hw, plan, policy=Policy(vector=fmt))
        buf = dict(core.buf)
        buf["x"] = buf["x"].at[0].set(jnp.asarray(v.reshape(16, 16)))
        core = core.replace(buf=buf)
        core = core.vector("VReduceSum", acc[0], x[0]).vector("VMul", prod[0], x[0], x[0])
        out[fmt] = (float(np.asarray(core.read(acc))[0]), np.asarray(core.read(prod)))
    level = v.astype(np.float32)
    while level.size > 1:  # the pairwise fp16 model
        level = (level[0::2] + level[1::2]).astype(np.float16).astype(np.float32)
    assert out["fp16"][0] == float(level[0])
    assert out["fp32"][0] == float(np.sum(v.astype(np.float64)).astype(np.float32))
    sq = v.astype(np.float32) ** 2
    np.testing.assert_array_equal(out["fp32"][1].ravel(), sq)
    np.testing.assert_array_equal(out["fp16"][1].ravel(), sq.astype(np.float16).astype(np.float32))
    assert out["fp16"][0] != out["fp32"][0] or not np.array_equal(out["fp16"][1], out["fp32"][1])


def test_int8_stack_conv_is_conv2d_and_inside_the_int8_bound(rng):
    """The int8 strategy's conv: conv2d's bits and cycles; its dequantised error inside int8_bounds."""
    x, w = _layer(rng, C_SMALL)
    x = np.maximum(x, 0)  # a ReLU'd activation, as every layer after the first reads
    xq = quantize(x, scale=np.float32(x.max() / 127), zero_point=0)
    s_w = (np.abs(w).max(axis=(1, 2, 3)) / 127).astype(np.float32)
    wq = quantize(w, granularity="per_channel", axis=0, scale=s_w, zero_point=np.zeros(16, np.int8))
    ref = conv3x3_ref(x, w)
    s_y = np.float32(np.abs(ref).max() / 127)
    scale = (np.float32(xq.scale) * s_w / s_y).astype(np.float32)
    pol = POLICIES["int8"]
    y, rep = npu_jax.conv2d(np.asarray(xq.q), np.asarray(wq.q), padding=1, hw=HW, policy=pol, scale=scale)
    y_stack = stack_conv(xq.q, wq.q, hw=HW, policy=pol, scale=scale)
    np.testing.assert_array_equal(np.asarray(y_stack), np.asarray(y))
    assert conv_cycles(HW, "img2col", pol, x.shape, w.shape) == rep.cycles
    # as a matmul over the im2col: the int8 bound of y = x . w, plus the output's own step s_y / 2
    xp = np.pad(x[0], ((0, 0), (1, 1), (1, 1)))
    X = np.stack([xp[:, i : i + 8, j : j + 8] for i in range(3) for j in range(3)], axis=1)  # (C, 9, 8, 8)
    X = X.reshape(9 * C_SMALL, 64).T  # (pixels, K) in OIHW's (c, i, j) order
    W = w.reshape(16, -1).T
    xq_cols = quantize(X, scale=xq.scale, zero_point=0)
    wq_cols = quantize(W, granularity="per_channel", axis=1, scale=s_w, zero_point=np.zeros(16, np.int8))
    b = int8_bounds(X, W, xq_cols, wq_cols)
    got = np.asarray(y, np.float64)[0].reshape(16, 64).T * np.float64(s_y)
    err = np.abs(got - X.astype(np.float64) @ W.astype(np.float64))
    assert (err <= b.deterministic + np.float64(s_y) / 2 * 1.001).all()
    assert err.max() > 0.05 * float(np.max(b.probabilistic))  # the bound is not vacuous here

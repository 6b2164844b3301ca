"""The vendor's high-level calls (SoftMax, SoftmaxFlashV2, LayerNorm, RmsNorm, the activations), written in
asc's basic calls, against numpy in float64 on fresh random data, in float and half, on the 910B and the
310P; and their cost is the instructions they issue (no call is priced as a whole)."""

from __future__ import annotations

import numpy as np
import pytest
from test_asc_lanes import _harness

import npu_jax
from npu_jax import asc

B910 = npu_jax.presets.ascend910b()
P310 = npu_jax.presets.ascend310p()


def run(body, x, y, out, hw=B910):
    outs, rep = _harness[1](x, y, out, body, x.size, y.size, out.size, hw=hw, checks="all")
    return outs[2], rep


def _softmax64(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("dtype, k, hw", [(np.float32, 96, B910), (np.float16, 64, P310)])
def test_softmax_rows_with_sum_and_max_blocks(rng, dtype, k, hw):
    m = 12
    x = rng.uniform(-6, 6, (m, k)).astype(dtype)
    per = 32 // np.dtype(dtype).itemsize
    out = np.zeros(m * k + 2 * m * per, dtype)

    def body(xl, yl, ol):
        info = asc.SoftMaxShapeInfo(m, k, m, k)
        asc.softmax(
            ol,
            ol[m * k :],
            ol[m * k + m * per :],
            xl,
            asc.softmax_tiling_func((m, k), xl.dtype.sizeof()),
            info,
        )

    got, rep = run(body, x.reshape(-1), x.reshape(-1), out, hw)
    want = _softmax64(x)
    tol = 2e-6 if dtype == np.float32 else 2e-3
    np.testing.assert_allclose(got[: m * k].reshape(m, k), want, atol=tol)
    sums = got[m * k : m * k + m * per].reshape(m, per).astype(np.float64)
    maxs = got[m * k + m * per :].reshape(m, per).astype(np.float64)
    np.testing.assert_array_equal(maxs, np.repeat(x.max(1, keepdims=True).astype(np.float64), per, 1))
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_allclose(sums, np.repeat(e.sum(1, keepdims=True), per, 1), rtol=tol)


def test_softmax_flash_v2_updates_online(rng):
    m, k = 8, 64
    a = rng.uniform(-4, 4, (m, k)).astype(np.float32)
    b = rng.uniform(-4, 4, (m, k)).astype(np.float32)
    x = np.concatenate([a, b]).reshape(-1)
    out = np.zeros(2 * m * k + 6 * m * 8, np.float32)

    def body(xl, yl, ol):
        info = asc.SoftMaxShapeInfo(m, k, m, k)
        s1, m1, s2, m2, em, _ = (ol[2 * m * k + i * m * 8 :] for i in range(6))
        asc.softmax_flash_v2(ol, s1, m1, xl, em, s1, m1, asc.SoftMaxTiling(), info)  # the first block
        asc.softmax_flash_v2(
            ol[m * k :], s2, m2, xl[m * k :], em, s1, m1, asc.SoftMaxTiling(), info, is_update=True
        )

    got, _ = run(body, x, x, out)
    full = np.concatenate([a, b], 1).astype(np.float64)
    mx = full.max(1)
    sums = got[2 * m * k + 2 * m * 8 :][: m * 8].reshape(m, 8)[:, 0]
    np.testing.assert_allclose(sums, np.exp(full - mx[:, None]).sum(1), rtol=1e-5)
    np.testing.assert_allclose(got[m * k : 2 * m * k].reshape(m, k), np.exp(b - mx[:, None]), rtol=1e-5)


@pytest.mark.parametrize(
    "dtype, hw", [(np.float32, B910), pytest.param(np.float16, P310, marks=pytest.mark.slow)]
)
def test_layer_norm_and_rms_norm(rng, dtype, hw):
    m, h = 6, 128
    x = rng.normal(0.5, 2, (m, h)).astype(dtype)
    gb = rng.uniform(0.5, 1.5, 2 * h).astype(dtype)
    out = np.zeros(2 * m * h + 64, dtype)

    def body(xl, yl, ol):
        t = asc.LayerNormTiling(1, m, h)
        asc.layer_norm(ol, ol[2 * m * h :], ol[2 * m * h + 32 :], xl, yl, yl[h:], 1e-5, t)
        asc.rms_norm(ol[m * h :], xl, yl, 1e-5, asc.RmsNormTiling(1, m, h))

    got, _ = run(body, x.reshape(-1), gb, out, hw)
    x64, g, b = x.astype(np.float64), gb[:h].astype(np.float64), gb[h:].astype(np.float64)
    mean, var = x64.mean(1), x64.var(1)
    ln = (x64 - mean[:, None]) / np.sqrt(var[:, None] + 1e-5) * g + b
    rms = x64 / np.sqrt((x64**2).mean(1, keepdims=True) + 1e-5) * g
    tol = 2e-5 if dtype == np.float32 else 4e-3
    np.testing.assert_allclose(got[: m * h].reshape(m, h), ln, atol=tol * 10, rtol=tol)
    np.testing.assert_allclose(got[m * h : 2 * m * h].reshape(m, h), rms, atol=tol * 10, rtol=tol)
    np.testing.assert_allclose(got[2 * m * h : 2 * m * h + m], mean, atol=tol)
    np.testing.assert_allclose(got[2 * m * h + 32 : 2 * m * h + 32 + m], var, rtol=tol * 10)


def test_activations(rng):
    n = 512
    x = rng.uniform(-6, 6, n).astype(np.float32)
    out = np.zeros(6 * n, np.float32)

    def body(xl, yl, ol):
        asc.gelu(ol, xl, n)
        asc.faster_gelu(ol[n:], xl, n)
        asc.silu(ol[2 * n :], xl, n)
        asc.sigmoid(ol[3 * n :], xl, n)
        asc.tanh(ol[4 * n :], xl, n)
        asc.swish(ol[5 * n :], xl, n, 1.5)

    got, rep = run(body, x, x, out)
    x64 = x.astype(np.float64)
    y = 1.5957691216057308 * (x64 + 0.044715 * x64**3)
    want = [x64 / (1 + np.exp(-y)), x64 / (1 + np.exp(-1.702 * x64)), x64 / (1 + np.exp(-x64))]
    want += [1 / (1 + np.exp(-x64)), np.tanh(x64), x64 / (1 + np.exp(-1.5 * x64))]
    for i, w in enumerate(want):
        np.testing.assert_allclose(got[i * n : (i + 1) * n], w, rtol=2e-6, atol=2e-6, err_msg=str(i))
    # priced as what it issues: every Exp at the vendor's rate (2 cycles a float repeat), 6 of them
    assert rep.pipe_busy["VECTOR"] > 6 * (n // 64) * 2

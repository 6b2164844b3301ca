"""int8 quantisation: quantize/dequantize against an independent numpy model and onnxruntime, the
calibrators against small references, and the int8 error bounds against measured errors."""

import os
import secrets
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import precision
from npu_jax.errors import InputError, InputTypeError
from precision.calibration import entropy_threshold

try:  # optional: the bit-for-bit comparison runs where onnxruntime is installed
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from npu_jax.model.calibrate import reference_session
except ImportError:
    onnx = ort = None


def _rng():
    """A generator from a fresh seed (``NPU_JAX_TEST_SEED`` replays one), printed: pytest shows it
    for a failing test."""
    env = os.environ.get("NPU_JAX_TEST_SEED")
    seed = int(env) if env else secrets.randbits(63)
    print(f"rng seed: {seed} (replay with NPU_JAX_TEST_SEED={seed})")
    return np.random.default_rng(seed)


def _data(rng, shape, dist="normal"):
    """Fresh float32 data with a random offset and scale; never all zeros."""
    g = {
        "normal": rng.standard_normal,
        "uniform": lambda size: rng.uniform(-1, 1, size),
        "laplace": lambda size: rng.laplace(size=size),
    }[dist]
    x = g(size=shape) * rng.uniform(0.01, 50) + rng.uniform(-1, 1)
    return x.astype(np.float32)


def _model_params(x, symmetric, dtype, axis=None):
    """The scale rule written out per slice with Python floats (float64), as the ONNX docs state it."""
    qmin, qmax = {"int8": (-128, 127), "uint8": (0, 255)}[dtype]
    if symmetric and dtype == "int8":
        qmin = -127
    slices = [x] if axis is None else [np.take(x, c, axis=axis) for c in range(x.shape[axis])]
    scales, zps = [], []
    for v in slices:
        lo, hi = min(float(v.min()), 0.0), max(float(v.max()), 0.0)
        if symmetric:
            hi = max(-lo, hi)
            lo = -hi
        s = (hi - lo) / (qmax - qmin)
        if s < np.finfo(np.float32).tiny:
            scales.append(1.0)
            zps.append(0)
            continue
        zps.append(round((qmin + qmax) / 2) if symmetric else round(qmin - lo / s))  # Python round: half-even
        scales.append(float(np.float32(s)))
    return np.array(scales, np.float32), np.array(zps)


def _model_q(x, s, z, dtype, axis=None):
    qmin, qmax = {"int8": (-128, 127), "uint8": (0, 255)}[dtype]
    shape = [1] * x.ndim
    if axis is not None:
        shape[axis] = -1
    return np.clip(np.rint(x / s.reshape(shape)) + z.reshape(shape), qmin, qmax)


# ---- quantize / dequantize ---------------------------------------------------------------------
@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("scheme", ["symmetric", "asymmetric"])
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("granularity", ["per_tensor", "per_channel"])
def test_quantize_matches_model(jit, scheme, dtype, granularity):
    rng = _rng()
    x = _data(rng, (6, 17, 5), rng.choice(["normal", "uniform", "laplace"]))
    axis = int(rng.integers(-3, 3)) if granularity == "per_channel" else 0
    f = lambda v: precision.quantize(v, scheme=scheme, granularity=granularity, axis=axis, dtype=dtype)  # noqa: E731
    r = jax.jit(f)(jnp.asarray(x)) if jit else f(x)
    ch = axis % 3 if granularity == "per_channel" else None
    s, z = _model_params(x, scheme == "symmetric", dtype, ch)
    s, z = (s, z) if ch is not None else (s[0], z[0])
    assert r.q.dtype == np.dtype(dtype) and r.q.shape == x.shape and r.axis == ch
    np.testing.assert_array_equal(np.asarray(r.scale), s)
    np.testing.assert_array_equal(np.asarray(r.zero_point), z)
    np.testing.assert_array_equal(np.asarray(r.q), _model_q(x, np.atleast_1d(s), np.atleast_1d(z), dtype, ch))
    # the round trip: within half a step wherever x is in range (no clipping when the range is x's own)
    err = np.abs(np.asarray(r.dequantize(), np.float64) - x)
    half = np.asarray(r.scale, np.float64)
    half = (half.reshape([-1 if d == ch else 1 for d in range(3)]) if ch is not None else half) / 2
    assert np.all(err <= half * (1 + 1e-6) + 1e-6 * np.abs(x))


@given(
    st.lists(st.floats(-1e4, 1e4, allow_nan=False, width=32), min_size=1, max_size=40),
    st.sampled_from(["symmetric", "asymmetric"]),
    st.sampled_from(["int8", "uint8"]),
)
@settings(max_examples=25, deadline=None)
def test_quantize_properties(values, scheme, dtype):
    x = np.array(values, np.float32)
    r = precision.quantize(x, scheme=scheme, dtype=dtype)
    lo, hi = precision.quantization.QTYPES[dtype]
    q = np.asarray(r.q, np.int64)
    assert q.min() >= lo and q.max() <= hi
    assert float(r.scale) > 0
    # 0 is exactly representable and order is kept
    assert float(precision.dequantize(np.array([r.zero_point], r.q.dtype), r.scale, r.zero_point)[0]) == 0.0
    order = np.argsort(x, kind="stable")
    assert np.all(np.diff(q[order]) >= 0)
    if scheme == "symmetric" and dtype == "int8" and np.abs(x).max() / 127 >= np.finfo(np.float32).tiny:
        assert int(r.zero_point) == 0 and np.abs(q).max() == 127


def test_ties_round_half_to_even_under_jit():
    s = np.float32(0.0123457)
    x = ((np.arange(-100, 100) + 0.5) * s).astype(np.float32)
    want = np.clip(np.rint(x / s), -128, 127)
    f = jax.jit(lambda v: precision.quantize(v, scale=s).q)
    np.testing.assert_array_equal(np.asarray(f(x)), want)
    np.testing.assert_array_equal(np.asarray(precision.quantize(x, scale=s).q), want)


def test_zero_range_gives_unit_scale():
    r = precision.quantize(np.zeros((3, 4), np.float32) + np.float32(0), scheme="asymmetric")
    assert float(r.scale) == 1.0 and int(r.zero_point) == 0
    w = _data(_rng(), (3, 4))
    w[1] = 0.0
    r = precision.quantize(w, granularity="per_channel", axis=0)
    assert float(r.scale[1]) == 1.0 and np.all(np.asarray(r.q[1]) == 0) and float(r.scale[0]) != 1.0


def test_saturation_and_user_scale():
    x = np.array([-1000.0, -0.3, 0.3, 1000.0], np.float32)
    r = precision.quantize(x, scale=np.float32(0.01), zero_point=np.int8(10))
    assert np.asarray(r.q).tolist() == [-128, -20, 40, 127]
    r = precision.quantize(x, scale=np.float32(0.01), zero_point=np.uint8(128), dtype="uint8")
    assert np.asarray(r.q).tolist() == [0, 98, 158, 255]


def test_vmap():
    x = _data(_rng(), (4, 32))
    got = jax.vmap(lambda v: precision.quantize(v).q)(jnp.asarray(x))
    want = np.stack([np.asarray(precision.quantize(v).q) for v in x])
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"x": np.zeros((0, 3), np.float32)}, InputError, "empty"),
        ({"x": np.array([1.0, np.nan], np.float32)}, InputError, "finite"),
        ({"x": np.array([1, 2])}, InputTypeError, "floating"),
        ({"x": np.ones(3, np.float32), "scheme": "sym"}, InputError, "scheme"),
        ({"x": np.ones(3, np.float32), "granularity": "row"}, InputError, "granularity"),
        ({"x": np.ones(3, np.float32), "dtype": "int4"}, InputError, "dtype"),
        ({"x": np.ones((2, 3), np.float32), "granularity": "per_channel", "axis": 2}, InputError, "axis"),
        ({"x": np.ones(3, np.float32), "scale": 0.0}, InputError, "scale must be finite and > 0"),
        ({"x": np.ones(3, np.float32), "scale": -1.0}, InputError, "scale"),
        ({"x": np.ones(3, np.float32), "scale": np.ones(3)}, InputError, "scalar"),
        ({"x": np.ones(3, np.float32), "zero_point": 3}, InputError, "without scale"),
        ({"x": np.ones(3, np.float32), "scale": 1.0, "zero_point": 300}, InputError, r"\[-128, 127\]"),
        ({"x": np.ones(3, np.float32), "scale": 1.0, "zero_point": 0.5}, InputTypeError, "integer"),
    ],
)
def test_quantize_bad_input(kwargs, err, match):
    x = kwargs.pop("x")
    with pytest.raises(err, match=match):
        precision.quantize(x, **kwargs)


def test_dequantize_bad_input():
    with pytest.raises(InputTypeError, match="int8 or uint8"):
        precision.dequantize(np.ones(3, np.int32), 1.0)
    with pytest.raises(InputError, match="one per channel"):
        precision.dequantize(np.ones((2, 3), np.int8), np.ones(2, np.float32), axis=1)
    with pytest.raises(InputError, match="axis"):
        precision.dequantize(np.ones((2, 3), np.int8), np.ones(2, np.float32), axis=5)


# ---- onnxruntime, bit for bit --------------------------------------------------------------------
def _ort_run(op, inputs, out_type, axis):
    types = {np.float32: TensorProto.FLOAT, np.int8: TensorProto.INT8, np.uint8: TensorProto.UINT8}
    names = ["x", "s", "z"]
    vi = [helper.make_tensor_value_info(n, types[v.dtype.type], list(v.shape)) for n, v in zip(names, inputs)]
    out = helper.make_tensor_value_info("y", out_type, list(inputs[0].shape))
    kw = {} if axis is None else {"axis": axis}
    g = helper.make_graph([helper.make_node(op, names, ["y"], **kw)], "g", vi, [out])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    onnx.checker.check_model(m)
    return reference_session(m).run(None, dict(zip(names, inputs)))[0]  # the graph as written


@pytest.mark.skipif(ort is None, reason="onnxruntime / onnx not installed")
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("granularity", ["per_tensor", "per_channel"])
def test_matches_onnxruntime_bit_for_bit(dtype, granularity):
    rng = _rng()
    x = _data(rng, (8, 33, 7), rng.choice(["normal", "uniform", "laplace"]))
    axis = int(rng.integers(0, 3))
    qt = {"int8": TensorProto.INT8, "uint8": TensorProto.UINT8}[dtype]
    for scheme in ("symmetric", "asymmetric"):
        r = precision.quantize(x, scheme=scheme, granularity=granularity, axis=axis, dtype=dtype)
        ax = r.axis
        s, z = np.asarray(r.scale), np.asarray(r.zero_point)
        q = _ort_run("QuantizeLinear", [x, s, z], qt, ax)
        np.testing.assert_array_equal(np.asarray(r.q), q)
        jq = jax.jit(
            lambda v, s=scheme: (
                precision.quantize(v, scheme=s, granularity=granularity, axis=axis, dtype=dtype).q
            )
        )
        np.testing.assert_array_equal(np.asarray(jq(x)), q)
        d = _ort_run("DequantizeLinear", [q, s, z], TensorProto.FLOAT, ax)
        np.testing.assert_array_equal(np.asarray(precision.dequantize(q, s, z, axis=ax)), d)
    # ties of the scale's grid, where a reciprocal multiply would differ
    s = np.float32(rng.uniform(0.001, 0.1))
    t = ((np.arange(-120, 120) + 0.5) * s).astype(np.float32)
    z = np.zeros((), np.dtype(dtype))
    np.testing.assert_array_equal(
        np.asarray(precision.quantize(t, scale=s, zero_point=z, dtype=dtype).q),
        _ort_run("QuantizeLinear", [t, np.asarray(s), z], qt, None),
    )


@pytest.mark.skipif(ort is None, reason="onnxruntime / onnx not installed")
@pytest.mark.parametrize("symmetric", [True, False])
def test_scale_rule_is_onnxruntimes(symmetric):
    from_ort = pytest.importorskip("onnxruntime.quantization.quant_utils")
    rng = _rng()
    for dtype, qt in (("int8", TensorProto.INT8), ("uint8", TensorProto.UINT8)):
        qmin, qmax = from_ort.get_qmin_qmax_for_qType(qt, symmetric=symmetric)
        for _ in range(6):
            x = _data(rng, (50,))
            z, s = from_ort.compute_scale_zp(x.min(), x.max(), qmin, qmax, symmetric=symmetric)
            r = precision.quantize(x, scheme="symmetric" if symmetric else "asymmetric", dtype=dtype)
            assert np.asarray(r.scale) == s and np.asarray(r.zero_point) == z


# ---- calibration ---------------------------------------------------------------------------------
def test_minmax_is_the_range():
    rng = _rng()
    x = _data(rng, (1000,))
    c = precision.calibrate([x[:400], x[400:]], "minmax")
    assert c.high == np.abs(x).max() and c.low == -c.high and int(c.zero_point) == 0
    assert c.scale == np.float32(np.float64(np.abs(x).max()) / 127)
    c = precision.calibrate(x, "minmax", symmetric=False)
    assert (c.low, c.high) == (x.min(), x.max())
    np.testing.assert_array_equal(
        np.asarray(c.quantize(x).q), np.asarray(precision.quantize(x, scheme="asymmetric").q)
    )


def test_percentile_is_np_percentile_within_a_bin():
    """The threshold is the lower edge of the bin holding the sample quantile (numpy's inverted CDF,
    an order statistic; an interpolated percentile in a sparse tail can sit bins away). N makes
    N p / 100 a non-integer for every cut, so the CDF's float rounding cannot move a boundary."""
    rng = _rng()
    x = _data(rng, (199_999,), "laplace")
    a = np.abs(x)
    for p in (99.0, 99.9, 99.99):
        c = precision.calibrate(x, "percentile", percentile=p, num_bins=2048)
        width = (a.max() - a.min()) / 2048
        err = float(c.high) - np.percentile(a, p, method="inverted_cdf")
        assert -width * 1.001 <= err <= 1e-6 * a.max(), (p, err / width)
        two = precision.calibrate(x, "percentile", percentile=p, symmetric=False)
        width = 2 * a.max() / 2048  # the signed histogram spans [-max|x|, max|x|]
        for got, q in ((two.low, (100 - p) / 2), (two.high, 100 - (100 - p) / 2)):
            err = float(got) - np.percentile(x, q, method="inverted_cdf")
            assert -width * 1.001 <= err <= 1e-6 * a.max(), (p, q, err / width)


def _kl_reference(hist, nq):
    """TensorRT's loop, transcribed term by term: Counter, digitize and a hand-written KL."""
    bins = [float(b) for b in hist]
    bins[0] = bins[1]
    divs = []
    for i in range(nq, len(bins) + 1):
        space = np.linspace(0, i, num=nq + 1)
        dig = list(np.digitize(range(i), space) - 1)
        dig = [d if bins[j] != 0 else -1 for j, d in enumerate(dig)]
        dens = [0.0] * nq
        for j, d in enumerate(dig):
            if d != -1:
                dens[d] += bins[j]
        for d, n in Counter(dig).items():
            if d != -1:
                dens[d] /= n
        q = [dens[d] if d != -1 else 0.0 for d in dig]
        p = bins[:i]
        p[-1] += sum(bins[i:])
        ps, qs = sum(p), sum(q)
        kl = 0.0
        for a, b in zip(p, q):
            if a > 0:
                kl = np.inf if b == 0 else kl + a / ps * np.log((a / ps) / (b / qs))
        divs.append(kl)
    divs = np.array(divs)
    return nq + len(divs) - 1 - int(np.argmin(divs[::-1]))


@pytest.mark.parametrize("trial", range(4))
def test_entropy_threshold_is_brute_force_kl(trial):
    rng = _rng()
    n, nq = int(rng.integers(12, 40)), int(rng.integers(3, 9))
    hist = rng.integers(0, 50, n) * (rng.random(n) < 0.8)
    hist[1] = max(hist[1], 1)
    edges = np.linspace(0, rng.uniform(0.5, 4), n + 1)
    assert entropy_threshold(hist, edges, nq) == edges[_kl_reference(hist, nq)]


def test_entropy_clips_outliers():
    rng = _rng()
    x = rng.standard_normal(100_000).astype(np.float32)
    x[:20] *= 40  # a few outliers far out
    c = precision.calibrate(x, "entropy")
    assert 2.0 < float(c.high) < 0.5 * np.abs(x).max()
    assert precision.calibrate(x, "entropy", symmetric=False).low >= x.min()


def test_per_channel_calibration():
    rng = _rng()
    w = _data(rng, (5, 3, 40))
    for m in ("minmax", "percentile", "entropy"):
        c = precision.calibrate(w, m, axis=0, num_bins=256)
        for k in range(5):
            one = precision.calibrate(w[k], m, num_bins=256)
            assert c.high[k] == one.high and c.scale[k] == one.scale
        assert c.quantize(w).scale.shape == (5,)


@pytest.mark.parametrize(
    ("args", "kwargs", "err", "match"),
    [
        ((np.zeros(0, np.float32),), {}, InputError, "empty"),
        ((np.array([1.0, np.inf], np.float32),), {}, InputError, "NaN/inf"),
        ((np.ones(4, np.float32), "kl"), {}, InputError, "method"),
        ((np.ones(4, np.float32), "percentile"), {"percentile": 101}, InputError, "percentile"),
        ((np.ones(4, np.float32), "entropy"), {"num_bins": 64}, InputError, "num_bins"),
        ((np.ones((2, 4), np.float32),), {"axis": 3}, InputError, "axis"),
        ((np.ones(4, np.float32),), {"symmetric": "yes"}, InputTypeError, "symmetric"),
        (("abc",), {}, InputTypeError, "samples"),
    ],
)
def test_calibrate_bad_input(args, kwargs, err, match):
    with pytest.raises(err, match=match):
        precision.calibrate(*args, **kwargs)


# ---- int8 error bounds ---------------------------------------------------------------------------
@pytest.mark.parametrize("K", [16, 144, 1152])
@pytest.mark.parametrize("dist", ["normal", "uniform", "laplace"])
def test_int8_bounds_hold_and_are_tight(K, dist):
    rng = _rng()
    x, w = _data(rng, (128, K), dist), _data(rng, (K, 24), dist)
    for gran in ("per_tensor", "per_channel"):
        xq = precision.quantize(x, scheme=str(rng.choice(["symmetric", "asymmetric"])))
        wq = precision.quantize(w, granularity=gran, axis=1)
        b = precision.int8_bounds(x, w, xq, wq)
        y = x.astype(np.float64) @ w.astype(np.float64)
        y_q = np.asarray(xq.dequantize(), np.float64) @ np.asarray(wq.dequantize(), np.float64)
        err = np.abs(y_q - y)
        assert np.all(err <= b.deterministic) and np.all(err <= b.probabilistic)
        ratio = float(np.max(err / b.probabilistic))
        assert ratio > 0.1, f"the probabilistic bound is {1 / ratio:.0f}x the largest measured error"
        m = precision.compare(y_q, y, abs_ref=b.abs_ref)
        precision.assert_within_budget(m, precision.int8_budget("int8", b))


def test_int8_bounds_account_for_clipping():
    rng = _rng()
    x, w = _data(rng, (64, 256), "laplace"), _data(rng, (256, 8))
    cal = precision.calibrate(x, "percentile", percentile=99.0)
    xq, wq = cal.quantize(x), precision.quantize(w)
    assert np.any(np.abs(x) > cal.high)
    b = precision.int8_bounds(x, w, xq, wq)
    y_q = np.asarray(xq.dequantize(), np.float64) @ np.asarray(wq.dequantize(), np.float64)
    err = np.abs(y_q - x.astype(np.float64) @ w.astype(np.float64))
    assert np.all(err <= b.deterministic) and np.all(err <= b.probabilistic)
    unclipped = precision.int8_bounds(x, w, precision.quantize(x), wq)
    assert b.relative() != unclipped.relative()


def test_int8_bounds_bad_input():
    x, w = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    xq, wq = precision.quantize(x), precision.quantize(w)
    with pytest.raises(InputError, match="share K"):
        precision.int8_bounds(x, w.T, xq, wq)
    with pytest.raises(InputError, match="per output channel"):
        precision.int8_bounds(x, w, xq, precision.quantize(w, granularity="per_channel", axis=0))
    with pytest.raises(InputTypeError, match="QuantizedTensor"):
        precision.int8_bounds(x, w, x, wq)
    with pytest.raises(InputTypeError, match="Int8Bounds"):
        precision.int8_budget("b", precision.layer_bounds(3))

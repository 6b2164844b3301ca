"""Fuzz every public entry point with drawn argument values AND types.

For each call the outcome must be one of:

* a result, checked against the reference where there is one (matmul against numpy, conv2d and the
  fused Conv + ReLU against ``lax.conv_general_dilated``, round_to against ``ml_dtypes`` casts,
  compare's invariants, a HardwareConfig whose largest instruction costs stay representable), and
  never NaN where the inputs were finite;
* or the package's error (:class:`~npu_jax.errors.NpuError`, or exactly ``ValueError`` /
  ``TypeError`` / ``FileNotFoundError``, never a subclass such as ``JSONDecodeError`` or
  ``UnicodeDecodeError``) whose message names one of the entry point's parameters.

Any other exception fails, and so does a call that runs past its timeout (a hang).

Each argument is drawn either from values that are valid or from values that are wrong for it (a
string or an int where a bool is asked, a bool where a count is, object / complex arrays, huge
seeds and counts, ...). A call whose arguments are all valid compiles a kernel (seconds), so the
default run lets at most one such call per kernel entry point through and skips the valid
tile_search (tens of seconds); it takes ~30 s. ``NPU_JAX_FUZZ=long`` multiplies the examples by 10
and lets valid calls through 10 times per entry point (docs/errors.md). The calls drawn are
counted and printed at the end of the module (``-s``).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import fusion  # noqa: E402
import npu_jax  # noqa: E402
import precision  # noqa: E402
from npu_jax import Assumed, ConvTiling, HardwareConfig, MatmulTiling, Policy  # noqa: E402
from npu_jax.errors import NpuError  # noqa: E402
from npu_jax.hw import costs, presets  # noqa: E402
from npu_jax.workload.conv import canonicalize  # noqa: E402

LONG = os.environ.get("NPU_JAX_FUZZ", "") == "long"
SCALE = 10 if LONG else 1
VALID_KERNEL_CALLS = 10 if LONG else 1  # per kernel entry point: each compiles (seconds)
CALLS = {"n": 0}
VALID = {}
HW = presets.tiny()
PLAIN_ERRORS = (ValueError, TypeError, FileNotFoundError)


def fuzz_settings(n: int):
    return settings(
        max_examples=n * SCALE,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


@pytest.fixture(scope="module", autouse=True)
def _report_calls():
    yield
    print(
        f"\ntest_fuzz: {CALLS['n']} calls drawn ({'long' if LONG else 'default'} run); valid kernel calls {VALID}"
    )


@contextlib.contextmanager
def time_limit(seconds: float):
    """A hang fails: SIGALRM after ``seconds`` (the main thread, where pytest runs tests)."""

    def hang(signum, frame):
        raise TimeoutError(f"call ran past {seconds} s")

    old = signal.signal(signal.SIGALRM, hang)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def outcome(params, call, timeout: float = 20.0, allowed=()):
    """Run ``call``; return its result, or None when it raised an allowed error naming a parameter."""
    CALLS["n"] += 1
    try:
        with time_limit(timeout):
            return call()
    except TimeoutError:
        raise
    except allowed:
        return None
    except Exception as e:  # the property under test: which exceptions escape
        ok_type = isinstance(e, NpuError) or type(e) in PLAIN_ERRORS
        assert ok_type, f"{type(e).__name__} escaped: {e}"
        msg = str(e)
        assert any(p in msg for p in params), f"{type(e).__name__} names no parameter of {params}: {msg}"
        return None


MODE = {"valid": False}  # set by kernel_fuzz's valid runs: every argument drawn valid


def arg(draw, good, bad):
    """(valid?, value): in a valid run a valid value; else a valid one (4 in 5) or a wrong one (the
    wrong one is hypothesis's simplest)."""
    ok = MODE["valid"] or draw(st.integers(0, 99)) >= 20
    return (True, draw(good)) if ok else (False, draw(bad))


def gate(name: str, all_ok: bool, valid: bool) -> None:
    """The invalid runs of a kernel entry point reject all-valid draws (each would compile, seconds);
    the valid runs (``VALID_KERNEL_CALLS`` examples) draw only valid arguments."""
    if not valid:
        assume(not all_ok)
    else:
        assert all_ok
        VALID[name] = VALID.get(name, 0) + 1


def kernel_fuzz(n_invalid: int):
    """Two tests from one body ``body(draw, valid)``: ``n_invalid`` examples with at least one wrong
    argument each (no compile), and VALID_KERNEL_CALLS examples of valid arguments (each compiles)."""

    def wrap(body):
        @pytest.mark.parametrize("valid", [False, True], ids=["invalid", "valid"])
        def test(valid):
            n = VALID_KERNEL_CALLS if valid else n_invalid * SCALE
            s = settings(
                max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck)
            )
            MODE["valid"] = valid
            try:
                s(given(st.data())(lambda data: body(data.draw, valid)))()
            finally:
                MODE["valid"] = False

        test.__name__ = body.__name__
        return test

    return wrap


def floats(shape):
    return st.integers(0, 2**32 - 1).map(
        lambda s: np.random.default_rng(s).uniform(-4, 4, shape).astype(np.float32)
    )


NOT_ARRAY = st.sampled_from(
    [None, "x", b"x", {}, 3 + 0j, np.array([[1 + 2j]]), np.array([[None, 1.0]], object), np.array([["a"]])]
)
NOT_BOOL = st.sampled_from(["no", "yes", 1, 0, 1.0, None, "False", [], np.int64(1)])
NOT_COUNT = st.sampled_from(["8", 1.5, True, -1, None, math.nan, 2**70, [8]])
NOT_HW = st.sampled_from(["tiny", "910b", 5, {}, None.__class__])
NOT_POLICY = st.sampled_from(["fp16", "bf16", 1, {}, Policy(seed=2**64), Policy(seed=-5)])
NOT_CHECKS = st.sampled_from([5, 1.0, "racechek", ("racecheck", "bogus"), {"a": 1}])
NOT_TRACE = st.sampled_from(["no", "yes", 1.5, -1, 2**40, 10**9, None, [1]])
TRACE = st.sampled_from([False, 0, 16])


def _tol(ref_abs, operand):
    u = {"fp16": 2.0**-11, "bf16": 2.0**-8, "fp32": 2.0**-24}[operand]
    return 4 * u * ref_abs + 1e-6


# ---- matmul ---------------------------------------------------------------------------------------
MM_PARAMS = ("a", "b", "hw", "tiling", "MatmulTiling", "policy", "trace", "checks", "matmul")


@kernel_fuzz(8)
def test_fuzz_matmul(d, valid):
    m, k, n = d(st.sampled_from([16, 32])), d(st.sampled_from([16, 32])), d(st.sampled_from([16, 48]))
    oka, a = arg(d, floats((m, k)), NOT_ARRAY | st.just(np.ones((m, k, 2), np.float32)))
    okb, b = arg(d, floats((k, n)), NOT_ARRAY | st.just(np.ones((k + 16, n), np.float32)))
    okh, hw = arg(d, st.sampled_from([HW]), NOT_HW)
    bad_tilings = st.sampled_from([(16, 16), "auto", ConvTiling(ho=4, wo=4, n=16, cin1=1, k_l0=16)])
    okt, tiling = arg(d, st.sampled_from([None, MatmulTiling(m=16, n=16, k_l1=16, k_l0=16)]), bad_tilings)
    okp, policy = arg(d, st.sampled_from([None, Policy()]), NOT_POLICY)
    okr, trace = arg(d, TRACE, NOT_TRACE)
    okc, checks = arg(d, st.sampled_from(["none", None]), NOT_CHECKS)
    gate("matmul", all((oka, okb, okh, okt, okp, okr, okc)), valid)
    kw = dict(hw=hw, tiling=tiling, policy=policy, trace=trace, checks=checks)
    r = outcome(MM_PARAMS, lambda: npu_jax.matmul(a, b, **kw), timeout=240)
    if r is None:
        return
    c, rep = r
    c = np.asarray(c, np.float64)
    ref = a.astype(np.float16).astype(np.float64) @ b.astype(np.float16).astype(np.float64)
    ref_abs = np.abs(a.astype(np.float16).astype(np.float64)) @ np.abs(
        b.astype(np.float16).astype(np.float64)
    )
    assert not np.isnan(c).any() and rep.cycles > 0
    assert np.all(np.abs(c - ref) <= _tol(ref_abs, "fp16")), np.max(np.abs(c - ref))


# ---- conv2d and the fusion calls --------------------------------------------------------------------
CONV_PARAMS = (
    "x", "w", "stride", "padding", "dilation", "strategy", "hw", "tiling", "ConvTiling", "policy",
    "groups", "trace", "timing_only", "checks", "kernel", "channel", "conv2d", "epilogue", "bias",
    "residual", "fused", "bound", "g",
)  # fmt: skip


def conv_ref(x, w, pads, stride):
    xh = jnp.asarray(x.astype(np.float16).astype(np.float32))
    wh = jnp.asarray(w.astype(np.float16).astype(np.float32))
    pad = ((pads[0], pads[1]), (pads[2], pads[3]))
    dn = ("NCHW", "OIHW", "NCHW")
    hi = jax.lax.Precision.HIGHEST
    y = jax.lax.conv_general_dilated(xh, wh, stride, pad, dimension_numbers=dn, precision=hi)
    s = jax.lax.conv_general_dilated(
        jnp.abs(xh), jnp.abs(wh), stride, pad, dimension_numbers=dn, precision=hi
    )
    return np.asarray(y, np.float64), np.asarray(s, np.float64)


def _conv_args(d):
    h = d(st.sampled_from([4, 6]))
    kh = d(st.sampled_from([1, 3]))
    okx, x = arg(d, floats((1, 16, h, h)), NOT_ARRAY | st.just(np.ones((16, h, h), np.float32)))
    okw, w = arg(d, floats((16, 16, kh, kh)), NOT_ARRAY | st.just(np.ones((16, 8, kh, kh), np.float32)))
    oks, stride = arg(d, st.sampled_from([1, (1, 1)]), st.sampled_from(["1", 0, 1.5, True, (1, 1, 1), 64]))
    okp, padding = arg(
        d, st.sampled_from([kh // 2, "SAME"]), st.sampled_from([-1, "FULL", 1.5, True, 300, None])
    )
    okt, timing_only = arg(d, st.booleans(), NOT_BOOL)
    okh, hw = arg(d, st.sampled_from([HW]), NOT_HW)
    okr, trace = arg(d, TRACE, NOT_TRACE)
    okc, checks = arg(d, st.sampled_from(["none"]), NOT_CHECKS)
    okq, policy = arg(d, st.sampled_from([None, Policy()]), NOT_POLICY)
    oks2, strategy = arg(d, st.sampled_from(["img2col"]), st.sampled_from(["winograd", 3, None]))
    kw = dict(stride=stride, padding=padding, hw=hw, policy=policy, trace=trace, checks=checks)
    kw.update(timing_only=timing_only, strategy=strategy)
    ok = all((okx, okw, oks, okp, okt, okh, okr, okc, okq, oks2))
    return ok, x, w, kw


def _check_conv(x, w, y, rep, kw, relu=False, bias=None):
    assert rep.cycles > 0
    if kw["timing_only"]:
        return
    g = canonicalize(x.shape, w.shape, kw["stride"], kw["padding"])
    ref, s = conv_ref(x, w, g.pads, g.stride)
    if bias is not None:
        ref = ref + bias.astype(np.float64)[None, :, None, None]
        s = s + np.abs(bias.astype(np.float64))[None, :, None, None]
    if relu:
        ref = np.maximum(ref, 0)
    y = np.asarray(y, np.float64)
    assert not np.isnan(y).any()
    assert np.all(np.abs(y - ref) <= _tol(s, "fp16")), np.max(np.abs(y - ref))


@kernel_fuzz(6)
def test_fuzz_conv2d(d, valid):
    ok, x, w, kw = _conv_args(d)
    okt, tiling = arg(d, st.sampled_from([None]), st.sampled_from([(4, 4), "auto", MatmulTiling()]))
    okg, groups = arg(d, st.sampled_from([1]), st.sampled_from([2, True, "1", 0]))
    gate("conv2d", ok and okt and okg, valid)
    r = outcome(CONV_PARAMS, lambda: npu_jax.conv2d(x, w, tiling=tiling, groups=groups, **kw), timeout=240)
    if r is not None:
        _check_conv(x, w, r[0], r[1], kw)


@kernel_fuzz(5)
def test_fuzz_conv2d_fused(d, valid):
    ok, x, w, kw = _conv_args(d)
    oke, epilogue = arg(
        d,
        st.sampled_from([("relu",), ["bias", "relu"]]),
        st.sampled_from([5, ["gelu"], [("leaky_relu", "x")], {"relu": 1}, [("cast", "bf16"), "relu"]]),
    )
    has_bias = isinstance(epilogue, list) and "bias" in epilogue
    okb, bias = arg(
        d, floats((16,)) if has_bias else st.just(None), NOT_ARRAY | st.just(np.ones(7, np.float32))
    )
    okf, fused = arg(d, st.booleans(), NOT_BOOL)
    gate("conv2d_fused", ok and oke and okb and okf, valid)
    call = lambda: fusion.conv2d_fused(x, w, epilogue, bias=bias, fused=fused, **kw)  # noqa: E731
    r = outcome(CONV_PARAMS, call, timeout=240)
    if r is not None:
        _check_conv(x, w, r[0], r[1], kw, relu=True, bias=bias if has_bias else None)


@kernel_fuzz(4)
def test_fuzz_conv2d_bounded(d, valid):
    g = canonicalize((1, 16, 6, 6), (16, 16, 3, 3), 1, 1)
    okg, layer = arg(
        d,
        st.sampled_from([g, canonicalize((1, 16, 4, 4), (16, 16, 3, 3), 1, 1)]),
        st.sampled_from([canonicalize((1, 16, 8, 8), (16, 16, 3, 3), 1, 1), (1, 16, 6, 6), None]),
    )
    okx, x = arg(d, floats((1, 16, 6, 6)), NOT_ARRAY | st.just(np.ones((1, 16, 8, 8), np.float32)))
    okt, timing_only = arg(d, st.just(True), NOT_BOOL)
    okti, tiling = arg(
        d, st.just(ConvTiling(ho=4, wo=4, n=16, cin1=1, k_l0=16)), st.sampled_from([None, (4, 4)])
    )
    gate("conv2d_bounded", okg and okx and okt and okti, valid)
    w = np.ones((16, 16, 3, 3), np.float32)
    call = lambda: npu_jax.conv2d_bounded(  # noqa: E731
        x, w, layer, bound=g, strategy="img2col", tiling=tiling, hw=HW, timing_only=timing_only, checks="none"
    )
    r = outcome(CONV_PARAMS, call, timeout=240)
    if r is not None:
        assert r[1].cycles > 0 and r[0].shape == (
            1,
            16,
            g.h + g.pads[0] + g.pads[1],
            g.w + g.pads[2] + g.pads[3],
        )


# ---- hardware ---------------------------------------------------------------------------------------
HW_FIELDS = tuple(f for f in HardwareConfig.__dataclass_fields__) + tuple(Assumed.__dataclass_fields__)
HW_PARAMS = HW_FIELDS + ("HardwareConfig", "Assumed", "Mmad", "alignment", "L1", "L0A", "L0B", "L0C", "UB")
HW_VALUES = st.one_of(
    st.integers(-(2**65), 2**65),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([True, False, "32", None, 1e-9, 1e-4, 0.5, 512, 1024 * 1024, 2**31, 2**40]),
)


@fuzz_settings(60)
@given(st.data())
def test_fuzz_hardware_config(data):
    d = data.draw
    fields = d(st.lists(st.sampled_from(HW_FIELDS[: len(HardwareConfig.__dataclass_fields__)]), max_size=3))
    afields = d(st.lists(st.sampled_from(tuple(Assumed.__dataclass_fields__)), max_size=2))
    kw = {f: d(HW_VALUES) for f in fields if f != "assumed"}
    akw = {f: d(HW_VALUES) for f in afields}

    def build():
        return HardwareConfig(**kw, assumed=Assumed(**akw)) if akw else HardwareConfig(**kw)

    hw = outcome(HW_PARAMS, build)
    if hw is None:
        return
    # every cost representable: the largest DMA and Mmad the kernels can issue fit int32, exactly
    h = costs.HwNumbers.of(hw)
    rate = costs.gm_rate(h, hw.num_cores)
    for c in (
        costs.dma_in(h, hw.l1_bytes, 1, rate),
        costs.dma_out(h, hw.ub_bytes, 1, rate),
        costs.load_l0a(h, hw.l0a_bytes),
        costs.fixpipe_l1(h, 16, hw.l0c_bytes // 64),
    ):
        assert 0 <= c < 2**31


INI_KEYS = ("ai_core_cnt", "l0_a_size", "l1_size", "ddr_rate", "cube_freq", "l0_c_size", "bogus_key")


@fuzz_settings(25)
@given(data=st.data())
def test_fuzz_from_ini(tmp_path_factory, data):
    d = data.draw
    kind = d(st.sampled_from(["text", "bytes", "dir", "path"]))
    tmp = tmp_path_factory.mktemp("ini")
    p = tmp / "chip.ini"
    if kind == "text":
        lines = d(
            st.lists(
                st.one_of(
                    st.sampled_from(
                        ["[SoCInfo]", "[AICoreSpec]", "[AICoreMemoryRates]", "[CPUCache]", "", "junk"]
                    ),
                    st.builds(
                        lambda k, v: f"{k}={v}",
                        st.sampled_from(INI_KEYS),
                        st.one_of(st.integers(-5, 2**40), st.floats(), st.text(max_size=4)),
                    ),
                ),
                max_size=6,
            )
        )
        p.write_text("\n".join(lines), encoding="utf-8")
    elif kind == "bytes":
        p.write_bytes(d(st.binary(max_size=40)))
    target = {"dir": tmp, "path": d(st.sampled_from([5, None, 1.5]))}.get(kind, p)
    params = HW_PARAMS + INI_KEYS + ("chip.ini", "path", "ini")
    hw = outcome(params, lambda: HardwareConfig.from_ini(target))
    if hw is not None:
        assert "chip.ini" in hw.name and isinstance(hw, HardwareConfig)


# ---- precision ------------------------------------------------------------------------------------------
@fuzz_settings(25)
@given(st.data())
def test_fuzz_round_to(data):
    d = data.draw
    okx, x = arg(d, st.lists(st.floats(-1e4, 1e4), min_size=1, max_size=6).map(np.float32), NOT_ARRAY)
    fmt = d(st.sampled_from(["fp16", "bf16", "fp32", "fp8_e5m2", "fp17", 16, None]))
    mode = d(st.sampled_from(["nearest_even", "toward_zero", "nearest", 0]))
    oks, subnormals = arg(d, st.booleans(), NOT_BOOL)
    params = ("x", "fmt", "mode", "subnormals", "overflow", "key", "round_to")
    r = outcome(params, lambda: precision.round_to(x, fmt, mode, subnormals=subnormals))
    if r is None:
        return
    r = np.asarray(r, np.float64)
    assert not np.isnan(r).any()
    if mode == "nearest_even" and subnormals and fmt in ("fp16", "bf16"):
        expect = np.asarray(x, np.float32).astype({"fp16": np.float16, "bf16": ml_dtypes.bfloat16}[fmt])
        np.testing.assert_array_equal(r, expect.astype(np.float64))


@fuzz_settings(40)
@given(st.data())
def test_fuzz_compare(data):
    d = data.draw
    n = d(st.integers(1, 8))
    base = d(st.lists(st.floats(-1e3, 1e3), min_size=n, max_size=n)).copy()
    ref = np.asarray(base, np.float64)
    out = ref.copy()
    if d(st.booleans()):
        out = out + d(st.floats(-1, 1))
    special = d(st.sampled_from([None, "nan_ref", "inf_ref", "nan_out", "zeros"]))
    if special == "nan_ref":
        ref[0] = np.nan
    elif special == "inf_ref":
        ref[-1] = np.inf
    elif special == "nan_out":
        out[0] = np.nan
    elif special == "zeros":
        out, ref = np.zeros(n), np.zeros(n)
    oko, o = arg(d, st.just(out), NOT_ARRAY | st.just(out[:-1] if n > 1 else np.zeros(0)))
    okf, floor = arg(
        d, st.sampled_from([1e-3, 0.5, 1]), st.sampled_from([0, -1, math.nan, math.inf, "1e-3", True, 2])
    )
    params = ("out", "ref", "abs_ref", "fmt", "floor", "empty", "compare")
    m = outcome(params, lambda: precision.compare(o, ref, floor=floor))
    if m is None:
        return
    finite = np.all(np.isfinite(out)) and np.all(np.isfinite(ref))
    if not finite:
        assert not m.vendor_pass and m.rel_l2 == math.inf and not m.finite
    else:
        assert not any(math.isnan(v) for v in (m.rel_l2, m.max_abs, m.max_rel, m.cosine, m.vendor_ratio))
        if np.array_equal(out, ref):
            assert m.rel_l2 == 0 and m.max_abs == 0 and m.vendor_pass


BASELINE_TEXT = st.sampled_from(
    [
        "not json",
        "[1, 2]",
        "{}",
        '{"metrics": 5}',
        '{"metrics": {"rel_l2": "x"}}',
        '{"metrics": {"speed": 1}}',
        '{"metrics": {"rel_l2": 0.0, "n_nan": 0}}',
        '{"metrics": {"rel_l2": 1e-9, "max_abs": 1e-9}}',
    ]
)


@fuzz_settings(20)
@given(data=st.data())
def test_fuzz_assert_precision(tmp_path_factory, data):
    d = data.draw
    tmp = tmp_path_factory.mktemp("baselines")
    content = d(st.one_of(BASELINE_TEXT, st.binary(max_size=20)))
    (tmp / "b.json").write_bytes(content if isinstance(content, bytes) else content.encode())
    name = d(st.sampled_from(["b", "../b", "a/b", "", 5, "missing"]))
    a = np.random.default_rng(d(st.integers(0, 2**32 - 1))).standard_normal(8)
    result = d(st.sampled_from([(a, a), (a + 1e-3, a), None, "m", (a,)]))
    update = d(st.sampled_from([False, "yes", 1]))
    params = ("result", "baseline", "metrics", "b.json", "directory", "update", "rtol", "missing")
    call = lambda: precision.assert_precision(result, baseline=name, directory=tmp, update=update)  # noqa: E731
    outcome(params, call, allowed=(AssertionError,))  # drift is assert_precision's own verdict


# ---- tile_search -----------------------------------------------------------------------------------
SEARCH_PARAMS = (
    "steps", "seed", "max_evals", "starts", "round_every", "finalists", "width", "budget", "learning_rate",
    "objective", "fused", "verify", "optimizer", "hw", "x shape", "w shape", "padding", "stride", "x", "w",
)  # fmt: skip


@fuzz_settings(8)
@given(st.data())
def test_fuzz_tile_search(data):
    d = data.draw
    oks, steps = arg(d, st.integers(1, 2), NOT_COUNT)
    okd, seed = arg(d, st.integers(0, 2**63 - 1), st.sampled_from([-1, 2**64, 2**70, "0", 1.5, None]))
    oke, max_evals = arg(d, st.sampled_from([16, 24]), st.sampled_from([0, "10", True, 2**40, 1.5]))
    okb, budget = arg(d, st.sampled_from([0.01, 1.0]), st.sampled_from([0, 2.0, math.nan, "1%"]))
    okf, fused = arg(d, st.booleans(), NOT_BOOL)
    okx, x_shape = arg(d, st.just((1, 16, 4, 4)), st.sampled_from([("1", "16", "4", "4"), 5, (1, 16, 4)]))
    # a valid search compiles its descent (tens of seconds): only the long run lets them through
    all_ok = all((oks, okd, oke, okb, okf, okx))
    assume(LONG or not all_ok)
    if all_ok:
        VALID["tile_search"] = VALID.get("tile_search", 0) + 1
    call = lambda: npu_jax.search.tile_search(  # noqa: E731
        x_shape, (16, 16, 1, 1), hw=HW, steps=steps, seed=seed, max_evals=max_evals, budget=budget, fused=fused,
        verify=False,
    )  # fmt: skip
    r = outcome(SEARCH_PARAMS, call, timeout=300)
    if r is not None:
        assert r.model_cycles > 0 and r.evals <= max_evals + 64

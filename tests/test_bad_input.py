"""Bad input across the public API: each case raises a clear error of the right type whose message
names the parameter (the table in docs/sanitizers.md lists them), and NaN / inf inputs flow through
as the hardware's overflow mode says.

Every case fails before any kernel is compiled, so the table runs in a second or two; the NaN / inf
tests run two small GEMMs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import npu_jax
from npu_jax import ConvTiling, HardwareConfig, MatmulTiling, Policy
from npu_jax.errors import CapacityError, TilingError, WindowError
from npu_jax.hw import presets

HW = presets.tiny()
X = np.ones((1, 16, 8, 8), np.float32)
W = np.ones((16, 16, 3, 3), np.float32)
A = np.ones((32, 32), np.float32)
T_OK = ConvTiling(ho=4, wo=4, n=16, cin1=1, k_l0=16)


def conv(**kw):
    args = dict(x=X, w=W, hw=HW, tiling=T_OK)
    args.update(kw)
    return lambda: npu_jax.conv2d(args.pop("x"), args.pop("w"), **args)


def mm(a=A, b=A, **kw):
    return lambda: npu_jax.matmul(a, b, **{"hw": HW, **kw})


def ini(tmp_path_factory, text):
    p = tmp_path_factory.mktemp("ini") / "chip.ini"
    p.write_text(text)
    return lambda: HardwareConfig.from_ini(p)


# (id, callable or ini text, error type, regex the message must match: it names the parameter)
CASES = [
    # conv2d: shapes and geometry
    ("x rank 3", conv(x=X[0]), ValueError, r"x must be 4-D NCHW.*got shape \(16, 8, 8\).*x\[None\]"),
    ("w rank 2", conv(w=W[:, :, 0, 0]), ValueError, r"w must be 4-D OIHW"),
    (
        "channel mismatch",
        conv(w=W[:, :8]),
        ValueError,
        r"channel mismatch: x has C=16.*w\.shape\[1\] must be C / groups = 16, got 8",
    ),
    ("empty batch", conv(x=X[:0]), ValueError, r"x \(0, 16, 8, 8\).*must have positive sizes"),
    ("negative padding", conv(padding=-1), ValueError, r"padding must be >= 0.*\(-1, -1, -1, -1\)"),
    ("negative pad one side", conv(padding=((0, -2), (1, 1))), ValueError, r"padding must be >= 0.*-2"),
    ("padding > 255", conv(padding=300), ValueError, r"padding .*300.*Load3D's 0\.\.255"),
    (
        "unknown padding mode",
        conv(padding="FULL"),
        ValueError,
        r"padding must be .*'SAME' or 'VALID'; got 'FULL'",
    ),
    ("padding wrong type", conv(padding=1.5), TypeError, r"padding must be"),
    ("zero stride", conv(stride=0), ValueError, r"stride must be >= 1, got \(0, 0\)"),
    ("stride triple", conv(stride=(1, 1, 1)), TypeError, r"stride must be an int or a pair"),
    ("stride float", conv(stride=1.5), TypeError, r"stride must be an int or a pair"),
    ("stride > 63", conv(stride=64), ValueError, r"stride <= 63"),
    ("zero dilation", conv(dilation=0), ValueError, r"dilation must be >= 1, got \(0, 0\)"),
    ("bool dilation", conv(dilation=True), TypeError, r"dilation must be an int or a pair"),
    (
        "kernel larger than padded input",
        conv(w=np.ones((16, 16, 9, 9), np.float32)),
        ValueError,
        r"kernel 9x9.*larger than the padded input 8x8",
    ),
    (
        "dilated kernel too large",
        conv(dilation=5),
        ValueError,
        r"dilation \(5, 5\) spans 11x11.*padded input",
    ),
    (
        "groups vs w",
        conv(groups=2),
        ValueError,
        r"with groups=2 w\.shape\[1\] must be C / groups = 8, got 16",
    ),
    ("groups not dividing C", conv(groups=3), ValueError, r"groups=3 must divide the input channels C=16"),
    ("groups zero", conv(groups=0), ValueError, r"groups must be a positive int.*groups=0"),
    ("int input", conv(x=X.astype(np.int32)), TypeError, r"x must be a float array, got int32"),
    ("complex weights", conv(w=W.astype(np.complex64)), TypeError, r"w must be real, got dtype complex64"),
    ("x is None", conv(x=None), TypeError, r"x must be an array, got NoneType"),
    ("unknown strategy", conv(strategy="winograd"), ValueError, r"strategy must be one of .*'winograd'"),
    ("hw as a string", conv(hw="910b"), TypeError, r"hw must be a HardwareConfig.*presets\.get\('910b'\)"),
    ("policy as a string", conv(policy="fp16"), TypeError, r"policy must be an npu_jax\.Policy"),
    (
        "trace negative",
        conv(trace=-1),
        ValueError,
        r"trace must be in \[0, 2147483647\], got -1; pass a bool or an event capacity >= 0",
    ),
    ("timing_only not a bool", conv(timing_only="yes"), TypeError, r"timing_only must be True or False"),
    ("unknown check", conv(checks="racechek"), ValueError, r"checks: unknown check\(s\) \['racechek'\]"),
    ("tiling wrong type", conv(tiling=(4, 4)), TypeError, r"tiling must be a ConvTiling or None, got tuple"),
    # tilings: values, alignment, capacity
    (
        "ConvTiling n off 16",
        lambda: ConvTiling(ho=4, wo=4, n=24, cin1=1, k_l0=16),
        TilingError,
        r"ConvTiling\.n .* multiple of 16, got 24",
    ),
    (
        "ConvTiling zero ho",
        lambda: ConvTiling(ho=0, wo=4, n=16, cin1=1, k_l0=16),
        TilingError,
        r"ConvTiling\.ho must be a positive int, got 0",
    ),
    (
        "ConvTiling float wo",
        lambda: ConvTiling(ho=4, wo=4.0, n=16, cin1=1, k_l0=16),
        TilingError,
        r"ConvTiling\.wo",
    ),
    (
        "ConvTiling 3 stages",
        lambda: ConvTiling(ho=4, wo=4, n=16, cin1=1, k_l0=16, l1_stages=3),
        TilingError,
        r"ConvTiling\.l1_stages must be 1 or 2, got 3",
    ),
    (
        "ConvTiling k_l0 off C0",
        conv(strategy="img2col", tiling=ConvTiling(ho=4, wo=4, n=16, cin1=1, k_l0=24)),
        TilingError,
        r"ConvTiling\.k_l0 must be a multiple of C0=16",
    ),
    (
        "fractal strategy, deep k_l0",
        conv(strategy="relayout", tiling=ConvTiling(ho=4, wo=4, n=16, cin1=1, k_l0=32)),
        TilingError,
        r"k_l0 must be C0=16, got 32.*img2col",
    ),
    (
        "ConvTiling cores > chip",
        conv(tiling=ConvTiling(ho=4, wo=4, n=16, cin1=1, k_l0=16, cores=3)),
        TilingError,
        r"ConvTiling\.cores=3 exceeds tiny's 2 cores",
    ),
    (
        "conv tiling over capacity",
        conv(tiling=ConvTiling(ho=64, wo=64, n=16, cin1=1, k_l0=16)),
        CapacityError,
        r"L1 holds 65536 B but 'x_l1'.*ConvTiling\(ho=64, wo=64, l1_stages=1\): lower ho or wo or l1_stages",
    ),
    (
        "MatmulTiling m off 16",
        lambda: MatmulTiling(m=24),
        TilingError,
        r"MatmulTiling\.m must be a positive multiple of 16",
    ),
    (
        "MatmulTiling k_l1 vs k_l0",
        lambda: MatmulTiling(k_l1=96, k_l0=64),
        TilingError,
        r"MatmulTiling\.k_l1 \(96\) must be a multiple of k_l0 \(64\)",
    ),
    (
        "matmul tiling over capacity",
        mm(tiling=MatmulTiling(m=256, n=256)),
        CapacityError,
        r"'a_l1'.*MatmulTiling\(m=256, k_l1=256, l1_stages=2\): lower m or k_l1 or l1_stages",
    ),
    (
        "matmul cores > chip",
        mm(tiling=MatmulTiling(m=16, n=16, k_l1=32, k_l0=32, cores=4)),
        TilingError,
        r"MatmulTiling\.cores=4 exceeds tiny's 2 cores",
    ),
    # matmul operands
    ("matmul rank", mm(a=A[0]), ValueError, r"matmul takes 2-D a \(M, K\)"),
    ("matmul K mismatch", mm(b=A[:16]), ValueError, r"a's K \(32\) must equal b's K \(16\)"),
    ("matmul int", mm(a=A.astype(np.int32)), TypeError, r"matmul: a must be a float array"),
    ("matmul empty", mm(a=A[:0]), ValueError, r"matmul: a has an empty dimension"),
    ("matmul b None", mm(b=None), TypeError, r"matmul: b must be an array, got NoneType"),
    # hardware, presets, policy
    (
        "l0a not whole fractals",
        lambda: HardwareConfig(l0a_bytes=1000),
        ValueError,
        r"round l0a_bytes to a multiple of 512",
    ),
    (
        "alignment not a power of two",
        lambda: HardwareConfig(l1_align=48, l1_bytes=48 * 1024),
        ValueError,
        r"HardwareConfig\.l1_align .* power of two, got 48",
    ),
    (
        "zero cores",
        lambda: HardwareConfig(num_cores=0),
        ValueError,
        r"HardwareConfig\.num_cores must be a positive int",
    ),
    (
        "too many event ids",
        lambda: HardwareConfig(num_event_ids=99),
        ValueError,
        r"HardwareConfig\.num_event_ids must be <= 16",
    ),
    (
        "NaN clock",
        lambda: HardwareConfig(clock_ghz=math.nan),
        ValueError,
        r"HardwareConfig\.clock_ghz must be a finite",
    ),
    (
        "infinite chip bandwidth",
        lambda: HardwareConfig(chip_gm_bytes_per_cycle=math.inf),
        ValueError,
        r"HardwareConfig\.chip_gm_bytes_per_cycle must be None or a finite",
    ),
    (
        "subnormal GM bandwidth",  # found by test_fuzz: the cycles' quotient overflowed to inf
        lambda: HardwareConfig(gm_bytes_per_cycle=2.2250738585e-313),
        ValueError,
        r"would cost inf cycles .* raise gm_bytes_per_cycle to at least",
    ),
    (
        "coupled not a bool",
        lambda: HardwareConfig(coupled="yes"),
        TypeError,
        r"HardwareConfig\.coupled must be True or False",
    ),
    (
        "overflow mode",
        lambda: HardwareConfig(overflow_mode="wrap"),
        ValueError,
        r"overflow_mode must be one of",
    ),
    ("unknown field", lambda: HardwareConfig(l0d_bytes=1), TypeError, r"l0d_bytes"),
    ("unknown preset", lambda: presets.get("ascend950"), ValueError, r"preset must be one of .*'ascend950'"),
    ("preset name type", lambda: presets.get(910), TypeError, r"preset name must be a string"),
    ("Policy operand", lambda: Policy(operand="int4"), ValueError, r"Policy\.operand must be one of"),
    (
        "Policy overflow",
        lambda: Policy(overflow="wrap"),
        ValueError,
        r"Policy\.overflow must be None, 'inf' or 'saturate'",
    ),
    # ini files
    (
        "ini unknown key",
        "[AICoreSpec]\nl0_a_sizes=65536\n",
        ValueError,
        r"unknown key 'l0_a_sizes' in \[AICoreSpec\]",
    ),
    (
        "ini value not a number",
        "[SoCInfo]\nai_core_cnt=many\n",
        ValueError,
        r"key 'ai_core_cnt' in \[SoCInfo\] must be a number",
    ),
    (
        "ini value illegal",
        "[AICoreSpec]\nl0_a_size=1000\n",
        ValueError,
        r"l0a_bytes.*\(from l0_a_size = 1000 in \[AICoreSpec\]\)",
    ),
    ("ini without sections", "l1_size=1\n", ValueError, r"not a platform ini file.*\[SoCInfo\]"),
    ("ini missing", None, FileNotFoundError, r"platform ini not found"),
    # static out-of-range windows (memcheck's static part)
    (
        "event id out of range",
        lambda: _core().set_flag("MTE2_MTE1", 8),
        ValueError,
        r"event id must be in 0\.\.7",
    ),
    ("event name", lambda: _core().set_flag("MTE2-MTE1"), ValueError, r"event must be 'SRC_DST'"),
    ("barrier pipe", lambda: _core().pipe_barrier("CUBE"), ValueError, r"pipe must be 'ALL' or one of"),
    (
        "GM window past the tensor",
        lambda: _core().gm_window("g", (30, 0), (4, 16)),
        WindowError,
        r"window of 'g' .* leaves the tensor on dim 0",
    ),
    ("at_tile > 4 coordinates", lambda: _core().at_tile(a=0, b=0, c=0, d=0, e=0), ValueError, r"at most 4"),
]


def _core():
    from conftest import make_core

    from npu_jax.core import Plan
    from npu_jax.core.state import GmSpec

    return make_core(
        HW, Plan(HW), [GmSpec("g", (32, 16), (32, 16), "fp16")], {"g": np.ones((32, 16), np.float16)}
    )


def test_there_are_at_least_30_cases():
    assert len(CASES) >= 30 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_clearly(case, tmp_path_factory):
    name, call, err, pattern = case
    if call is None:
        call = lambda: HardwareConfig.from_ini(tmp_path_factory.mktemp("ini") / "nope.ini")  # noqa: E731
    elif isinstance(call, str):
        call = ini(tmp_path_factory, call)
    with pytest.raises(err, match=pattern) as info:
        call()
    assert isinstance(info.value, err) and len(str(info.value)) > 20, name


# ---- NaN and inf inputs: no error; they flow as the chip's overflow mode says -----------------------
@pytest.mark.slow
@pytest.mark.parametrize("coupled", [False, True], ids=["910B-like inf mode", "910-like saturate mode"])
def test_nan_and_inf_inputs_follow_the_overflow_mode(coupled, rng):
    hw = presets.tiny(coupled)
    a = rng.standard_normal((32, 48)).astype(np.float32)
    b = rng.standard_normal((48, 32)).astype(np.float32)
    a[3, 5] = np.nan  # row 3 of C depends on it
    a[7, :] = 1e4  # 1e4 * 48 * |b| overflows fp16 in row 7 (fp32 accumulation does not)
    b[:, 9] = np.abs(b[:, 9]) + 1.0
    a[11, 2] = np.inf  # row 11: inf * b (b has both signs) -> +-inf / NaN
    c, rep = npu_jax.matmul(a, b, hw=hw, checks="all")
    c = np.asarray(c, np.float32)
    ok = np.ones(32, bool)
    ok[[3, 7, 11]] = False
    assert np.all(np.isfinite(c[ok])), "NaN/inf leaked into rows that do not depend on them"
    if not coupled:  # IEEE: NaN stays NaN, overflow becomes inf
        assert np.all(np.isnan(c[3])), c[3]
        assert np.isposinf(c[7, 9]) and not np.all(np.isfinite(c[11]))
    else:  # saturation: NaN -> 0, +-inf -> +-65504 at the conversion out of L0C
        assert np.all(c[3] == 0) and c[7, 9] == 65504.0 and np.all(np.isfinite(c[11]))
        assert np.all(np.abs(c[11]) <= 65504.0)
    assert rep.findings() == []

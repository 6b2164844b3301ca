"""npu_jax.core.rounding.round_to against ml_dtypes / numpy conversions (nearest-even) and against
the definitions of the directed modes, built from the two neighbours in the target format."""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import pytest

from npu_jax.core.rounding import MODES, round_to

DETERMINISTIC = tuple(m for m in MODES if m != "stochastic")
DIRECTED = tuple(m for m in DETERMINISTIC if m != "nearest_even")

NP = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16}
MAX = {"fp16": 65504.0, "bf16": float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)}
TINY = {"fp16": 2.0**-14, "bf16": float(ml_dtypes.finfo(ml_dtypes.bfloat16).tiny)}
U = {"fp16": np.uint16, "bf16": np.uint16}


def _grid_points(fmt, rng, n):
    """n random finite values of fmt (any bit pattern that is not inf/NaN)."""
    b = rng.integers(0, 1 << 16, n, dtype=np.uint32).astype(np.uint16).view(NP[fmt])
    return b[np.isfinite(b.astype(np.float32))]


def _fp32_inputs(fmt, rng, n=1 << 15):
    """n float32 values that probe every rounding decision into fmt."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _fp32_inputs_unchecked(fmt, rng, n)


def _fp32_inputs_unchecked(fmt, rng, n):
    t = NP[fmt]
    g = _grid_points(fmt, rng, n // 6)
    up = np.nextafter(g, np.array(np.inf, t))
    ok = np.isfinite(up.astype(np.float32))
    g, up = g[ok], up[ok]
    g32, up32 = g.astype(np.float64), up.astype(np.float64)
    mid = ((g32 + up32) / 2).astype(np.float32)  # exact ties (a midpoint of fmt fits in fp32)
    near = np.concatenate([np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf))])
    # random bit patterns of fp32 (huge, tiny, inf, NaN), minus fp32 subnormals (tested apart)
    raw = rng.integers(0, 1 << 32, n // 4, dtype=np.uint64).astype(np.uint32).view(np.float32)
    raw = raw[~((np.abs(raw) < np.finfo(np.float32).tiny) & (raw != 0))]
    # values on the grid's own scale, and around powers of two (where the spacing changes)
    scaled = (rng.standard_normal(n // 4) * np.exp2(rng.integers(-26, 17, n // 4))).astype(np.float32)
    p2 = np.exp2(np.arange(-30, 17, dtype=np.float64)).astype(np.float32)
    pw = np.concatenate([p2, np.nextafter(p2, np.float32(0)), np.nextafter(p2, np.float32(np.inf))])
    special = np.array(
        [
            0.0,
            -0.0,
            np.inf,
            -np.inf,
            np.nan,
            65504,
            65519,
            65519.996,
            65520,
            65520.004,
            70000,
            2.0**-24,
            2.0**-25,
            2.0**-25 * 1.5,
            2.0**-26,
            2.0**-14,
            MAX[fmt],
            3.3895e38,
            1.0 + 2.0**-8,
            1.0 + 2.0**-11,
        ],
        np.float32,
    )
    x = np.concatenate([g.astype(np.float32), mid, near, raw, scaled, pw, -pw, special, -special])
    x = x.astype(np.float32)
    x = _no_fp32_subnormals(x) if fmt == "bf16" else x[~((np.abs(x) < 2.0**-126) & (x != 0))]
    # a fixed length (specials first, then the rest shuffled): every eager call sees one shape,
    # so XLA compiles each primitive once per session instead of once per test
    head = np.concatenate([special, -special, pw, -pw])
    rest = rng.permutation(x)
    return np.concatenate([head, rest])[:n] if head.size + rest.size >= n else np.resize(x, n)


def _no_fp32_subnormals(x):
    """Drop inputs whose rounding involves float32 subnormals: inputs below float32's smallest
    normal, and (for bf16, whose grid reaches down there) values below 2^-100, where half-ulp
    differences are float32 subnormals. XLA on CPU flushes those in arithmetic;
    test_fp32_subnormal_range covers that range on its own."""
    x32 = np.asarray(x).astype(np.float32)
    return x[~((np.abs(x32) < 2.0**-100) & (x32 != 0))]


def _assert_same(got, want, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    gn, wn = np.isnan(got.astype(np.float32)), np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(gn, wn, err_msg=f"{what}: NaN positions")
    gb, wb = got.view(np.uint16)[~gn], want.view(np.uint16)[~wn]  # bitwise, so -0.0 != 0.0
    bad = np.flatnonzero(gb != wb)
    assert bad.size == 0, f"{what}: {bad.size} differ, e.g. got {got[~gn][bad[:5]]} want {want[~wn][bad[:5]]}"


def _neighbours(x, fmt):
    """(lo, hi): the largest fmt value <= x and the smallest >= x (+-inf past the finite range)."""
    t = NP[fmt]
    with np.errstate(over="ignore", invalid="ignore"):
        r = x.astype(t)
        r32 = r.astype(np.float32)
        lo = np.where(r32 <= x, r, np.nextafter(r, np.array(-np.inf, t)))
        hi = np.where(r32 >= x, r, np.nextafter(r, np.array(np.inf, t)))
    return lo, hi


def _directed_ref(x, fmt, mode):
    with np.errstate(over="ignore", invalid="ignore"):
        return _directed_ref_unchecked(x, fmt, mode)


def _directed_ref_unchecked(x, fmt, mode):
    """fmt-rounding of float32 x in a directed mode, from the two neighbours of x in fmt."""
    lo, hi = _neighbours(x, fmt)
    if mode == "toward_zero":
        out = np.where(x >= 0, lo, hi)
    elif mode == "up":
        out = hi
    elif mode == "down":
        out = lo
    elif mode == "away":
        # nearest, ties away from zero; past max the grid continues (for deciding) with one
        # more step, which overflows to inf
        step = {"fp16": 65536.0, "bf16": 2.0**128}[fmt]

        def grid(v):
            v = v.astype(np.float64)
            return np.where(np.isinf(v), np.copysign(step, v), v)

        x64 = x.astype(np.float64)
        dlo, dhi = x64 - grid(lo), grid(hi) - x64
        out = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(x >= 0, hi, lo)))
    else:
        raise ValueError(mode)
    exact = lo == hi
    out = np.where(exact | np.isnan(x), x.astype(NP[fmt]), out)
    return out.astype(NP[fmt])


# ---- nearest-even: against the conversion numpy / ml_dtypes implement ----------------------------
@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
def test_nearest_even_matches_astype(rng, fmt):
    x = _fp32_inputs(fmt, rng, n=100_000)
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(NP[fmt])
    got = round_to(x, fmt)
    _assert_same(got, want, fmt)
    _assert_same(jax.jit(round_to, static_argnums=(1, 2))(x, fmt, "nearest_even"), want, f"{fmt} jit")


def test_nearest_even_fp16_landmarks():
    x = np.array(
        [
            65504,
            65519,
            65519.996,
            65520,
            -65520,
            2.0**-25,
            2.0**-25 * 1.0000001,
            2.0**-24 * 1.5,
            2.0**-24 * 2.5,
            1 + 2.0**-11,
            1 + 3 * 2.0**-11,
        ],
        np.float32,
    )
    got = np.asarray(round_to(x, "fp16")).astype(np.float64)
    want = [65504, 65504, 65504, np.inf, -np.inf, 0.0, 2.0**-24, 2.0**-23, 2.0**-23, 1.0, 1 + 2.0**-9]
    np.testing.assert_array_equal(got, want)


# ---- directed modes: against their definitions ------------------------------------------------------
@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
@pytest.mark.parametrize("mode", DIRECTED)
def test_directed_modes(rng, fmt, mode):
    x = _fp32_inputs(fmt, rng)
    got = round_to(x, fmt, mode)
    _assert_same(got, _directed_ref(x, fmt, mode), f"{fmt} {mode}")


def test_directed_modes_jit_equals_eager(rng):
    x = _fp32_inputs("fp16", rng)
    f = jax.jit(round_to, static_argnums=(1, 2))
    for mode in DETERMINISTIC:
        _assert_same(f(x, "fp16", mode), round_to(x, "fp16", mode), mode)


def test_directed_landmarks_fp16():
    x = np.array([1 + 2.0**-11, -(1 + 2.0**-11), 65519, 70000, -70000, 2.0**-25, -(2.0**-26)], np.float32)
    want = {
        "toward_zero": [1, -1, 65504, 65504, -65504, 0, -0.0],
        "up": [1 + 2.0**-10, -1, np.inf, np.inf, -65504, 2.0**-24, -0.0],
        "down": [1, -(1 + 2.0**-10), 65504, 65504, -np.inf, 0, -(2.0**-24)],
        "away": [1 + 2.0**-10, -(1 + 2.0**-10), 65504, np.inf, -np.inf, 2.0**-24, -0.0],
    }
    for mode, w in want.items():
        got = np.asarray(round_to(x, "fp16", mode)).astype(np.float64)
        np.testing.assert_array_equal(got, w, err_msg=mode)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(np.array(w)), err_msg=mode)


# ---- flush and saturation ----------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
def test_subnormals_false_flushes_to_signed_zero(rng, fmt):
    x = _fp32_inputs(fmt, rng)
    got = np.asarray(round_to(x, fmt, subnormals=False))
    with np.errstate(over="ignore", invalid="ignore"):
        r = x.astype(NP[fmt])
    r32 = r.astype(np.float32)
    want = np.where(np.abs(r32) < TINY[fmt], np.copysign(np.float32(0), r32), r32).astype(NP[fmt])
    _assert_same(got, want, fmt)
    if fmt == "fp16":
        sub = (np.abs(r32) < TINY[fmt]) & (r32 != 0)
        assert sub.sum() > 10  # the inputs did produce subnormal results to flush


@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
@pytest.mark.parametrize("mode", DETERMINISTIC)
def test_saturate(rng, fmt, mode):
    x = _fp32_inputs(fmt, rng)
    got = np.asarray(round_to(x, fmt, mode, overflow="saturate")).astype(np.float32)
    base = np.asarray(round_to(x, fmt, mode)).astype(np.float32)
    want = np.where(np.isnan(base), 0, np.clip(base, -MAX[fmt], MAX[fmt]))
    np.testing.assert_array_equal(got, want)
    assert not np.any(np.isnan(got)) and np.all(np.isfinite(got))
    big = {"fp16": 1e30, "bf16": 3.4e38}[fmt]  # finite in fp32, past fmt's max
    special = np.array([np.inf, -np.inf, np.nan, big, -big], np.float32)
    s = np.asarray(round_to(special, fmt, mode, overflow="saturate")).astype(np.float32)
    np.testing.assert_array_equal(s, [MAX[fmt], -MAX[fmt], 0, MAX[fmt], -MAX[fmt]])


def test_round_to_fp32_is_identity(rng):
    x = rng.standard_normal(1000).astype(np.float32)
    for mode in DETERMINISTIC:
        np.testing.assert_array_equal(np.asarray(round_to(x, "fp32", mode)), x)


@pytest.mark.parametrize("mode", DETERMINISTIC)
def test_fp32_to_fp32_shortcut_keeps_the_general_roundings_bits(rng, mode):
    """Every fp32 vector result is stored through a rounding to fp32, done by a five-operation
    shortcut (``rounding._fp32_as_is``): the general rounding's bits for every pattern, NaNs with
    their sign and any payload, infinities, subnormals, both zeros."""
    from npu_jax.core import rounding

    edges = np.array(
        [0, 1, 0x7FFFFF, 0x800000, 0x7F7FFFFF, 0x7F800000, 0x7F800001, 0x7FC00000, 0x7FFFFFFF], np.uint32
    )
    bits = np.concatenate([rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32), edges])
    bits = np.concatenate([bits, bits | np.uint32(0x80000000)])
    general = rounding._finish(jax.numpy.asarray(bits), rounding.FORMATS["fp32"], mode, True, "inf", None)
    assert rounding.fp32_as_is(jax.numpy.zeros(1, np.float32), "fp32", mode, True, "inf")
    got = round_to(jax.numpy.asarray(bits.view(np.float32)), "fp32", mode)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint32), np.asarray(general).view(np.uint32))
    # the shortcut stops where the rounding does change bits
    assert not rounding.fp32_as_is(jax.numpy.zeros(1, np.float32), "fp32", mode, True, "saturate")
    assert not rounding.fp32_as_is(jax.numpy.zeros(1, np.float32), "fp32", mode, False, "inf")
    assert not rounding.fp32_as_is(jax.numpy.zeros(1, np.float16), "fp32", mode, True, "inf")


def test_argument_errors():
    x = np.ones(3, np.float32)
    with pytest.raises(ValueError, match="fmt"):
        round_to(x, "fp8")
    with pytest.raises(ValueError, match="key"):
        round_to(x, "fp16", "stochastic")
    with pytest.raises(ValueError, match="mode"):
        round_to(x, "fp16", "odd")
    with pytest.raises(ValueError, match="overflow"):
        round_to(x, "fp16", overflow="wrap")


# ---- inputs that are not float32 -------------------------------------------------------------------
@pytest.mark.parametrize("src, dst", [("fp16", "bf16"), ("bf16", "fp16")])
def test_directed_modes_between_16_bit_formats(rng, src, dst):
    """fp16 -> bf16 loses 3 mantissa bits, bf16 -> fp16 loses range: both round, so the mode
    must apply even though both formats are 2 bytes wide."""
    x = _no_fp32_subnormals(_grid_points(src, rng, 4000))
    extra = [1 + 2.0**-10, -(1 + 2.0**-10)] if src == "fp16" else [70000.0, -70000.0, 1 + 2.0**-7]
    x = np.concatenate([x, np.array(extra, NP[src])])
    for mode in DIRECTED:
        got = round_to(x, dst, mode)
        _assert_same(got, _directed_ref(x.astype(np.float32), dst, mode), f"{src}->{dst} {mode}")


def test_float64_input_rounds_once():
    """A float64 input must be rounded to fp16 once, not via float32 (double rounding)."""
    x = np.array([1 + 2.0**-11 + 2.0**-30, 65519.999, 1 - 2.0**-12 - 2.0**-40], np.float64)
    _assert_same(round_to(x, "fp16"), x.astype(np.float16), "float64 -> fp16")


def test_fp32_subnormal_range():
    """Values below float32's smallest normal are finite inputs like any other, and bf16 has
    subnormals there: up of a tiny positive value is the smallest subnormal of the target, down of a
    tiny negative one its negative, and saturation leaves a bf16 subnormal alone."""
    x = np.array([1e-45, 1e-40, -1e-45, -1e-40], np.float32)
    fp16_min = 2.0**-24
    np.testing.assert_array_equal(
        np.asarray(round_to(x, "fp16", "up")).astype(np.float64),
        [fp16_min, fp16_min, -0.0, -0.0],
        err_msg="fp16 up",
    )
    np.testing.assert_array_equal(
        np.asarray(round_to(x, "fp16", "down")).astype(np.float64),
        [0.0, 0.0, -fp16_min, -fp16_min],
        err_msg="fp16 down",
    )
    # bf16 values down to 2^-126 and below; 1e-36 is normal in fp32, but its half-ulp in bf16 is not
    xb = np.concatenate([x, np.array([1e-36, -1.0520e-36, 2.0**-120 * (1 + 2.0**-8)], np.float32)])
    for mode in ("toward_zero", "up", "down", "away"):
        _assert_same(round_to(xb, "bf16", mode), _directed_ref(xb, "bf16", mode), f"bf16 {mode}")
    sub = np.array([1e-39, -3e-40, 9.2e-41], np.float32).astype(ml_dtypes.bfloat16)  # bf16 subnormals
    _assert_same(round_to(sub, "bf16", overflow="saturate"), sub, "bf16 saturate")

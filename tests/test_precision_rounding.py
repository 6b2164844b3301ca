"""precision.round_to against independent references, on over 10^6 values.

* nearest-even: bit-exact with ml_dtypes / numpy ``astype`` from float32 (fp16, bf16, fp8 E4M3FN,
  E5M2), on random bit patterns (subnormals, inf, NaN included), exact ties of the target grid and
  their float32 neighbours, powers of two and their neighbours, and the overflow boundary;
* directed modes (and nearest) against their definitions, computed in float64 from the target's
  grid (floor / ceil of x over the quantum) -- an implementation that shares nothing with
  round_to's integer one;
* float64 inputs are rounded once (numpy's float16 conversion is direct; ml_dtypes' bf16/fp8 ones
  go through float32 and double-round, so the grid reference stands in for them);
* stochastic rounding is unbiased: the mean of many roundings is within 5 standard errors of x.
"""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import pytest

from precision import FORMATS, round_to

# random float32 bit patterns include signalling NaNs, whose casts numpy reports as invalid
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")

NARROW = ("fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2")
DIRECTED = ("toward_zero", "up", "down", "away")
N_PER_FORMAT = 1 << 18  # x 4 formats x (nearest + 4 directed) > 10^6 values in all


def _grid(fmt, rng, n):
    """n random finite values of fmt, as float32."""
    f = FORMATS[fmt]
    b = rng.integers(0, 1 << f.bits, n, dtype=np.uint64).astype(np.uint32).astype(f"u{f.bits // 8}")
    v = b.view(f.np_dtype).astype(np.float32)
    return v[np.isfinite(v)]


def _probe_inputs(fmt, rng, n=N_PER_FORMAT):
    """float32 values that probe every rounding decision into ``fmt``."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _probe_inputs_unchecked(fmt, rng, n)


def _probe_inputs_unchecked(fmt, rng, n):
    f = FORMATS[fmt]
    g = _grid(fmt, rng, n // 4).astype(np.float64)
    spacing = np.exp2(np.maximum(np.floor(np.log2(np.maximum(np.abs(g), 1e-300))), f.emin) - f.man_bits)
    spacing = np.where(g == 0, f.min_subnormal, spacing)
    ties = (g + np.sign(g + 0.5) * spacing / 2).astype(np.float32)  # exact midpoints (fit in fp32)
    near = np.concatenate([np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf))])
    raw = rng.integers(0, 1 << 32, n // 4, dtype=np.uint64).astype(np.uint32).view(np.float32)  # all of fp32
    scaled = (
        rng.standard_normal(n // 8) * np.exp2(rng.integers(f.emin - f.man_bits - 3, f.emax + 3, n // 8))
    ).astype(np.float32)
    p2 = np.exp2(np.arange(f.emin - f.man_bits - 2, f.emax + 3, dtype=np.float64)).astype(np.float32)
    pw = np.concatenate([p2, np.nextafter(p2, np.float32(0)), np.nextafter(p2, np.float32(np.inf))])
    top = f.max + 2.0 ** (f.emax - f.man_bits) / 2  # max + half an ulp: the overflow tie
    special = np.array(
        [
            0.0,
            np.inf,
            np.nan,
            f.max,
            top,
            np.nextafter(np.float32(top), np.float32(0)),
            np.nextafter(np.float32(top), np.float32(np.inf)),
            65504,
            65519,
            65519.996,
            65520,
            65520.004,
            1e-45,
            1e-40,
            f.min_subnormal,
            f.min_subnormal / 2,
            f.min_normal,
        ],
        np.float32,
    )
    x = np.concatenate([special, -special, pw, -pw, g.astype(np.float32), ties, near, raw, scaled])
    return np.resize(x, n) if x.size < n else x[:n]


def _bitwise_equal(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    gn, wn = np.isnan(got.astype(np.float32)), np.isnan(want.astype(np.float32))
    assert np.array_equal(gn, wn), f"{what}: NaN positions differ at {np.flatnonzero(gn != wn)[:5]}"
    u = f"u{got.dtype.itemsize}"
    gb, wb = got.view(u)[~gn], want.view(u)[~wn]
    bad = np.flatnonzero(gb != wb)
    assert bad.size == 0, f"{what}: {bad.size} differ, e.g. got {got[~gn][bad[:4]]} want {want[~wn][bad[:4]]}"


def _grid_reference(x64, fmt, mode):
    """x (float64) rounded to fmt by the definition: the two grid neighbours floor/ceil(x / q) * q,
    q = the quantum at x's binade (the subnormal quantum below the normal range)."""
    f = FORMATS[fmt]
    a = np.abs(x64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        e = np.maximum(np.floor(np.log2(np.where(a > 0, a, 1.0))), f.emin)
        q = np.exp2(e - f.man_bits)
        lo = np.floor(a / q) * q
        hi = np.ceil(a / q) * q
        if mode == "nearest_even":
            dlo, dhi = a - lo, hi - a
            even_hi = np.mod(hi / q, 2) == 0
            mag = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(even_hi, hi, lo)))
        elif mode == "away":
            mag = np.where(a - lo < hi - a, lo, hi)
        elif mode == "toward_zero":
            mag = lo
        elif mode == "up":
            mag = np.where(x64 >= 0, hi, lo)
        elif mode == "down":
            mag = np.where(x64 >= 0, lo, hi)
        else:
            raise ValueError(mode)
        # past max: directed-to-zero modes stop at max, the others overflow to inf
        toward_max = (mode == "toward_zero") | ((mode == "up") & (x64 < 0)) | ((mode == "down") & (x64 >= 0))
        over = mag > f.max
        mag = np.where(over, np.where(toward_max, f.max, np.inf), mag)
        mag = np.where(np.isinf(a), np.inf, mag)
        out = np.copysign(mag, x64)
        out = np.where(np.isnan(x64), np.nan, out)
        return out.astype(f.np_dtype)  # exact: every value is on fmt's grid (inf -> NaN for E4M3FN)


# ---- nearest-even against ml_dtypes / numpy --------------------------------------------------------
@pytest.mark.parametrize("fmt", NARROW)
def test_nearest_even_bit_exact_with_astype(rng, fmt):
    x = _probe_inputs(fmt, rng)
    assert x.size == N_PER_FORMAT
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(FORMATS[fmt].np_dtype)
    _bitwise_equal(round_to(x, fmt), want, f"{fmt} nearest_even")
    # and the definition agrees with ml_dtypes (so the grid reference is trustworthy)
    _bitwise_equal(_grid_reference(x.astype(np.float64), fmt, "nearest_even"), want, f"{fmt} grid reference")


def test_nearest_even_landmarks():
    x = np.array(
        [
            65504,
            65519.996,
            65520,
            -65520,
            2.0**-25,
            2.0**-25 * 1.0000001,
            1 + 2.0**-11,
            1 + 3 * 2.0**-11,
            1e-45,
            -1e-45,
        ],
        np.float32,
    )
    got = np.asarray(round_to(x, "fp16")).astype(np.float64)
    np.testing.assert_array_equal(got, [65504, 65504, np.inf, -np.inf, 0, 2.0**-24, 1, 1 + 2.0**-9, 0, -0.0])
    assert np.signbit(got[-1])
    e4 = np.asarray(round_to(np.array([448, 464, 465, np.inf, 2.0**-10, 2.0**-9], np.float32), "fp8_e4m3fn"))
    np.testing.assert_array_equal(e4.astype(np.float32)[[0, 1, 4, 5]], [448, 448, 0, 2.0**-9])
    assert np.isnan(e4.astype(np.float32)[2]) and np.isnan(e4.astype(np.float32)[3])  # no inf in E4M3FN


@pytest.mark.parametrize("fmt", ["fp16", "fp8_e5m2"])
def test_inputs_of_every_narrow_format(rng, fmt):
    """Inputs in fp16 / bf16 / fp8 (subnormals included) are widened exactly before rounding."""
    for src in NARROW:
        x = np.resize(_grid(src, rng, 4096), 4096).astype(FORMATS[src].np_dtype)  # one shape: one compile
        with np.errstate(over="ignore", invalid="ignore"):
            want = x.astype(np.float32).astype(FORMATS[fmt].np_dtype)
        _bitwise_equal(round_to(x, fmt), want, f"{src} -> {fmt}")
        _bitwise_equal(round_to(x, "fp32"), x.astype(np.float32), f"{src} -> fp32 (exact)")


# ---- directed modes against their definitions ----------------------------------------------------
@pytest.mark.parametrize("fmt", NARROW)
def test_directed_modes_match_definitions(rng, fmt):
    x = _probe_inputs(fmt, rng)
    x = x[np.isfinite(x) | np.isnan(x)]
    for mode in DIRECTED:
        _bitwise_equal(
            round_to(x, fmt, mode), _grid_reference(x.astype(np.float64), fmt, mode), f"{fmt} {mode}"
        )


def test_fp32_subnormal_inputs_round_exactly(rng):
    """Inputs below 2^-126 (float32 subnormals, which XLA:CPU flushes in arithmetic) round right."""
    x = rng.integers(1, 1 << 23, 50_000, dtype=np.uint32).view(np.float32) * np.float32(1)
    x = np.concatenate([x, -x])
    for fmt in ("bf16", "fp16"):
        for mode in ("nearest_even",) + DIRECTED:
            _bitwise_equal(
                round_to(x, fmt, mode), _grid_reference(x.astype(np.float64), fmt, mode), f"{fmt} {mode}"
            )
    _bitwise_equal(round_to(x, "fp32"), x, "fp32 keeps subnormals")
    flushed = np.asarray(round_to(x, "fp32", subnormals=False))
    assert np.all(flushed == 0) and np.array_equal(np.signbit(flushed), np.signbit(x))


# ---- float64 inputs: one rounding, not two --------------------------------------------------------
def _f64_inputs(rng, fmt, n=100_000):
    f = FORMATS[fmt]
    g = _grid(fmt, rng, n).astype(np.float64)
    g = g[np.abs(g) < f.max]
    q = np.exp2(np.maximum(np.floor(np.log2(np.maximum(np.abs(g), 1e-300))), f.emin) - f.man_bits)
    tie = g + q / 2
    tiny = q * 2.0**-30  # far below float32's resolution at x: a via-float32 rounding loses it
    x = np.concatenate([tie + tiny, tie - tiny, rng.standard_normal(n) * np.exp2(rng.integers(-20, 16, n))])
    return np.concatenate([x, -x, [1 + 2.0**-11 + 2.0**-30, 65519.999, 1e39, -1e39, 1e-50]])


@pytest.mark.parametrize("fmt", NARROW)
def test_float64_rounds_once(rng, fmt):
    x = _f64_inputs(rng, fmt)
    for mode in ("nearest_even",) + DIRECTED:
        _bitwise_equal(round_to(x, fmt, mode), _grid_reference(x, fmt, mode), f"float64 -> {fmt} {mode}")
    if fmt == "fp16":  # numpy's double -> half conversion is direct: the second independent reference
        with np.errstate(over="ignore"):
            _bitwise_equal(round_to(x, "fp16"), x.astype(np.float16), "float64 -> fp16 vs numpy")
    # the case a float32 detour gets wrong: a tie in fmt plus 2^-30 of an ulp rounds away from the tie
    one = FORMATS[fmt]
    y = np.array([1 + 2.0 ** -(one.man_bits + 1) + 2.0**-40])
    assert float(np.asarray(round_to(y, fmt)).astype(np.float64)[0]) == 1 + 2.0**-one.man_bits


def test_float64_to_fp32_all_modes(rng):
    x = np.concatenate(
        [
            rng.standard_normal(20_000) * np.exp2(rng.integers(-140, 120, 20_000)),
            [1e39, -1e39, 1e-46, -1e-46, 3.4028235677973366e38],
        ]
    )
    for mode in ("nearest_even",) + DIRECTED:
        _bitwise_equal(round_to(x, "fp32", mode), _grid_reference(x, "fp32", mode), f"float64 -> fp32 {mode}")
    with np.errstate(over="ignore"):
        _bitwise_equal(round_to(x, "fp32"), x.astype(np.float32), "float64 -> fp32 vs numpy")


# ---- subnormal flush and saturation on fp8 ---------------------------------------------------------
@pytest.mark.parametrize("fmt", ["fp8_e4m3fn", "fp8_e5m2"])
def test_fp8_flush_and_saturate(rng, fmt):
    f = FORMATS[fmt]
    x = _probe_inputs(fmt, rng, 1 << 14)
    base = np.asarray(round_to(x, fmt)).astype(np.float32)
    flushed = np.asarray(round_to(x, fmt, subnormals=False)).astype(np.float32)
    sub = np.abs(base) < f.min_normal
    np.testing.assert_array_equal(flushed[sub & ~np.isnan(base)], 0)
    np.testing.assert_array_equal(flushed[~sub], base[~sub])
    sat = np.asarray(round_to(x, fmt, overflow="saturate")).astype(np.float32)
    assert np.all(np.isfinite(sat)) and np.max(np.abs(sat)) <= f.max
    big = np.array([np.inf, -np.inf, np.nan, 1e30, -1e30], np.float32)
    np.testing.assert_array_equal(
        np.asarray(round_to(big, fmt, overflow="saturate")).astype(np.float32),
        [f.max, -f.max, 0, f.max, -f.max],
    )


# ---- stochastic rounding ----------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp8_e4m3fn"])
def test_stochastic_is_unbiased(rng, fmt):
    f = FORMATS[fmt]
    n = 1 << 16
    # generic values, a quarter-ulp offset, a subnormal-range value, one just under max
    vals = [
        float(rng.uniform(1, 2)),
        1 + 2.0 ** -(f.man_bits + 2),
        f.min_subnormal * 0.3,
        f.max * (1 - 2.0 ** -(f.man_bits + 3)),
    ]
    key = jax.random.key(int(rng.integers(1 << 31)))
    for i, v in enumerate(vals):
        x = np.full(n, v, np.float32)
        r = np.asarray(round_to(x, fmt, "stochastic", key=jax.random.fold_in(key, i))).astype(np.float64)
        v32 = float(np.float32(v))
        lo = float(np.asarray(round_to(np.float32(v), fmt, "down")).astype(np.float64))
        hi = float(np.asarray(round_to(np.float32(v), fmt, "up")).astype(np.float64))
        assert set(np.unique(r)) <= {lo, hi}, f"{fmt} {v}: results outside the two neighbours"
        se = (hi - lo) / 2 / np.sqrt(n)  # the standard error bound of the mean (Bernoulli, p(1-p) <= 1/4)
        assert abs(r.mean() - v32) <= 5 * se, f"{fmt} {v}: mean {r.mean()!r} vs {v32!r} (5 se = {5 * se:.3g})"
        p = (v32 - lo) / (hi - lo) if hi > lo else 0
        assert abs(np.mean(r == hi) - p) <= 5 * 0.5 / np.sqrt(n)


def test_stochastic_keys_and_jit(rng):
    x = (rng.standard_normal(10_000)).astype(np.float32)
    k = jax.random.key(3)
    a = np.asarray(round_to(x, "fp16", "stochastic", key=k))
    b = np.asarray(jax.jit(lambda v, kk: round_to(v, "fp16", "stochastic", key=kk))(x, k))
    np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))
    c = np.asarray(round_to(x, "fp16", "stochastic", key=jax.random.key(4)))
    assert np.any(a != c)
    # every result is one of the two neighbours
    lo, hi = np.asarray(round_to(x, "fp16", "down")), np.asarray(round_to(x, "fp16", "up"))
    assert np.all((a == lo) | (a == hi))
    # float64 -> fp32 stochastic: also unbiased
    x64 = np.full(1 << 15, 1 + 2.0**-26)
    r = np.asarray(round_to(x64, "fp32", "stochastic", key=k)).astype(np.float64)
    assert abs(r.mean() - x64[0]) <= 5 * 2.0**-24 / np.sqrt(r.size)


def test_argument_errors():
    x = np.ones(3, np.float32)
    with pytest.raises(ValueError, match="fmt"):
        round_to(x, "fp12")
    with pytest.raises(ValueError, match="key="):
        round_to(x, "fp16", "stochastic")
    with pytest.raises(ValueError, match="mode"):
        round_to(x, "fp16", "nearest")
    with pytest.raises(ValueError, match="overflow"):
        round_to(x, "fp16", overflow="clip")


def test_dtype_names_accepted():
    x = np.float32(1.5)
    assert np.asarray(round_to(x, ml_dtypes.bfloat16)).dtype == ml_dtypes.bfloat16
    assert np.asarray(round_to(x, np.float16)).dtype == np.float16

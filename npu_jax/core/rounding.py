"""Floating-point formats and rounding to them, bit-exact, with the hardware's modes and overflow.

``round_to(x, fmt, mode, subnormals=, overflow=, key=)`` returns ``x`` rounded to ``fmt`` (an array
of that format). The rounding works on integer bit patterns: the input is widened exactly to a
float32 bit pattern, the bits below the target's quantum are inspected as integers and the kept
bits incremented where the mode says so, and the result is assembled as the target's bit pattern.
No floating-point arithmetic is involved, so nothing depends on XLA:CPU flushing float32
subnormals to zero, and the result equals ``ml_dtypes``/numpy ``astype`` in nearest-even.

Float64 inputs (numpy arrays or Python floats; JAX has no float64 without x64) are reduced on the
host to float32 with *round-to-odd*: the float32 neighbour of ``x`` whose last bit is 1 when ``x``
is not exact. Rounding that to any format at least two bits narrower (fp16, bf16, fp8) is the
correct rounding of ``x`` itself (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums:
proved algorithms using rounding to odd", IEEE TC 2008), so float64 is never double-rounded.
Rounding float64 to fp32 itself is done on the host from the two float32 neighbours.

The format table (``FORMATS``) lives here, beside the rounding that reads it; ``precision.formats``
re-exports it for users. ``npu_jax`` keeps it because the Policy inside the machine needs it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

MODES = ("nearest_even", "toward_zero", "up", "down", "away", "stochastic")
OVERFLOW = ("inf", "saturate")


@dataclasses.dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format: its fields and the constants derived from them.

    Attributes:
        name: ``fp16``, ``bf16``, ``fp32``, ``fp8_e4m3fn`` or ``fp8_e5m2``.
        bits, exp_bits, man_bits: widths of the whole word, the exponent and the stored mantissa.
        bias: the exponent bias.
        ieee: True when the top exponent encodes inf/NaN (IEEE 754); False for E4M3FN, whose top
            exponent holds finite values and only S.1111.111 is NaN (no infinity).

    Example:
        >>> FORMATS["fp16"].max, FORMATS["fp16"].u
        (65504.0, 0.00048828125)
    """

    name: str
    bits: int
    exp_bits: int
    man_bits: int
    bias: int
    ieee: bool = True

    @property
    def p(self) -> int:
        """Precision in bits, hidden bit included."""
        return self.man_bits + 1

    @property
    def u(self) -> float:
        """Unit roundoff of round-to-nearest, 2^-p."""
        return 2.0**-self.p

    @property
    def eps(self) -> float:
        """Machine epsilon, the spacing just above 1: 2^(1-p)."""
        return 2.0**-self.man_bits

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal number."""
        return 1 - self.bias

    @property
    def emax(self) -> int:
        """Exponent of the largest finite number."""
        top = (1 << self.exp_bits) - (2 if self.ieee else 1)
        return top - self.bias

    @property
    def max_bits(self) -> int:
        """Bit pattern (without sign) of the largest finite value."""
        if self.ieee:
            return (((1 << self.exp_bits) - 1) << self.man_bits) - 1
        return ((1 << (self.exp_bits + self.man_bits)) - 1) - 1  # S.1111.110 (S.1111.111 is NaN)

    @property
    def max(self) -> float:
        mant = self.max_bits & ((1 << self.man_bits) - 1)
        return float((1 + mant / 2.0**self.man_bits) * 2.0**self.emax)

    @property
    def min_normal(self) -> float:
        return 2.0**self.emin

    @property
    def min_subnormal(self) -> float:
        return 2.0 ** (self.emin - self.man_bits)

    @property
    def has_inf(self) -> bool:
        return self.ieee

    @property
    def nan_bits(self) -> int:
        """A quiet NaN's bit pattern (without sign)."""
        if self.ieee:
            return (((1 << self.exp_bits) - 1) << self.man_bits) | (1 << (self.man_bits - 1))
        return (1 << (self.exp_bits + self.man_bits)) - 1

    @property
    def inf_bits(self) -> int:
        """Infinity's bit pattern (without sign); NaN's for a format with no infinity."""
        return ((1 << self.exp_bits) - 1) << self.man_bits if self.ieee else self.nan_bits

    @property
    def dtype(self):
        """The JAX dtype that stores this format."""
        return _JNP[self.name]

    @property
    def np_dtype(self) -> np.dtype:
        """The numpy / ml_dtypes dtype that stores this format."""
        return np.dtype(_NP[self.name])


FORMATS = {
    "fp32": FloatFormat("fp32", 32, 8, 23, 127),
    "fp16": FloatFormat("fp16", 16, 5, 10, 15),
    "bf16": FloatFormat("bf16", 16, 8, 7, 127),
    "fp8_e4m3fn": FloatFormat("fp8_e4m3fn", 8, 4, 3, 7, ieee=False),
    "fp8_e5m2": FloatFormat("fp8_e5m2", 8, 5, 2, 15),
}
_JNP = {
    "fp32": jnp.float32,
    "fp16": jnp.float16,
    "bf16": jnp.bfloat16,
    "fp8_e4m3fn": jnp.float8_e4m3fn,
    "fp8_e5m2": jnp.float8_e5m2,
}
_NP = {
    "fp32": np.float32,
    "fp16": np.float16,
    "bf16": ml_dtypes.bfloat16,
    "fp8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "fp8_e5m2": ml_dtypes.float8_e5m2,
}
_UINT = {8: jnp.uint8, 16: jnp.uint16, 32: jnp.uint32}


def get_format(fmt) -> FloatFormat:
    """The :class:`FloatFormat` named ``fmt`` (a name, a FloatFormat, or a numpy/JAX dtype)."""
    if isinstance(fmt, FloatFormat):
        return fmt
    if isinstance(fmt, str) and fmt in FORMATS:
        return FORMATS[fmt]
    try:
        dt = np.dtype(fmt)
    except TypeError:
        dt = None
    for name, npdt in _NP.items():
        if dt is not None and dt == np.dtype(npdt):
            return FORMATS[name]
    raise ValueError(f"fmt must be one of {sorted(FORMATS)} (or their dtype), got {fmt!r}.")


def format_of(x) -> FloatFormat:
    """The format of an array's dtype."""
    return get_format(np.dtype(x.dtype))


# ---- widening any supported input to an exact float32 bit pattern ----------------------------
def _decode_narrow(b, f: FloatFormat):
    """uint32 float32 bits of the values whose ``f`` bit patterns are ``b`` (uint32); exact, since
    every fp16 / fp8 value (subnormals included) is a normal float32."""
    M, E = f.man_bits, f.exp_bits
    s = b >> (f.bits - 1)
    ef = ((b >> M) & ((1 << E) - 1)).astype(jnp.int32)
    mf = b & ((1 << M) - 1)
    top = (1 << E) - 1
    if f.ieee:
        isnan = (ef == top) & (mf != 0)
        isinf = (ef == top) & (mf == 0)
    else:
        isnan = (ef == top) & (mf == (1 << M) - 1)
        isinf = jnp.zeros_like(isnan)
    # subnormal: value = mf * 2^(emin - M); its leading bit p gives the exponent
    p = 31 - lax.clz(jnp.maximum(mf, 1)).astype(jnp.int32)
    e_sub = p + f.emin - M
    m_sub = (mf << (23 - p).astype(jnp.uint32)) & 0x7FFFFF
    e32 = jnp.where(ef == 0, e_sub, ef - f.bias) + 127
    m32 = jnp.where(ef == 0, m_sub, mf << (23 - M))
    mag = (e32.astype(jnp.uint32) << 23) | m32
    mag = jnp.where((ef == 0) & (mf == 0), jnp.uint32(0), mag)
    mag = jnp.where(isinf, jnp.uint32(0x7F800000), mag)
    mag = jnp.where(isnan, jnp.uint32(0x7FC00000), mag)
    return (s << 31) | mag


def _to_bits32(x):
    """uint32 float32 bit pattern of a JAX array of any float format (exact), or of a non-float
    array after conversion to float32."""
    dt = jnp.dtype(x.dtype)
    if dt == jnp.float32:
        return lax.bitcast_convert_type(x, jnp.uint32)
    if dt == jnp.bfloat16:
        return lax.bitcast_convert_type(x, jnp.uint16).astype(jnp.uint32) << 16
    for name in ("fp16", "fp8_e4m3fn", "fp8_e5m2"):
        f = FORMATS[name]
        if dt == jnp.dtype(f.dtype):
            return _decode_narrow(lax.bitcast_convert_type(x, _UINT[f.bits]).astype(jnp.uint32), f)
    return lax.bitcast_convert_type(x.astype(jnp.float32), jnp.uint32)


def _f64_round_to_odd_bits(x64: np.ndarray) -> np.ndarray:
    """uint32 bits of float64 ``x64`` rounded to float32 *to odd*: exact values stay, inexact ones
    take the neighbour whose last bit is 1 (past float32's max that is max itself)."""
    with np.errstate(over="ignore", invalid="ignore"):
        r = x64.astype(np.float32)
        r64 = r.astype(np.float64)
        finite = np.isfinite(x64)
        inexact = finite & (r64 != x64)
        rz = np.where(np.abs(r64) > np.abs(x64), np.nextafter(r, np.float32(0)), r)
    bits = rz.astype(np.float32).view(np.uint32)
    return np.where(inexact, bits | np.uint32(1), r.view(np.uint32))


# ---- the rounding itself, on integers -------------------------------------------------------
def _round_bits(b32, f: FloatFormat, mode: str, rand):
    """Round float32 bit patterns ``b32`` (uint32) to ``f``; returns (sign, magnitude bits as
    int32, is_nan, is_inf_in, overflowed). ``rand`` is uint32 random bits (stochastic) or None."""
    M = f.man_bits
    s = (b32 >> 31).astype(jnp.int32)
    mag = b32 & 0x7FFFFFFF
    is_nan = mag > 0x7F800000
    is_inf = mag == 0x7F800000
    e32 = (mag >> 23).astype(jnp.int32)
    sig = jnp.where(e32 > 0, (mag & 0x7FFFFF) | 0x800000, mag & 0x7FFFFF)
    e = jnp.maximum(e32, 1) - 127  # exponent of sig's bit 23
    shift = 23 - M + jnp.maximum(0, f.emin - e)  # bits below the target's quantum
    sh = jnp.clip(shift, 0, 26).astype(jnp.uint32)  # past 25 every bit of sig is discarded anyway
    kept = sig >> sh
    rem = sig & ((jnp.uint32(1) << sh) - 1)
    half = jnp.where(sh > 0, jnp.uint32(1) << jnp.maximum(sh, 1) - 1, jnp.uint32(0))
    if mode == "nearest_even":
        inc = (rem > half) | ((rem == half) & (half > 0) & ((kept & 1) == 1))
    elif mode == "toward_zero":
        inc = jnp.zeros(b32.shape, jnp.bool_)
    elif mode == "up":
        inc = (rem != 0) & (s == 0)
    elif mode == "down":
        inc = (rem != 0) & (s == 1)
    elif mode == "away":
        inc = (half > 0) & (rem >= half)
    else:  # stochastic: P(round away from zero) = rem / 2^shift, from 32 random bits
        lo = jnp.clip(32 - shift, 0, 31).astype(jnp.uint32)
        near = (rand >> lo) < rem  # shift <= 32: exact
        far = rand < (sig >> jnp.clip(shift - 32, 0, 31).astype(jnp.uint32))  # within 2^-32 ulp
        inc = (rem != 0) & jnp.where(shift <= 32, near, far)
    kept = kept + inc.astype(jnp.uint32)
    # exponent field and mantissa in one integer: a carry out of the mantissa bumps the exponent
    out = (jnp.maximum(e - f.emin, 0) << M) + kept.astype(jnp.int32)
    over = (out > f.max_bits) & ~is_nan & ~is_inf
    return s, out, is_nan, is_inf, over


def _check_args(fmt, mode, overflow, key):
    f = get_format(fmt)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}.")
    if overflow not in OVERFLOW:
        raise ValueError(f"overflow must be 'inf' or 'saturate', got {overflow!r}.")
    if mode == "stochastic" and key is None:
        raise ValueError(
            "mode='stochastic' needs key=jax.random.key(seed) (the random bits of the "
            "rounding); pass one, or use a deterministic mode."
        )
    return f


def round_to(x, fmt, mode: str = "nearest_even", subnormals: bool = True, overflow: str = "inf", key=None):
    """Round ``x`` to ``fmt``; returns an array of ``fmt``'s dtype.

    Args:
        x: array of any float format (fp32, fp16, bf16, fp8; float64 from numpy/Python without
            double rounding), or integers from the host (numpy ints, Python ints of any size: each
            rounded once, correctly; one past every format's range gives what the mode and
            ``overflow`` give for it, e.g. inf or max); other dtypes are converted to float32 first.
        fmt: ``fp16``, ``bf16``, ``fp32``, ``fp8_e4m3fn``, ``fp8_e5m2`` (or a dtype).
        mode: ``nearest_even`` (RINT), ``toward_zero`` (TRUNC), ``up`` (CEIL), ``down`` (FLOOR),
            ``away`` (ROUND: nearest, ties away from zero), ``stochastic`` (to one of the two
            neighbours with probability proportional to the distance to the other: unbiased;
            exact for all but inputs under 2^-32 of the target's smallest subnormal spacing).
        subnormals: keep results below the smallest normal (True) or flush them to signed zero.
        overflow: ``inf`` (IEEE: past max by the mode's rules, e.g. nearest-even gives inf from
            max + ulp/2 and toward-zero gives max; NaN for E4M3FN, which has no infinity) or
            ``saturate`` (+-inf and overflow -> +-max, NaN -> 0, as the 910/310P conversion).
        key: a ``jax.random`` key, required for ``stochastic``.

    Example:
        >>> import numpy as np
        >>> round_to(np.float32(65519.0), "fp16"), round_to(np.float32(65520.0), "fp16")
        (Array(65504., dtype=float16), Array(inf, dtype=float16))
    """
    f = _check_args(fmt, mode, overflow, key)
    if isinstance(x, (np.ndarray, np.generic, float, int, list, tuple)) and not isinstance(x, jax.Array):
        xn = host_numbers(x)
        if xn.dtype == np.float64 or (xn.dtype.kind in "iub" and xn.dtype.itemsize >= 4):
            x64 = _ints_to_f64_odd(xn) if xn.dtype.kind in "iu" else xn.astype(np.float64)
            if f.name == "fp32":
                return _f64_to_fp32(x64, mode, subnormals, overflow, key)
            b32 = jnp.asarray(_f64_round_to_odd_bits(x64))
            return _round_jit(b32, f.name, mode, subnormals, overflow, key, bits_in=True)
    return _round_jit(jnp.asarray(x), f.name, mode, subnormals, overflow, key, bits_in=False)


# ---- integers on the host: exact, whatever their size -----------------------------------------
# An integer reaches the rounding as a float64 rounded *to odd* (the same device as float64 inputs
# above): with 29 or more bits to spare over the float32 rounding that follows, to odd keeps the
# information every mode needs, so an int is rounded once, correctly, at any size. A plain
# ``astype(float64)`` would round to nearest first and double-round ints past 2**53 (2**60 + 2**36
# + 1 would give 2**60 in fp32 instead of 2**60 + 2**37).
def host_numbers(x) -> np.ndarray:
    """``np.asarray(x)``, except that an array of Python numbers with ints past 64 bits (numpy makes
    those ``object``) becomes float64 holding each int rounded to odd (see above); an object array
    holding anything but real numbers is returned as it is, for the caller to refuse.

    Example:
        >>> host_numbers([2**70, 1.5]).dtype
        dtype('float64')
    """
    xn = np.asarray(x)
    if xn.dtype != object:
        return xn
    flat = xn.ravel()
    if not all(_is_real_number(v) for v in flat):
        return xn
    return np.array([_int_to_f64_odd(int(v)) if _is_int(v) else float(v) for v in flat]).reshape(xn.shape)


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer))


def _is_real_number(v) -> bool:
    return _is_int(v) or isinstance(v, (float, np.floating))


def _int_to_f64_odd(n: int) -> float:
    """A Python int as a float64 rounded to odd: exact below 2**53; else the 53 leading bits with the
    last set when any bit below them is; past float64's range (2**1024), +-float64's max, which every
    mode rounds as it rounds the int itself (past every format's range, fp32's included)."""
    a = abs(n)
    b = a.bit_length()
    if b <= 53:
        return float(n)
    if b > 1024:
        return -sys.float_info.max if n < 0 else sys.float_info.max
    shift = b - 53
    m = (a >> shift) | (1 if a & ((1 << shift) - 1) else 0)
    return -math.ldexp(m, shift) if n < 0 else math.ldexp(m, shift)


def _ints_to_f64_odd(xn: np.ndarray) -> np.ndarray:
    """An integer array as float64, each value rounded to odd on the grid of 2**11 past 2**53 (an odd
    multiple of 2**11 lies strictly between the same float32 neighbours and midpoints as the int,
    which are multiples of 2**29 there); ints below 2**53 are exact."""
    if xn.dtype.itemsize < 8:
        return xn.astype(np.float64)  # 32 bits or fewer: exact
    v = np.atleast_1d(xn)
    neg = v < 0
    u = v.astype(np.uint64)  # two's complement for negative int64; the magnitude below
    mag = np.where(neg, ~u + np.uint64(1), u)
    big = mag >= np.uint64(1 << 53)
    odd = (mag >> np.uint64(11)) | ((mag & np.uint64(0x7FF)) != 0).astype(np.uint64)
    val = np.where(big, odd.astype(np.float64) * 2048.0, mag.astype(np.float64))
    return np.where(neg, -val, val).reshape(xn.shape)


@functools.partial(jax.jit, static_argnames=("fmt", "mode", "subnormals", "overflow", "bits_in"))
def _round_jit(x, fmt: str, mode: str, subnormals: bool, overflow: str, key, bits_in: bool):
    """One compiled program per (shape, dtype, settings): eager calls do not dispatch (and
    compile) dozens of small ops each; inside a trace it simply inlines."""
    if fp32_as_is(x, fmt, mode, subnormals, overflow, bits_in):
        return _fp32_as_is(x)
    b32 = x if bits_in else _to_bits32(x)
    return _finish(b32, FORMATS[fmt], mode, subnormals, overflow, key)


def fp32_as_is(x, fmt: str, mode: str, subnormals: bool, overflow: str, bits_in: bool = False) -> bool:
    """Whether rounding float32 ``x`` to fp32 keeps every value: a deterministic mode (nothing lies
    below fp32's quantum), overflow to inf (saturate turns inf into the largest finite), subnormals
    kept. Every vector instruction's fp32 result is stored through that rounding."""
    return (
        not bits_in
        and fmt == "fp32"
        and jnp.dtype(x.dtype) == jnp.float32
        and mode != "stochastic"
        and subnormals
        and overflow == "inf"
    )


def _fp32_as_is(x):
    """What :func:`_finish` makes of float32 ``x`` rounded to fp32 where :func:`fp32_as_is`: the same
    bits, a NaN made the quiet NaN with its sign (``FloatFormat.nan_bits``). Five operations for its
    fifty (the rounding of every fp32 vector result: the largest part of such kernels' programs)."""
    b = lax.bitcast_convert_type(x, jnp.uint32)
    nan = (b & jnp.uint32(0x7FFFFFFF)) > jnp.uint32(0x7F800000)
    quiet = (b & jnp.uint32(0x80000000)) | jnp.uint32(FORMATS["fp32"].nan_bits)
    return lax.bitcast_convert_type(jnp.where(nan, quiet, b), jnp.float32)


def _finish(b32, f: FloatFormat, mode, subnormals, overflow, key):
    rand = jax.random.bits(key, b32.shape, jnp.uint32) if mode == "stochastic" else None
    s, out, is_nan, is_inf, over = _round_bits(b32, f, mode, rand)
    if overflow == "saturate":
        out = jnp.where(over | is_inf, f.max_bits, out)
        out = jnp.where(is_nan, 0, out)
        s = jnp.where(is_nan, 0, s)
    else:
        if mode == "toward_zero":
            past = jnp.full_like(out, f.max_bits)
        elif mode == "up":
            past = jnp.where(s == 0, f.inf_bits, f.max_bits)
        elif mode == "down":
            past = jnp.where(s == 1, f.inf_bits, f.max_bits)
        else:
            past = jnp.full_like(out, f.inf_bits)
        out = jnp.where(over, past, out)
        out = jnp.where(is_inf, f.inf_bits, out)
        out = jnp.where(is_nan, f.nan_bits, out)
    if not subnormals:
        out = jnp.where(out < (1 << f.man_bits), 0, out)
    word = (s.astype(jnp.uint32) << (f.bits - 1)) | out.astype(jnp.uint32)
    return lax.bitcast_convert_type(word.astype(_UINT[f.bits]), f.dtype)


def _f64_to_fp32(x64, mode, subnormals, overflow, key):
    """float64 -> fp32 on the host, from the two float32 neighbours of each value."""
    with np.errstate(over="ignore", invalid="ignore"):
        r = x64.astype(np.float32)
        r64 = r.astype(np.float64)
        lo = np.where(r64 > x64, np.nextafter(r, np.float32(-np.inf)), r)
        hi = np.where(r64 < x64, np.nextafter(r, np.float32(np.inf)), r)
        lo64, hi64 = lo.astype(np.float64), hi.astype(np.float64)
        # past float32's max the grid continues (for deciding) with one more step, 2^128
        big = 2.0**128
        g_lo = np.where(np.isinf(lo64), -big, lo64)
        g_hi = np.where(np.isinf(hi64), big, hi64)
        if mode == "nearest_even":
            out = r
        elif mode == "toward_zero":
            out = np.where(x64 >= 0, lo, hi)
        elif mode == "up":
            out = hi
        elif mode == "down":
            out = lo
        elif mode == "away":
            dlo, dhi = x64 - g_lo, g_hi - x64
            out = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(x64 >= 0, hi, lo)))
        else:
            p = (x64 - g_lo) / (g_hi - g_lo)
            rnd = np.asarray(jax.random.bits(key, x64.shape, jnp.uint32)).astype(np.float64) / 2.0**32
            out = np.where(rnd < p, hi, lo)
        out = np.where(np.isnan(x64) | (lo64 == hi64), r, out).astype(np.float32)
        if overflow == "saturate":
            fmax = np.finfo(np.float32).max
            out = np.where(np.isnan(out), np.float32(0), np.clip(out, -fmax, fmax)).astype(np.float32)
        if not subnormals:
            out = np.where(np.abs(out) < np.finfo(np.float32).tiny, np.copysign(np.float32(0), out), out)
    return jnp.asarray(out.astype(np.float32))


__all__ = [
    "FORMATS",
    "MODES",
    "OVERFLOW",
    "FloatFormat",
    "format_of",
    "get_format",
    "host_numbers",
    "round_to",
]

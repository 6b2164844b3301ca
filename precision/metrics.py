"""How far an output is from its reference: every metric the facts sheet lists, in one call.

``compare(out, ref)`` computes in float64 on the host and returns a :class:`Metrics`. Give the
reference in float64 (numpy) or fp32 computed at ``precision=HIGHEST``. For a convolution or a
GEMM, pass ``abs_ref`` -- the same operation on ``|x|`` and ``|w|`` -- to get the componentwise error
``max |out - ref| / abs_ref``, which is provably below gamma_K and so never flakes.

Example:
    >>> import numpy as np
    >>> ref = np.linspace(-1, 1, 101)
    >>> m = compare(ref.astype(np.float16), ref)
    >>> m.rel_l2 < 2**-11, m.n_nan
    (True, 0)
"""

from __future__ import annotations

import dataclasses

import numpy as np

from npu_jax.errors import InputError, InputTypeError, check_number
from precision.formats import get_format

# metrics where larger is worse / better; the rest are counts
ERROR_METRICS = ("rel_l2", "max_abs", "max_rel", "ulp_max", "ulp_mean", "componentwise", "balance")
SCORE_METRICS = ("cosine", "vendor_ratio")
COUNT_METRICS = ("n_nan", "n_overflow", "n_underflow", "n_subnormal")


@dataclasses.dataclass(frozen=True)
class Metrics:
    """Error of ``out`` against ``ref`` (all Python floats / ints).

    Attributes:
        rel_l2: ``||out - ref|| / ||ref||`` (the vendor's relative Euclidean distance).
        max_abs: ``max |out - ref|``.
        max_rel: ``max |out - ref| / max(|ref|, floor * max|ref|)``: relative error with a floor, so
            near-zero references do not blow it up.
        ulp_max, ulp_mean, ulp_above_1: ``|out - ref|`` in units of the last place of ref in ``fmt``:
            max, mean, and the fraction of elements more than 1 ulp off.
        cosine: cosine similarity (blind to scale errors: never use it alone).
        vendor_ratio: fraction of elements within 0.1% relative error (floored); the vendor's
            conv rule passes when it is >= 99.9% (``vendor_pass``).
        balance: ``|#(out > ref) - #(out < ref)| / N``: near 0 for unbiased rounding, near 1 for a
            biased one (truncation).
        componentwise: ``max |out - ref| / abs_ref`` (None without ``abs_ref``).
        n_nan: NaNs in out; n_overflow: infinities in out where ref is finite;
        n_underflow: zeros in out where ref is not zero; n_subnormal: out values below the
            smallest normal of ``fmt`` (precision lost to the small end).
        n: number of elements; fmt: the format ulps and subnormals are counted in.
        n_ref_nonfinite: NaNs and infinities in ref (each fails every metric it touches).
    """

    rel_l2: float
    max_abs: float
    max_rel: float
    ulp_max: float
    ulp_mean: float
    ulp_above_1: float
    cosine: float
    vendor_ratio: float
    balance: float
    componentwise: float | None
    n_nan: int
    n_overflow: int
    n_underflow: int
    n_subnormal: int
    n: int
    fmt: str
    n_ref_nonfinite: int = 0

    @property
    def vendor_pass(self) -> bool:
        """The vendor's rule (>= 99.9% of elements within 0.1%), and nothing non-finite anywhere."""
        return self.vendor_ratio >= 0.999 and self.finite

    @property
    def finite(self) -> bool:
        return self.n_nan == 0 and self.n_overflow == 0 and self.n_ref_nonfinite == 0

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def summary(self) -> str:
        """One metric per line."""
        d = self.as_dict()
        lines = []
        for k, v in d.items():
            if v is None:
                continue
            lines.append(f"  {k:<13} {v:.4g}" if isinstance(v, float) else f"  {k:<13} {v}")
        return "\n".join(lines)


def _ulp(r: np.ndarray, fmt) -> np.ndarray:
    f = get_format(fmt)
    a = np.abs(r)
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    e = np.maximum(np.where(a > 0, e, f.emin), f.emin)
    return np.exp2(e - f.man_bits)


def _real_array(name: str, v) -> np.ndarray:
    """``v`` as a real numeric numpy array (jax, numpy or nested lists), refused with the parameter
    named when it is None, a string, an object or a complex array."""
    if v is None or isinstance(v, (str, bytes, dict)):
        raise InputTypeError(f"compare: {name} must be an array, got {type(v).__name__}.")
    try:
        a = np.asarray(v)
    except (TypeError, ValueError) as e:
        raise InputTypeError(f"compare: {name} must be an array-like of numbers ({e}).") from None
    if a.dtype.kind == "c":
        raise InputTypeError(
            f"compare: {name} must be real, got dtype {a.dtype}; compare .real and .imag separately."
        )
    if a.dtype.kind not in "fiub" and not (a.dtype.kind == "V" and a.dtype.itemsize <= 2):
        raise InputTypeError(f"compare: {name} must be a numeric array, got dtype {a.dtype}.")
    return a


def compare(out, ref, *, abs_ref=None, fmt=None, floor: float = 1e-3) -> Metrics:
    """Every error metric of ``out`` against ``ref`` (see :class:`Metrics`).

    Non-finite values cannot pass: an element where ``out`` or ``ref`` is NaN or infinite counts as
    an infinite error in every metric it touches (``rel_l2``, ``max_*``, ``ulp_*``,
    ``componentwise`` become ``inf``; ``vendor_ratio`` and ``ulp_above_1`` count it as failing;
    ``cosine`` becomes NaN, which meets no threshold); ``n_nan`` / ``n_overflow`` count them in
    ``out``, ``n_ref_nonfinite`` in ``ref``. An exact match is a zero error (zeros against zeros
    included).

    Args:
        out: the result under test (any real array; jax or numpy).
        ref: the reference, same shape (float64 or fp32-at-HIGHEST).
        abs_ref: the same computation on absolute values (``|x| * |w|`` for a conv), for the
            componentwise error; None skips it.
        fmt: format for ulps and subnormal counts (default: ``out``'s own format, fp32 for
            float64 or integer outputs).
        floor: relative-error floor tau in ``max(|ref|, tau * max|ref|)``, in (0, 1].
    """
    o_raw = _real_array("out", out)
    o = o_raw.astype(np.float64)
    r = _real_array("ref", ref).astype(np.float64)
    if o.shape != r.shape:
        raise InputError(f"compare: out {o.shape} and ref {r.shape} must have the same shape.")
    if o.size == 0:
        raise InputError("compare: out and ref are empty: empty arrays have no error to measure.")
    if fmt is None:
        fmt = (
            "fp32" if o_raw.dtype == np.float64 or o_raw.dtype.kind in "iub" else get_format(o_raw.dtype).name
        )
    try:
        f = get_format(fmt)
    except (TypeError, ValueError, KeyError) as e:
        raise InputError(f"compare: fmt: {e}") from None
    floor = check_number("compare", "floor", floor, 0.0, 1.0, open_lo=True)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        bad = ~np.isfinite(o) | ~np.isfinite(r)
        any_bad = bool(np.any(bad))
        d = np.where(bad, 0.0, o - r)
        ad = np.where(bad, np.inf, np.abs(d))
        # norms of values scaled by the largest magnitude: a plain sum of squares overflows past 1e154
        # (rel_l2 NaN for finite inputs) and underflows below 1e-162 (a 1% error reported as 0)
        scale = max(
            float(np.max(np.abs(np.where(bad, 0.0, o)))), float(np.max(np.abs(np.where(bad, 0.0, r))))
        )
        scale = scale if 0 < scale < np.inf else 1.0
        os_, rs_ = np.where(bad, 0.0, o / scale), np.where(bad, 0.0, r / scale)
        nd, nr = np.linalg.norm(os_ - rs_), np.linalg.norm(rs_)
        if any_bad:
            rel_l2 = np.inf
        elif nd == 0:
            rel_l2 = 0.0  # an exact match, zeros against zeros included
        else:
            rel_l2 = float(nd / nr) if nr > 0 else np.inf
        rmax = float(np.max(np.abs(np.where(bad, 0.0, r))))
        den = np.maximum(np.abs(r), floor * rmax) if rmax > 0 else np.ones_like(r)
        rel = np.where(ad == 0, 0.0, ad / den)
        ulps = np.where(ad == 0, 0.0, ad / _ulp(np.where(bad, 0.0, r), f))
        no = np.linalg.norm(os_)
        if any_bad:
            cosine = np.nan
        else:
            cosine = float(np.sum(os_ * rs_) / (no * nr)) if no > 0 and nr > 0 else float(no == nr)
        comp = None
        if abs_ref is not None:
            s = _real_array("abs_ref", abs_ref).astype(np.float64)
            if s.shape != r.shape:
                raise InputError(f"compare: abs_ref {s.shape} must have ref's shape {r.shape}.")
            if np.any(s < 0) or np.any(np.isnan(s)):
                raise InputError(
                    f"compare: abs_ref must be >= 0 everywhere (the computation on |x| and |w|), got "
                    f"min {np.nanmin(s) if not np.all(np.isnan(s)) else np.nan!r} and "
                    f"{int(np.sum(np.isnan(s)))} NaN; pass the reference computed on absolute values."
                )
            comp = float(np.max(np.where(ad == 0, 0.0, np.where(np.isinf(s), np.inf, ad / s))))
        return Metrics(
            rel_l2=float(rel_l2),
            max_abs=float(np.max(ad)),
            max_rel=float(np.max(rel)),
            ulp_max=float(np.max(ulps)),
            ulp_mean=float(np.mean(ulps)),
            ulp_above_1=float(np.mean(ulps > 1)),
            cosine=float(cosine),
            vendor_ratio=float(np.mean((rel <= 1e-3) & ~bad)),
            balance=float(abs(np.sum(d > 0) - np.sum(d < 0)) / d.size),
            componentwise=comp,
            n_nan=int(np.sum(np.isnan(o))),
            n_overflow=int(np.sum(np.isinf(o) & np.isfinite(r))),
            n_underflow=int(np.sum((o == 0) & (r != 0))),
            n_subnormal=int(np.sum((o != 0) & (np.abs(o) < f.min_normal))),
            n=int(o.size),
            fmt=f.name,
            n_ref_nonfinite=int(np.sum(~np.isfinite(r))),
        )


__all__ = ["COUNT_METRICS", "ERROR_METRICS", "Metrics", "SCORE_METRICS", "compare"]

"""The floating-point formats of the machine and their constants.

The table itself lives in :mod:`npu_jax.core.rounding` (the emulator's Policy needs it, and
``npu_jax`` never imports ``precision``); this module is the user's view of it.

Example:
    >>> from precision.formats import FORMATS, describe
    >>> FORMATS["fp8_e4m3fn"].max
    448.0
"""

from __future__ import annotations

from npu_jax.core.rounding import FORMATS, FloatFormat, format_of, get_format

FP16, BF16, FP32 = FORMATS["fp16"], FORMATS["bf16"], FORMATS["fp32"]
FP8_E4M3FN, FP8_E5M2 = FORMATS["fp8_e4m3fn"], FORMATS["fp8_e5m2"]


def describe() -> str:
    """The formats as a table: precision, unit roundoff, max, smallest normal and subnormal."""
    rows = [
        f"{'format':<11} {'p':>3} {'u = 2^-p':>10} {'max':>10} {'min normal':>11} {'min subnormal':>13} inf"
    ]
    for f in FORMATS.values():
        rows.append(
            f"{f.name:<11} {f.p:>3} {f.u:>10.3g} {f.max:>10.4g} {f.min_normal:>11.3g} "
            f"{f.min_subnormal:>13.3g} {'yes' if f.has_inf else 'no'}"
        )
    return "\n".join(rows)


__all__ = [
    "BF16",
    "FORMATS",
    "FP16",
    "FP32",
    "FP8_E4M3FN",
    "FP8_E5M2",
    "FloatFormat",
    "describe",
    "format_of",
    "get_format",
]

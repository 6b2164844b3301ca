"""Rounding of floats to narrower formats, with the hardware's modes and overflow behaviour.

``round_to`` returns the value rounded to ``fmt`` (as an array of that format). Nearest-even is
XLA's own conversion; the directed modes start from it and step one ulp where the definition
demands, so they are exact for every finite input, inf and NaN. The precision package builds its
public ``precision.round_to`` (which adds stochastic rounding) on this.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

MODES = ("nearest_even", "toward_zero", "up", "down", "away")
_JNP = {"fp16": jnp.float16, "bf16": jnp.bfloat16, "fp32": jnp.float32}


def _finfo(fmt):
    return jnp.finfo(_JNP[fmt])


def round_to(x, fmt: str, mode: str = "nearest_even", *, subnormals: bool = True,
             overflow: str = "inf"):
    """Round ``x`` to ``fmt`` (``fp16``, ``bf16``, ``fp32``).

    Args:
        mode: ``nearest_even`` (RINT), ``toward_zero`` (TRUNC), ``up`` (CEIL), ``down`` (FLOOR),
            ``away`` (ROUND: nearest, ties away from zero).
        subnormals: keep results below the smallest normal (True) or flush them to signed zero.
        overflow: ``inf`` (IEEE) or ``saturate`` (+-inf -> +-max, NaN -> 0, as 910/310P).
    """
    if fmt not in _JNP:
        raise ValueError(f"fmt must be one of {sorted(_JNP)}, got {fmt!r}.")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}.")
    if overflow not in ("inf", "saturate"):
        raise ValueError(f"overflow must be 'inf' or 'saturate', got {overflow!r}.")
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.float32)
    tgt = _JNP[fmt]
    r = x.astype(tgt)  # nearest-even
    if mode != "nearest_even" and jnp.dtype(x.dtype) != jnp.dtype(tgt):
        xw = x.astype(jnp.float32)
        back = r.astype(jnp.float32)
        inf = jnp.array(np.inf, tgt)
        if mode == "toward_zero":
            step = jnp.abs(back) > jnp.abs(xw)
            r = jnp.where(step, jnp.nextafter(r, jnp.zeros_like(r)), r)
        elif mode == "up":
            r = jnp.where(back < xw, jnp.nextafter(r, inf), r)
        elif mode == "down":
            r = jnp.where(back > xw, jnp.nextafter(r, -inf), r)
        elif mode == "away":
            # Nearest-even differs from ties-away only on exact ties that went to the even
            # neighbour of smaller magnitude.
            other = jnp.nextafter(r, jnp.where(xw > back, inf, -inf).astype(tgt))
            tie = (jnp.abs(xw - back) == jnp.abs(other.astype(jnp.float32) - xw)) & (back != xw)
            bigger = jnp.abs(other.astype(jnp.float32)) > jnp.abs(back)
            r = jnp.where(tie & bigger & jnp.isfinite(back), other, r)
    if not subnormals:
        tiny = _finfo(fmt).tiny
        r = jnp.where(jnp.abs(r.astype(jnp.float32)) < tiny, jnp.copysign(jnp.zeros_like(r), r), r)
    if overflow == "saturate":
        m = jnp.array(_finfo(fmt).max, tgt)
        r = jnp.where(jnp.isnan(r), jnp.zeros_like(r), jnp.clip(r, -m, m))
    return r

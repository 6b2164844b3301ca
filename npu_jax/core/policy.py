"""Precision policy: which formats the machine uses where, and how it rounds.

The hardware rule is fp16/bf16 operands in L0A/L0B, fp32 accumulation in L0C, conversion at the
way out (Fixpipe on 910B, L0C->UB on 910/310P) with round-to-nearest-even. Other settings are
what-ifs (e.g. an fp16 running sum) that the precision lab measures.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

OPERANDS = ("fp16", "bf16", "fp32")
ACCUMULATE = ("fp32", "fp16_tile", "fp16_step")
ROUNDING = ("nearest_even",)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Policy:
    """Formats and rounding inside the emulated core.

    Attributes:
        operand: format of Cube operands in L1/L0A/L0B (``fp16``, ``bf16``, ``fp32``).
        accumulate: ``fp32`` (hardware), or the what-ifs ``fp16_tile`` (L0C rounded to fp16 after
            each Mmad) and ``fp16_step`` (rounded after every K0 step inside an Mmad).
        output: format written out of L0C (``fp16``, ``bf16``, ``fp32``).
        rounding: rounding of conversions (``nearest_even``, the hardware's RINT).
        overflow: ``inf`` or ``saturate``; None = the hardware's mode.
        vector: format of vector-unit arithmetic on UB.

    Example:
        >>> Policy(operand="bf16", output="bf16").operand
        'bf16'
    """

    operand: str = "fp16"
    accumulate: str = "fp32"
    output: str = "fp16"
    rounding: str = "nearest_even"
    overflow: str | None = None
    vector: str = "fp16"

    def __post_init__(self):
        for name, allowed in (("operand", OPERANDS), ("output", OPERANDS), ("vector", OPERANDS),
                              ("accumulate", ACCUMULATE), ("rounding", ROUNDING)):
            v = getattr(self, name)
            if v not in allowed:
                raise ValueError(f"Policy.{name} must be one of {allowed}, got {v!r}.")
        if self.overflow not in (None, "inf", "saturate"):
            raise ValueError(f"Policy.overflow must be None, 'inf' or 'saturate', got {self.overflow!r}.")

    def overflow_mode(self, hw) -> str:
        return self.overflow if self.overflow is not None else hw.overflow_mode


_MAX = {"fp16": 65504.0, "bf16": float(jnp.finfo(jnp.bfloat16).max),
        "fp32": float(jnp.finfo(jnp.float32).max)}
_JNP = {"fp16": jnp.float16, "bf16": jnp.bfloat16, "fp32": jnp.float32}


def convert(x, fmt: str, overflow: str = "inf"):
    """Round ``x`` (any float) to ``fmt`` with nearest-even; ``saturate`` clamps +-inf to +-max and
    maps NaN to 0 as the 910/310P conversion units do."""
    x = jnp.asarray(x)
    if overflow == "saturate":
        m = _MAX[fmt]
        x32 = x.astype(jnp.float32)
        x32 = jnp.where(jnp.isnan(x32), 0.0, jnp.clip(x32, -m, m))
        return x32.astype(_JNP[fmt])
    return x.astype(_JNP[fmt])

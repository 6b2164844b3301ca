"""Rounding to a format: ``round_to`` with six modes, subnormals kept or flushed, inf or saturate.

The implementation is :func:`npu_jax.core.rounding.round_to` (integer bit operations, exact for
every input, float64 included); the emulator's conversions call the same function, so what the
lab measures is what the machine does.

Example:
    >>> import jax, numpy as np
    >>> from precision import round_to
    >>> float(round_to(np.float32(1 + 2**-11), "fp16")), float(round_to(np.float32(1 + 2**-11), "fp16", "away"))
    (1.0, 1.0009765625)
"""

from __future__ import annotations

from npu_jax.core.rounding import MODES, OVERFLOW, round_to

__all__ = ["MODES", "OVERFLOW", "round_to"]

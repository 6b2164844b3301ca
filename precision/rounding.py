"""Rounding to a format: ``round_to`` with six modes, subnormals kept or flushed, inf or saturate.

The implementation is :func:`npu_jax.core.rounding.round_to` (integer bit operations, exact for
every input, float64 included); the emulator's conversions call the same function, so what the
lab measures is what the machine does. This module's ``round_to`` is the user's door to it: its
arguments are checked first (a complex or object ``x`` is refused rather than losing its
imaginary part; ``subnormals`` must be a real bool).

Example:
    >>> import jax, numpy as np
    >>> from precision import round_to
    >>> float(round_to(np.float32(1 + 2**-11), "fp16")), float(round_to(np.float32(1 + 2**-11), "fp16", "away"))
    (1.0, 1.0009765625)
"""

from __future__ import annotations

import jax
import numpy as np

from npu_jax.core import rounding as _core
from npu_jax.core.rounding import MODES, OVERFLOW
from npu_jax.errors import InputError, InputTypeError, check_bool, check_choice


def round_to(x, fmt, mode: str = "nearest_even", subnormals: bool = True, overflow: str = "inf", key=None):
    """Round ``x`` to ``fmt`` (see :func:`npu_jax.core.rounding.round_to` for the modes); returns an
    array of ``fmt``'s dtype. Raises the package's errors naming the parameter for a non-real ``x``,
    an unknown ``fmt`` / ``mode`` / ``overflow``, a non-bool ``subnormals`` or a missing ``key``."""
    fn = "round_to"
    if x is None or isinstance(x, (str, bytes, dict)):
        raise InputTypeError(f"{fn}: x must be an array or a number, got {type(x).__name__}.")
    if not isinstance(x, (jax.Array, np.generic)):
        try:  # Python ints past 64 bits are numbers too (numpy would make them an object array)
            x = _core.host_numbers(x)
        except (TypeError, ValueError) as e:
            raise InputTypeError(f"{fn}: x must be an array-like of numbers ({e}).") from None
    kind = np.dtype(x.dtype).kind
    if kind == "c":
        raise InputTypeError(
            f"{fn}: x must be real, got dtype {x.dtype}; round x.real and x.imag separately (the "
            f"imaginary part would otherwise be dropped)."
        )
    if kind not in "fiub" and not (kind == "V" and np.dtype(x.dtype).itemsize <= 2):
        raise InputTypeError(f"{fn}: x must be a numeric array, got dtype {x.dtype} ({_first_bad(x)}).")
    check_choice(fn, "mode", mode, MODES)
    check_choice(fn, "overflow", overflow, OVERFLOW)
    subnormals = check_bool(fn, "subnormals", subnormals)
    if mode == "stochastic" and key is not None and not _is_key(key):
        raise InputTypeError(
            f"{fn}: key must be a jax PRNG key (jax.random.key(seed), or the legacy uint32 (2,) "
            f"jax.random.PRNGKey(seed)), got {type(key).__name__} {key!r}."
        )
    try:
        return _core.round_to(x, fmt, mode, subnormals, overflow, key)
    except ValueError as e:  # an unknown format or a missing key, named by the core's message
        raise InputError(f"{fn}: {e}") from None


def _first_bad(x) -> str:
    """The first element of ``x`` that is not a real number, for the message."""
    for i, v in enumerate(np.ravel(x)):
        if not isinstance(v, (int, float, np.integer, np.floating)):
            return f"element {i} is {type(v).__name__} {str(v)[:30]!r}"
    return "its elements are not numbers"


def _is_key(key) -> bool:
    """One PRNG key: a typed key array of shape (), or a legacy raw key (uint32, shape (2,))."""
    if not isinstance(key, jax.Array):
        return False
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key.shape == ()
    return key.dtype == np.uint32 and key.shape == (2,)


__all__ = ["MODES", "OVERFLOW", "round_to"]

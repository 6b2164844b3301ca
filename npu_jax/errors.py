"""Exceptions raised by npu-jax. Each message says what, where, what was expected, and the fix.

Also the primitive argument checks every layer shares (bools, ints, numbers, seeds, choices): this
is the lowest layer, so the search below the public API uses the same checks (docs/errors.md).
"""

import contextlib
import os

import numpy as np


class NpuError(Exception):
    """Base class of every npu-jax error."""


class CapacityError(NpuError, ValueError):
    """An allocation or tiling does not fit its on-chip buffer."""


class AlignmentError(NpuError, ValueError):
    """An allocation starts or is sized off its buffer's alignment."""


class TilingError(NpuError, ValueError):
    """A tiling is illegal for the workload (wrong multiple, zero size, ...)."""


class SanitizerError(NpuError, RuntimeError):
    """A sanitizer (racecheck, memcheck, initcheck, synccheck) found a bug in a kernel.

    The message names the check, the kernel, the core, the instruction (index, op, pipe and source
    line), the allocation and tile, and what to change."""


class WindowError(NpuError, ValueError):
    """A window (GM tensor or on-chip allocation), stage or extent is out of range (memcheck, static part)."""


class SanitizerWarning(UserWarning):
    """A sanitizer finding reported as a warning (``Checks(..., action="warn")``)."""


class InputError(NpuError, ValueError):
    """A public entry point's argument has an illegal value (a range, a shape, a file's contents).

    The message names the parameter, the value given and the fix."""


class InputTypeError(NpuError, TypeError):
    """A public entry point's argument has the wrong type (a string where a bool is asked, ``True``
    where a count is, an object or complex array where a float one is)."""


class SizeError(NpuError, ValueError):
    """A call would allocate more than the process's limit (``npu_jax.set_max_bytes``, or the
    ``NPU_JAX_MAX_BYTES`` environment variable). The message gives the estimate, its parts and the
    limit; raise the limit or shrink the call."""


class ConfigError(NpuError, ValueError):
    """A hardware configuration whose costs cannot be represented exactly (one instruction's cycles
    past the counters' exact range), or whose file is not a configuration."""


class GradientError(NpuError, NotImplementedError):
    """``jax.grad`` (or any JAX differentiation) through an emulated kernel: refused, because the
    emulator's rounding is bit arithmetic whose derivative is zero almost everywhere."""


# ---- argument checks shared by every layer (the lowest layer, so the search may use them too) -----
def _is_bool(v) -> bool:
    return isinstance(v, (bool, np.bool_))


def is_int(v) -> bool:
    """A Python or numpy integer, never a bool (``True`` is not 1 here)."""
    return hasattr(v, "__index__") and not _is_bool(v) and not isinstance(v, np.ndarray)


_INT64 = (-(2**63), 2**63 - 1)


def check_bool(fn: str, name: str, v) -> bool:
    """``v`` as a bool: Python and numpy bools only (the string ``"no"`` or ``1`` is refused)."""
    if _is_bool(v):
        return bool(v)
    raise InputTypeError(f"{fn}: {name} must be True or False, got {type(v).__name__} {v!r}.")


def check_int(fn: str, name: str, v, lo: int | None = None, hi: int | None = None, fix: str = "") -> int:
    """``v`` as an int in [lo, hi]: Python and numpy integers, never a bool or a float."""
    if not is_int(v):
        raise InputTypeError(
            f"{fn}: {name} must be an int, got {type(v).__name__} {v!r}" + (f"; {fix}" if fix else ".")
        )
    v = int(v.__index__())
    lo_ = _INT64[0] if lo is None else lo
    hi_ = _INT64[1] if hi is None else hi
    if not lo_ <= v <= hi_:
        raise InputError(f"{fn}: {name} must be in [{lo_}, {hi_}], got {v}" + (f"; {fix}" if fix else "."))
    return v


def check_number(fn: str, name: str, v, lo: float | None = None, hi: float | None = None, *, open_lo=False):
    """``v`` as a finite real number (int or float, never a bool or a string) in [lo, hi]
    (``(lo, hi]`` with ``open_lo``)."""
    if _is_bool(v) or isinstance(v, (str, bytes, complex, np.complexfloating)):
        raise InputTypeError(f"{fn}: {name} must be a real number, got {type(v).__name__} {v!r}.")
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        raise InputTypeError(f"{fn}: {name} must be a real number, got {type(v).__name__} {v!r}.") from None
    if f != f or f in (float("inf"), float("-inf")):
        raise InputError(f"{fn}: {name} must be finite, got {v!r}.")
    if (lo is not None and (f <= lo if open_lo else f < lo)) or (hi is not None and f > hi):
        rng = f"{'(' if open_lo else '['}{lo}, {hi}]"
        raise InputError(f"{fn}: {name} must be in {rng}, got {v!r}.")
    return f


def check_seed(fn: str, name: str, v) -> int:
    """A PRNG seed: an int in [0, 2**63 - 1] (what both ``numpy.random.default_rng`` and
    ``jax.random.key`` take)."""
    return check_int(fn, name, v, 0, 2**63 - 1, fix="a seed is a non-negative 63-bit integer")


def check_choice(fn: str, name: str, v, allowed) -> str:
    """``v`` one of ``allowed`` (strings)."""
    if not isinstance(v, str):
        raise InputTypeError(f"{fn}: {name} must be one of {tuple(allowed)}, got {type(v).__name__} {v!r}.")
    if v not in allowed:
        raise InputError(f"{fn}: {name} must be one of {tuple(allowed)}, got {v!r}.")
    return v


_MAX_BYTES_ENV = "NPU_JAX_MAX_BYTES"
_DEFAULT_MAX_BYTES = 4 << 30
_max_bytes: list[int | None] = [None]  # set_max_bytes's value (None: the environment or the default)


# ---- the allocation limit (in the lowest layer: the search, below the API, refuses by it too) ------
def max_bytes() -> int:
    """Bytes one call may allocate for its emulated state: :func:`set_max_bytes`'s value, else
    ``NPU_JAX_MAX_BYTES``, else 4 GiB."""
    if _max_bytes[0] is not None:
        return _max_bytes[0]
    env = os.environ.get(_MAX_BYTES_ENV)
    if env is None:
        return _DEFAULT_MAX_BYTES
    try:
        v = int(float(env))
    except (ValueError, OverflowError):
        raise InputError(
            f"{_MAX_BYTES_ENV}={env!r} must be a number of bytes (e.g. 8e9); unset it or fix it."
        ) from None
    if v <= 0:
        raise InputError(f"{_MAX_BYTES_ENV}={env!r} must be > 0 bytes.")
    return v


def set_max_bytes(n: int | None) -> contextlib.AbstractContextManager:
    """Set the per-call allocation limit (bytes; None = back to ``NPU_JAX_MAX_BYTES`` or 4 GiB).
    Usable as a context manager too, which restores the previous limit:

    Example:
        >>> import npu_jax
        >>> with npu_jax.set_max_bytes(16 << 30):
        ...     pass
    """
    old = _max_bytes[0]
    _max_bytes[0] = None if n is None else check_int("set_max_bytes", "n", n, 1)

    @contextlib.contextmanager
    def restore():
        try:
            yield
        finally:
            _max_bytes[0] = old

    return restore()


def check_size(fn: str, parts: dict) -> int:
    """Refuse a call whose estimated allocation (``parts``: what -> bytes) exceeds :func:`max_bytes`."""
    total = int(sum(parts.values()))
    limit = max_bytes()
    if total > limit:
        big = ", ".join(f"{k} {v / 2**20:,.1f} MiB" for k, v in sorted(parts.items(), key=lambda kv: -kv[1]))
        raise SizeError(
            f"{fn}: this call would allocate about {total / 2**20:,.1f} MiB ({big}), over the limit of "
            f"{limit / 2**20:,.1f} MiB. Shrink the call (smaller trace, tensors, checks capacity or "
            f"fewer cores), or raise the limit with npu_jax.set_max_bytes(n) or {_MAX_BYTES_ENV}=n."
        )
    return total


# public: the errors a caller may catch (the checks above are the package's own)
__all__ = [
    "AlignmentError",
    "CapacityError",
    "ConfigError",
    "GradientError",
    "InputError",
    "InputTypeError",
    "NpuError",
    "SanitizerError",
    "SanitizerWarning",
    "SizeError",
    "TilingError",
    "WindowError",
]

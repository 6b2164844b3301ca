"""Exceptions raised by npu-jax. Each message says what, where, what was expected, and the fix."""


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

"""Precision policy: which formats the machine uses where, and how it rounds.

The hardware rule is fp16/bf16 operands in L0A/L0B, fp32 accumulation in L0C, conversion at the
way out (Fixpipe on 910B, L0C->UB on 910/310P) with round-to-nearest-even. Other settings are
what-ifs (an fp16 running sum, directed or stochastic rounding at the output, flushed
subnormals, vector arithmetic in fp16) that the precision lab measures. Every kernel built on
the instruction set (GEMM, the four Conv2D strategies, fused epilogues) honours the policy,
because the instructions read it: ``mmad`` the accumulation, ``fixpipe`` / ``l0c_to_ub`` the
output conversion, ``vector`` the vector format and the overflow mode.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import inspect
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from npu_jax.core.rounding import MODES, round_to

FLOATS = ("fp16", "bf16", "fp32")
OPERANDS = FLOATS + ("int8",)
# the running sums of float operands: the hardware's fp32 and the fp16 what-ifs
ACCUMULATE = ("fp32", "fp16_tile", "fp16_step", "fp16_mac")
# int8 operands: the Cube multiplies int8 x int8 into an exact int32 sum, nothing else
INT_ACCUMULATE = ("int32",)
# what leaves L0C: a float format, or from an int32 accumulator its integers, fp16 (dequantised) or
# int8 (requantised)
OUTPUTS = FLOATS + ("int32", "int8")
INT8_OUTPUTS = ("int32", "fp16", "int8")
ROUNDING = MODES


@dataclasses.dataclass(frozen=True, kw_only=True)
class Policy:
    """Formats and rounding inside the emulated core.

    The default is the hardware's own rule: fp16 operands, fp32 accumulation, fp16 output. It does
    not follow the input's dtype: a public entry point given fp32, bf16 or fp64 arrays and no
    ``policy`` converts them to fp16 and returns fp16 (and says so once per process with an
    :class:`OperandCastWarning`). Pass a policy to choose, e.g. ``Policy(operand="bf16",
    output="bf16")`` for bf16 in and out, or ``Policy(output="fp32")`` for an fp32 result.

    int8 inference: ``Policy(operand="int8", accumulate="int32", output=...)`` (``accumulate`` may be
    left out: it is ``int32`` for int8 operands). The Cube multiplies int8 x int8 into exact int32
    sums in L0C, at twice the fp16 MAC rate; ``output="int32"`` returns those integers, ``"fp16"``
    dequantises and ``"int8"`` requantises them on the way out (Fixpipe on 910B, the vector unit on
    910/310P) with the ``scale`` and ``offset`` the entry point is given
    (:func:`npu_jax.requantize` is the formula).

    Attributes:
        operand: format of Cube operands in L1/L0A/L0B (``fp16``, ``bf16``, ``fp32``, ``int8``).
        accumulate: the running sum in L0C: ``fp32`` (the hardware, float operands), ``int32``
            (int8 operands: exact, the only choice), or the float what-ifs
            ``fp16_tile`` (rounded to fp16 after each Mmad, i.e. per K tile of the kernel's
            ``k_l0`` depth), ``fp16_step`` (after every K0-deep fractal step inside an Mmad) and
            ``fp16_mac`` (after every single multiply-add: a true fp16 running sum).
        output: format written out of L0C (``fp16``, ``bf16``, ``fp32``; from int8 operands
            ``int32``, ``fp16`` or ``int8``).
        rounding: rounding mode of the output conversion (Fixpipe, L0C->UB): ``nearest_even``
            (the hardware's RINT), ``toward_zero``, ``up``, ``down``, ``away`` or ``stochastic``
            (keyed by ``seed``, the instruction count and the output window). Vector arithmetic
            rounds to nearest-even, as the hardware; ``VCast`` takes its own mode.
        overflow: ``inf`` or ``saturate``; None = the hardware's mode (``hw.overflow_mode``).
        subnormals: keep subnormal results of the output conversion (True) or flush them to
            zero, as a flush-to-zero conversion unit would.
        vector: format the vector unit computes in: each vector op's result is rounded to it
            before being stored in the destination's format, and VReduceSum sums pairwise in it
            (a fixed pairwise tree in every format).
            ``fp32`` (default) is one rounding to the destination.
        seed: seed of stochastic rounding.

    Example:
        >>> Policy(operand="bf16", output="bf16").operand
        'bf16'
    """

    operand: str = "fp16"
    accumulate: str | None = None  # fp32 for float operands, int32 for int8
    output: str = "fp16"
    rounding: str = "nearest_even"
    overflow: str | None = None
    subnormals: bool = True
    vector: str = "fp32"
    seed: int = 0

    def __post_init__(self):
        for name, allowed in (
            ("operand", OPERANDS),
            ("output", OUTPUTS),
            ("vector", FLOATS),
            ("rounding", ROUNDING),
        ):
            v = getattr(self, name)
            if v not in allowed:
                raise ValueError(f"Policy.{name} must be one of {allowed}, got {v!r}.")
        int8 = self.operand == "int8"
        if self.accumulate is None:
            object.__setattr__(self, "accumulate", "int32" if int8 else "fp32")
        allowed = INT_ACCUMULATE if int8 else ACCUMULATE
        if self.accumulate not in allowed:
            raise ValueError(
                f"Policy.accumulate must be one of {allowed} for {self.operand} operands, got "
                f"{self.accumulate!r}" + (" (the Cube sums int8 products in int32)." if int8 else ".")
            )
        outputs = INT8_OUTPUTS if int8 else FLOATS
        if self.output not in outputs:
            raise ValueError(
                f"Policy.output must be one of {outputs} for {self.operand} operands, got {self.output!r}"
                + (
                    ": an int32 accumulator leaves L0C as int32, dequantised to fp16 or requantised to int8."
                    if int8
                    else ": int32 and int8 outputs come from int8 operands (Policy(operand='int8'))."
                )
            )
        if int8 and self.rounding != "nearest_even":
            raise ValueError(
                f"Policy.rounding must be 'nearest_even' for int8 operands (the dequantisation and "
                f"requantisation round to nearest even), got {self.rounding!r}."
            )
        if self.overflow not in (None, "inf", "saturate"):
            raise ValueError(f"Policy.overflow must be None, 'inf' or 'saturate', got {self.overflow!r}.")
        if not isinstance(self.subnormals, bool):
            raise ValueError(f"Policy.subnormals must be True or False, got {self.subnormals!r}.")
        if not isinstance(self.seed, int):
            raise ValueError(f"Policy.seed must be an int, got {self.seed!r}.")

    def overflow_mode(self, hw) -> str:
        return self.overflow if self.overflow is not None else hw.overflow_mode

    def key(self, *salt):
        """The stochastic-rounding key for one instruction: ``seed`` folded with ``salt`` (traced
        ints such as the instruction count and the window offset, so no two tiles share bits)."""
        k = jax.random.key(self.seed)
        for s in salt:
            k = jax.random.fold_in(k, jnp.asarray(s, jnp.uint32))
        return k

    def timing(self) -> Policy:
        """The policy as a timing-only run sees it: its formats (operand, output, vector), which
        decide the instructions, their bytes and their cycles. The rest (accumulate, rounding,
        overflow, subnormals, seed) are what-ifs of the arithmetic and change values only, so the
        data-free runs of policies that differ in them alone share one compiled program and one
        kept report (``tests/test_values.py`` holds every report of the values path, run so, equal
        to the instruction path's under the full policy)."""
        return Policy(operand=self.operand, output=self.output, vector=self.vector)

    @property
    def quantised(self) -> bool:
        """int8 operands: an int32 accumulator, scaled on the way out unless the output is int32."""
        return self.operand == "int8"

    def convert_out(self, x, fmt: str, hw, *salt):
        """Round ``x`` to ``fmt`` as the output conversion does: ``rounding``, ``subnormals`` and
        the overflow mode (``salt`` seeds stochastic rounding)."""
        key = self.key(*salt) if self.rounding == "stochastic" else None
        return round_to(
            x, fmt, self.rounding, subnormals=self.subnormals, overflow=self.overflow_mode(hw), key=key
        )


class OperandCastWarning(UserWarning):
    """A public entry point converted non-fp16 inputs to the default Policy's fp16.

    Shown once per process, and only when no ``policy`` was passed. Silence it by passing a policy
    (``policy=npu_jax.Policy()`` keeps the default and says you meant it), or with
    ``warnings.filterwarnings("ignore", category=npu_jax.OperandCastWarning)``.
    """


# once per process: a note repeated on every call (or every traced layer of a sweep) would bury the output
_cast_noted = False
# set while a public entry point runs, so that one it calls (conv_relu -> conv2d_fused) is not the one named
_in_entry_point: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "npu_jax_in_entry_point", default=False
)


def notes_default_cast(*operands: str):
    """Decorate a public entry point whose ``operands`` (argument names) the default Policy converts.

    After a call that passed no ``policy`` and returned (a refused call is not noted), warns once per
    process with an :class:`OperandCastWarning` if an operand's dtype was not float16: the result
    is then fp16 whatever the input's dtype, which a JAX user would not expect unless told.
    """

    def wrap(fn):
        sig = inspect.signature(fn)
        public = f"{fn.__module__.split('.')[0]}.{fn.__name__}"  # npu_jax.conv2d, fusion.conv_relu

        @functools.wraps(fn)
        def entry_point(*args, **kwargs):
            if _in_entry_point.get():
                return fn(*args, **kwargs)
            token = _in_entry_point.set(True)
            try:
                out = fn(*args, **kwargs)
            finally:
                _in_entry_point.reset(token)
            given = sig.bind(*args, **kwargs).arguments
            if given.get("policy") is None:
                _note_cast(public, {name: given[name] for name in operands})
            return out

        return entry_point

    return wrap


def _note_cast(fn: str, arrays: dict) -> None:
    global _cast_noted
    # jax/numpy arrays and tracers have a dtype; a list or scalar is read as numpy reads it
    dtypes = {
        name: np.dtype(a.dtype if hasattr(a, "dtype") else np.asarray(a).dtype) for name, a in arrays.items()
    }
    converted = {name: dt.name for name, dt in dtypes.items() if dt != np.float16}
    if _cast_noted or not converted:
        return
    _cast_noted = True
    given = ", ".join(f"{name} {dt}" for name, dt in converted.items())
    warnings.warn(
        f"{fn}: inputs converted to fp16 ({given}): with no policy, the hardware's default "
        "Policy() applies (fp16 operands, fp32 accumulation, fp16 output), so the result is fp16. "
        "Pass policy=npu_jax.Policy(operand='bf16', output='bf16') for bf16, Policy(output='fp32') for "
        "an fp32 result, or policy=npu_jax.Policy() to keep fp16 and silence this note "
        "(shown once per process).",
        OperandCastWarning,
        stacklevel=3,
    )


def convert(
    x, fmt: str, overflow: str = "inf", mode: str = "nearest_even", subnormals: bool = True, key=None
):
    """Round ``x`` (any float) to ``fmt``; ``saturate`` clamps +-inf to +-max and maps NaN to 0 as
    the 910/310P conversion units do. See :func:`npu_jax.core.rounding.round_to`."""
    return round_to(jnp.asarray(x), fmt, mode, subnormals=subnormals, overflow=overflow, key=key)

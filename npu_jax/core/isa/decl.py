"""What an instruction is: one declaration (:class:`Instr`) and what running it yields (:class:`Effect`).

A declaration names the instruction's pipe, the buffers it reads and writes, the counters it
charges, its cost rule (a function of ``npu_jax/hw/costs.py``) and its data semantics. The
semantics compute the data and report what the instruction did (an :class:`Effect`); ``issue``
(``isa/execute.py``) evaluates the cost rule on that, charges the pipe, counts the bytes and lets the
sanitizers observe. Nothing else charges time.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import NamedTuple

from npu_jax.core.pipes import COUNTERS, PIPES
from npu_jax.core.state import Core
from npu_jax.hw.config import BUFFERS, HardwareConfig
from npu_jax.hw.costs import HwNumbers

MEMORIES = BUFFERS + ("GM",)


class Effect(NamedTuple):
    """What one instruction did, as its semantics report it to ``issue``.

    Attributes:
        core: the core with the instruction's data written (not yet charged).
        cost: the operands of the declaration's cost rule, by name (``rule(h, **cost)``).
        counts: ``(counter, amount)`` pairs, each counter one of the declaration's ``counts``.
        reads: allocation stages read (a :class:`Ref`, or ``(ref, cond)``: read only where cond).
        writes: allocation stages written.
        oob: memcheck conditions ``(bad, code, alloc_key, dim, value)``.
        gm_writes: ``(GmWindow, mask)`` per GM output window written (mask None: nothing marked).
    """

    core: Core
    cost: dict
    counts: tuple = ()
    reads: tuple = ()
    writes: tuple = ()
    oob: tuple = ()
    gm_writes: tuple = ()


@dataclasses.dataclass(frozen=True)
class Instr:
    """One instruction of the machine, declared once.

    Attributes:
        name: the op name of the trace and of sanitizer findings (two declarations may share one:
            DataCopy in and out are one op on two pipes).
        pipe: the pipe it runs on (one of ``PIPES``).
        reads: memories it reads (``"GM"`` or a buffer of ``BUFFERS``).
        writes: memories it writes.
        counts: the counters (``COUNTERS``) it charges.
        cost: its cost rule, a function of ``npu_jax/hw/costs.py``: ``cost(h, **operands)`` cycles,
            ``h`` the :class:`~npu_jax.hw.costs.HwNumbers` of the core's hardware.
        semantics: its data, ``semantics(core, h, when, **args) -> Effect``.
    """

    name: str
    pipe: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    counts: tuple[str, ...]
    cost: Callable
    semantics: Callable[..., Effect]

    def __post_init__(self):
        if self.pipe not in PIPES:
            raise ValueError(f"Instr {self.name!r}: pipe must be one of {PIPES}, got {self.pipe!r}.")
        for field in ("reads", "writes"):
            bad = [m for m in getattr(self, field) if m not in MEMORIES]
            if bad:
                raise ValueError(f"Instr {self.name!r}: {field} must name memories of {MEMORIES}, got {bad}.")
        bad = [c for c in self.counts if c not in COUNTERS]
        if bad:
            raise ValueError(f"Instr {self.name!r}: counts must be counters of {COUNTERS}, got {bad}.")


@functools.lru_cache(maxsize=256)
def hw_numbers(hw: HardwareConfig) -> HwNumbers:
    """The cost rules' numbers of ``hw`` (Python scalars), computed once per configuration."""
    return HwNumbers.of(hw)

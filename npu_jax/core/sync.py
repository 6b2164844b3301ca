"""Flags between pipes, barriers, and queues built on flags.

``SetFlag<SRC_DST>(id)`` fires once every earlier instruction of SRC is done: it records SRC's
free time. ``WaitFlag<SRC_DST>(id)`` holds DST until then and clears the flag -- a binary
semaphore per (src, dst, id). Data is computed in program order, so these change only *time*;
whether they are *right* is what the sanitizers check (``sanitize.py``: synccheck watches the
semaphores, racecheck carries vector clocks through them). They observe through one hook,
``sanitize.on_flag``, which every op here calls once, before it runs, with a ``FlagOp``. When the
core keeps a trace, each SetFlag and WaitFlag is also written to it (``trace.record_flag``): the
report draws an arrow from each SetFlag to the WaitFlag it released.

Pipes are named here as in the vendor's programming model (``PIPE_M``, ``HardEvent::M_FIX``):
``MTE2 MTE1 M FIX V MTE3 S``. Reports, traces and plots show the profiler's lane names for the same
pipes (``CUBE FIXP VECTOR SCALAR``); ``pipes.LANES`` is the one table between the two.

Functions take the core and use only its fields and ``core.replace``: this module does not import
``state.py`` (which imports it).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import jax.numpy as jnp

from npu_jax.core import sanitize, wide
from npu_jax.core.buffers import Alloc
from npu_jax.core.checks.sites import FlagOp
from npu_jax.core.pipes import LANES, PIPE_INDEX, PIPES
from npu_jax.core.trace import SET, WAIT, record_flag

if TYPE_CHECKING:  # annotations only: state.py imports this module
    from npu_jax.core.state import Core


def parse_event(event: str) -> tuple[int, int]:
    """``"MTE2_MTE1"`` -> (src, dst) pipe indices."""
    if not isinstance(event, str):
        raise TypeError(f"event must be a string 'SRC_DST' such as 'MTE2_MTE1', got {event!r}.")
    parts = event.upper().split("_")
    if len(parts) != 2 or parts[0] not in PIPE_INDEX or parts[1] not in PIPE_INDEX or parts[0] == parts[1]:
        raise ValueError(
            f"event must be 'SRC_DST' with two different pipes from {PIPES}, got {event!r}"
            f"{_lane_hint(parts)}."
        )
    return PIPE_INDEX[parts[0]], PIPE_INDEX[parts[1]]


def _lane_hint(names) -> str:
    """'; ...' naming the pipe of each profiler lane name in ``names`` (a user reading a trace
    writes CUBE where the programming model says M), or ''."""
    pipe_of = {lane: p for p, lane in LANES.items() if lane != p}
    hits = [f"{n} is pipe {pipe_of[n]}" for n in names if n in pipe_of]
    return f" ({', '.join(hits)}: flags use the programming model's pipe names)" if hits else ""


def _event_id(core: Core, event_id):
    n = core.hw.num_event_ids
    if isinstance(event_id, bool) or (isinstance(event_id, int) and not 0 <= event_id < n):
        raise ValueError(
            f"event id must be in 0..{n - 1} on {core.hw.name}, got {event_id!r}; "
            f"ping-pong kernels use base + i % stages."
        )
    # a traced id outside the range is clipped here and reported by synccheck
    return jnp.clip(jnp.asarray(event_id, jnp.int32), 0, n - 1)


def _flag_mask(core: Core, s: int, d: int, e):
    """(P, P, E) one-hot of flag (s, d, e): selects fuse where scatters would not."""
    P, _, E = core.flag_set.shape
    ps = jnp.arange(P)
    return (ps == s)[:, None, None] & (ps == d)[None, :, None] & (jnp.arange(E) == e)[None, None, :]


def set_flag(core: Core, event: str, event_id=0, when=True) -> Core:
    if getattr(core, "on_board", False):  # the timing Board (board.py) keeps its own flags
        return core.set_flag(event, event_id, when)
    when = when if core.pred is None else jnp.logical_and(when, core.pred)
    s, d = parse_event(event)
    e = _event_id(core, event_id)
    core, op = sanitize.on_flag(core, FlagOp("SetFlag", s, d, event_id, jnp.asarray(when, jnp.bool_)))
    hit = _flag_mask(core, s, d, e) & op.when
    core = core.replace(
        flag_time=jnp.where(hit[..., None], core.pipe_free[s], core.flag_time),
        flag_set=core.flag_set | hit,
    )
    if core.trace:
        core = core.replace(trace=record_flag(core.trace, SET, s, d, e, core.pipe_free[s], op.when))
    return core


def wait_flag(core: Core, event: str, event_id=0, when=True) -> Core:
    if getattr(core, "on_board", False):
        return core.wait_flag(event, event_id, when)
    when = when if core.pred is None else jnp.logical_and(when, core.pred)
    s, d = parse_event(event)
    e = _event_id(core, event_id)
    core, op = sanitize.on_flag(core, FlagOp("WaitFlag", s, d, event_id, jnp.asarray(when, jnp.bool_)))
    hit = _flag_mask(core, s, d, e) & op.when
    ready = wide.maximum(core.pipe_free[d], core.flag_time[s, d, e])
    oh = (jnp.arange(core.pipe_free.shape[0]) == d)[:, None] & op.when
    core = core.replace(
        pipe_free=jnp.where(oh, ready, core.pipe_free),
        flag_set=core.flag_set & ~hit,
    )
    if core.trace:
        core = core.replace(trace=record_flag(core.trace, WAIT, s, d, e, ready, op.when))
    return core


def pipe_barrier(core: Core, pipe: str = "ALL", when=True) -> Core:
    """``PipeBarrier<PIPE>``: a pipe is already in order, so only ``ALL`` changes time: every pipe
    then waits for the latest."""
    if not isinstance(pipe, str) or (pipe.upper() != "ALL" and pipe.upper() not in PIPE_INDEX):
        hint = _lane_hint([pipe.upper()]) if isinstance(pipe, str) else ""
        raise ValueError(f"pipe must be 'ALL' or one of {PIPES}, got {pipe!r}{hint}.")
    if getattr(core, "on_board", False):
        return core.pipe_barrier(pipe, when)
    when = when if core.pred is None else jnp.logical_and(when, core.pred)
    core, op = sanitize.on_flag(
        core, FlagOp("PipeBarrier", when=jnp.asarray(when, jnp.bool_), pipe=pipe.upper())
    )
    if op.pipe == "ALL":
        latest = wide.max_over(core.pipe_free, 0)
        new = jnp.broadcast_to(latest, core.pipe_free.shape)
        core = core.replace(pipe_free=jnp.where(op.when, new, core.pipe_free))
    return core


@dataclasses.dataclass(frozen=True)
class Queue:
    """A TQue-like queue of ``alloc.stages`` slots between a producer and a consumer pipe.

    Producer: ``alloc_tensor(i)`` (waits until slot i % stages is free) ... ``enque(i)``.
    Consumer: ``deque(i)`` (waits until slot i holds data) ... ``free(i)``.
    ``init`` marks all slots free (the kernel prologue); ``drain`` consumes those marks at the end.
    Event ids ``event_base .. event_base + stages - 1`` are used in both directions.

    Example:
        >>> q = Queue("MTE2", "V", x_ub)             # doctest: +SKIP
        >>> core = q.init(core)                      # doctest: +SKIP
    """

    producer: str
    consumer: str
    alloc: Alloc
    event_base: int = 0

    @property
    def stages(self) -> int:
        return self.alloc.stages

    def _id(self, i):
        if isinstance(i, int):  # a Python loop's index (the timing Board's): no jax op
            return self.event_base + i % self.stages
        return self.event_base + jnp.asarray(i, jnp.int32) % self.stages

    def _fwd(self):
        return f"{self.producer}_{self.consumer}"

    def _back(self):
        return f"{self.consumer}_{self.producer}"

    def slot(self, i):
        return self.alloc[i % self.stages if isinstance(i, int) else jnp.asarray(i, jnp.int32) % self.stages]

    def init(self, core: Core) -> Core:
        for s in range(self.stages):
            core = set_flag(core, self._back(), self.event_base + s)
        return core

    def alloc_tensor(self, core: Core, i, when=True) -> Core:
        return wait_flag(core, self._back(), self._id(i), when)

    def enque(self, core: Core, i, when=True) -> Core:
        return set_flag(core, self._fwd(), self._id(i), when)

    def deque(self, core: Core, i, when=True) -> Core:
        return wait_flag(core, self._fwd(), self._id(i), when)

    def free(self, core: Core, i, when=True) -> Core:
        return set_flag(core, self._back(), self._id(i), when)

    def drain(self, core: Core) -> Core:
        for s in range(self.stages):
            core = wait_flag(core, self._back(), self.event_base + s)
        return core

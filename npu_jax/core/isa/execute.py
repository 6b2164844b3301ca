"""``issue``: run one declared instruction -- its data, its cost, its counters, its pipe, its trace.

Every instruction goes through :func:`issue`, the one place time is charged:

1. the declaration's semantics write the data and say what the instruction did (an ``Effect``);
2. the declaration's cost rule (``npu_jax/hw/costs.py``) turns that into cycles, with the numbers
   of the core's hardware (``hw_numbers``, computed once per configuration);
3. the bytes per path and FLOPs are counted, the sanitizers observe through their one hook
   (``sanitize.on_issue``), and the pipe is charged (:func:`charge`): ``start = pipe_free[p]``,
   ``end = start + cost``, in order on that pipe, recorded in the trace.

``when`` (a bool, possibly traced) false makes an instruction a no-op that costs nothing -- how
kernels predicate edge or idle iterations without Python control flow. Data is computed in program
order; overlap between pipes shows only in time (see ``sync.py``).
"""

from __future__ import annotations

import jax.numpy as jnp

from npu_jax.core import sanitize, wide
from npu_jax.core.isa.decl import Effect, Instr, hw_numbers
from npu_jax.core.isa.table import OP_INDEX
from npu_jax.core.pipes import COUNTER_INDEX, PIPE_INDEX
from npu_jax.core.state import Core
from npu_jax.core.trace import record_instr

_i32 = jnp.int32


def issue(core: Core, instr: Instr, when=True, **args) -> Core:
    """Run the declared instruction ``instr`` with operands ``args`` (its semantics' keywords)."""
    h = hw_numbers(core.hw)
    if core.pred is not None:
        when = jnp.logical_and(when, core.pred)
    effect = instr.semantics(core, h, when, **args)
    _check_declared(instr, effect)
    core = effect.core
    for path, amount in effect.counts:
        core = count(core, path, amount, when)
    cycles = instr.cost(h, **effect.cost)
    for ref in [r[0] if isinstance(r, tuple) else r for r in effect.reads] + list(effect.writes):
        sanitize.check_ref_static(ref, instr.name)
    if core.san:
        core = sanitize.on_issue(core, instr.pipe, instr.name, when, effect.reads, effect.writes, effect.oob)
    return charge(core, instr.pipe, cycles, instr.name, when, effect.counts)


def count(core: Core, name: str, amount, when=True) -> Core:
    """Add ``amount`` (where ``when``) to counter ``name`` (a path's bytes, FLOPs)."""
    amount = jnp.where(jnp.asarray(when), jnp.asarray(amount, _i32), 0)
    # One row updated at a static index, not ``where(onehot, new, old)`` over every row: an unrolled
    # kernel's chain of such selects is fused, and copied, by XLA into each instruction that reads a
    # clock or a counter, so its compile grew with the square of the instructions (pyasc's softmax at
    # 8 tiles a block: 6 min and 23.6 GB; now 44 s and 2.4 GB), for the same bits and cycles.
    i = COUNTER_INDEX[name]
    return core.replace(counters=core.counters.at[i].set(wide.add_int(core.counters[i], amount)))


def charge(core: Core, pipe: str, cycles, op: str, when=True, counts=()) -> Core:
    """Charge ``cycles`` to ``pipe`` (in order) for an ``op`` of ``OPS``, recording it in the trace.

    The pipe bookkeeping of :func:`issue`, with no semantics, counters or checks: tests and
    what-if studies use it to put given work on a pipe. ``counts`` (the instruction's counter
    amounts) only label the trace event with the bytes it moved.
    """
    p = PIPE_INDEX[pipe]
    when = jnp.asarray(when, jnp.bool_)
    cost = jnp.where(when, jnp.asarray(cycles, _i32), 0)
    start = core.pipe_free[p]
    end = wide.add_int(start, cost)
    core = core.replace(  # the pipe's row at its static index (why: count)
        pipe_free=core.pipe_free.at[p].set(end),
        pipe_busy=core.pipe_busy.at[p].set(wide.add_int(core.pipe_busy[p], cost)),
        n_instr=core.n_instr.at[p].add(when.astype(_i32)),
    )
    if core.trace:
        core = core.replace(trace=record_instr(core.trace, p, OP_INDEX[op], start, end, when, counts))
    return core


def _check_declared(instr: Instr, effect: Effect) -> None:
    """What the semantics did must be what the declaration lists (a trace-time check)."""
    reads = [r[0] if isinstance(r, tuple) else r for r in effect.reads]
    bad = [f"counted {p}" for p, _ in effect.counts if p not in instr.counts]
    bad += [f"read {r.buffer}" for r in reads if r.buffer not in instr.reads]
    bad += [f"wrote {r.buffer}" for r in effect.writes if r.buffer not in instr.writes]
    bad += ["wrote GM" for _ in effect.gm_writes[:1] if "GM" not in instr.writes]
    if bad:
        raise RuntimeError(
            f"{instr.name} on {instr.pipe} {', '.join(bad)}, which its declaration (reads {instr.reads}, "
            f"writes {instr.writes}, counts {instr.counts}) does not list; fix it in core/isa/table.py."
        )

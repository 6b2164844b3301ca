"""Sanitizers that observe the jitted program: racecheck, memcheck, initcheck, synccheck.

Named after the vendor's own sanitizer. Data is computed in program order, so a missing
``WaitFlag`` changes nothing the emulator computes -- it is a silent race on hardware. These checks
look for it (docs/sanitizers.md). They live outside the data path and see the program through two
hooks, this module's:

* :func:`on_issue` -- called by ``instructions.issue`` for every instruction (with checks on): the
  allocation stages it reads and writes, its memcheck conditions, the GM output elements it wrote.
* :func:`on_flag` -- called by ``set_flag``, ``wait_flag`` and ``pipe_barrier`` (``sync.py``) with a
  :class:`FlagOp`, before the op runs; it returns the op to run. Trace-time flag transforms (the
  mutation test's, ``checks/mutation.py``) may rewrite it there; with checks on, it is logged.

Each hook appends one row to an event log in the core's state (site id + the traced stages, event
id, memcheck result, ``when``, where each access starts); the static facts of each site (op, pipe,
source line, allocations, the blocks each access touches)
sit in a :class:`SiteTable` built at trace time. :func:`analyze` -- one kernel-independent
``while_loop`` -- replays the log through the four checkers (``checks/racecheck.py``,
``memcheck.py``, ``initcheck.py``, ``synccheck.py``) and keeps up to ``KEEP`` distinct findings of
each (instruction index, pipe, allocation, stage, tile coordinates, the conflicting access; how many
times), counting the rest. initcheck tracks writes per 32-B block of each stage (``checks/ranges.py``);
racecheck works per stage. It runs as
its own jitted program when the Report is checked (compiled once per process and shape), or inside
the kernel's program with ``Checks(inline=True)``. :func:`~npu_jax.core.run.launch` raises
:class:`~npu_jax.errors.SanitizerError` (or warns) after a concrete run; under ``jax.jit`` call
``report.check()``.

Checks are chosen per launch (``checks=`` on ``conv2d``/``matmul``, stored in the static
:class:`~npu_jax.core.state.Context`); ``None`` means the process default, which is
``NPU_JAX_CHECKS`` (``all``/``none``/comma-separated names; ``none`` if unset) or whatever
:func:`set_default_checks` / :func:`default_checks` set (the test suite turns them all on).

Example:
    >>> import numpy as np, npu_jax
    >>> a = np.ones((32, 32), np.float16)
    >>> c, rep = npu_jax.matmul(a, a, hw=npu_jax.presets.tiny(), checks="all")
    >>> rep.findings()
    []
"""

from __future__ import annotations

import jax.numpy as jnp

from npu_jax.core.checks.columns import CHECK_NAMES, MAX_REFS, N_COORDS, READ, SKIP, WRITE, Code, Kind
from npu_jax.core.checks.config import Checks, default_checks, get_default_checks, set_default_checks
from npu_jax.core.checks.log import append, flush, init_state
from npu_jax.core.checks.memcheck import check_ref_static, extent_oob, gm_oob, window_oob
from npu_jax.core.checks.mutation import MutationResult, mutate, sweep_waits
from npu_jax.core.checks.ranges import describe
from npu_jax.core.checks.replay import analyze, run_analysis
from npu_jax.core.checks.sites import TRACE, FlagOp, SiteTable, alloc_id, current_table, stage_base, tracing
from npu_jax.core.findings import Finding, all_findings, findings_of, raise_or_warn, summary_lines
from npu_jax.core.pipes import PIPE_INDEX, PIPES

# memcheck codes that instructions build conditions with (``(bad, code, alloc, dim, value)``)
BUF_OOB, MISALIGNED = Code.BUF_OOB, Code.MISALIGNED
_i32 = jnp.int32


# ---- the issue hook ------------------------------------------------------------------------------
def on_issue(core, pipe: str, op: str, when, reads=(), writes=(), oob=()):
    """Log one instruction on ``pipe``; returns the core. Called by ``issue`` when checks are on.

    ``reads``/``writes`` are Refs (a read may be ``(ref, cond)``: read only where cond); ``oob``
    the memcheck conditions the instruction computed, ``(bad, code, alloc_key, dim, value)``, the
    first that holds is logged. (GM output writes record their instruction's site themselves, in
    ``isa/data.write_gm``, so that a race between two cores names both instructions.)"""
    ctx = core.ctx
    table = current_table()
    base, _ = stage_base(ctx.allocs)
    refs, vals, los = [], [], []
    track = ctx.checks.init  # the bytes of each access: initcheck's (checks/ranges.py)
    for r in reads:
        ref, cond = r if isinstance(r, tuple) else (r, None)
        lo, rng = describe(ref, write=False, track=track)
        refs.append((alloc_id(ctx, ref.alloc.name), base[ref.alloc.name], ref.alloc.stages, READ) + rng)
        vals.append(ref.stage if cond is None else jnp.where(jnp.asarray(cond, jnp.bool_), ref.stage, SKIP))
        los.append(lo)
    for ref in writes:
        lo, rng = describe(ref, write=True, track=track)
        refs.append((alloc_id(ctx, ref.alloc.name), base[ref.alloc.name], ref.alloc.stages, WRITE) + rng)
        vals.append(ref.stage)
        los.append(lo)
    if len(refs) > MAX_REFS:
        raise ValueError(
            f"sanitize: {op} touches {len(refs)} allocation slots; at most {MAX_REFS} are logged."
        )
    if not (ctx.checks.race or ctx.checks.init or ctx.checks.mem):
        refs, vals, los = [], [], []
    mem = None
    if ctx.checks.mem and oob:
        mc, md, mv = jnp.int32(-1), jnp.int32(0), jnp.int32(0)
        for bad, code, key, dim, val in reversed(oob):  # the first condition that holds wins
            cid = table.add_cand(code, alloc_id(ctx, key) if key is not None else -1)
            bad = jnp.asarray(bad, jnp.bool_)
            mc, md, mv = (
                jnp.where(bad, cid, mc),
                jnp.where(bad, jnp.asarray(dim, _i32), md),
                jnp.where(bad, jnp.asarray(val, _i32), mv),
            )
        mem = (mc, md, mv)
    site = table.add(op, pipe, Kind.INSTR, refs=refs)
    return append(core, site, when, vals, mem=mem, los=los)


# ---- the flag hook -------------------------------------------------------------------------------
def on_flag(core, op: FlagOp):
    """The hook of SetFlag / WaitFlag<S_D>(event_id) and PipeBarrier; returns (core, the op to run).

    The flag transforms in force (``TRACE.flag_transforms``: the mutation test) rewrite the op
    first, innermost last; then, with checks on, it is logged (a raw event id: synccheck checks its
    range). A barrier of ALL joins every pipe's clock (each pipe waits for every earlier
    instruction); a barrier of one pipe changes nothing."""
    for transform in TRACE.flag_transforms:
        op = transform(op)
    if not core.san:
        return core, op
    table = current_table()
    if op.name == "PipeBarrier":
        kind = Kind.BARRIER_ALL if op.pipe == "ALL" else Kind.NOP
        site = table.add(op.name, op.pipe if op.pipe in PIPE_INDEX else "S", kind)
        return append(core, site, op.when), op
    kind = Kind.SET if op.name == "SetFlag" else Kind.WAIT
    site = table.add(op.name, PIPES[op.src if kind == Kind.SET else op.dst], kind, op.src, op.dst)
    return append(core, site, op.when, aux=op.event_id), op


def at_tile(core, coords: dict):
    """Record the kernel's current tile coordinates (up to 4, by name) for findings to report."""
    if len(coords) > N_COORDS:
        raise ValueError(f"at_tile takes at most {N_COORDS} coordinates, got {list(coords)}.")
    if not core.san:
        return core
    site = current_table().add("tile", "S", Kind.TILE, names=tuple(coords))
    return append(core, site, True, list(coords.values()))


__all__ = [
    "BUF_OOB",
    "CHECK_NAMES",
    "MISALIGNED",
    "Checks",
    "Code",
    "Finding",
    "FlagOp",
    "Kind",
    "MutationResult",
    "SiteTable",
    "all_findings",
    "analyze",
    "at_tile",
    "check_ref_static",
    "default_checks",
    "extent_oob",
    "findings_of",
    "flush",
    "get_default_checks",
    "gm_oob",
    "init_state",
    "mutate",
    "on_flag",
    "on_issue",
    "raise_or_warn",
    "run_analysis",
    "set_default_checks",
    "summary_lines",
    "sweep_waits",
    "tracing",
    "window_oob",
]

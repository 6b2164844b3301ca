"""The analysis: one kernel-independent ``while_loop`` that replays the cores' event logs and runs the
enabled checkers' steps on each row (``memcheck``, ``initcheck``, ``racecheck``, ``synccheck``),
keeping up to ``KEEP`` distinct findings of each check (``record.merge``) and counting the rest.

It runs as its own jitted program when the Report is checked (compiled once per process and shape:
the site and cand tables are arguments), or inside the kernel's program with ``Checks(inline=True)``.
"""

from __future__ import annotations

import collections
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from npu_jax.core import programs
from npu_jax.core.checks import initcheck, memcheck, racecheck, synccheck
from npu_jax.core.checks.columns import (
    KEEP,
    LW,
    MAX_REFS,
    N_COORDS,
    NF,
    READ,
    REF_W,
    SKIP,
    SLACK,
    WORDS,
    WRITE,
    F,
    Kind,
    Log,
    Ref,
    Site,
)
from npu_jax.core.checks.record import Step, merge
from npu_jax.core.checks.sites import SiteTable, stage_base
from npu_jax.core.pipes import PIPES

_i32 = jnp.int32
_On = collections.namedtuple("_On", "race mem init sync")


def _decode(row, sites, instr, tile) -> Step:
    """A log row against the site table: its kind (NOP when predicated off) and its slots."""
    site = row[Log.SITE]
    t = sites[site]
    kind = jnp.where(row[Log.WHEN] != 0, t[Site.KIND], Kind.NOP)  # a predicated-off call does nothing
    refs = t[Site.REFS :].reshape(MAX_REFS, REF_W)
    nst, mode = refs[:, Ref.STAGES], refs[:, Ref.MODE]
    st = row[Log.ST : Log.ST + MAX_REFS]
    is_instr = kind == Kind.INSTR
    valid = is_instr & (mode > 0) & (st != SKIP)
    oob = valid & ((st < 0) | (st >= nst))
    acc = valid & ~oob
    idx = refs[:, Ref.BASE] + jnp.clip(st, 0, jnp.maximum(nst - 1, 0))  # flat stage of each slot
    return Step(
        row=row,
        site=site,
        kind=kind,
        q=t[Site.PIPE],
        s=t[Site.SRC],
        d=t[Site.DST],
        is_instr=is_instr,
        aid=refs[:, Ref.ALLOC],
        nst=nst,
        st=st,
        oob=oob,
        idx=idx,
        rd=acc & (mode == READ),
        wr=acc & (mode == WRITE),
        instr=instr,
        tile=tile,
        refs=refs,
        lo=row[Log.LO : Log.LO + MAX_REFS],
    )


def analyze(log, count, flag_set, sites, cands, *, n_stages: int, n_events: int, checks: tuple):
    """Replay one core's log: vector clocks through flags and barriers, per-stage access epochs,
    written granules, flag states. Returns (4, KEEP + 1, NF) int32: per check, up to KEEP distinct
    findings and a record counting the rest (``record.merge``). :func:`replay` of one core.

    Kernel-independent (the site and cand tables are arguments), and vectorised over the (up to 4)
    allocation slots of an instruction. ``checks`` is (race, mem, init, sync) as bools.
    """
    return replay(
        log[None], jnp.asarray(count)[None], flag_set[None], sites, cands,
        n_stages=n_stages, n_events=n_events, checks=checks,
    )[0]  # fmt: skip


def replay(logs, counts, flags, sites, cands, *, n_stages: int, n_events: int, checks: tuple):
    """:func:`analyze` of cores at once (a leading core axis on ``logs``, ``counts``, ``flags``):
    one ``while_loop`` over rows, each row's checker steps mapped over the cores. What is rare is
    decided over all cores, so it is a real branch: initcheck runs on rows that read or write an
    allocation on some core, and the kept findings change only on rows where some core found
    something. A core past its own rows replays them predicated off (no-ops)."""
    checks = _On(*checks)
    C = logs.shape[0]
    P, E, S = len(PIPES), n_events, max(n_stages, 1)
    pipes = jnp.arange(P, dtype=_i32)
    stages = jnp.arange(S, dtype=_i32)
    counts = jnp.minimum(counts, logs.shape[1] - SLACK)
    when = jnp.arange(LW) == Log.WHEN
    add = functools.partial(merge, on=tuple(c for c, on in enumerate(checks) if on))  # by columns.Check

    def core_step(row, instr, vc, fvc, w, r, fset, tile):
        """One core's row, all but initcheck: (its Step, candidates, the new state)."""
        at = _decode(row, sites, instr, tile)
        pend = jnp.zeros((4, NF), _i32)  # each check's candidate finding at this row (record.note)
        if checks.mem:
            pend = memcheck.step(pend, at, cands)
        if checks.race:
            pend, vc, w, r = racecheck.access(pend, vc, w, r, at, pipes, stages)
        e = jnp.clip(at.row[Log.AUX], 0, E - 1)
        if checks.sync:
            pend = synccheck.step(pend, fset, at, e, E)
        is_set, is_wait = at.kind == Kind.SET, at.kind == Kind.WAIT
        hitf = (
            (pipes == at.s)[:, None, None]
            & (pipes == at.d)[None, :, None]
            & (jnp.arange(E) == e)[None, None, :]
        )
        fset = jnp.where(hitf & is_set, True, jnp.where(hitf & is_wait, False, fset))
        if checks.race:
            vc, fvc = racecheck.flags(vc, fvc, at, e, hitf, pipes)
        tile = jnp.where(at.kind == Kind.TILE, jnp.concatenate([at.site[None] + 1, at.st]), tile)
        counted = (at.kind != Kind.TILE) & (at.kind != Kind.NOP)
        return at, pend, (instr + counted.astype(_i32), vc, fvc, w, r, fset, tile)

    def body(carry):
        i, state, init, find = carry
        rows = jnp.where((i >= counts)[:, None] & when[None, :], 0, logs[:, i])  # past a core's rows: off
        at, pend, state = jax.vmap(core_step)(rows, *state)
        if checks.init:
            pend, init = lax.cond(
                jnp.any(at.rd | at.wr), jax.vmap(initcheck.step), lambda p, s, a: (p, s), pend, init, at
            )
        find = lax.cond(jnp.any(pend[..., F.COUNT] > 0), jax.vmap(add), lambda f, p: f, find, pend)
        return i + 1, state, init, find

    state = (
        jnp.zeros((C,), _i32),
        jnp.zeros((C, P, P), _i32),
        jnp.zeros((C, P, P, E, P), _i32),
        jnp.zeros((C, S, 3), _i32),
        jnp.zeros((C, S, P, 2), _i32),
        jnp.zeros((C, P, P, E), jnp.bool_),
        jnp.zeros((C, 1 + N_COORDS), _i32),
    )
    init = jnp.zeros((C, S, WORDS) if checks.init else (C, 1, 1), jnp.uint32)
    carry = (jnp.int32(0), state, init, jnp.zeros((C, 4, KEEP + 1, NF), _i32))
    _, state, _, find = lax.while_loop(lambda c: c[0] < jnp.max(counts), body, carry)
    if checks.sync:
        find = jax.vmap(synccheck.left_set)(find, flags, state[0], state[6])
    return find


def _analyze(logs, counts, flags, sites, cands, *, n_stages: int, n_events: int, checks: tuple):
    """:func:`replay`, compiled once per shape (the tables are arguments)."""
    return replay(logs, counts, flags, sites, cands, n_stages=n_stages, n_events=n_events, checks=checks)


_STATIC = ("n_stages", "n_events", "checks")
analyze_cores = jax.jit(_analyze, static_argnames=_STATIC)  # inside a kernel's program (inline)
# on a run's concrete logs: compiled once a process with LLVM's optimisations off (the replay takes
# milliseconds; its compile, 1.5 s on a 2-core machine, 0.8 s so: every checked kernel's first call)
_analyze_concrete = programs.jit(_analyze, fast_compile=True, static_argnames=_STATIC)


def run_analysis(ctx, logs, counts, flags, table: SiteTable):
    """(n_cores, 4, KEEP + 1, NF) findings from the cores' logs (leading core axis on every argument).

    The cores and stages are padded to powers of two (32 cores, 16 stages at least), as the site
    and cand tables are, so that one compiled analysis serves every kernel of a process that has
    the same checks and log capacity: a core with no rows and a stage no row touches find nothing,
    and the replay itself takes milliseconds."""
    sites, cands = table.arrays()
    _, S = stage_base(ctx.allocs)
    n = logs.shape[0]
    pad = (1 << max(5, (n - 1).bit_length())) - n

    def padded(a):  # in numpy when concrete (no compile), in the kernel's program when inline
        xp = jnp if isinstance(a, jax.core.Tracer) else np
        return xp.pad(xp.asarray(a), ((0, pad),) + ((0, 0),) * (a.ndim - 1))

    ch = ctx.checks
    inline = any(isinstance(a, jax.core.Tracer) for a in (logs, counts, flags))
    out = (analyze_cores if inline else _analyze_concrete)(
        padded(logs),
        padded(counts),
        padded(flags),
        jnp.asarray(sites),
        jnp.asarray(cands),
        n_stages=1 << max(4, (S - 1).bit_length()),
        n_events=ctx.hw.num_event_ids,
        checks=(ch.race, ch.mem, ch.init, ch.sync),
    )
    return out[:n]

"""The analysis: one kernel-independent ``while_loop`` that replays a core's event log and runs the
enabled checkers' steps on each row (``memcheck``, ``initcheck``, ``racecheck``, ``synccheck``),
keeping the first finding of each check.

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

from npu_jax.core.checks import initcheck, memcheck, racecheck, synccheck
from npu_jax.core.checks.columns import (
    MAX_REFS,
    N_COORDS,
    NF,
    READ,
    REF_W,
    SKIP,
    SLACK,
    WRITE,
    Kind,
    Log,
    Ref,
    Site,
)
from npu_jax.core.checks.record import Step
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
    )


def analyze(log, count, flag_set, sites, cands, *, n_stages: int, n_events: int, checks: tuple):
    """Replay one core's log: vector clocks through flags and barriers, per-stage access epochs,
    written flags, flag states. Returns (4, NF) int32: the first finding of each check.

    Kernel-independent (the site and cand tables are arguments), and vectorised over the (up to 4)
    allocation slots of an instruction. ``checks`` is (race, mem, init, sync) as bools.
    """
    checks = _On(*checks)
    P, E, S = len(PIPES), n_events, max(n_stages, 1)
    pipes = jnp.arange(P, dtype=_i32)
    stages = jnp.arange(S, dtype=_i32)
    n = jnp.minimum(count, log.shape[0] - SLACK)

    def body(carry):
        i, instr, vc, fvc, w, r, init, fset, tile, find = carry
        at = _decode(log[i], sites, instr, tile)
        if checks.mem:
            find = memcheck.step(find, at, cands)
        if checks.init:
            find, init = initcheck.step(find, init, at, stages)
        if checks.race:
            find, vc, w, r = racecheck.access(find, vc, w, r, at, pipes, stages)
        e = jnp.clip(at.row[Log.AUX], 0, E - 1)
        if checks.sync:
            find = synccheck.step(find, fset, at, e, E)
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
        return (i + 1, instr + counted.astype(_i32), vc, fvc, w, r, init, fset, tile, find)

    carry = (
        jnp.int32(0),
        jnp.int32(0),
        jnp.zeros((P, P), _i32),
        jnp.zeros((P, P, E, P), _i32),
        jnp.zeros((S, 3), _i32),
        jnp.zeros((S, P, 2), _i32),
        jnp.zeros((S,), jnp.bool_),
        jnp.zeros((P, P, E), jnp.bool_),
        jnp.zeros((1 + N_COORDS,), _i32),
        jnp.zeros((4, NF), _i32),
    )
    out = lax.while_loop(lambda c: c[0] < n, body, carry)
    instr, tile, find = out[1], out[8], out[9]
    if checks.sync:
        find = synccheck.left_set(find, flag_set, instr, tile)
    return find


@functools.partial(jax.jit, static_argnames=("n_stages", "n_events", "checks"))
def analyze_cores(logs, counts, flags, sites, cands, *, n_stages: int, n_events: int, checks: tuple):
    """:func:`analyze` over a leading core axis, compiled once per shape (the tables are arguments)."""
    return jax.vmap(
        lambda lg, n, fs: analyze(
            lg, n, fs, sites, cands, n_stages=n_stages, n_events=n_events, checks=checks
        )
    )(logs, counts, flags)


def run_analysis(ctx, logs, counts, flags, table: SiteTable):
    """(n_cores, 4, NF) findings from the cores' logs (leading core axis on every argument).

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
    out = analyze_cores(
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

"""racecheck: RAW, WAR and WAW on an allocation stage between two pipes that no flag chain orders.

A vector clock per pipe: ``vc[p, q]`` = how many instructions of pipe q are known to have finished
before pipe p's next one. ``SetFlag<S_D>`` snapshots ``vc[S]`` into the flag (``fvc``),
``WaitFlag<S_D>`` joins it into ``vc[D]``, ``PipeBarrier<ALL>`` joins all. An access by pipe q at
epoch ``vc[q, q]`` is ordered after an earlier access by pipe p at epoch e iff ``vc[q, p] >= e``.
Per stage the replay keeps the last write (pipe, epoch, site) and the reads since, per pipe (epoch,
site). (Output elements written by two cores are named by ``run.merge_outputs`` from the sites the
issue hook marks in ``core.san["gm_site"]``.)
"""

from __future__ import annotations

import jax.numpy as jnp

from npu_jax.core.checks.columns import Check, Code, Kind
from npu_jax.core.checks.record import Step, cols, note_at

_i32 = jnp.int32


def access(cand, vc, w, r, at: Step, pipes, stages):
    """Tick the pipe's clock, check the row's accesses, record them; (cand, vc, w, r): ``cand`` the row's candidate findings (``record.note``).

    ``w`` (S, 3): last writer's pipe, epoch, site per stage; ``r`` (S, P, 2): per stage and pipe,
    the epoch and site of its last read since that write."""
    q, rd, wr, idx = at.q, at.rd, at.wr, at.idx
    vc = vc + ((pipes == q)[:, None] & (pipes == q)[None, :] & at.is_instr).astype(_i32)
    ep, mine = vc[q, q], vc[q]
    wrec = w[idx]  # (4, 3): last writer's pipe, epoch, site
    unordered = (wrec[:, 1] > 0) & (wrec[:, 0] != q) & (mine[wrec[:, 0]] < wrec[:, 1])
    rrec = r[idx]  # (4, P, 2): readers since that write
    pend = (rrec[:, :, 0] > mine[None, :]) & (pipes != q)[None, :]
    other = jnp.argmax(pend, axis=1).astype(_i32)
    osite = jnp.take_along_axis(rrec[:, :, 1], other[:, None], axis=1)[:, 0]
    bads = jnp.concatenate([rd & unordered, wr & unordered, wr & jnp.any(pend, axis=1)])
    fields = jnp.concatenate(
        [
            cols(Code.RAW, q, at.aid, at.st, wrec[:, 0], wrec[:, 2], 0, 0),
            cols(Code.WAW, q, at.aid, at.st, wrec[:, 0], wrec[:, 2], 0, 0),
            cols(Code.WAR, q, at.aid, at.st, other, osite, 0, 0),
        ]
    )
    cand = note_at(cand, Check.RACE, bads, fields, at)
    read_hit = jnp.any((stages[:, None] == idx[None, :]) & rd[None, :], axis=1)  # (S,)
    write_hit = jnp.any((stages[:, None] == idx[None, :]) & wr[None, :], axis=1)
    r = jnp.where(
        read_hit[:, None, None] & (pipes == q)[None, :, None], jnp.stack([ep, at.site])[None, None, :], r
    )
    w = jnp.where(write_hit[:, None], jnp.stack([q, ep, at.site])[None, :], w)
    r = jnp.where(write_hit[:, None, None], 0, r)
    return cand, vc, w, r


def flags(vc, fvc, at: Step, e, hitf, pipes):
    """Carry clocks through the row's flag op or barrier; (vc, fvc). ``e`` is the event id
    (clipped), ``hitf`` (P, P, E) selects the row's flag; ``fvc`` (P, P, E, P) is the clock each
    flag carries."""
    s, d, kind = at.s, at.d, at.kind
    fvc = jnp.where((hitf & (kind == Kind.SET))[..., None], vc[s][None, None, None, :], fvc)
    joined = jnp.maximum(vc[d], fvc[s, d, e])
    vc = jnp.where((pipes == d)[:, None] & (kind == Kind.WAIT), joined[None, :], vc)
    vc = jnp.where(kind == Kind.BARRIER_ALL, jnp.max(vc, axis=0)[None, :], vc)
    return vc, fvc

"""What every checker's replay step reads (one decoded log row) and how it records a finding."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from npu_jax.core.checks.columns import KEEP, Code, F

_i32 = jnp.int32


class Step(NamedTuple):
    """One log row of the replay, decoded against the site table (traced values). The per-slot
    fields are (MAX_REFS,) vectors: one entry per allocation slot the instruction touches."""

    row: jax.Array  # (LW,) the raw row
    site: jax.Array  # site id
    kind: jax.Array  # columns.Kind, NOP when predicated off
    q: jax.Array  # the site's pipe
    s: jax.Array  # flag source / destination pipes
    d: jax.Array
    is_instr: jax.Array
    aid: jax.Array  # (MAX_REFS,) allocation ids
    nst: jax.Array  # (MAX_REFS,) stage counts
    st: jax.Array  # (MAX_REFS,) traced stages (or tile coordinates of a tile mark)
    oob: jax.Array  # (MAX_REFS,) a stage outside its allocation
    idx: jax.Array  # (MAX_REFS,) flat stage of each slot (clipped)
    rd: jax.Array  # (MAX_REFS,) a read of an in-range stage
    wr: jax.Array  # (MAX_REFS,) a write of an in-range stage
    instr: jax.Array  # instruction index on the core
    tile: jax.Array  # (1 + N_COORDS,) the current tile mark
    refs: jax.Array  # (MAX_REFS, REF_W) the site's slots (columns.Ref): initcheck's static part
    lo: jax.Array  # (MAX_REFS,) the byte offset in its stage where each slot's access starts


def cols(*columns):
    """(k, 8) int32 candidate fields from columns that are scalars or (k,) vectors: code, pipe,
    alloc, stage, other pipe, other site, x0, x1."""
    k = max(np.shape(c)[0] if np.ndim(c) else 1 for c in columns)
    return jnp.stack([jnp.broadcast_to(jnp.asarray(c, _i32), (k,)) for c in columns], axis=1)


def note(pend, check: int, bads, fields, instr, site, tile):
    """Put the first of ``bads`` (k,) in ``pend[check]``, the row's candidate of that check (its
    COUNT 1 if any of ``bads`` holds, else 0); ``fields`` is (k, 8) from :func:`cols`. ``pend`` is
    (4, NF): one candidate per check, which :func:`merge` then adds to the kept findings."""
    j = jnp.argmax(bads)
    f = fields[j]
    new = jnp.any(bads).astype(_i32)[None]
    row = jnp.concatenate([f[:1], jnp.stack([instr, site]), f[1:6], tile, f[6:8], new])
    return jnp.where((jnp.arange(pend.shape[0]) == check)[:, None], row[None, :], pend)


def note_at(pend, check: int, bads, fields, at: Step):
    """:func:`note` at the row being replayed."""
    return note(pend, check, bads, fields, at.instr, at.site, at.tile)


def merge(find, pend, on=(0, 1, 2, 3)):
    """Add each check's candidate (``pend`` (4, NF), from :func:`note`) to its kept findings.

    ``find`` is (4, KEEP + 1, NF): per check, up to KEEP distinct findings in the order found, then
    a record that counts the rest. A finding whose (code, site) a kept record has (for a flag left
    set: and whose flag) adds to that record's COUNT; a new one takes the next free record, or, once
    KEEP are kept, adds to the last record's COUNT. One row adds at most one finding per check. ``on``:
    the checks to look at (the enabled ones). (One record per check is read and written.)"""
    new = pend[:, F.COUNT] > 0  # (4,)
    kept = find[:, :KEEP]  # (4, KEEP, NF)
    used = kept[..., F.CODE] != 0
    same = used & (kept[..., F.CODE] == pend[:, None, F.CODE]) & (kept[..., F.SITE] == pend[:, None, F.SITE])
    flag = (kept[..., F.X0] == pend[:, None, F.X0]) & (kept[..., F.X1] == pend[:, None, F.X1])
    same = same & ((pend[:, None, F.CODE] != Code.LEFT) | flag)
    hit = jnp.any(same, axis=1)
    n_used = jnp.sum(used.astype(_i32), axis=1)
    slot = jnp.where(hit, jnp.argmax(same, axis=1), jnp.minimum(n_used, KEEP)).astype(_i32)
    put = new & ~hit & (n_used < KEEP)  # a new record; else (if new) one more of the slot's
    count = jnp.arange(find.shape[2]) == F.COUNT
    for c in on:
        old = lax.dynamic_slice(find, (c, slot[c], 0), (1, 1, find.shape[2]))[0, 0]
        row = jnp.where(put[c], jnp.where(count, 1, pend[c]), old + (count & new[c]).astype(_i32))
        find = lax.dynamic_update_slice(find, row[None, None], (jnp.int32(c), slot[c], jnp.int32(0)))
    return find

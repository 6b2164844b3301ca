"""What every checker's replay step reads (one decoded log row) and how it records a finding."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from npu_jax.core.checks.columns import F

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


def cols(*columns):
    """(k, 8) int32 candidate fields from columns that are scalars or (k,) vectors: code, pipe,
    alloc, stage, other pipe, other site, x0, x1."""
    k = max(np.shape(c)[0] if np.ndim(c) else 1 for c in columns)
    return jnp.stack([jnp.broadcast_to(jnp.asarray(c, _i32), (k,)) for c in columns], axis=1)


def first(find, check: int, bads, fields, instr, site, tile):
    """Record the first of ``bads`` (k,) for ``check`` if the check has no finding yet; ``fields``
    is (k, 8) from :func:`cols`. ``find`` is (4, NF): one record per check."""
    j = jnp.argmax(bads)
    f = fields[j]
    row = jnp.concatenate([f[:1], jnp.stack([instr, site]), f[1:6], tile, f[6:8]])
    new = jnp.any(bads) & (find[check, F.CODE] == 0)
    return jnp.where((jnp.arange(4) == check)[:, None] & new, row[None, :], find)


def first_at(find, check: int, bads, fields, at: Step):
    """:func:`first` at the row being replayed."""
    return first(find, check, bads, fields, at.instr, at.site, at.tile)

"""synccheck: a ``WaitFlag`` with no pending ``SetFlag`` (a hang on hardware), a flag set twice,
flags left set at the end of the kernel, event ids outside the chip's range.

The replay keeps the flag states (``fset`` (P, P, E) bool: set, not yet waited), as the hardware's
semaphores; static event ids out of range raise ``ValueError`` at trace time (``sync.py``).
"""

from __future__ import annotations

import jax.numpy as jnp

from npu_jax.core.checks.columns import KEEP, Check, Code, F, Kind, Log
from npu_jax.core.checks.record import Step, cols, note_at

_i32 = jnp.int32
_FLAG = 16  # x1 of a flag finding: src * 16 + dst (pipes < 16)


def step(pend, fset, at: Step, e, n_events: int):
    """Check the row's flag op against the flag states (before the op changes them)."""
    s, d, raw_e = at.s, at.d, at.row[Log.AUX]
    is_set, is_wait = at.kind == Kind.SET, at.kind == Kind.WAIT
    pending = fset[s, d, e]
    bads = jnp.stack(
        [(is_set | is_wait) & ((raw_e < 0) | (raw_e >= n_events)), is_set & pending, is_wait & ~pending]
    )
    fields = cols(
        jnp.asarray([Code.EVENT_ID, Code.TWICE, Code.HANG]),
        jnp.stack([jnp.where(is_set, s, d), s, d]),
        -1,
        0,
        -1,
        -1,
        jnp.stack([raw_e, e, e]),
        s * _FLAG + d,
    )
    return note_at(pend, Check.SYNC, bads, fields, at)


def left_set(find, flag_set, instr, tile):
    """Flags still set at the end (from the core's real final state): each a SetFlag never waited,
    one finding per flag in the free records (the others are counted). ``find`` is one core's."""
    P, _, E = flag_set.shape
    flat = flag_set.reshape(-1)
    total = jnp.sum(flat.astype(_i32))
    rank = jnp.where(flat, jnp.cumsum(flat.astype(_i32)) - 1, -1)  # of each flag set, in order
    recs = find[Check.SYNC]
    n_used = jnp.sum((recs[:KEEP, F.CODE] != 0).astype(_i32))
    j = jnp.arange(KEEP) - n_used  # the flag each free record takes
    k = jnp.argmax(rank[None, :] == j[:, None], axis=1).astype(_i32)
    fs, fd, fe = k // (P * E), (k // E) % P, k % E
    f = cols(Code.LEFT, fs, -1, 0, -1, -1, fe, fs * _FLAG + fd)  # (KEEP, 8)
    at = jnp.broadcast_to(jnp.stack([instr, jnp.int32(-1)]), (KEEP, 2))
    rows = jnp.concatenate(
        [
            f[:, :1],
            at,
            f[:, 1:6],
            jnp.broadcast_to(tile, (KEEP, tile.shape[0])),
            f[:, 6:8],
            jnp.ones((KEEP, 1), _i32),
        ],
        axis=1,
    )
    put = (j >= 0) & (j < total)
    recs = jnp.concatenate([jnp.where(put[:, None], rows, recs[:KEEP]), recs[KEEP:]])
    recs = recs.at[KEEP, F.COUNT].add(jnp.maximum(total - (KEEP - n_used), 0))
    return find.at[Check.SYNC].set(recs)


def flag_name(x1: int, pipes) -> str:
    """'SRC_DST' from a finding's x1 column."""
    s, d = x1 // _FLAG, x1 % _FLAG
    return f"{pipes[s]}_{pipes[d]}" if 0 <= s < len(pipes) and 0 <= d < len(pipes) else "?"

"""synccheck: a ``WaitFlag`` with no pending ``SetFlag`` (a hang on hardware), a flag set twice,
flags left set at the end of the kernel, event ids outside the chip's range.

The replay keeps the flag states (``fset`` (P, P, E) bool: set, not yet waited), as the hardware's
semaphores; static event ids out of range raise ``ValueError`` at trace time (``sync.py``).
"""

from __future__ import annotations

import jax.numpy as jnp

from npu_jax.core.checks.columns import Check, Code, Kind, Log
from npu_jax.core.checks.record import Step, cols, first, first_at

_i32 = jnp.int32
_FLAG = 16  # x1 of a flag finding: src * 16 + dst (pipes < 16)


def step(find, fset, at: Step, e, n_events: int):
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
    return first_at(find, Check.SYNC, bads, fields, at)


def left_set(find, flag_set, instr, tile):
    """Flags still set at the end (from the core's real final state): a SetFlag never waited."""
    P, _, E = flag_set.shape
    flat = flag_set.reshape(-1)
    k = jnp.argmax(flat).astype(_i32)
    fs, fd, fe = k // (P * E), (k // E) % P, k % E
    return first(
        find,
        Check.SYNC,
        jnp.any(flat)[None],
        cols(Code.LEFT, fs, -1, 0, -1, -1, fe, fs * _FLAG + fd),
        instr,
        jnp.int32(-1),
        tile,
    )


def flag_name(x1: int, pipes) -> str:
    """'SRC_DST' from a finding's x1 column."""
    s, d = x1 // _FLAG, x1 % _FLAG
    return f"{pipes[s]}_{pipes[d]}" if 0 <= s < len(pipes) and 0 <= d < len(pipes) else "?"

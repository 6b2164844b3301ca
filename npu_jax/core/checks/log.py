"""The event log: the sanitizers' part of a core's state, one row per instruction call.

The hooks (``sanitize.py``) append rows; :func:`flush` writes them into the log when the core is
flattened; the replay (``replay.py``) reads them back. Layout of a row: ``columns.Log``.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from npu_jax.core.checks.columns import LW, MAX_REFS, SKIP, SLACK

_i32 = jnp.int32


def static_int(v) -> bool:
    """A Python / numpy int (not a bool, not traced): checked at trace time."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def init_state(ctx) -> dict:
    """The sanitizer's part of a fresh core ({} when every check is off: no cost at all).

    log (capacity + SLACK, LW) int32: one row per instruction call (flag ops, barriers and tile
        marks included, predicated-off calls too): (site, four stage values or tile coordinates,
        event id, memcheck cand, dim, value, when, four start offsets in bytes [initcheck])
    n (): rows written
    gm_site {output: padded int32}: site + 1 of the last write per element      [racecheck]
    gm_clash (6,) int32: the first race on a GM output element: (output, flat index, core a, site a,
        core b, site b), -1s while there is none                                  [racecheck]
    gm_site and gm_clash are shared by the cores, as the outputs are (``isa/data.write_gm``)."""
    ch = ctx.checks
    if not ch.any:
        return {}
    st = {"log": jnp.zeros((ch.capacity + SLACK, LW), _i32), "n": jnp.zeros((), _i32)}
    if ch.race:
        st["gm_site"] = {g.name: jnp.zeros(g.padded, _i32) for g in ctx.gm if g.output}
        st["gm_clash"] = jnp.full((6,), -1, _i32)
    return st


def append(core, site: int, when, vals=(), aux=0, mem=None, los=()):
    """Append one row, predicated-off calls included (``when`` is a column); returns the core.

    The row waits in ``core.pending`` until the core is flattened (a loop body returning, a
    vmap or jit boundary), where :func:`flush` writes all pending rows as one block. Every call
    appends, so positions count instruction *calls*: they do not depend on the data, stay the
    same on every core, and under ``vmap`` the write remains an in-place dynamic-update-slice.
    """
    vals = list(vals) + [SKIP] * (MAX_REFS - len(vals))
    los = list(los) + [0] * (MAX_REFS - len(los))
    mc, md, mv = mem if mem is not None else (-1, 0, 0)
    if not isinstance(when, bool):
        when = jnp.asarray(when, jnp.bool_).astype(_i32)
    pieces, run = [], []
    for v in [site, *vals, aux, mc, md, mv, when, *los]:
        if isinstance(v, bool) or static_int(v):
            run.append(int(v))
            continue
        if run:
            pieces.append(np.asarray(run, np.int32))
            run = []
        pieces.append(jnp.reshape(jnp.asarray(v, _i32), (1,)))
    if run:
        pieces.append(np.asarray(run, np.int32))
    row = pieces[0] if len(pieces) == 1 else jnp.concatenate(pieces)
    return core.replace(pending=core.pending + (row,))


def flush(san: dict, pending: tuple) -> dict:
    """Write pending rows at the log's end as one block (blocks of at most ``SLACK`` rows).

    The log has ``SLACK`` rows past its capacity: a block that does not fit lands there (XLA
    clamps the start), so the first ``capacity`` rows stay an exact prefix of the run, and ``n``
    keeps counting so that the overflow is reported."""
    log, n = san["log"], san["n"]
    for i in range(0, len(pending), SLACK):
        block = jnp.stack([jnp.asarray(r, _i32) for r in pending[i : i + SLACK]])
        log = lax.dynamic_update_slice(log, block, (n, jnp.int32(0)), allow_negative_indices=False)
        n = n + block.shape[0]
    return {**san, "log": log, "n": n}

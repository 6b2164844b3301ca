"""The event trace of a core: a fixed-size buffer filled only when tracing is on.

A launch asks for a trace with ``trace_capacity > 0`` (the public calls' ``trace=True`` keeps 4096
events per core). The buffer (``Core.trace``, a dict of arrays; ``{}`` when tracing is off, and then
nothing here runs) keeps, per core:

* one row per instruction, written by :func:`record_instr` from ``isa.execute.charge``: its pipe,
  op, start and end cycles, the bytes it moved and on which path (:data:`~npu_jax.core.pipes.PATHS`),
  and the tile coordinates the kernel last named with ``core.at_tile(...)``;
* one row per flag operation, written by :func:`record_flag` from ``sync.py``: SetFlag or WaitFlag,
  its (src, dst, event id), the cycle at which the flag fired (SetFlag) or released the waiting pipe
  (WaitFlag), and how many instructions were issued before it (its place in program order).

Rows past the capacity are counted (``n``, ``nf``) and dropped; every write is one dynamic-update-slice
of one row, so tracing costs the same whatever the capacity. :mod:`npu_jax.report` turns the rows into
timelines, flow arrows (each SetFlag to the WaitFlag it released) and counter tracks.

Tile coordinates are ints (traced allowed); their names are static strings, interned here once per
distinct tuple of names (:func:`tile_names`) so that the buffer holds only an integer id.
"""

from __future__ import annotations

import jax.numpy as jnp

from npu_jax.core import wide
from npu_jax.core.pipes import PATHS

N_TILE = 4  # coordinates kept per instruction (as many as the sanitizers' findings keep)
SET, WAIT = 0, 1  # flag row kinds
# flag row columns
F_KIND, F_SRC, F_DST, F_ID, F_AT = range(5)
_i32 = jnp.int32
_PATH_INDEX = {p: i for i, p in enumerate(PATHS)}
_TILE_NAMES: dict[tuple[str, ...], int] = {}  # names -> id (append-only, static strings only)


def init_trace(capacity: int) -> dict:
    """An empty trace of ``capacity`` instructions and as many flag operations; ``{}`` for 0."""
    T = capacity
    if not T:
        return {}
    return {
        "pipe": jnp.zeros((T,), _i32),
        "op": jnp.zeros((T,), _i32),
        "start": wide.zeros((T,)),
        "end": wide.zeros((T,)),
        "n": jnp.zeros((), _i32),
        "moved": jnp.full((T, 2), -1, _i32),  # (path index or -1, bytes)
        "tile": jnp.full((T, N_TILE + 1), -1, _i32),  # coordinates, then the names' id (-1: none)
        "tile_now": jnp.full((N_TILE + 1,), -1, _i32),
        "flag": jnp.zeros((T, 5), _i32),  # kind, src, dst, event id, instructions issued before
        "flag_cycle": wide.zeros((T,)),  # SetFlag: when it fired; WaitFlag: when it released dst
        "nf": jnp.zeros((), _i32),
    }


def _put(col, i, keep, row):
    """``col[i] = row`` where ``keep`` (one row, one dynamic-update-slice)."""
    return col.at[i].set(jnp.where(keep, row, col[i]))


def record_instr(t: dict, pipe: int, op: int, start, end, when, counts=()) -> dict:
    """``t`` with one instruction appended (if ``when`` and there is room). ``counts`` are the
    instruction's (counter name, amount) pairs: the first one on a data path gives its bytes."""
    cap = t["pipe"].shape[0]
    i = jnp.minimum(t["n"], cap - 1)
    keep = when & (t["n"] < cap)
    moved = next(((_PATH_INDEX[name], amount) for name, amount in counts if name in _PATH_INDEX), (-1, 0))
    moved_row = jnp.stack([jnp.asarray(moved[0], _i32), jnp.asarray(moved[1], _i32)])
    return {
        **t,
        "pipe": _put(t["pipe"], i, keep, pipe),
        "op": _put(t["op"], i, keep, op),
        "start": _put(t["start"], i, keep, start),
        "end": _put(t["end"], i, keep, end),
        "moved": _put(t["moved"], i, keep, moved_row),
        "tile": _put(t["tile"], i, keep, t["tile_now"]),
        "n": t["n"] + jnp.asarray(when, _i32),
    }


def record_flag(t: dict, kind: int, src: int, dst: int, event_id, cycle, when) -> dict:
    """``t`` with one SetFlag (``kind`` SET, ``cycle`` = when it fired) or WaitFlag (WAIT, ``cycle``
    = when the waiting pipe may go on) appended, if ``when`` and there is room."""
    cap = t["flag"].shape[0]
    i = jnp.minimum(t["nf"], cap - 1)
    keep = jnp.asarray(when, jnp.bool_) & (t["nf"] < cap)
    row = jnp.stack([jnp.asarray(v, _i32) for v in (kind, src, dst, event_id, t["n"])])
    return {
        **t,
        "flag": _put(t["flag"], i, keep, row),
        "flag_cycle": _put(t["flag_cycle"], i, keep, cycle),
        "nf": t["nf"] + jnp.asarray(when, _i32),
    }


def record_tile(t: dict, coords: dict) -> dict:
    """``t`` whose next instructions carry the tile ``coords`` (name -> int, at most N_TILE)."""
    if len(coords) > N_TILE:
        raise ValueError(f"at_tile takes at most {N_TILE} coordinates, got {list(coords)}.")
    names = tuple(coords)
    ident = _TILE_NAMES.setdefault(names, len(_TILE_NAMES))
    values = [jnp.asarray(v, _i32) for v in coords.values()]
    values += [jnp.asarray(-1, _i32)] * (N_TILE - len(values))
    return {**t, "tile_now": jnp.stack([*values, jnp.asarray(ident, _i32)])}


def tile_names(ident: int) -> tuple[str, ...]:
    """The coordinate names interned as ``ident`` by :func:`record_tile` (``()`` for -1)."""
    if ident < 0:
        return ()
    for names, i in _TILE_NAMES.items():
        if i == ident:
            return names
    raise KeyError(f"no tile names with id {ident}; ids come from record_tile in this process.")


__all__ = ["N_TILE", "SET", "WAIT", "init_trace", "record_flag", "record_instr", "record_tile", "tile_names"]

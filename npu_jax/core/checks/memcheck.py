"""memcheck: windows of GM tensors and allocations, stages, Mmad / Fixpipe / vector extents and
fractal alignment out of range.

Static indices raise :class:`~npu_jax.errors.WindowError` at trace time (here, as the instruction
is built). Traced ones become *conditions* ``(bad, code, alloc_key, dim, value)`` that the
instruction hands to ``issue``; the issue hook logs the first that holds (XLA would otherwise
clamp the index silently), and :func:`step` reports it in the replay, along with stages out of
range.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from npu_jax.core.checks.columns import Check, Code, Log
from npu_jax.core.checks.log import static_int
from npu_jax.core.checks.record import Step, cols, note_at
from npu_jax.errors import WindowError

_i32 = jnp.int32


def check_ref_static(ref, op: str) -> None:
    """Static stage / offset of a Ref out of range: raise at trace time (memcheck, static part)."""
    a = ref.alloc
    if static_int(ref.stage) and not 0 <= int(ref.stage) < a.stages:
        raise WindowError(
            f"memcheck: {op} uses stage {int(ref.stage)} of allocation {a.name!r} in {a.buffer}, "
            f"which has {a.stages} stage(s) (0..{a.stages - 1}); index it as "
            f"alloc[i % {a.stages}]."
        )
    if ref.offset is not None:
        for d, (o, s) in enumerate(zip(ref.offset, a.shape)):
            if static_int(o) and not 0 <= int(o) < s:
                raise WindowError(
                    f"memcheck: {op}: offset {tuple(ref.offset)} of {a.name!r} {a.shape} is "
                    f"out of range on dim {d}; offsets must lie inside the allocation."
                )


def gm_oob(core, win):
    """memcheck conditions of a GM window with traced starts: (bad, code, key, dim, start)."""
    spec = core.ctx.gm_spec(win.name)
    traced = [d for d, s in enumerate(win.starts) if not static_int(s)]
    if not traced or not core.san or not core.ctx.checks.mem:
        return ()
    st = jnp.stack([jnp.asarray(win.starts[d], _i32) for d in traced])
    hi = np.asarray([spec.padded[d] - win.sizes[d] for d in traced], np.int32)
    bad = (st < 0) | (st > hi)
    j = jnp.argmax(bad)
    return ((jnp.any(bad), Code.GM_OOB, ("gm", win.name), jnp.asarray(traced, _i32)[j], st[j]),)


def window_oob(core, alloc, starts, sizes, limits, op: str, align=None):
    """memcheck of a window ``starts`` + ``sizes`` inside ``limits`` (per dim) of an allocation.

    Static starts raise :class:`WindowError` now; traced ones become in-program conditions.
    ``align`` optionally gives per dim a multiple the start must be (fractal boundaries)."""
    out = []
    for d, (s, n, lim) in enumerate(zip(starts, sizes, limits)):
        a = None if align is None else align[d]
        if static_int(s):
            if not 0 <= int(s) <= lim - n:
                raise WindowError(
                    f"memcheck: {op} window of {alloc.name!r} {alloc.shape} starts at {int(s)} "
                    f"on dim {d} with size {n}, past the allocation's {lim}; keep "
                    f"start + size <= {lim}."
                )
            if a and int(s) % a:
                raise WindowError(
                    f"memcheck: {op} window of {alloc.name!r} starts at {int(s)} on dim {d}, "
                    f"off the {a}-element fractal boundary; round it to a multiple of {a}."
                )
        elif core.san and core.ctx.checks.mem:
            st = jnp.asarray(s, _i32)
            out.append(((st < 0) | (st > lim - n), Code.BUF_OOB, alloc.name, d, st))
            if a:
                out.append((st % a != 0, Code.MISALIGNED, alloc.name, d, st))
    return tuple(out)


def extent_oob(core, alloc, values: dict, limits: dict, op: str):
    """memcheck of instruction extents (Mmad m/n/k, Fixpipe m/n, ...) against the tile's."""
    out = []
    for d, (name, v) in enumerate(values.items()):
        lim = limits[name]
        if v is None:
            continue
        if static_int(v):
            if not 0 <= int(v) <= lim:
                raise WindowError(
                    f"memcheck: {op} {name}={int(v)} is outside 0..{lim}, the extent of "
                    f"{alloc.name!r} {alloc.shape}; clip it to the tile."
                )
        elif core.san and core.ctx.checks.mem:
            x = jnp.asarray(v, _i32)
            out.append(((x < 0) | (x > lim), Code.EXTENT, alloc.name, d, x))
    return tuple(out)


def step(pend, at: Step, cands):
    """The row's logged condition (its cand id, dim and value) and its stages out of range."""
    row = at.row
    mc = row[Log.MCID]
    cand = cands[jnp.maximum(mc, 0)]
    bads = jnp.concatenate([(at.is_instr & (mc >= 0))[None], at.oob])
    fields = jnp.concatenate(
        [
            cols(cand[0], at.q, cand[1], 0, -1, -1, row[Log.MDIM], row[Log.MVAL]),
            cols(Code.STAGE_OOB, at.q, at.aid, at.st, -1, -1, at.st, at.nst),
        ]
    )
    return note_at(pend, Check.MEM, bads, fields, at)

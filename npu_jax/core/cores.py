"""The cores of one launch around their ``vmap``: the state they share split off and joined back
(``core/shared.py``), each core started as its own, and their GM outputs merged (who wrote what,
races, unwritten elements). ``core/run.py`` launches with these."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from npu_jax.core.buffers import DTYPES
from npu_jax.core.isa.data import CLASH, UNWRITTEN
from npu_jax.core.state import Context, Core, gm_values


def merge_outputs(ctx: Context, cores: Core, with_site: bool = False, initial: dict | None = None):
    """(outputs by name at logical shape, racing-write count, unwritten count) and, with
    ``with_site``, a fourth item: (6,) int32 naming the first race: (output index, flat index, core a,
    site a, core b, site b), -1s when there is none. ``initial`` (name -> padded array): what an
    element no core wrote holds (default 0; an ``asc`` kernel's GM keeps its input).

    The outputs are one array for all cores (``isa/data.write_gm``): each element holds what the
    last core to write it wrote, and its writer record says whether two cores raced on it."""
    outs, overlap, unwritten = {}, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32)
    # timing-only: the outputs are zeros, and with no writers recorded every element is unwritten;
    # computed as such, not from the untouched (constant) state, which XLA would fold for seconds
    marked = ctx.move_data or ctx.mark_writes or with_site
    for spec in (s for s in ctx.gm if s.output):
        sl = tuple(slice(0, s) for s in spec.shape)
        extent = cores.gm_shape[spec.name][0]
        if not marked:
            outs[spec.name] = jnp.zeros(spec.shape, DTYPES[spec.dtype])
            inside = [jnp.minimum(extent[d], spec.shape[d]) for d in range(len(spec.shape))]
            unwritten = unwritten + functools.reduce(jnp.multiply, inside, jnp.int32(1))
            continue
        writer = cores.gm_written[spec.name][sl]
        if ctx.move_data:
            vals = gm_values(cores.gm[spec.name][sl], spec.dtype)
            old = (
                jnp.zeros((), vals.dtype)
                if initial is None
                else gm_values(initial[spec.name][sl], spec.dtype)
            )
            outs[spec.name] = jnp.where(writer != UNWRITTEN, vals, old)
        else:
            outs[spec.name] = jnp.zeros(spec.shape, DTYPES[spec.dtype])
        inside = jnp.ones(spec.shape, jnp.bool_)
        for d in range(len(spec.shape)):
            inside = inside & (jax.lax.broadcasted_iota(jnp.int32, spec.shape, d) < extent[d])
        overlap = overlap + jnp.sum(writer == CLASH).astype(jnp.int32)
        unwritten = unwritten + jnp.sum((writer == UNWRITTEN) & inside).astype(jnp.int32)
    if with_site:
        return outs, overlap, unwritten, cores.san["gm_clash"]
    return outs, overlap, unwritten


def split_shared(core: Core) -> tuple[Core, dict]:
    """(``core`` without the state the cores share, that state): the GM arrays, their writers, the
    L2's record and racecheck's GM sites (``core/shared.py``)."""
    san = {k: v for k, v in core.san.items() if k not in _SHARED_SAN}
    shared = {
        "gm": core.gm,
        "gm_written": core.gm_written,
        "l2": core.l2,
        "san": {k: core.san[k] for k in _SHARED_SAN if k in core.san},
    }
    return core.replace(gm={}, gm_written={}, l2={}, san=san), shared


def join_shared(core: Core, shared: dict) -> Core:
    """The inverse of :func:`split_shared`."""
    san = {**core.san, **shared["san"]} if (core.san or shared["san"]) else {}
    return core.replace(gm=shared["gm"], gm_written=shared["gm_written"], l2=shared["l2"], san=san)


_SHARED_SAN = ("gm_site", "gm_clash")


def per_core(core: Core, b) -> Core:
    """``core`` as core ``b`` starts it under the cores' vmap: its block index ``b``, and every state
    of its own (clocks, buffers, flags, counters) already one per core, each leaf selected by a
    predicate on ``b`` (the same bits). Otherwise each starts as one value for all cores and becomes
    per core inside the kernel's first loop, and vmap's rule for a loop then traces the body twice
    (its fixpoint over which carries are per core): the row softmax at 64 K elements spent 6.2 s in
    that rule under ``cProfile`` on a loaded machine, 3.7 s with this (docs/performance.md)."""
    own, shared = split_shared(core.replace(block=b))
    mine = b >= 0
    own = jax.tree.map(lambda x: jnp.where(mine, x, x) if isinstance(x, jax.Array) else x, own)
    return join_shared(own, shared)


__all__ = ["join_shared", "merge_outputs", "per_core", "split_shared"]

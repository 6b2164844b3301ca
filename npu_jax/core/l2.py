"""The chip's shared L2: which GM reads hit it, decided from what the kernel touches.

All GM traffic goes through the L2. The model (every choice is in docs/fidelity.md's table):

* **What L2 keeps** (:func:`npu_jax.hw.costs.l2_keeps`): a kernel's GM tensors, smallest first,
  while they fit together. A kept tensor stays whole; the others stream (no re-read of theirs hits).
* **Within a kernel**, a read of a kept tensor hits for every element some core read before it and
  misses for the rest (element granularity: line size is not published). "Before" is the order of
  the SPMD program: cores run the same instructions in lock step, so an instruction's reads come
  after every read of earlier instructions, and, within one instruction, core ``b``'s after those of
  cores ``< b`` (:func:`touch` keeps one record for all cores for this: the cores share it).
* **Across kernels**, a tensor an earlier kernel of the same sequence kept (read or written) is
  resident: every read of it hits, if this kernel keeps it too (``launch(..., l2_resident=...)``).
* **Writes** go into L2 (write-allocate) at the L2 write rate. A written tensor the L2 keeps stays
  there, dirty, when the kernel ends: its write-back to HBM is not on this kernel's clock (the vendor's
  note on add_high_performance case 5: with x and y read past L2, "the writes of z land in L2" and the
  kernel moves more than HBM can). A written tensor the L2 does not keep streams out: every written
  byte is charged to HBM once. The chip's HBM bandwidth, shared by every core, bounds the kernel
  (``costs.kernel_cycles``).

The record is a uint8 array per tracked GM input (its padded shape), carried in the core state: 0 for
an element never read, 1 read once, 2 read more than once (saturated). A read raises its window's
elements by one and counts as hits those that reach 2, read from the updated record: deciding from
the record after the write, not before it, is what lets XLA update it in place (a reduction of the
window read before the write makes it copy the whole record on every read of every core).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
from jax import lax
from jax.custom_batching import custom_vmap

from npu_jax.hw import costs
from npu_jax.hw.formats import itemsize

RESIDENT, TRACK, STREAM = "resident", "track", "stream"


def _keeps(hw, gm_specs) -> list[bool]:
    """Whether the L2 keeps each of a launch's GM tensors (``costs.l2_keeps`` over their logical bytes).
    A tensor read past L2 (``l2_bypass``) takes no room in it and is never kept."""
    cached = [s for s in gm_specs if not s.l2_bypass]
    sizes = [math.prod(s.shape) * itemsize(s.dtype) for s in cached]
    keep = dict(zip((s.name for s in cached), costs.l2_keeps(costs.HwNumbers.of(hw), sizes)))
    return [bool(keep.get(s.name, False)) for s in gm_specs]


def modes(hw, gm_specs, resident=()) -> tuple[tuple[str, str], ...]:
    """(name, mode) for every GM input of a launch: ``resident`` (every read hits), ``track`` (re-reads
    hit) or ``stream`` (every read misses); from the tensors' logical bytes and L2's capacity."""
    return tuple(
        (s.name, (RESIDENT if s.name in resident else TRACK) if keep else STREAM)
        for s, keep in zip(gm_specs, _keeps(hw, gm_specs))
        if not s.output
    )


def kept(hw, gm_specs) -> tuple[str, ...]:
    """Names of a launch's GM tensors the L2 keeps once it is done (resident for the next kernel)."""
    return tuple(s.name for s, keep in zip(gm_specs, _keeps(hw, gm_specs)) if keep)


def write_back(hw, gm_specs, name: str) -> bool:
    """Whether writes of GM output ``name`` of a launch of ``gm_specs`` reach HBM within it (charged to
    it): False when the L2 keeps the tensor (its dirty lines stay; see the module's notes)."""
    return name not in kept(hw, gm_specs)


def init_state(ctx) -> dict:
    """The per-tensor records of what the kernel has read (tracked inputs only)."""
    return {
        name: jnp.zeros(ctx.gm_spec(name).padded, jnp.uint8) for name, mode in ctx.l2_modes if mode == TRACK
    }


def mode_of(ctx, name: str) -> str:
    for n, m in ctx.l2_modes:
        if n == name:
            return m
    return STREAM


def read(core, src, valid, when, nbytes):
    """(core, bytes of this read already in L2) for a DataCopy of GM window ``src`` whose valid
    extents are ``valid`` and bytes ``nbytes``."""
    mode = mode_of(core.ctx, src.name)
    if mode == RESIDENT:
        return core, nbytes
    if mode == STREAM:
        return core, 0 * nbytes
    isz = itemsize(core.ctx.gm_spec(src.name).dtype)
    starts = jnp.stack([jnp.asarray(s, jnp.int32) for s in src.starts])
    ext = jnp.stack([jnp.asarray(v, jnp.int32) for v in valid])
    rec, hits = touch(src.sizes)(core.l2[src.name], starts, ext, jnp.asarray(when, jnp.bool_), core.block)
    return core.replace(l2={**core.l2, src.name: rec}), hits * isz


def _window_mask(sizes, ext):
    m = jnp.ones(sizes, jnp.bool_)
    for d in range(len(sizes)):
        m = m & (lax.broadcasted_iota(jnp.int32, sizes, d) < ext[d])
    return m


def _touch_one(sizes):
    def one(rec, starts, ext, when, block):
        del block
        at = tuple(starts)
        m = _window_mask(sizes, ext) & when
        win = lax.dynamic_slice(rec, at, sizes)
        rec = lax.dynamic_update_slice(rec, jnp.minimum(win + m.astype(rec.dtype), 2).astype(rec.dtype), at)
        hits = jnp.sum((lax.dynamic_slice(rec, at, sizes) == 2) & m, dtype=jnp.int32)
        return rec, hits

    return one


def touch(sizes):
    """``f(record, starts, valid extents, when, block) -> (record, elements that hit)`` for a window
    of static ``sizes``. Under ``vmap`` over the cores (``block`` batched) the record stays one for
    all cores, updated core after core in index order; outside it, one core's."""
    one = _touch_one(tuple(sizes))
    f = custom_vmap(one)

    @f.def_vmap
    def _cores(axis_size, in_batched, rec, starts, ext, when, block):
        rec_b, starts_b, ext_b, when_b, _ = in_batched
        if rec_b:
            raise RuntimeError(
                "the L2 record became per-core; it must stay shared (select the data, not the whole core)."
            )
        starts = starts if starts_b else jnp.broadcast_to(starts, (axis_size,) + starts.shape)
        ext = ext if ext_b else jnp.broadcast_to(ext, (axis_size,) + ext.shape)
        when = when if when_b else jnp.broadcast_to(when, (axis_size,))

        def core_b(i, carry):
            rec, hits = carry
            rec, h = one(rec, starts[i], ext[i], when[i], None)
            return rec, hits.at[i].set(h)

        rec, hits = lax.fori_loop(0, axis_size, core_b, (rec, jnp.zeros((axis_size,), jnp.int32)))
        return (rec, hits), (False, True)

    return f

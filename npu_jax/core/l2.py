"""The chip's shared L2: which GM reads hit it, decided from what the kernel touches.

All GM traffic goes through the L2. The model (every choice is in docs/fidelity.md's table):

* **What L2 keeps** (:func:`npu_jax.hw.costs.l2_keeps`): a kernel's GM tensors, smallest first,
  while they fit together. A kept tensor stays whole; the others stream (no re-read of theirs hits).
* **Within a kernel**, a read of a kept tensor hits for every element some core read before it and
  misses for the rest (element granularity: line size is not published). "Before" is the order of
  the SPMD program: cores run the same instructions in lock step, so an instruction's reads come
  after every read of earlier instructions, and, within one instruction, core ``b``'s after those of
  cores ``< b`` (:func:`touch` keeps one record for all cores for this: the cores share it).
* **Recency instead** (``HardwareConfig.l2_policy="recency"``): every cached input is tracked, and a
  read of an element hits if some core read it before and fewer than the L2's capacity in bytes
  entered the L2 since that read (a read's misses and every write enter it: :func:`enter`). What
  was used recently stays, whatever tensor it belongs to: a matmul's B re-read by every row block
  hits while B and the rows in use fit, where the whole-tensor rule keeps A and streams B. Counting
  what entered, not the distinct data touched, is LRU wherever the data re-read in between was
  itself brought in since (cyclic walks: the chip's kernels); it is kinder than LRU where older data
  is hit in between. What a kernel leaves in L2
  and whether its writes reach HBM within it still follow whole tensors (:func:`kept`). The closed
  forms price recency as "every re-read hits" where a bound on the bytes entering between two reads
  of an element stays under the capacity (``cost.many.recency_guard``),
  and refuse it by name elsewhere (the traced cost, the tile search's, checks a looser bound and marks
  a tiling it cannot price ``cost.conv.UNPRICED``).
* **Across kernels**, a tensor an earlier kernel of the same sequence kept (read or written) is
  resident: every read of it hits, if this kernel keeps it too (``launch(..., l2_resident=...)``).
* **Writes** go into L2 (write-allocate) at the L2 write rate. A written tensor the L2 keeps stays
  there, dirty, when the kernel ends: its write-back to HBM is not on this kernel's clock (the vendor's
  note on add_high_performance case 5: with x and y read past L2, "the writes of z land in L2" and the
  kernel moves more than HBM can). A written tensor the L2 does not keep streams out: every written
  byte is charged to HBM once. The chip's HBM bandwidth, shared by every core, bounds the kernel
  (``costs.kernel_cycles``).

Recency's record is an int32 array per tracked input: 0 for never read, else one more than the L2's
clock (:func:`enter`'s count of bytes that entered it, in 32-B units) just after the last read.

The whole-tensor record is a uint8 array per tracked GM input (its padded shape), carried in the
core state: 0 for an element never read, 1 read once, 2 read more than once (saturated). A read
raises its window's elements by one and counts as hits those that reach 2, read from the updated
record: deciding from the record after the write, not before it, is what lets XLA update it in place
(a reduction of the window read before the write makes it copy the whole record on every read of
every core). Recency's decision depends on the stamps before the write, but its new stamps depend on
that decision (through the clock), so XLA orders the read before the write and updates in place too
(the 8192^3 matmul's two 256-MB records: 120-340 s a case, as the whole-tensor rule's).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
from jax import lax
from jax.custom_batching import custom_vmap

from npu_jax.core.shared import over_cores
from npu_jax.hw import costs
from npu_jax.hw.formats import itemsize

RESIDENT, TRACK, STREAM, RECENT = "resident", "track", "stream", "recent"
CLOCK = "@clock"  # the L2's clock in ``core.l2`` (recency): [32-B units entered, bytes over them]
UNIT = 5  # the clock counts 32-B units: exact remainders, 64 GiB of entries before int32 wraps


def _keeps(hw, gm_specs) -> list[bool]:
    """Whether the L2 keeps each of a launch's GM tensors (``costs.l2_keeps`` over their logical bytes).
    A tensor read past L2 (``l2_bypass``) takes no room in it and is never kept."""
    cached = [s for s in gm_specs if not s.l2_bypass]
    sizes = [math.prod(s.shape) * itemsize(s.dtype) for s in cached]
    keep = dict(zip((s.name for s in cached), costs.l2_keeps(costs.HwNumbers.of(hw), sizes)))
    return [bool(keep.get(s.name, False)) for s in gm_specs]


def modes(hw, gm_specs, resident=()) -> tuple[tuple[str, str], ...]:
    """(name, mode) for every GM input of a launch: ``resident`` (every read hits), ``track`` (re-reads
    hit), ``stream`` (every read misses) or, with the recency policy, ``recent`` (re-reads hit while
    recent); from the tensors' logical bytes and L2's capacity."""
    recency = hw.l2_policy == "recency" and hw.l2_bytes > 0

    def mode(s, keep):
        if keep and s.name in resident:
            return RESIDENT
        if recency and not s.l2_bypass:
            return RECENT
        return TRACK if keep else STREAM

    return tuple((s.name, mode(s, keep)) for s, keep in zip(gm_specs, _keeps(hw, gm_specs)) if not s.output)


def kept(hw, gm_specs) -> tuple[str, ...]:
    """Names of a launch's GM tensors the L2 keeps once it is done (resident for the next kernel)."""
    return tuple(s.name for s, keep in zip(gm_specs, _keeps(hw, gm_specs)) if keep)


def write_back(hw, gm_specs, name: str) -> bool:
    """Whether writes of GM output ``name`` of a launch of ``gm_specs`` reach HBM within it (charged to
    it): False when the L2 keeps the tensor (its dirty lines stay; see the module's notes)."""
    return name not in kept(hw, gm_specs)


def init_state(ctx) -> dict:
    """The per-tensor records of what the kernel has read (tracked inputs only), and the L2's clock
    where the recency policy tracks any."""
    dtype = {TRACK: jnp.uint8, RECENT: jnp.int32}
    state = {name: jnp.zeros(ctx.gm_spec(name).padded, dtype[m]) for name, m in ctx.l2_modes if m in dtype}
    if any(m == RECENT for _, m in ctx.l2_modes):
        state[CLOCK] = jnp.zeros((2,), jnp.int32)
    return state


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
    when = jnp.asarray(when, jnp.bool_)
    if mode == RECENT:
        cap = core.hw.l2_bytes >> UNIT
        rec, clock, hits = touch_recent(src.sizes, isz, cap)(
            core.l2[src.name], core.l2[CLOCK], starts, ext, when, core.block
        )
        return core.replace(l2={**core.l2, src.name: rec, CLOCK: clock}), hits * isz
    rec, hits = touch(src.sizes)(core.l2[src.name], starts, ext, when, core.block)
    return core.replace(l2={**core.l2, src.name: rec}), hits * isz


def enter(core, nbytes, when):
    """``core`` with ``nbytes`` (a write into L2) counted on the L2's clock (recency only; a no-op
    otherwise). Under ``vmap`` over the cores the clock stays one: every core's bytes are added."""
    if CLOCK not in core.l2:
        return core
    n = jnp.where(jnp.asarray(when, jnp.bool_), jnp.asarray(nbytes, jnp.int32), 0)
    return core.replace(l2={**core.l2, CLOCK: _enter(core.l2[CLOCK], n)})


def _advance(clock, nbytes):
    total = clock[1] + nbytes
    return jnp.stack([clock[0] + (total >> UNIT), total & ((1 << UNIT) - 1)])


@custom_vmap
def _enter(clock, nbytes):
    return _advance(clock, nbytes)


@_enter.def_vmap
def _enter_cores(axis_size, in_batched, clock, nbytes):
    if in_batched[0]:
        raise RuntimeError("the L2's clock became per-core; it must stay shared.")
    return _advance(clock, jnp.sum(nbytes) if in_batched[1] else nbytes * axis_size), False


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
    of static ``sizes``; the record shared by the cores (:func:`npu_jax.core.shared.over_cores`)."""
    return over_cores(_touch_one(tuple(sizes)), 1)


def _touch_recent_one(sizes, isz, cap):
    def one(rec, clock, starts, ext, when, block):
        del block
        at = tuple(starts)
        m = _window_mask(sizes, ext) & when
        win = lax.dynamic_slice(rec, at, sizes)
        hit = m & (win > 0) & (clock[0] - (win - 1) < cap)
        hits = jnp.sum(hit, dtype=jnp.int32)
        clock = _advance(clock, (jnp.sum(m, dtype=jnp.int32) - hits) * isz)
        rec = lax.dynamic_update_slice(rec, jnp.where(m, clock[0] + 1, win), at)
        return rec, clock, hits

    return one


def touch_recent(sizes, isz: int, cap: int):
    """``f(record, clock, starts, valid extents, when, block) -> (record, clock, elements that hit)``
    for a window of static ``sizes`` under the recency policy (``cap``: the L2 in 32-B units); an
    element hits if read before and fewer than ``cap`` units entered since. The record and the clock
    are shared by the cores (:func:`npu_jax.core.shared.over_cores`)."""
    return over_cores(_touch_recent_one(tuple(sizes), isz, cap), 2)

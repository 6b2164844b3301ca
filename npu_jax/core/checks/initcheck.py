"""initcheck: a read of bytes of an allocation stage that no instruction has written.

State in the replay: ``init`` (S, WORDS) uint32, per stage of the flat stage table a bitmask of its
granules some instruction wrote (a granule is 32 B, coarser in stages over 16 KiB:
``ranges.granule_shift``). Each slot of a row touches the granules of its static mask
(``Ref.MASK``, ``ranges.py``) shifted to the granule of its start (``Log.LO``). A read of a granule
not yet written is a finding that names the first such byte of the read and its element. (The NaN
poison of fresh allocations still shows misuse inside a granule in the values.)
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
from jax import lax

from npu_jax.core.checks.columns import MAX_REFS, WORD_BITS, WORDS, Check, Code, Ref
from npu_jax.core.checks.record import Step, cols, note_at

_i32, _u32 = jnp.int32, jnp.uint32
_W = jnp.arange(WORDS, dtype=_i32)
_ONES = 0xFFFFFFFF


def touched(at: Step):
    """(MAX_REFS, WORDS) uint32: the granules each slot touches, in its stage, and (MAX_REFS,) the
    granule shift of each slot. Bits past the stage's granules are dropped. (Selections are one-hot
    masks rather than gathers: cheaper to compile, and the slots and words are few.)"""
    refs = at.refs
    gsh = refs[:, Ref.GSH]
    rel = lax.bitcast_convert_type(refs[:, Ref.MASK : Ref.MASK + WORDS], _u32)  # (R, W)
    q = jnp.right_shift(at.lo, gsh)  # the granule of the start (floor, negative too)
    qw, b = jnp.right_shift(q, 5), jnp.bitwise_and(q, 31).astype(_u32)
    # word w of the result takes the high bits of rel[w - qw] and the low bits of rel[w - qw - 1]
    src = (_W[None, :, None] - qw[:, None, None]) == _W[None, None, :]  # (R, W, W'): w' = w - qw
    cur = jnp.max(jnp.where(src, rel[:, None, :], _u32(0)), axis=2)
    # rel[w - qw - 1] (0 for word 0: a start before its stage, which memcheck reports, loses those bits)
    prev = jnp.concatenate([jnp.zeros((MAX_REFS, 1), _u32), cur[:, :-1]], axis=1)
    b = b[:, None]
    out = jnp.left_shift(cur, b) | jnp.where(
        b == 0, _u32(0), jnp.right_shift(prev, (WORD_BITS - b) % WORD_BITS)
    )
    n = jnp.clip(refs[:, Ref.NG][:, None] - WORD_BITS * _W[None, :], 0, WORD_BITS).astype(
        _u32
    )  # the stage's, per word
    valid = jnp.where(n >= WORD_BITS, _u32(_ONES), jnp.left_shift(_u32(1), n % WORD_BITS) - 1)
    return out & valid, gsh


def step(pend, init, at: Step):
    """Check the row's reads against the written granules, then mark its writes; (pend, init)."""
    mask, gsh = touched(at)
    on = at.idx[:, None] == jnp.arange(init.shape[0])[None, :]  # (R, S): each slot's stage
    rows = jnp.max(jnp.where(on[:, :, None], init[None], _u32(0)), axis=1)  # (R, W): init[idx]
    holes = jnp.where(at.rd[:, None], mask & ~rows, _u32(0))
    bad = jnp.any(holes != 0, axis=1)
    w = jnp.argmax(holes != 0, axis=1).astype(_i32)
    word = jnp.max(jnp.where(_W[None, :] == w[:, None], holes, _u32(0)), axis=1)
    bit = lax.population_count((word & (~word + 1)) - 1).astype(_i32)  # trailing zeros
    byte = jnp.maximum(jnp.left_shift(WORD_BITS * w + bit, gsh), at.lo)  # the first byte of the read there
    elem = byte // jnp.maximum(at.refs[:, Ref.ESZ], 1)
    pend = note_at(pend, Check.INIT, bad, cols(Code.UNINIT, at.q, at.aid, at.st, -1, -1, byte, elem), at)
    wrote = jnp.where((on & at.wr[:, None])[:, :, None], mask[:, None, :], _u32(0))  # (R, S, W)
    # OR, not max: two writes of one stage both count
    init = functools.reduce(jnp.bitwise_or, [wrote[j] for j in range(MAX_REFS)], init)
    return pend, init

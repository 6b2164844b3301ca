"""initcheck's view of one access: which granules of its allocation stage an instruction reads or writes.

A stage is tracked in granules (``columns.GRANULE`` = 32 B, doubled until a stage has at most
``columns.GRANULES``). The issue hook describes each slot by two things:

* its start, the byte offset in its stage of the access's base element (``lo``: static, or traced as
  the Ref's offset is), logged in the row (``Log.LO``);
* a static bitmask of the granules it touches, relative to the granule that holds ``lo``, in the site
  table (``Ref.MASK``), with the granule (``Ref.GSH``), the stage's granules (``Ref.NG``) and the
  element size (``Ref.ESZ``).

The replay shifts the mask to ``lo >> GSH``. What the Ref says is read or written:

* a plain Ref with no offset: the whole stage; with an offset (no shape: the block's extent is the
  instruction's), a write from the offset to the stage's end and a read of the first element;
* a View (``isa.data.View``): ``shape`` elements from ``offset``, every ``step``-th per dim, over the
  allocation's shape (or, with ``dtype``, a flat byte allocation seen as that type, ``offset`` in its
  elements);
* a lane operand (``isa.lanes.Lanes``): the lanes of its ``pattern`` that run, from element ``start``.

The mask is exact where ``lo`` is static or a multiple of the granule. Where ``lo`` is traced and may
fall anywhere in a granule, a read's mask keeps only the granules it touches wherever ``lo`` falls
(never a granule it may miss: no false finding) and a write's takes every granule it may touch (a read
of a granule partly written counts as initialised: the granule is what is tracked).
"""

from __future__ import annotations

import functools
import math

import jax.numpy as jnp
import numpy as np

from npu_jax.core.checks.columns import GRANULE, GRANULES, WORDS
from npu_jax.core.checks.log import static_int
from npu_jax.hw.formats import itemsize

_i32 = jnp.int32
_NONE = (0,) * (3 + WORDS)  # the static fields when initcheck is off


def granule_shift(alloc) -> int:
    """log2 of ``alloc``'s granule in bytes: 32 B, doubled until one stage has at most GRANULES."""
    g = GRANULE.bit_length() - 1
    while -(-alloc.stage_bytes // (1 << g)) > GRANULES:
        g += 1
    return g


def describe(ref, write: bool, track: bool = True):
    """(lo, static fields) of one slot: ``lo`` the byte offset of the access's base element in its
    stage (an int or traced), the fields (GSH, NG, ESZ, *WORDS mask words) of ``columns.Ref``."""
    if not track:
        return 0, _NONE
    a = ref.alloc
    gsh = granule_shift(a)
    ng = -(-a.stage_bytes // (1 << gsh))
    pattern = getattr(ref, "pattern", None)
    if pattern is not None:  # a lane operand: the pattern's lanes that run, from element `start`
        esz = itemsize(ref.elem)
        off = (ref.offset or (0,))[0]
        lo, key = _scaled(off, esz), ("lanes", pattern)
    elif isinstance(getattr(ref, "shape", None), tuple) and hasattr(ref, "steps"):  # a View
        esz = itemsize(ref.elem)
        raw = ref.elem != a.dtype  # a byte allocation read as ref.elem: flat, the extent's layout
        dims = ref.extent if raw else a.shape
        off = ref.offset or (0,) * len(dims)
        strides = _strides(dims)
        lo = _flat(off[:1] if raw else off, strides[-1:] if raw else strides, esz)
        key = ("view", tuple(ref.shape), tuple(ref.steps), strides)
    else:  # a plain Ref: the whole stage, or from an offset
        esz = itemsize(a.dtype)
        nbytes = math.prod(a.shape) * esz
        if ref.offset is None:
            lo, key = 0, ("span", nbytes)
        else:
            lo = _flat(ref.offset, _strides(a.shape), esz)
            key = ("span", (1 << 30) if write else esz)  # write: to the stage's end; read: one element
    m = (int(lo) & ((1 << gsh) - 1)) if static_int(lo) else None
    return lo, (gsh, ng, esz) + _mask(key, esz, gsh, m, write)


def _strides(shape) -> tuple:
    out, s = [], 1
    for n in reversed(shape):
        out.append(s)
        s *= n
    return tuple(reversed(out))


def _scaled(v, k: int):
    return int(v) * k if static_int(v) else jnp.asarray(v, _i32) * k


def _flat(offset, strides, esz: int):
    """The byte offset of element ``offset`` (per dim, static or traced) of a row-major array."""
    if all(static_int(o) for o in offset):
        return sum(int(o) * s for o, s in zip(offset, strides)) * esz
    return sum(jnp.asarray(o, _i32) * s for o, s in zip(offset, strides)) * esz


@functools.lru_cache(maxsize=1024)
def _runs(key) -> tuple[np.ndarray, np.ndarray]:
    """The maximal runs [s, e) of elements the access touches, relative to its base element."""
    if key[0] == "span":
        return np.zeros(1, np.int64), np.asarray([key[1]], np.int64)  # bytes (esz 1), see _mask
    if key[0] == "lanes":
        p = key[1]
        el = np.unique(p.idx[p.on]) if p.on.any() else np.zeros(0, np.int64)
    else:
        _, shape, steps, strides = key
        el = np.zeros(1, np.int64)
        for n, st, sd in zip(shape, steps, strides[len(strides) - len(shape) :]):
            el = (el[:, None] + np.arange(n, dtype=np.int64)[None, :] * st * sd).reshape(-1)
        el = np.unique(el)
    if not el.size:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    brk = np.nonzero(np.diff(el) != 1)[0]
    starts = np.concatenate([el[:1], el[brk + 1]])
    ends = np.concatenate([el[brk], el[-1:]]) + 1
    return starts, ends


@functools.lru_cache(maxsize=4096)
def _mask(key, esz: int, gsh: int, m, write: bool) -> tuple[int, ...]:
    """WORDS int32 words: the granules the runs touch, relative to the granule of ``lo``, whose offset
    in its granule is ``m`` (None: unknown; then a read keeps the granules touched whatever ``m`` is,
    a write every granule it may touch)."""
    s, e = _runs(key)
    if key[0] != "span":
        s, e = s * esz, e * esz
    g = 1 << gsh
    if m is not None:
        j0, j1 = (m + s) >> gsh, ((m + e - 1) >> gsh) + 1
    elif write:
        j0, j1 = s >> gsh, ((g - 1 + e - 1) >> gsh) + 1
    else:
        j0, j1 = -(-s // g), -(-e // g)
    j0, j1 = np.clip(j0, 0, GRANULES), np.clip(j1, 0, GRANULES)
    d = np.zeros(GRANULES + 1, np.int64)
    np.add.at(d, j0, 1)
    np.add.at(d, j1, -1)
    bits = np.cumsum(d)[:GRANULES] > 0
    words = np.packbits(bits, bitorder="little").view("<u4").view(np.int32)
    return tuple(int(w) for w in words)

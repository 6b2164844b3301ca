"""How the vector unit walks UB: repeats of 256 B, each eight 32-B blocks, a mask of lanes, strides.

One vector instruction runs ``repeat_times`` repeats. A repeat processes up to 256 B of its widest
operand (128 half or 64 float lanes); lane ``l`` of a repeat is element ``l % per_block`` of block
``l // per_block`` (a block is 32 B: 16 half, 8 float). Each operand walks its own blocks: its block
stride is how many 32-B blocks apart consecutive blocks of a repeat lie, its repeat stride how many
32-B blocks apart consecutive repeats start (``UnaryRepeatParams`` / ``BinaryRepeatParams``). The mask
says which lanes of each repeat run (``mask`` as a count or as two 64-bit words; the counter mode of
``SetMaskCount``: the first ``n`` elements over all repeats); a masked-off lane's destination keeps
what it held.

A :class:`Pattern` is that walk, made static: the element offset of every lane of every repeat
relative to the operand's start, and which lanes run. A :class:`Lanes` operand is a pattern at an
offset (traced allowed) in one stage of a flat UB allocation. :func:`read` gathers an operand's lanes
as an (R, L) array; :func:`write` scatters an (R, L) result back, the masked lanes only, a later
repeat winning where two write one element (as the unit runs them in order). A contiguous pattern
with every lane on (the count form) reads and writes one slice: no gather at all.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from npu_jax.core.buffers import DTYPES, Ref
from npu_jax.core.isa.data import bytes_to, to_bytes
from npu_jax.core.state import Core
from npu_jax.hw.formats import itemsize

_i32 = jnp.int32
REPEAT_BYTES = 256  # one repeat of the vector unit: 8 blocks of 32 B
BLOCK_BYTES = 32
BLOCKS = REPEAT_BYTES // BLOCK_BYTES
MAX_REPEATS = 255  # repeatTimes is a uint8


@dataclasses.dataclass(frozen=True, eq=False)
class Pattern:
    """The static walk of one operand: ``idx`` (R, L) element offsets from the operand's start and
    ``on`` (R, L) which lanes run. Equal patterns hash alike (they key compiled programs)."""

    idx: np.ndarray
    on: np.ndarray

    def __post_init__(self):
        if self.idx.shape != self.on.shape or self.idx.ndim != 2:
            raise ValueError(
                f"a pattern is (R, L) offsets and lanes, got {self.idx.shape} and {self.on.shape}."
            )
        if self.on.any() and self.idx[self.on].min() < 0:
            raise ValueError("a pattern's offsets are >= 0 (relative to the operand's start).")

    @functools.cached_property
    def _key(self):
        return (self.idx.shape, self.idx.tobytes(), self.on.tobytes())

    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return isinstance(other, Pattern) and self._key == other._key

    @property
    def shape(self) -> tuple[int, int]:
        return self.idx.shape

    @functools.cached_property
    def extent(self) -> int:
        """Elements from the operand's start to one past the last lane that runs (0: none runs)."""
        return int(self.idx[self.on].max()) + 1 if self.on.any() else 0

    @functools.cached_property
    def contiguous(self) -> bool:
        """Every lane runs and the lanes are the elements 0, 1, 2, ... in order: one slice."""
        return bool(self.on.all()) and np.array_equal(self.idx.reshape(-1), np.arange(self.idx.size))

    @functools.cached_property
    def prefix(self) -> int | None:
        """Where the lanes that run are elements 0..n-1 in order (lanes past them off): n; else None."""
        flat, on = self.idx.reshape(-1), self.on.reshape(-1)
        n = int(on.sum())
        if on[:n].all() and not on[n:].any() and np.array_equal(flat[:n], np.arange(n)):
            return n
        return None

    @functools.cached_property
    def last_writer(self) -> tuple[np.ndarray, np.ndarray]:
        """(element offsets written, the flat lane that writes each last): a later repeat wins."""
        flat, on = self.idx.reshape(-1), self.on.reshape(-1)
        lanes = np.nonzero(on)[0]
        order = lanes[::-1]  # the last lane first: np.unique keeps the first occurrence
        elems, first = np.unique(flat[order], return_index=True)
        return elems.astype(np.int64), order[first].astype(np.int64)

    def elements(self) -> int:
        """How many lanes run."""
        return self._elements

    @functools.cached_property
    def _elements(self) -> int:
        return int(self.on.sum())


def per_block(fmt: str) -> int:
    """Elements of ``fmt`` in one 32-B block (16 half, 8 float)."""
    return BLOCK_BYTES // itemsize(fmt)


def lanes_per_repeat(*fmts: str) -> int:
    """Lanes of one repeat: 256 B of the widest operand (128 for half, 64 for float; a Cast from half
    to float runs 64 lanes, reading 128 B of half)."""
    return REPEAT_BYTES // max(itemsize(f) for f in fmts)


def repeat_pattern(
    fmt: str, lanes: int, repeats: int, blk_stride: int, rep_stride: int, on: np.ndarray
) -> Pattern:
    """The walk of an operand of ``fmt``: ``repeats`` repeats of ``lanes`` lanes, blocks ``blk_stride``
    and repeats ``rep_stride`` 32-B blocks apart; ``on`` (R, L) the lanes that run."""
    per = per_block(fmt)
    lane = np.arange(lanes)
    within = (lane // per) * blk_stride * per + lane % per
    idx = np.arange(repeats)[:, None] * rep_stride * per + within[None, :]
    return Pattern(idx.astype(np.int64), np.broadcast_to(on, idx.shape).copy())


@functools.lru_cache(maxsize=1024)
def count_pattern(n: int, lanes: int) -> Pattern:
    """The count form: the first ``n`` elements, in repeats of ``lanes`` (the last one partial). Kept
    (a loop issues the same count every tile), its arrays read-only."""
    r = max(1, math.ceil(n / lanes))
    idx = np.arange(r * lanes, dtype=np.int64).reshape(r, lanes)
    on = idx < n
    idx.setflags(write=False)
    on.setflags(write=False)
    return Pattern(idx, on)


def mask_lanes(mask, lanes: int, repeats: int, counter: bool = False) -> np.ndarray:
    """(R, L) lanes that run: ``mask`` an int (the first ``mask`` lanes of each repeat; in the counter
    mode, the first ``mask`` elements over all repeats) or two 64-bit words (lane ``l`` runs where bit
    ``l % 64`` of word ``l // 64`` is set: the normal mode's bit mask)."""
    lane = np.arange(lanes)
    if isinstance(mask, (list, tuple)):
        words = [int(w) & ((1 << 64) - 1) for w in mask]
        bits = np.array([(words[i // 64] >> (i % 64)) & 1 if i // 64 < len(words) else 0 for i in lane], bool)
        return np.broadcast_to(bits, (repeats, lanes)).copy()
    if counter:
        flat = np.arange(repeats * lanes) < int(mask)
        return flat.reshape(repeats, lanes)
    return np.broadcast_to(lane < int(mask), (repeats, lanes)).copy()


@dataclasses.dataclass(frozen=True)
class Lanes(Ref):
    """A vector operand: ``pattern`` at element ``offset[0]`` (of ``dtype``) of one stage of a flat
    UB allocation. ``dtype`` None reads the allocation's own type; another type reads a byte
    allocation (one buffer used as several types) as that type."""

    pattern: Pattern | None = None
    dtype: str | None = None

    @property
    def elem(self) -> str:
        return self.dtype or self.alloc.dtype

    @property
    def start(self):
        return (self.offset or (0,))[0]


def _span(core: Core, op: Lanes, n: int) -> jax.Array:
    """``n`` elements of the operand's type from its start (a byte allocation read as that type)."""
    a = op.alloc
    if len(a.shape) != 1:
        raise ValueError(f"a vector operand walks a flat allocation; {a.name!r} is {a.shape}.")
    stage = jnp.asarray(op.stage, _i32)
    if op.elem == a.dtype:
        return lax.dynamic_slice(core.buf[a.name], (stage, jnp.asarray(op.start, _i32)), (1, n))[0]
    isz = itemsize(op.elem)
    raw = lax.dynamic_slice(core.buf[a.name], (stage, jnp.asarray(op.start, _i32) * isz), (1, n * isz))[0]
    return bytes_to(raw, op.elem)


def _put(core: Core, op: Lanes, span, when) -> Core:
    """Write ``span`` (elements of the operand's type) at the operand's start, where ``when``."""
    a = op.alloc
    stage = jnp.asarray(op.stage, _i32)
    if op.elem == a.dtype:
        at, new = jnp.asarray(op.start, _i32), span.astype(a.jdtype)
    else:
        at, new = jnp.asarray(op.start, _i32) * itemsize(op.elem), to_bytes(span)
    full = core.buf[a.name]
    if not isinstance(when, bool) or not when:
        old = lax.dynamic_slice(full, (stage, at), (1, new.shape[0]))[0]
        new = jnp.where(jnp.asarray(when), new, old)
    return core.replace(buf={**core.buf, a.name: lax.dynamic_update_slice(full, new[None], (stage, at))})


def stage_elements(op: Lanes) -> int:
    """Elements of the operand's type one stage of its allocation holds."""
    a = op.alloc
    return a.shape[0] * itemsize(a.dtype) // itemsize(op.elem)


def _at(core: Core, op: Lanes, idx: np.ndarray):
    """(the allocation's array, index arrays) of the elements ``idx`` (static offsets of the
    operand's type from its start) of the operand's stage; for a byte allocation read as another
    type, every byte of each element (a trailing axis of its size)."""
    a = op.alloc
    stage = jnp.asarray(op.stage, _i32)
    at = jnp.asarray(op.start, _i32) + jnp.asarray(idx, _i32)
    isz = itemsize(op.elem)
    if op.elem != a.dtype and isz > 1:
        at = at[..., None] * isz + jnp.arange(isz, dtype=_i32)
    return core.buf[a.name], (stage, at)


def _elements(raw, fmt: str, shape) -> jax.Array:
    """Bytes gathered for ``shape`` elements of ``fmt`` (each element's bytes in a row) as those
    elements (``data.bytes_to``'s reading: little-endian)."""
    isz = itemsize(fmt)
    return lax.bitcast_convert_type(raw.reshape(tuple(shape) + ((isz,) if isz > 1 else ())), DTYPES[fmt])


def _runs(idx: np.ndarray) -> bool:
    """Each row of ``idx`` (R, L) is L consecutive elements and no two rows overlap."""
    if idx.ndim != 2 or idx.shape[1] < 2 or np.any(np.diff(idx, axis=1) != 1):
        return idx.ndim == 2 and idx.shape[1] == 1 and len(np.unique(idx)) == idx.shape[0]
    first = np.sort(idx[:, 0])
    return bool(np.all(np.diff(first) >= idx.shape[1]))


def _windows(core: Core, op: Lanes, idx: np.ndarray):
    """(the allocation's array, the start of each row's window (R, 2), the window's size in the
    array's elements): ``idx`` (R, L) whose rows are runs (``_runs``)."""
    a = op.alloc
    isz = 1 if op.elem == a.dtype else itemsize(op.elem)
    first = (jnp.asarray(op.start, _i32) + jnp.asarray(idx[:, 0], _i32)) * isz
    stage = jnp.broadcast_to(jnp.asarray(op.stage, _i32), first.shape)
    return core.buf[a.name], jnp.stack([stage, first], -1), idx.shape[1] * isz


_DIMS = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0, 1))
_SDIMS = lax.ScatterDimensionNumbers(
    update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0, 1)
)


def _gather(core: Core, op: Lanes, idx: np.ndarray) -> jax.Array:
    """The operand's elements at the static offsets ``idx`` (any shape), in its type: a gather of
    those elements alone, not of the span they lie in (rows that are runs: one window each). Indices
    are clamped into the allocation, as a dynamic slice's start is (a lane that would leave its
    tensor is a memcheck finding and does not run; with the checks off it reads or writes inside)."""
    if _runs(idx):
        buf, starts, w = _windows(core, op, idx)
        got = lax.gather(buf, starts, _DIMS, (1, w), mode=lax.GatherScatterMode.CLIP)
    else:
        buf, at = _at(core, op, idx)
        got = buf.at[at].get(mode="clip")
    return got.reshape(idx.shape) if op.elem == op.alloc.dtype else _elements(got, op.elem, idx.shape)


def read(core: Core, op: Lanes) -> jax.Array:
    """The operand's lanes, (R, L), in its type (a lane that does not run reads some element of the
    stage: its value is never used)."""
    p = op.pattern
    size = stage_elements(op)
    if p.contiguous and p.idx.size <= size:
        return _span(core, op, p.idx.size).reshape(p.shape)
    n = max(min(p.extent, size), 1)  # the lanes that run; one that does not reads any element
    return _gather(core, op, np.minimum(p.idx, n - 1))


def write(core: Core, op: Lanes, vals, when) -> Core:
    """Scatter ``vals`` (R, L) into the operand's lanes that run; the rest keep what they held."""
    if not core.ctx.move_data:
        return core
    p = op.pattern
    vals = jnp.asarray(vals)
    if p.contiguous:
        return _put(core, op, vals.reshape(-1), when)
    if p.prefix is not None:
        return _put(core, op, vals.reshape(-1)[: p.prefix], when) if p.prefix else core
    elems, src = p.last_writer
    if not elems.size:
        return core
    # the written elements alone, scattered in place (a strided walk's span, read and written back
    # whole, cost the row softmax's repeat call most of its time); where every lane runs and each
    # repeat is a run of elements, a window a repeat
    windows = p.on.all() and _runs(p.idx)
    idx, new = (p.idx, vals) if windows else (elems, vals.reshape(-1)[src])
    same = op.elem == op.alloc.dtype
    new = new.astype(op.alloc.jdtype if same else DTYPES[op.elem])
    if not isinstance(when, bool) or not when:
        new = jnp.where(jnp.asarray(when), new, _gather(core, op, idx))
    if not same:
        new = lax.bitcast_convert_type(new, jnp.uint8)
    if windows:
        buf, starts, _ = _windows(core, op, idx)
        out = lax.scatter(
            buf,
            starts,
            new.reshape(idx.shape[0], -1),
            _SDIMS,
            unique_indices=True,
            mode=lax.GatherScatterMode.CLIP,
        )
    else:
        buf, at = _at(core, op, idx)
        out = buf.at[at].set(new, unique_indices=True, mode="clip")
    return core.replace(buf={**core.buf, op.alloc.name: out})

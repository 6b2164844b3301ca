"""The rows of an [m, k] tensor in UB, and the temporaries of a high-level call: what SoftMax, the
norms and the activations (``softmax.py``, ``highlevel.py``) are built of, in asc's basic calls.

A row is the last axis (k elements, k * sizeof(T) a multiple of the 32-B block, as the vendor
requires). ``rows_reduce`` is a row's max or sum (a row longer than a repeat folded into one repeat
with Max / Add first; a sum one WholeReduceSum a row; a max two BlockReduceMax, the vendor's cheaper
path and the one the 310P has), ``rows_spread`` a row's value spread over one block (Brcb: the
vendor's per-row output layout), ``rows_apply`` a row's value applied to every element of the row (a
source block stride of 0). ``Tmp`` hands out 32-B-aligned temporaries from a call's
``shared_tmp_buffer`` or from the framework's buffer (``pipe.framework_buffer``).
"""

from __future__ import annotations

import dataclasses
import math

from npu_jax.asc import reduce, runtime, vec, vshape
from npu_jax.asc.pipe import framework_buffer
from npu_jax.asc.runtime import AscError
from npu_jax.asc.tensors import LocalTensor
from npu_jax.asc.types import (
    BinaryRepeatParams,
    BrcbRepeatParams,
    RoundMode,
    UnaryRepeatParams,
    float32,
    uint8,
)
from npu_jax.core.isa import lanes as L

MAX_REPEATS = 255  # repeatTime is a uint8


# ---- temporaries ----------------------------------------------------------------------------------
def rows_tmp_bytes(m: int, k: int, isz: int) -> int:
    """Float copies of the rows (half data), the per-row work of a reduction across lanes, the per-row
    values and their blocks: the layout ``Tmp`` hands out."""
    lanes = 64
    rows8 = math.ceil(m / 8) * 8
    blk = L.BLOCK_BYTES
    need = rows8 * lanes * 4 + rows8 * 4 + rows8 * blk * 4
    if isz == 2:
        need += m * k * 4 + rows8 * 2 + rows8 * blk
    return need + 1024


class Tmp:
    """A bump allocator over a uint8 temporary: 32-B aligned float (or other) tensors."""

    def __init__(self, buf: LocalTensor | None, nbytes: int, call: str):
        self.buf = framework_buffer(nbytes) if buf is None else buf
        if self.buf.dtype.itemsize != 1 and buf is not None:
            self.buf = self.buf.reinterpret_cast(uint8)
        if self.buf.length < nbytes:
            raise AscError(
                f"asc.{call} at {runtime.where()}: its shared_tmp_buffer holds {self.buf.length} B, it needs {nbytes} B "
                f"(get_{call}_min_tmp_size)."
            )
        self.top = 0
        self._work = None

    def work(self, n: int) -> LocalTensor:
        """One float scratch of ``n`` elements, shared by every row reduction of the call."""
        if self._work is None or self._work.length < n:
            self._work = self.take(n)
        return self._work

    def take(self, n: int, dtype=float32) -> LocalTensor:
        nbytes = -(-n * dtype.itemsize // L.BLOCK_BYTES) * L.BLOCK_BYTES
        t = self.buf[self.top :].reinterpret_cast(dtype)
        self.top += nbytes
        return dataclasses.replace(t, length=n)


# ---- rows: reduce, spread, apply ------------------------------------------------------------------
def row_chunks(m: int):
    for r0 in range(0, m, MAX_REPEATS):
        yield r0, min(MAX_REPEATS, m - r0)


def rows_reduce(kind: str, out: LocalTensor, src: LocalTensor, m: int, k: int, tmp: Tmp) -> None:
    """out[i] = max / sum of row i of the [m, k] float ``src``. A row longer than a repeat (64 floats) is
    first folded into one repeat with Max / Add; then a sum is one WholeReduceSum a row, and a max two
    BlockReduceMax (8 blocks of a row to 8 values, those to one: the vendor's cheaper path, 1 cycle a
    float repeat against WholeReduce's 7, and the one the 310P has: it writes no value-only max)."""
    lanes, per = 64, 8
    if k > lanes:
        work = tmp.work(m * lanes)
        op = vec.max if kind == "max" else vec.add
        for r0, n in row_chunks(m):
            w, s = work[r0 * lanes :], src[r0 * k :]
            vec.adds(w, s, 0.0, lanes, n, UnaryRepeatParams(1, 1, lanes // per, k // per))
            for c in range(1, math.ceil(k / lanes)):
                mask = min(lanes, k - c * lanes)
                op(
                    w,
                    w,
                    s[c * lanes :],
                    mask,
                    n,
                    BinaryRepeatParams(1, 1, 1, lanes // per, lanes // per, k // per),
                )
        src, k = work, lanes
    if kind == "sum":
        for r0, n in row_chunks(m):
            reduce.whole_reduce_sum(out[r0:], src[r0 * k :], k, n, 1, 1, k // per)
        return
    blocks = tmp.take(m * per)  # each row's 8 block maxima: one block a row
    for r0, n in row_chunks(m):
        reduce.block_reduce_max(blocks[r0 * per :], src[r0 * k :], n, k, 1, 1, k // per)
    full, tail = divmod(m, 8)  # 8 rows a repeat; the last repeat's lanes only for the rows there are
    for r0 in range(0, full, MAX_REPEATS):
        n = min(MAX_REPEATS, full - r0)
        reduce.block_reduce_max(out[r0 * 8 :], blocks[r0 * 64 :], n, 64, 1, 1, 8)
    if tail:
        reduce.block_reduce_max(out[full * 8 :], blocks[full * 64 :], 1, tail * per, 1, 1, 8)


def rows_spread(blocks: LocalTensor, vals: LocalTensor, m: int) -> None:
    """blocks[i] = one 32-B block of vals[i] (Brcb: 8 rows a repeat); ceil(m / 8) * 8 blocks written."""
    r = math.ceil(m / 8)
    for r0 in range(0, r, MAX_REPEATS):
        n = min(MAX_REPEATS, r - r0)
        per = L.per_block(vals.dtype.fmt)
        vshape.brcb(blocks[r0 * 8 * per :], vals[r0 * 8 :], n, BrcbRepeatParams(1, 8))


def rows_apply(op, dst: LocalTensor, src: LocalTensor, blocks: LocalTensor, m: int, k: int) -> None:
    """dst[i, :] = src[i, :] op v[i], v spread one block a row (``rows_spread``): the block read again for
    every block of the row (a block stride of 0, a repeat stride of one block)."""
    lanes, per = 64, 8
    for r0, n in row_chunks(m):
        for c in range(math.ceil(k / lanes)):
            mask = min(lanes, k - c * lanes)
            o = r0 * k + c * lanes
            op(
                dst[o:],
                src[o:],
                blocks[r0 * per :],
                mask,
                n,
                BinaryRepeatParams(1, 1, 0, k // per, k // per, 1),
            )


def check_rows(call: str, m: int, k: int, *ts: LocalTensor) -> None:
    if m <= 0 or k <= 0:
        raise AscError(f"asc.{call} at {runtime.where()}: give the rows' shape (m, k > 0), got ({m}, {k}).")
    for t in ts:
        if (k * t.dtype.itemsize) % L.BLOCK_BYTES:
            raise AscError(
                f"asc.{call} at {runtime.where()}: a row of {k} {t.dtype} is {k * t.dtype.itemsize} B; the vendor "
                f"requires rows 32-B aligned (pad k)."
            )
        if t.length < m * k:
            raise AscError(
                f"asc.{call} at {runtime.where()}: a tensor of {t.length} elements holds less than {m} x {k}."
            )


def floats_of(x: LocalTensor, n: int, tmp: Tmp) -> LocalTensor:
    """``x`` as float: itself, or a cast copy (half in)."""
    if x.dtype.fmt == "fp32":
        return x
    f = tmp.take(n)
    vec.cast(f, x, RoundMode.CAST_NONE, n)
    return f


def store_floats(dst: LocalTensor, f: LocalTensor, n: int) -> None:
    if dst.dtype.fmt != "fp32":
        vec.cast(dst, f, RoundMode.CAST_RINT, n)
    elif f is not dst:
        vec.adds(dst, f, 0.0, n)


def blocks_out(dst: LocalTensor, blocks: LocalTensor, vals: LocalTensor, m: int, tmp: Tmp) -> None:
    """A per-row output (SoftMax's sum and max): one 32-B block of the row's value per row, in dst's
    type (float: the blocks; half: the values cast, then spread 16 to a block)."""
    if dst.dtype.fmt == "fp32":
        vec.adds(dst, blocks, 0.0, m * 8)
        return
    rows8 = math.ceil(m / 8) * 8
    per = L.per_block(dst.dtype.fmt)
    hv, hb = tmp.take(rows8, dst.dtype), tmp.take(rows8 * per, dst.dtype)
    vec.cast(hv, vals, RoundMode.CAST_RINT, m)
    rows_spread(hb, hv, m)
    vec.adds(dst, hb, 0.0, m * per)


def shape_of(call, shape_info, tiling, src) -> tuple[int, int]:
    for s in (shape_info, tiling):
        if s is not None and getattr(s, "src_m", 0) and getattr(s, "src_k", 0):
            return int(s.src_m), int(s.src_k)
    info = getattr(src, "shape_info", None)
    if info is not None:
        return int(info[0]), int(info[-1])
    raise AscError(
        f"asc.{call} at {runtime.where()}: give the rows' shape: a SoftMaxShapeInfo(src_m, src_k) (or a tiling with "
        f"src_m, src_k: asc.softmax_tiling_func((m, k), sizeof(T)))."
    )


def split_tmp(args):
    """(shared_tmp_buffer or None, the rest): the vendor's overloads put the buffer before the tiling."""
    if args and isinstance(args[0], LocalTensor):
        return args[0], args[1:]
    return None, args


def blocks_in(t: LocalTensor, m: int, tmp: Tmp) -> LocalTensor:
    """A per-row input of [m, one block] as float blocks of 8."""
    if t.dtype.fmt == "fp32":
        return t
    b = tmp.take(math.ceil(m / 8) * 64)
    per = L.per_block(t.dtype.fmt)
    for r0, n in row_chunks(m):  # 8 lanes a row: the row's first 8 halves into a block of 8 floats
        vec.cast(b[r0 * 8 :], t[r0 * per :], RoundMode.CAST_NONE, 8, n, UnaryRepeatParams(1, 1, 1, 1))
    return b

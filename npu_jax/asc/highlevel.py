"""The vendor's high-level vector calls, written in ``asc``'s basic calls: SoftMax, SimpleSoftMax,
SoftmaxFlashV2, LayerNorm, RmsNorm, Gelu, FasterGelu, Silu, Swish, Sigmoid, Tanh, and the math
library's Exp and Log.

Each is an asc program like a user's: it issues the instructions the vendor's implementation is built
of (row reductions as WholeReduce over the rows, a row's value spread back with Brcb, the element-wise
steps in the count form), so its values follow the instructions' precision and its cost is theirs,
derived, not assumed. Formulas are the vendor's pages' (asc-devkit ``docs/zh/api/SIMD-API/高阶API``; the
activations' from its implementation's comments): ``gelu(x) = x / (1 + e^-y)``, ``y = 1.5957691 (x +
0.044715 x^3)``; ``fast_gelu(x) = x / (1 + e^(-1.702 x))``; ``silu(x) = x / (1 + e^-x)``; LayerNorm
``(x - mean) * exp(-0.5 ln(var + eps)) * gamma + beta`` with the variance as an output; RmsNorm ``x /
sqrt(mean(x^2) + eps) * gamma``. Half data is computed in float (cast in, cast out), as the vendor's
implementations do for accuracy.

A row is the last axis of an [m, k] tensor (``SoftMaxShapeInfo(src_m, src_k)``, or B * S rows of H for
the norms); k * sizeof(T) is a multiple of 32 B, as the vendor requires. A call given no
``shared_tmp_buffer`` takes its temporaries from the framework's buffer (``pipe.framework_buffer``).
"""

from __future__ import annotations

import dataclasses
import math

from npu_jax.asc import runtime, vec, vshape
from npu_jax.asc.pipe import framework_buffer
from npu_jax.asc.runtime import AscError
from npu_jax.asc.tensors import LocalTensor
from npu_jax.asc.types import (
    BinaryRepeatParams,
    BrcbRepeatParams,
    ReduceOrder,
    RoundMode,
    UnaryRepeatParams,
    float32,
)

_MAX_REPEATS = 255


# ---- the structs -----------------------------------------------------------------------------------
@dataclasses.dataclass
class SoftMaxShapeInfo:
    """``SoftMaxShapeInfo{srcM, srcK, oriSrcM, oriSrcK}``: the [m, k] the rows are (k 32-B aligned)."""

    src_m: int = 0
    src_k: int = 0
    ori_src_m: int = 0
    ori_src_k: int = 0


@dataclasses.dataclass
class SoftMaxTiling:
    """``SoftMaxTiling``: the vendor's host tiling of SoftMax (its 16 fields). The emulator's SoftMax
    takes the shape from its ``SoftMaxShapeInfo`` (or src_m / src_k here) and walks the rows itself."""

    src_m: int = 0
    src_k: int = 0
    src_size: int = 0
    out_max_m: int = 0
    out_max_k: int = 0
    out_max_size: int = 0
    split_m: int = 0
    split_k: int = 0
    split_size: int = 0
    reduce_m: int = 0
    reduce_k: int = 0
    reduce_size: int = 0
    range_m: int = 0
    tail_m: int = 0
    tail_split_size: int = 0
    tail_reduce_size: int = 0


def softmax_tiling_func(src_shape, data_type_size: int, local_work_space_size: int = 0) -> SoftMaxTiling:
    """``SoftMaxTilingFunc(srcShape, dataTypeSize, localWorkSpaceSize, tiling)``'s result: the rows and
    columns (the rest of the vendor's fields stay 0: the emulator does not read them)."""
    *lead, k = tuple(src_shape)
    m = math.prod(lead)
    return SoftMaxTiling(src_m=m, src_k=k, src_size=m * k, out_max_m=m, out_max_k=32 // data_type_size)


def get_softmax_min_tmp_size(src_shape, data_type_size: int, is_reuse_source: bool = False) -> int:
    """``GetSoftMaxMinTmpSize``: the bytes of temporaries the emulator's SoftMax takes from a
    ``shared_tmp_buffer`` for ``src_shape`` (``_softmax_tmp``'s layout)."""
    *lead, k = tuple(src_shape)
    return _rows_tmp_bytes(math.prod(lead), k, data_type_size)


get_softmax_max_tmp_size = get_softmax_min_tmp_size


@dataclasses.dataclass
class LayerNormTiling:
    """The [B, S, H] LayerNorm's shape (the vendor's ``LayerNormTiling`` carries it among its fields)."""

    b_length: int = 1
    s_length: int = 1
    h_length: int = 0
    original_h_length: int = 0


@dataclasses.dataclass
class RmsNormTiling:
    """The [B, S, H] RmsNorm's shape (the vendor's ``RmsNormTiling`` carries it among its fields)."""

    b_length: int = 1
    s_length: int = 1
    h_length: int = 0
    original_h_length: int = 0


# ---- temporaries ----------------------------------------------------------------------------------
def _rows_tmp_bytes(m: int, k: int, isz: int) -> int:
    """Float copies of the rows (half data), the per-row work of a reduction across lanes, the per-row
    values and their blocks: the layout ``_Tmp`` hands out."""
    lanes = 64
    rows8 = math.ceil(m / 8) * 8
    need = rows8 * lanes * 4 + rows8 * 4 + rows8 * 32 * 4
    if isz == 2:
        need += m * k * 4 + rows8 * 2 + rows8 * 32
    return need + 1024


class _Tmp:
    """A bump allocator over a uint8 temporary: 32-B aligned float (or other) tensors."""

    def __init__(self, buf: LocalTensor | None, nbytes: int, call: str):
        self.buf = framework_buffer(nbytes) if buf is None else buf
        if self.buf.dtype.itemsize != 1 and buf is not None:
            self.buf = self.buf.reinterpret_cast(_uint8())
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
        nbytes = -(-n * dtype.itemsize // 32) * 32
        t = self.buf[self.top :].reinterpret_cast(dtype)
        self.top += nbytes
        return dataclasses.replace(t, length=n)


def _uint8():
    from npu_jax.asc.types import uint8

    return uint8


# ---- rows: reduce, spread, apply ------------------------------------------------------------------
def _row_chunks(m: int):
    for r0 in range(0, m, _MAX_REPEATS):
        yield r0, min(_MAX_REPEATS, m - r0)


def rows_reduce(kind: str, out: LocalTensor, src: LocalTensor, m: int, k: int, tmp: _Tmp) -> None:
    """out[i] = max / sum of row i of the [m, k] float ``src``. A row longer than a repeat (64 floats) is
    first folded into one repeat with Max / Add; then a sum is one WholeReduceSum a row, and a max two
    BlockReduceMax (8 blocks of a row to 8 values, those to one: the vendor's cheaper path, 1 cycle a
    float repeat against WholeReduce's 7, and the one the 310P has: it writes no value-only max)."""
    lanes, per = 64, 8
    if k > lanes:
        work = tmp.work(m * lanes)
        op = vec.max if kind == "max" else vec.add
        for r0, n in _row_chunks(m):
            w, s = work[r0 * lanes :], src[r0 * k :]
            vec.adds(w, s, 0.0, lanes, n, UnaryRepeatParams(1, 1, lanes // per, k // per))
            for c in range(1, math.ceil(k / lanes)):
                mask = min(lanes, k - c * lanes)
                op(w, w, s[c * lanes :], mask, n, BinaryRepeatParams(1, 1, 1, lanes // per, lanes // per, k // per))
        src, k = work, lanes
    if kind == "sum":
        for r0, n in _row_chunks(m):
            vshape.whole_reduce_sum(out[r0:], src[r0 * k :], k, n, 1, 1, k // per)
        return
    blocks = tmp.take(m * per)  # each row's 8 block maxima: one block a row
    for r0, n in _row_chunks(m):
        vshape.block_reduce_max(blocks[r0 * per :], src[r0 * k :], n, k, 1, 1, k // per)
    full, tail = divmod(m, 8)  # 8 rows a repeat; the last repeat's lanes only for the rows there are
    for r0 in range(0, full, _MAX_REPEATS):
        n = min(_MAX_REPEATS, full - r0)
        vshape.block_reduce_max(out[r0 * 8 :], blocks[r0 * 64 :], n, 64, 1, 1, 8)
    if tail:
        vshape.block_reduce_max(out[full * 8 :], blocks[full * 64 :], 1, tail * per, 1, 1, 8)


def rows_spread(blocks: LocalTensor, vals: LocalTensor, m: int) -> None:
    """blocks[i] = one 32-B block of vals[i] (Brcb: 8 rows a repeat); ceil(m / 8) * 8 blocks written."""
    r = math.ceil(m / 8)
    for r0 in range(0, r, _MAX_REPEATS):
        n = min(_MAX_REPEATS, r - r0)
        per = 32 // vals.dtype.itemsize
        vshape.brcb(blocks[r0 * 8 * per :], vals[r0 * 8 :], n, BrcbRepeatParams(1, 8))


def rows_apply(op, dst: LocalTensor, src: LocalTensor, blocks: LocalTensor, m: int, k: int) -> None:
    """dst[i, :] = src[i, :] op v[i], v spread one block a row (``rows_spread``): the block read again for
    every block of the row (a block stride of 0, a repeat stride of one block)."""
    lanes, per = 64, 8
    for r0, n in _row_chunks(m):
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


def _shape(call: str, m: int, k: int, *ts: LocalTensor) -> None:
    if m <= 0 or k <= 0:
        raise AscError(f"asc.{call} at {runtime.where()}: give the rows' shape (m, k > 0), got ({m}, {k}).")
    for t in ts:
        if (k * t.dtype.itemsize) % 32:
            raise AscError(
                f"asc.{call} at {runtime.where()}: a row of {k} {t.dtype} is {k * t.dtype.itemsize} B; the vendor "
                f"requires rows 32-B aligned (pad k)."
            )
        if t.length < m * k:
            raise AscError(
                f"asc.{call} at {runtime.where()}: a tensor of {t.length} elements holds less than {m} x {k}."
            )


def _floats_of(x: LocalTensor, n: int, tmp: _Tmp) -> LocalTensor:
    """``x`` as float: itself, or a cast copy (half in)."""
    if x.dtype.fmt == "fp32":
        return x
    f = tmp.take(n)
    vec.cast(f, x, RoundMode.CAST_NONE, n)
    return f


def _store(dst: LocalTensor, f: LocalTensor, n: int) -> None:
    if dst.dtype.fmt != "fp32":
        vec.cast(dst, f, RoundMode.CAST_RINT, n)
    elif f is not dst:
        vec.adds(dst, f, 0.0, n)


def _blocks_out(dst: LocalTensor, blocks: LocalTensor, vals: LocalTensor, m: int, tmp: _Tmp) -> None:
    """A per-row output (SoftMax's sum and max): one 32-B block of the row's value per row, in dst's
    type (float: the blocks; half: the values cast, then spread 16 to a block)."""
    if dst.dtype.fmt == "fp32":
        vec.adds(dst, blocks, 0.0, m * 8)
        return
    rows8 = math.ceil(m / 8) * 8
    hv, hb = tmp.take(rows8, dst.dtype), tmp.take(rows8 * 16, dst.dtype)
    vec.cast(hv, vals, RoundMode.CAST_RINT, m)
    rows_spread(hb, hv, m)
    vec.adds(dst, hb, 0.0, m * 16)


def _shape_of(call, shape_info, tiling, src) -> tuple[int, int]:
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


def _split_tmp(args):
    """(shared_tmp_buffer or None, the rest): the vendor's overloads put the buffer before the tiling."""
    if args and isinstance(args[0], LocalTensor):
        return args[0], args[1:]
    return None, args


# ---- SoftMax ---------------------------------------------------------------------------------------
def softmax(
    dst: LocalTensor, sum_tensor: LocalTensor, max_tensor: LocalTensor, src: LocalTensor, *args, **kwargs
) -> None:
    """``SoftMax(dst, sum, max, src[, shared_tmp_buffer], tiling[, shape_info])``: the softmax of every
    row (V): ``max = rowmax(x)``, ``e = exp(x - max)``, ``sum = rowsum(e)``, ``dst = e / sum``. ``sum`` and
    ``max`` take one 32-B block of each row's value per row ([m, 8] float, [m, 16] half), as the vendor's.
    dst may be src."""
    tmp_buf, rest = _split_tmp(args)
    tiling = kwargs.pop("tiling", rest[0] if rest else None)
    shape_info = kwargs.pop(
        "shape_info", kwargs.pop("softmax_shape_info", rest[1] if len(rest) > 1 else None)
    )
    tmp_buf = kwargs.pop("temp_buffer", kwargs.pop("shared_tmp_buffer", tmp_buf))
    kwargs.pop("reuse_source", None), kwargs.pop("basic_block", None), kwargs.pop("data_format_nz", None)
    if kwargs:
        raise TypeError(f"asc.softmax: unexpected {sorted(kwargs)}.")
    m, k = _shape_of("softmax", shape_info, tiling, src)
    _shape("softmax", m, k, src, dst)
    tmp = _Tmp(tmp_buf, _rows_tmp_bytes(m, k, src.dtype.itemsize), "softmax")
    x = _floats_of(src, m * k, tmp)
    rows8 = math.ceil(m / 8) * 8
    vals, blocks = tmp.take(rows8), tmp.take(rows8 * 8)
    y = dst if dst.dtype.fmt == "fp32" else x  # half: in place in the float copy
    rows_reduce("max", vals, x, m, k, tmp)
    rows_spread(blocks, vals, m)
    _blocks_out(max_tensor, blocks, vals, m, tmp)
    rows_apply(vec.sub, y, x, blocks, m, k)
    vec.exp(y, y, m * k)
    rows_reduce("sum", vals, y, m, k, tmp)
    rows_spread(blocks, vals, m)
    _blocks_out(sum_tensor, blocks, vals, m, tmp)
    rows_apply(vec.div, y, y, blocks, m, k)
    if y is not dst:
        _store(dst, y, m * k)


def simple_softmax(
    dst: LocalTensor, in_sum: LocalTensor, in_max: LocalTensor, src: LocalTensor, *args, **kwargs
) -> None:
    """``SimpleSoftMax(dst, in_sum, in_max, src[, shared_tmp_buffer], tiling[, shape_info])``: ``dst =
    exp(x - max) / sum`` with the rows' max and sum given (blocks, as SoftMax writes them)."""
    tmp_buf, rest = _split_tmp(args)
    m, k = _shape_of(
        "simple_softmax",
        kwargs.get("shape_info", rest[1] if len(rest) > 1 else None),
        rest[0] if rest else kwargs.get("tiling"),
        src,
    )
    _shape("simple_softmax", m, k, src, dst)
    tmp = _Tmp(
        tmp_buf, _rows_tmp_bytes(m, k, src.dtype.itemsize) + 2 * math.ceil(m / 8) * 256, "simple_softmax"
    )
    x = _floats_of(src, m * k, tmp)
    y = dst if dst.dtype.fmt == "fp32" else tmp.take(m * k)
    mb, sb = (_blocks_in(t, m, tmp) for t in (in_max, in_sum))
    rows_apply(vec.sub, y, x, mb, m, k)
    vec.exp(y, y, m * k)
    rows_apply(vec.div, y, y, sb, m, k)
    if y is not dst:
        _store(dst, y, m * k)


def _blocks_in(t: LocalTensor, m: int, tmp: _Tmp) -> LocalTensor:
    """A per-row input of [m, one block] as float blocks of 8."""
    if t.dtype.fmt == "fp32":
        return t
    b = tmp.take(math.ceil(m / 8) * 64)
    per = 32 // t.dtype.itemsize
    for r0, n in _row_chunks(m):  # 8 lanes a row: the row's first 8 halves into a block of 8 floats
        vec.cast(b[r0 * 8 :], t[r0 * per :], RoundMode.CAST_NONE, 8, n, UnaryRepeatParams(1, 1, 1, 1))
    return b


def softmax_flash_v2(
    dst: LocalTensor,
    exp_sum: LocalTensor,
    max_tensor: LocalTensor,
    src: LocalTensor,
    exp_max: LocalTensor,
    in_exp_sum: LocalTensor,
    in_max: LocalTensor,
    *args,
    is_update: bool = False,
    **kwargs,
) -> None:
    """``SoftmaxFlashV2<T, isUpdate>(dst, expSum, max, src, expMax, inExpSum, inMax[, tmp], tiling[,
    shape_info])``: FlashAttention-2's online softmax over a new block of columns. Without update:
    ``max = rowmax(x)``, ``dst = exp(x - max)`` (NOT normalised), ``expSum = rowsum(dst)``. With
    ``is_update``: ``max = max(inMax, rowmax(x))``, ``dst = exp(x - max)``, ``expMax = exp(inMax - max)``,
    ``expSum = expMax * inExpSum + rowsum(dst)``. Per-row tensors are one 32-B block a row (float here)."""
    tmp_buf, rest = _split_tmp(args)
    m, k = _shape_of(
        "softmax_flash_v2",
        kwargs.get("shape_info", rest[1] if len(rest) > 1 else None),
        rest[0] if rest else kwargs.get("tiling"),
        src,
    )
    _shape("softmax_flash_v2", m, k, src, dst)
    for t in (exp_sum, max_tensor, exp_max, in_exp_sum, in_max):
        if t.dtype.fmt != "fp32":
            raise AscError(
                f"asc.softmax_flash_v2 at {runtime.where()}: the per-row tensors are float here, got {t.dtype}."
            )
    tmp = _Tmp(tmp_buf, _rows_tmp_bytes(m, k, src.dtype.itemsize), "softmax_flash_v2")
    x = _floats_of(src, m * k, tmp)
    y = dst if dst.dtype.fmt == "fp32" else tmp.take(m * k)
    rows8 = math.ceil(m / 8) * 8
    vals, blocks = tmp.take(rows8), tmp.take(rows8 * 8)
    rows_reduce("max", vals, x, m, k, tmp)
    rows_spread(blocks, vals, m)
    if is_update:
        vec.max(max_tensor, blocks, in_max, m * 8)
        vec.sub(exp_max, in_max, max_tensor, m * 8)
        vec.exp(exp_max, exp_max, m * 8)
    else:
        vec.adds(max_tensor, blocks, 0.0, m * 8)
    rows_apply(vec.sub, y, x, max_tensor, m, k)
    vec.exp(y, y, m * k)
    rows_reduce("sum", vals, y, m, k, tmp)
    rows_spread(blocks, vals, m)
    if is_update:
        vec.mul(exp_sum, exp_max, in_exp_sum, m * 8)
        vec.add(exp_sum, exp_sum, blocks, m * 8)
    else:
        vec.adds(exp_sum, blocks, 0.0, m * 8)
    if y is not dst:
        _store(dst, y, m * k)


# ---- LayerNorm, RmsNorm ---------------------------------------------------------------------------
def _norm_shape(call, tiling) -> tuple[int, int]:
    if tiling is None or not getattr(tiling, "h_length", 0):
        raise AscError(
            f"asc.{call} at {runtime.where()}: give the shape as asc.{type(tiling).__name__ if tiling else 'LayerNormTiling'}(b_length, s_length, h_length)."
        )
    return int(tiling.b_length) * int(tiling.s_length), int(tiling.h_length)


def _gamma_rows(op, dst: LocalTensor, src: LocalTensor, g: LocalTensor, m: int, k: int) -> None:
    """dst[i, :] = src[i, :] op g[:] for every row (g read again each row: a repeat stride of 0)."""
    lanes, per = 64, 8
    for r0, n in _row_chunks(m):
        for c in range(math.ceil(k / lanes)):
            o = r0 * k + c * lanes
            op(
                dst[o:],
                src[o:],
                g[c * lanes :],
                min(lanes, k - c * lanes),
                n,
                BinaryRepeatParams(1, 1, 1, k // per, k // per, 0),
            )


def layer_norm(output, output_mean, output_variance, input_x, gamma, beta, *args, **kwargs) -> None:
    """``LayerNorm(output, outputMean, outputVariance, inputX, gamma, beta[, sharedTmpBuffer], epsilon,
    tiling)``: over H of [B, S, H]: ``mean = sum(x / H)``, ``var = sum((x - mean)^2 / H)``, ``output =
    (x - mean) * exp(-0.5 ln(var + eps)) * gamma + beta`` (the vendor's steps: Muls, ReduceSum, Adds, Ln,
    Muls, Exp); mean and variance [B * S]."""
    tmp_buf, rest = _split_tmp(args)
    eps = kwargs.get("epsilon", rest[0] if rest else None)
    tiling = kwargs.get("tiling", rest[1] if len(rest) > 1 else None)
    m, k = _norm_shape("layer_norm", tiling)
    _shape("layer_norm", m, k, input_x, output)
    tmp = _Tmp(
        tmp_buf, _rows_tmp_bytes(m, k, input_x.dtype.itemsize) + 3 * m * k * 4 + 4 * k * 4, "layer_norm"
    )
    x = _floats_of(input_x, m * k, tmp)
    gf, bf = _floats_of(gamma, k, tmp), _floats_of(beta, k, tmp)
    rows8 = math.ceil(m / 8) * 8
    vals, blocks = tmp.take(rows8), tmp.take(rows8 * 8)
    t = tmp.take(m * k)
    vec.muls(t, x, 1.0 / k, m * k)
    rows_reduce("sum", vals, t, m, k, tmp)
    _store(output_mean, vals, m)
    rows_spread(blocks, vals, m)
    rows_apply(vec.sub, t, x, blocks, m, k)  # x - mean
    d = tmp.take(m * k)
    vec.mul(d, t, t, m * k)
    vec.muls(d, d, 1.0 / k, m * k)
    rows_reduce("sum", vals, d, m, k, tmp)
    _store(output_variance, vals, m)
    vec.adds(vals, vals, float(eps), m)
    vec.ln(vals, vals, m)
    vec.muls(vals, vals, -0.5, m)
    vec.exp(vals, vals, m)
    rows_spread(blocks, vals, m)
    rows_apply(vec.mul, t, t, blocks, m, k)
    _gamma_rows(vec.mul, t, t, gf, m, k)
    _gamma_rows(vec.add, t, t, bf, m, k)
    _store(output, t, m * k)


def rms_norm(dst, src, gamma, *args, **kwargs) -> None:
    """``RmsNorm(dst, src, gamma[, sharedTmpBuffer], epsilon, tiling)``: ``dst = x / sqrt(mean(x^2) +
    eps) * gamma`` over H of [B, S, H] (rstd as the vendor's ``exp(-0.5 ln(.))``)."""
    tmp_buf, rest = _split_tmp(args)
    eps = kwargs.get("epsilon", rest[0] if rest else None)
    tiling = kwargs.get("tiling", rest[1] if len(rest) > 1 else None)
    m, k = _norm_shape("rms_norm", tiling)
    _shape("rms_norm", m, k, src, dst)
    tmp = _Tmp(tmp_buf, _rows_tmp_bytes(m, k, src.dtype.itemsize) + 2 * m * k * 4 + k * 4, "rms_norm")
    x = _floats_of(src, m * k, tmp)
    gf = _floats_of(gamma, k, tmp)
    rows8 = math.ceil(m / 8) * 8
    vals, blocks = tmp.take(rows8), tmp.take(rows8 * 8)
    t = tmp.take(m * k)
    vec.mul(t, x, x, m * k)
    vec.muls(t, t, 1.0 / k, m * k)
    rows_reduce("sum", vals, t, m, k, tmp)
    vec.adds(vals, vals, float(eps), m)
    vec.ln(vals, vals, m)
    vec.muls(vals, vals, -0.5, m)
    vec.exp(vals, vals, m)
    rows_spread(blocks, vals, m)
    rows_apply(vec.mul, t, x, blocks, m, k)
    _gamma_rows(vec.mul, t, t, gf, m, k)
    _store(dst, t, m * k)


# ---- activations and the math library ----------------------------------------------------------------
def _unary_call(call: str, dst: LocalTensor, src: LocalTensor, args, kwargs, steps: int):
    """(tmp, x float, y float, n) of an element-wise high-level call (count last, or data_size=)."""
    tmp_buf, rest = _split_tmp(list(args))
    n = kwargs.get("data_size", kwargs.get("cal_count", kwargs.get("count", rest[0] if rest else dst.length)))
    n = vec._static_int(n, call, "count")
    tmp = _Tmp(tmp_buf, (steps + 2) * (n * 4 + 32), call)
    x = _floats_of(src, n, tmp)
    y = dst if dst.dtype.fmt == "fp32" and dst is not src else tmp.take(n)
    return tmp, x, y, n


def _sigmoid_into(y, x, n, tmp, scale: float = -1.0):
    """y = x / (1 + e^(scale * x)) with scale < 0, i.e. x * sigmoid(-scale * x): Muls, Exp, Adds, Div."""
    t = tmp.take(n)
    vec.muls(t, x, scale, n)
    vec.exp(t, t, n)
    vec.adds(t, t, 1.0, n)
    vec.div(y, x, t, n)


def gelu(dst: LocalTensor, src: LocalTensor, *args, **kwargs) -> None:
    """``Gelu(dst, src[, sharedTmpBuffer], dataSize)``: the tanh form, ``x / (1 + e^-y)``, ``y =
    1.5957691216057308 (x + 0.044715 x^3)`` (the vendor's)."""
    tmp, x, y, n = _unary_call("gelu", dst, src, args, kwargs, 3)
    t = tmp.take(n)
    vec.mul(t, x, x, n)
    vec.muls(t, t, 0.044715, n)
    vec.adds(t, t, 1.0, n)
    vec.mul(t, t, x, n)
    vec.muls(t, t, -1.5957691216057308, n)  # -y
    vec.exp(t, t, n)
    vec.adds(t, t, 1.0, n)
    vec.div(y, x, t, n)
    if y is not dst:
        _store(dst, y, n)


def faster_gelu(dst: LocalTensor, src: LocalTensor, *args, **kwargs) -> None:
    """``FasterGelu(dst, src[, sharedTmpBuffer], dataSize)``: ``x / (1 + e^(-1.702 x))``."""
    tmp, x, y, n = _unary_call("faster_gelu", dst, src, args, kwargs, 2)
    _sigmoid_into(y, x, n, tmp, -1.702)
    if y is not dst:
        _store(dst, y, n)


def silu(dst: LocalTensor, src: LocalTensor, *args, **kwargs) -> None:
    """``Silu(dst, src, dataSize)``: ``x / (1 + e^-x)``."""
    tmp, x, y, n = _unary_call("silu", dst, src, args, kwargs, 2)
    _sigmoid_into(y, x, n, tmp, -1.0)
    if y is not dst:
        _store(dst, y, n)


def swish(dst: LocalTensor, src: LocalTensor, data_size: int, scalar_value) -> None:
    """``Swish(dst, src, dataSize, beta)``: ``x / (1 + e^(-beta x))``."""
    tmp, x, y, n = _unary_call("swish", dst, src, (data_size,), {}, 2)
    _sigmoid_into(y, x, n, tmp, -float(scalar_value))
    if y is not dst:
        _store(dst, y, n)


def sigmoid(dst: LocalTensor, src: LocalTensor, *args, **kwargs) -> None:
    """``Sigmoid(dst, src[, sharedTmpBuffer][, calCount])``: ``1 / (1 + e^-x)``."""
    tmp, x, y, n = _unary_call("sigmoid", dst, src, args, kwargs, 2)
    t = tmp.take(n)
    vec.muls(t, x, -1.0, n)
    vec.exp(t, t, n)
    vec.adds(t, t, 1.0, n)
    vec.reciprocal(y, t, n)
    if y is not dst:
        _store(dst, y, n)


def tanh(dst: LocalTensor, src: LocalTensor, *args, **kwargs) -> None:
    """``Tanh(dst, src[, sharedTmpBuffer][, calCount])``: ``(e^2x - 1) / (e^2x + 1)``, x clipped to
    [-9, 9] first (where tanh is +-1 in float) so that e^2x stays finite."""
    tmp, x, y, n = _unary_call("tanh", dst, src, args, kwargs, 3)
    t, u = tmp.take(n), tmp.take(n)
    vec.mins(t, x, 9.0, n)
    vec.maxs(t, t, -9.0, n)
    vec.muls(t, t, 2.0, n)
    vec.exp(t, t, n)
    vec.adds(u, t, 1.0, n)
    vec.adds(t, t, -1.0, n)
    vec.div(y, t, u, n)
    if y is not dst:
        _store(dst, y, n)


def exp_math(
    dst: LocalTensor, src: LocalTensor, count: int, taylor_expand_level: int = 0, *args, **kwargs
) -> None:
    """The math library's ``Exp<T, taylorExpandLevel>(dst, src[, tmp], calCount)``. With level 0 it is the
    Exp instruction; with a Taylor level the vendor splits x into floor(x) and a fraction summed as a
    series; the emulator issues the instruction for both (the series' own error is not modelled)."""
    vec.exp(dst, src, count)


def log(dst: LocalTensor, src: LocalTensor, *args, **kwargs) -> None:
    """``Log(dst, src[, calCount])``: the natural logarithm (the Ln instruction)."""
    n = args[0] if args else kwargs.get("cal_count", kwargs.get("count", dst.length))
    vec.ln(dst, src, n)

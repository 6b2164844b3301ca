"""The vendor's SoftMax family, written in asc's basic calls: SoftMax, SimpleSoftMax and SoftmaxFlashV2
(FlashAttention-2's online softmax), with their structs and host helpers.

Each issues the instructions the vendor's implementation is built of (``rows.py``: a row's max with
BlockReduceMax, spread back with Brcb, Sub, Exp, the row's sum with WholeReduceSum, Div), so its values
follow those instructions and its cost is theirs. The per-row outputs (``sum``, ``max``) hold one 32-B
block of the row's value per row ([m, 8] float, [m, 16] half), as the vendor's do. Half data is
computed in float (cast in, cast out). Formulas: the vendor's pages (asc-devkit ``SoftMax.md``,
``SoftmaxFlashV2.md``).
"""

from __future__ import annotations

import dataclasses
import math

from npu_jax.asc import runtime, vec
from npu_jax.asc.rows import (
    Tmp,
    blocks_in,
    blocks_out,
    check_rows,
    floats_of,
    rows_apply,
    rows_reduce,
    rows_spread,
    rows_tmp_bytes,
    shape_of,
    split_tmp,
    store_floats,
)
from npu_jax.asc.runtime import AscError
from npu_jax.asc.tensors import LocalTensor
from npu_jax.core.isa import lanes as L


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
    return SoftMaxTiling(
        src_m=m, src_k=k, src_size=m * k, out_max_m=m, out_max_k=L.BLOCK_BYTES // data_type_size
    )


def get_softmax_min_tmp_size(src_shape, data_type_size: int, is_reuse_source: bool = False) -> int:
    """``GetSoftMaxMinTmpSize``: the bytes of temporaries the emulator's SoftMax takes from a
    ``shared_tmp_buffer`` for ``src_shape`` (``_softmax_tmp``'s layout)."""
    *lead, k = tuple(src_shape)
    return rows_tmp_bytes(math.prod(lead), k, data_type_size)


get_softmax_max_tmp_size = get_softmax_min_tmp_size


# ---- SoftMax ---------------------------------------------------------------------------------------
def softmax(
    dst: LocalTensor, sum_tensor: LocalTensor, max_tensor: LocalTensor, src: LocalTensor, *args, **kwargs
) -> None:
    """``SoftMax(dst, sum, max, src[, shared_tmp_buffer], tiling[, shape_info])``: the softmax of every
    row (V): ``max = rowmax(x)``, ``e = exp(x - max)``, ``sum = rowsum(e)``, ``dst = e / sum``. ``sum`` and
    ``max`` take one 32-B block of each row's value per row ([m, 8] float, [m, 16] half), as the vendor's.
    dst may be src."""
    tmp_buf, rest = split_tmp(args)
    tiling = kwargs.pop("tiling", rest[0] if rest else None)
    shape_info = kwargs.pop(
        "shape_info", kwargs.pop("softmax_shape_info", rest[1] if len(rest) > 1 else None)
    )
    tmp_buf = kwargs.pop("temp_buffer", kwargs.pop("shared_tmp_buffer", tmp_buf))
    kwargs.pop("reuse_source", None), kwargs.pop("basic_block", None), kwargs.pop("data_format_nz", None)
    if kwargs:
        raise TypeError(f"asc.softmax: unexpected {sorted(kwargs)}.")
    m, k = shape_of("softmax", shape_info, tiling, src)
    check_rows("softmax", m, k, src, dst)
    tmp = Tmp(tmp_buf, rows_tmp_bytes(m, k, src.dtype.itemsize), "softmax")
    x = floats_of(src, m * k, tmp)
    rows8 = math.ceil(m / 8) * 8
    vals, blocks = tmp.take(rows8), tmp.take(rows8 * 8)
    y = dst if dst.dtype.fmt == "fp32" else x  # half: in place in the float copy
    rows_reduce("max", vals, x, m, k, tmp)
    rows_spread(blocks, vals, m)
    blocks_out(max_tensor, blocks, vals, m, tmp)
    rows_apply(vec.sub, y, x, blocks, m, k)
    vec.exp(y, y, m * k)
    rows_reduce("sum", vals, y, m, k, tmp)
    rows_spread(blocks, vals, m)
    blocks_out(sum_tensor, blocks, vals, m, tmp)
    rows_apply(vec.div, y, y, blocks, m, k)
    if y is not dst:
        store_floats(dst, y, m * k)


def simple_softmax(
    dst: LocalTensor, in_sum: LocalTensor, in_max: LocalTensor, src: LocalTensor, *args, **kwargs
) -> None:
    """``SimpleSoftMax(dst, in_sum, in_max, src[, shared_tmp_buffer], tiling[, shape_info])``: ``dst =
    exp(x - max) / sum`` with the rows' max and sum given (blocks, as SoftMax writes them)."""
    tmp_buf, rest = split_tmp(args)
    m, k = shape_of(
        "simple_softmax",
        kwargs.get("shape_info", rest[1] if len(rest) > 1 else None),
        rest[0] if rest else kwargs.get("tiling"),
        src,
    )
    check_rows("simple_softmax", m, k, src, dst)
    tmp = Tmp(
        tmp_buf, rows_tmp_bytes(m, k, src.dtype.itemsize) + 2 * math.ceil(m / 8) * 256, "simple_softmax"
    )
    x = floats_of(src, m * k, tmp)
    y = dst if dst.dtype.fmt == "fp32" else tmp.take(m * k)
    mb, sb = (blocks_in(t, m, tmp) for t in (in_max, in_sum))
    rows_apply(vec.sub, y, x, mb, m, k)
    vec.exp(y, y, m * k)
    rows_apply(vec.div, y, y, sb, m, k)
    if y is not dst:
        store_floats(dst, y, m * k)


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
    tmp_buf, rest = split_tmp(args)
    m, k = shape_of(
        "softmax_flash_v2",
        kwargs.get("shape_info", rest[1] if len(rest) > 1 else None),
        rest[0] if rest else kwargs.get("tiling"),
        src,
    )
    check_rows("softmax_flash_v2", m, k, src, dst)
    for t in (exp_sum, max_tensor, exp_max, in_exp_sum, in_max):
        if t.dtype.fmt != "fp32":
            raise AscError(
                f"asc.softmax_flash_v2 at {runtime.where()}: the per-row tensors are float here, got {t.dtype}."
            )
    tmp = Tmp(tmp_buf, rows_tmp_bytes(m, k, src.dtype.itemsize), "softmax_flash_v2")
    x = floats_of(src, m * k, tmp)
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
        store_floats(dst, y, m * k)

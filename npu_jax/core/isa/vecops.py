"""The arithmetic of the vector unit's ops, one table: what each computes, from how many sources, and
its rate.

Each op here is a pure function of its sources' lanes (arrays in the operands' own types) that
returns the destination's lanes; the instruction (``vector.lanes_vector``) reads the operands
through their walk (``lanes.py``), calls it, rounds the result to the destination's type
(:func:`npu_jax.core.isa.vector.store`) and writes it back. Float ops compute in fp32 and round once
(exact for one half op: fp32 carries p >= 2 x 11 + 2 bits; for the transcendental ops the model's
result is the correctly rounded one, the chip's is not published); integer ops compute in int32
and wrap to the destination's width (two's complement), as a C++ integer operation does.

An op's cost is its rate: cycles a 256-B repeat takes (:func:`cycles_per_repeat`), from the vendor's
published elements per cycle of each instruction on the 910B family (asc-devkit
``docs/zh/api/附录/Vector指令理论性能汇总.md``, "硬件并行度 (element/cycle)", Atlas A2 / A3): a repeat
is 128 lanes of a 16-bit type or 64 of a 32-bit one, so 128 (64) elements a cycle is one cycle a
repeat, and Exp's 32 elements a cycle are 4 cycles a half repeat and 2 a float one. The table does
not cover the 910 and the 310P; the model takes the 910B's rates there (docs/fidelity.md, Assumed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax.numpy as jnp
from jax import lax

from npu_jax.core.buffers import DTYPES
from npu_jax.core.isa.mac import split_fp32
from npu_jax.core.rounding import round_to
from npu_jax.hw.formats import itemsize

FLOATS = ("fp16", "bf16", "fp32")
INTS = ("int8", "int16", "int32", "uint8", "uint16", "uint32")


@dataclasses.dataclass(frozen=True)
class VecOp:
    """One op of the vector unit.

    Attributes:
        name: the trace's op name (``VAdd``).
        n_src: tensor sources (the destination counts too where ``reads_dst``).
        fn: ``fn(xs, **static) -> lanes``: xs in fp32 for float ops, int32 for integer ones.
        reads_dst: the destination is also a source (Axpy, MulAddDst, FusedMulAdd): read first.
        scalar: the op takes a scalar (Adds, Muls...).
        types: the element types it takes (the destination's).
    """

    name: str
    n_src: int
    fn: Callable
    reads_dst: bool = False
    scalar: bool = False
    types: tuple = FLOATS


def _relu(x):
    return jnp.maximum(x, jnp.zeros((), x.dtype))


def _mul(a, b):
    """The product of a fused op (Axpy, MulAddDst, FusedMulAdd), formed so that the bits are the same on
    every host: XLA's CPU code contracts ``a * b + c`` into one FMA where the host has one, so a plain
    product would round once here and twice there. Float operands are split into 12-bit halves whose
    four partial products are exact (``mac.split_fp32``, the Cube's), summed ``(hh + hl) + (lh + ll)``:
    exact for half and bf16 data, within 1.5 units in the last place for float. Whether the chip
    rounds a fused op once is not published."""
    if not jnp.issubdtype(jnp.result_type(a), jnp.floating):
        return a * b
    a, b = jnp.broadcast_arrays(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32))
    ah, al = split_fp32(a)
    bh, bl = split_fp32(b)
    exact = (ah * bh + ah * bl) + (al * bh + al * bl)
    return jnp.where(jnp.isfinite(a) & jnp.isfinite(b), exact, a * b)


def _shift(x, s, left):
    s = jnp.asarray(s, jnp.int32)
    return jnp.left_shift(x, s) if left else jnp.right_shift(x, s)


_F = FLOATS
_FI = FLOATS + ("int16", "int32")
_BITS = ("int16", "uint16")

OPS: dict[str, VecOp] = {
    o.name: o
    for o in (
        # binary
        VecOp("VAdd", 2, lambda x: x[0] + x[1], types=_FI),
        VecOp("VSub", 2, lambda x: x[0] - x[1], types=_FI),
        VecOp("VMul", 2, lambda x: x[0] * x[1], types=_FI),
        VecOp("VDiv", 2, lambda x: x[0] / x[1]),
        VecOp("VMax", 2, lambda x: jnp.maximum(x[0], x[1]), types=_FI),
        VecOp("VMin", 2, lambda x: jnp.minimum(x[0], x[1]), types=_FI),
        VecOp("VAddRelu", 2, lambda x: _relu(x[0] + x[1]), types=FLOATS + ("int16",)),
        VecOp("VSubRelu", 2, lambda x: _relu(x[0] - x[1]), types=FLOATS + ("int16",)),
        VecOp("VAnd", 2, lambda x: x[0] & x[1], types=_BITS),
        VecOp("VOr", 2, lambda x: x[0] | x[1], types=_BITS),
        # ternary: the destination is the third operand
        VecOp("VMulAddDst", 2, lambda x: _mul(x[0], x[1]) + x[2], reads_dst=True),
        VecOp("VFusedMulAdd", 2, lambda x: _mul(x[0], x[2]) + x[1], reads_dst=True),
        VecOp("VFusedMulAddRelu", 2, lambda x: _relu(_mul(x[0], x[2]) + x[1]), reads_dst=True),
        # with a scalar
        VecOp("VAdds", 1, lambda x, s: x[0] + s, scalar=True, types=_FI),
        VecOp("VMuls", 1, lambda x, s: x[0] * s, scalar=True, types=_FI),
        VecOp("VMaxs", 1, lambda x, s: jnp.maximum(x[0], s), scalar=True, types=_FI),
        VecOp("VMins", 1, lambda x, s: jnp.minimum(x[0], s), scalar=True, types=_FI),
        VecOp("VLeakyRelu", 1, lambda x, s: jnp.where(x[0] >= 0, x[0], x[0] * s), scalar=True),
        VecOp(
            "VShiftLeft",
            1,
            lambda x, s: _shift(x[0], s, True),
            scalar=True,
            types=_BITS + ("int32", "uint32"),
        ),
        VecOp(
            "VShiftRight",
            1,
            lambda x, s: _shift(x[0], s, False),
            scalar=True,
            types=_BITS + ("int32", "uint32"),
        ),
        VecOp("VAxpy", 1, lambda x, s: _mul(x[0], s) + x[1], reads_dst=True, scalar=True),
        # unary
        VecOp("VAbs", 1, lambda x: jnp.abs(x[0])),
        VecOp("VRelu", 1, lambda x: _relu(x[0]), types=FLOATS + ("int32",)),
        VecOp("VNot", 1, lambda x: ~x[0], types=_BITS),
        VecOp("VExp", 1, lambda x: jnp.exp(x[0])),
        VecOp("VLn", 1, lambda x: jnp.log(x[0])),
        VecOp("VSqrt", 1, lambda x: jnp.sqrt(x[0])),
        VecOp("VRsqrt", 1, lambda x: 1.0 / jnp.sqrt(x[0])),
        VecOp("VReciprocal", 1, lambda x: 1.0 / x[0]),
        VecOp("VCopy", 1, lambda x: x[0], types=FLOATS + INTS),
    )
}


# cycles a 256-B repeat takes, (16-bit, 32-bit) operands, as (num, den): the vendor's table (module
# docstring): lanes of a repeat over its elements per cycle. Every op not named here: one cycle.
RATES = {
    "VExp": ((4, 1), (2, 1)),  # 32 elements/cycle, half and float
    "VLn": ((4, 1), (2, 1)),
    "VSqrt": ((4, 1), (2, 1)),
    "VDiv": ((4, 1), (2, 1)),
    "VMulAddDst": ((2, 1), (2, 1)),  # 64 / 32 elements a cycle (three reads, a UB bank limit)
    "VWholeReduceSum": ((7, 1), (7, 1)),  # ReduceRepeat: 128/7 and 64/7
    "VWholeReduceMax": ((7, 1), (7, 1)),
    "VWholeReduceMin": ((7, 1), (7, 1)),
    "VRepeatReduceSum": ((7, 1), (7, 1)),
    "VBlockReduceSum": ((7, 1), (1, 1)),  # ReduceDataBlock: 128/7 for half, 64 for float
    "VBlockReduceMax": ((7, 1), (1, 1)),
    "VBlockReduceMin": ((7, 1), (1, 1)),
    "VGatherMask": ((2, 1), (2, 1)),  # 64 / 32 elements a cycle
    "VGather": ((128, 5), (64, 5)),  # 5 elements a cycle, any type
    "VGatherb": ((64, 21), (64, 21)),  # 42 (u16) / 21 (u32) elements a cycle
    "VTranspose": ((2, 1), (2, 1)),  # 128 elements (16-bit) a cycle: a 16 x 16 block in 2
}


def cycles_per_repeat(op: str, width: int) -> tuple[int, int]:
    """(num, den): cycles one repeat of ``op`` takes over operands ``width`` bytes wide (the widest)."""
    r = RATES.get(op)
    if r is None:
        return (1, 1)
    return r[0] if width <= 2 else r[1]


def compute_type(fmt: str) -> object:
    """The type an op on ``fmt`` lanes computes in: fp32 for floats, int32 for the integer types
    (uint32 too: its bit patterns, wrapped)."""
    return jnp.float32 if fmt in FLOATS else jnp.int32


# ---- ops whose destination is not lane for lane their sources' --------------------------------------
# Each takes the sources' lanes in their own types (xs) and returns the destination's lanes, (R', L'),
# as fp32 to be rounded to the destination's type (``raw`` False) or already in its storage type (``raw``
# True: an index's bits in a value's slot, a packed bit mask). ``repeats`` names the operand whose
# repeats the instruction is charged for.
@dataclasses.dataclass(frozen=True)
class ShapedOp:
    name: str
    n_src: int
    fn: Callable
    raw: bool = False
    repeats: str = "src"  # "src": the first source's repeats; "dst": the destination's


def tree_sum(x, fmt: str):
    """Sums along the last axis as the vendor's reductions add: a binary tree, (0, 1), (2, 3), ...,
    then pairs of those, every partial sum rounded to ``fmt`` (half saturating at 65504: "60000 +
    60000 ... 65504", the vendor's WholeReduceSum page)."""
    n = 1 << max(0, (x.shape[-1] - 1).bit_length())
    x = jnp.pad(x.astype(jnp.float32), [(0, 0)] * (x.ndim - 1) + [(0, n - x.shape[-1])])
    while x.shape[-1] > 1:
        x = x[..., 0::2] + x[..., 1::2]
        if fmt != "fp32":
            x = round_to(x, fmt, overflow="saturate").astype(jnp.float32)
    return x[..., 0]


def seq_sum(x, fmt: str):
    """Sums along the last axis in order, each partial sum rounded to ``fmt`` (half saturating)."""
    acc = x[..., 0].astype(jnp.float32)
    for i in range(1, x.shape[-1]):
        acc = acc + x[..., i].astype(jnp.float32)
        if fmt != "fp32":
            acc = round_to(acc, fmt, overflow="saturate").astype(jnp.float32)
    return acc


def index_bits(i, fmt: str):
    """An integer index stored in a ``fmt`` slot as its bits (the vendor's reductions write the index
    "按照dst的数据类型进行存储": read back with ReinterpretCast)."""
    ut = {2: jnp.uint16, 4: jnp.uint32}[_width(fmt)]
    return lax.bitcast_convert_type(i.astype(ut), DTYPES[fmt])


def _width(fmt: str) -> int:
    return itemsize(fmt)


def _masked(x, on, fill):
    return jnp.where(on, x.astype(jnp.float32), jnp.float32(fill))


def _whole_reduce(kind: str):
    def fn(xs, on, dst_fmt, *, order: int = 0, **_):
        x = xs[0]
        fill = 0.0 if kind == "sum" else (-jnp.inf if kind == "max" else jnp.inf)
        v = _masked(x, on[0], fill)
        if kind == "sum":
            return tree_sum(v, dst_fmt)[:, None]
        val = jnp.max(v, axis=-1) if kind == "max" else jnp.min(v, axis=-1)
        idx = jnp.argmax(v, axis=-1) if kind == "max" else jnp.argmin(v, axis=-1)  # the first on ties
        val_t = val.astype(DTYPES[dst_fmt])
        if order == 3:  # ORDER_ONLY_INDEX: a uint32 index, as the A2 writes it
            return idx.astype(jnp.uint32)[:, None]
        ib = index_bits(idx, dst_fmt)
        if order == 0:
            return jnp.stack([val_t, ib], axis=-1)
        if order == 1:
            return jnp.stack([ib, val_t], axis=-1)
        return val_t[:, None]

    return fn


def _block_reduce(kind: str):
    def fn(xs, on, dst_fmt, *, per: int, **_):
        x = xs[0]
        fill = 0.0 if kind == "sum" else (-jnp.inf if kind == "max" else jnp.inf)
        v = _masked(x, on[0], fill)
        r, lanes = v.shape
        v = v.reshape(r, lanes // per, per)
        if kind == "sum":
            return tree_sum(v, dst_fmt)
        return jnp.max(v, axis=-1) if kind == "max" else jnp.min(v, axis=-1)

    return fn


def _pair_sum(xs, on, dst_fmt, **_):
    v = _masked(xs[0], on[0], 0.0)
    y = v[:, 0::2] + v[:, 1::2]
    return y if dst_fmt == "fp32" else round_to(y, dst_fmt, overflow="saturate").astype(jnp.float32)


def _across(kind: str):
    """The second pass of a whole-tensor reduction over the first pass's per-repeat results: sum
    (``seq``: in order, the count form on the 910B; else a tree), or the max / min of [value, index]
    pairs with the global index ``repeat * lanes + index``."""

    def fn(xs, on, dst_fmt, *, seq: bool = False, lanes: int = 0, n: int = 0, cal_index: bool = False, **_):
        x = xs[0].reshape(-1)
        if kind == "sum":
            v = x[:n].astype(jnp.float32)[None, :]
            s = seq_sum(v, dst_fmt) if seq else tree_sum(v, dst_fmt)
            return s[:, None]
        pairs = x[: 2 * n].reshape(n, 2)
        vals = pairs[:, 0].astype(jnp.float32)
        ut = {2: jnp.uint16, 4: jnp.uint32}[_width(dst_fmt)]
        inner = lax.bitcast_convert_type(pairs[:, 1], ut).astype(jnp.int32)
        j = jnp.argmax(vals) if kind == "max" else jnp.argmin(vals)
        val = vals[j].astype(DTYPES[dst_fmt])
        if not cal_index:
            return val[None, None]
        gi = j * lanes + inner[j]
        return jnp.stack([val, index_bits(gi, dst_fmt)])[None, :]

    return fn


def _brcb(xs, on, dst_fmt, *, per: int, **_):
    return jnp.repeat(xs[0].astype(jnp.float32), per, axis=-1)


_CMP = {
    0: jnp.less,
    1: jnp.greater,
    2: jnp.equal,
    3: jnp.less_equal,
    4: jnp.greater_equal,
    5: lambda a, b: (
        (a != b) & ~jnp.isnan(a) & ~jnp.isnan(b)
    ),  # NE with a NaN gives 0 on the A2 (the vendor's note)
}


def pack_bits(b):
    """(R, L) bools as (R, L/8) uint8, element i in bit i % 8 of byte i / 8 (least significant first:
    the vendor's Compare example, [0 0 0 0 1 1 1 1] -> 240)."""
    r, lanes = b.shape
    w = (1 << jnp.arange(8, dtype=jnp.uint8)).astype(jnp.uint8)
    return jnp.sum(b.reshape(r, lanes // 8, 8).astype(jnp.uint8) * w, axis=-1, dtype=jnp.uint8)


def unpack_bits(words, lanes: int):
    """(R, k) unsigned words as (R, lanes) bools, bit i of the little-endian whole: lane i."""
    bits = words.dtype.itemsize * 8
    shifts = jnp.arange(bits, dtype=jnp.uint32)
    b = (words.astype(jnp.uint32)[..., None] >> shifts) & 1
    return b.reshape(words.shape[0], -1)[:, :lanes].astype(bool)


def _compare(xs, on, dst_fmt, *, cmp: int, scalar=None, **_):
    a = xs[0].astype(jnp.float32) if xs[0].dtype != jnp.int32 else xs[0]
    b = xs[1] if scalar is None else jnp.asarray(scalar, a.dtype)
    if scalar is None and b.dtype != a.dtype:
        b = b.astype(a.dtype)
    return pack_bits(_CMP[cmp](a, b))


def _select(xs, on, dst_fmt, *, mode: int, lanes: int, scalar=None, **_):
    sel = unpack_bits(xs[0], lanes)
    a = xs[1].astype(jnp.float32)
    b = jnp.asarray(scalar, jnp.float32) if scalar is not None else xs[2].astype(jnp.float32)
    return jnp.where(sel, a, b)


def _vec_index(xs, on, dst_fmt, *, first=0, lanes: int = 0, **_):
    r = on[0].shape[0] if on else 1
    i = jnp.arange(r * lanes).reshape(r, lanes)
    return (i + jnp.asarray(first, jnp.float32 if dst_fmt in FLOATS else jnp.int32)).astype(jnp.float32)


def _gather(xs, on, dst_fmt, *, base: int = 0, isz: int = 2, **_):
    src = xs[0].reshape(-1)
    off = xs[1].astype(jnp.int32)
    i = jnp.clip((jnp.int32(base) + off) // isz, 0, src.shape[0] - 1)
    return src[i].astype(jnp.float32)


def _bilinear(xs, on, dst_fmt, *, h_repeat: int, repeat_mode: bool, isz: int, per: int, **_):
    """BilinearInterpolation: vertical repeat v sums over its ``h_repeat`` horizontal repeats the 8
    blocks of src0 at the repeat's 8 byte offsets, each times src1's scalar for the repeat (or, with
    ``repeat_mode``, for the block), every product and partial sum rounded to the destination's type
    (the first product is the start). Sources: the offsets first (their (v * h, 8) rows are the repeats
    charged), then src0, src1. An offset past src0 reads its last elements (the chip's is undefined)."""
    offs, src0, src1 = xs[0].astype(jnp.int32), xs[1].reshape(-1), xs[2].reshape(-1).astype(jnp.float32)
    v_rep = offs.shape[0] // h_repeat
    e = jnp.arange(per)
    out = []
    for v in range(v_rep):
        acc = None
        for h in range(h_repeat):
            r = v * h_repeat + h
            start = offs[r] // isz  # (8,) element offsets of the 8 blocks
            blocks = src0[jnp.clip(start[:, None] + e[None, :], 0, src0.shape[0] - 1)]  # (8, 16)
            s = src1[r * 8 + jnp.arange(8)][:, None] if repeat_mode else src1[r]
            p = round_to(blocks.astype(jnp.float32) * s, dst_fmt).astype(jnp.float32)
            acc = p if acc is None else round_to(acc + p, dst_fmt).astype(jnp.float32)
        out.append(acc.reshape(-1))
    return jnp.stack(out)


def _identity(xs, on, dst_fmt, **_):
    return xs[0].astype(jnp.float32)


def _raw_identity(xs, on, dst_fmt, **_):
    return xs[0]


SHAPED: dict[str, ShapedOp] = {
    o.name: o
    for o in (
        ShapedOp("VWholeReduceSum", 1, _whole_reduce("sum")),
        ShapedOp("VWholeReduceMax", 1, _whole_reduce("max"), raw=True),
        ShapedOp("VWholeReduceMin", 1, _whole_reduce("min"), raw=True),
        ShapedOp("VRepeatReduceSum", 1, _whole_reduce("sum")),
        ShapedOp("VBlockReduceSum", 1, _block_reduce("sum")),
        ShapedOp("VBlockReduceMax", 1, _block_reduce("max")),
        ShapedOp("VBlockReduceMin", 1, _block_reduce("min")),
        ShapedOp("VPairReduceSum", 1, _pair_sum),
        ShapedOp("VReduceAcrossSum", 1, _across("sum")),
        ShapedOp("VReduceAcrossMax", 1, _across("max"), raw=True),
        ShapedOp("VReduceAcrossMin", 1, _across("min"), raw=True),
        ShapedOp("VBrcb", 1, _brcb, repeats="dst"),
        ShapedOp("VCompare", 2, _compare, raw=True),
        ShapedOp("VCompares", 1, _compare, raw=True),
        ShapedOp("VSelect", 3, _select, repeats="dst"),
        ShapedOp("VSelects", 2, _select, repeats="dst"),
        ShapedOp("VCreateVecIndex", 0, _vec_index, repeats="dst"),
        ShapedOp("VGather", 2, _gather, repeats="dst"),
        ShapedOp("VTranspose", 1, _raw_identity, raw=True),
        ShapedOp("VBilinear", 3, _bilinear),
    )
}

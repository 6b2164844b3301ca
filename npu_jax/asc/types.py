"""The vendor's vocabulary as values: dtypes, positions, hardware buffers, events, pipes, rounding and
quantisation modes, and the parameter structs of DataCopy, LoadData, Mmad and Fixpipe.

Names follow Ascend C in snake_case, as the vendor's own Python front end (pyasc) spells them
(``asc.TPosition.VECIN``, ``asc.HardEvent.MTE2_V``, ``asc.DataCopyParams(block_count=...)``). Parameter
structs take their fields positionally in the vendor's order too, so that a C++ aggregate
``{1, 8, 0, 0}`` ports as ``asc.DataCopyParams(1, 8, 0, 0)``.
"""

from __future__ import annotations

import dataclasses
import enum

import numpy as np

from npu_jax.core.pipes import PIPES
from npu_jax.hw.formats import itemsize


@dataclasses.dataclass(frozen=True)
class DType:
    """An element type of Ascend C (``half``, ``float``, ...) and the emulator's format for it."""

    name: str  # the vendor's spelling
    fmt: str  # the emulator's format (npu_jax.hw.formats)

    @property
    def itemsize(self) -> int:
        return itemsize(self.fmt)

    def sizeof(self) -> int:
        """Bytes of one element (pyasc's ``dtype.sizeof()``, C++'s ``sizeof(T)``)."""
        return self.itemsize

    def __eq__(self, other):
        if isinstance(other, DType):
            return self.fmt == other.fmt
        try:
            return self.fmt == dtype_of(other).fmt
        except TypeError:
            return NotImplemented

    def __hash__(self):
        return hash(self.fmt)

    def __repr__(self) -> str:
        return f"asc.{self.name}"


half = float16 = DType("half", "fp16")
float32 = DType("float32", "fp32")
bfloat16 = DType("bfloat16", "bf16")
int8 = DType("int8", "int8")
int32 = DType("int32", "int32")
int16 = DType("int16", "int16")
uint8 = DType("uint8", "uint8")
uint16 = DType("uint16", "uint16")
uint32 = DType("uint32", "uint32")
float = float32  # noqa: A001 (C++'s and pyasc's spelling)
DTYPES = (half, float32, bfloat16, int8, int32, int16, uint8, uint16, uint32)
_BY_FMT = {d.fmt: d for d in DTYPES}


def dtype_of(x) -> DType:
    """``x`` (a DType, a numpy / jax dtype or its name) as a DType."""
    if isinstance(x, DType):
        return x
    name = str(x).removeprefix("torch.") if type(x).__module__.startswith("torch") else np.dtype(x).name
    fmt = {
        "float16": "fp16",
        "float32": "fp32",
        "bfloat16": "bf16",
        "int8": "int8",
        "int32": "int32",
        "int16": "int16",
        "uint8": "uint8",
        "uint16": "uint16",
        "uint32": "uint32",
    }.get(name)
    if fmt is None:
        raise TypeError(
            f"asc works on half, float32, bfloat16, int8, int16, int32, uint8, uint16 and uint32 data; got "
            f"{name}. Convert the array (e.g. x.astype(np.float16)) before the launch."
        )
    return _BY_FMT[fmt]


class TPosition(enum.Enum):
    """Where a tensor lives in the vendor's programming model; each position is one buffer."""

    GM = "GM"
    VECIN = "VECIN"
    VECOUT = "VECOUT"
    VECCALC = "VECCALC"
    A1 = "A1"
    B1 = "B1"
    C1 = "C1"
    A2 = "A2"
    B2 = "B2"
    C2 = "C2"
    CO1 = "CO1"
    CO2 = "CO2"


QuePosition = TPosition  # the vendor's older name for the positions (QuePosition::VECIN)


class Hardware(enum.Enum):
    """The physical buffers (``LocalMemAllocator<Hardware::UB>``)."""

    GM = "GM"
    UB = "UB"
    L1 = "L1"
    L0A = "L0A"
    L0B = "L0B"
    L0C = "L0C"


class CacheMode(enum.Enum):
    """``CacheMode``: how a GlobalTensor's accesses use the chip's L2 (``SetL2CacheHint``)."""

    CACHE_MODE_NORMAL = "normal"
    CACHE_MODE_DISABLE = "disable"  # reads go straight to HBM: never hit, never allocate a line


def buffer_of(position: TPosition, hw) -> str:
    """The buffer a position lives in (ascend-c.md: positions -> buffers); CO2 is UB on coupled chips."""
    table = {
        TPosition.VECIN: "UB",
        TPosition.VECOUT: "UB",
        TPosition.VECCALC: "UB",
        TPosition.A1: "L1",
        TPosition.B1: "L1",
        TPosition.C1: "L1",
        TPosition.A2: "L0A",
        TPosition.B2: "L0B",
        TPosition.CO1: "L0C",
    }
    if position == TPosition.CO2 and hw.coupled:
        return "UB"
    if position not in table:
        raise NotImplementedError(
            f"asc: a local tensor at {position} is not supported on {hw.name} (CO2 is GM there; C2 is the "
            f"bias table); see docs/kernels.md."
        )
    return table[position]


class _Events:
    """``HardEvent``: one member per ordered pair of pipes, ``SRC_DST`` (``HardEvent.MTE2_V``)."""

    def __init__(self):
        for s in PIPES:
            for d in PIPES:
                if s != d:
                    setattr(self, f"{s}_{d}", f"{s}_{d}")

    def __repr__(self) -> str:
        return "asc.HardEvent"


HardEvent = _Events()

# PipeBarrier<PIPE_x>() arguments
PIPE_ALL = "ALL"
PIPE_MTE2, PIPE_MTE1, PIPE_M, PIPE_FIX, PIPE_V, PIPE_MTE3, PIPE_S = PIPES


class RoundMode(enum.Enum):
    """``Cast``'s rounding (``RoundMode::CAST_RINT`` ...) and the emulator's mode for each."""

    CAST_NONE = "nearest_even"  # float -> half: the conversion's default, round to nearest even
    CAST_RINT = "nearest_even"
    CAST_FLOOR = "down"
    CAST_CEIL = "up"
    CAST_ROUND = "away"
    CAST_TRUNC = "toward_zero"
    CAST_ODD = "odd"  # von Neumann rounding: not emulated (NotImplementedError)


# Enum members with equal values alias; keep CAST_NONE distinct from CAST_RINT in repr only.
class QuantMode(enum.Enum):
    """Fixpipe's conversion of L0C on the way out (``QuantMode_t``): from fp32 ``NoQuant`` / ``F322F16``
    / ``F322BF16``; from an int32 L0C (int8 operands) ``NoQuant`` (int32 out), ``DEQF16`` (to half) and
    ``REQ8`` (to int8), both scaled by ``FixpipeParamsV220.deq_scalar`` (:func:`npu_jax.requantize`'s
    formula)."""

    NoQuant = "fp32"  # no conversion: fp32 stays fp32, int32 stays int32
    F322F16 = "fp16"
    F322BF16 = "bf16"
    DEQF16 = "deq_fp16"
    REQ8 = "req_int8"

    def target(self, l0c: str) -> str | None:
        """The format this mode writes from an ``l0c`` (``fp32`` / ``int32``) accumulator, or None
        when the mode does not read that accumulator."""
        if self is QuantMode.NoQuant:
            return l0c
        ints = self in (QuantMode.DEQF16, QuantMode.REQ8)
        if ints != (l0c == "int32"):
            return None
        return self.value.split("_")[-1]

    @property
    def scales(self) -> bool:
        """The mode multiplies by ``deq_scalar`` (the int32 accumulator's dequantisation)."""
        return self in (QuantMode.DEQF16, QuantMode.REQ8)


@dataclasses.dataclass(frozen=True)
class DataCopyParams:
    """DataCopy's strided form: ``block_count`` blocks of ``block_len`` 32-B units, ``src_stride`` /
    ``dst_stride`` 32-B units between the end of one block and the start of the next."""

    block_count: int = 1
    block_len: int = 0
    src_stride: int = 0
    dst_stride: int = 0


@dataclasses.dataclass(frozen=True)
class DataCopyExtParams:
    """DataCopyPad's blocks: ``block_len`` in bytes; GM strides in bytes, UB strides in 32-B units."""

    block_count: int = 1
    block_len: int = 0
    src_stride: int = 0
    dst_stride: int = 0
    rsv: int = 0


@dataclasses.dataclass(frozen=True)
class DataCopyPadExtParams:
    """DataCopyPad's padding of each block to 32 B (undefined unless ``is_pad``)."""

    is_pad: bool = False
    left_padding: int = 0
    right_padding: int = 0
    padding_value: float = 0


@dataclasses.dataclass(frozen=True)
class Nd2NzParams:
    """DataCopy GM (ND) -> L1 (NZ): ``nd_num`` matrices of ``n_value`` rows x ``d_value`` columns,
    rows ``src_d_value`` elements apart in GM."""

    nd_num: int = 1
    n_value: int = 0
    d_value: int = 0
    src_nd_matrix_stride: int = 0
    src_d_value: int = 0
    dst_nz_c0_stride: int = 0
    dst_nz_n_stride: int = 1
    dst_nz_matrix_stride: int = 0


@dataclasses.dataclass(frozen=True)
class LoadData2DParams:
    """LoadData L1 -> L0A / L0B: ``repeat_times`` fractals from fractal ``start_index``."""

    start_index: int = 0
    repeat_times: int = 0
    src_stride: int = 0
    sid: int = 0
    dst_gap: int = 0
    if_transpose: bool = False
    addr_mode: int = 0


@dataclasses.dataclass(frozen=True)
class LoadData3DParamsV2:
    """``LoadData3DParamsV2``: img2col of an NC1HWC0 tile in L1 (``channel_size`` channels of ``l1_h`` x
    ``l1_w``) into L0A: the (``m_extension``, ``k_extension``) window at (``m_start_pt``, ``k_start_pt``)
    of its img2col matrix (row = output position, column = (c1, kh, kw, c0)). ``pad_list`` is (left,
    right, top, bottom)."""

    pad_list: tuple = (0, 0, 0, 0)
    l1_h: int = 0
    l1_w: int = 0
    channel_size: int = 0
    k_extension: int = 0
    m_extension: int = 0
    k_start_pt: int = 0
    m_start_pt: int = 0
    stride_w: int = 1
    stride_h: int = 1
    filter_w: int = 1
    filter_h: int = 1
    dilation_filter_w: int = 1
    dilation_filter_h: int = 1
    en_transpose: bool = False
    en_small_k: bool = False
    pad_value: float = 0
    filter_size_w: bool = False
    filter_size_h: bool = False
    f_matrix_ctrl: bool = False


@dataclasses.dataclass(frozen=True)
class MmadParams:
    """Mmad: C (m x n, fp32) = A (m x k) @ B (k x n) [+ C]. ``cmatrix_init_val`` true starts from 0."""

    m: int = 0
    n: int = 0
    k: int = 0
    unit_flag: int = 0
    cmatrix_source: bool = False
    cmatrix_init_val: bool = True


@dataclasses.dataclass(frozen=True)
class FixpipeParamsV220:
    """Fixpipe L0C -> GM (910B): an ``m_size`` x ``n_size`` block, GM rows ``dst_stride`` elements
    apart, converted per ``quant_pre``; ``relu_en`` applies ReLU."""

    n_size: int = 0
    m_size: int = 0
    src_stride: int = 0
    dst_stride: int = 0
    relu_en: bool = False
    quant_pre: QuantMode = QuantMode.NoQuant
    deq_scalar: float = 0.0
    nd_num: int = 1
    src_nd_stride: int = 0
    dst_nd_stride: int = 0
    unit_flag: int = 0


# ---- the vector unit's parameter structs and modes -------------------------------------------------
@dataclasses.dataclass(frozen=True)
class BinaryRepeatParams:
    """A binary op's walk: per operand, the 32-B blocks between consecutive blocks of a repeat
    (``*_blk_stride``) and between consecutive repeats (``*_rep_stride``)."""

    dst_blk_stride: int = 1
    src0_blk_stride: int = 1
    src1_blk_stride: int = 1
    dst_rep_stride: int = 8
    src0_rep_stride: int = 8
    src1_rep_stride: int = 8


@dataclasses.dataclass(frozen=True)
class UnaryRepeatParams:
    """A unary (or scalar) op's walk: the destination's and the source's block and repeat strides,
    in 32-B blocks."""

    dst_blk_stride: int = 1
    src_blk_stride: int = 1
    dst_rep_stride: int = 8
    src_rep_stride: int = 8


@dataclasses.dataclass(frozen=True)
class BrcbRepeatParams:
    """Brcb's destination walk: blocks and repeats apart, in 32-B blocks."""

    dst_blk_stride: int = 1
    dst_rep_stride: int = 8


@dataclasses.dataclass(frozen=True)
class GatherRepeatParams:
    """Gatherb's destination walk, in 32-B blocks."""

    dst_blk_stride: int = 1
    dst_rep_stride: int = 8


@dataclasses.dataclass(frozen=True)
class CopyRepeatParams:
    """Copy's (UB -> UB on the vector unit) walk: strides of blocks and of repeats, in 32-B blocks."""

    dst_stride: int = 0
    src_stride: int = 0
    dst_repeat_size: int = 0
    src_repeat_size: int = 0


class CMPMODE(enum.Enum):
    """Compare's relation: src0 REL src1."""

    LT = 0
    GT = 1
    EQ = 2
    LE = 3
    GE = 4
    NE = 5


class SELMODE(enum.Enum):
    """Select's modes: by the CMPMASK register, by a mask tensor against a scalar, or two tensors."""

    VSEL_CMPMASK_SPR = 0
    VSEL_TENSOR_SCALAR_MODE = 1
    VSEL_TENSOR_TENSOR_MODE = 2


SelMode = SELMODE


class MaskMode(enum.Enum):
    """How a mask counts: NORMAL (lanes of each repeat) or COUNTER (elements over all repeats)."""

    NORMAL = 0
    COUNTER = 1


class ReduceOrder(enum.Enum):
    """What WholeReduceMax / Min write per repeat: value and index, index and value, value, index."""

    ORDER_VALUE_INDEX = 0
    ORDER_INDEX_VALUE = 1
    ORDER_ONLY_VALUE = 2
    ORDER_ONLY_INDEX = 3

"""``asc.lib.host``: pyasc's host tiling (``MultiCoreMatmulTiling``), our own tiler.

The vendor's tiler searches L1 reuse, double buffering and tails; this one fills a ``TCubeTiling``
the emulator's Matmul takes, by one rule:

1. **Cores.** Split C (m x n) into ``cm`` x ``cn`` single-core blocks that divide m and n exactly,
   each side a multiple of the fractal's 16 rows, ``cm * cn <= set_dim``: the most blocks, then the
   squarest. ``used_core_num = cm * cn`` (pyasc's samples launch it, or half of it as MIX groups).
2. **Base block.** ``set_fix_split``'s sizes where given; otherwise the largest ``base_m x base_n``
   (each in 16..256, dividing the single-core block) whose fp32 accumulator fits L0C, and, for a C in
   UB (VECCALC), two of whose C tiles fit UB; ties to the squarer. ``base_k``: the largest in 16..256
   (a multiple of C0) dividing k whose A and B tiles fit L0A and L0B. ``single_core_k = k``.
3. **The rest.** One L1 buffer per operand (``depth_a1 = depth_b1 = step_* = 1``), single L0
   buffers, ``iterate_order`` 0 (ORDER_M, M fastest) unless ``set_traverse(FIRSTN)``, ``is_bias`` from
   ``enable_bias``, ``share_l1_size`` / ``share_l0c_size`` the buffers' sizes.

Every tiling it returns is exact (no tails): the single-core blocks divide C and the base blocks
divide them. A shape it cannot split so raises ``ValueError`` naming what failed.
"""

from __future__ import annotations

import enum
import math

from npu_jax.asc.pyasc.structs import TCubeTiling
from npu_jax.asc.runtime import config
from npu_jax.asc.types import bfloat16, float32, half, int8, int32
from npu_jax.hw.config import FRACTAL_ROWS


class TPosition(enum.IntEnum):
    GM = 0
    A1 = 1
    A2 = 2
    B1 = 3
    B2 = 4
    C1 = 5
    C2 = 6
    CO1 = 7
    CO2 = 8
    VECIN = 9
    VECOUT = 10
    VECCALC = 11
    LCM = 12
    SHM = 13
    SPM = 14
    TSCM = 15
    MAX = 16


CubeFormat = enum.IntEnum(  # the host's formats of a Matmul operand, 0 (ND) up
    "CubeFormat", "ND NZ ZN ZZ NN ND_ALIGN SCALAR VECTOR ROW_MAJOR COLUMN_MAJOR".split(), start=0
)


class DataType(enum.IntEnum):
    """The host's element types (ge::DataType)."""

    DT_FLOAT = 0
    DT_FLOAT16 = 1
    DT_INT8 = 2
    DT_INT32 = 3
    DT_UINT8 = 4
    DT_INT16 = 6
    DT_UINT16 = 7
    DT_UINT32 = 8
    DT_INT64 = 9
    DT_BF16 = 27


class MatrixTraverse(enum.IntEnum):
    NOSET = 0
    FIRSTM = 1
    FIRSTN = 2


_DTYPE = {
    DataType.DT_FLOAT: float32,
    DataType.DT_FLOAT16: half,
    DataType.DT_BF16: bfloat16,
    DataType.DT_INT8: int8,
    DataType.DT_INT32: int32,
}
_SIZES = (256, 128, 64, 32, 16)  # base block sides tried, largest first


class PlatformAscendC:
    """``get_ascendc_platform()``: the emulated chip of the current platform."""

    def __init__(self, platform: config.Platform | None = None):
        self.platform = config.current_platform() if platform is None else platform
        self.hw = config.hardware(self.platform)

    def get_soc_version(self) -> config.Platform:
        return self.platform

    def get_core_num_aic(self) -> int:
        return self.hw.num_cores

    def get_core_num_aiv(self) -> int:
        return self.hw.num_vector_cores

    def get_core_num(self) -> int:
        return self.hw.num_vector_cores


def get_ascendc_platform() -> PlatformAscendC:
    return PlatformAscendC()


class MultiCoreMatmulTiling:
    """``MultiCoreMatmulTiling(platform)``: set the operands, the cores and the shape, then
    ``get_tiling(tiling)`` fills an ``asc.adv.TCubeTiling`` (the rule: this module's docstring)."""

    def __init__(self, platform: PlatformAscendC | None = None):
        self.platform = platform or get_ascendc_platform()
        self.types = {"a": (TPosition.GM, DataType.DT_FLOAT16), "b": (TPosition.GM, DataType.DT_FLOAT16)}
        self.types["c"] = (TPosition.GM, DataType.DT_FLOAT)
        self.trans = {"a": False, "b": False}
        self.dim = 1
        self.shape = self.org_shape = None
        self.bias = False
        self.space = (-1, -1, -1, -1)
        self.traverse = MatrixTraverse.NOSET
        self.fix = (-1, -1, -1)

    def set_a_type(self, pos, type, data_type, is_trans=False) -> None:  # noqa: A002 (pyasc's names)
        self.types["a"], self.trans["a"] = (TPosition(pos), DataType(data_type)), bool(is_trans)

    def set_b_type(self, pos, type, data_type, is_trans=False) -> None:  # noqa: A002
        self.types["b"], self.trans["b"] = (TPosition(pos), DataType(data_type)), bool(is_trans)

    def set_c_type(self, pos, type, data_type) -> None:  # noqa: A002
        self.types["c"] = (TPosition(pos), DataType(data_type))

    def set_bias_type(self, pos, type, data_type) -> None:  # noqa: A002
        self.types["bias"] = (TPosition(pos), DataType(data_type))

    def set_dim(self, dim: int) -> None:
        self.dim = int(dim)

    def set_org_shape(self, org_m_in, org_n_in, org_ka_in, org_kb_in=None) -> None:
        self.org_shape = (
            int(org_m_in),
            int(org_n_in),
            int(org_ka_in),
            int(org_ka_in if org_kb_in is None else org_kb_in),
        )

    def set_shape(self, m, n, k) -> None:
        self.shape = (int(m), int(n), int(k))

    def enable_bias(self, is_bias_in: bool = False) -> None:
        self.bias = bool(is_bias_in)

    def set_buffer_space(self, l1_size=-1, l0_c_size=-1, ub_size=-1, bt_size=-1) -> None:
        self.space = (l1_size, l0_c_size, ub_size, bt_size)

    def set_traverse(self, traverse) -> None:
        self.traverse = MatrixTraverse(traverse)

    def set_fix_split(self, base_m_in=-1, base_n_in=-1, base_k_in=-1) -> None:
        self.fix = (base_m_in, base_n_in, base_k_in)

    # ---- the tiler --------------------------------------------------------------------------------
    def get_tiling(self, tiling: TCubeTiling) -> int:
        """Fill ``tiling``'s fields; returns 0 (pyasc's success)."""
        if not isinstance(tiling, TCubeTiling):
            raise TypeError(f"get_tiling takes an asc.adv.TCubeTiling, got {type(tiling).__name__}.")
        for field, value in self.solve().items():
            setattr(tiling, field, value)
        return 0

    def solve(self) -> dict:
        """The tiling's fields (module docstring's rule)."""
        if self.shape is None and self.org_shape is None:
            raise ValueError("MultiCoreMatmulTiling: set_shape(m, n, k) (or set_org_shape) first.")
        m, n, k = self.shape or self.org_shape[:3]
        if self.org_shape is not None and self.org_shape != (m, n, k, k):
            raise NotImplementedError(
                f"MultiCoreMatmulTiling: org shape {self.org_shape} other than the shape {(m, n, k)} (a sub-matrix) is "
                "not supported."
            )
        hw = self.platform.hw
        l1, l0c, ub = (
            s if s and s > 0 else d for s, d in zip(self.space, (hw.l1_bytes, hw.l0c_bytes, hw.ub_bytes))
        )
        a_sz = _DTYPE[self.types["a"][1]].itemsize
        c_sz = _DTYPE[self.types["c"][1]].itemsize
        c_in_ub = self.types["c"][0] != TPosition.GM
        c0 = hw.c0(a_sz)
        fm, fn_, fk = (int(v) if v is not None and v > 0 else None for v in self.fix)
        best = None
        for cm in _divisors(m):
            for cn in _divisors(n):
                sm, sn = m // cm, n // cn
                if cm * cn > max(1, self.dim) or sm % FRACTAL_ROWS or sn % FRACTAL_ROWS:
                    continue
                base = self._base(sm, sn, fm, fn_, l0c, ub, c_sz, c_in_ub)
                if base is None:
                    continue
                score = (cm * cn, -abs(math.log(sm / sn)))
                if best is None or score > best[0]:
                    best = (score, cm, cn, base)
        if best is None:
            raise ValueError(
                f"MultiCoreMatmulTiling: no split of C ({m} x {n}) into at most {self.dim} blocks that divide it, "
                f"multiples of {FRACTAL_ROWS}, with a base block (fix split {self.fix[:2]}) that fits L0C / UB."
            )
        _, cm, cn, (bm, bn) = best
        bk = fk or next(
            (s for s in _SIZES if s % c0 == 0 and k % s == 0 and bm * s * a_sz <= hw.l0a_bytes
             and s * bn * a_sz <= hw.l0b_bytes and (bm + bn) * s * a_sz <= l1),
            None,
        )  # fmt: skip
        if bk is None or k % bk:
            raise ValueError(
                f"MultiCoreMatmulTiling: no base_k dividing k = {k} fits L0A / L0B (base {bm} x {bn})."
            )
        return dict(
            used_core_num=cm * cn, m=m, n=n, k_a=k, k_b=k, single_core_m=m // cm, single_core_n=n // cn,
            single_core_k=k, base_m=bm, base_n=bn, base_k=bk, depth_a1=1, depth_b1=1, step_m=1, step_n=1,
            step_k_a=1, step_k_b=1, db_l0a=1, db_l0b=1, db_l0c=1, is_bias=int(self.bias),
            iterate_order=1 if self.traverse == MatrixTraverse.FIRSTN else 0,
            share_l1_size=l1, share_l0c_size=l0c,
        )  # fmt: skip

    def _base(self, sm, sn, fm, fn_, l0c, ub, c_sz, c_in_ub):
        """The base block (base_m, base_n) of an (sm x sn) single-core block, or None."""
        acc = float32.itemsize
        best = None
        for bm in (fm,) if fm else _SIZES:
            for bn in (fn_,) if fn_ else _SIZES:
                if sm % bm or sn % bn or bm * bn * acc > l0c:
                    continue
                if c_in_ub and not (fm and fn_) and 2 * bm * bn * c_sz > ub:
                    continue
                score = (bm * bn, -abs(math.log(bm / bn)), bn)
                if best is None or score > best[0]:
                    best = (score, (bm, bn))
        return None if best is None else best[1]


def _divisors(x: int) -> list[int]:
    return [d for d in range(1, x + 1) if x % d == 0]


__all__ = [
    "CubeFormat",
    "DataType",
    "MatrixTraverse",
    "MultiCoreMatmulTiling",
    "PlatformAscendC",
    "TPosition",
    "get_ascendc_platform",
]

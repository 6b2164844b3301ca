"""The GEMM mapping: its tiling, the default choice, and the allocation of its buffers."""

from __future__ import annotations

import dataclasses

import numpy as np

from npu_jax.core.buffers import Plan
from npu_jax.errors import CapacityError, TilingError
from npu_jax.hw.config import FRACTAL_ROWS, L0C_ITEMSIZE, HardwareConfig
from npu_jax.hw.costs import round_up
from npu_jax.hw.formats import acc_format, itemsize
from npu_jax.mapping.pytree import bad_entries, check_ints, concrete, register


@dataclasses.dataclass(frozen=True, kw_only=True)
class MatmulTiling:
    """Tile sizes of the GEMM kernel (all multiples of 16; ``k_l1`` a multiple of ``k_l0``).

    A pytree like :class:`~npu_jax.mapping.conv.ConvTiling`: every field a leaf, checks on concrete
    values only (ints, or arrays entry by entry), so stacked tilings pass through ``jax.vmap``.

    Attributes:
        m, n: the output block held in L0C (fp32): m * n * 4 B <= L0C.
        k_l1: K slice per L1 stage; k_l0: K slice per L0A/L0B stage.
        l1_stages, l0_stages: 2 = ping-pong (double buffering), 1 = serial.
        cores: cores to spread output blocks over (None = all of the preset's, capped by blocks).
    """

    m: int = 128
    n: int = 256
    k_l1: int = 256
    k_l0: int = 64
    l1_stages: int = 2
    l0_stages: int = 2
    cores: int | None = None

    def __post_init__(self):
        # each check runs on concrete values (ints, or arrays entry by entry) and skips traced ones
        for name in ("m", "n", "k_l1", "k_l0"):
            check_ints(
                "MatmulTiling",
                name,
                getattr(self, name),
                lambda a: (a > 0) & (a % FRACTAL_ROWS == 0),
                f"a positive multiple of {FRACTAL_ROWS} (one fractal)",
                TilingError,
            )
        k1, k0 = concrete(self.k_l1), concrete(self.k_l0)
        if k1 is not None and k0 is not None and np.any(k1 % k0):
            if k1.ndim == 0 and k0.ndim == 0:
                fix = f"; try k_l1={self.k_l1 - self.k_l1 % self.k_l0 or self.k_l0}"
            else:
                fix = bad_entries(np.broadcast_to(k1, np.broadcast_shapes(k1.shape, k0.shape)), k1 % k0 == 0)
            raise TilingError(
                f"MatmulTiling.k_l1 ({self.k_l1}) must be a multiple of k_l0 ({self.k_l0}){fix}."
            )
        for name in ("l1_stages", "l0_stages"):
            check_ints(
                "MatmulTiling",
                name,
                getattr(self, name),
                lambda a: (a == 1) | (a == 2),
                "1 or 2",
                TilingError,
            )
        if self.cores is not None:
            check_ints(
                "MatmulTiling", "cores", self.cores, lambda a: a >= 1, "None or an int >= 1", TilingError
            )


register(MatmulTiling)


def default_tiling(M: int, N: int, K: int, hw: HardwareConfig, operand: str = "fp16") -> MatmulTiling:
    """A legal tiling that keeps the Cube fed: the largest L0C block, then the deepest K slices."""
    isz = itemsize(operand)
    f = FRACTAL_ROWS
    kg = max(f, hw.c0(isz))  # N and K in whole L1 fractal rows: 32 for int8 (C0 = 32), else 16
    m = min(round_up(M, f), 128)
    n = min(round_up(N, kg), 256)
    if f * f * L0C_ITEMSIZE > hw.l0c_bytes:
        raise CapacityError(
            f"{hw.name}: L0C holds {hw.l0c_bytes} B, less than one {f}x{f} fp32 output fractal "
            f"({f * f * L0C_ITEMSIZE} B); no GEMM tiling fits. Raise l0c_bytes."
        )
    # halve the larger side until the fp32 block fits L0C: at most log2(m) + log2(n) halvings, each
    # taking one side closer to one fractal, which fits (checked above): a bounded loop by construction
    for _ in range(m.bit_length() + n.bit_length()):
        if m * n * L0C_ITEMSIZE <= hw.l0c_bytes:
            break
        if n >= m and n > f:
            n //= 2
        else:
            m //= 2
        m, n = max(f, round_up(m, f)), max(kg, round_up(n, kg))
    if m * n * L0C_ITEMSIZE > hw.l0c_bytes:  # unreachable by the count above; one fractal fits
        m, n = f, kg
    k_l0 = kg
    for cand in (8 * kg, 4 * kg, 2 * kg, kg):
        if 2 * m * cand * isz <= hw.l0a_bytes and 2 * cand * n * isz <= hw.l0b_bytes:
            k_l0 = cand
            break
    k_l0 = min(k_l0, round_up(K, kg))
    k_l1 = k_l0
    # deepest K slice per L1 stage: whole k_l0 steps, at most 1024 deep (a bounded loop)
    for _ in range(1024 // k_l0):
        if not (
            k_l1 + k_l0 <= round_up(K, kg)
            and k_l1 + k_l0 <= 1024
            and 2 * (m + n) * (k_l1 + k_l0) * isz <= hw.l1_bytes // 2
        ):
            break
        k_l1 += k_l0
    return MatmulTiling(m=m, n=n, k_l1=k_l1, k_l0=k_l0)


def allocate_gemm(hw: HardwareConfig, t: MatmulTiling, op: str, out: str) -> tuple[Plan, dict]:
    """Every buffer of the GEMM kernel for tiling ``t``; raises CapacityError naming the buffer."""
    isz = itemsize(op)
    c0 = hw.c0(isz)
    for name in ("n", "k_l1", "k_l0"):
        v = getattr(t, name)
        if isinstance(v, int) and v % c0:
            raise TilingError(
                f"MatmulTiling.{name}={v} must be a multiple of C0={c0} for {op} operands (whole fractal rows "
                f"in L1); try {name}={round_up(v, c0)}."
            )
    plan = Plan(hw)
    a = {}
    a["a_l1"] = plan.alloc("L1", "a_l1", (t.k_l1 // c0, t.m, c0), op, stages=t.l1_stages, fmt="NZ")
    a["b_l1"] = plan.alloc("L1", "b_l1", (t.n // c0, t.k_l1, c0), op, stages=t.l1_stages, fmt="NZ")
    a["a_l0"] = plan.alloc("L0A", "a_l0", (t.m, t.k_l0), op, stages=t.l0_stages, fmt="ZZ")
    a["b_l0"] = plan.alloc("L0B", "b_l0", (t.k_l0, t.n), op, stages=t.l0_stages, fmt="ZN")
    a["c_l0"] = plan.alloc("L0C", "c_l0c", (t.m, t.n), acc_format(op), fmt="NZ")
    a["c_ub"] = plan.alloc("UB", "c_ub", (t.m, t.n), out) if hw.coupled else None
    return plan, a


__all__ = ["MatmulTiling", "allocate_gemm", "default_tiling"]

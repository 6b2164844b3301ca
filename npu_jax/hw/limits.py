"""Every cost representable: a configuration whose instructions could leave the exact range is refused.

The emulator counts cycles in int32 per instruction (whole runs in wide, two-int32 counters), and a
transfer's cycles come from :func:`npu_jax.hw.costs.ceil_rate`, whose float32 products are exact
(and so agree between numpy and XLA) only while the cycle count stays below 2**24. So a
:class:`~npu_jax.hw.config.HardwareConfig` (with its :class:`~npu_jax.hw.config.Assumed` table) is
checked when it is built: the largest instruction any kernel can issue -- the largest buffer a
transfer can fill or drain, over the slowest rate it can run at (a core's share of the chip's GM
rate with every core active), plus its start-up and one burst gap per element -- must stay below
those limits. The bounds are upper bounds on the rules of ``costs.py`` (not the rules themselves):
a configuration they refuse names the instruction, the figure and the fix.

Before those, every figure is checked against its legal range (:func:`check_range`, one table):
no figure is so large or so small that one derived from it -- a time in microseconds, TFLOP/s, a
launch's cycles -- becomes inf, or that converting it raises an OverflowError from deep inside.

This module imports nothing of ``config.py`` (which calls it from ``__post_init__``).
"""

from __future__ import annotations

import dataclasses
import math

from npu_jax.errors import ConfigError
from npu_jax.hw.formats import FORMAT_BYTES

TRANSFER_CYCLES_MAX = 2**24  # float32's exact integers: ceil_rate's products are exact below this
INSTRUCTION_CYCLES_MAX = 2**31 - 1  # one instruction's cycles are an int32
STARTUP_MAX = 2**20  # any one start-up figure of the Assumed table (cycles)
RATE_MAX = float(2**24)  # B/cycle: rates are float32 in the costs, and products with them stay finite
_MIN_ITEMSIZE = min(FORMAT_BYTES.values())
_MAX_OPERAND_BYTES = 4  # the widest Cube operand (fp32): K0 = cube_k_bytes // 4 must be >= 1


# The legal range of every figure (one table, checked by :func:`check_range` as each field is
# validated): wide enough for any chip one may sweep, narrow enough that every figure derived from
# them stays a finite float -- a time in us (cycles / (1e3 clock_ghz)), TFLOP/s, a launch's cycles,
# one core's share of the chip's GM rate -- and never an OverflowError from deep inside.
SIZE_MAX = 2**48  # bytes (256 TiB): past any on-chip buffer or L2, and exact in a float64
CORES_MAX = 2**16  # cores per chip (the largest have ~100)
CLOCK_GHZ_RANGE = (1e-3, 1e3)  # 1 MHz .. 1 THz (chips run ~1-2 GHz)
LAUNCH_US_MAX = 1e9  # 1000 s per kernel launch (they take microseconds); keeps launch_cycles finite
# field -> (low, high, the range and why, as the message says it); a figure must lie in [low, high]
_RANGES = {
    "num_cores": (1, CORES_MAX, "1 and 2**16 cores (the largest chips have ~100)"),
    "vector_cores": (1, CORES_MAX, "1 and 2**16 cores (the largest chips have ~100)"),
    "clock_ghz": (
        *CLOCK_GHZ_RANGE,
        "0.001 and 1000 GHz (1 MHz to 1 THz), so that a time in us = cycles / (1e3 x clock_ghz) and a "
        "launch's cycles stay finite",
    ),
    "launch_us": (0, LAUNCH_US_MAX, "0 and 1e9 us (a launch takes microseconds)"),
    "rate": (
        0,
        RATE_MAX,
        "0 and 2**24 B/cycle (costs hold rates in float32, where larger figures overflow their products)",
    ),
    "size": (1, SIZE_MAX, "1 and 2**48 (every size and count must stay exact in a float64)"),
    "l2_bytes": (0, SIZE_MAX, "0 and 2**48 B (256 TiB; 0 means no L2)"),
    "startup": (
        0,
        STARTUP_MAX,
        "0 and 2**20 cycles (no instruction starts that slowly, and its sums must stay inside int32)",
    ),
}


def show(v) -> str:
    """``repr(v)``, except for an int too long to print usefully (or at all, past 4300 digits)."""
    if isinstance(v, int) and not isinstance(v, bool) and abs(v).bit_length() > 64:
        n = abs(v).bit_length()
        if abs(v) == 1 << (n - 1):
            return f"{'-' if v < 0 else ''}2**{n - 1}"
        return f"{v:.4g} (an int of {n} bits)" if n < 1024 else f"an int of {n} bits"
    return repr(v)


def _range_key(name: str) -> str | None:
    if name in _RANGES:
        return name
    if name.endswith("_per_cycle"):
        return "rate"
    if name.endswith(("_bytes", "_align")) or name in ("cube_m", "cube_n"):
        return "size"
    if name.endswith(("_startup", "_overhead", "_row_cycles")):
        return "startup"
    return None


def check_range(qualified: str, v) -> None:
    """Refuse ``v`` for the field ``qualified`` (``"HardwareConfig.clock_ghz"``) outside its legal
    range (the table above), naming the field, the value and the range. ``v`` is already a real number
    (an int or a float); comparing a Python int with the bounds is exact at any size."""
    key = _range_key(qualified.rsplit(".", 1)[-1])
    if key is None:
        return
    lo, hi, legal = _RANGES[key]
    if not lo <= v <= hi:
        raise ConfigError(f"{qualified} must be between {legal}, got {show(v)}.")


def check_assumed(a) -> None:
    """Start-ups and burst overhead of an Assumed table: whole cycle counts (a float would be
    truncated when costs read it); ``launch_us`` finite. (Their ranges: :func:`check_range`.)"""
    launch = getattr(a, "launch_us", 0.0)
    if launch != launch:  # NaN
        raise ConfigError(f"Assumed.launch_us must be a finite number of microseconds, got {launch!r}.")
    for f in dataclasses.fields(a):
        v = getattr(a, f.name)
        if f.type not in ("int", int):  # cycle counts; rates and launch_us (microseconds) are floats
            continue
        if isinstance(v, float) and not v.is_integer():
            raise ConfigError(f"Assumed.{f.name} is a cycle count and must be a whole number, got {v!r}.")


def _rate(hw, name: str, default: float) -> float:
    """A rate the configuration may not have (L2: configurations from before the chip model lack it): the slower of it and ``default``."""
    v = getattr(hw, name, None)
    return default if v is None else min(v, default)


def _rate_cycles(nbytes: float, rate: float) -> float:
    """Cycles of ``nbytes`` at ``rate``, rounded up; inf when the quotient overflows a float (a
    positive rate as small as a subnormal), which the range check below then refuses by name."""
    q = nbytes / rate if rate > 0 else math.inf  # a share of the chip's rate can underflow to 0
    return math.ceil(q) if math.isfinite(q) else math.inf


def _count(v) -> str:
    """A cycle count for a message: digits while readable, else ``5.24e+305`` (or ``inf``)."""
    return f"{v:,}" if v < 10**15 else f"{float(v):.3g}"


def check_costs(hw, fractal_rows: int, l0c_itemsize: int) -> None:
    """Refuse ``hw`` if one instruction's cost could leave the exact range (see the module doc).

    Also refuses a ``cube_k_bytes`` that is not a whole number of the widest operand (K0 = C0 would
    be 0 for fp32: a division by zero in every fractal count)."""
    if hw.cube_k_bytes % _MAX_OPERAND_BYTES:
        raise ConfigError(
            f"HardwareConfig.cube_k_bytes must be a multiple of {_MAX_OPERAND_BYTES} (one fp32 element: "
            f"K0 = C0 = cube_k_bytes / itemsize must be whole for every operand), got {hw.cube_k_bytes}."
        )
    a = hw.assumed
    cores = hw.num_cores
    gm_share = hw.gm_bytes_per_cycle
    if hw.chip_gm_bytes_per_cycle is not None:
        gm_share = min(gm_share, hw.chip_gm_bytes_per_cycle / cores)
    ub_gm = min(hw.ub_to_gm_rate, gm_share)
    l0c_read = hw.l0c_bytes  # fp32 fractals Fixpipe / L0C -> UB read at most
    burst = a.gm_burst_overhead
    # (instruction, bytes, rate, start-up, burst gaps possible): the largest of each kind
    transfers = [
        ("DataCopy GM -> L1 (MTE2)", hw.l1_bytes, gm_share, a.mte2_startup, True, "gm_bytes_per_cycle"),
        ("DataCopy GM -> UB (MTE2)", hw.ub_bytes, gm_share, a.mte2_startup, True, "gm_bytes_per_cycle"),
        ("DataCopy UB -> GM (MTE3)", hw.ub_bytes, ub_gm, a.mte3_startup, True, "ub_to_gm_bytes_per_cycle"),
        ("LoadData L1 -> L0A (MTE1)", hw.l0a_bytes, hw.l1_to_l0a_bytes_per_cycle, a.mte1_startup, False,
         "l1_to_l0a_bytes_per_cycle"),
        ("LoadData L1 -> L0B (MTE1)", hw.l0b_bytes, hw.l0b_rate, a.mte1_startup, False,
         "l1_to_l0b_bytes_per_cycle"),
        ("Fixpipe L0C read", l0c_read, a.fixpipe_bytes_per_cycle, a.fixpipe_startup, False,
         "Assumed.fixpipe_bytes_per_cycle"),
        ("Fixpipe -> GM write", l0c_read, gm_share, a.fixpipe_startup, True, "gm_bytes_per_cycle"),
        ("DataCopy L2 hit -> L1 (MTE2)", hw.l1_bytes, _rate(hw, "l2_read_bytes_per_cycle", gm_share),
         a.mte2_startup, True, "l2_read_bytes_per_cycle"),
        ("DataCopy UB -> L2 (MTE3)", hw.ub_bytes, _rate(hw, "l2_write_rate", ub_gm), a.mte3_startup, True,
         "l2_write_bytes_per_cycle"),
        ("L0C -> UB (V)", l0c_read, hw.l0c_to_ub_bytes_per_cycle, a.vector_startup, False,
         "l0c_to_ub_bytes_per_cycle"),
        ("L1 -> UB", hw.l1_bytes, hw.l1_to_ub_bytes_per_cycle, a.mte2_startup, False,
         "l1_to_ub_bytes_per_cycle"),
        # a bank conflict takes two cycles a beat (costs.ub_read_conflict)
        ("vector instruction (V)", hw.ub_bytes, hw.vector_repeat_bytes / (2 if hw.ub_bank_groups else 1),
         a.vector_startup, False, "vector_repeat_bytes"),
    ]  # fmt: skip
    # a GM transfer runs at the core's share of the chip's rate when that binds: name the chip's figure
    chip_binds = gm_share < hw.gm_bytes_per_cycle
    for what, nbytes, rate, startup, gaps, knob in transfers:
        cyc = _rate_cycles(nbytes, rate)
        rows = (nbytes // _MIN_ITEMSIZE) * gaps  # a burst per element at most
        total = startup + max(cyc, rows * a.dma_row_cycles) + rows * burst
        if cyc >= TRANSFER_CYCLES_MAX or total > INSTRUCTION_CYCLES_MAX:
            need = nbytes / (TRANSFER_CYCLES_MAX - 1)
            if chip_binds and rate == gm_share:
                knob, need = f"chip_gm_bytes_per_cycle (shared by {cores} cores)", need * cores
            raise ConfigError(
                f"{hw.name}: one {what} of {nbytes} B at {rate:.6g} B/cycle would cost {_count(total)} cycles "
                f"({_count(cyc)} for the transfer), past the exact range ({TRANSFER_CYCLES_MAX:,} transfer "
                f"cycles, {INSTRUCTION_CYCLES_MAX:,} per instruction); raise {knob} to at least "
                f"{need:.3g} or shrink the buffer."
            )
    launch = getattr(hw, "launch_cycles", 0)
    if launch > INSTRUCTION_CYCLES_MAX:
        raise ConfigError(
            f"{hw.name}: a kernel launch of Assumed.launch_us={a.launch_us!r} us at clock_ghz={hw.clock_ghz:.6g} "
            f"is {launch:.4g} cycles, past int32; use a launch_us under "
            f"{INSTRUCTION_CYCLES_MAX / (1e3 * hw.clock_ghz):.3g} or a lower clock_ghz."
        )
    # Mmad: blocks = cdiv(m, cube_m) cdiv(n, cube_n) cdiv(k, K0) with m n <= L0C / 4 B, m, n, k >= one
    # fractal row, and k K0-deep slices bounded by L0A / L0B holding m >= 16 rows of k
    f = fractal_rows
    mn = hw.l0c_bytes / l0c_itemsize
    k_slices = min(hw.l0a_bytes, hw.l0b_bytes) / (f * hw.cube_k_bytes) + 1
    blocks = mn * (1 / hw.cube_m + 1 / f) * (1 / hw.cube_n + 1 / f) * k_slices
    if a.mmad_startup + blocks > INSTRUCTION_CYCLES_MAX:
        raise ConfigError(
            f"{hw.name}: one Mmad could take {a.mmad_startup + blocks:,.0f} cycles (L0C {hw.l0c_bytes} B, "
            f"L0A/L0B {min(hw.l0a_bytes, hw.l0b_bytes)} B, Cube {hw.cube_m}x{hw.cube_n}x{hw.cube_k_bytes} B), "
            f"past int32; enlarge the Cube (cube_m, cube_n, cube_k_bytes) or shrink L0A/L0B/L0C."
        )


__all__ = [
    "CLOCK_GHZ_RANGE",
    "CORES_MAX",
    "INSTRUCTION_CYCLES_MAX",
    "LAUNCH_US_MAX",
    "RATE_MAX",
    "SIZE_MAX",
    "STARTUP_MAX",
    "TRANSFER_CYCLES_MAX",
    "check_assumed",
    "check_costs",
    "check_range",
    "show",
]

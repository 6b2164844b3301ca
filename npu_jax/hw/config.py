"""HardwareConfig: every figure of the emulated AI Core, frozen and validated.

Published figures come from ``shared/reference/ascend-hardware.md`` (cited per preset in
``presets.py``). Figures the vendor does not publish -- start-up latencies above all -- live in
one place, :class:`Assumed`, so that every guess in the model is named and can be swept.
"""

from __future__ import annotations

import dataclasses
import math

from npu_jax.hw.formats import itemsize
from npu_jax.hw.limits import check_assumed, check_costs, check_range, show

BUFFERS = ("L1", "L0A", "L0B", "L0C", "UB")
OVERFLOW_MODES = ("inf", "saturate")
CUBE_FORMATS = ("fp16", "bf16", "fp32", "int8")  # the operand formats a Cube may take
L2_POLICIES = ("smallest_first", "recency")
# M0 = N0: the rows (and columns) of every fractal, the unit of the L0 layouts, whatever the Cube's
# throughput per cycle (vendor: a fractal is 16 x C0 elements; C0 = 32 B of the element type)
FRACTAL_ROWS = 16
L0C_ITEMSIZE = 4  # L0C accumulates in fp32


@dataclasses.dataclass(frozen=True, kw_only=True)
class Assumed:
    """Model parameters that are *assumed*, not published. The one table of guesses.

    All in cycles. Each instruction costs ``startup + transfer`` on its pipe; the transfer part
    comes from published rates. Change these to ask "what if the DMA start-up were 2x longer?".
    """

    mte2_startup: int = 64  # GM -> L1/UB DMA issue-to-first-byte
    mte3_startup: int = 64  # UB -> GM DMA
    mte1_startup: int = 8  # L1 -> L0A/L0B LoadData / Load3D
    mmad_startup: int = 10  # Cube pipeline fill; ASC's Mmad doc hints at ~10 cycles
    fixpipe_startup: int = 16  # L0C -> GM/L1 with conversion
    vector_startup: int = 8  # one vector instruction's issue (22 on the arch-2201 presets: calibrated)
    scalar_ub_cycles: int = 1  # a GetValue / SetValue of one UB element on the Scalar pipe (unpublished)
    gm_burst_overhead: int = 4  # extra cycles per discontiguous GM burst (row of a strided window)
    # a GM DMA moves at most one row (burst) per this many cycles, its bytes' time or this, the longer
    # (0: no such limit; the 910B1's is calibrated, docs/fidelity.md)
    dma_row_cycles: int = 0
    fixpipe_bytes_per_cycle: float = 64.0  # 910B Fixpipe L0C read rate; unpublished
    l1_to_l0b_bytes_per_cycle: float = 256.0  # 910B figure unpublished; 310P's value
    ub_to_gm_bytes_per_cycle: float = 32.0  # 910B figure unpublished; ddr_rate
    # the chip around the cores (see docs/fidelity.md for the hints behind these)
    launch_us: float = 2.0  # a kernel launch: task scheduling and block dispatch (docs/fidelity.md)
    # the fraction of the chip's nominal HBM rate that streaming DMA sustains (1.0: the nominal figure;
    # the 910B1 preset's is calibrated from one measured micro-benchmark, docs/fidelity.md)
    hbm_sustained: float = 1.0

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
                raise ValueError(f"Assumed.{f.name} must be a non-negative number, got {show(v)}.")
            check_range(f"Assumed.{f.name}", v)
        for name in ("fixpipe_bytes_per_cycle", "l1_to_l0b_bytes_per_cycle", "ub_to_gm_bytes_per_cycle"):
            if getattr(self, name) <= 0:
                raise ValueError(f"Assumed.{name} must be > 0, got {getattr(self, name)}.")
        if not 0 < self.hbm_sustained <= 1:
            raise ValueError(
                f"Assumed.hbm_sustained is the fraction of the nominal HBM rate sustained, in (0, 1]; got "
                f"{self.hbm_sustained!r}."
            )
        check_assumed(self)


@dataclasses.dataclass(frozen=True, kw_only=True)
class HardwareConfig:
    """One Ascend-style AI Core (and how many of them the chip has).

    Rates are bytes per cycle per core; sizes are bytes per core. ``coupled=True`` means the
    910/310P data path (L0C -> UB on the Vector pipe, epilogue in UB); ``False`` means the 910B
    separated path (Fixpipe from L0C straight to GM or L1).

    Example:
        >>> import npu_jax
        >>> hw = npu_jax.presets.ascend910b()
        >>> hw.peak_flops_per_cycle("fp16")
        8192
    """

    name: str = "custom"
    num_cores: int = 1
    clock_ghz: float = 1.0
    # buffers (bytes per core)
    l1_bytes: int = 512 * 1024
    l0a_bytes: int = 64 * 1024
    l0b_bytes: int = 64 * 1024
    l0c_bytes: int = 128 * 1024
    ub_bytes: int = 192 * 1024
    # alignment of an allocation's start, per buffer (bytes)
    l1_align: int = 32
    l0a_align: int = 512
    l0b_align: int = 512
    l0c_align: int = 64
    ub_align: int = 32
    # bandwidths (bytes per cycle per core; CANN ini keys in comments)
    gm_bytes_per_cycle: float = 32.0  # ddr_rate: one core's port to HBM (a read that misses L2)
    chip_gm_bytes_per_cycle: float | None = (
        None  # the chip's HBM, reads and writes together; None = gm x cores
    )
    # the shared L2 in front of HBM: capacity (bytes per chip) and one core's rates to it
    l2_bytes: int = 192 * 1024 * 1024
    l2_read_bytes_per_cycle: float = 110.0  # l2_rate (a read that hits L2)
    l2_write_bytes_per_cycle: float | None = None  # l2 write rate; None = the read rate
    # what a kernel's re-reads find in L2 (core/l2.py): "smallest_first" keeps whole tensors, smallest
    # first, while they fit; "recency" keeps what was used recently (an element stays until L2-capacity
    # bytes have entered since its last use; the closed forms price it where a bound says none ages out)
    l2_policy: str = "smallest_first"
    l1_to_l0a_bytes_per_cycle: float = 512.0  # l1_to_l0_a_rate
    l1_to_l0b_bytes_per_cycle: float | None = None  # l1_to_l0_b_rate; None = Assumed
    l0c_to_ub_bytes_per_cycle: float = 256.0  # l0_c_to_ub_rate (coupled chips)
    ub_to_gm_bytes_per_cycle: float | None = None  # ub_to_ddr_rate; None = Assumed
    ub_to_l2_bytes_per_cycle: float | None = None  # ub_to_l2_rate (MTE3 into L2); None = ub_to_gm's
    l1_to_ub_bytes_per_cycle: float = 128.0  # l1_to_ub_rate
    # compute
    cube_m: int = 16
    cube_n: int = 16
    cube_k_bytes: int = 32  # one fractal row: K0 = 32 B / itemsize (16 for b16, 8 for fp32)
    vector_repeat_bytes: int = 256
    # UB bank groups a vector beat's 32-B rows interleave over (ub_bank_group_num): where set, two
    # sources in the same groups take two cycles a beat (costs.ub_read_conflict); None = not modelled
    ub_bank_groups: int | None = None
    num_event_ids: int = 8
    # vector cores (AIV) that run vector-only kernels: on separated chips (910B) they are cores of
    # their own, two per Cube core; None = num_cores (the vector unit inside each coupled AI Core)
    vector_cores: int | None = None
    # the operand formats the Cube's Mmad takes (the vendor's Mmad page, its table of dst / fm /
    # filter types: the Atlas A2 (910B) takes fp16, bf16, fp32 and int8; the inference line's AI Core
    # (310P) and the training line (910) fp16 and int8)
    cube_operands: tuple[str, ...] = ("fp16", "bf16", "fp32", "int8")
    # behaviour
    coupled: bool = False
    overflow_mode: str = "inf"
    assumed: Assumed = dataclasses.field(default_factory=Assumed)

    def __post_init__(self):
        def positive_int(name):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"HardwareConfig.{name} must be a positive int, got {show(v)}.")
            check_range(f"HardwareConfig.{name}", v)

        for name in (
            "num_cores",
            "l1_bytes",
            "l0a_bytes",
            "l0b_bytes",
            "l0c_bytes",
            "ub_bytes",
            "l1_align",
            "l0a_align",
            "l0b_align",
            "l0c_align",
            "ub_align",
            "cube_m",
            "cube_n",
            "cube_k_bytes",
            "vector_repeat_bytes",
            "num_event_ids",
        ):
            positive_int(name)
        if not isinstance(self.l2_bytes, int) or isinstance(self.l2_bytes, bool) or self.l2_bytes < 0:
            raise ValueError(
                f"HardwareConfig.l2_bytes must be an int >= 0 (0: no L2), got {show(self.l2_bytes)}."
            )
        check_range("HardwareConfig.l2_bytes", self.l2_bytes)
        if not isinstance(self.name, str):
            raise TypeError(f"HardwareConfig.name must be a string, got {self.name!r}.")
        for name in ("coupled",):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"HardwareConfig.{name} must be True or False, got {getattr(self, name)!r}.")
        ops = self.cube_operands
        if not isinstance(ops, tuple) or not ops or any(f not in CUBE_FORMATS for f in ops):
            raise ValueError(
                f"HardwareConfig.cube_operands is a non-empty tuple of {CUBE_FORMATS}, got {show(ops)}."
            )
        if self.num_event_ids > 16:
            raise ValueError(
                f"HardwareConfig.num_event_ids must be <= 16 (the chips have 8, the 910 4), "
                f"got {self.num_event_ids}."
            )
        for buf in BUFFERS:
            size, align = self.buffer_bytes(buf), self.alignment(buf)
            if align & (align - 1):
                raise ValueError(
                    f"HardwareConfig.{buf.lower()}_align ({buf} alignment) must be a power of two, "
                    f"got {align}."
                )
            if size % align:
                raise ValueError(
                    f"{buf} size {size} B is not a multiple of its alignment {align} B; "
                    f"round {buf.lower()}_bytes to a multiple of {align}."
                )
        if self.l0a_bytes % 512 or self.l0b_bytes % 512:
            raise ValueError(
                f"l0a_bytes and l0b_bytes must be multiples of 512 (one fractal), got "
                f"{self.l0a_bytes} and {self.l0b_bytes}."
            )
        for name in (
            "clock_ghz",
            "gm_bytes_per_cycle",
            "l1_to_l0a_bytes_per_cycle",
            "l0c_to_ub_bytes_per_cycle",
            "l1_to_ub_bytes_per_cycle",
            "l2_read_bytes_per_cycle",
        ):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0 or v == math.inf:
                raise ValueError(f"HardwareConfig.{name} must be a finite number > 0, got {show(v)}.")
            check_range(f"HardwareConfig.{name}", v)
        for name in (
            "chip_gm_bytes_per_cycle",
            "l1_to_l0b_bytes_per_cycle",
            "ub_to_gm_bytes_per_cycle",
            "ub_to_l2_bytes_per_cycle",
            "l2_write_bytes_per_cycle",
        ):
            v = getattr(self, name)
            if v is not None and (
                not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0 or v == math.inf
            ):
                raise ValueError(f"HardwareConfig.{name} must be None or a finite number > 0, got {show(v)}.")
            if v is not None:
                check_range(f"HardwareConfig.{name}", v)
        if self.ub_bank_groups is not None:
            if (
                not isinstance(self.ub_bank_groups, int)
                or isinstance(self.ub_bank_groups, bool)
                or self.ub_bank_groups <= 0
            ):
                raise ValueError(
                    f"HardwareConfig.ub_bank_groups must be None or a positive int, got {show(self.ub_bank_groups)}."
                )
            check_range("HardwareConfig.ub_bank_groups", self.ub_bank_groups)
            if self.coupled:
                raise ValueError(
                    "HardwareConfig.ub_bank_groups: UB bank conflicts are modelled on the vector cores of "
                    "separated chips (coupled=False, the 910B family, whose banks are published); a coupled "
                    f"chip's are not. Use ub_bank_groups=None with coupled=True, got {self.ub_bank_groups}."
                )
        if self.vector_cores is not None and (
            not isinstance(self.vector_cores, int)
            or isinstance(self.vector_cores, bool)
            or self.vector_cores <= 0
        ):
            raise ValueError(
                f"HardwareConfig.vector_cores must be None or a positive int, got {show(self.vector_cores)}."
            )
        if self.vector_cores is not None:
            check_range("HardwareConfig.vector_cores", self.vector_cores)
        if self.l2_policy not in L2_POLICIES:
            raise ValueError(
                f"HardwareConfig.l2_policy must be one of {L2_POLICIES}, got {self.l2_policy!r}; "
                f"'smallest_first' is the default."
            )
        if self.overflow_mode not in OVERFLOW_MODES:
            raise ValueError(f"overflow_mode must be one of {OVERFLOW_MODES}, got {self.overflow_mode!r}.")
        if not isinstance(self.assumed, Assumed):
            raise TypeError(f"assumed must be an Assumed, got {type(self.assumed).__name__}.")
        check_costs(self, FRACTAL_ROWS, L0C_ITEMSIZE)

    # ---- derived figures -------------------------------------------------------------------
    def buffer_bytes(self, buffer: str) -> int:
        return {
            "L1": self.l1_bytes,
            "L0A": self.l0a_bytes,
            "L0B": self.l0b_bytes,
            "L0C": self.l0c_bytes,
            "UB": self.ub_bytes,
        }[_check_buffer(buffer)]

    def alignment(self, buffer: str) -> int:
        return {
            "L1": self.l1_align,
            "L0A": self.l0a_align,
            "L0B": self.l0b_align,
            "L0C": self.l0c_align,
            "UB": self.ub_align,
        }[_check_buffer(buffer)]

    def legality_key(self) -> tuple:
        """The figures a tiling's legality depends on (:meth:`npu_jax.mapping.conv.ConvPlan.validate`):
        cores, coupled or not, the fractal row, every buffer's capacity and alignment. Two machines
        with equal keys accept the same tilings, whatever their rates, L2 or launch cost; the chooser
        enumerates a layer's legal tilings once per key (:func:`npu_jax.search.choose.candidate_tilings`)."""
        return (
            self.num_cores,
            self.coupled,
            self.cube_k_bytes,
            *(self.buffer_bytes(b) for b in BUFFERS),
            *(self.alignment(b) for b in BUFFERS),
        )

    def k0(self, itemsize: int) -> int:
        """Fractal depth K0 for an operand of ``itemsize`` bytes (16 for fp16, 8 for fp32)."""
        return self.cube_k_bytes // itemsize

    def c0(self, itemsize: int) -> int:
        """Channel block C0 of the NC1HWC0 / fractal layouts: one fractal row, ``cube_k_bytes`` wide
        (16 for fp16, 8 for fp32); the same figure as :meth:`k0`."""
        return self.k0(itemsize)

    def peak_flops_per_cycle(self, operand: str = "fp16") -> int:
        """Cube FLOP per cycle per core: one (cube_m x K0 x cube_n) MAC block per cycle."""
        return 2 * self.cube_m * self.cube_n * self.k0(itemsize(operand))

    def peak_tflops(self, operand: str = "fp16") -> float:
        return self.peak_flops_per_cycle(operand) * self.num_cores * self.clock_ghz / 1e3

    @property
    def l0b_rate(self) -> float:
        v = self.l1_to_l0b_bytes_per_cycle
        return v if v is not None else self.assumed.l1_to_l0b_bytes_per_cycle

    @property
    def ub_to_gm_rate(self) -> float:
        v = self.ub_to_gm_bytes_per_cycle
        return v if v is not None else self.assumed.ub_to_gm_bytes_per_cycle

    @property
    def mte3_rate(self) -> float:
        """MTE3's UB -> GM port: a write goes into L2 (write-allocate, ``ub_to_l2_rate``) where the chip
        has one, else straight to DDR (``ub_to_ddr_rate``). Writes the L2 does not keep reach DDR at the
        chip's rate (``costs.kernel_cycles``), not at this port's."""
        v = self.ub_to_l2_bytes_per_cycle
        return v if v is not None and self.l2_bytes > 0 else self.ub_to_gm_rate

    @property
    def l2_write_rate(self) -> float:
        v = self.l2_write_bytes_per_cycle
        return v if v is not None else self.l2_read_bytes_per_cycle

    @property
    def launch_cycles(self) -> int:
        """Cycles of one kernel launch (``Assumed.launch_us`` at this clock)."""
        return int(round(self.assumed.launch_us * 1e3 * self.clock_ghz))

    @property
    def num_vector_cores(self) -> int:
        """Cores a vector-only kernel runs on (AIV on separated chips; the AI Cores on coupled ones)."""
        return self.num_cores if self.vector_cores is None else self.vector_cores

    def gm_rate(self, active_cores: int = 1) -> float:
        """One core's GM rate when ``active_cores`` cores move data at once (chip bandwidth shared)."""
        chip = self.chip_gm_bytes_per_cycle
        if chip is None:
            return float(self.gm_bytes_per_cycle)
        return float(min(self.gm_bytes_per_cycle, chip / max(1, active_cores)))

    def replace(self, **changes) -> HardwareConfig:
        """A copy with ``changes`` applied (and validated)."""
        return dataclasses.replace(self, **changes)

    # ``HardwareConfig.from_ini(path, base=None)`` is attached by ``hw/ini.py`` (which reads presets):
    # this module imports neither, so the hw package's imports stay acyclic.


def _check_buffer(buffer: str) -> str:
    if buffer not in BUFFERS:
        raise ValueError(f"buffer must be one of {BUFFERS}, got {buffer!r}.")
    return buffer

"""Presets for the chips in ``shared/reference/ascend-hardware.md``, each figure cited.

Sources: ASC = Ascend C devkit headers and docs (``kernel_utils_constants.h``, platform stub for
arch 2201), OPSNN = ops-nn test fixtures (arch 2002), INI = third-party copies of
``Ascend910B1.ini``, HC19 = Hot Chips 2019 DaVinci talk. ``(derived)`` marks arithmetic on the
others; ``(assumed)`` marks what no source gives (also listed in :class:`~npu_jax.hw.config.Assumed`).
"""

from __future__ import annotations

from npu_jax.hw.config import Assumed, HardwareConfig

KiB = 1024
MiB = 1024 * KiB

# A vector instruction's issue on the arch-2201 vector core (AIV), 22 cycles: *calibrated* from one
# figure, the vendor's add_high_performance case 6 (aiv_vec_time 6.954 us: 87 conflict-free Adds a
# core, 86 of 127 beats, at 1.85 GHz; the port, ``examples/asc/vendor_add.py``, gives 6.950 at 22); its
# cases 1-5, whose x and y collide in the UB's bank groups, then validate it with the conflict rule
# (761.6 / 15.9 / 12.8 us emulated against 761.65 / 15.885 / 12.845 published). docs/fidelity.md.
AIV_VECTOR_STARTUP = 22
# The 910B1's DMA row rate: a GM copy moves at most one row (burst) per 3 cycles (``Assumed.dma_row_cycles``),
# *calibrated* from one figure, the vendor's matmul_high_performance case 1 (one core, the NORM template:
# Nd2Nz copies of 128 + 256 rows of 128 B, almost all from L2): aic_mte2 195,613.4 us; its port gives
# 182,508.9 us at 3 and 235,787.9 at 4 (the figure sits at 3.25; the whole cycle nearest). With the row
# rate the additive gap per row is 0 on this preset (``gm_burst_overhead``): a copy whose bytes bind
# (long rows, or short rows at a core's share of HBM) then pays nothing per row, as the vendor's data_copy
# scenario 2 (64 rows of 128 B a copy, 48 cores from HBM) shows. docs/fidelity.md.
DMA_ROW_CYCLES_910B1 = 3


def ascend910b() -> HardwareConfig:
    """Ascend 910B4, separated data path (Fixpipe), arch 2201.

    20 AI Cube cores at 1.5 GHz (``cube_freq=1500``, ASC platform stub) -> 245.76 TFLOPS fp16.
    Buffers L0A/L0B 64 KiB, L0C 128 KiB, L1 512 KiB, UB 192 KiB (ASC constants, arch 2201).
    ``ddr_rate`` 32 B/cycle per core (ASC platform stub); the chip's HBM ~800 GB/s for the 910B4
    (third-party spec sheets) -> 533.3 B/cycle, shared by all cores, reads and writes together.
    L2 96 MiB on the 910B4 (its platform config, quoted in huawei-csl/pto-dsl's matmul guide; the
    24-core 910B1/B2 have 192 MiB), ``l2_rate`` 110 B/cycle read, 86 write (INI).
    ``l1_to_l0_a_rate`` 512 B/cycle (INI). L1->L0B and UB->GM unpublished (assumed).
    UB 16 bank groups x 3 banks x 4 KB of 32-B rows (the add_high_performance README of asc-devkit,
    "Atlas A2/A3"): two vector sources in the same groups conflict (``costs.ub_read_conflict``).
    IEEE inf/NaN overflow by default (ASC). Event ids 0-7.
    """
    return HardwareConfig(
        name="ascend910b",
        num_cores=20,
        vector_cores=40,  # 20 AIC + 40 AIV (ASC platform stub, 910B4)
        clock_ghz=1.5,
        l1_bytes=512 * KiB,
        l0a_bytes=64 * KiB,
        l0b_bytes=64 * KiB,
        l0c_bytes=128 * KiB,
        ub_bytes=192 * KiB,
        gm_bytes_per_cycle=32.0,
        chip_gm_bytes_per_cycle=round(800e9 / 1.5e9, 2),
        l2_bytes=96 * MiB,
        l2_read_bytes_per_cycle=110.0,
        l2_write_bytes_per_cycle=86.0,
        l1_to_l0a_bytes_per_cycle=512.0,
        ub_bank_groups=16,
        coupled=False,
        overflow_mode="inf",
        num_event_ids=8,
        assumed=Assumed(vector_startup=AIV_VECTOR_STARTUP),
    )


def ascend910b1() -> HardwareConfig:
    """Ascend 910B1, the "Atlas A2 training" part of the vendor's measured best-practice kernels.

    24 AI Cube cores and 48 AI Vector cores at 1.85 GHz (stated in the READMEs of the vendor's
    add_high_performance and matmul_high_performance samples, asc-devkit) -> 363.7 TFLOPS fp16 (the
    vendor's own "theory" time of an 8192^3 matmul, 3022.92 us, is 8192^3 / (4096 x 24 x 1850 MHz)).
    L2 192 MiB (asc-devkit ``04_memory_access/data_copy/README.md``). HBM ~1.8 TB/s (the vendor's
    estimates in the matmul_high_performance README) -> 973.0 B/cycle for the chip. ``l2_rate`` 110 B/cycle
    read, 86 write per core (INI, ``Ascend910B1.ini``): 110 x 24 x 1.85 GHz = 4.9 TB/s, the vendor's
    "L2 ~5 TB/s" ("3-4x HBM"). Buffers, port rate and the rest as the 910B4 (arch 2201, ASC).
    Streaming sustains 0.7908 of the nominal HBM rate (``Assumed.hbm_sustained``): *calibrated* from one
    micro-benchmark, the vendor's data_copy GM -> UB scenario 3 (a [12288, 12288] half matrix read once
    by 48 AIV in [64, 1024] tiles: Task Duration 215.82 us, ``04_memory_access/data_copy/README.md``),
    the value at which the port (``examples/asc/vendor_data_copy.py``) takes exactly that with the row
    rate below; the vendor's add kernel validates it, and its own estimate of that scenario at 1.8 TB/s
    falls short of the measured by about as much (167.8 against 215.82 us; docs/fidelity.md).
    A GM DMA moves at most one row per ``DMA_ROW_CYCLES_910B1`` = 3 cycles, with no further gap per
    row (calibrated from matmul_high_performance case 1: above).
    The L2 keeps what was used recently (``l2_policy="recency"``): the same README measures its hit
    rate (msprof's L2Cache counters) when the matrix is read 4 times over, 0.005% (302 MB a round,
    over the 192 MB), and when 4 slices of 75.5 MB are each read 4 times in a row, 75.00%; the
    whole-tensor rule would give 0% to both. Measured, not calibrated: the port reproduces 0% and
    75.00%. (The tile search's traced model prices recency where its bound holds, as for every
    candidate tiling of the ResNet-50 layers checked; a tiling it cannot bound is ``cost.conv.UNPRICED``.)
    """
    return ascend910b().replace(
        name="ascend910b1",
        num_cores=24,
        vector_cores=48,
        clock_ghz=1.85,
        chip_gm_bytes_per_cycle=round(1.8e12 / 1.85e9, 2),
        l2_bytes=192 * MiB,
        l2_policy="recency",
        assumed=Assumed(
            hbm_sustained=0.7908,
            vector_startup=AIV_VECTOR_STARTUP,
            dma_row_cycles=DMA_ROW_CYCLES_910B1,
            gm_burst_overhead=0,
        ),
    )


def ascend910() -> HardwareConfig:
    """Ascend 910 (arch 1001), coupled data path: L0C -> UB on the Vector pipe.

    32 cores, 256 TFLOPS fp16 -> ~0.98 GHz (derived: 256e12 / (32 x 8192)). Buffers L0A/L0B
    64 KiB, L0C 256 KiB, L1 1 MiB, UB 256 KiB (ASC). ``ddr_rate`` 32 B/cycle per core (ASC platform
    stub); the chip's HBM ~1.2 TB/s (third-party) -> 1225 B/cycle, shared by all cores. L2 32 MiB
    (platform stub; MLPerf Training v1.0 system description), ``l2_rate`` 110 B/cycle (platform stub).
    L1->L0A 512, L1->L0B 256, L0C->UB 256, L1->UB 128 B/cycle (platform ini values shared with
    310/310P; assumed to carry over); UB->GM = ``ddr_rate`` (as on 310P). Saturation overflow only.
    Event ids 0-3 (ASC).
    """
    clock = 256e12 / (32 * 8192) / 1e9
    return HardwareConfig(
        name="ascend910",
        num_cores=32,
        clock_ghz=round(clock, 4),
        l1_bytes=1024 * KiB,
        l0a_bytes=64 * KiB,
        l0b_bytes=64 * KiB,
        l0c_bytes=256 * KiB,
        ub_bytes=256 * KiB,
        gm_bytes_per_cycle=32.0,
        chip_gm_bytes_per_cycle=round(1.2e12 / (clock * 1e9), 2),
        l2_bytes=32 * MiB,
        l2_read_bytes_per_cycle=110.0,
        l1_to_l0a_bytes_per_cycle=512.0,
        l1_to_l0b_bytes_per_cycle=256.0,
        l0c_to_ub_bytes_per_cycle=256.0,
        ub_to_gm_bytes_per_cycle=32.0,
        l1_to_ub_bytes_per_cycle=128.0,
        coupled=True,
        cube_operands=("fp16", "int8"),  # the vendor's Mmad page: no bf16 or fp32 operands
        overflow_mode="saturate",
        num_event_ids=4,
    )


def ascend310p() -> HardwareConfig:
    """Ascend 310P (arch 2002), coupled data path: the 310P3 of an Atlas 300I Pro.

    Buffers as 910 (ASC). Rates from OPSNN fixtures: ddr_rate 17, l1_to_l0_a_rate 512,
    l1_to_l0_b_rate 256, l0_c_to_ub_rate 256, ub_to_ddr_rate 17, ub_to_l2_rate 114, l1_to_ub_rate
    128 B/cycle (the 310P hardware_info of ops-nn's AvgPool3D tiling tests: 8 cores, 16 MiB L2, l2_rate
    114, ddr_read_rate = ddr_write_rate = 17). MTE3 writes go into L2 at ub_to_l2_rate, as every
    write does in the model (write-allocate); ub_to_ddr_rate is a write straight to DDR.
    Clock 1.08 GHz: the AI Core frequency npu-smi reads on a 310P3 (1080 MHz, third-party output);
    8 cores x 8192 fp16 FLOP/cycle x 1.08 GHz = 70.8 TFLOPS, the Atlas 300I Pro's published 70
    TFLOPS fp16 (8 cores: *assumed*, the count that figure implies). Chip memory: LPDDR4X 204.8 GB/s
    = 204.8 / 1.08 = 189.6 B/cycle at that clock (spec sheet, treated as an assumption in
    docs/fidelity.md). Saturation overflow.
    """
    return HardwareConfig(
        name="ascend310p",
        num_cores=8,
        clock_ghz=1.08,
        l1_bytes=1024 * KiB,
        l0a_bytes=64 * KiB,
        l0b_bytes=64 * KiB,
        l0c_bytes=256 * KiB,
        ub_bytes=256 * KiB,
        gm_bytes_per_cycle=17.0,
        chip_gm_bytes_per_cycle=204.8 / 1.08,
        l2_bytes=16 * MiB,
        l2_read_bytes_per_cycle=114.0,
        l1_to_l0a_bytes_per_cycle=512.0,
        l1_to_l0b_bytes_per_cycle=256.0,
        l0c_to_ub_bytes_per_cycle=256.0,
        ub_to_gm_bytes_per_cycle=17.0,
        ub_to_l2_bytes_per_cycle=114.0,
        l1_to_ub_bytes_per_cycle=128.0,
        coupled=True,
        cube_operands=("fp16", "int8"),  # the vendor's Mmad page: no bf16 or fp32 operands
        overflow_mode="saturate",
        num_event_ids=8,
    )


def tiny(coupled: bool = False) -> HardwareConfig:
    """A deliberately small 910B-like core for fast tests: tilings hit capacity limits quickly."""
    return HardwareConfig(
        name="tiny-coupled" if coupled else "tiny",
        num_cores=2,
        clock_ghz=1.0,
        l1_bytes=64 * KiB,
        l0a_bytes=8 * KiB,
        l0b_bytes=8 * KiB,
        l0c_bytes=16 * KiB,
        ub_bytes=16 * KiB,
        gm_bytes_per_cycle=32.0,
        chip_gm_bytes_per_cycle=64.0,
        l2_bytes=1 * MiB,
        l2_read_bytes_per_cycle=64.0,
        coupled=coupled,
        overflow_mode="saturate" if coupled else "inf",
    )


PRESETS = {
    "ascend910b": ascend910b,
    "ascend910b1": ascend910b1,
    "ascend910": ascend910,
    "ascend310p": ascend310p,
    "tiny": tiny,
}


def get(name: str) -> HardwareConfig:
    """A preset by name (``ascend910b``, ``ascend910b1``, ``ascend910``, ``ascend310p``, ``tiny``; ``910b`` works)."""
    if not isinstance(name, str):
        raise TypeError(
            f"preset name must be a string such as '910b' or 'tiny', got {name!r}; known: {sorted(PRESETS)}."
        )
    key = name.lower().replace("-", "").replace("_", "")
    if not key.startswith("ascend") and key != "tiny":
        key = "ascend" + key
    if key not in PRESETS:
        raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {name!r}.")
    return PRESETS[key]()


__all__ = ["PRESETS", "ascend310p", "ascend910", "ascend910b", "ascend910b1", "get", "tiny"]

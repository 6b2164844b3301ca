"""The pipes of an AI Core and the counters every run keeps: the machine's fixed tables.

Every instruction runs on one pipe, in program order on that pipe: ``start = pipe_free[p]``
(raised by WaitFlag), ``end = start + cost``. Which instruction runs on which pipe, what it charges
and what it costs is declared once per instruction in :mod:`npu_jax.core.isa` (the op names of the
trace, ``OPS``, come from those declarations).
"""

from __future__ import annotations

# The pipes as the vendor's programming model names them (``PIPE_MTE2`` ... ``PIPE_S``; flag events
# such as ``HardEvent::M_FIX``): kernels, instruction declarations, flags and sanitizer findings.
PIPES = ("MTE2", "MTE1", "M", "FIX", "V", "MTE3", "S")
PIPE_INDEX = {p: i for i, p in enumerate(PIPES)}
# The one table between the two vocabularies: pipe -> the lane name of the vendor's profiler and
# simulator timeline. Everything that reports a run (Report.pipe_busy keys, bottleneck, summaries,
# traces, plots, fusion output) speaks these names; docs/design.md ("Pipe names") shows the table.
LANES = {
    "MTE2": "MTE2",
    "MTE1": "MTE1",
    "M": "CUBE",
    "FIX": "FIXP",
    "V": "VECTOR",
    "MTE3": "MTE3",
    "S": "SCALAR",
}
# Lanes in the order data flows through a core (GM -> L1 -> L0 -> Cube -> Fixpipe / Vector -> GM,
# then the scalar unit): the order of every table, the Chrome trace's lanes and the timeline plot.
LANE_ORDER = tuple(LANES[p] for p in PIPES)
# Busy-ratio names in the vendor profiler's vocabulary, per lane.
RATIO_NAMES = {
    "MTE2": "mte2_ratio",
    "MTE1": "mte1_ratio",
    "CUBE": "mac_ratio",
    "FIXP": "fixpipe_ratio",
    "VECTOR": "vec_ratio",
    "MTE3": "mte3_ratio",
    "SCALAR": "scalar_ratio",
}


def ratios(pipe_busy: dict, cycles: int, n_cores: int) -> dict[str, float]:
    """Busy / elapsed per lane over the launched cores (mac_ratio, mte1_ratio, ...): the one rule for
    every report and prediction."""
    total = max(1, cycles) * n_cores
    return {RATIO_NAMES[lane]: pipe_busy[lane] / total for lane in LANE_ORDER}


def bottleneck(pipe_busy: dict, hbm_cycles: int, core_end: int) -> str:
    """What sets a kernel's time: ``HBM`` when the chip's memory, shared by every core, needs longer
    than any core runs (``hbm_cycles > core_end``), else the lane busy longest (summed over the
    cores; ties in :data:`LANE_ORDER`). The one rule for every report and prediction."""
    if hbm_cycles > core_end:
        return "HBM"
    return max(LANE_ORDER, key=lambda lane: pipe_busy[lane])


# Data paths whose bytes are counted, then the compute counters.
PATHS = ("GM->L1", "GM->UB", "L1->L0A", "L1->L0B", "L0C->GM", "L0C->L1", "L0C->UB", "UB->GM", "UB->L1")
# The chip's side of GM traffic: reads that missed L2 (brought in from HBM), and writes (to HBM).
HBM_PATHS = ("HBM->L2", "L2->HBM")
COUNTERS = PATHS + HBM_PATHS + ("flops", "flops_issued", "vector_bytes")
COUNTER_INDEX = {c: i for i, c in enumerate(COUNTERS)}

"""Pipes, instruction names and the cost of each instruction, in one table.

Every instruction runs on one pipe, in program order on that pipe:
``start = pipe_free[p]`` (raised by WaitFlag), ``end = start + cost``. Costs are published rates
(bytes / rate per path, one fractal per Cube cycle, one 256-B repeat per vector cycle) plus the
start-up latencies named in :class:`~npu_jax.hw.config.Assumed`. Functions here work on Python
ints and traced int32 alike, so the emulator and the closed-form cost model share them.
"""

from __future__ import annotations

import jax.numpy as jnp

from npu_jax.hw.config import HardwareConfig

PIPES = ("MTE2", "MTE1", "M", "FIX", "V", "MTE3", "S")
PIPE_INDEX = {p: i for i, p in enumerate(PIPES)}
# Lane names of the vendor simulator's Chrome trace.
LANES = {
    "MTE2": "MTE2",
    "MTE1": "MTE1",
    "M": "CUBE",
    "FIX": "FIXP",
    "V": "VECTOR",
    "MTE3": "MTE3",
    "S": "SCALAR",
}
# Busy-ratio names in the vendor profiler's vocabulary.
RATIO_NAMES = {
    "M": "mac_ratio",
    "MTE1": "mte1_ratio",
    "MTE2": "mte2_ratio",
    "MTE3": "mte3_ratio",
    "FIX": "fixpipe_ratio",
    "V": "vec_ratio",
    "S": "scalar_ratio",
}

OPS = (
    "DataCopy",
    "LoadData2D",
    "Load3D",
    "Mmad",
    "Fixpipe",
    "L0CToUB",
    "VAdd",
    "VSub",
    "VMul",
    "VMax",
    "VMin",
    "VAdds",
    "VMuls",
    "VMaxs",
    "VMins",
    "VRelu",
    "VLeakyRelu",
    "VExp",
    "VCast",
    "VReduceSum",
    "VCopy",
    "Scalar",
)
OP_INDEX = {o: i for i, o in enumerate(OPS)}

PATHS = ("GM->L1", "GM->UB", "L1->L0A", "L1->L0B", "L0C->GM", "L0C->L1", "L0C->UB", "UB->GM", "UB->L1")
COUNTERS = PATHS + ("flops", "flops_issued", "vector_bytes")
COUNTER_INDEX = {c: i for i, c in enumerate(COUNTERS)}


def ceil_div(a, b):
    """ceil(a / b) for non-negative ints (Python or traced); b may be a float rate."""
    if isinstance(a, int) and isinstance(b, (int, float)):
        q = a / b
        return int(q) + (q > int(q))
    q = jnp.asarray(a, jnp.float32) / jnp.float32(b)
    return jnp.ceil(q).astype(jnp.int32)


def gm_transfer_cycles(nbytes, nbursts, rate: float, startup: int, hw: HardwareConfig):
    """A DMA between GM and a core: start-up, bytes at ``rate``, and a gap per extra burst.

    ``nbursts`` is how many discontiguous runs the window has (1 for a contiguous block).
    Empty transfers (``nbytes == 0``) cost nothing.
    """
    gaps = jnp.maximum(jnp.asarray(nbursts, jnp.int32) - 1, 0) * hw.assumed.gm_burst_overhead
    cyc = startup + ceil_div(nbytes, rate) + gaps
    return jnp.where(jnp.asarray(nbytes) > 0, cyc, 0).astype(jnp.int32)


def onchip_cycles(nbytes, rate: float, startup: int):
    cyc = startup + ceil_div(nbytes, rate)
    return jnp.where(jnp.asarray(nbytes) > 0, cyc, 0).astype(jnp.int32)


def mmad_cycles(m, n, k, k0: int, hw: HardwareConfig):
    """One (16 x K0 x 16) fractal block per cycle: ceil(m/16) ceil(n/16) ceil(k/K0) + start-up."""
    blocks = ceil_div(m, hw.cube_m) * ceil_div(n, hw.cube_n) * ceil_div(k, k0)
    return jnp.where(jnp.asarray(blocks) > 0, hw.assumed.mmad_startup + blocks, 0).astype(jnp.int32)


def vector_cycles(nbytes, hw: HardwareConfig):
    """Vector instructions process one 256-B repeat per cycle."""
    return onchip_cycles(nbytes, hw.vector_repeat_bytes, hw.assumed.vector_startup)

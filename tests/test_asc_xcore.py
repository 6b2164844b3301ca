"""What crosses cores: atomic copies out (SetAtomicAdd / Max), SyncAll's barrier, the system counter,
and the AIC <-> AIV flags of a mix kernel (the attention sample: examples/asc/attention.py)."""

from __future__ import annotations

import numpy as np
import pytest

import npu_jax
from npu_jax import asc

HW = npu_jax.presets.ascend910b()
N = 128


@asc.kernel
def accumulate(x, z, mode: str, barrier: bool):
    """Every block copies its row of x into the same z, atomically (z = z0 + sum of rows, or the max)."""
    pipe = asc.TPipe()
    q = asc.TBuf(asc.TPosition.VECCALC)
    pipe.init_buffer(q, N * 4)
    t = q.get(asc.float32)
    xg, zg = asc.GlobalTensor(), asc.GlobalTensor()
    xg.set_global_buffer(x + asc.get_block_idx() * N, N)
    zg.set_global_buffer(z, N)
    asc.data_copy(t, xg, N)
    asc.set_flag(asc.HardEvent.MTE2_MTE3, 0)
    asc.wait_flag(asc.HardEvent.MTE2_MTE3, 0)
    if barrier:
        asc.sync_all()
    (asc.set_atomic_add if mode == "add" else asc.set_atomic_max)()
    asc.data_copy(zg, t, N)
    asc.set_atomic_none()


@pytest.mark.parametrize("mode", ["add", "max"])
def test_atomic_copies_from_every_block_combine(rng, mode):
    x = rng.uniform(-4, 4, (6, N)).astype(np.float32)
    z0 = rng.uniform(-4, 4, N).astype(np.float32)
    (_, z), rep = accumulate[6](x, z0, mode, False, hw=HW, checks="all")
    want = z0 + x.astype(np.float64).sum(0) if mode == "add" else np.maximum(z0, x.max(0))
    np.testing.assert_allclose(z, want, rtol=1e-5, atol=1e-6)  # six fp32 adds in another order
    assert not rep.findings()  # six blocks writing one element atomically is no race


def test_sync_all_waits_for_the_slowest_block(rng):
    x = rng.uniform(-4, 4, (6, N)).astype(np.float32)
    _, free = accumulate[6](x, np.zeros(N, np.float32), "add", False, hw=HW)
    _, barred = accumulate[6](x, np.zeros(N, np.float32), "add", True, hw=HW)
    mte3 = npu_jax.core.pipes.PIPE_INDEX["MTE3"]
    # after the barrier every block's copy out starts no earlier than the latest block's pipes
    ends = npu_jax.core.wide.to_numpy(barred.pipe_free)[:, mte3]
    assert ends.min() >= npu_jax.core.wide.to_numpy(free.pipe_free)[:, mte3].min()
    assert barred.cycles >= free.cycles


@asc.kernel
def stamp(z, n: int):
    """The system counter before and after n float Exps of a repeat each (4 cycles a repeat + start-up)."""
    zg = asc.GlobalTensor()
    zg.set_global_buffer(z, 8)
    pipe = asc.TPipe()
    qi, qf = asc.TBuf(asc.TPosition.VECCALC), asc.TBuf(asc.TPosition.VECCALC)
    pipe.init_buffer(qi, 32)
    pipe.init_buffer(qf, 64 * 4)
    t, f = qi.get(asc.int32), qf.get(asc.float32)
    asc.duplicate(f, 1.0, 64)
    asc.pipe_barrier(asc.PIPE_ALL)
    t0 = asc.get_system_cycle()
    for _ in range(n):
        asc.exp(f, f, 64)
    asc.pipe_barrier(asc.PIPE_ALL)
    t1 = asc.get_system_cycle()
    asc.duplicate(t, 0, 8)
    asc.set_flag(asc.HardEvent.V_S, 0)
    asc.wait_flag(asc.HardEvent.V_S, 0)
    t.set_value(0, t0)
    t.set_value(1, t1)
    asc.set_flag(asc.HardEvent.S_MTE3, 0)
    asc.wait_flag(asc.HardEvent.S_MTE3, 0)
    asc.data_copy(zg, t, 8)


def test_get_system_cycle_counts_the_50_mhz_counter():
    (z,), rep = stamp[1](np.zeros(8, np.int32), 60, hw=HW, checks="all")
    cycles = 60 * (HW.assumed.vector_startup + 2)  # a float Exp repeat: 2 cycles (32 elements a cycle)
    ticks = cycles * 50e6 / (HW.clock_ghz * 1e9)
    assert abs((z[1] - z[0]) - ticks) <= 2

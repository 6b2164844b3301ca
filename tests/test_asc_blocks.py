"""Python control flow on the block index: ``if asc.get_block_idx() >= used: return`` and branches on it
run (each path traced once, every block on its own path), and a branch on a traced value fails at the
user's line with what to write instead."""

from __future__ import annotations

import numpy as np
import pytest

import npu_jax
from npu_jax import asc

HW = npu_jax.presets.ascend910b()
N = 256  # elements a block


@asc.kernel
def scaled_copy(x, z, used: int):
    """Blocks past ``used`` return at once; block 0 doubles, the others triple (two paths and an exit)."""
    if asc.get_block_idx() >= used:
        return
    pipe = asc.TPipe()
    q = asc.TBuf(asc.TPosition.VECCALC)
    pipe.init_buffer(q, N * 4)
    t = q.get(asc.float32)
    off = asc.get_block_idx() * N
    xg, zg = asc.GlobalTensor(), asc.GlobalTensor()
    xg.set_global_buffer(x + off, N)
    zg.set_global_buffer(z + off, N)
    asc.data_copy(t, xg, N)
    asc.set_flag(asc.HardEvent.MTE2_V, 0)
    asc.wait_flag(asc.HardEvent.MTE2_V, 0)
    if asc.get_block_idx() == 0:
        asc.muls(t, t, 2.0, N)
    else:
        asc.muls(t, t, 3.0, N)
    asc.set_flag(asc.HardEvent.V_MTE3, 0)
    asc.wait_flag(asc.HardEvent.V_MTE3, 0)
    asc.data_copy(zg, t, N)


@pytest.mark.parametrize("jit", [True, False])
def test_blocks_branch_on_their_index(rng, jit):
    x = rng.uniform(-4, 4, 6 * N).astype(np.float32)
    z = np.full_like(x, 7.0)
    (_, got), rep = scaled_copy[6](x, z, 4, hw=HW, checks="all", jit=jit)
    want = np.concatenate([2 * x[:N], 3 * x[N : 4 * N], z[4 * N :]])
    np.testing.assert_array_equal(got, want)
    assert not rep.findings()


@asc.kernel
def branch_on_data(x, z):
    pipe = asc.TPipe()
    q = asc.TBuf(asc.TPosition.VECCALC)
    pipe.init_buffer(q, N * 4)
    t = q.get(asc.float32)
    xg = asc.GlobalTensor()
    xg.set_global_buffer(x, N)
    asc.data_copy(t, xg, N)
    if t.get_value(0) > 0:  # data: not known when the kernel is traced
        asc.muls(t, t, 2.0, N)


def test_a_branch_on_data_fails_at_the_users_line(rng):
    x = rng.uniform(-4, 4, N).astype(np.float32)
    with pytest.raises(asc.AscError, match=r"test_asc_blocks.py:\d+.*traced value.*asc\.select"):
        branch_on_data[1](x, np.zeros_like(x), hw=HW)

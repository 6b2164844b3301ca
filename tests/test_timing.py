"""Timing of small programs, against cycle counts derived by hand from the cost table.

The GEMM below is 32x32 output, K in slices of 16, on the tiny preset (GM 32 B/cycle, L1->L0A
512 B/cycle, L1->L0B 256 B/cycle assumed). Per K step (fp16, 2 B/element):
  MTE2  A window 32x16 of a 32xK matrix: 32 rows of 32 B = 32 bursts; B window 16x32 of a Kx32
        matrix: whole rows, 1 burst.  T2 = (s2 + 1024/32 + 31 g) + (s2 + 1024/32)
  MTE1  LoadData A 1024 B at 512 B/c, B 1024 B at 256 B/c.   T1 = (s1 + 2) + (s1 + 4)
  M     Mmad 32x32x16 = 2*2*1 fractal blocks.               TM = sm + 4
  FIX   once per block: 32x32 fp32 = 4096 B of L0C at 64 B/c vs 2048 B to GM at 32 B/c.
        TF = sf + max(64, 64)  (the write goes into L2 at 64 B/c: 32 cycles, under the L0C read)
Every read is the first of its bytes (a miss, at the GM rate); the kernel's launch comes first.
Serial buffering: MTE2 must wait for MTE1 to drain the one L1 slot, so each step costs T2 + T1
and the Cube hides under the next copy: total = n (T2 + T1) + TM + TF.
Double buffering: MTE2 streams back to back (it is the slowest pipe), so the steady state is
max(T2, T1, TM) = T2 per step: total = n T2 + T1 + TM + TF.
"""

import jax
import numpy as np
import pytest

import npu_jax
from npu_jax import MatmulTiling
from npu_jax.core import Context, GmSpec, Plan, Policy, init_core
from npu_jax.core.sync import Queue


def _hand(hw):
    s = hw.assumed
    t2 = (s.mte2_startup + 1024 // 32 + 31 * s.gm_burst_overhead) + (s.mte2_startup + 1024 // 32)
    t1 = (s.mte1_startup + 1024 // 512) + (s.mte1_startup + 1024 // 256)
    tm = s.mmad_startup + 2 * 2 * 1
    tf = s.fixpipe_startup + max(4096 // 64, 2048 // 32)
    return t2, t1, tm, tf


def _run(hw, k, stages, jit=False, rng=None):
    rng = rng or np.random.default_rng(0)  # the cycles do not depend on the values
    a = rng.standard_normal((32, k)).astype(np.float32)
    b = rng.standard_normal((k, 32)).astype(np.float32)
    til = MatmulTiling(m=32, n=32, k_l1=16, k_l0=16, l1_stages=stages, l0_stages=stages, cores=1)

    def f(a, b):
        return npu_jax.matmul(a, b, hw=hw, tiling=til)

    if jit:
        f = jax.jit(f)
    return f(a, b)


@pytest.mark.slow
@pytest.mark.parametrize("jit", [False, True])
def test_serial_and_double_buffered_gemm_match_hand_derivation(jit):
    hw = npu_jax.presets.tiny()
    t2, t1, tm, tf = _hand(hw)
    assert (t2, t1, tm, tf) == (316, 22, 14, 80)  # the default Assumed table, worked out above
    n = 4
    _, serial = _run(hw, 16 * n, 1, jit)
    _, double = _run(hw, 16 * n, 2, jit)
    launch = hw.launch_cycles  # the kernel's launch comes first (Assumed.launch_us)
    assert serial.cycles == launch + n * (t2 + t1) + tm + tf
    assert double.cycles == launch + n * t2 + t1 + tm + tf
    assert double.cycles < serial.cycles
    # busy cycles do not depend on buffering: the same instructions run either way
    assert serial.pipe_busy == double.pipe_busy
    assert double.pipe_busy["MTE2"] == n * t2 and double.pipe_busy["CUBE"] == n * tm


@pytest.mark.slow
def test_steady_state_is_max_of_pipes():
    """The marginal cost of K steps: max over pipes when double-buffered, the sum when serial."""
    hw = npu_jax.presets.tiny()
    t2, t1, tm, _ = _hand(hw)
    d = {st: _run(hw, 16 * 8, st)[1].cycles - _run(hw, 16 * 4, st)[1].cycles for st in (1, 2)}
    assert d[2] == 4 * max(t2, t1, tm)
    assert d[1] == 4 * (t2 + t1)


def test_cube_bound_steady_state():
    """With a fast GM the Cube becomes the slowest pipe, and the double-buffered steady state
    follows it instead."""
    hw = npu_jax.presets.tiny().replace(
        gm_bytes_per_cycle=4096.0,
        chip_gm_bytes_per_cycle=None,
        assumed=npu_jax.Assumed(mte2_startup=0, gm_burst_overhead=0, mmad_startup=40),
    )
    s = hw.assumed
    t2 = 2 * (0 + 1)  # 1024 B at 4096 B/cycle, twice
    t1 = (s.mte1_startup + 2) + (s.mte1_startup + 4)
    tm = 40 + 4
    assert tm > max(t1, t2)
    d = _run(hw, 16 * 8, 2)[1].cycles - _run(hw, 16 * 4, 2)[1].cycles
    assert d == 4 * tm


def test_flag_wait_moves_consumer_and_queue_drains():
    hw = npu_jax.presets.tiny()
    plan = Plan(hw)
    x = plan.alloc("UB", "x", (128,), "fp16", stages=2)
    ctx = Context(
        hw=hw, allocs=tuple(plan.allocs), gm=(GmSpec("g", (4, 128), (4, 128), "fp16"),), policy=Policy()
    )
    core = init_core(ctx, {"g": np.ones((4, 128), np.float16)})
    q = Queue("MTE2", "V", x)
    core = q.init(core)
    for i in range(4):
        core = q.alloc_tensor(core, i)
        core = core.data_copy(dst=q.slot(i), src=core.gm_window("g", (i, 0), (1, 128)))
        core = q.enque(core, i)
        core = q.deque(core, i)
        core = core.vector("VRelu", q.slot(i), q.slot(i))
        core = q.free(core, i)
    core = q.drain(core)
    assert not bool(np.asarray(core.flag_set).any())
    # Copies (s2 + 256 B / 32) stream back to back through two slots; each 256-B ReLU (sv + 1)
    # waits for its copy, so V ends one ReLU after the fourth copy, and the drain brings MTE2
    # (waiting for its slots back) to the same cycle.
    from npu_jax.core.pipes import PIPE_INDEX

    s = hw.assumed
    copy, relu = s.mte2_startup + 256 // 32, s.vector_startup + 1
    pf = np.asarray(core.pipe_free)[:, 1]
    assert pf[PIPE_INDEX["V"]] == 4 * copy + relu
    assert pf[PIPE_INDEX["MTE2"]] == 4 * copy + relu

"""The chip around the cores: the shared L2, the chip's HBM bandwidth and the kernel launch.

Small kernels written on the instruction set read GM windows on several cores; the counters say
what HBM moved (``HBM->L2``, ``L2->HBM``), the MTE2 clocks say at which rate each read moved.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from fusion import conv_relu
from npu_jax import presets
from npu_jax.core import l2
from npu_jax.core.buffers import Plan
from npu_jax.core.pipes import COUNTER_INDEX
from npu_jax.core.policy import Policy
from npu_jax.core.run import launch
from npu_jax.core.state import Context, GmSpec
from npu_jax.hw.config import Assumed, HardwareConfig
from npu_jax.hw.costs import HwNumbers, ceil_rate, kernel_cycles
from npu_jax.report.sequence import SequenceReport

ROWS, COLS = 64, 128  # one fp16 window: 16 KiB


def _hw(**kw):
    base = dict(
        num_cores=4,
        gm_bytes_per_cycle=32.0,
        chip_gm_bytes_per_cycle=None,
        l2_bytes=1 << 20,
        l2_read_bytes_per_cycle=128.0,
        l2_write_bytes_per_cycle=64.0,
        assumed=Assumed(gm_burst_overhead=0, launch_us=1.0),
    )
    return HardwareConfig(**{**base, **kw})


def _run(hw, x, where, *, cores, reads=1, resident=(), out=False):
    """Each core b reads ``reads`` times the (ROWS, COLS) window of ``x`` at row ``where(b)``; with
    ``out`` it writes the tile to ``y`` at row block b. Returns the Report."""
    plan = Plan(hw)
    ub = plan.alloc("UB", "t", (ROWS, COLS), "fp16")
    gm = (GmSpec("x", x.shape, x.shape, "fp16"),)
    if out:
        gm += (GmSpec("y", (cores * ROWS, COLS), (cores * ROWS, COLS), "fp16", output=True),)

    def kernel(core, b):
        for _ in range(reads):
            core = core.data_copy(dst=ub[0], src=core.gm_window("x", (where(b), 0), (ROWS, COLS)))
            core = core.pipe_barrier("ALL")
        if out:
            core = core.set_flag("MTE2_MTE3", 0).wait_flag("MTE2_MTE3", 0)
            core = core.data_copy(dst=core.gm_window("y", (b * ROWS, 0), (ROWS, COLS)), src=ub[0])
        return core

    ctx = Context(hw=hw, allocs=tuple(plan.allocs), gm=gm, policy=Policy(), n_cores=cores, checks="off")
    _, rep = launch(kernel, ctx, {"x": x}, name="reads", l2_resident=resident)
    return rep


def _mte2_ends(rep):
    return [int(v) for v in np.asarray(rep.pipe_free)[:, 0, 1]]  # MTE2 is pipe 0; wide low limb


@pytest.fixture
def x(rng):
    return rng.standard_normal((8 * ROWS, COLS)).astype(np.float16)


WIN = ROWS * COLS * 2


def test_read_by_two_cores_pays_hbm_once_then_l2(x):
    hw = _hw()
    h = HwNumbers.of(hw)
    rep = _run(hw, x, lambda b: 0 * b, cores=2)
    assert rep.bytes["HBM->L2"] == WIN  # the first core brought it in; the second found it there
    assert rep.bytes["GM->UB"] == 2 * WIN
    assert rep.l2_hit_bytes == WIN and rep.as_dict()["l2_hit_bytes"] == WIN
    miss, hit = _mte2_ends(rep)
    assert miss == h.mte2_su + ceil_rate(WIN, 32.0)
    assert hit == h.mte2_su + ceil_rate(WIN, 128.0)


def test_reread_by_one_core_hits_and_disjoint_reads_all_miss(x):
    hw = _hw()
    rep = _run(hw, x, lambda b: b * ROWS, cores=4, reads=2)
    assert rep.bytes["HBM->L2"] == 4 * WIN  # each window once from HBM
    assert rep.bytes["GM->UB"] == 8 * WIN
    half = _run(hw, x, lambda b: b * (ROWS // 2), cores=4)
    # each window overlaps the one of the core before by half: 1 + 3 x 1/2 windows from HBM
    assert half.bytes["HBM->L2"] == WIN + 3 * (WIN // 2)


def test_read_in_the_next_kernel_of_a_sequence_hits(x):
    hw = _hw()
    first = _run(hw, x, lambda b: b * ROWS, cores=2)
    specs = (GmSpec("x", x.shape, x.shape, "fp16"),)
    resident = l2.kept(hw, specs)
    assert resident == ("x",)
    second = _run(hw, x, lambda b: b * ROWS, cores=2, resident=resident)
    assert first.bytes["HBM->L2"] == 2 * WIN and second.bytes["HBM->L2"] == 0
    assert max(_mte2_ends(second)) < max(_mte2_ends(first))


def test_working_set_larger_than_l2_pays_misses(x):
    small = _hw(l2_bytes=x.nbytes // 2)  # x (128 KiB) does not fit: it streams
    rep = _run(small, x, lambda b: 0 * b, cores=2, reads=2)
    assert rep.bytes["HBM->L2"] == 4 * WIN  # every read from HBM
    fits = _run(_hw(), x, lambda b: 0 * b, cores=2, reads=2)
    assert fits.bytes["HBM->L2"] == WIN


def test_writes_stay_in_l2_when_it_keeps_the_output_and_stream_out_when_not(x):
    keeps = _run(_hw(num_cores=8), x, lambda b: b * ROWS, cores=8, out=True)
    assert keeps.bytes["UB->GM"] == 8 * WIN and "y" in keeps.l2_kept
    assert keeps.bytes["L2->HBM"] == 0 and keeps.hbm_bytes == 8 * WIN  # the reads only
    # an L2 that holds x but not x and the output (ties: the earlier tensor first): the writes stream out
    tight = _run(_hw(num_cores=8, l2_bytes=x.nbytes), x, lambda b: b * ROWS, cores=8, out=True)
    assert "y" not in tight.l2_kept
    assert tight.bytes["L2->HBM"] == 8 * WIN and tight.hbm_bytes == 16 * WIN


def test_chip_hbm_binds_when_all_cores_stream(x):
    # 8 ports of 32 B/cycle, a chip of 64; an L2 too small to keep the output, so every write goes to HBM
    hw = _hw(num_cores=8, chip_gm_bytes_per_cycle=64.0, l2_bytes=x.nbytes)
    rep = _run(hw, x, lambda b: b * ROWS, cores=8, out=True)
    assert rep.hbm_bytes == 8 * WIN + 8 * WIN  # every read missed; every write goes to HBM
    assert rep.hbm_cycles == ceil_rate(16 * WIN, 64.0)
    assert rep.hbm_cycles > rep.core_end
    assert rep.cycles == hw.launch_cycles + rep.hbm_cycles
    assert rep.bottleneck == "HBM"
    free = _run(_hw(num_cores=8), x, lambda b: b * ROWS, cores=8, out=True)
    assert free.cycles == hw.launch_cycles + free.core_end and free.bottleneck != "HBM"


def test_launch_costs_its_startup_and_two_kernels_two(x):
    hw = _hw()
    rep = _run(hw, x, lambda b: 0 * b, cores=1)
    assert hw.launch_cycles == 1000  # 1 us at 1 GHz
    assert rep.cycles == rep.core_end + hw.launch_cycles
    assert rep.cycles == int(kernel_cycles(HwNumbers.of(hw), rep.core_end, rep.hbm_bytes))
    seq = SequenceReport((("a", rep), ("b", rep)), "twice")
    assert seq.cycles == 2 * rep.cycles


def test_l2_record_is_shared_along_cores_only_under_an_outer_vmap(x):
    """An outer vmap (over data) keeps its lanes apart; the cores inside share one L2."""
    hw = _hw()
    plan = Plan(hw)
    ub = plan.alloc("UB", "t", (ROWS, COLS), "fp16")
    ctx = Context(
        hw=hw,
        allocs=tuple(plan.allocs),
        gm=(GmSpec("x", x.shape, x.shape, "fp16"),),
        policy=Policy(),
        n_cores=2,
        checks="off",
    )

    def kernel(core, b):
        return core.data_copy(dst=ub[0], src=core.gm_window("x", (0, 0), (ROWS, COLS)))

    def one(xx):
        return launch(kernel, ctx, {"x": xx}, name="r")[1].counters

    counters = jax.jit(jax.vmap(one))(np.stack([x, x, x]))
    hbm = np.asarray(counters)[..., 1].sum(axis=1)  # per lane, summed over cores (low limb)
    assert list(hbm[:, COUNTER_INDEX["HBM->L2"]]) == [WIN] * 3


@pytest.mark.slow
def test_910b_vector_work_runs_on_its_aiv_cores_through_l2(rng):
    """910B4: unfused, the ReLU is a kernel of its own on the 40 AIV cores (their UB), reading the
    conv's output back through L2 (the AIC cores wrote it there); fused, the ReLU stays in the AIC's
    Fixpipe: one kernel, no vector work, no round trip."""
    hw = presets.ascend910b()
    x = rng.standard_normal((1, 32, 40, 40)).astype(np.float16)
    w = rng.standard_normal((64, 32, 3, 3)).astype(np.float16)
    _, seq = conv_relu(x, w, padding=1, fused=False, hw=hw, policy=Policy(), timing_only=True)
    (_, conv), (_, relu) = seq.parts
    inter = 1 * 64 * 40 * 40 * 2  # the conv's fp16 output
    assert conv.n_cores <= hw.num_cores < relu.n_cores == hw.num_vector_cores == 40
    assert conv.pipe_busy["VECTOR"] == 0 < relu.pipe_busy["VECTOR"]
    # its reads hit; its output (as small as the conv's) is kept by L2, so its writes stay there too
    assert relu.l2_hit_bytes == inter and relu.bytes["UB->GM"] == inter and relu.hbm_bytes == 0
    _, fused = conv_relu(x, w, padding=1, fused=True, hw=hw, policy=Policy(), timing_only=True)
    assert len(fused.parts) == 1 and fused.pipe_busy["VECTOR"] == 0 < fused.pipe_busy["FIXP"]
    assert fused.reports[0].hbm_bytes == conv.hbm_bytes and fused.cycles < seq.cycles

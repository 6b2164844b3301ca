"""The L2's recency policy (``HardwareConfig.l2_policy="recency"``): a re-read hits while fewer than the
L2's capacity in bytes entered it since the element was last read (reads that missed, writes).

Small kernels on the instruction set read and write GM windows of 16 KiB; the counters say what HBM
moved. Where every tensor fits the two policies are the same kernel; where they do not, recency keeps
what was used recently and the whole-tensor rule streams the tensor it cannot keep whole.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_prediction_is_report

import npu_jax
from npu_jax.api.pool import pool_plan
from npu_jax.core import l2
from npu_jax.core.buffers import Plan
from npu_jax.core.policy import Policy
from npu_jax.core.run import launch
from npu_jax.core.state import Context, GmSpec
from npu_jax.cost import pool as pool_cost
from npu_jax.cost import relayout as relayout_cost
from npu_jax.cost.conv import UNPRICED, predict
from npu_jax.hw.config import Assumed, HardwareConfig
from npu_jax.kernels.launch import run_plan
from npu_jax.mapping.conv import STRATEGIES, ConvTiling, make_plan
from npu_jax.search import exact
from npu_jax.workload.conv import ConvGeometry

ROWS, COLS = 64, 128
WIN = ROWS * COLS * 2  # one fp16 window: 16 KiB


def _hw(policy="recency", **kw):
    base = dict(
        num_cores=4,
        gm_bytes_per_cycle=32.0,
        l2_bytes=3 * WIN,
        l2_read_bytes_per_cycle=128.0,
        assumed=Assumed(gm_burst_overhead=0, launch_us=1.0),
        l2_policy=policy,
    )
    return HardwareConfig(**{**base, **kw})


def _run(hw, x, program, *, cores=1, writes=0):
    """Each core b reads x's row windows in ``program``'s order (a window index, or a function of b;
    -1: write the tile ``writes`` times to y's row blocks instead). Returns the Report."""
    plan = Plan(hw)
    ub = plan.alloc("UB", "t", (ROWS, COLS), "fp16")
    gm = (GmSpec("x", x.shape, x.shape, "fp16"),)
    if writes:
        shape = (cores * writes * ROWS, COLS)
        gm += (GmSpec("y", shape, shape, "fp16", output=True),)

    def kernel(core, b):
        for step in program:
            if step == -1:
                for w in range(writes):
                    core = core.set_flag("MTE2_MTE3", 0).wait_flag("MTE2_MTE3", 0)
                    row = (b * writes + w) * ROWS
                    core = core.data_copy(dst=core.gm_window("y", (row, 0), (ROWS, COLS)), src=ub[0])
                    core = core.set_flag("MTE3_MTE2", 0).wait_flag("MTE3_MTE2", 0)
                continue
            w = step(b) if callable(step) else step
            core = core.data_copy(dst=ub[0], src=core.gm_window("x", (w * ROWS, 0), (ROWS, COLS)))
            core = core.pipe_barrier("ALL")
        return core

    ctx = Context(hw=hw, allocs=tuple(plan.allocs), gm=gm, policy=Policy(), n_cores=cores, checks="off")
    return launch(kernel, ctx, {"x": x}, name="reads")[1]


@pytest.fixture
def x(rng):
    return rng.standard_normal((8 * ROWS, COLS)).astype(np.float16)  # 8 windows: over the L2's 3


def _fetched(rep) -> int:
    return rep.bytes["HBM->L2"] // WIN


@pytest.mark.parametrize(
    "program, fetched",
    [
        ([0, 1, 0], 2),  # 1 window entered between the two reads of 0: it hits
        ([0, 1, 2, 0], 3),  # 2 windows (32 KiB) entered: under the L2's 48 KiB, a hit
        ([0, 1, 2, 3, 0], 5),  # 3 windows entered: the L2's capacity, not fewer: a miss
        ([0, 0, 1, 2, 3, 0, 0], 5),  # the re-read that missed brings it back: the next one hits
    ],
)
def test_a_reread_hits_while_fewer_bytes_than_the_l2_entered_since(x, program, fetched):
    rep = _run(_hw(), x, program)
    assert _fetched(rep) == fetched
    assert rep.bytes["GM->UB"] == len(program) * WIN
    # the whole-tensor rule cannot keep x (8 windows) whole: every read comes from HBM
    assert _fetched(_run(_hw("smallest_first"), x, program)) == len(program)


@pytest.mark.parametrize("l2_windows, fetched", [(3, 1), (2, 2)])
def test_writes_enter_the_l2_and_age_what_was_read(x, l2_windows, fetched):
    # read window 0, write two windows of y, read 0 again: 32 KiB entered, a hit in 48 KiB, not in 32 KiB
    rep = _run(_hw(l2_bytes=l2_windows * WIN), x, [0, -1, 0], writes=2)
    assert _fetched(rep) == fetched and rep.bytes["UB->GM"] == 2 * WIN


def test_cores_in_lock_step_share_the_l2_and_its_clock(x):
    # four cores read window 0 in the same instruction: one fetch; then each its own window and 0 again:
    # between core 0's two reads of 0 the four cores brought in 4 windows, over the capacity: core 0's
    # re-read misses, and the cores after it in the same instruction find it there
    assert _fetched(_run(_hw(), x, [0], cores=4)) == 1
    own = [0, lambda b: 4 + b, 0]
    assert _fetched(_run(_hw(), x, own, cores=4)) == 1 + 4 + 1
    assert _fetched(_run(_hw("smallest_first"), x, own, cores=4)) == 12


def test_where_every_tensor_fits_the_two_policies_are_one_kernel(x):
    roomy = dict(l2_bytes=x.nbytes + 8 * WIN)
    program = [0, 1, 2, 0, -1, 3, 1, 0]
    recent = _run(_hw(**roomy), x, program, cores=4, writes=2)
    whole = _run(_hw("smallest_first", **roomy), x, program, cores=4, writes=2)
    assert recent.bytes == whole.bytes and recent.cycles == whole.cycles
    assert recent.pipe_busy == whole.pipe_busy


def test_a_conv_too_big_for_the_l2_finds_its_recent_input_there(rng):
    # x (72 KiB) over a 64-KiB L2: the whole-tensor rule streams it (its halo rows and its second Cout
    # block's re-reads come from HBM again); recency finds them there. The same outputs either way
    hw = npu_jax.presets.tiny().replace(l2_policy="recency", l2_bytes=64 * 1024)
    x = rng.standard_normal((1, 16, 48, 48)).astype(np.float16)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float16)
    t = ConvTiling(ho=4, wo=32, n=16, cin1=1, k_l0=16)
    runs = {
        pol: npu_jax.conv2d(x, w, padding=1, hw=hw.replace(l2_policy=pol), tiling=t, strategy="img2col")
        for pol in ("recency", "smallest_first")
    }
    (y_r, recent), (y_s, whole) = runs["recency"], runs["smallest_first"]
    np.testing.assert_array_equal(np.asarray(y_r), np.asarray(y_s))
    assert "x" not in whole.l2_kept and recent.bytes["GM->L1"] == whole.bytes["GM->L1"]
    assert recent.bytes["HBM->L2"] < 0.75 * whole.bytes["HBM->L2"]
    assert recent.bytes["HBM->L2"] + recent.l2_hit_bytes == whole.bytes["HBM->L2"] + whole.l2_hit_bytes


def test_a_kernel_on_a_sequence_finds_what_the_kernel_before_kept(x):
    # residency across kernels still follows whole tensors: x (128 KiB) kept by a 256-KiB L2
    hw = _hw(l2_bytes=16 * WIN)
    gm = (GmSpec("x", x.shape, x.shape, "fp16"),)
    assert l2.modes(hw, gm, ("x",)) == (("x", l2.RESIDENT),)
    assert l2.modes(hw, gm) == (("x", l2.RECENT),)
    bypass = (dataclasses.replace(gm[0], l2_bypass=True),)
    assert l2.modes(hw, bypass) == (("x", l2.STREAM),)
    assert l2.modes(hw.replace(l2_bytes=0), gm) == (("x", l2.STREAM),)


@pytest.mark.parametrize(
    "strategy", [pytest.param(s, marks=pytest.mark.slow) if s != "img2col" else s for s in STRATEGIES]
)
def test_the_conv_closed_form_prices_recency_exactly_where_no_reread_can_age_out(strategy):
    # x (144 KiB) and w (18 KiB) over a 128-KiB L2: the whole-tensor rule keeps w and streams x, recency
    # tracks both. Where the closed form's bound says no re-read can age out it is the emulator's figure;
    # on a 32-KiB L2 it cannot say so and refuses, naming the fix (the emulator still runs it)
    g = ConvGeometry(1, 32, 48, 48, 32, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1))
    t = ConvTiling(ho=2, wo=48, n=16, cin1=2, k_l0=16 if strategy != "img2col" else 32)
    hw = npu_jax.presets.tiny().replace(l2_bytes=128 * 1024, l2_policy="recency")
    x, w = jnp.zeros((1, 32, 48, 48), jnp.float16), jnp.zeros((32, 32, 3, 3), jnp.float16)
    p = make_plan(g, strategy, t, hw)
    pred, (_, rep) = predict(p), run_plan(p, x, w, Policy(), move_data=False)
    assert (pred.cycles, pred.gm_bytes, pred.hbm_bytes) == (rep.cycles, rep.gm_bytes, rep.hbm_bytes)
    whole = predict(make_plan(g, strategy, t, hw.replace(l2_policy="smallest_first")))
    assert pred.hbm_bytes < whole.hbm_bytes  # the halo rows and the second Cout block's reads hit
    tight = make_plan(g, strategy, t, hw.replace(l2_bytes=32 * 1024))
    with pytest.raises(ValueError, match=r"l2_policy='recency'.*smallest_first"):
        predict(tight)
    assert run_plan(tight, x, w, Policy(), move_data=False)[1].cycles > 0


def test_the_closed_forms_price_recency_where_they_can_and_the_vector_kernels_everywhere():
    hw = npu_jax.presets.tiny().replace(l2_policy="recency")
    g = ConvGeometry(1, 16, 8, 8, 16, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1))
    t = ConvTiling(ho=4, wo=4, n=16, cin1=1, k_l0=16)
    # every tensor fits: the two policies price one kernel
    whole = npu_jax.presets.tiny()
    assert predict(make_plan(g, "img2col", t, hw)) == predict(make_plan(g, "img2col", t, whole))
    assert relayout_cost.predict(g, hw) == relayout_cost.predict(g, whole)
    # a max pool whose halo rows are re-read after more than the L2 entered: the vector kernels' cost is
    # their own program on the timing Board, with the emulator's per-element record, so it is exact here too
    small = hw.replace(l2_bytes=16 * 1024)
    x = np.zeros((1, 64, 56, 56), np.float16)
    _, rep = npu_jax.pool2d(x, "max", 3, stride=2, padding=1, hw=small, timing_only=True, checks="none")
    assert_prediction_is_report(
        pool_cost.predict(pool_plan(x.shape, "max", 3, 2, 1, hw=small)), rep, "aged out"
    )
    assert pool_cost.predict(pool_plan((1, 64, 56, 56), "max", 3, 2, 1, hw=npu_jax.presets.tiny())).cycles > 0


def test_the_traced_cost_prices_recency_where_its_looser_bound_holds():
    # the tile search's traced model keeps no history of its items: its bound (span x the most an item
    # brings in, plus every weight miss) is looser than the chooser's windows. Where it holds, the traced
    # figure is predict's; where it does not, UNPRICED (int32's largest), never a figure predict lacks
    g = ConvGeometry(1, 32, 48, 48, 32, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1))
    tilings = [
        ConvTiling(ho=ho, wo=48, n=n, cin1=c, k_l0=16 * c) for ho in (1, 2) for n in (16, 32) for c in (1, 2)
    ]
    hw = npu_jax.presets.tiny().replace(l2_policy="recency")
    assert exact.hw_of(hw).recency == 1 and exact.hw_of(npu_jax.presets.tiny()).recency == 0
    seen = set()
    for l2_bytes in (32 * 1024, 128 * 1024, 1 << 20):
        h = hw.replace(l2_bytes=l2_bytes)  # the search's path: one program, the hardware as data
        batch = exact.batch_cycles(
            exact.layer_of(g), exact.tilings_from(tilings), exact.hw_of(h), h.num_cores, h.coupled
        )
        for t, traced in zip(tilings, np.asarray(batch).tolist()):
            plan = make_plan(g, "img2col", t, h)
            try:
                exact_cycles = predict(plan).cycles
            except ValueError as e:
                assert "l2_policy='recency'" in str(e)
                exact_cycles = None
            if traced == UNPRICED:
                seen.add("unpriced")
                continue
            assert traced == exact_cycles, (t, l2_bytes)
            seen.add("priced" if l2_bytes < 1 << 20 else "roomy")
    assert seen == {"unpriced", "priced", "roomy"}
    assert (
        int(npu_jax.cost.cycles(g, tilings[0], hw)) == predict(make_plan(g, "img2col", tilings[0], hw)).cycles
    )


@pytest.mark.slow
def test_the_tile_search_runs_on_the_910b1_and_its_emulator_agrees():
    hw = npu_jax.presets.ascend910b1()
    assert hw.l2_policy == "recency"
    r = npu_jax.search.tile_search((1, 64, 14, 14), (64, 64, 3, 3), 1, 1, hw=hw, finalists=1)
    assert r.emulated_cycles == r.model_cycles < UNPRICED
    # on an L2 too small for any tiling's bound, the search refuses by name
    with pytest.raises(ValueError, match=r"l2_policy='recency'.*smallest_first"):
        npu_jax.search.tile_search((1, 64, 28, 28), (64, 64, 3, 3), 1, 1, hw=hw.replace(l2_bytes=16 * 1024))


def test_a_pool_too_big_for_the_l2_is_priced_under_recency_as_it_runs(rng):
    # x (98 KiB) over a 64-KiB L2: the whole-tensor rule streams it, so each tile's halo row comes from
    # HBM again; under recency it hits, and the closed form (its bound holds) is the emulator's report
    hw = npu_jax.presets.tiny().replace(l2_bytes=64 * 1024, l2_policy="recency")
    x = rng.standard_normal((1, 16, 56, 56)).astype(np.float16)
    _, rep = npu_jax.pool2d(x, "max", 3, 2, 1, hw=hw)
    assert_prediction_is_report(pool_cost.predict(pool_plan(x.shape, "max", 3, 2, 1, hw=hw)), rep)
    whole = pool_cost.predict(pool_plan(x.shape, "max", 3, 2, 1, hw=hw.replace(l2_policy="smallest_first")))
    assert rep.hbm_bytes < whole.hbm_bytes


def test_the_policy_is_checked():
    with pytest.raises(ValueError, match=r"l2_policy must be one of .*'lru'"):
        HardwareConfig(l2_policy="lru")

"""UB bank conflicts (``costs.ub_read_conflict``): a vector op whose two sources sit in the same bank
groups takes two cycles a beat. The rule, the emulator against hand counts, the closed forms
(element-wise residual add, pooling's reciprocal) against the emulator, and the vendor's add ladder,
whose vector pipe the rule (with the calibrated start-up) reproduces."""

from __future__ import annotations

import os
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_prediction_is_report

import npu_jax
from npu_jax import asc
from npu_jax.api.eltwise import run_eltwise
from npu_jax.api.pool import pool_plan, run_pool
from npu_jax.core.formats import nchw_to_nc1hwc0
from npu_jax.core.policy import Policy
from npu_jax.cost import eltwise
from npu_jax.cost.pool import predict as pool_predict
from npu_jax.hw import costs
from npu_jax.mapping.eltwise import make_eltwise_plan
from npu_jax.mapping.epilogue import canonical_steps

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, os.path.join(ROOT, "examples", "asc"))

import vendor_kernels  # noqa: E402

B1 = npu_jax.presets.ascend910b1()
TINY_BANKS = npu_jax.presets.tiny().replace(ub_bank_groups=16)


def test_the_rule_sets_two_sources_apart_by_half_the_groups():
    h = costs.HwNumbers.of(B1)  # 16 groups of 32-B rows; a beat reads 8 rows (256 B) of each source
    apart = [d for d in range(0, 1024, 32) if not costs.ub_read_conflict(h, 4096, 4096 + d)]
    assert apart == [256, 768]  # 8 rows apart (mod 16 groups): the vendor's case-6 layout
    assert costs.ub_read_conflict(h, 0, 32768)  # case 5: x and y 32 KB apart, the same groups
    assert not costs.ub_read_conflict(h, 0, 16256 * 2)  # case 6: y moved 256 B
    # the traced form decides alike; a chip whose banks are not published never conflicts
    ha = costs.HwNumbers.arrays(B1)
    assert bool(costs.ub_read_conflict(ha, jnp.int32(0), jnp.int32(32768)))
    assert not bool(costs.ub_read_conflict(ha, jnp.int32(0), jnp.int32(256)))
    assert not costs.ub_read_conflict(costs.HwNumbers.of(npu_jax.presets.ascend310p()), 0, 0)
    # a conflicting beat costs a second cycle: 128 beats -> 256, the start-up once
    assert costs.vector(h, 32768, True) - costs.vector(h, 32768) == 128


def test_the_bank_groups_are_refused_on_a_coupled_chip_and_read_from_an_ini(tmp_path):
    with pytest.raises(ValueError, match="ub_bank_groups.*coupled"):
        npu_jax.presets.tiny(coupled=True).replace(ub_bank_groups=16)
    with pytest.raises(ValueError, match="ub_bank_groups must be None or a positive int"):
        npu_jax.presets.tiny().replace(ub_bank_groups=0)
    ini = tmp_path / "chip.ini"
    ini.write_text("[AICoreSpec]\nub_bank_group_num=8\n")
    assert npu_jax.HardwareConfig.from_ini(str(ini)).ub_bank_groups == 8


@asc.kernel(core="vector")
def _two_adds(x, z, gap_bytes: int):
    """z = x + 2 x, by two Adds of x's 4096 halves from two UB copies ``gap_bytes`` apart (a fixed layout)."""
    xg, zg = asc.GlobalTensor(asc.half), asc.GlobalTensor(asc.half)
    xg.set_global_buffer(x, 4096)
    zg.set_global_buffer(z, 4096)
    a = asc.local_tensor(asc.TPosition.VECCALC, asc.half, 0, 4096)
    b = asc.local_tensor(asc.TPosition.VECCALC, asc.half, gap_bytes, 4096)
    asc.data_copy(a, xg, 4096)
    asc.data_copy(b, xg, 4096)
    asc.set_flag(asc.HardEvent.MTE2_V, 0)
    asc.wait_flag(asc.HardEvent.MTE2_V, 0)
    asc.add(a, a, b, 4096)
    asc.add(a, a, b, 4096)
    asc.set_flag(asc.HardEvent.V_MTE3, 0)
    asc.wait_flag(asc.HardEvent.V_MTE3, 0)
    asc.data_copy(zg, a, 4096)


@pytest.mark.parametrize("hw", [B1, npu_jax.presets.ascend910b()], ids=["910b1", "910b4"])
def test_the_emulator_pays_one_cycle_a_beat_for_a_colliding_layout(rng, hw):
    x = rng.uniform(-1, 1, 4096).astype(np.float16)
    z = np.zeros_like(x)
    (_, out), clean = _two_adds[1](x, z, 8192 + 256, hw=hw)  # 8 rows apart: clean beats
    (_, out2), clash = _two_adds[1](x, z, 8192, hw=hw)  # 8 KB apart: the same groups
    beats = 2 * 4096 * 2 // hw.vector_repeat_bytes  # two Adds of 32 beats
    assert clash.pipe_busy["VECTOR"] - clean.pipe_busy["VECTOR"] == beats
    assert clash.cycles > clean.cycles
    # a chip whose banks are not modelled: the layouts cost alike
    plain = hw.replace(ub_bank_groups=None)
    assert _two_adds[1](x, z, 8192, hw=plain)[1].pipe_busy == _two_adds[1](x, z, 8448, hw=plain)[1].pipe_busy
    want = (x.astype(np.float32) + x).astype(np.float16).astype(np.float32) + x  # (x + x) + x, fp16 each
    np.testing.assert_array_equal(out, want.astype(np.float16))
    np.testing.assert_array_equal(out2, out)  # the layout changes the time, never the numbers


def test_the_residual_add_of_the_elementwise_kernel_collides_alike_in_model_and_emulator():
    steps = canonical_steps(("residual", "relu"))
    p = make_eltwise_plan(steps, 96, 64, "fp32", "fp16", "fp32", TINY_BANKS)
    _, a = p.allocate()
    h = costs.HwNumbers.of(TINY_BANKS)
    clash = [bool(costs.ub_read_conflict(h, a["in"].address(s), a["res"].address(s))) for s in (0, 1)]
    assert not p.has_work_tile and any(clash), clash  # this layout collides on a stage at least
    y = np.ones((p.rows_cap, p.cols), np.float32)
    _, rep = run_eltwise(p, y, Policy(), move_data=False, residual=y)
    assert_prediction_is_report(eltwise.predict(p), rep, "residual + relu, banks modelled")
    plain = make_eltwise_plan(steps, 96, 64, "fp32", "fp16", "fp32", npu_jax.presets.tiny())
    assert eltwise.predict(p).pipe_busy["VECTOR"] > eltwise.predict(plain).pipe_busy["VECTOR"]


def test_the_reciprocal_multiply_of_average_pooling_collides_alike_in_model_and_emulator():
    shape, policy = (2, 20, 9, 11), Policy(output="fp32")
    p = pool_plan(shape, "avg", 3, 1, 1, hw=TINY_BANKS, policy=policy)
    assert p.has_rcp
    x5 = nchw_to_nc1hwc0(jnp.ones(shape, jnp.float32), p.c0)
    _, rep = run_pool(p, x5, policy, move_data=False, checks="none")
    pr = pool_predict(p)
    assert (pr.cycles, pr.pipe_busy) == (rep.cycles, rep.pipe_busy)


def test_the_add_ladders_vector_pipe_at_the_published_size():
    # case 6 (conflict-free) is the calibration of the 910B1's vector start-up; case 2 (x and y in the same
    # bank groups, 4 x as many Adds) validates the conflict rule and the start-up together
    for case, tol in ((6, 0.01), (2, 0.01)):
        row = vendor_kernels.emulate("add_high_performance", case, B1)
        published = vendor_kernels.PUBLISHED["add_high_performance", case]["aiv_vec"]
        assert abs(row["aiv_vec"] / published - 1) <= tol, (case, row["aiv_vec"], published)

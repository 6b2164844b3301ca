"""Strategies on ResNet-like stacks, on the emulator: each scenario shows the strategy it needs.

Stacks are 4 layers of 3x3 convs (C=16, 8x8) on the tiny preset, drawn fresh per run (the seed
comes from ``rng``); the kernels are shared with test_precision_layer.py (compiled once).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import npu_jax
from precision import assert_within_budget, run_experiments
from precision.budgets import stack_budget
from precision.strategies import StackSpec, run_strategy, vector_pass_cycles

DEPTHS = (2, 4)


@pytest.fixture(scope="module")
def results():
    seed = int(np.random.default_rng().integers(1 << 31))
    print(f"stack seed {seed}")
    return run_experiments(DEPTHS, channels=16, size=8, seed=seed)


def test_fp32_baseline_is_exact_to_fp32(results):
    for sc in ("well_scaled", "growing", "tiny"):
        c = results.cell(sc, "fp32")
        assert all(m.rel_l2 < 1e-5 and m.finite for m in c.metrics), sc


# Budgets on fresh random stacks are the error analysis' (precision.budgets.stack_budget): for the
# fp16-storage strategies the first-order bound (3D + 1) u_fp16 = 6.3e-3 at depth 4, ~5x the typical
# draw (sqrt((3D + 1) / 3) u_fp16 ~ 1e-3); the 0.1% claim sits on the typical draw (normalisation on
# the growing stack once measured 1.003e-3), so a test holding it would fail at random.
def test_well_scaled_every_strategy_within_its_claim(results):
    D = DEPTHS[-1]
    for st in ("fp16", "mixed", "normalisation", "scaling_current", "scaling_delayed"):
        assert_within_budget(
            results.cell("well_scaled", st).metrics[D - 1], stack_budget(st, "well_scaled", D)
        )
    # the fp16 accumulator costs accuracy over the fp32 one, at the same speed
    pure, mixed = results.cell("well_scaled", "fp16"), results.cell("well_scaled", "mixed")
    assert pure.error(D) > 1.5 * mixed.error(D)
    assert pure.cycles == mixed.cycles


def test_overflow_scenario_pure_fp16_fails_and_scaling_fixes_it(results):
    D = DEPTHS[-1]
    for st in ("fp16", "mixed"):
        c = results.cell("growing", st)
        assert c.first_bad_layer() is not None, f"{st} should overflow fp16 in the growing stack"
        with pytest.raises(AssertionError, match="n_overflow|n_nan|rel_l2"):
            assert_within_budget(c.metrics[D - 1], stack_budget(st, "growing", D))
    for st in ("scaling_current", "scaling_delayed", "normalisation"):
        c = results.cell("growing", st)
        assert c.first_bad_layer() is None, st
        assert_within_budget(c.metrics[D - 1], stack_budget(st, "growing", D))


def test_underflow_scenario_needs_scaling(results):
    D = DEPTHS[-1]
    assert results.cell("tiny", "mixed").error(D) > 1e-2  # activations ~1e-6 live in fp16 subnormals
    for st in ("scaling_current", "scaling_delayed", "normalisation"):
        assert_within_budget(results.cell("tiny", st).metrics[D - 1], stack_budget(st, "tiny", D))


def test_speed_against_fp32(results):
    D = DEPTHS[-1]
    mixed = results.cell("well_scaled", "mixed")
    # fp16 operands: 2x the Cube's rate, half the bytes -- but each of these tiny layers is a kernel
    # with a 2 us launch (2,000 cycles on the tiny preset), which both formats pay alike
    assert 1.0 < mixed.speedup(D) < 3.0
    cur = results.cell("well_scaled", "scaling_current")
    assert cur.speedup(D) < mixed.speedup(D)  # the fp32 round trip and the amax pass cost time


def test_table_json_and_plot(results, tmp_path):
    t = results.table()
    for st in ("fp32", "fp16", "mixed", "normalisation", "scaling_current", "scaling_delayed", "int8"):
        assert st in t
    assert "inf/NaN from layer" in t and "vs fp32" in t
    rows = json.loads(results.to_json())["rows"]
    assert len(rows) == 21 and {"rel_l2@4", "speed_vs_fp32", "within_claim"} <= set(rows[0])
    p = results.plot(str(tmp_path / "p.png"))
    assert (tmp_path / "p.png").stat().st_size > 1000 and p.endswith("p.png")
    # whole-number layer ticks; every line (curves, budgets, first overflows) named in the legend
    import matplotlib.pyplot as plt

    fig = results.plot()
    for ax in fig.axes:
        lo, hi = ax.get_xlim()
        ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks
        names = [line.get_label() for line in ax.get_lines()]
        assert not [n for n in names if n.startswith("_")], names
        assert {t.get_text() for t in ax.get_legend().get_texts()} == set(names)
        assert any(n.startswith("budget 0.001") for n in names)
    plt.close(fig)
    assert "overflow" in results.reading()


def test_delayed_scaling_learns_from_history():
    """Iteration 0 has no history (scale 1: overflows like mixed); later ones are scaled."""
    spec = StackSpec(depth=4, channels=16, height=8, width=8, gain=2 ** (14 / 3), seed=3)
    first = run_strategy("scaling_delayed", spec, iterations=1)
    later = run_strategy("scaling_delayed", spec, iterations=3)
    assert any(not np.all(np.isfinite(o)) for o in first.outputs)
    assert all(np.all(np.isfinite(o)) for o in later.outputs) and later.scales[-1] != 1.0


def test_vector_pass_cycles_scale_with_bytes():
    hw = npu_jax.presets.tiny()
    a = vector_pass_cycles(1 << 14, "fp32", "fp16", 2, hw)
    b = vector_pass_cycles(1 << 16, "fp32", "fp16", 2, hw)
    c = vector_pass_cycles(1 << 16, "fp16", None, 1, hw)
    assert 0 < a < b and c < b
    with pytest.raises(ValueError, match="strategy"):
        run_strategy("bf16", StackSpec())


def test_int8_calibrated_scales_fix_range_not_resolution(results):
    """int8 with calibrated per-tensor scales: finite in every scenario and about equally accurate in
    each (the scales absorb the range, as the scaling strategies do), but coarser than fp16 storage."""
    D = DEPTHS[-1]
    errs = {}
    for sc in ("well_scaled", "growing", "tiny"):
        c = results.cell(sc, "int8")
        assert c.first_bad_layer() is None, sc
        errs[sc] = c.error(D)
    assert max(errs.values()) < 2 * min(errs.values()), errs
    assert errs["well_scaled"] > 5 * results.cell("well_scaled", "mixed").error(D)
    assert errs["well_scaled"] < 0.2, errs  # 8 bits per layer, not noise

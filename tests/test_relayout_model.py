"""The NCHW -> NC1HWC0 relayout kernel's closed form (``npu_jax.cost.relayout``) against the emulator.

Layers are drawn fresh (``rng``) on every preset, in both operand formats, from one band per plane to
many (a tall image on a small UB), with channels past a whole C0 block and fewer cores' worth of
items than cores; each runs the relayout kernel timing-only (one small compile) and the prediction
must equal its report in every figure the Report gives.
"""

from __future__ import annotations

import jax.numpy as jnp
import pytest
from conftest import assert_prediction_is_report

import npu_jax
from npu_jax.core.buffers import DTYPES
from npu_jax.core.policy import Policy
from npu_jax.cost import relayout
from npu_jax.kernels.conv import relayout_plan
from npu_jax.kernels.launch import run_relayout
from npu_jax.workload.conv import canonicalize

PRESETS = {
    "tiny": npu_jax.presets.tiny(),
    "tiny-coupled": npu_jax.presets.tiny(coupled=True),
    "910b": npu_jax.presets.ascend910b(),
    "310p": npu_jax.presets.ascend310p(),
}


def _check(g, hw, op):
    rep = run_relayout(g, hw, op, jnp.zeros((g.n, g.c, g.h, g.w), DTYPES[op]), Policy(), move_data=False)[1]
    assert_prediction_is_report(relayout.predict(g, hw, op), rep, f"{g.describe()} {op} on {hw.name}")


@pytest.mark.parametrize("preset", list(PRESETS))
def test_relayout_model_equals_the_emulator_on_random_layers(rng, preset):
    hw = PRESETS[preset]
    op = ["fp16", "fp32"][int(rng.integers(2))]
    big = preset in ("910b", "310p")
    n, c = int(rng.integers(1, 4)), int(rng.integers(1, 48))
    h = int(rng.integers(1, 160 if big else 48))
    w = int(rng.integers(1, 120 if big else 24))
    g = canonicalize((n, c, h, w), (8, c, 1, 1))
    _check(g, hw, op)


def test_relayout_model_on_many_bands_and_a_partial_last_core():
    """A tall, wide plane on the tiny preset's UB: several bands per plane, the last one short, and
    more cores than items on the last pass."""
    hw = PRESETS["tiny"]
    g = canonicalize((1, 40, 64, 40), (8, 40, 1, 1))
    r = relayout_plan(g, hw, "fp16")
    assert r.n_bands > 2 and g.h % r.rows and r.n_items % r.cores
    _check(g, hw, "fp16")

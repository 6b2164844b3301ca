"""The element-wise vector kernel's closed form (``npu_jax.cost.eltwise``) against the emulator.

Chains and tensors are drawn fresh (``rng``) on every preset: bias (its row read by every core),
residual (a second queue), activations, an fp16 input worked in fp32 (a work tile) or fp32 in and
fp16 out, tiles of whole channel rows or channel blocks, inputs the kernel before left in L2 or not.
Each runs the kernel timing-only (one small compile); the prediction must equal its report in every
figure the Report gives. The 910B and 310P draws run in the slow run; the fixed case below and the
tiny cores' draws in the default run.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_prediction_is_report

import npu_jax
from npu_jax.api.eltwise import run_eltwise
from npu_jax.core.policy import Policy
from npu_jax.cost import eltwise
from npu_jax.mapping.eltwise import make_eltwise_plan
from npu_jax.mapping.epilogue import canonical_steps

PRESETS = {
    "tiny": npu_jax.presets.tiny(),
    "tiny-coupled": npu_jax.presets.tiny(coupled=True),
    "910b": npu_jax.presets.ascend910b(),
    "310p": npu_jax.presets.ascend310p(),
}
CHAINS = [("bias", "relu"), ("relu",), ("bias", "residual", "relu"), (("leaky_relu", 0.1),), ("residual",)]


def _check(p, resident=()):
    ins = dict(bias=np.ones(p.cols, np.float32) if p.chain.has("bias") else None)
    if p.chain.has("residual"):
        ins["residual"] = np.ones((p.rows_cap, p.cols), np.float32)
    y = np.ones((p.rows_cap, p.cols), np.float32)
    _, rep = run_eltwise(p, y, Policy(), move_data=False, l2_resident=resident, **ins)
    where = f"{p.steps} over ({p.rows_cap}, {p.cols}) tiles ({p.rows_t}, {p.cols_t}) on {p.hw.name}, L2 {resident}"
    assert_prediction_is_report(eltwise.predict(p, l2_resident=resident), rep, where)


@pytest.mark.parametrize(
    "preset",
    [
        "tiny",
        "tiny-coupled",
        pytest.param("910b", marks=pytest.mark.slow),
        pytest.param("310p", marks=pytest.mark.slow),
    ],
)
def test_eltwise_model_equals_the_emulator_on_random_chains(rng, preset):
    hw = PRESETS[preset]
    big = preset in ("910b", "310p")
    steps = canonical_steps(CHAINS[int(rng.integers(len(CHAINS)))])
    rows = int(rng.integers(1, 4000 if big else 300))
    cols = int(rng.integers(1, 600 if big else 200))
    in_fmt, out_fmt = [("fp16", "fp16"), ("fp32", "fp16"), ("fp16", "fp32")][int(rng.integers(3))]
    p = make_eltwise_plan(steps, rows, cols, in_fmt, out_fmt, "fp32", hw)
    names = ["y"] + (["bias"] if p.chain.has("bias") else []) + (["res"] if p.chain.has("residual") else [])
    resident = tuple(n for n in names if rng.integers(2))
    _check(p, resident)


def test_eltwise_model_on_channel_blocks_and_a_kept_bias_row():
    """Channels too wide for one tile row on the tiny preset's UB (channel blocks, a burst per row),
    and a bias row the L2 keeps: every core after the first hits it."""
    hw = PRESETS["tiny"]
    p = make_eltwise_plan(canonical_steps(("bias", "relu")), 40, 700, "fp16", "fp16", "fp32", hw)
    assert p.n_ct > 1 and p.cores > 1
    _check(p)

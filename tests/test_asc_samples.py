"""The samples for today's networks (examples/asc/): a row softmax, LayerNorm / RMSNorm, single-head
attention, against numpy in float64 on fresh random data, every check on, on the 910B and (where the
chip has the instructions) the 310P; their reports name the bottleneck docs/kernels.md explains."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import npu_jax

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "asc"))
import attention as att  # noqa: E402
import layer_norm as ln  # noqa: E402
import softmax as sm  # noqa: E402

B910 = npu_jax.presets.ascend910b()
P310 = npu_jax.presets.ascend310p()


@pytest.mark.parametrize("dtype, hw, tol", [(np.float32, B910, 1e-6), (np.float16, P310, 1e-3)])
def test_row_softmax(rng, dtype, hw, tol):
    x = rng.uniform(-8, 8, (4 * 16, 128)).astype(dtype)
    (_, y), rep = sm.softmax_rows[4](x, np.zeros_like(x), *x.shape, 8, hw=hw, checks="all")
    np.testing.assert_allclose(y, sm.reference(x), atol=tol)
    assert rep.bottleneck == "VECTOR"  # Exp and Div at 32 elements a cycle, the row reductions at 1/7


@pytest.mark.parametrize(
    "rms, dtype, hw, tol",
    [(False, np.float32, B910, 2e-5), pytest.param(True, np.float16, P310, 4e-3, marks=pytest.mark.slow)],
)  # LayerNorm on the 910B by default; RMSNorm in fp16 on the 310P among the slow studies
def test_layer_norm_and_rms_norm(rng, rms, dtype, hw, tol):
    x = rng.normal(0.3, 2, (4 * 8, 256)).astype(dtype)
    g, b = (rng.uniform(0.5, 1.5, 256).astype(dtype) for _ in range(2))
    (*_, y), rep = ln.norm_rows[4](x, g, b, np.zeros_like(x), *x.shape, 4, rms, hw=hw, checks="all")
    np.testing.assert_allclose(y, ln.reference(x, g, b, rms), atol=tol * 4, rtol=tol)
    assert rep.bottleneck == "VECTOR"


@pytest.mark.slow  # twelve programs compiled: 40 s
def test_attention_on_the_910b(rng):
    seq, bc, d, br = 128, 64, 64, 64  # two blocks of two KV steps each
    q, k, v = (rng.normal(0, 1, (seq, d)).astype(np.float16) for _ in range(3))
    outs, rep = att.attention[seq // br](
        q, k, v, *att.workspaces(seq, d, br, bc), seq, d, br, bc, hw=B910, checks="all"
    )
    np.testing.assert_allclose(outs[3], att.reference(q, k, v), atol=2e-3)
    # every hand-over goes through GM: the copies in (S_j, O_j to UB; K_j, V_j, P_j to L1) bound it
    assert rep.bottleneck == "MTE2"
    assert rep.bytes["L0C->GM"] == (seq // br) * (seq // bc) * (br * bc + br * d) * 4

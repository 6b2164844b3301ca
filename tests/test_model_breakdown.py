"""The network breakdown adds up: cycles by kind and by bottleneck to the estimate's total, each conv's
GM bytes by role to the bytes the closed form reports for it."""

import pytest

import npu_jax
from npu_jax.model import zoo
from npu_jax.model.breakdown import ROLES, breakdown, compulsory_bytes
from npu_jax.model.kernels import Setting


@pytest.mark.slow  # ~9 s: a whole network's estimate
def test_breakdown_adds_up_on_a_coupled_chip():
    hw = npu_jax.presets.ascend310p()
    m = npu_jax.model.load(zoo.build("small_cnn"))
    rep = m.estimate(batch=2, hw=hw)
    bd = breakdown(m, rep, Setting(hw, npu_jax.Policy()))
    assert sum(c for _, c, _ in bd.by_kind.values()) == rep.cycles == sum(bd.by_bottleneck.values())
    assert sum(n for n, _, _ in bd.by_kind.values()) == len(rep.layers)
    convs = [lr for lr in rep.layers if lr.op == "conv"]
    # the conv kernels' bytes (a vector kernel after one, as the depthwise conv's, is not split by role)
    assert sum(bd.roles[r] for r in ROLES) == sum(lr.kernels[0].gm_bytes for lr in convs)
    assert bd.roles["residual"] > 0 and all(lr.kernels[0].label == "conv" for lr in convs)
    # every tensor once is no more than what the kernels move, and at least the weights
    weights = sum(la.weight.size * 2 for la in m.layers if la.weight is not None)
    assert weights < bd.compulsory == compulsory_bytes(m, 2, 2) <= rep.gm_bytes
    assert "compulsory" in bd.table() and "conv GM MB by role" in bd.table()

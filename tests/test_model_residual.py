"""The fused residual add reads the residual as the layer that wrote it stored it (the activation
format, fp16 by default), and widens it in UB when the vector steps run in another format.

A network's residual is another layer's output, already in GM in ``policy.output``; reading it in
the vector format (fp32 by default) moved twice its bytes through the 310P's 17 B/cycle port. The
closed form, the emulator's instructions and the values path all follow the one plan
(``EpiloguePlan.residual_format``, ``widens_residual``), held equal here.
"""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

from npu_jax.core.policy import Policy
from npu_jax.cost.conv import predict
from npu_jax.hw import presets
from npu_jax.kernels import launch
from npu_jax.mapping.conv import make_plan
from npu_jax.mapping.eltwise import make_eltwise_plan
from npu_jax.mapping.epilogue import canonical_steps, split
from npu_jax.search.choose import choose_tiling
from npu_jax.workload.conv import canonicalize

CHAIN = canonical_steps(["bias", "residual", "relu"])


def _plan(hw, policy, x_shape, w_shape, stride=1, pad=0):
    g = canonicalize(x_shape, w_shape, stride, pad, 1, 1)
    epi, rest, mid, _ = split(CHAIN, hw, policy, True)
    assert epi is not None and not rest
    t = choose_tiling(g, "img2col", hw, "fp16", mid, epi)
    return g, make_plan(g, "img2col", t, hw, "fp16", mid, epi=epi)


def test_residual_format_is_the_activation_format():
    hw = presets.ascend310p()
    epi, _, _, _ = split(CHAIN, hw, Policy(), True)
    assert epi.residual_format == "fp16" and epi.widens_residual
    roles = [role for _, role in epi.vector_ops()]
    assert roles.index("widen_residual") == roles.index("residual") - 1
    # vector steps in fp16: the residual is added as it is read
    epi16, _, _, _ = split(CHAIN, hw, Policy(vector="fp16"), True)
    assert epi16.residual_format == "fp16" and not epi16.widens_residual
    assert "widen_residual" not in [role for _, role in epi16.vector_ops()]
    # an fp32 network's residual is fp32
    epi32, _, _, _ = split(CHAIN, hw, Policy(output="fp32"), True)
    assert epi32.residual_format == "fp32" and not epi32.widens_residual
    # the vector kernel after a Cube kernel keeps its residual in the vector format
    ep = make_eltwise_plan(CHAIN, 64, 32, "fp16", "fp16", "fp32", hw)
    assert ep.chain.residual_format == "fp32" and not ep.chain.widens_residual


@pytest.mark.parametrize("shape", [((4, 64, 14, 14), (256, 64, 1, 1)), ((2, 20, 9, 11), (24, 20, 1, 1))])
def test_residual_bytes_are_half_the_vector_formats(shape):
    """GM -> UB carries the residual at 2 B an element (and the bias); the same plan reading an fp32
    residual moves exactly twice the residual's bytes, and is no faster."""
    hw = presets.ascend310p()
    g, p = _plan(hw, Policy(), *shape)
    q = predict(p)
    p32 = dataclasses.replace(p, epi=dataclasses.replace(p.epi, residual="fp32"))
    q32 = predict(p32)
    res16 = g.n * g.ho * g.wo * g.k * 2
    assert q32.bytes["GM->UB"] - q.bytes["GM->UB"] == res16
    assert q.bytes["GM->L1"] == q32.bytes["GM->L1"] and q.bytes["UB->GM"] == q32.bytes["UB->GM"]
    assert q.cycles <= q32.cycles


@pytest.mark.slow
@pytest.mark.parametrize("vector", ["fp32", "fp16"])
def test_widened_residual_model_emulator_and_values_agree(vector, rng):
    """The closed form equals the emulator's report; the values path equals the instructions bit for
    bit (the residual given in fp32 is rounded to fp16 in GM in both)."""
    hw = presets.ascend310p()
    pol = Policy(vector=vector)
    g, p = _plan(hw, pol, (2, 20, 9, 11), (24, 20, 3, 3), 1, 1)
    x = rng.standard_normal((2, 20, 9, 11)).astype(np.float16)
    w = (rng.standard_normal((24, 20, 3, 3)) * 0.3).astype(np.float16)
    bias = rng.standard_normal(24)
    res = jnp.asarray(rng.standard_normal((2, g.ho, g.wo, 24)).astype(np.float32))
    ys = {}
    for path in ("values", "instructions"):
        y, rep = launch.run_plan(p, x, w, pol, bias=bias, residual=res, data_path=path)
        ys[path] = np.asarray(y)
        q = predict(p)
        assert (q.cycles, q.gm_bytes) == (rep.cycles, rep.gm_bytes)
    assert np.array_equal(ys["values"].view(np.uint16), ys["instructions"].view(np.uint16))
    # the residual as fp16: the reference adds its rounded values
    ref_res = np.asarray(res).astype(np.float16).astype(np.float32)
    assert np.isfinite(ys["values"]).all() and not np.array_equal(ref_res, np.asarray(res))

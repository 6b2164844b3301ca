"""Hypothesis: hundreds of Conv2D layers through one compiled program per strategy.

Each strategy gets one static bound and one ``jax.jit``'d ``conv2d_bounded`` (compiled on the first
example); hypothesis draws layers inside the bound (batch, channels, spatial size, Cout, kernel,
stride, dilation and padding per side), the inputs go into the leading corner of the bound's arrays,
and the output's leading corner is checked against the float64 reference within the fp32-accumulation
bound (conftest_conv) while every other element must be exactly +0. The bound's arrays are
zero-padded around the layer, as conv2d_bounded expects; a separate test fills that space with NaN
instead (the GM model promises data outside a tensor's extent is never moved).

4 strategies x 60 examples (+ a 2-core img2col run) per default run; the example counts are printed.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest_conv import check_bounded_output, new_seed, random_layer, run_bounded
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from npu_jax import Policy, presets
from npu_jax.mapping.conv import ConvTiling
from npu_jax.workload.conv import ConvGeometry, canonicalize

TINY = presets.tiny()
FP16 = Policy()
BOUND = ConvGeometry(
    n=2, c=20, h=12, w=12, k=24, kh=3, kw=3, stride=(2, 2), dilation=(2, 2), pads=(2, 2, 2, 2)
)
TILINGS = {
    "output_tiled": ConvTiling(ho=2, wo=4, n=16, cin1=1, k_l0=16, cores=1),
    "input_tiled": ConvTiling(ho=3, wo=5, n=16, cin1=2, k_l0=16, weights_resident=True, cores=1),
    "relayout": ConvTiling(ho=4, wo=4, n=16, cin1=1, k_l0=16, cores=1),
    "img2col": ConvTiling(ho=2, wo=8, n=16, cin1=2, k_l0=48, l1_stages=2, l0_stages=2, cores=1),
}
EXAMPLES = 60


@st.composite
def layers(draw, b: ConvGeometry):
    """A layer inside bound ``b``: x shape, w shape, stride, ((t, b), (l, r)) padding, dilation."""
    n, c = draw(st.integers(1, b.n)), draw(st.integers(1, b.c))
    h, w = draw(st.integers(1, b.h)), draw(st.integers(1, b.w))
    k = draw(st.integers(1, b.k))
    kh, kw = draw(st.integers(1, b.kh)), draw(st.integers(1, b.kw))
    stride = (draw(st.integers(1, b.stride[0])), draw(st.integers(1, b.stride[1])))
    dilation = (draw(st.integers(1, b.dilation[0])), draw(st.integers(1, b.dilation[1])))
    pads = tuple(draw(st.integers(0, p)) for p in b.pads)
    return (n, c, h, w), (k, c, kh, kw), stride, ((pads[0], pads[1]), (pads[2], pads[3])), dilation


def run_property(strategy: str, tiling: ConvTiling, hw, max_examples: int, capsys) -> int:
    ran = []

    @settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=False,
        suppress_health_check=[HealthCheck.filter_too_much],
    )
    @given(layer=layers(BOUND), seed=st.integers(0, 2**63 - 1))
    def prop(layer, seed):
        x_shape, w_shape, stride, padding, dilation = layer
        try:
            g = canonicalize(x_shape, w_shape, stride, padding, dilation)
        except ValueError:
            assume(False)  # kernel wider than the padded input
        x, w = random_layer(np.random.default_rng(seed), x_shape, w_shape)
        yb, rep = run_bounded(BOUND, strategy, tiling, hw, FP16, x, w, g)
        what = f"{strategy} on {hw.name} cores={tiling.cores} seed={seed}"
        check_bounded_output(yb, x, w, g, BOUND, "fp16", "fp16", what)
        assert int(rep.unwritten) == 0, f"{what}: {int(rep.unwritten)} outputs never written"
        assert int(rep.overlapping_writes) == 0, what
        assert rep.flops_issued >= g.flops, what
        ran.append(g)

    prop()
    with capsys.disabled():
        print(
            f"\n[hypothesis] conv2d_bounded[{strategy}, {hw.name}, cores={tiling.cores}]: "
            f"{len(ran)} examples run"
        )
    return len(ran)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", list(TILINGS))
def test_bounded_layers_match_reference(strategy, capsys):
    n = run_property(strategy, TILINGS[strategy], TINY, EXAMPLES, capsys)
    assert n >= EXAMPLES


@pytest.mark.slow
def test_bounded_layers_two_cores_img2col(capsys):
    t = ConvTiling(ho=2, wo=4, n=16, cin1=1, k_l0=32, l1_stages=2, l0_stages=2, cores=2)
    n = run_property("img2col", t, TINY, 25, capsys)
    assert n >= 25


@pytest.mark.slow
@pytest.mark.parametrize("strategy", list(TILINGS))
def test_bounded_never_reads_outside_the_layer(strategy):
    """NaN (not zeros) around the layer in the bound's x and w: init_core documents data outside a
    GM tensor's extent as absent (never moved), so the output must be unchanged. C = 5 leaves
    channels 5..15 of the first C0 block outside the layer."""
    seed = new_seed()
    x_shape, w_shape = (1, 5, 7, 6), (7, 5, 2, 3)
    x, w = random_layer(np.random.default_rng(seed), x_shape, w_shape)
    g = canonicalize(x_shape, w_shape, 1, 1, 1)
    yb, rep = run_bounded(BOUND, strategy, TILINGS[strategy], TINY, FP16, x, w, g, fill=float("nan"))
    check_bounded_output(yb, x, w, g, BOUND, "fp16", "fp16", f"{strategy}, NaN around the layer, seed={seed}")
    assert int(rep.unwritten) == 0

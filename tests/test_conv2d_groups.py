"""Grouped and depthwise Conv2D (``groups=``): numbers against ``lax.conv_general_dilated(...,
feature_group_count=groups)``, the closed-form model against the emulator, the ONNX backend's
grouped-conv cases, the errors, and a MobileNetV2 depthwise layer timing-only.

A grouped layer runs as super-groups of packed groups (block-diagonal weights, ``docs/conv2d.md``)
in one launch. Every data run is also held to the model (``cost.conv.predict``: the same cycles and
GM bytes), so the grid checks the numbers and the model with one compile per case. The reference is
lax at HIGHEST precision on the fp16-rounded inputs in fp32; both it and the emulator accumulate in
fp32, so each is within gamma(K) * sum|x||w| of the exact sum (K the terms of one output, zeros of
the padded channels and the off-diagonal blocks included: adding them is exact): the tolerance is
twice that.
"""

from __future__ import annotations

import os

import jax.numpy as jnp
import numpy as np
import pytest
from conftest_conv import gamma
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax import lax

import npu_jax
from npu_jax import Policy, presets
from npu_jax.cost.conv import cycles as cost_cycles
from npu_jax.cost.conv import predict
from npu_jax.errors import InputError, InputTypeError, TilingError
from npu_jax.mapping.conv import ConvTiling, make_plan
from npu_jax.mapping.epilogue import canonical_steps, split
from npu_jax.search import exact
from npu_jax.search.choose import choose_tiling
from npu_jax.workload.conv import ConvGeometry, canonicalize

TINY = presets.tiny()
OUT32 = Policy(output="fp32")  # fp16 operands, the fp32 accumulator's values out


def lax_ref(x, w, g: ConvGeometry, dtype=jnp.float32):
    pt, pb, pl, pr = g.pads
    return np.asarray(
        lax.conv_general_dilated(
            jnp.asarray(x, dtype),
            jnp.asarray(w, dtype),
            g.stride,
            ((pt, pb), (pl, pr)),
            rhs_dilation=g.dilation,
            feature_group_count=g.groups,
            precision=lax.Precision.HIGHEST,
        ),
        np.float64,
    )


def assert_close(y, x, w, g: ConvGeometry, k_terms: int, u: float, what: str):
    """|y - lax| <= 2 gamma(K) sum|x||w| (+ the output format's rounding ``u`` |ref|)."""
    ref = lax_ref(x, w, g)
    s = lax_ref(np.abs(x), np.abs(w), g)
    y = np.asarray(y, np.float64)
    assert y.shape == ref.shape, (what, y.shape, ref.shape)
    bound = 2.01 * gamma(k_terms) * s + u * np.abs(ref) + 1e-30
    err = np.abs(y - ref)
    bad = err > bound
    assert not bad.any(), (
        f"{what}: {int(bad.sum())}/{bad.size} outside the bound; worst err/bound "
        f"{float(np.max(err / bound)):.2f}; {g.describe()}"
    )


def run_case(rng, xs, ws, groups, strategy, tiling, stride=1, padding=1, dilation=1):
    """conv2d with data (fp16 operands, fp32 out) against lax, and its report against the model."""
    x = rng.standard_normal(xs).astype(np.float16).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float16).astype(np.float32)
    g = canonicalize(xs, ws, stride, padding, dilation, groups)
    if tiling is None:
        tiling = choose_tiling(g, strategy, TINY, "fp16", "fp32")
    y, rep = npu_jax.conv2d(
        x,
        w,
        stride,
        padding,
        dilation,
        strategy=strategy,
        hw=TINY,
        tiling=tiling,
        policy=OUT32,
        groups=groups,
    )
    p = make_plan(g, strategy, tiling, TINY, "fp16", "fp32")
    what = f"{strategy} {g.describe()} {tiling} (pack {p.pack}, {p.sgroups} super-groups)"
    assert_close(y, x, w, g, p.k_total, 0.0, what)
    pred = predict(p)
    assert (pred.cycles, pred.gm_bytes) == (int(rep.cycles), int(rep.gm_bytes)), (what, pred, rep.cycles)
    assert int(rep.flops) == g.flops == 2 * g.n * g.ho * g.wo * g.k * (g.c // groups) * g.kh * g.kw
    return p, rep


def T(**kw) -> ConvTiling:
    return ConvTiling(**{**dict(ho=2, wo=4, n=16, cin1=1, k_l0=16, cores=2), **kw})


def case(xs, ws, groups, strategy, tiling, s=1, pad=1, d=1, slow=False):
    """One grid case; ``slow`` ones (each a compile of 10-25 s) run only without ``-m 'not slow'``."""
    return pytest.param(
        (xs, ws, groups, strategy, tiling, s, pad, d),
        id=f"{strategy}-C{xs[1]}-K{ws[0]}-g{groups}-s{s}-d{d}",
        marks=[pytest.mark.slow] if slow else [],
    )


# depthwise (C 8 and 32, stride 1 and 2, a multiplier of 2), grouped (g = 2, 4, 32 with C / g = 32,
# 16, 8, 4), odd sizes, batch 2, dilation 2; every strategy, several super-groups where the packing
# leaves more than one (C 32 depthwise: 2 of 16 channels; C/g 16: pack 2 for K/g = 8, ...)
GRID = [
    case((2, 32, 9, 7), (32, 1, 3, 3), 32, "img2col", T(k_l0=32, l1_stages=2, l0_stages=2)),
    case((1, 8, 11, 10), (16, 1, 3, 3), 8, "img2col", T(ho=3, wo=4), s=2, d=2),
    case((1, 64, 7, 9), (32, 16, 3, 3), 4, "img2col", T(ho=3, wo=9, k_l0=48, cores=None)),
    case((1, 32, 9, 7), (32, 1, 3, 3), 32, "output_tiled", T(), s=2, slow=True),
    case((2, 64, 6, 5), (64, 32, 3, 3), 2, "input_tiled", T(ho=3, wo=5, l1_stages=2, l0_stages=2), slow=True),
    case((1, 128, 5, 6), (256, 4, 3, 3), 32, "img2col", T(ho=5, wo=6, k_l0=64, cout_split=2), slow=True),
    case((2, 32, 7, 7), (32, 8, 3, 3), 4, "relayout", T(ho=4, wo=7, cores=None), slow=True),
]


@pytest.mark.slow
@pytest.mark.parametrize("case", GRID)
def test_grouped_matches_lax_and_model(case, rng):
    xs, ws, groups, strategy, tiling, s, pad, d = case
    run_case(rng, xs, ws, groups, strategy, tiling, s, pad, d)


@pytest.mark.slow
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.fixed_dictionaries(
        dict(
            n=st.integers(1, 2),
            groups=st.sampled_from([2, 3, 4, 8]),
            cg=st.sampled_from([1, 2, 5, 16]),
            mult=st.integers(1, 2),
            h=st.integers(3, 9),
            w=st.integers(3, 9),
            kh=st.sampled_from([1, 3]),
            stride=st.integers(1, 2),
            strategy=st.sampled_from(["img2col", "relayout", "input_tiled", "output_tiled"]),
        )
    )
)
def test_grouped_hypothesis(data, rng):
    """Small grouped layers drawn at random (few: each is a compile), the chooser's tiling."""
    g, cg = data["groups"], data["cg"]
    xs = (data["n"], g * cg, data["h"], data["w"])
    ws = (g * cg * data["mult"], cg, data["kh"], data["kh"])
    run_case(rng, xs, ws, g, data["strategy"], None, data["stride"], data["kh"] // 2)


def test_packing_follows_the_vendor_rule():
    """Groups packed per super-group: enough to fill C0 input channels and 16 output channels, at
    most ``groups`` and a divisor of it (the vendor's mag_factor, whole super-groups)."""
    c0, n0 = TINY.c0(2), 16

    def pack(c, k, groups):
        return canonicalize((1, c, 8, 8), (k, c // groups, 3, 3), groups=groups).packing(c0, n0)

    assert pack(144, 144, 144) == 16  # MobileNetV2 depthwise: 9 super-groups of 16 channels
    assert pack(8, 8, 8) == 8  # fewer groups than a block: one super-group
    assert pack(32, 64, 32) == 16  # multiplier 2: Kg = 2 -> 8 groups fill 16 outputs; Cg = 1 wants 16
    assert pack(256, 256, 32) == 2  # ResNeXt-style C/g = 8: 2 groups fill C0 = 16 inputs, 16 outputs
    assert pack(64, 64, 2) == 1  # C/g = 32: whole blocks already
    assert pack(48, 48, 2) == 2  # C/g = 24: lcm(24, 16) / 24 = 2 groups make 3 whole blocks
    assert pack(24, 24, 24) == 12  # 16 wanted; whole super-groups: the largest divisor of 24 below
    g = canonicalize((2, 144, 8, 8), (144, 1, 3, 3), padding=1, groups=144)
    v = g.dense_view(c0, n0)
    assert (v.n, v.c, v.k, v.groups) == (2 * 9, 16, 16, 1) and g.flops == 2 * 2 * 64 * 144 * 9


@pytest.mark.slow
def test_search_schedule_equals_predict_grouped(rng):
    """The search's jax schedule (``exact``) on a grouped layer's Layer (dense view + super-groups)
    gives ``predict``'s cycles (so does ``cost.cycles``), and ``legal`` refuses resident weights with several super-groups."""
    hw = presets.ascend910b()
    g = canonicalize((1, 96, 14, 14), (96, 1, 3, 3), 1, 1, groups=96)
    ts = [
        ConvTiling(ho=7, wo=14, n=16, cin1=1, k_l0=32, l1_stages=2, l0_stages=2),
        ConvTiling(ho=14, wo=14, n=16, cin1=1, k_l0=16, l1_stages=1, l0_stages=1),
        ConvTiling(ho=2, wo=14, n=16, cin1=1, k_l0=48, l1_stages=2, l0_stages=2),
    ]
    L = exact.layer_of(g)
    assert int(L.sg) == 6 and int(L.n) == 6
    got = exact.batch_cycles(L, exact.tilings_from(ts), exact.hw_of(hw), hw.num_cores, hw.coupled)
    for t, c in zip(ts, np.asarray(got)):
        assert int(c) == predict(make_plan(g, "img2col", t, hw)).cycles, t
    assert int(cost_cycles(g, ts[0], hw)) == int(got[0])  # the public traced form (cost.cycles)
    res = exact.tilings_from([ConvTiling(ho=7, wo=14, n=16, cin1=1, k_l0=16, weights_resident=True)])
    assert not bool(exact.legal(L, res, exact.hw_of(hw), hw.num_cores, hw.coupled)[0])
    with pytest.raises(TilingError, match="weights_resident"):
        make_plan(g, "img2col", ConvTiling(ho=7, wo=14, n=16, cin1=1, k_l0=16, weights_resident=True), hw)


@pytest.mark.slow
def test_mobilenet_depthwise_timing_only():
    """MobileNetV2's 56x56x144 depthwise 3x3 on the 910B, one launch, timing-only: useful FLOPs are
    the real ones, so % of peak is low (the Cube multiplies 16x16 blocks of which 1/16 hold real
    weights) but positive. The dense conv of the same size (the model's cycles at the chooser's
    tiling) does far more useful work per cycle, and takes longer."""
    hw = presets.ascend910b()
    x = np.zeros((1, 144, 56, 56), np.float16)
    w = np.zeros((144, 1, 3, 3), np.float16)
    # timing-only, sanitizers off: a 20-core program compiles in a fraction of the time without them
    _, dw = npu_jax.conv2d(
        x, w, padding=1, groups=144, hw=hw, timing_only=True, policy=Policy(), checks="none"
    )
    dense = canonicalize(x.shape, (144, 144, 3, 3), 1, 1)
    # the chooser's pick for the dense layer, fixed here (choosing it takes a minute of numpy)
    td = ConvTiling(
        ho=2, wo=56, n=32, cin1=9, k_l0=128, weights_resident=True, l1_stages=2, l0_stages=2, cout_split=5
    )
    dense_cycles = predict(make_plan(dense, "img2col", td, hw)).cycles
    print(f"\ndepthwise: {int(dw.cycles)} cycles, {dw.pct_peak:.2f}% of peak; dense: {dense_cycles} cycles")
    assert int(dw.flops) == 2 * 56 * 56 * 144 * 9
    assert 0 < dw.pct_peak < 100
    assert int(dw.flops) / int(dw.cycles) < dense.flops / dense_cycles
    assert int(dw.cycles) < dense_cycles


BAD = [
    (dict(groups=0), InputError, "groups must be a positive int"),
    (dict(groups=-2), InputError, "groups must be a positive int"),
    (dict(groups=True), InputTypeError, "groups must be a positive int"),
    (dict(groups="2"), InputTypeError, "groups must be a positive int"),
    (dict(groups=3), InputError, r"groups=3 must divide the input channels C=16"),
    (dict(groups=2, wshape=(16, 16, 3, 3)), InputError, r"w.shape\[1\] must be C / groups = 8, got 16"),
    (dict(groups=16, wshape=(24, 1, 3, 3)), InputError, r"groups=16 must divide .* K=24"),
]


@pytest.mark.parametrize("kw, exc, msg", BAD, ids=[str(b[0]) for b in BAD])
def test_bad_groups(kw, exc, msg):
    kw = dict(kw)
    wshape = kw.pop("wshape", (16, 8, 3, 3))
    with pytest.raises(exc, match=msg):
        npu_jax.conv2d(np.zeros((1, 16, 8, 8)), np.zeros(wshape), padding=1, hw=TINY, policy=Policy(), **kw)


def test_grouped_refusals():
    """What grouped convs do not support is refused with the fix: the bounded entry point, and a
    fused epilogue with several super-groups."""
    g = canonicalize((1, 32, 8, 8), (32, 1, 3, 3), 1, 1, groups=32)
    x, w = np.zeros((1, 32, 8, 8)), np.zeros((32, 1, 3, 3))
    with pytest.raises(InputError, match="conv2d_bounded runs dense layers"):
        npu_jax.conv2d_bounded(x, w, g, bound=g, strategy="img2col", tiling=T(), hw=TINY, policy=Policy())
    epi, _, mid, _ = split(canonical_steps(["relu"]), TINY, Policy(), True)
    with pytest.raises(InputError, match="super-groups"):
        make_plan(g, "img2col", T(), TINY, "fp16", mid, epi=epi)


# ---- the ONNX backend's Conv cases (pytorch-converted: grouped, depthwise, and plain) -------------
SLOW = pytest.mark.slow  # each case is a compile (10-20 s); the grouped ones that differ most run always
ONNX_CASES = [
    pytest.param("test_Conv2d_depthwise", marks=SLOW),
    "test_Conv2d_depthwise_padded",
    pytest.param("test_Conv2d_depthwise_strided", marks=SLOW),
    "test_Conv2d_depthwise_with_multiplier",
    "test_Conv2d_groups",
    pytest.param("test_Conv2d_dilated", marks=SLOW),  # a plain (groups=1) Conv: the importer's other path
]


@pytest.mark.slow
@pytest.mark.parametrize("name", ONNX_CASES)
def test_onnx_backend_conv(name):
    """The ONNX backend's Conv2d node data (model.onnx, input_0.pb, output_0.pb) through conv2d at
    fp32 (operands and output): the bias is added on the host (conv2d has none). Tolerance: both
    sides accumulate fp32 sums of K = C/g kh kw terms (+ the bias): 2 gamma(K + 1) sum(|x||w| + |b|)
    plus the expected output's own rounding."""
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper

    d = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "pytorch-converted", name)
    if not os.path.isdir(d):
        pytest.skip(f"onnx {onnx.__version__} has no {name} data")
    m = onnx.load(os.path.join(d, "model.onnx"))
    (node,) = m.graph.node
    at = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    init = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}

    def pb(f):
        t = onnx.TensorProto()
        with open(os.path.join(d, "test_data_set_0", f), "rb") as fh:
            t.ParseFromString(fh.read())
        return numpy_helper.to_array(t)

    x, want = pb("input_0.pb"), pb("output_0.pb")
    w, b = init[node.input[1]], init[node.input[2]] if len(node.input) > 2 else None
    pt, pl, pb_, pr = at.get("pads", [0, 0, 0, 0])
    groups = at.get("group", 1)
    y, _ = npu_jax.conv2d(
        x,
        w,
        stride=tuple(at.get("strides", [1, 1])),
        padding=((pt, pb_), (pl, pr)),
        dilation=tuple(at.get("dilations", [1, 1])),
        groups=groups,
        hw=TINY,
        policy=Policy(operand="fp32", output="fp32"),
    )
    y = np.asarray(y, np.float64)
    g = canonicalize(
        x.shape,
        w.shape,
        tuple(at.get("strides", [1, 1])),
        ((pt, pb_), (pl, pr)),
        tuple(at.get("dilations", [1, 1])),
        groups,
    )
    s = lax_ref(np.abs(x), np.abs(w), g)
    if b is not None:
        y = y + b.astype(np.float64)[None, :, None, None]
        s = s + np.abs(b)[None, :, None, None]
    k = (g.c // groups) * g.kh * g.kw + 1
    bound = 2.01 * gamma(k) * s + 2.0**-24 * np.abs(want) + 1e-30
    err = np.abs(y - want)
    assert y.shape == want.shape and np.all(err <= bound), (name, float(np.max(err / bound)))

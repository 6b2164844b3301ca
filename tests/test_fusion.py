"""Conv2D + epilogue, fused and unfused, against float64 references, each other and the cost model.

Each configuration (chip x chain x policy) compiles one bounded program per version (fused,
unfused); a fixed grid of edge layers and then hypothesis-drawn layers run through both. For every
layer: each version is within the error bound of the float64 chain on the operand-rounded inputs,
both versions write every output exactly once and nothing outside the layer, the two are
bit-identical wherever their rounding points are the same (``bits_equal``), and the closed-form
cost model gives the fused kernel's cycles and GM bytes exactly.
"""

from __future__ import annotations

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest_conv import U_OUT, assert_bits_equal, conv_ref, gamma, new_seed, pad_into, rounded
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import fusion
from npu_jax import Policy, presets
from npu_jax.cost.conv import predict
from npu_jax.errors import CapacityError, InputError
from npu_jax.mapping.conv import ConvTiling, make_plan
from npu_jax.mapping.epilogue import Step, canonical_steps, fixpipe_prefix, split
from npu_jax.search.choose import candidate_tilings, choose_tiling
from npu_jax.workload.conv import ConvGeometry, canonicalize

TINY, TINY_C = presets.tiny(), presets.tiny(coupled=True)
BOUND = ConvGeometry(
    n=2, c=20, h=10, w=10, k=40, kh=3, kw=3, stride=(2, 2), dilation=(2, 2), pads=(1, 1, 1, 1)
)
TILING = ConvTiling(ho=3, wo=5, n=16, cin1=1, k_l0=32, l1_stages=2, l0_stages=2, cores=2, cout_split=2)
TINY_NUM = {"fp16": 2.0**-24, "bf16": 2.0**-133, "fp32": 2.0**-149}


@functools.cache
def _config(name):
    """(hw, steps, policy, bits_equal): where bits_equal, fused and unfused round at the same points."""
    return {
        # 910B-like: Fixpipe adds the bias in fp32, the residual add (no UB on the Cube core) and the
        # leaky ReLU run as a vector kernel either way -- rounding points differ from the unfused
        "separated-partial": (TINY, ("bias", "residual", ("leaky_relu", 0.1)), Policy(), False),
        # clipped ReLU commutes with the output rounding: Fixpipe and the vector kernel agree bitwise
        "separated-bf16-clip": (
            TINY,
            (("clipped_relu", 2.0),),
            Policy(operand="bf16", output="bf16", vector="bf16"),
            True,
        ),
        # coupled: L0C -> UB (fp16) then the same vector steps as the unfused kernel's
        "coupled-residual": (TINY_C, ("bias", "residual", "relu"), Policy(vector="fp16"), True),
        # fp32 vector work and an fp32 result: fused keeps fp32 end to end, unfused stores fp16 between
        "coupled-fp32-cast": (
            TINY_C,
            (("clipped_relu", 1.5), ("cast", "fp32")),
            Policy(vector="fp32"),
            False,
        ),
    }[name]


CONFIGS = ["separated-partial", "separated-bf16-clip", "coupled-residual", "coupled-fp32-cast"]


def _ho_wo_max():
    B = BOUND
    return B.h + B.pads[0] + B.pads[1], B.w + B.pads[2] + B.pads[3]


@functools.cache
def _runner(name: str, fused: bool):
    hw, steps, policy, _ = _config(name)

    @jax.jit
    def run(x, w, g, b, r):
        names = {s.op for s in canonical_steps(steps)}
        return fusion.conv2d_fused_bounded(
            x,
            w,
            g,
            bound=BOUND,
            epilogue=steps,
            bias=b if "bias" in names else None,
            residual=r if "residual" in names else None,
            fused=fused,
            tiling=TILING,
            hw=hw,
            policy=policy,
        )

    return run


def _chain_reference(x, w, b, r, g, steps, policy):
    """(reference, bound): the chain in float64 on the operand-rounded conv, and a bound on |y - ref|:
    the fp32 accumulation bound plus one unit roundoff of the widest rounding in play at every point
    the chain can round (conversions and each add / multiply), all steps being 1-Lipschitz."""
    op = policy.operand
    xr, wr = rounded(x, op), rounded(w, op)
    ref = conv_ref(xr, wr, g)
    s = conv_ref(np.abs(xr), np.abs(wr), g)
    K = g.c * g.kh * g.kw
    fmts = {policy.output, policy.vector}
    for st_ in steps:
        if st_.op == "cast":
            fmts.add(st_.arg)
    u = max(U_OUT[f] for f in fmts)
    tiny = max(TINY_NUM[f] for f in fmts)
    bound = (1 + u) * gamma(K) * s + gamma(K, 2.0**-53) * s + u * np.abs(ref) + tiny
    v = ref
    for st_ in steps:
        if st_.op == "bias":
            v = v + np.asarray(b, np.float64)[None, :, None, None]
        elif st_.op == "residual":
            v = v + np.asarray(r, np.float64)
        elif st_.op == "relu":
            v = np.maximum(v, 0)
        elif st_.op == "leaky_relu":
            v = np.where(v >= 0, v, v * st_.arg)
        elif st_.op == "clipped_relu":
            v = np.minimum(np.maximum(v, 0), st_.arg)
        if st_.op in ("bias", "residual", "leaky_relu"):
            bound = bound + u * np.abs(v) + tiny
    return v, bound + u * np.abs(v) + tiny


def _inputs(rng, x_shape, w_shape, g, policy):
    """Random x, w, bias, residual at the layer's shapes; bias and residual already in the formats the
    kernels hold them in (so the reference and both versions see the same values)."""
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal(w_shape) / np.sqrt(np.prod(w_shape[1:]))).astype(np.float32)
    b = rounded(rng.standard_normal(g.k), policy.vector).astype(np.float32)
    r = rounded(rng.standard_normal((g.n, g.k, g.ho, g.wo)), policy.vector).astype(np.float32)
    return x, w, b, r


def _check_layer(name, x_shape, w_shape, stride, padding, dilation, seed, fill=0.0):
    hw, steps, policy, bits_equal = _config(name)
    steps = canonical_steps(steps)
    g = canonicalize(x_shape, w_shape, stride, padding, dilation)
    rng = np.random.default_rng(seed)
    x, w, b, r = _inputs(rng, x_shape, w_shape, g, policy)
    ho_max, wo_max = _ho_wo_max()
    args = (
        pad_into(x, (BOUND.n, BOUND.c, BOUND.h, BOUND.w), fill),
        pad_into(w, (BOUND.k, BOUND.c, BOUND.kh, BOUND.kw), fill),
        jax.tree.map(jnp.int32, g),
        pad_into(b, (BOUND.k,)),
        pad_into(r, (BOUND.n, BOUND.k, ho_max, wo_max), fill),
    )
    ref, bound = _chain_reference(x, w, b, r, g, steps, policy)
    what = f"{name} {g.describe()} seed={seed}"
    outs = {}
    for fused in (True, False):
        y, rep = _runner(name, fused)(*args)
        y = np.asarray(y)
        corner = y[: g.n, : g.k, : g.ho, : g.wo].astype(np.float64)
        err = np.abs(corner - ref)
        assert np.all(np.isfinite(corner)), f"{what} fused={fused}: non-finite outputs"
        bad = err > bound
        assert not bad.any(), (
            f"{what} fused={fused}: {int(bad.sum())} outputs outside the bound; worst "
            f"err/bound {float((err / bound).max()):.2f}"
        )
        conv = rep.part("conv")
        assert int(conv.unwritten) == 0 and int(conv.overlapping_writes) == 0, what
        if fused:  # the model holds the fused kernel exactly (epilogue instructions included)
            epi, _, mid, _ = split(steps, hw, policy, True)
            pred = predict(make_plan(g, "img2col", TILING, hw, policy.operand, mid, bound=BOUND, epi=epi))
            assert (pred.cycles, pred.gm_bytes) == (conv.cycles, conv.gm_bytes), what
            assert pred.pipe_busy == {k: int(v) for k, v in conv.pipe_busy.items()}, what
        outs[fused] = corner
    if bits_equal:
        assert_bits_equal(outs[True], outs[False], f"{what}: fused vs unfused")
    return g


EDGE_LAYERS = [  # (x shape, w shape, stride, padding, dilation)
    ((2, 20, 10, 10), (40, 20, 3, 3), 1, 1, 1),  # the bound's batch and channels, partial last Cout block
    ((1, 3, 9, 7), (17, 3, 3, 3), 2, ((1, 0), (0, 1)), 1),  # C=3, odd sizes, asymmetric padding, stride 2
    ((2, 5, 10, 9), (9, 5, 2, 3), 1, 0, 2),  # dilation 2, non-square kernel, no padding
    ((1, 16, 1, 1), (33, 16, 1, 1), 1, 0, 1),  # 1x1 output: one position in the tile
]


@pytest.mark.slow
@pytest.mark.parametrize("name", CONFIGS)
def test_edge_layers_fused_and_unfused(name):
    seed = new_seed()
    for x_shape, w_shape, stride, padding, dilation in EDGE_LAYERS:
        _check_layer(name, x_shape, w_shape, stride, padding, dilation, seed)


@st.composite
def _layers(draw):
    b = BOUND
    n, c = draw(st.integers(1, b.n)), draw(st.integers(1, b.c))
    h, w = draw(st.integers(1, b.h)), draw(st.integers(1, b.w))
    k, kh, kw = draw(st.integers(1, b.k)), draw(st.integers(1, b.kh)), draw(st.integers(1, b.kw))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = tuple(draw(st.integers(0, 1)) for _ in range(4))
    return (n, c, h, w), (k, c, kh, kw), stride, ((pads[0], pads[1]), (pads[2], pads[3])), dilation


@pytest.mark.slow
@pytest.mark.parametrize("name", CONFIGS)
def test_hypothesis_layers_fused_and_unfused(name, capsys):
    ran = []

    @settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
    @given(layer=_layers(), seed=st.integers(0, 2**63 - 1))
    def prop(layer, seed):
        try:
            canonicalize(*layer)
        except ValueError:
            assume(False)
        ran.append(_check_layer(name, *layer, seed))

    prop()
    with capsys.disabled():
        print(f"\n[hypothesis] fused/unfused {name}: {len(ran)} layers")
    assert len(ran) >= 12


@pytest.mark.parametrize("name", ["separated-bf16-clip", "coupled-residual"])
def test_padded_lanes_never_leak(name):
    """NaN around the layer in x, w and the residual: the fused chain sees real outputs only, every
    output is written once, and nothing outside the layer is touched (outside stays exactly +0).
    (Both configurations fuse the whole chain; a bounded *unfused* run's vector kernel sweeps the
    bound's whole output tensor, so only its corner is checked, by _check_layer.)"""
    seed = new_seed()
    x_shape, w_shape = (1, 5, 7, 6), (19, 5, 2, 3)
    g = _check_layer(name, x_shape, w_shape, 1, 1, 1, seed, fill=float("nan"))
    hw, steps, policy, _ = _config(name)
    rng = np.random.default_rng(seed)
    x, w, b, r = _inputs(rng, x_shape, w_shape, g, policy)
    ho_max, wo_max = _ho_wo_max()
    y, _ = _runner(name, True)(
        pad_into(x, (2, 20, 10, 10), np.nan),
        pad_into(w, (40, 20, 3, 3), np.nan),
        jax.tree.map(jnp.int32, g),
        pad_into(b, (40,)),
        pad_into(r, (2, 40, ho_max, wo_max), np.nan),
    )
    y = np.array(y)
    y[: g.n, : g.k, : g.ho, : g.wo] = 0
    assert np.count_nonzero(y.view(np.uint16 if y.itemsize == 2 else np.uint32)) == 0


@pytest.mark.slow
@pytest.mark.parametrize("jit", [False, True])
def test_conv_relu_public_api(jit):
    """The contract call, eager and jitted, on both data paths: relu(conv + bias) within bound; the
    unfused report is its two kernels; fusion moves fewer GM bytes. (Eager runs op by op: one call.)"""
    seed = new_seed()
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, 8, 6, 7)).astype(np.float32)
    w = (rng.standard_normal((24, 8, 3, 3)) / 8).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    g = canonicalize(x.shape, w.shape, 1, 1, 1)
    ref, bound = _chain_reference(x, w, b, None, g, canonical_steps(["bias", "relu"]), Policy())
    for hw in (TINY, TINY_C) if jit else (TINY,):
        reps = {}
        for fused in (True, False) if jit else (True,):
            f = functools.partial(fusion.conv_relu, stride=1, padding=1, fused=fused, hw=hw)
            y, rep = (jax.jit(f) if jit else f)(x, w, b)
            y = np.asarray(y, np.float64)
            assert y.shape == (1, 24, 6, 7) and (y >= 0).all()
            assert (np.abs(y - ref) <= bound).all(), f"{hw.name} fused={fused} seed={seed}"
            reps[fused] = rep
        if not jit:
            continue
        assert [lab for lab, _ in reps[True].parts] == ["conv"]
        assert [lab for lab, _ in reps[False].parts] == ["conv", "eltwise"]
        un = reps[False]
        assert un.cycles == sum(r.cycles for r in un.reports)
        assert un.gm_bytes == sum(r.gm_bytes for r in un.reports)
        assert un.pipe_busy["VECTOR"] == sum(r.pipe_busy["VECTOR"] for r in un.reports)
        assert reps[True].gm_bytes < un.gm_bytes


@pytest.mark.slow
def test_analysis_reads_the_reports():
    a = fusion.analyze((1, 16, 10, 10), (32, 16, 3, 3), ["bias", "relu"], padding=1, hw=TINY)
    conv_u = a.unfused.part("conv")
    assert a.intermediate_bytes == 2 * conv_u.bytes["L0C->GM"]
    assert a.gm_bytes_saved == a.unfused.gm_bytes - a.fused.gm_bytes
    assert a.fused_intermediate_bytes == 0 and a.intermediate_saved_pct == 100.0
    assert 0 < a.gm_bytes_saved <= a.intermediate_bytes + 64 * conv_u.n_cores  # + the fp32 vs fp16 bias
    assert a.speedup == pytest.approx(a.unfused.cycles / a.fused.cycles)
    assert a.pipe_delta["MTE3"][1] == 0 and a.pipe_delta["VECTOR"][1] == 0  # no vector kernel left on 910B
    assert "Fixpipe" in a.why and "vector kernel" in a.why
    assert "speed-up" in a.summary()
    row = a.row()
    assert row["cycles_fused"] == a.fused.cycles and json.dumps(row)


@pytest.mark.slow
def test_sequence_report_timeline_and_trace(tmp_path):
    rng = np.random.default_rng(new_seed())
    x, w = rng.standard_normal((1, 8, 6, 6)), rng.standard_normal((16, 8, 3, 3))
    _, rep = fusion.conv_relu(x, w, padding=1, fused=False, hw=TINY, trace=True)
    off = rep.offsets[1]
    assert off == rep.part("conv").cycles
    ev = rep.events(0)
    assert {e["part"] for e in ev} == {"conv", "eltwise"}
    assert min(e["start"] for e in ev if e["part"] == "eltwise") >= off
    assert max(e["end"] for e in ev) <= rep.cycles
    data = json.loads(open(rep.to_chrome_trace(tmp_path / "seq.json")).read())
    assert any(e.get("args", {}).get("part") == "eltwise" for e in data["traceEvents"])
    ax = rep.plot_timeline(tmp_path / "seq.png")
    assert (tmp_path / "seq.png").stat().st_size > 0 and ax is not None


def test_fused_tiling_differs_where_ub_binds():
    """On a coupled chip the fused chain's UB tiles (fp32 vector tile, residual tile, fp16 output tile)
    must fit together; the conv alone keeps one fp16 tile. On the 310P (8 cores), some of conv2_x's
    legal conv-alone tilings no longer fit with the chain: their refusal names the buffer that
    overflows, and the chooser never picks one of them for the fused kernel."""
    hw = presets.ascend310p()
    g = canonicalize((1, 64, 56, 56), (64, 64, 3, 3), 1, 1, 1)
    pol = Policy(vector="fp32")
    steps = canonical_steps(["bias", "residual", "relu"])
    epi, _, mid, _ = split(steps, hw, pol, True)

    def fits_fused(t):
        try:
            make_plan(g, "img2col", t, hw, "fp16", mid, epi=epi)
        except CapacityError as e:
            assert "UB" in str(e), e
            return False
        return True

    alone = candidate_tilings(g, "img2col", hw, "fp16", "fp16")
    tight = [t for t in alone if not fits_fused(t)]
    assert tight and len(tight) < len(alone)  # UB binds for some conv-alone tilings, not all
    with pytest.raises(CapacityError, match="UB"):
        make_plan(g, "img2col", tight[0], hw, "fp16", mid, epi=epi)
    fused = choose_tiling(g, "img2col", hw, "fp16", mid, epi)
    assert fits_fused(fused) and fused not in tight
    # on the separated 910B the Fixpipe needs no UB: ReLU alone leaves the pick unchanged
    hwb = presets.ascend910b()
    epi_b, _, mid_b, _ = split(canonical_steps(["relu"]), hwb, Policy(), True)
    assert choose_tiling(g, "img2col", hwb, "fp16", mid_b, epi_b) == choose_tiling(g, "img2col", hwb)


def test_chain_parsing_and_split():
    assert canonical_steps("relu") == (Step("relu"),)
    assert canonical_steps([("leaky_relu", 0.2), ("cast", "bf16")]) == (
        Step("leaky_relu", 0.2),
        Step("cast", "bf16"),
    )
    assert canonical_steps(None) == ()
    s = canonical_steps(["bias", "relu", ("cast", "fp32")])
    assert fixpipe_prefix(s) == 3
    assert fixpipe_prefix(canonical_steps(["relu", "bias"])) == 1  # bias after the activation: vector
    assert fixpipe_prefix(canonical_steps(["bias", "residual", "relu"])) == 1
    assert fixpipe_prefix(canonical_steps(["residual", "relu"])) == 0
    epi, rest, mid, final = split(canonical_steps(["bias", "residual", "relu"]), TINY, Policy(), True)
    assert epi.where == "fixpipe" and [x.op for x in rest] == ["residual", "relu"] and mid == final == "fp16"
    epi, rest, mid, final = split(canonical_steps(["bias", "residual", "relu"]), TINY_C, Policy(), True)
    assert epi.where == "ub" and rest == ()
    epi, rest, _, final = split(canonical_steps([("cast", "fp32")]), TINY, Policy(), False)
    assert epi is None and final == "fp32"


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"epilogue": ["bias", "relu"]}, "bias=None"),
        ({"epilogue": ["relu"], "bias": np.ones(16)}, "no 'bias' step"),
        ({"epilogue": ["bias"], "bias": np.ones(5)}, r"bias must have shape \(16,\)"),
        ({"epilogue": ["residual"], "residual": np.ones((1, 16, 3, 3))}, "residual must have shape"),
        ({"epilogue": [("cast", "fp16"), "relu"]}, "'cast' must be the last"),
        ({"epilogue": ["relu", "bias", "bias"], "bias": np.ones(16)}, "more than once"),
        ({"epilogue": ["swish"]}, "epilogue step must be one of"),
        ({"epilogue": [("leaky_relu", "big")]}, "leaky_relu slope"),
        ({"epilogue": [("clipped_relu", -1.0)]}, "clipped_relu ceiling"),
        ({"epilogue": [("cast", "int4")]}, "cast needs a format"),
        ({"epilogue": ["relu"], "fused": "yes"}, "fused must be True or False"),
        ({"epilogue": ["relu"], "strategy": "winograd"}, "strategy must be one of"),
    ],
)
def test_bad_requests_are_refused_clearly(bad, match):
    x, w = np.ones((1, 8, 6, 6), np.float32), np.ones((16, 8, 3, 3), np.float32)
    with pytest.raises((ValueError, TypeError), match=match):
        fusion.conv2d_fused(x, w, padding=1, hw=TINY, **bad)


def test_impossible_fused_tiling_names_the_buffer():
    g = canonicalize((1, 16, 16, 16), (64, 16, 3, 3), 1, 1, 1)
    epi, _, mid, _ = split(canonical_steps(["residual", "relu"]), TINY_C, Policy(vector="fp32"), True)
    t = ConvTiling(ho=8, wo=8, n=32, cin1=1, k_l0=16)
    with pytest.raises(CapacityError, match="UB"):
        make_plan(g, "img2col", t, TINY_C, "fp16", mid, epi=epi)


@pytest.mark.slow
def test_modeled_analysis_equals_the_emulated_one(rng):
    """``analyze(model=True)`` (the demo's fusion table: every kernel's closed form, no compile) gives
    the emulated analysis's figures, reading and busy cycles per lane, on a random layer and chain on
    either tiny core (the default run checks the fixed layer of tests/test_fusion_cli.py)."""
    hw = [TINY, TINY_C][int(rng.integers(2))]
    chains = [("bias", "relu"), ("relu",), ("bias", "residual", "relu"), ("bias", ("leaky_relu", 0.2))]
    steps = chains[int(rng.integers(len(chains)))]
    c, k, h = int(rng.integers(1, 40)), int(rng.integers(1, 70)), int(rng.integers(5, 20))
    kh, stride = int(rng.choice([1, 3])), int(rng.integers(1, 3))
    args = dict(stride=stride, padding=kh // 2, hw=hw, name="random layer")
    x_shape, w_shape = (int(rng.integers(1, 3)), c, h, h + 3), (k, c, kh, kh)
    print(steps, x_shape, w_shape, args)
    model = fusion.analyze(x_shape, w_shape, steps, model=True, **args)
    emulated = fusion.analyze(x_shape, w_shape, steps, **args)
    assert model.row() == emulated.row() and model.why == emulated.why
    assert dict(model.pipe_delta) == dict(emulated.pipe_delta)
    assert (
        model.unfused.gm_bytes == emulated.unfused.gm_bytes
        and model.fused.gm_bytes == emulated.fused.gm_bytes
    )
    assert model.fused_tiling == emulated.fused_tiling
    with pytest.raises(InputError, match="trace=False"):
        fusion.analyze(x_shape, w_shape, steps, model=True, trace=True, **args)

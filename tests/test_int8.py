"""The Cube's int8 path: int8 x int8 -> exact int32 sums, the way out (int32, dequantised fp16,
requantised int8), held bit for bit to an integer reference, the model to the emulator, and the rate."""

from __future__ import annotations

import os
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import fusion
import npu_jax
from npu_jax import Policy, asc
from npu_jax.cost.conv import predict
from npu_jax.errors import InputError, InputTypeError
from npu_jax.hw import costs
from npu_jax.kernels.launch import run_plan
from npu_jax.mapping.conv import STRATEGIES, make_plan
from npu_jax.mapping.epilogue import canonical_steps, split
from npu_jax.search.choose import choose_tiling
from npu_jax.workload.conv import canonicalize

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "asc"))
import matmul_int8  # noqa: E402

CHIPS = {"910b": npu_jax.presets.ascend910b, "310p": npu_jax.presets.ascend310p}


def int_conv(x, w, stride, padding, dilation, groups):
    """The integer reference: int64 sums (never wrap at these sizes), NCHW."""
    pads = [(padding, padding)] * 2
    return lax.conv_general_dilated(
        jnp.asarray(x, jnp.int32),
        jnp.asarray(w, jnp.int32),
        (stride, stride),
        pads,
        rhs_dilation=(dilation, dilation),
        feature_group_count=groups,
        preferred_element_type=jnp.int32,
    )


def ints(rng, shape):
    return rng.integers(-128, 128, shape).astype(np.int8)


def numpy_requant(acc, scale, offset, fmt, axis):
    """An independent numpy reading of the formula: fp32 product, round half to even, then the
    zero point, then saturation (int8); nearest-even fp16 otherwise."""
    shape = [1] * acc.ndim
    s = np.asarray(scale, np.float32)
    if s.ndim:
        shape[axis] = s.shape[0]
        s = s.reshape(shape)
    v = acc.astype(np.float32) * s
    if fmt == "fp16":
        return v.astype(np.float16)
    return np.clip(np.rint(v) + offset, -128, 127).astype(np.int8)


LAYERS = [  # (n, c, h, w, k, kh, stride, padding, dilation, groups)
    (1, 20, 9, 9, 24, 3, 1, 1, 1, 1),
    (2, 7, 11, 10, 33, 3, 2, 1, 1, 1),
    (1, 40, 8, 8, 40, 3, 1, 2, 2, 40),  # depthwise, dilated
    (2, 36, 7, 7, 18, 1, 1, 0, 1, 2),  # grouped 1x1
    (1, 3, 15, 15, 17, 5, 2, 2, 1, 1),  # a stem: narrow input
]


# the default run: a dense strided layer on the 310P; the rest (the 910B, depthwise, grouped, stems) slow
FAST = {("310p", 1)}


@pytest.mark.parametrize(
    "chip, layer",
    [
        pytest.param(c, i, marks=() if (c, i) in FAST else pytest.mark.slow)
        for c in sorted(CHIPS)
        for i in range(len(LAYERS))
    ],
)
def test_int8_conv2d_equals_integer_reference(chip, layer):
    n, c, h, w_, k, kh, s, p, d, g = LAYERS[layer]
    rng = np.random.default_rng(100 + layer)
    x, w = ints(rng, (n, c, h, w_)), ints(rng, (k, c // g, kh, kh))
    ref = np.asarray(int_conv(x, w, s, p, d, g))
    hw = CHIPS[chip]()
    strategy = STRATEGIES[layer % len(STRATEGIES)]
    kw = dict(stride=s, padding=p, dilation=d, groups=g, hw=hw, strategy=strategy)
    y, _ = npu_jax.conv2d(x, w, policy=Policy(operand="int8", output="int32"), **kw)
    assert y.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(y), ref)
    # per output channel; a grouped layer of several super-groups shares one super-group's scales
    scale = rng.uniform(2e-5, 4e-4, k).astype(np.float32) if g == 1 else np.float32(rng.uniform(2e-5, 4e-4))
    for out, off in (("int8", int(rng.integers(-20, 20))), ("fp16", 0)):
        y, _ = npu_jax.conv2d(x, w, policy=Policy(operand="int8", output=out), scale=scale, offset=off, **kw)
        np.testing.assert_array_equal(np.asarray(y), numpy_requant(ref, scale, off, out, 1))


@pytest.mark.slow
@pytest.mark.parametrize("chip", ["910b", "310p"])
def test_int8_data_paths_agree(chip):
    """The values computed apart and the data moved through every instruction: the same bits."""
    rng = np.random.default_rng(7)
    x, w = ints(rng, (2, 24, 7, 7)), ints(rng, (20, 24, 3, 3))
    hw, pol = CHIPS[chip](), Policy(operand="int8", output="int8")
    outs = [
        npu_jax.conv2d(x, w, padding=1, hw=hw, policy=pol, scale=1e-3, offset=-3, data_path=dp)
        for dp in ("values", "instructions")
    ]
    np.testing.assert_array_equal(np.asarray(outs[0][0]), np.asarray(outs[1][0]))
    assert outs[0][1].cycles == outs[1][1].cycles


@pytest.mark.parametrize(
    "chip, shape",
    [("310p", (37, 70, 45)), ("910b", (1, 33, 5))]
    + [
        pytest.param(c, sh, marks=pytest.mark.slow)
        for c, sh in (("910b", (37, 70, 45)), ("310p", (64, 256, 96)))
    ],
)
def test_int8_matmul_equals_integer_reference(chip, shape):
    M, K, N = shape
    rng = np.random.default_rng(sum(shape))
    a, b = ints(rng, (M, K)), ints(rng, (K, N))
    ref = a.astype(np.int64) @ b.astype(np.int64)
    hw = CHIPS[chip]()
    c, _ = npu_jax.matmul(a, b, hw=hw, policy=Policy(operand="int8", output="int32"))
    np.testing.assert_array_equal(np.asarray(c), ref)
    c, _ = npu_jax.matmul(a, b, hw=hw, policy=Policy(operand="int8", output="int8"), scale=7e-4, offset=5)
    np.testing.assert_array_equal(np.asarray(c), numpy_requant(ref, 7e-4, 5, "int8", -1))


def test_int8_mmad_rule_is_twice_the_fp16_rate():
    """The rule: a 16 x 32 x 16 int8 block per cycle, half fp16's cycles for the same MACs."""
    h = costs.HwNumbers.of(npu_jax.presets.ascend910b())
    assert costs.mmad(h, 64, 64, 512, 1) - h.mmad_su == (costs.mmad(h, 64, 64, 512, 2) - h.mmad_su) // 2


@pytest.mark.slow
def test_int8_mmad_at_twice_the_fp16_rate():
    """The emulator: a conv whose int8 and fp16 runs issue the same Mmads (7 output tiles x 3 K steps
    of 192) spends half the blocks' cycles."""
    h = costs.HwNumbers.of(npu_jax.presets.ascend910b())
    rng = np.random.default_rng(3)
    x, w = ints(rng, (1, 64, 14, 14)), ints(rng, (64, 64, 3, 3))
    hw = npu_jax.presets.ascend910b()
    run = dict(padding=1, hw=hw, timing_only=True)
    t8 = npu_jax.ConvTiling(ho=2, wo=14, n=64, cin1=2, k_l0=192, l0_stages=1)  # C1 of 32 int8 channels
    _, r8 = npu_jax.conv2d(x, w, tiling=t8, policy=Policy(operand="int8", output="int32"), **run)
    t16 = npu_jax.ConvTiling(ho=2, wo=14, n=64, cin1=4, k_l0=192, l0_stages=1)  # C1 of 16 fp16 channels
    _, r16 = npu_jax.conv2d(x.astype(np.float16), w.astype(np.float16), tiling=t16, policy=Policy(), **run)
    assert r8.flops == r16.flops
    busy8, busy16 = int(r8.pipe_busy["CUBE"]), int(r16.pipe_busy["CUBE"])
    # busy = start-ups + blocks, and int8 has half fp16's blocks: 2 busy8 - busy16 is the start-ups alone
    assert 2 * busy8 - busy16 == 21 * h.mmad_su, (busy8, busy16)


@pytest.mark.parametrize("i", [i if i < 2 else pytest.param(i, marks=pytest.mark.slow) for i in range(8)])
def test_int8_model_equals_emulator(i):
    rng = np.random.default_rng(50 + i)
    hw = [
        npu_jax.presets.tiny(),
        npu_jax.presets.tiny(coupled=True),
        npu_jax.presets.ascend310p(),
        npu_jax.presets.ascend910b(),
    ][i % 4]
    out = ("int32", "fp16", "int8")[i % 3]
    pol = Policy(operand="int8", output=out)
    c, k, h = (int(v) for v in rng.integers((3, 5, 5), (70, 70, 20)))
    g = canonicalize((int(rng.integers(1, 3)), c, h, h), (k, c, 3, 3), int(rng.integers(1, 3)), 1, 1, 1)
    strategy = STRATEGIES[i % 4]
    epi = split((), hw, pol, True, 0)[0]
    p = make_plan(g, strategy, choose_tiling(g, strategy, hw, "int8", out, epi), hw, "int8", out, epi=epi)
    x, w = jnp.zeros((g.n, g.c, g.h, g.w), jnp.int8), jnp.zeros((g.k, g.c, 3, 3), jnp.int8)
    scale = None if out == "int32" else jnp.ones(g.k)
    _, rep = run_plan(p, x, w, pol, scale=scale, move_data=False)
    pred = predict(p)
    assert (pred.cycles, pred.gm_bytes) == (int(rep.cycles), int(rep.gm_bytes)), (hw.name, strategy, out)


def test_requantize_rounds_then_offsets_then_saturates():
    acc = jnp.asarray([[5, 15, 25, -15, 10_000, -10_000, 0]], jnp.int32)
    y = npu_jax.requantize(acc, 0.1, offset=1)  # 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -1.5 -> -2 (ties to even)
    assert np.asarray(y).tolist() == [[1, 3, 3, -1, 127, -128, 1]]
    assert npu_jax.requantize(acc, 2.0, fmt="fp16").dtype == jnp.float16
    with pytest.raises(InputError, match="offset"):
        npu_jax.requantize(acc, 1.0, offset=3, fmt="fp16")
    with pytest.raises(InputError, match="one value per output channel"):
        npu_jax.requantize(acc, np.ones(3), fmt="int8")


def test_grouped_int8_scales_must_repeat_per_super_group():
    rng = np.random.default_rng(1)
    x, w = ints(rng, (1, 40, 6, 6)), ints(rng, (40, 1, 3, 3))
    with pytest.raises(InputError, match="super-groups"):
        npu_jax.conv2d(
            x,
            w,
            groups=40,
            padding=1,
            policy=Policy(operand="int8", output="int8"),
            scale=np.arange(1, 41) * 1e-3,
        )


def test_int8_bad_inputs_are_named():
    rng = np.random.default_rng(0)
    x, w = ints(rng, (1, 16, 6, 6)), ints(rng, (16, 16, 3, 3))
    i8 = Policy(operand="int8", output="int8")
    with pytest.raises(InputTypeError, match="quantise it"):
        npu_jax.conv2d(x.astype(np.float32), w, policy=i8, scale=1.0)
    with pytest.raises(InputError, match=r"\[-128, 127\]"):
        npu_jax.conv2d(x.astype(np.int32) * 4, w, policy=i8, scale=1.0)
    with pytest.raises(InputError, match="needs scale="):
        npu_jax.conv2d(x, w, policy=i8)
    with pytest.raises(InputError, match="per output channel"):
        npu_jax.conv2d(x, w, policy=i8, scale=np.ones(5))
    with pytest.raises(InputError, match="Policy\\(operand='int8'"):
        npu_jax.conv2d(x.astype(np.float16), w.astype(np.float16), policy=Policy(), scale=1.0)
    with pytest.raises(InputError, match="exact sums"):
        npu_jax.conv2d(x, w, policy=Policy(operand="int8", output="int32"), scale=1.0)
    with pytest.raises(InputError, match="zero point"):
        npu_jax.conv2d(x, w, policy=i8, scale=1.0, offset=300)
    with pytest.raises(ValueError, match="int32"):
        Policy(operand="int8", accumulate="fp32")
    with pytest.raises(ValueError, match="int8 operands"):
        Policy(output="int8")
    with pytest.raises(ValueError, match="nearest_even"):
        Policy(operand="int8", rounding="stochastic")
    with pytest.raises(InputError, match="one number"):
        npu_jax.matmul(ints(rng, (16, 32)), ints(rng, (32, 32)), policy=i8, scale=np.ones(32))


# ---- asc: int8 kernels in the vendor's vocabulary ---------------------------------------------------
QUANT_LEN = 2048


@asc.kernel
def quantise(x, y, inv_scale: float, offset: float, n: int = QUANT_LEN):
    """fp16 -> int8 on the vector unit as the vendor's AscendQuant: x * (1 / scale) + offset, Cast RINT."""
    x_gm, y_gm = asc.GlobalTensor(), asc.GlobalTensor()
    x_gm.set_global_buffer(x, n)
    y_gm.set_global_buffer(y, n)
    pipe = asc.TPipe()
    q_in, q_out = asc.TQue(asc.TPosition.VECIN, 1), asc.TQue(asc.TPosition.VECOUT, 1)
    pipe.init_buffer(q_in, 1, n * 2)
    pipe.init_buffer(q_out, 1, n)
    t = q_in.alloc_tensor(asc.half)
    asc.data_copy(t, x_gm, n)
    q_in.enque(t)
    t = q_in.deque(asc.half)
    asc.muls(t, t, inv_scale, n)
    asc.adds(t, t, offset, n)
    o = q_out.alloc_tensor(asc.int8)
    asc.cast(o, t, asc.RoundMode.CAST_RINT, n)
    q_out.enque(o)
    q_in.free_tensor(t)
    o = q_out.deque(asc.int8)
    asc.data_copy(y_gm, o, n)
    q_out.free_tensor(o)


def test_asc_vector_quantise_kernel():
    """Each vector op rounds to its destination (fp16 here), then Cast rounds half to even and saturates."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(QUANT_LEN) * 3).astype(np.float16)
    x[:4] = [1000.0, -1000.0, 0.25, -0.75]  # saturated both ways; ties after the scale
    outs, _ = quantise[1](x, np.zeros(QUANT_LEN, np.int8), 10.0, 2.0, hw=npu_jax.presets.ascend310p())
    v = (x.astype(np.float32) * np.float32(10.0)).astype(np.float16)
    v = (v.astype(np.float32) + np.float32(2.0)).astype(np.float16)
    want = np.clip(np.rint(v.astype(np.float32)), -128, 127).astype(np.int8)
    np.testing.assert_array_equal(np.asarray(outs[1]), want)
    assert outs[1].dtype == np.int8


@pytest.mark.parametrize("mode", ["NoQuant", "DEQF16", "REQ8"])
def test_asc_int8_cube_kernel(mode):
    got, ref, rep = matmul_int8.run(getattr(asc.QuantMode, mode), seed=len(mode))
    np.testing.assert_array_equal(got, ref)
    assert rep.flops == 2 * matmul_int8.M * matmul_int8.N * matmul_int8.K


ACTS = [
    (["relu"], dict(activation="relu")),
    ([("leaky_relu", 0.1)], dict(activation="leaky_relu", alpha=0.1)),
    ([("clipped_relu", 6.0)], dict(activation="relu", clip=6.0)),
]


@pytest.mark.slow
@pytest.mark.parametrize("chip, chains", [("310p", ACTS), ("910b", ACTS)])
def test_int8_fused_activation_in_the_requantisation(chip, chains):
    """conv + ReLU family in int8: the activation on the scaled value before its rounding, in the one
    way-out instruction (Fixpipe / the deq conversion); both data paths, the integer reference, the model."""
    rng = np.random.default_rng(17)
    x, w = ints(rng, (1, 24, 9, 9)), ints(rng, (20, 24, 3, 3))
    ref = np.asarray(int_conv(x, w, 1, 1, 1, 1))
    scale = rng.uniform(1e-4, 4e-4, 20).astype(np.float32)
    hw, pol = CHIPS[chip](), Policy(operand="int8", output="int8")
    for chain, act in chains:
        y, rep = fusion.conv2d_fused(x, w, chain, padding=1, hw=hw, policy=pol, scale=scale, offset=-7)
        want = np.asarray(npu_jax.requantize(jnp.asarray(ref), scale, -7, "int8", axis=1, **act))
        np.testing.assert_array_equal(np.asarray(y), want)
    g = canonicalize(x.shape, w.shape, 1, 1, 1, 1)
    epi = split(canonical_steps(["relu"]), hw, pol, True, -7)[0]
    p = make_plan(
        g, "img2col", choose_tiling(g, "img2col", hw, "int8", "int8", epi), hw, "int8", "int8", epi=epi
    )
    runs = [
        run_plan(p, jnp.asarray(x), jnp.asarray(w), pol, scale=jnp.asarray(scale), data_path=dp)
        for dp in ("values", "instructions")
    ]
    np.testing.assert_array_equal(np.asarray(runs[0][0]), np.asarray(runs[1][0]))
    assert predict(p).cycles == int(runs[0][1].cycles) == int(runs[1][1].cycles)
    with pytest.raises(InputError, match="fused=True"):
        fusion.conv2d_fused(x, w, ["relu"], padding=1, hw=hw, policy=pol, scale=scale, fused=False)
    with pytest.raises(ValueError, match="at most one activation"):
        fusion.conv2d_fused(x, w, ["relu", "abs"], padding=1, hw=hw, policy=pol, scale=scale)


def numpy_residual_chain(acc, scale, chain, res):
    """An independent numpy reading of the int8 residual chain: the int32 sums scaled in fp32 and
    rounded to fp16, then each step in fp32 on fp16 values, its result rounded to fp16."""
    r16 = lambda v: v.astype(np.float16).astype(np.float32)  # noqa: E731
    v = r16(acc.astype(np.float32) * scale[None, :, None, None])
    for st in canonical_steps(chain):
        if st.op == "residual":
            v = r16(v + res.astype(np.float32))
        elif st.op == "relu":
            v = np.maximum(v, 0)
        elif st.op == "abs":
            v = np.abs(v)
        elif st.op == "leaky_relu":
            v = np.where(v >= 0, v, r16(v * np.float32(st.arg)))
    return v.astype(np.float16)


@pytest.mark.parametrize(
    "chain, strategies, paths",
    [
        (["residual", "relu"], [], []),
        pytest.param(
            ["abs", "residual", ("leaky_relu", 0.1)],
            STRATEGIES,
            ["values", "instructions"],
            marks=pytest.mark.slow,
        ),
    ],
)
def test_int8_residual_chain_fused_after_the_dequantisation(chain, strategies, paths):
    """The vendor's conv + dequant + vadd + ReLU kernel (310P): the deq conversion writes the fp16 tile,
    the vector unit adds the fp16 residual and applies the rest in fp16, one write to GM. An independent
    numpy reading, both data paths and the model agree; the 910B (no UB beside its Cube), an int8 output
    and an unfused chain are refused."""
    rng = np.random.default_rng(23)
    x, w = ints(rng, (2, 24, 9, 9)), ints(rng, (20, 24, 3, 3))
    acc = np.asarray(int_conv(x, w, 1, 1, 1, 1))
    scale = rng.uniform(1e-4, 4e-4, 20).astype(np.float32)
    res = (rng.standard_normal((2, 20, 9, 9)) * 2).astype(np.float16)
    hw, pol = CHIPS["310p"](), Policy(operand="int8", output="fp16")
    want = numpy_residual_chain(acc, scale, chain, res)
    y, rep = fusion.conv2d_fused(x, w, chain, padding=1, hw=hw, policy=pol, scale=scale, residual=res)
    np.testing.assert_array_equal(np.asarray(y), want)
    assert [label for label, _ in rep.parts] == ["conv"]
    g = canonicalize(x.shape, w.shape, 1, 1, 1, 1)
    epi = split(canonical_steps(chain), hw, pol, True)[0]
    assert epi.int8_chain and epi.deq_args() == {} and not epi.widens_residual
    t = choose_tiling(g, "img2col", hw, "int8", "fp16", epi)  # the tiling conv2d_fused chose
    pred = predict(make_plan(g, "img2col", t, hw, "int8", "fp16", epi=epi))
    assert (pred.cycles, pred.gm_bytes) == (int(rep.parts[0][1].cycles), int(rep.parts[0][1].gm_bytes))
    for strategy in strategies:
        t = choose_tiling(g, strategy, hw, "int8", "fp16", epi)
        p = make_plan(g, strategy, t, hw, "int8", "fp16", epi=epi)
        runs = [
            run_plan(
                p,
                jnp.asarray(x),
                jnp.asarray(w),
                pol,
                scale=jnp.asarray(scale),
                residual=jnp.asarray(res.transpose(0, 2, 3, 1)),
                data_path=dp,
            )
            for dp in paths
        ]
        pred = predict(p)
        for yy, r in runs:
            np.testing.assert_array_equal(np.asarray(yy), want.transpose(0, 2, 3, 1), err_msg=strategy)
            assert (pred.cycles, pred.gm_bytes) == (int(r.cycles), int(r.gm_bytes)), strategy
    for bad_hw, bad_pol, fused in (
        (CHIPS["910b"](), pol, True),
        (hw, Policy(operand="int8", output="int8"), True),
        (hw, pol, False),
    ):
        with pytest.raises((ValueError, InputError), match="residual chain|fused=True"):
            fusion.conv2d_fused(
                x, w, chain, padding=1, hw=bad_hw, policy=bad_pol, scale=scale, residual=res, fused=fused
            )

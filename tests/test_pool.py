"""Pooling on the vector kernel (``npu_jax.pool2d``): values against ``lax.reduce_window`` and a numpy
golden model of ONNX's AveragePool, the closed-form cost against the emulator's report, the program
cache, jit, refused arguments, and the ONNX backend's node tests of MaxPool / AveragePool /
GlobalAveragePool. Each distinct layer is one compile (seconds): the cases are few and each checks
values, cost and L2 at once; the rest run with ``NPU_JAX_POOL=all``."""

from __future__ import annotations

import importlib
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_prediction_is_report, busy, gm_spec, make_core
from jax import lax

import npu_jax
from npu_jax import presets
from npu_jax.api.pool import pool_plan, run_pool
from npu_jax.core import sanitize
from npu_jax.core.buffers import DTYPES, Plan
from npu_jax.core.formats import nchw_to_nc1hwc0
from npu_jax.core.isa import View
from npu_jax.cost.pool import predict
from npu_jax.errors import CapacityError, InputError, InputTypeError, WindowError
from npu_jax.hw import costs
from npu_jax.workload.pool import canonicalize

# Each distinct layer compiles (seconds): the default run takes one case per code path; the rest of
# the ONNX backend's node cases, the WaitFlag mutation sweep, L2 residency and one more layer run with
# NPU_JAX_POOL=all (slow-marked too; 2026-12-01: all pass).
ALL = os.environ.get("NPU_JAX_POOL", "") == "all"
ALL_ONNX = [pytest.mark.slow, pytest.mark.skipif(not ALL, reason="set NPU_JAX_POOL=all to run every case")]
FP32 = npu_jax.Policy(operand="fp32", output="fp32")
FP16 = npu_jax.Policy()
_EVENTS: list[str] = []
jax.monitoring.register_event_duration_secs_listener(lambda name, *a, **k: _EVENTS.append(name))


def golden(x, kind, kernel, stride, padding, include_pad=False, ceil_mode=False):
    """ONNX MaxPool / AveragePool in float64, window by window (the spec's divisor rule)."""
    g = canonicalize("golden", x.shape, kernel, stride, padding, ceil_mode=ceil_mode)
    pt, pb, pl, pr = g.pads
    x = np.asarray(x, np.float64)
    y = np.zeros((g.n, g.c, g.ho, g.wo))
    for r in range(g.ho):
        for c in range(g.wo):
            h0, w0 = r * g.stride[0] - pt, c * g.stride[1] - pl
            h1, w1 = h0 + g.kh, w0 + g.kw
            win = x[:, :, max(h0, 0) : min(h1, g.h), max(w0, 0) : min(w1, g.w)]
            if kind == "max":
                y[:, :, r, c] = win.max(axis=(2, 3))
            else:
                cells = (min(h1, g.h + pb) - h0) * (min(w1, g.w + pr) - w0) if include_pad else win[0, 0].size
                y[:, :, r, c] = win.sum(axis=(2, 3)) / cells
    return y


def ref_max(x, kernel, stride, pads):
    return lax.reduce_window(
        jnp.asarray(x, jnp.float32),
        -jnp.inf,
        lax.max,
        (1, 1) + kernel,
        (1, 1) + stride,
        ((0, 0), (0, 0)) + pads,
    )


def draw(rng, shape, policy, negative=False):
    """Fresh non-zero inputs (all below -0.5 with ``negative``: a pad cell read as 0 would then win a
    max), exactly representable in the policy's operand format."""
    x = rng.standard_normal(shape).astype(np.float32) + 0.25
    x = -np.abs(x) - 0.5 if negative else x
    return x.astype(np.float16).astype(np.float32) if policy.operand == "fp16" else x


def check_cost(x_shape, rep, hw, policy, *args, **kw):
    """The closed form equals the emulator's report: cycles, bytes per path, busy per lane."""
    pr = predict(pool_plan(x_shape, *args, hw=hw, policy=policy, **kw))
    assert_prediction_is_report(pr, rep)
    return pr


def test_plans_group_c1_blocks_where_a_plane_is_one_tile():
    """The cases below that run several C1 blocks per item (a partial last group included)."""
    tiny = presets.tiny()
    p = pool_plan((4, 40, 7, 6), "max", 2, 2, hw=tiny, policy=FP32, ceil_mode=True)  # UB holds 3 of 5
    assert p.c1_t == 3 and p.c1 % p.c1_t == 2
    assert pool_plan((4, 48, 5, 6), "avg", 2, 2, hw=tiny, policy=npu_jax.Policy(output="fp32")).c1_t == 3
    p = pool_plan((2, 40, 5, 9), "avg", "global", hw=tiny, policy=FP32)
    assert p.c1_t == 2 and p.c1 % p.c1_t == 1
    assert pool_plan((8, 2048, 7, 7), "avg", "global").c1_t > 1  # ResNet-50's, batch 8, 910B
    assert pool_plan((2, 20, 9, 11), "avg", 3, 2, 1, hw=tiny).c1_t == 1  # border divisors: one block


# ---- the instruction-set additions, op by op --------------------------------------------------------
def test_vdup_strided_views_and_keeping_dma(rng):
    """VDup fills; a View reads every step-th element (numpy slicing) and charges its own elements; a
    view past its allocation is refused; DataCopy outside="keep" leaves the block's cells outside the
    tensor as they were (outside="zero", the default, zeroes them)."""
    hw = presets.tiny()
    plan = Plan(hw)
    t = plan.alloc("UB", "t", (7, 9, 16), "fp32")
    d = plan.alloc("UB", "d", (3, 4, 16), "fp32")
    xv = rng.standard_normal((5, 6, 16)).astype(np.float32)
    core = make_core(hw, plan, [gm_spec("x", (5, 6, 16), "fp32", padded=(8, 6, 16))], {"x": xv})
    src = rng.standard_normal((7, 9, 16)).astype(np.float32)
    taps = View(t, 0, (1, 2, 0), (3, 4, 16), (2, 2, 1)), View(t, 0, (0, 1, 0), (3, 4, 16), (3, 2, 1))

    @jax.jit  # one program, not one per op
    def prog(core):
        core = core.vector("VDup", t[0], scalar=-np.inf)
        filled = core.read(t)
        win = core.gm_window("x", (3, 0, 0), (4, 6, 16))  # rows 3..6 of 5: two rows past the tensor
        kept = core.data_copy(dst=t.at(0, (1, 2, 0)), src=win, outside="keep").read(t)
        zeroed = core.data_copy(dst=t.at(0, (1, 2, 0)), src=win).read(t)
        core = core.replace(buf={**core.buf, "t": core.buf["t"].at[0].set(src)})
        return filled, kept, zeroed, core.vector("VMax", d[0], *taps)

    filled, kept, zeroed, after = prog(core)
    np.testing.assert_array_equal(np.asarray(filled), np.full((7, 9, 16), -np.inf, np.float32))
    want = np.full((7, 9, 16), -np.inf, np.float32)
    want[1:3, 2:8] = xv[3:5]
    np.testing.assert_array_equal(np.asarray(kept), want)
    zeroed = np.asarray(zeroed)
    assert (zeroed[3:5, 2:8] == 0).all() and (zeroed[1:3, 2:8] == xv[3:5]).all()
    np.testing.assert_array_equal(
        np.asarray(after.read(d)), np.maximum(src[1:7:2, 2:10:2], src[0:9:3, 1:9:2])
    )
    h = costs.HwNumbers.of(hw)
    assert busy(after, "V") == costs.vector(h, 7 * 9 * 16 * 4) + costs.vector(h, 3 * 4 * 16 * 4)
    with pytest.raises(WindowError, match="memcheck"):
        core.vector("VCopy", d[0], View(t, 0, (2, 0, 0), (3, 4, 16), (3, 2, 1)))  # rows 2, 5, 8 of 7


# ---- max --------------------------------------------------------------------------------------------
# sanitizers ("checks") on for one case per code path, off for the rest (a third of a compile's time)
@pytest.mark.parametrize(
    "shape, kernel, stride, pad, ceil, policy, checks",
    [
        ((2, 20, 9, 11), (3, 3), (2, 2), 1, False, FP16, "all"),  # ResNet's stem pool; odd sizes
        ((4, 40, 7, 6), (2, 2), (2, 2), 0, True, FP32, "all"),  # ceil_mode's overhang; C1 blocks 3 + 2
        pytest.param((1, 9, 6, 7), (3, 3), (1, 1), 1, False, FP32, "all", marks=ALL_ONNX),  # stride 1
    ],
)
def test_max_pool_matches_reduce_window_and_cost_model(rng, shape, kernel, stride, pad, ceil, policy, checks):
    hw = presets.tiny()
    x = draw(rng, shape, policy, negative=True)
    y, rep = npu_jax.pool2d(
        x, "max", kernel, stride, pad, hw=hw, policy=policy, ceil_mode=ceil, checks=checks
    )
    g = canonicalize("t", shape, kernel, stride, pad, ceil_mode=ceil)
    ref = golden(x, "max", kernel, stride, pad, ceil_mode=ceil)
    assert y.shape == (g.n, g.c, g.ho, g.wo) and y.dtype == DTYPES[policy.output]
    np.testing.assert_array_equal(np.asarray(y, np.float64), ref)  # max is exact in either format
    if not ceil:
        np.testing.assert_array_equal(
            np.asarray(y, np.float32), ref_max(x, kernel, stride, ((pad, pad),) * 2)
        )
    pr = check_cost(shape, rep, hw, policy, "max", kernel, stride, pad, ceil_mode=ceil)
    assert pr.bytes["GM->UB"] >= x.size * jnp.dtype(DTYPES[policy.operand]).itemsize


# ---- average ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "shape, kernel, stride, pad, include, ceil, policy, checks",
    [
        ((1, 20, 7, 6), (3, 3), (1, 1), 1, False, False, FP32, "all"),  # border divisors: assist matrix
        ((2, 20, 9, 11), (3, 3), (2, 2), 1, True, True, FP16, "none"),  # count_include_pad, ceil
        # one VMuls; a VCast to fp32; 3 C1 blocks an item, one burst each (the last input row unread)
        ((4, 48, 5, 6), (2, 2), (2, 2), 0, False, False, npu_jax.Policy(output="fp32"), "all"),
    ],
)
def test_avg_pool_matches_golden_and_cost_model(
    rng, shape, kernel, stride, pad, include, ceil, policy, checks
):
    hw = presets.tiny()
    x = draw(rng, shape, policy)
    y, rep = npu_jax.pool2d(
        x,
        "avg",
        kernel,
        stride,
        pad,
        hw=hw,
        policy=policy,
        count_include_pad=include,
        ceil_mode=ceil,
        checks=checks,
    )
    ref = golden(x, "avg", kernel, stride, pad, include, ceil)
    tol = 1e-6 if policy.output == "fp32" else 1e-2  # fp16: every partial sum rounds to fp16
    np.testing.assert_allclose(np.asarray(y, np.float64), ref, rtol=tol, atol=tol)
    if not include and not ceil:
        win = lax.reduce_window(
            jnp.asarray(x),
            0.0,
            lax.add,
            (1, 1) + kernel,
            (1, 1) + stride,
            ((0, 0), (0, 0)) + ((pad, pad),) * 2,
        )
        ones = lax.reduce_window(jnp.ones(shape[2:]), 0.0, lax.add, kernel, stride, ((pad, pad),) * 2)
        np.testing.assert_allclose(np.asarray(y, np.float64), np.asarray(win / ones), rtol=tol, atol=tol)
    check_cost(shape, rep, hw, policy, "avg", kernel, stride, pad, count_include_pad=include, ceil_mode=ceil)


@pytest.mark.parametrize(
    "shape, policy, checks",
    [((2, 64, 7, 7), FP16, "none"), ((2, 40, 5, 9), FP32, "all")],  # 2 C1 blocks/item
)
def test_global_avg_pool(rng, shape, policy, checks):
    hw = presets.tiny()
    x = draw(rng, shape, policy)
    y, rep = npu_jax.global_avg_pool(x, hw=hw, policy=policy, checks=checks)
    assert y.shape == shape[:2] + (1, 1)
    tol = 1e-6 if policy.output == "fp32" else 1e-2
    np.testing.assert_allclose(
        np.asarray(y, np.float64)[..., 0, 0], x.astype(np.float64).mean(axis=(2, 3)), rtol=tol, atol=tol
    )
    check_cost(shape, rep, hw, policy, "avg", "global")


def test_resnet50_pool_on_910b_cost_model_timing_only_and_l2_halo():
    """ResNet-50's 3x3/2 max pool at 56x56 output rows cut across 40 vector cores: the closed form
    equals the emulator, and the halo rows a tile shares with the previous one hit L2."""
    hw, shape = presets.ascend910b(), (1, 64, 112, 112)
    _, rep = npu_jax.pool2d(
        np.ones(shape, np.float16), "max", 3, 2, 1, hw=hw, timing_only=True, checks="none"
    )
    pr = check_cost(shape, rep, hw, FP16, "max", 3, 2, 1)
    assert rep.n_cores == hw.num_vector_cores and rep.l2_hit_bytes > 0
    assert pr.bytes["HBM->L2"] == 64 * 112 * 112 * 2  # every input byte once from HBM, halos from L2


@pytest.mark.slow
@pytest.mark.skipif(not ALL, reason="set NPU_JAX_POOL=all to run every case")
def test_every_removed_waitflag_is_caught(rng):
    """The sanitizers catch each WaitFlag of the kernel removed in turn (both input queues, the output
    queue and their drains): its synchronisation is all needed and all checked."""
    x = draw(rng, (1, 20, 7, 6), FP32)
    r = sanitize.sweep_waits(
        lambda: npu_jax.pool2d(x, "avg", 3, 1, 1, hw=presets.tiny(), policy=FP32, checks="all")[1], "pool"
    )
    assert r.mutants >= 8 and r.caught == r.mutants, f"{r.figure}; not reported: {r.escaped}"


@pytest.mark.slow
@pytest.mark.parametrize("resident", [pytest.param(r, marks=ALL_ONNX) for r in (("x",), ("x", "rcp"))])
def test_cost_model_with_inputs_left_in_l2_by_the_kernel_before(resident):
    """``l2_resident`` (a network's previous kernel left x, or the assist matrix, in L2): every read
    of those hits; the closed form follows."""
    hw, policy, shape = presets.tiny(), FP32, (2, 20, 9, 11)
    p = pool_plan(shape, "avg", 3, 1, 1, hw=hw, policy=policy)
    x5 = nchw_to_nc1hwc0(jnp.ones(shape, jnp.float32), p.c0)
    _, rep = run_pool(p, x5, policy, move_data=False, checks="none", l2_resident=resident)
    pr = predict(p, l2_resident=resident)
    assert (pr.cycles, pr.hbm_bytes) == (rep.cycles, rep.hbm_bytes)
    assert pr.bytes == {k: v for k, v in rep.bytes.items() if v}
    first_plane_rcp = 0 if "rcp" in resident else p.g.ho * p.g.wo * p.c0 * 4  # its only misses
    assert p.has_rcp and rep.l2_hit_bytes == pr.bytes["GM->UB"] - first_plane_rcp


# ---- the program cache and jit ------------------------------------------------------------------------
def test_second_call_neither_traces_nor_compiles_and_jit_agrees(rng):
    hw, shape = presets.tiny(), (2, 20, 9, 11)

    def call(x):
        return npu_jax.pool2d(x, "max", 3, 2, 1, hw=hw, policy=FP16)

    call(draw(rng, shape, FP16))
    x = draw(rng, shape, FP16)
    _EVENTS.clear()
    y, _ = call(x)
    jax.block_until_ready(y)
    assert sum(e.endswith("jaxpr_trace_duration") for e in _EVENTS) == 0
    assert sum(e.endswith("backend_compile_duration") for e in _EVENTS) == 0
    np.testing.assert_array_equal(np.asarray(y, np.float64), golden(x, "max", 3, 2, 1))
    yj, rj = jax.jit(lambda x: call(x))(x)
    np.testing.assert_array_equal(np.asarray(yj), np.asarray(y))
    assert int(rj.cycles) == predict(pool_plan(shape, "max", 3, 2, 1, hw=hw)).cycles


# ---- refused arguments -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kw, err, words",
    [
        (dict(kind="min"), InputError, "kind"),
        (dict(kernel=(9, 3)), InputError, "larger than the padded input"),
        (dict(stride=0), InputError, "stride must be >= 1"),
        (dict(kernel=2, padding=2), InputError, "smaller than the kernel"),
        (dict(dilation=2), InputError, "dilation"),
        (dict(padding="SAME_FOO"), InputError, "auto_pad"),
        (dict(padding=(1, 2, 3)), InputTypeError, "padding"),
        (dict(ceil_mode="yes"), InputTypeError, "ceil_mode"),
        (dict(kind="avg", kernel="global", stride=2), InputError, "global"),
        (dict(policy="fp32"), InputTypeError, "Policy"),
        (dict(hw="910b"), InputTypeError, "HardwareConfig"),
    ],
)
def test_bad_arguments_are_refused_with_the_fix(kw, err, words):
    x = np.ones((1, 4, 6, 6), np.float16)
    kw = {"kind": "max", "kernel": 3, **kw}
    with pytest.raises(err, match=words):
        npu_jax.pool2d(x, **kw)


def test_bad_input_arrays_and_too_wide_rows():
    with pytest.raises(InputError, match="4-D NCHW"):
        npu_jax.pool2d(np.ones((4, 6, 6), np.float16), "max", 2)
    with pytest.raises(InputTypeError, match="x must be"):
        npu_jax.pool2d("x", "max", 2)
    with pytest.raises(CapacityError, match="does not fit UB"):  # 16 KB UB: one row of 4096 is too wide
        pool_plan((1, 16, 8, 4096), "max", 3, hw=presets.tiny())


# ---- the ONNX backend's node tests ---------------------------------------------------------------------
# every 2-D float case of MaxPool / AveragePool / GlobalAveragePool in onnx's backend suite: the default
# run takes a few (one compile each), the rest are slow
ONNX_FAST = ("test_averagepool_2d_ceil_last_window_starts_on_pad",)
ONNX_SLOW = (
    "test_maxpool_2d_precomputed_pads",
    "test_maxpool_2d_ceil_output_size_reduce_by_one",
    "test_averagepool_2d_precomputed_pads_count_include_pad",
    "test_globalaveragepool_precomputed",
    "test_globalmaxpool_precomputed",
    "test_maxpool_2d_precomputed_strides",
    "test_maxpool_2d_precomputed_same_upper",
    "test_maxpool_2d_default",
    "test_maxpool_2d_same_upper",
    "test_maxpool_2d_same_lower",
    "test_maxpool_2d_pads",
    "test_maxpool_2d_strides",
    "test_maxpool_2d_ceil",
    "test_averagepool_2d_precomputed_pads",
    "test_averagepool_2d_precomputed_strides",
    "test_averagepool_2d_precomputed_same_upper",
    "test_averagepool_2d_default",
    "test_averagepool_2d_same_upper",
    "test_averagepool_2d_same_lower",
    "test_averagepool_2d_pads",
    "test_averagepool_2d_pads_count_include_pad",
    "test_averagepool_2d_strides",
    "test_averagepool_2d_ceil",
    "test_globalaveragepool",
    "test_globalmaxpool",
)
# refused, with the reason: what pool2d does not do
ONNX_REFUSED = {
    "dilations": InputError,  # dilations other than 1
    "_1d_": InputError,  # 1-D / 3-D pooling
    "_3d_": InputError,
}
ONNX_NOT_RUN = ("test_maxpool_2d_uint8", "with_argmax")  # integer input; the Indices output


@pytest.fixture(scope="module")
def onnx_cases():
    """The node cases of the four ops, made by importing their modules (each export runs at import;
    the whole collection, ``collect_testcases``, takes several times longer)."""
    node_cases = pytest.importorskip("onnx.backend.test.case.node")
    for op in ("maxpool", "averagepool", "globalaveragepool", "globalmaxpool"):
        importlib.import_module(f"onnx.backend.test.case.node.{op}")
    return {c.name: c for c in node_cases._NodeTestCases if "pool" in c.name and "unpool" not in c.name}


def onnx_call(case):
    """pool2d's arguments from the case's single node."""
    from onnx import helper

    (node,) = case.model.graph.node
    a = {at.name: helper.get_attribute_value(at) for at in node.attribute}
    if node.op_type.startswith("Global"):
        return dict(kind="avg" if node.op_type == "GlobalAveragePool" else "max", kernel="global")
    pads = a.get("pads", [0] * 4)
    kw = dict(
        kind="max" if node.op_type == "MaxPool" else "avg",
        kernel=tuple(a["kernel_shape"]),
        stride=tuple(a.get("strides", [1] * len(a["kernel_shape"]))),
        padding=((pads[0], pads[2]), (pads[1], pads[3])) if len(pads) == 4 else 0,
        ceil_mode=bool(a.get("ceil_mode", 0)),
        dilation=tuple(a.get("dilations", [1] * len(a["kernel_shape"]))),
    )
    if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        auto = a["auto_pad"]
        kw["padding"] = auto.decode() if isinstance(auto, bytes) else auto
    if node.op_type == "AveragePool":
        kw["count_include_pad"] = bool(a.get("count_include_pad", 0))
    return kw


def test_onnx_node_cases_are_all_accounted_for(onnx_cases):
    names = {n for n in onnx_cases if "lppool" not in n}
    covered = set(ONNX_FAST) | set(ONNX_SLOW)
    refused = {n for n in names if any(k in n for k in ONNX_REFUSED)}
    skipped = {n for n in names if any(k in n for k in ONNX_NOT_RUN)}
    assert names == covered | refused | skipped, sorted(names - covered - refused - skipped)
    for n in sorted(refused):
        case = onnx_cases[n]
        (x,) = case.data_sets[0][0]
        with pytest.raises(InputError, match="dilation|4-D NCHW"):
            npu_jax.pool2d(x, policy=FP32, **onnx_call(case))


@pytest.mark.parametrize("name", list(ONNX_FAST) + [pytest.param(n, marks=ALL_ONNX) for n in ONNX_SLOW])
def test_onnx_backend_node_case(onnx_cases, name):
    case = onnx_cases[name]
    (x,), (want,) = case.data_sets[0]
    y, _ = npu_jax.pool2d(x, hw=presets.tiny(), policy=FP32, checks="none", **onnx_call(case))
    np.testing.assert_allclose(np.asarray(y), want, rtol=case.rtol, atol=case.atol)

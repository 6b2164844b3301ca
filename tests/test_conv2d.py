"""Conv2D on the emulated core: every strategy against a float64 reference, the report's invariants,
the GM-traffic story the four strategies tell, and the errors bad arguments raise.

Compiles dominate the run time (4-9 s each, eager or jitted), so the tests share programs:

* the grid runs 36 layers through ``conv2d_bounded`` under one ``jax.jit`` per (bound, strategy,
  tiling, preset, policy) -- eight programs in all (conftest_conv.bounded_fn caches them);
* one "story" layer (3x3, K = 32 in two Cout blocks of n = 16) is run once per strategy eagerly,
  under ``jax.jit``, inside the fp16 grid's bound, and (relayout, img2col) in timing-only mode;
  every comparison reads those cached runs.

Numbers are checked with ``conftest_conv.assert_conv_close`` (fp32-accumulation error bound, derived
there); seeds are fresh per run and printed in every failure message (replay with
``NPU_JAX_TEST_SEED``).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import numpy as np
import pytest
from conftest_conv import (
    C0,
    NP_DTYPE,
    assert_bits_equal,
    assert_conv_close,
    bits,
    bound_out_hw,
    check_bounded_output,
    conv_error_bound,
    conv_ref,
    gamma,
    new_seed,
    random_layer,
    rounded,
    run_bounded,
)
from jax import lax

from npu_jax import Policy, presets
from npu_jax.api.conv import conv2d
from npu_jax.core.pipes import PIPE_INDEX
from npu_jax.errors import CapacityError, TilingError
from npu_jax.mapping.conv import STRATEGIES, ConvTiling
from npu_jax.workload.conv import ConvGeometry, canonicalize

TINY = presets.tiny()
FP16 = Policy()
BF16 = Policy(operand="bf16", output="bf16")
FP32 = Policy(operand="fp32", output="fp32")


def fractal_tiling(c0=16, **kw) -> ConvTiling:
    """The fractal strategies' tiling: one (c1, tap) fractal per Mmad, single-buffered."""
    base = dict(ho=2, wo=4, n=16, cin1=1, k_l0=c0, cores=2)
    return ConvTiling(**{**base, **kw})


def img2col_tiling(k_l0=32, stages=2, **kw) -> ConvTiling:
    base = dict(ho=2, wo=4, n=16, cin1=1, k_l0=k_l0, l1_stages=stages, l0_stages=stages, cores=2)
    return ConvTiling(**{**base, **kw})


# ---- the grid ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Group:
    """One bound, preset and policy, and the strategies (with their tilings) compiled for it."""

    bound: ConvGeometry
    policy: Policy
    tilings: dict
    hw: object = TINY


# fp16, kernels up to 5x5 with dilation 2: every strategy (the story layer's tilings too)
BOUND_S = ConvGeometry(2, 17, 12, 12, 32, 5, 5, (2, 2), (2, 2), (2, 2, 2, 2))
# 7x7 kernels: a wider bound (dilation 1); img2col single-buffers L1 to fit 7x7 weights in 64 KiB
BOUND_L = ConvGeometry(2, 17, 14, 14, 20, 7, 7, (2, 2), (1, 1), (3, 3, 3, 3))
# fp32 (C0 = 8): 3x3 kernels, weights resident in L1 for relayout
BOUND_F = ConvGeometry(2, 17, 12, 12, 32, 3, 3, (2, 2), (2, 2), (2, 2, 2, 2))

STORY_TILINGS = {
    "output_tiled": fractal_tiling(),
    "input_tiled": fractal_tiling(),
    "relayout": fractal_tiling(),
    "img2col": img2col_tiling(),
}
GROUPS = {
    "S16": Group(BOUND_S, FP16, STORY_TILINGS),
    # each program costs 4-9 s to compile: the other bounds run only the strategies that add cover
    "L16": Group(BOUND_L, FP16, {"img2col": img2col_tiling(k_l0=64, l1_stages=1, l0_stages=2)}),
    "BF16": Group(BOUND_S, BF16, {"img2col": img2col_tiling(k_l0=48, ho=4, wo=2)}),
    "FP32": Group(
        BOUND_F,
        FP32,
        {"relayout": fractal_tiling(c0=8, cin1=3, weights_resident=True), "img2col": img2col_tiling(k_l0=24)},
    ),
}


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    group: str
    x: tuple  # (N, C, H, W)
    w: tuple  # (K, C, kh, kw)
    stride: object = 1
    padding: object = 0
    dilation: object = 1


def case(id, group, n, c, hw_, k, khw, stride=1, padding=0, dilation=1) -> Case:
    return Case(id, group, (n, c) + hw_, (k, c) + khw, stride, padding, dilation)


SAME, VALID = "SAME", "VALID"
CASES = [
    # fp16, all four strategies
    case("1x1-c3", "S16", 1, 3, (8, 8), 16, (1, 1)),
    case("3x3-p1", "S16", 2, 16, (8, 8), 16, (3, 3), 1, 1),
    case("3x3-s2", "S16", 1, 17, (9, 7), 20, (3, 3), 2, 1),
    case("2x3-same", "S16", 2, 3, (10, 10), 20, (2, 3), 1, SAME),
    case("5x5-valid", "S16", 1, 16, (12, 12), 16, (5, 5), 1, VALID),
    case("5x5-s21-p2", "S16", 1, 17, (12, 11), 20, (5, 5), (2, 1), 2),
    case("3x3-d2-p12", "S16", 2, 17, (11, 12), 16, (3, 3), 1, (1, 2), 2),
    case("3x3-s2-d2-asym", "S16", 1, 3, (12, 12), 20, (3, 3), 2, ((0, 2), (1, 0)), 2),
    case("2x3-s21-d2", "S16", 1, 16, (9, 9), 20, (2, 3), (2, 1), 0, 2),
    case("1x1-s2-valid", "S16", 2, 16, (12, 10), 16, (1, 1), 2, VALID),
    case("3x3-same-d2", "S16", 1, 17, (7, 9), 16, (3, 3), 1, SAME, 2),
    case("5x5-p12-small", "S16", 1, 3, (6, 6), 20, (5, 5), 1, (1, 2)),
    case("3x3-k32", "S16", 2, 17, (12, 12), 32, (3, 3), (2, 1), 1),
    case("2x3-s2-same", "S16", 1, 16, (8, 12), 20, (2, 3), 2, SAME),
    case("5x5-s2-d2-asym", "S16", 1, 17, (12, 12), 16, (5, 5), 2, ((0, 2), (1, 0)), 2),
    case("3x3-tiny-input", "S16", 2, 3, (3, 3), 16, (3, 3), 1, 1),
    case("1x1-k20-p1", "S16", 1, 17, (5, 11), 20, (1, 1), 1, 1),
    case("2x3-valid-d2", "S16", 2, 16, (12, 12), 16, (2, 3), 2, VALID, (2, 1)),
    case("5x5-same", "S16", 1, 16, (9, 9), 20, (5, 5), 1, SAME),
    case("3x3-whole-input", "S16", 1, 17, (3, 3), 20, (3, 3), 1, 0),
    # fp16, 7x7
    case("7x7-s2-p3", "L16", 1, 3, (14, 14), 16, (7, 7), 2, 3),
    case("7x7-same", "L16", 2, 17, (12, 13), 20, (7, 7), 1, SAME),
    case("7x7-s21-valid", "L16", 1, 16, (10, 10), 20, (7, 7), (2, 1), VALID),
    case("5x5-asym-L", "L16", 1, 17, (14, 14), 16, (5, 5), 1, ((0, 2), (1, 0))),
    case("7x7-p12", "L16", 2, 16, (9, 14), 16, (7, 7), 1, (1, 2)),
    case("7x7-one-output", "L16", 1, 3, (7, 7), 20, (7, 7), 1, 0),
    # bf16
    case("bf16-3x3", "BF16", 1, 16, (8, 8), 16, (3, 3), 1, 1),
    case("bf16-5x5-s2-same", "BF16", 2, 17, (11, 9), 20, (5, 5), 2, SAME),
    case("bf16-2x3-asym-d2", "BF16", 1, 3, (12, 12), 20, (2, 3), (2, 1), ((0, 2), (1, 0)), 2),
    case("bf16-1x1-k32", "BF16", 2, 16, (10, 10), 32, (1, 1), 2, VALID),
    case("bf16-3x3-d2", "BF16", 1, 17, (12, 12), 16, (3, 3), 1, (1, 2), 2),
    # fp32 (C0 = 8)
    case("fp32-3x3", "FP32", 1, 3, (8, 8), 16, (3, 3), 1, 1),
    case("fp32-3x3-s2-same-d2", "FP32", 2, 17, (12, 12), 20, (3, 3), 2, SAME, 2),
    case("fp32-2x3-s21", "FP32", 1, 16, (9, 11), 32, (2, 3), (2, 1), (1, 2)),
    case("fp32-1x1-valid", "FP32", 2, 17, (10, 10), 16, (1, 1), 1, VALID),
    case("fp32-3x3-asym-d2", "FP32", 1, 16, (12, 12), 20, (3, 3), 1, ((0, 2), (1, 0)), 2),
]
CASE = {c.id: c for c in CASES}
GRID = [pytest.param(c, s, id=f"{c.id}-{s}") for c in CASES for s in GROUPS[c.group].tilings]


def geometry(c: Case) -> ConvGeometry:
    return canonicalize(c.x, c.w, c.stride, c.padding, c.dilation)


def test_grid_covers_every_value():
    """The grid is a selection, not a product: check that it still shows every value once."""
    seen = {
        "batch": set(),
        "C": set(),
        "K": set(),
        "kernel": set(),
        "stride": set(),
        "padding": set(),
        "dilation": set(),
        "dtype": set(),
    }
    for c in CASES:
        seen["batch"].add(c.x[0])
        seen["C"].add(c.x[1])
        seen["K"].add(c.w[0])
        seen["kernel"].add(c.w[2:])
        seen["stride"].add(c.stride)
        seen["padding"].add(c.padding)
        seen["dilation"].add(c.dilation)
        seen["dtype"].add(GROUPS[c.group].policy.operand)
        geometry(c)  # every case is a legal layer
    want = {
        "batch": {1, 2},
        "C": {3, 16, 17},
        "K": {16, 20},
        "kernel": {(1, 1), (3, 3), (2, 3), (5, 5), (7, 7)},
        "stride": {1, 2, (2, 1)},
        "padding": {0, 1, (1, 2), ((0, 2), (1, 0)), SAME, VALID},
        "dilation": {1, 2},
        "dtype": {"fp16", "bf16", "fp32"},
    }
    for k, v in want.items():
        assert v <= seen[k], f"grid lacks {k} {v - seen[k]}"
    assert set(STRATEGIES) == set(GROUPS["S16"].tilings)
    assert len(CASES) >= 35


@pytest.mark.slow
@pytest.mark.parametrize("c,strategy", GRID)
def test_grid_matches_reference(c: Case, strategy: str):
    grp = GROUPS[c.group]
    seed = new_seed()
    x, w = random_layer(np.random.default_rng(seed), c.x, c.w)
    g = geometry(c)
    yb, rep = run_bounded(grp.bound, strategy, grp.tilings[strategy], grp.hw, grp.policy, x, w, g)
    what = f"{c.id} [{strategy}, {grp.policy.operand}->{grp.policy.output}] seed={seed}"
    check_bounded_output(yb, x, w, g, grp.bound, grp.policy.operand, grp.policy.output, what)
    assert int(rep.unwritten) == 0, what
    assert int(rep.overlapping_writes) == 0, what


@pytest.mark.slow
@pytest.mark.parametrize(
    "c",
    # C = 16 with whole 2x4 tiles; C = 3 and C = 17 (channels padded to C1 x C0 = 16, 32);
    # C = 16 with a 9x9 output (partial edge tiles, row pitch wo = 4)
    [CASE["3x3-p1"], CASE["1x1-c3"], CASE["3x3-s2"], CASE["5x5-same"]],
    ids=lambda c: c.id,
)
def test_report_flops_are_useful_flops(c: Case):
    """report.flops is documented as *useful* FLOPs (Report.flops: "2 m n k over the real m, n, k
    of every Mmad"): 2 N Ho Wo K C kh kw, whatever the channel padding to C1 x C0 or the junk rows
    of partial edge tiles (those belong in flops_issued)."""
    grp = GROUPS[c.group]
    seed = new_seed()
    x, w = random_layer(np.random.default_rng(seed), c.x, c.w)
    g = geometry(c)
    _, rep = run_bounded(grp.bound, "input_tiled", grp.tilings["input_tiled"], grp.hw, grp.policy, x, w, g)
    n, cc, _, _ = c.x
    k, _, kh, kw = c.w
    want = 2 * n * g.ho * g.wo * k * cc * kh * kw
    assert rep.flops_issued >= want
    assert rep.flops == want, (
        f"{g.describe()}: report.flops={rep.flops} but the layer has {want} useful FLOPs "
        f"(ratio {rep.flops / want:.3f}); C padded to {-(-cc // 16) * 16}, Wo={g.wo} vs tile wo=4"
    )


def test_reference_matches_lax():
    """The float64 reference agrees with lax.conv_general_dilated (fp32, HIGHEST) within the fp32
    accumulation bound of the latter."""
    seed = new_seed()
    rng = np.random.default_rng(seed)
    for c in (CASE["3x3-d2-p12"], CASE["3x3-s2-d2-asym"], CASE["7x7-same"]):
        x, w = random_layer(rng, c.x, c.w)
        g = geometry(c)
        xr, wr = rounded(x, "fp16"), rounded(w, "fp16")
        pt, pb, pl, pr = g.pads
        lx = lax.conv_general_dilated(
            xr.astype(np.float32),
            wr.astype(np.float32),
            g.stride,
            padding=[(pt, pb), (pl, pr)],
            rhs_dilation=g.dilation,
            dimension_numbers=("NCHW", "OIHW", "NCHW"),
            precision=lax.Precision.HIGHEST,
        )
        ref = conv_ref(xr, wr, g)
        s = conv_ref(np.abs(xr), np.abs(wr), g)
        K = g.c * g.kh * g.kw
        err = np.abs(np.asarray(lx, np.float64) - ref)
        assert np.all(err <= gamma(K) * s + 2.0**-149), f"{c.id} seed={seed}"


# ---- the story layer: one layer, each strategy eager / jit / timing-only / bounded -----------------
STORY_X, STORY_W = (2, 16, 8, 8), (32, 16, 3, 3)  # K = 32: two Cout blocks of n = 16
STORY_ARGS = dict(stride=1, padding=1, dilation=1)


@functools.cache
def story_inputs():
    seed = new_seed()
    x, w = random_layer(np.random.default_rng(seed), STORY_X, STORY_W)
    return seed, x, w


def story_geometry() -> ConvGeometry:
    return canonicalize(STORY_X, STORY_W, **STORY_ARGS)


@functools.cache
def story_run(strategy: str, mode: str = "eager", hw=TINY, tiling=None):
    """(y as numpy, report) of the story layer; mode is eager, jit or timing."""
    _, x, w = story_inputs()
    t = STORY_TILINGS[strategy] if tiling is None else tiling
    f = functools.partial(
        conv2d, **STORY_ARGS, strategy=strategy, hw=hw, tiling=t, policy=FP16, timing_only=mode == "timing"
    )
    y, rep = (jax.jit(f) if mode == "jit" else f)(x, w)
    return np.asarray(y), rep


def story_what(strategy, extra=""):
    return f"story layer {story_geometry().describe()} [{strategy}]{extra} seed={story_inputs()[0]}"


def n_instr(rep) -> np.ndarray:
    return np.asarray(rep.n_instr).sum(axis=0)


def assert_same_report(a, b, what):
    assert a.cycles == b.cycles, f"{what}: cycles {a.cycles} != {b.cycles}"
    assert a.bytes == b.bytes, f"{what}: bytes {a.bytes} != {b.bytes}"
    assert a.pipe_busy == b.pipe_busy, f"{what}: pipe_busy {a.pipe_busy} != {b.pipe_busy}"
    np.testing.assert_array_equal(n_instr(a), n_instr(b), err_msg=f"{what}: n_instr")
    assert a.flops == b.flops and a.n_cores == b.n_cores, what
    assert set(a.extras) == set(b.extras), what
    for k in a.extras:
        assert_same_report(a.extras[k], b.extras[k], f"{what} extras[{k!r}]")


@pytest.mark.slow
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_story_layer_matches_reference_and_invariants(strategy):
    _, x, w = story_inputs()
    g = story_geometry()
    y, rep = story_run(strategy)
    what = story_what(strategy)
    assert_conv_close(y, x, w, g, "fp16", "fp16", what)
    N, C, _, _ = STORY_X
    K, _, kh, kw = STORY_W
    assert rep.flops == 2 * N * g.ho * g.wo * K * C * kh * kw, what
    assert int(rep.unwritten) == 0 and int(rep.overlapping_writes) == 0, what
    assert rep.n_cores == 2, what  # tiling cores=2 on the 2-core tiny preset
    # the output leaves L0C once, through Fixpipe on the separated preset
    assert rep.bytes["L0C->GM"] == N * g.ho * g.wo * K * 2 and rep.bytes["UB->GM"] == 0, what
    busy = rep.pipe_busy
    assert all(busy[p] <= rep.cycles * rep.n_cores for p in busy), what
    assert ("relayout" in rep.extras) == (strategy in ("relayout", "img2col")), what


@pytest.mark.slow
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_eager_and_jit_are_bit_identical(strategy):
    y, rep = story_run(strategy)
    yj, repj = story_run(strategy, "jit")
    what = story_what(strategy, " eager vs jit")
    assert_bits_equal(y, yj, what)
    assert_same_report(rep, repj, what)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_conv2d_and_bounded_are_bit_identical(strategy):
    """The story layer inside the fp16 grid's bound (a traced geometry, larger static shapes) gives
    the same bits, cycles, bytes and pipe activity as conv2d on its exact shapes."""
    _, x, w = story_inputs()
    g = story_geometry()
    y, rep = story_run(strategy)
    yb, repb = run_bounded(BOUND_S, strategy, STORY_TILINGS[strategy], TINY, FP16, x, w, g)
    what = story_what(strategy, " conv2d vs conv2d_bounded")
    assert yb.shape == (BOUND_S.n, BOUND_S.k) + bound_out_hw(BOUND_S), what
    assert_bits_equal(y, yb[: g.n, : g.k, : g.ho, : g.wo], what)
    rest = bits(yb).copy()
    rest[: g.n, : g.k, : g.ho, : g.wo] = 0
    assert not rest.any(), f"{what}: nonzero outside the layer's output"
    assert_same_report(rep, repb, what)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["relayout", "img2col"])  # with the relayout kernel; 1 and 2 stages
def test_timing_only_gives_the_same_report(strategy):
    y, rep = story_run(strategy)
    yt, rept = story_run(strategy, "timing")
    what = story_what(strategy, " full vs timing_only")
    assert_same_report(rep, rept, what)
    assert yt.shape == y.shape and not bits(yt).any(), f"{what}: timing-only y should be all zeros"


def test_strategies_agree():
    """The three fractal strategies share one tiling (k_l0 = C0) and one Cube mapping: same Mmads
    in the same order, so bit-identical outputs. img2col's deeper Mmads sum in another order: each
    output is within the error bound of the others."""
    _, x, w = story_inputs()
    g = story_geometry()
    ys = {s: story_run(s)[0] for s in STRATEGIES}
    for s in ("input_tiled", "relayout"):
        assert_bits_equal(ys["output_tiled"], ys[s], story_what(f"output_tiled vs {s}"))
    _, bound = conv_error_bound(x, w, g, "fp16", "fp16")
    for s in STRATEGIES:
        diff = np.abs(ys[s].astype(np.float64) - ys["img2col"].astype(np.float64))
        assert np.all(diff <= 2 * bound), story_what(f"{s} vs img2col")


@pytest.mark.slow
def test_multicore_gives_the_same_output():
    """cores=2 and cores=1 run the same tiles with the same arithmetic; the split is disjoint."""
    y2, rep2 = story_run("img2col")
    t1 = dataclasses.replace(STORY_TILINGS["img2col"], cores=1)
    y1, rep1 = story_run("img2col", tiling=t1)
    what = story_what("img2col", " cores=1 vs cores=2")
    assert (rep1.n_cores, rep2.n_cores) == (1, 2), what
    assert_bits_equal(y1, y2, what)
    assert int(rep1.unwritten) == int(rep2.unwritten) == 0, what
    assert int(rep2.overlapping_writes) == 0, what
    assert rep1.flops == rep2.flops and rep1.bytes == rep2.bytes, what
    assert rep2.cycles < rep1.cycles, f"{what}: two cores took {rep2.cycles} >= {rep1.cycles} cycles"


# ---- the GM-traffic story, read from the reports ---------------------------------------------------
def mte2_cycles_per_byte(rep) -> float:
    return rep.pipe_busy["MTE2"] / rep.bytes["GM->L1"]


def test_story_output_tiled_refetches_the_input():
    """Two Cout blocks: output_tiled fetches every input tile twice, input_tiled once."""
    out_t, in_t = story_run("output_tiled")[1], story_run("input_tiled")[1]
    assert out_t.bytes["GM->L1"] > in_t.bytes["GM->L1"], (out_t.bytes, in_t.bytes)
    # the Cube side is the same: the difference is all DMA
    assert out_t.bytes["L1->L0A"] == in_t.bytes["L1->L0A"]


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["ascend910b", "ascend310p"])
def test_output_tiled_fetches_the_window_per_tap_and_cout_block(preset, rng):
    """One tile per image (the window is the whole image), two Cout blocks, weights per item for
    both: output_tiled reads x kh * kw times per Cout block, input_tiled once; everything else the
    same. The re-reads hit L2 (this core just read them): the HBM bytes are the same."""
    hw = getattr(presets, preset)()
    x = rng.standard_normal((2, 16, 8, 8)).astype(np.float16)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float16)
    t = ConvTiling(ho=6, wo=6, n=16, cin1=1, k_l0=16, weights_resident=False, l1_stages=2, l0_stages=2)
    reps = {
        s: conv2d(x, w, strategy=s, hw=hw, tiling=t, timing_only=True, policy=FP16)[1]
        for s in ("output_tiled", "input_tiled")
    }
    out_t, in_t = reps["output_tiled"], reps["input_tiled"]
    x_bytes = x.size * 2  # C = 16 = C0: no channel padding
    assert out_t.bytes["GM->L1"] - in_t.bytes["GM->L1"] == (2 * 9 - 1) * x_bytes, (out_t.bytes, in_t.bytes)
    assert out_t.hbm_bytes == in_t.hbm_bytes, (out_t.hbm_bytes, in_t.hbm_bytes)
    assert out_t.l2_hit_bytes - in_t.l2_hit_bytes == (2 * 9 - 1) * x_bytes
    assert out_t.cycles > in_t.cycles


def test_story_relayout_moves_the_same_conv_bytes_as_input_tiled():
    rel, in_t = story_run("relayout")[1], story_run("input_tiled")[1]
    assert rel.bytes["GM->L1"] == in_t.bytes["GM->L1"], (rel.bytes, in_t.bytes)
    assert rel.gm_bytes == in_t.gm_bytes


def test_story_relayout_has_longer_bursts():
    """relayout reads NC1HWC0 input and K-major weights: longer GM bursts than input_tiled's NCHW /
    OIHW reads, so fewer MTE2 cycles per byte of the conv kernel (the relayout kernel itself is
    reported apart, in extras)."""
    rel, in_t = story_run("relayout")[1], story_run("input_tiled")[1]
    r, i = mte2_cycles_per_byte(rel), mte2_cycles_per_byte(in_t)
    assert r < i, (
        f"relayout spends {r:.4f} MTE2 cycles/byte (busy {rel.pipe_busy['MTE2']}), "
        f"input_tiled {i:.4f} (busy {in_t.pipe_busy['MTE2']}), on {rel.bytes['GM->L1']} B each"
    )


def test_story_img2col_issues_fewer_mmads():
    rel, i2c = story_run("relayout")[1], story_run("img2col")[1]
    m = PIPE_INDEX["M"]
    assert n_instr(i2c)[m] < n_instr(rel)[m], (n_instr(i2c), n_instr(rel))


# ---- presets ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_coupled_preset_matches_reference():
    """910/310P data path: L0C -> UB (V) -> GM (MTE3). Same arithmetic and one rounding at the way
    out, so the same bits as the separated preset's Fixpipe."""
    _, x, w = story_inputs()
    g = story_geometry()
    y, rep = story_run("input_tiled", hw=presets.tiny(coupled=True))
    what = story_what("input_tiled", " tiny(coupled=True)")
    assert_conv_close(y, x, w, g, "fp16", "fp16", what)
    assert_bits_equal(y, story_run("input_tiled")[0], what)
    out_bytes = g.n * g.ho * g.wo * g.k * 2
    assert rep.bytes["L0C->UB"] == rep.bytes["UB->GM"] == out_bytes, f"{what}: {rep.bytes}"
    assert rep.bytes["L0C->GM"] == 0, what
    assert rep.pipe_busy["VECTOR"] > 0 and rep.pipe_busy["MTE3"] > 0 and rep.pipe_busy["FIXP"] == 0, what
    assert int(rep.unwritten) == 0 and int(rep.overlapping_writes) == 0, what


def test_910b_preset_matches_reference():
    _, x, w = story_inputs()
    g = story_geometry()
    t = ConvTiling(ho=4, wo=8, n=32, cin1=1, k_l0=48, l1_stages=2, l0_stages=2)
    y, rep = story_run("img2col", hw=presets.ascend910b(), tiling=t)
    what = story_what("img2col", " ascend910b")
    assert_conv_close(y, x, w, g, "fp16", "fp16", what)
    assert rep.flops == g.flops and int(rep.unwritten) == 0 and int(rep.overlapping_writes) == 0
    assert rep.n_cores == 4  # 2 images x 2 row tiles x 1 col tile, well under the 20 cores


# ---- bad input -------------------------------------------------------------------------------------
def _call(x_shape=(1, 16, 8, 8), w_shape=(16, 16, 3, 3), dtype=np.float32, **kw):
    args = dict(
        stride=1, padding=1, dilation=1, strategy="input_tiled", hw=TINY, tiling=fractal_tiling(), policy=FP16
    )
    args.update(kw)
    x = np.ones(x_shape, dtype)
    w = np.ones(w_shape, dtype)
    return conv2d(x, w, **args)


BAD = [
    ("x-rank", dict(x_shape=(16, 8, 8)), ValueError, r"x must be 4-D"),
    ("w-rank", dict(w_shape=(16, 16, 3)), ValueError, r"w must be 4-D"),
    ("channels", dict(w_shape=(16, 8, 3, 3)), ValueError, r"channel mismatch.*C=16"),
    ("neg-padding", dict(padding=-1), ValueError, r"padding must be >= 0"),
    ("neg-padding-pair", dict(padding=((0, -1), (1, 1))), ValueError, r"padding must be >= 0"),
    ("zero-stride", dict(stride=0), ValueError, r"stride must be >= 1"),
    ("zero-stride-pair", dict(stride=(1, 0)), ValueError, r"stride must be >= 1"),
    ("zero-dilation", dict(dilation=0), ValueError, r"dilation must be >= 1"),
    (
        "kernel-too-big",
        dict(x_shape=(1, 16, 4, 4), w_shape=(16, 16, 7, 7), padding=1),
        ValueError,
        r"kernel 7x7.*larger than the padded input 6x6",
    ),
    (
        "dilated-kernel-too-big",
        dict(x_shape=(1, 16, 6, 6), padding=0, dilation=3),
        ValueError,
        r"kernel 3x3 with dilation \(3, 3\)",
    ),
    ("strategy", dict(strategy="winograd"), ValueError, r"strategy must be one of.*'winograd'"),
    ("padding-string", dict(padding="FULL"), ValueError, r"padding must be .*'FULL'"),
    ("groups", dict(groups=2), ValueError, r"groups=2"),
    ("int-dtype", dict(dtype=np.int32), TypeError, r"x must be a float array.*int32"),
    (
        "l1-capacity",
        dict(tiling=fractal_tiling(ho=8, wo=8), x_shape=(1, 256, 16, 16), w_shape=(16, 256, 7, 7), padding=3),
        CapacityError,
        r"\bL1\b.*x_l1",
    ),
    (
        "k_l0-multiple",
        dict(strategy="img2col", tiling=img2col_tiling(k_l0=24)),
        TilingError,
        r"k_l0 must be a multiple of C0=16.*24",
    ),
    (
        "k_l0-fractal",
        dict(strategy="relayout", tiling=fractal_tiling(k_l0=32)),
        TilingError,
        r"k_l0 must be C0=16, got 32",
    ),
    ("fp32-k_l0", dict(policy=FP32, tiling=fractal_tiling()), TilingError, r"k_l0 must be C0=8"),
    (
        "resident-output_tiled",
        dict(strategy="output_tiled", tiling=fractal_tiling(weights_resident=True)),
        TilingError,
        r"weights_resident",
    ),
    ("cores", dict(tiling=fractal_tiling(cores=3)), TilingError, r"cores=3"),
]


@pytest.mark.parametrize("kw,exc,match", [pytest.param(*b[1:], id=b[0]) for b in BAD])
def test_bad_input_raises(kw, exc, match):
    with pytest.raises(exc, match=match):
        _call(**kw)


@pytest.mark.parametrize(
    "field,value",
    [("n", 20), ("n", 0), ("ho", 0), ("k_l0", -16), ("cin1", 1.5), ("l1_stages", 3), ("cores", 0)],
)
def test_bad_tiling_raises(field, value):
    kw = dict(ho=2, wo=4, n=16, cin1=1, k_l0=16)
    kw[field] = value
    with pytest.raises(TilingError, match=rf"ConvTiling\.{field}"):
        ConvTiling(**kw)


def test_c0_table_matches_operand_width():
    for op, c0 in C0.items():
        assert c0 * NP_DTYPE[op].itemsize == 32

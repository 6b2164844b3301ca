"""The data path computed apart from the timing (``kernels/values.py``) against the instructions.

``run_plan`` computes a Conv2D's output in whole-tensor operations and runs the kernel timing-only;
``data_path="instructions"`` moves the data through every instruction. The two must give the same
bits and the same report, for every strategy, format, accumulation, rounding mode, grouped layers
and fused epilogues; where the values path does not cover a plan (stochastic rounding) the
instructions run. Layers, policies and inputs are drawn fresh (the seed is in every message).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest_conv import NP_DTYPE, assert_bits_equal, new_seed

import npu_jax
from npu_jax.core import run
from npu_jax.core.pipes import PIPE_INDEX
from npu_jax.core.policy import ACCUMULATE, Policy
from npu_jax.cost.conv import predict
from npu_jax.hw import presets
from npu_jax.kernels import launch, values
from npu_jax.kernels.values import covers, mmad_bounds
from npu_jax.mapping.conv import STRATEGIES, make_plan
from npu_jax.mapping.epilogue import canonical_steps, split
from npu_jax.search.choose import choose_tiling
from npu_jax.workload.conv import canonicalize

TINY = presets.tiny()


def _same_report(r1, r2, what):
    for f in ("cycles", "flops", "bytes", "unwritten", "overlapping_writes"):
        a, b = getattr(r1, f), getattr(r2, f)
        assert np.array_equal(np.asarray(a), np.asarray(b)), f"{what}: report.{f} {a} != {b}"
    assert int(r2.unwritten) == 0 and int(r2.overlapping_writes) == 0, what
    assert r1.pipe_busy == r2.pipe_busy, f"{what}: pipe busy differs"


def _both(p, x, w, policy, what, bias=None, residual=None):
    """y and report of both data paths, asserted identical; returns y of the values path."""
    ys, reps = [], []
    for path in ("instructions", "values"):
        y, rep = launch.run_plan(p, x, w, policy, bias=bias, residual=residual, data_path=path)
        ys.append(np.asarray(y))
        reps.append(rep)
    assert_bits_equal(ys[0], ys[1], what)
    _same_report(reps[0], reps[1], what)
    return ys[1]


def _draw_layer(rng):
    groups = int(rng.choice([1, 1, 2, 4]))
    c = groups * int(rng.integers(1, 12))
    k = groups * int(rng.integers(1, 10))
    kh, kw = (int(v) for v in rng.integers(1, 4, 2))
    h, w_ = (int(v) for v in rng.integers(max(kh, kw) + 2, 13, 2))
    stride = tuple(int(v) for v in rng.integers(1, 3, 2))
    dil = tuple(int(v) for v in rng.integers(1, 3, 2))
    pad = int(rng.integers(0, 3))
    n = int(rng.integers(1, 3))
    return (n, c, h, w_), (k, c // groups, kh, kw), stride, pad, dil, groups


def _draw_policy(rng):
    op = str(rng.choice(["fp16", "bf16", "fp32"]))
    return Policy(
        operand=op,
        accumulate=str(rng.choice(ACCUMULATE)),
        output=str(rng.choice(["fp16", "bf16", "fp32"])),
        rounding=str(rng.choice(["nearest_even", "toward_zero", "up", "down", "away"])),
        subnormals=bool(rng.integers(0, 2)),
        vector=str(rng.choice(["fp32", "fp16"])),
    )


@pytest.mark.slow
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_values_equal_the_instructions_on_random_layers_and_policies(strategy):
    seed = new_seed()
    rng = np.random.default_rng(seed)
    for i in range(2):
        xs, ws, stride, pad, dil, groups = _draw_layer(rng)
        policy = _draw_policy(rng)
        g = canonicalize(xs, ws, stride, pad, dil, groups)
        op = policy.operand
        x = (rng.standard_normal(xs) * 2.0).astype(NP_DTYPE[op])
        w = rng.standard_normal(ws).astype(NP_DTYPE[op])
        p = make_plan(
            g, strategy, choose_tiling(g, strategy, TINY, op, policy.output), TINY, op, policy.output
        )
        assert covers(p, policy)
        _both(p, x, w, policy, f"{strategy} {g.describe()} {policy} seed={seed} draw {i}")


def test_values_keep_non_finite_inputs_and_fp32_operands_bit_exact():
    """NaN, inf and huge fp32 operands: the Mmad's special-value path, on the whole K at once."""
    seed = new_seed()
    rng = np.random.default_rng(seed)
    g = canonicalize((1, 12, 7, 9), (10, 12, 3, 3), 1, 1, 1, 1)
    policy = Policy(operand="fp32", output="fp32")
    x = rng.standard_normal((1, 12, 7, 9)).astype(np.float32)
    x[0, 3, 2, 4], x[0, 5, 6, 0], x[0, 7, 1, 1] = np.nan, np.inf, -3e38
    w = rng.standard_normal((10, 12, 3, 3)).astype(np.float32)
    p = make_plan(g, "img2col", choose_tiling(g, "img2col", TINY, "fp32", "fp32"), TINY, "fp32", "fp32")
    y = _both(p, x, w, policy, f"non-finite fp32 seed={seed}")
    assert np.isnan(y).any() and np.isfinite(y).any()


@pytest.mark.slow
@pytest.mark.parametrize("hw", [presets.ascend910b(), presets.ascend910()], ids=lambda h: h.name)
def test_values_equal_the_instructions_through_fused_epilogues(hw):
    """Fixpipe's bias and activation (910B) and the vector unit's chain in UB (910), in both vector
    formats, with the residual and the cast."""
    seed = new_seed()
    rng = np.random.default_rng(seed)
    g = canonicalize((2, 20, 9, 11), (24, 20, 3, 3), 1, 1, 1, 1)
    x = rng.standard_normal((2, 20, 9, 11)).astype(np.float16)
    w = (rng.standard_normal((24, 20, 3, 3)) * 0.3).astype(np.float16)
    cases = [
        (["bias", ("leaky_relu", 0.1)], Policy()),
        (["bias", ("clipped_relu", 1.0), ("cast", "fp32")], Policy(vector="fp16")),
    ]
    if hw.coupled:
        cases.append((["bias", "abs", "residual", "relu"], Policy(vector="fp16")))
    for chain, policy in cases:
        epi, rest, mid, _ = split(canonical_steps(chain), hw, policy, True)
        assert epi is not None and not rest
        t = choose_tiling(g, "img2col", hw, "fp16", mid)
        p = make_plan(g, "img2col", t, hw, "fp16", mid, epi=epi)
        bias = rng.standard_normal(24)
        res = jnp.asarray(rng.standard_normal((2, g.ho, g.wo, 24))) if epi.has("residual") else None
        _both(p, x, w, policy, f"{hw.name} {epi} {policy.vector} seed={seed}", bias=bias, residual=res)


def test_what_values_do_not_cover_runs_the_instructions():
    """Stochastic rounding keys its bits by instruction counts and tile offsets: not covered, so the
    instructions move the data (and both data paths agree because they are one)."""
    seed = new_seed()
    rng = np.random.default_rng(seed)
    g = canonicalize((1, 16, 6, 6), (16, 16, 3, 3), 1, 1, 1, 1)
    policy = Policy(rounding="stochastic", seed=3)
    p = make_plan(g, "img2col", choose_tiling(g, "img2col", TINY), TINY)
    assert not covers(p, policy)
    x = rng.standard_normal((1, 16, 6, 6)).astype(np.float16)
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float16)
    _both(p, x, w, policy, f"stochastic seed={seed}")


def test_mmad_bounds_are_the_kernels_mmads():
    """fp16_tile rounds where the kernel's Mmads end: as many Mmads as the report counts."""
    g = canonicalize((1, 40, 6, 6), (16, 40, 3, 3), 1, 1, 1, 1)
    for t in (
        npu_jax.ConvTiling(ho=3, wo=6, n=16, cin1=2, k_l0=64),
        npu_jax.ConvTiling(ho=2, wo=6, n=16, cin1=3, k_l0=144),
    ):
        p = make_plan(g, "img2col", t, TINY)
        ends = mmad_bounds(p)
        assert ends[-1] == p.k_total and list(ends) == sorted(set(ends))
        _, rep = npu_jax.conv2d(
            np.ones((1, 40, 6, 6)),
            np.ones((16, 40, 3, 3)),
            1,
            1,
            hw=TINY,
            tiling=t,
            timing_only=True,
            policy=Policy(),
        )
        mmads = int(np.asarray(rep.n_instr)[:, PIPE_INDEX["M"]].sum())  # the Cube issues only Mmads
        assert mmads == len(ends) * p.n_tiles * p.n_cb, t


def test_a_jitted_conv_does_only_the_data_work_and_keeps_its_report():
    """Under jit the report is computed concretely once and is part of the program as constants:
    the same report and bits as an eager call; a repeat call reuses the kept report."""
    seed = new_seed()
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, 16, 8, 8)).astype(np.float16)
    w = rng.standard_normal((24, 16, 3, 3)).astype(np.float16)
    f = jax.jit(lambda x, w: npu_jax.conv2d(x, w, padding=1, hw=TINY, policy=Policy()))
    y1, r1 = f(x, w)
    y0, r0 = npu_jax.conv2d(x, w, padding=1, hw=TINY, policy=Policy())
    assert_bits_equal(y0, y1, f"eager vs jit seed={seed}")
    assert int(r0.cycles) == int(r1.cycles)
    kept = len(run._REPORTS)
    y2, r2 = npu_jax.conv2d(x * 2, w, padding=1, hw=TINY, policy=Policy())
    assert len(run._REPORTS) == kept and r2 is r0


@pytest.mark.slow
@pytest.mark.parametrize("hw", [TINY, presets.ascend910()], ids=lambda h: h.name)
def test_matmul_values_equal_the_instructions(hw):
    """GEMM: K not a multiple of the tiles or the fractal, every accumulation mode and format."""
    seed = new_seed()
    rng = np.random.default_rng(seed)
    for i in range(3):
        M, K, N = (int(v) for v in rng.integers(1, 130, 3))
        policy = _draw_policy(rng)
        if hw.name.startswith("tiny") and policy.operand == "fp32":
            # the tiny preset's default GEMM tiling does not always fit fp32 tiles (its L0B is 8 KiB)
            policy = dataclasses.replace(policy, operand="bf16")
        if policy.operand not in hw.cube_operands:  # the 910's Cube takes fp16 and int8 only
            x = np.ones((16, 16), NP_DTYPE[policy.operand])
            with pytest.raises(ValueError, match=f"{hw.name}'s Cube takes"):
                npu_jax.matmul(x, x, hw=hw, policy=policy)
            policy = dataclasses.replace(policy, operand="fp16")
        a = rng.standard_normal((M, K)).astype(NP_DTYPE[policy.operand])
        b = rng.standard_normal((K, N)).astype(NP_DTYPE[policy.operand])
        what = f"matmul {M}x{K}x{N} {policy} on {hw.name} seed={seed} draw {i}"
        c1, r1 = npu_jax.matmul(a, b, hw=hw, policy=policy, data_path="instructions")
        c2, r2 = npu_jax.matmul(a, b, hw=hw, policy=policy)
        assert_bits_equal(np.asarray(c1), np.asarray(c2), what)
        _same_report(r1, r2, what)


@pytest.mark.parametrize("strategy", ["output_tiled", "img2col"])
def test_a_tile_whose_window_starts_past_the_image_fetches_nothing(strategy):
    """Padding wider than the dilated kernel's reach: the last column of tiles reads only padding.
    Its window starts at the image's edge (memcheck once found it starting past the stored tensor);
    both data paths, and the closed-form model, agree."""
    seed = new_seed()
    rng = np.random.default_rng(seed)
    g = canonicalize((1, 28, 9, 4), (8, 7, 1, 1), 1, 2, (1, 2), 4)
    t = npu_jax.ConvTiling(ho=13, wo=7, n=16, cin1=4, k_l0=8)
    policy = Policy(operand="fp32", output="fp32")
    p = make_plan(g, strategy, t, TINY, "fp32", "fp32")
    assert (p.n_tw - 1) * t.wo * g.stride[1] - g.pads[2] > g.w  # the case
    x = rng.standard_normal((1, 28, 9, 4)).astype(np.float32)
    w = rng.standard_normal((8, 7, 1, 1)).astype(np.float32)
    y = _both(p, x, w, policy, f"{strategy} past the edge seed={seed}")
    assert np.all(y[:, :2] == 0) and np.all(y[:, -2:] == 0)  # rows of padding only
    _, rep = launch.run_plan(p, x, w, policy)
    assert predict(p).cycles == rep.cycles


@pytest.mark.parametrize("operand", ["fp16", "fp32"])
def test_the_hosts_blocking_decides_no_bit(monkeypatch, operand):
    """conv_values works in blocks sized for the host's caches: chunks of images for im2col, blocks
    of columns and of rows for the accumulation. No add depends on them: blocks far smaller than
    the defaults (chunks of two images, the last one padded; blocks of 8 columns and 8 rows) give the same bits as one
    block of everything, for every accumulation mode, on grouped and strided layers."""
    seed = new_seed()
    rng = np.random.default_rng(seed)
    raw = jax.jit(values.conv_values.__wrapped__, static_argnums=(0, 1))
    for i, accumulate in enumerate(ACCUMULATE):
        n, groups = int(rng.choice([3, 5])), int(rng.choice([1, 2]))
        c, k = groups * int(rng.integers(3, 20)), groups * int(rng.integers(9, 40))
        g = canonicalize((n, c, 9, 11), (k, c // groups, 3, 2), (1, 2), 1, 1, groups)
        policy = Policy(operand=operand, accumulate=accumulate, output="fp32")
        p = make_plan(g, "img2col", choose_tiling(g, "img2col", TINY, operand, "fp32"), TINY, operand, "fp32")
        x = (rng.standard_normal((n, c, 9, 11)) * 2.0).astype(NP_DTYPE[operand])
        w = rng.standard_normal((k, c // groups, 3, 2)).astype(NP_DTYPE[operand])
        two_images = 2 * p.k_total * p.gv.ho * p.gv.wo * np.dtype(NP_DTYPE[operand]).itemsize
        ys = []
        for im2col_bytes, cols, col_rows, rows_bytes in (
            (1 << 40, 1 << 20, 1 << 40, 1 << 40),
            (two_images, 8, 8, 256),
        ):
            monkeypatch.setattr(values, "_IM2COL_BYTES", im2col_bytes)
            monkeypatch.setattr(values, "_COLS", cols)
            monkeypatch.setattr(values, "_COL_BLOCK_ROWS", col_rows)
            monkeypatch.setattr(values, "_ROWS_BYTES", rows_bytes)
            raw.clear_cache()
            ys.append(np.asarray(raw(p, policy, x, w)))
        assert_bits_equal(ys[0], ys[1], f"{g.describe()} {policy} seed={seed} draw {i}")


def test_an_output_of_zeros_is_plus_zero_on_both_paths():
    # a 1x1 conv of one channel, strided over its padding: the padded outputs are one product 0 x w
    # (-0 for a negative weight) plus the fractal's +0 lanes; an L0C value is never -0, on either path
    # (the values path's one-step scan over a zero accumulator once kept the -0: XLA folds +0 + s)
    seed = new_seed()
    rng = np.random.default_rng(seed)
    g = canonicalize((1, 1, 3, 6), (4, 1, 1, 1), 2, 1)
    policy = Policy(operand="fp16", accumulate="fp16_step", output="bf16", rounding="away")
    p = make_plan(g, "relayout", choose_tiling(g, "relayout", TINY, "fp16", "bf16"), TINY, "fp16", "bf16")
    x = (rng.standard_normal((1, 1, 3, 6)) * 2.0).astype(np.float16)
    w = (-np.abs(rng.standard_normal((4, 1, 1, 1))) - 0.1).astype(np.float16)  # every weight negative
    y = _both(p, x, w, policy, f"seed={seed}")
    zeros = np.asarray(y, np.float32) == 0
    assert zeros.any() and not np.signbit(np.asarray(y, np.float32)[zeros]).any(), f"seed={seed}"


@pytest.mark.parametrize("operand", ["fp16", "fp32"])
def test_a_narrow_layer_drops_its_zero_lanes_bit_exactly(monkeypatch, operand):
    """A layer with fewer channels than a fractal (ResNet-50's conv1: C = 3 of 16) accumulates on
    C rounded up to a power of two (``values.lanes``); the same bits as all C0 lanes, in every
    accumulation mode, strided, dilated, grouped, with an inf and a NaN among the inputs."""
    seed = new_seed()
    rng = np.random.default_rng(seed)
    raw = jax.jit(values.conv_values.__wrapped__, static_argnums=(0, 1))
    c0, lanes, reduced = TINY.c0(np.dtype(NP_DTYPE[operand]).itemsize), values.lanes, []
    for i, accumulate in enumerate(ACCUMULATE):
        # the first two draws dense (C < C0 / 2: narrow by construction), the others dense or grouped
        groups = 1 if i < 2 else int(rng.choice([1, 2]))
        c, k = groups * int(rng.integers(1, c0 // 2 + 1)), groups * int(rng.integers(1, 20))
        g = canonicalize((2, c, 11, 9), (k, c // groups, 3, 3), (1, 2), 1, (2, 1), groups)
        policy = Policy(operand=operand, accumulate=accumulate, output="fp32")
        p = make_plan(g, "img2col", choose_tiling(g, "img2col", TINY, operand, "fp32"), TINY, operand, "fp32")
        reduced.append(lanes(p) < p.c0)
        x = (rng.standard_normal((2, c, 11, 9)) * 2.0).astype(NP_DTYPE[operand])
        x[0, 0, 3, 4], x[1, -1, 5, 2] = np.inf, np.nan
        w = rng.standard_normal((k, c // groups, 3, 3)).astype(NP_DTYPE[operand])
        ys = []
        for narrow in (False, True):
            monkeypatch.setattr(values, "lanes", lanes if narrow else (lambda p: p.c0))
            raw.clear_cache()
            ys.append(np.asarray(raw(p, policy, x, w)))
        assert_bits_equal(ys[0], ys[1], f"{g.describe()} {policy} seed={seed} draw {i}")
    assert sum(reduced) >= 2, f"seed={seed}: too few narrow draws ({reduced})"

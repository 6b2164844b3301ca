"""The closed-form schedule against the emulator on random (layer, tiling, hardware) triples.

The hardware is drawn from the presets and from random valid :class:`HardwareConfig` s (Cube 16x16
or 32x32, other rates, start-ups, burst gaps, buffer sizes, core counts, coupled or not); the
strategy, the tiling and the fused epilogue (Fixpipe or UB, bias / ReLU / residual / abs) at random. Each
(hardware, strategy, tiling, epilogue) compiles one timing-only kernel bounded by ``BOUND``; random
layers inside the bound then run through it with their fields traced. ``cost.conv.predict`` sees only
the plan and must give the emulator's cycles and GM bytes exactly, and the search's jax schedule
(``search.exact``) the same cycles where the plan is one of its img2col points.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import npu_jax
from npu_jax.core.buffers import DTYPES
from npu_jax.core.policy import Policy
from npu_jax.cost.conv import lower_bound, predict
from npu_jax.errors import NpuError
from npu_jax.hw.config import Assumed, HardwareConfig
from npu_jax.hw.costs import Rate, ceil_rate
from npu_jax.kernels.launch import run_plan
from npu_jax.mapping.conv import L2_ROLES, STRATEGIES, ConvTiling, make_plan
from npu_jax.mapping.epilogue import canonical_steps, split
from npu_jax.search import exact
from npu_jax.search.choose import candidate_tilings
from npu_jax.workload.conv import ConvGeometry, canonicalize

KiB = 1024
BOUND = ConvGeometry(2, 40, 12, 12, 48, 3, 3, (2, 2), (1, 1), (1, 1, 1, 1))
CHAINS = (("bias", "relu"), ("relu",), ("bias", "residual", "relu"), ("leaky_relu",), ("bias", "abs"))
GROUPS = 12  # (hardware, strategy, tiling) programs: 4 on presets, 8 on random configs
LAYERS = 26  # random layers through each program


def random_hw(rng) -> HardwareConfig:
    """A valid HardwareConfig away from the presets."""
    cube = int(rng.choice([16, 32]))
    pick = lambda *v: v[int(rng.integers(len(v)))]  # noqa: E731
    gm = float(pick(16, 24, 32, 48))
    cores = int(pick(1, 2, 3, 4))
    # the chip's GM rate: unshared, or shared by the cores and often binding (chip < gm x cores):
    # a core's share chip / active cores is fractional (test_shared_chip_gm_rate)
    chip = None if rng.integers(3) == 0 else round(gm * cores * float(rng.uniform(0.3, 1.2)), 1)
    return HardwareConfig(
        name="random",
        num_cores=cores,
        l1_bytes=pick(96, 128, 256) * KiB,
        l0a_bytes=pick(16, 32, 64) * KiB,
        l0b_bytes=pick(16, 32, 64) * KiB,
        l0c_bytes=pick(32, 64, 128) * KiB,
        ub_bytes=pick(48, 64, 192) * KiB,
        gm_bytes_per_cycle=gm,
        chip_gm_bytes_per_cycle=chip,
        l1_to_l0a_bytes_per_cycle=float(pick(256, 512, 1024)),
        l1_to_l0b_bytes_per_cycle=pick(None, 128.0, 512.0),
        l0c_to_ub_bytes_per_cycle=float(pick(128, 256)),
        ub_to_gm_bytes_per_cycle=pick(None, 24.0, 64.0),
        cube_m=cube,
        cube_n=cube,
        vector_repeat_bytes=int(pick(128, 256)),
        coupled=bool(rng.integers(2)),
        assumed=Assumed(
            mte2_startup=int(rng.integers(8, 130)),
            mte3_startup=int(rng.integers(8, 130)),
            mte1_startup=int(rng.integers(1, 20)),
            mmad_startup=int(rng.integers(1, 30)),
            fixpipe_startup=int(rng.integers(1, 40)),
            vector_startup=int(rng.integers(1, 20)),
            gm_burst_overhead=int(rng.integers(0, 9)),
            dma_row_cycles=int(pick(0, 0, 2, 5)),  # the DMA's row rate: off, or binding short rows
            fixpipe_bytes_per_cycle=float(pick(32, 64, 128)),
        ),
    )


def draw_layer(rng) -> ConvGeometry:
    while True:
        n, c = int(rng.integers(1, BOUND.n + 1)), int(rng.integers(1, BOUND.c + 1))
        h, w = int(rng.integers(3, BOUND.h + 1)), int(rng.integers(3, BOUND.w + 1))
        k, kh, kw = int(rng.integers(1, BOUND.k + 1)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
        s = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
        pads = tuple(int(v) for v in rng.integers(0, 2, 4))
        try:
            return canonicalize((n, c, h, w), (k, c, kh, kw), s, ((pads[0], pads[1]), (pads[2], pads[3])), 1)
        except ValueError:
            continue


def draw_tiling(rng, strategy: str, hw: HardwareConfig) -> ConvTiling:
    deep = strategy == "img2col"
    return ConvTiling(
        ho=int(rng.integers(1, 6)),
        wo=int(rng.integers(1, 8)),
        n=16 * int(rng.integers(1, 4)),
        cin1=int(rng.integers(1, 4)),
        k_l0=16 * int(rng.integers(1, 5)) if deep else 16,
        weights_resident=strategy != "output_tiled" and bool(rng.integers(2)),
        l1_stages=int(rng.integers(1, 3)) if deep else 1,
        l0_stages=int(rng.integers(1, 3)) if deep else 1,
        cores=None if rng.integers(2) else int(rng.integers(1, hw.num_cores + 1)),
        cout_split=int(rng.integers(1, min(hw.num_cores, 3) + 1)),
    )


def epilogue_of(chain, hw):
    if chain is None:
        return None, "fp16"
    epi, rest, out, _ = split(canonical_steps(list(chain)), hw, Policy(), True)
    return (None, "fp16") if rest else (epi, out)


def bounded_plan(rng, strategy, hw, chain):
    """A tiling whose bounded plan fits ``hw`` (None after a few tries)."""
    epi, out = epilogue_of(chain, hw)
    for _ in range(40):
        t = draw_tiling(rng, strategy, hw)
        try:
            make_plan(BOUND, strategy, t, hw, "fp16", out, BOUND, epi)
        except NpuError:
            continue
        return t, epi, out
    return None


@functools.cache
def runner(strategy, tiling, hw, epi, out, resident=None):
    """One compiled timing-only kernel: a layer (traced fields) inside BOUND -> report; ``resident``:
    the roles a network's schedule left in L2 (``ConvPlan.l2_resident``)."""
    B = BOUND

    @jax.jit
    def run(g):
        p = make_plan(g, strategy, tiling, hw, "fp16", out, B, epi, l2_resident=resident)
        x = jnp.zeros((B.n, B.c, B.h, B.w), jnp.float16)
        w = jnp.zeros((B.k, B.c, B.kh, B.kw), jnp.float16)
        bias = residual = None
        if epi is not None and epi.has("bias"):
            bias = jnp.zeros((B.k,), DTYPES[epi.bias_format])
        if epi is not None and epi.has("residual"):
            residual = jnp.zeros((B.n, p.ho_cap, p.wo_cap, B.k), DTYPES[epi.residual_format])
        _, rep = run_plan(p, x, w, Policy(), bias=bias, residual=residual, move_data=False)
        return rep

    return run


def draw_resident(rng):
    """What a network's schedule left in L2: None (the layer-at-a-time rule) half the time, else a
    random subset of the roles."""
    if rng.integers(2) == 0:
        return None
    return tuple(r for r in L2_ROLES if rng.integers(2))


def check_triples(rng, hw, strategy, chain, n_tilings, n_layers):
    """Model == emulator on n_tilings x n_layers triples; returns how many were checked."""
    checked = 0
    for _ in range(n_tilings):
        drawn = bounded_plan(rng, strategy, hw, chain)
        if drawn is None:
            continue
        t, epi, out = drawn
        resident = draw_resident(rng)
        run = runner(strategy, t, hw, epi, out, resident)
        for _ in range(n_layers):
            g = draw_layer(rng)
            p = make_plan(g, strategy, t, hw, "fp16", out, BOUND, epi, l2_resident=resident)
            rep = run(jax.tree.map(jnp.int32, g))
            pred = predict(p)
            where = (hw, strategy, t, epi, resident, g.describe())
            assert pred.cycles == int(rep.cycles), (pred.cycles, int(rep.cycles), where)
            assert pred.gm_bytes == int(rep.gm_bytes), (pred.gm_bytes, int(rep.gm_bytes), where)
            assert lower_bound(p) <= pred.cycles, where
            checked += 1
    return checked


@pytest.mark.slow
def test_model_equals_emulator_on_random_hardware(rng):
    """>= 300 random triples over presets and random configs, all four strategies, epilogues."""
    presets = [
        npu_jax.presets.tiny(),
        npu_jax.presets.tiny(coupled=True),
        npu_jax.presets.ascend910b().replace(num_cores=3),
        npu_jax.presets.ascend910().replace(num_cores=2),
    ]
    checked, cube32, coupled, fused, programs = 0, 0, 0, 0, 0
    while checked < 300 and programs < 2 * GROUPS:  # a program whose tilings never fit is skipped
        hw = presets[programs] if programs < len(presets) else random_hw(rng)
        strategy = STRATEGIES[programs % len(STRATEGIES)]
        chain = CHAINS[int(rng.integers(len(CHAINS)))] if rng.integers(3) == 0 else None
        n = check_triples(rng, hw, strategy, chain, 1, LAYERS)
        programs += 1
        checked += n
        cube32 += n * (hw.cube_m == 32)
        coupled += n * hw.coupled
        fused += n * (chain is not None)
    print(
        f"\nmodel vs emulator: {checked} triples through {programs} programs, {cube32} on 32x32 Cubes, "
        f"{coupled} coupled, {fused} with a fused epilogue"
    )
    assert checked >= 300, checked


@pytest.mark.slow
def test_cube_32x32_mmad_cost_matches():
    """A 32x32 Cube takes one (32 x K0 x 32) block per cycle: the model used 16x16 blocks and said
    686 cycles where the emulator says 683 (a 1x1 conv 3 -> 24 channels on 10x10, one 80 x 64 tile,
    on the default config with a 32x32 Cube; no L2 and no launch cost, the chip of that time)."""
    hw = HardwareConfig(cube_m=32, cube_n=32, l2_bytes=0, assumed=Assumed(launch_us=0.0))
    g = canonicalize((1, 3, 10, 10), (24, 3, 1, 1), 1, 0)
    t = ConvTiling(ho=8, wo=10, n=64, cin1=1, k_l0=64, l1_stages=1, l0_stages=1)
    p = make_plan(g, "img2col", t, hw)
    rep = runner("img2col", t, hw, None, "fp16")(jax.tree.map(jnp.int32, g))
    assert predict(p).cycles == int(rep.cycles) == 683
    L, T = exact.layer_of(g), exact.tilings_from([t])
    assert int(exact.batch_cycles(L, T, exact.hw_of(hw), hw.num_cores, hw.coupled)[0]) == 683


@pytest.mark.parametrize("fused", [False, True])
def test_search_schedule_equals_predict_on_random_hardware(fused, rng):
    """The search's jax schedule (``exact``) and ``predict`` (numpy): the same code, the same cycles,
    on random hardware (Cube sizes included) and random legal img2col points."""
    checked = 0
    for _ in range(2):
        hw = random_hw(rng)
        g = draw_layer(rng)
        ts = []
        for _ in range(200):
            t = draw_tiling(rng, "img2col", hw)
            t = ConvTiling(**{**t.__dict__, "cores": None, "l0_stages": t.l1_stages})
            if exact.legal(
                *(exact.layer_of(g), exact.tilings_from([t]), exact.hw_of(hw)),
                hw.num_cores,
                hw.coupled,
                fused,
            )[0]:
                ts.append(t)
            if len(ts) == 8:
                break
        if not ts:
            continue
        epi, out = exact.epilogue(hw.coupled) if fused else (None, "fp16")
        got = exact.batch_cycles(
            exact.layer_of(g), exact.tilings_from(ts), exact.hw_of(hw), hw.num_cores, hw.coupled, fused
        )
        for t, c in zip(ts, np.asarray(got)):
            assert int(c) == predict(make_plan(g, "img2col", t, hw, "fp16", out, epi=epi)).cycles, (hw, g, t)
            checked += 1
    assert checked >= 1


def test_schedule_residency_model_equals_emulator():
    """What a network's schedule leaves in L2 (``ConvPlan.l2_resident``: input, weights, bias row,
    residual) on a 310P conv with a residual epilogue: subsets of the roles priced by the closed form
    equal the emulator's timing-only run, cycles and bytes, and what they save in HBM traffic adds up
    (each tensor fits, so each is kept)."""
    hw = npu_jax.presets.ascend310p().replace(num_cores=2)
    g = canonicalize((2, 32, 10, 10), (48, 32, 3, 3), 1, 1)
    epi, out = epilogue_of(("bias", "residual", "relu"), hw)
    strategy = "img2col"  # the networks' (the random triples draw every strategy)
    t = candidate_tilings(g, strategy, hw, "fp16", out, epi)[0]
    x, w = np.zeros((2, 32, 10, 10), np.float16), np.zeros((48, 32, 3, 3), np.float16)
    bias = np.zeros((48,), DTYPES[epi.bias_format])
    res = np.zeros((2, 10, 10, 48), DTYPES[epi.residual_format])
    hbm = {}
    pairs = [("x", "row"), ("w", "res")]  # every role in one of the two (the random triples: one at a time)
    for resident in [(), *pairs, L2_ROLES]:
        p = make_plan(g, strategy, t, hw, "fp16", out, epi=epi, l2_resident=resident)
        _, rep = run_plan(p, x, w, Policy(), bias=bias, residual=res, move_data=False, checks="none")
        pred = predict(p)
        assert (pred.cycles, pred.gm_bytes) == (int(rep.cycles), int(rep.gm_bytes)), resident
        assert pred.hbm_bytes == int(rep.hbm_bytes), resident
        hbm[resident] = pred.hbm_bytes
    for pair in pairs:
        assert hbm[pair] < hbm[()], pair
    assert hbm[L2_ROLES] == hbm[()] - sum(hbm[()] - hbm[pair] for pair in pairs)


def test_shared_chip_gm_rate():
    """A chip GM rate shared by the cores (40 B/cycle over 3 active cores < 24 per core), two of
    them idle (cout_split=3, one Cout block). A core's share is 40/3 B/cycle: the emulator (jitted,
    XLA) divided bytes by float32(13.333333) through a reciprocal and charged 200 B in 16 cycles
    where the model (numpy, an IEEE division) said 15: 6901 cycles against 6899. ``ceil_rate`` now
    tests products instead (the fewest c with c x 40 >= 200 x 3): both say 6899 (no L2 and no launch
    cost, the chip of that time)."""
    hw = HardwareConfig(
        num_cores=4,
        l1_bytes=96 * KiB,
        ub_bytes=48 * KiB,
        gm_bytes_per_cycle=24.0,
        chip_gm_bytes_per_cycle=40.0,
        l1_to_l0a_bytes_per_cycle=1024.0,
        l1_to_l0b_bytes_per_cycle=128.0,
        cube_m=32,
        cube_n=32,
        l2_bytes=0,
        assumed=Assumed(gm_burst_overhead=0, fixpipe_bytes_per_cycle=128.0, launch_us=0.0),
    )
    g = ConvGeometry(1, 38, 11, 9, 8, 3, 3, (2, 2), (1, 1), (0, 1, 0, 1))
    t = ConvTiling(ho=4, wo=2, n=16, cin1=3, k_l0=16, cout_split=3)
    rep = runner("relayout", t, hw, None, "fp16")(jax.tree.map(jnp.int32, g))
    assert predict(make_plan(g, "relayout", t, hw, bound=BOUND)).cycles == int(rep.cycles) == 6899


@pytest.mark.parametrize("rate", [7.0, 120.0, 38.4, Rate(40.0, 3), Rate(24.0, 1), Rate(100.0, 7)])
def test_ceil_rate_same_in_numpy_and_jit(rate):
    """``ceil_rate`` gives one integer in numpy, eager jax and jitted jax, on every byte count up to
    2^20 -- the fewest cycles c with float32(c x rate) >= bytes (with a float32 division instead,
    XLA said 4 cycles for 21 B at 7 B/cycle)."""
    ns = np.arange(0, 1 << 20, dtype=np.int32)
    want = ceil_rate(ns, rate)
    num, den = (rate.num, rate.den) if isinstance(rate, Rate) else (rate, 1)
    got = np.asarray(jax.jit(lambda n, a, b: ceil_rate(n, Rate(a, b)))(ns, jnp.float32(num), jnp.int32(den)))
    assert np.array_equal(want, got)
    exact = -(-(ns.astype(np.int64) * den * 10) // int(round(num * 10)))  # num has one decimal here
    assert np.array_equal(want, exact), ns[want != exact][:5]


@pytest.mark.slow
def test_abs_step_needs_no_model_edit(rng):
    """docs/design.md's worked example: VAbs was declared (isa/vector.py, table.py) and an ``abs``
    epilogue step added (mapping/epilogue.py); the schedule charges the chain's vector ops through
    ``costs.vector`` with no edit of its own, and equals the emulator on a UB (coupled) epilogue."""
    hw = npu_jax.presets.tiny(coupled=True)
    checked = sum(check_triples(rng, hw, "img2col", ("bias", "abs"), 1, 3) for _ in range(4))
    assert checked > 0


@pytest.mark.slow
def test_model_equals_emulator_grouped_on_random_hardware(rng):
    """Grouped layers (depthwise, multipliers, several super-groups) on random hardware, a random
    strategy and a random legal tiling of the chooser's grid: model == emulator (cycles and bytes)."""
    checked = 0
    while checked < 2:
        hw = random_hw(rng)
        groups, cg = int(rng.choice([2, 6, 16, 32])), int(rng.choice([1, 3, 8]))
        k = groups * cg * int(rng.integers(1, 3))
        xs = (int(rng.integers(1, 3)), groups * cg, int(rng.integers(4, 9)), int(rng.integers(4, 9)))
        g = canonicalize(xs, (k, cg, 3, 3), int(rng.integers(1, 3)), 1, 1, groups)
        strategy = str(rng.choice(STRATEGIES))
        cands = candidate_tilings(g, strategy, hw)
        if not cands:
            continue
        t = cands[int(rng.integers(len(cands)))]
        x, w = np.zeros(xs, np.float16), np.zeros((k, cg, 3, 3), np.float16)
        _, rep = npu_jax.conv2d(
            x, w, g.stride, 1, strategy=strategy, hw=hw, tiling=t, timing_only=True, groups=groups
        )
        p = make_plan(g, strategy, t, hw)
        pred = predict(p)
        where = (hw, strategy, t, g.describe(), p.sgroups)
        assert (pred.cycles, pred.gm_bytes) == (int(rep.cycles), int(rep.gm_bytes)), where
        assert lower_bound(p) <= pred.cycles, where
        checked += 1

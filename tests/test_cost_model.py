"""The closed-form cost model against the emulator, on >= 200 random (layer, tiling) pairs.

Each (strategy, tiling, preset) compiles one timing-only bounded kernel; random layers inside the
bound then run through it in milliseconds. The model (``npu_jax.cost.conv.predict``) sees only the
plan -- shapes, tiling, hardware -- and must give the emulator's cycles and GM bytes. The worst
relative difference is printed (run with -s to see it) and must be zero: the model is exact.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import npu_jax
from npu_jax.api.conv import conv2d, conv2d_bounded
from npu_jax.core.policy import Policy
from npu_jax.cost.conv import floors, layer_of, lower_bound, predict, predict_many
from npu_jax.cost.many import bounds_many, schedule_many
from npu_jax.hw.costs import HwNumbers
from npu_jax.mapping.conv import STRATEGIES, ConvPlan, ConvTiling, make_plan
from npu_jax.mapping.epilogue import canonical_steps, split
from npu_jax.search.choose import candidate_tilings, choose_tiling
from npu_jax.workload.conv import ConvGeometry, canonicalize

BOUND = ConvGeometry(2, 40, 14, 14, 48, 3, 3, (2, 2), (1, 1), (1, 1, 1, 1))
PRESETS = {"tiny": npu_jax.presets.tiny(), "tiny-coupled": npu_jax.presets.tiny(coupled=True)}


def _tilings(strategy):
    deep = strategy == "img2col"
    st = 2 if deep else 1
    base = dict(l1_stages=st, l0_stages=st, cores=2)
    res = strategy != "output_tiled"
    return [
        ConvTiling(ho=2, wo=3, n=16, cin1=1, k_l0=32 if deep else 16, **base),
        ConvTiling(ho=4, wo=5, n=32, cin1=2, k_l0=48 if deep else 16, cout_split=2, **base),
        ConvTiling(ho=3, wo=7, n=16, cin1=3, k_l0=16, weights_resident=res, **base),
        # up to 3 Cout blocks over 2 core groups: the second group idles every other item; and
        # (img2col) L1 double-buffered over a single L0 stage
        ConvTiling(
            ho=2, wo=7, n=16, cin1=2, k_l0=32 if deep else 16, cout_split=2, **{**base, "l0_stages": 1}
        ),
    ]


@functools.cache
def _runner(strategy, tiling, preset):
    hw = PRESETS[preset]

    @jax.jit
    def run(g):
        x = jnp.zeros((BOUND.n, BOUND.c, BOUND.h, BOUND.w), jnp.float16)
        w = jnp.zeros((BOUND.k, BOUND.c, BOUND.kh, BOUND.kw), jnp.float16)
        _, rep = conv2d_bounded(
            x, w, g, bound=BOUND, strategy=strategy, tiling=tiling, hw=hw, timing_only=True
        )
        return rep

    return run


def _draw(rng):
    while True:
        n, c = int(rng.integers(1, 3)), int(rng.integers(1, 41))
        h, w = int(rng.integers(3, 15)), int(rng.integers(3, 15))
        k, kh, kw = int(rng.integers(1, 49)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
        s = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
        pads = tuple(int(v) for v in rng.integers(0, 2, 4))
        try:
            return canonicalize((n, c, h, w), (k, c, kh, kw), s, ((pads[0], pads[1]), (pads[2], pads[3])), 1)
        except ValueError:
            continue


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["output_tiled", "input_tiled", "relayout", "img2col"])
def test_model_matches_emulator_on_random_pairs(strategy):
    seed = int(np.random.SeedSequence().entropy % 2**32)
    rng = np.random.default_rng(seed)
    worst_cyc, worst_bytes, pairs, bounds_ok = 0.0, 0.0, 0, 0
    rows, lanes_off = [], []
    for i, tiling in enumerate(_tilings(strategy)):
        preset = list(PRESETS)[i % 2]
        run = _runner(strategy, tiling, preset)
        for _ in range(14):
            g = _draw(rng)
            plan = make_plan(g, strategy, tiling, PRESETS[preset], bound=BOUND)
            rep = run(jax.tree.map(jnp.int32, g))
            pred = predict(plan)
            cyc_err = abs(pred.cycles - rep.cycles) / rep.cycles
            byte_err = abs(pred.gm_bytes - rep.gm_bytes) / rep.gm_bytes
            bounds_ok += lower_bound(plan) <= rep.cycles
            # each lane's busy cycles, the last core's end, the HBM time and so the bottleneck
            got = (pred.pipe_busy, pred.core_end, pred.hbm_cycles, pred.bottleneck)
            want = (
                {k: int(v) for k, v in rep.pipe_busy.items()},
                int(rep.core_end),
                int(rep.hbm_cycles),
                rep.bottleneck,
            )
            if got != want:
                lanes_off.append((preset, g.describe(), tiling, got, want))
            worst_cyc, worst_bytes = max(worst_cyc, cyc_err), max(worst_bytes, byte_err)
            pairs += 1
            rows.append((cyc_err, strategy, preset, g.describe(), tiling, rep.cycles, pred.cycles))
    rows.sort(key=lambda r: -r[0])
    print(
        f"\ncost model vs emulator, {strategy} (seed {seed}): {pairs} pairs, worst cycle error "
        f"{100 * worst_cyc:.3f}%, worst GM-byte error {100 * worst_bytes:.3f}%"
    )
    for r in rows[:3]:
        print("  ", f"{100 * r[0]:.3f}%", *r[1:])
    assert pairs >= 50  # 224 over the four strategies
    assert bounds_ok == pairs, "lower_bound exceeded the emulated cycles"
    assert worst_bytes == 0.0
    assert worst_cyc == 0.0, rows[:3]  # the model is exact, not approximate
    assert not lanes_off, lanes_off[:2]


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["relayout", "img2col"])
def test_model_on_a_resnet_layer_matches_a_full_run(strategy):
    """On a real 910B layer with the chooser's tiling, model == full (data-moving) emulation."""
    hw = npu_jax.presets.ascend910b()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 128, 28, 28)).astype(np.float32)
    w = rng.standard_normal((128, 128, 3, 3)).astype(np.float32)
    g = canonicalize(x.shape, w.shape, 1, 1, 1)
    t = choose_tiling(g, strategy, hw)
    _, rep = conv2d(x, w, 1, 1, strategy=strategy, hw=hw, tiling=t, timing_only=True)
    pred = predict(make_plan(g, strategy, t, hw))
    assert pred.cycles == rep.cycles
    assert pred.gm_bytes == rep.gm_bytes
    assert (pred.pipe_busy, pred.ratios, pred.bottleneck) == (rep.pipe_busy, rep.ratios, rep.bottleneck)
    assert Policy().operand == "fp16"


@pytest.mark.parametrize("preset", ["910b", "tiny-coupled"])
def test_chooser_bounds_and_pick_are_exact(preset, rng):
    """The chooser's costs of many tilings at once (``cost.many``, padded and masked) equal each
    tiling's alone; on every candidate of a random layer (fused or not) floor <= core 0's bound
    <= the chip's bound <= the model's cycles (the bounds fill and drain each pipe: a wrong one
    shows here), and ``predict_many``'s branch and bound picks what costing every tiling picks."""
    hw = npu_jax.presets.ascend910b() if preset == "910b" else PRESETS[preset]
    h = HwNumbers.of(hw)
    c, k = 16 * int(rng.integers(1, 5)), 16 * int(rng.integers(1, 5))
    hi, s = int(rng.integers(6, 15)), int(rng.integers(1, 3))
    g = canonicalize((int(rng.integers(1, 3)), c, hi, hi + 1), (k, c, 3, 3), s, 1, 1, 1)
    for strategy in STRATEGIES:
        chain = ["bias", "residual", "relu"] if hw.coupled else ["bias", "relu"]  # UB / Fixpipe
        epi = split(canonical_steps(chain), hw, Policy(), True)[0] if rng.integers(2) else None
        cands = candidate_tilings(g, strategy, hw, epi=epi)
        plans = [ConvPlan(g, strategy, t, hw, "fp16", "fp16", epi=epi) for t in cands]
        bounds = bounds_many(plans, layer_of(g))  # all at once (padded, masked) = one by one
        for k in rng.choice(len(plans), size=min(12, len(plans)), replace=False):
            assert bounds[k] == (lower_bound(plans[k]), lower_bound(plans[k], serial=True))
        core0 = bounds_many(plans, layer_of(g), cores=1)
        cyc, gm = predict_many(g, strategy, cands, hw, epi=epi, every=True)
        for p, f, f0, b, cost in zip(plans, floors(plans, h), core0, bounds, cyc):
            assert f[0] <= f0[0] <= b[0] <= cost, (g.describe(), strategy, epi, p.t, f, f0, b, cost)
            assert f[1] <= f0[1] <= b[1], (g.describe(), strategy, epi, p.t)
        some = [plans[k] for k in rng.choice(len(plans), size=min(10, len(plans)), replace=False)]
        for p, s in zip(some, schedule_many(some, layer_of(g))):  # stacked = alone
            q = predict(p)
            assert (s["cycles"], s["gm_l1"] + s["gm_ub"] + s["gm_out"]) == (q.cycles, q.gm_bytes)
        pc, pg = predict_many(g, strategy, cands, hw, epi=epi)
        best = min(range(len(cands)), key=lambda i: (cyc[i], gm[i]))
        assert best == min(range(len(cands)), key=lambda i: (pc[i], pg[i])), (g.describe(), strategy)
        assert (pc[best], pg[best]) == (cyc[best], gm[best])


def test_legal_tilings_depend_on_the_legality_key_alone(rng):
    """The chooser enumerates a layer's legal tilings once per (layer shape, ``legality_key``): a
    random layer's list, enumerated afresh, is the same at another batch and on a machine whose every
    figure outside the key differs (L2, rates, clock, launch, name); a machine with another key (a
    smaller L1) gets a list of its own, not the kept one."""
    import dataclasses

    from npu_jax.search import choose

    base = npu_jax.presets.ascend910b()
    other = dataclasses.replace(
        base,
        name="other",
        l2_bytes=base.l2_bytes // 8,
        clock_ghz=1.0,
        gm_bytes_per_cycle=7.0,
        l2_read_bytes_per_cycle=50.0,
        assumed=dataclasses.replace(base.assumed, launch_us=9.0, mte2_startup=200),
    )
    assert other.legality_key() == base.legality_key()
    c, k = 16 * int(rng.integers(1, 9)), 16 * int(rng.integers(1, 9))
    hi, s, groups = (
        int(rng.integers(5, 30)),
        int(rng.integers(1, 3)),
        int(rng.choice([1, np.gcd(c, k) // 16])),
    )
    g = canonicalize((1, c, hi, hi + 3), (k, c // groups, 3, 3), s, 1, 1, groups)
    for strategy in STRATEGIES:
        want = list(choose._enumerate(g, strategy, base, "fp16", "fp16", None))
        for n, hw in ((1, other), (int(rng.integers(2, 9)), base), (5, other)):
            gn = dataclasses.replace(g, n=n)
            assert list(choose._enumerate(gn, strategy, hw, "fp16", "fp16", None)) == want, (strategy, n)
            assert candidate_tilings(gn, strategy, hw) == want
    small = dataclasses.replace(base, l1_bytes=base.l1_bytes // 4)
    assert small.legality_key() != base.legality_key()
    assert candidate_tilings(g, "img2col", small) == list(
        choose._enumerate(g, "img2col", small, "fp16", "fp16", None)
    )


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["tiny", "tiny-coupled"])
def test_grouped_bounds_and_model_on_every_candidate(preset, rng):
    """A random grouped layer (several super-groups): on every candidate tiling of every strategy the
    chooser's floor <= the lower bound <= the model's cycles, and the many-tilings model equals the
    one-tiling model; then one strategy's chooser pick on the emulator (coupled or not) == model."""
    hw = PRESETS[preset]
    groups = int(rng.choice([4, 8, 16]))
    cg, mult = int(rng.choice([1, 2, 4])), int(rng.integers(1, 3))
    h, w = (int(v) for v in rng.integers(4, 10, 2))
    g = canonicalize(
        (int(rng.integers(1, 3)), groups * cg, h, w), (groups * cg * mult, cg, 3, 3), 1, 1, 1, groups
    )
    h_ = HwNumbers.of(hw)
    for strategy in STRATEGIES:
        cands = candidate_tilings(g, strategy, hw)
        assert cands and not any(
            t.weights_resident for t in cands if make_plan(g, strategy, t, hw).sgroups > 1
        )
        cyc, gm = predict_many(g, strategy, cands, hw, every=True)
        plans = [make_plan(g, strategy, t, hw) for t in cands]
        for p, f, c, b in zip(plans, floors(plans, h_), cyc, gm):
            assert f[0] <= lower_bound(p) <= c == predict(p).cycles, (strategy, p.t, g.describe())
            assert f[1] <= lower_bound(p, serial=True), (strategy, p.t, g.describe())
            assert b == predict(p).gm_bytes
    strategy = str(rng.choice(STRATEGIES))
    t = choose_tiling(g, strategy, hw)
    x, wt = np.zeros((g.n, g.c, g.h, g.w), np.float16), np.zeros((g.k, cg, 3, 3), np.float16)
    _, rep = conv2d(x, wt, 1, 1, strategy=strategy, hw=hw, tiling=t, timing_only=True, groups=groups)
    pred = predict(make_plan(g, strategy, t, hw))
    assert (pred.cycles, pred.gm_bytes) == (int(rep.cycles), int(rep.gm_bytes)), (strategy, t, g.describe())

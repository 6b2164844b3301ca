"""The tile search: its models held to cost.conv.predict and the emulator, the rounding, the optimiser,
the baselines, the sweep on several host devices, the command line.

Layers here are small (a few ms of model each); the ResNet-50 tables come from
``benchmarks/bench_search.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import npu_jax
from npu_jax.cost.conv import predict
from npu_jax.errors import NpuError
from npu_jax.mapping.conv import ConvTiling, make_plan
from npu_jax.search import baselines, exact, optimise, relaxed, space
from npu_jax.search.codesign import l2_sweep, smallest_sufficient
from npu_jax.workload.conv import canonicalize

HW = {
    "910b": npu_jax.presets.ascend910b(),
    "910": npu_jax.presets.ascend910(),
    "tiny": npu_jax.presets.tiny(),
}
LAYERS = [
    ((1, 64, 14, 14), (64, 64, 3, 3), 1, 1),
    ((1, 3, 32, 32), (32, 3, 7, 7), 2, 3),
    ((2, 40, 9, 11), (48, 40, 3, 1), (2, 1), (1, 0)),
    ((1, 256, 14, 14), (128, 256, 1, 1), 2, 0),
]


def _random_tilings(g, rng, count):
    """Random img2col tilings, legal or not (the legality check is under test too)."""
    c1 = -(-g.c // 16)
    out = []
    for _ in range(count):
        cin1 = int(rng.integers(1, c1 + 1))
        st = int(rng.integers(1, 3))
        out.append(
            ConvTiling(
                ho=int(rng.integers(1, g.ho + 1)),
                wo=int(rng.integers(1, g.wo + 1)),
                n=16 * int(rng.integers(1, -(-g.k // 16) + 2)),
                cin1=cin1,
                k_l0=16 * int(rng.integers(1, cin1 * g.kh * g.kw + 2)),
                weights_resident=bool(rng.integers(0, 2)) and cin1 >= c1,
                l1_stages=st,
                l0_stages=st,
                cout_split=int(rng.choice([1, 2, 3, 4, 5])),
            )
        )
    return out


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["910b", "910", "tiny"])
def test_exact_model_and_legality_equal_predict_and_make_plan(preset, rng):
    """The array-valued schedule equals cost.conv.predict on every legal tiling, and exact.legal
    agrees with make_plan's validation on legal and illegal ones alike (random draws, most of
    them illegal on the smaller cores, and points drawn from the space, legal by construction)."""
    hw = HW[preset]
    checked = 0
    for shapes in LAYERS:
        g = canonicalize(*shapes)
        sp = space.build(g, hw)
        ts = _random_tilings(g, rng, 40)
        ts += [
            exact.tiling_at(sp.tilings, int(i)) for i in rng.choice(sp.size, min(sp.size, 10), replace=False)
        ]
        T = exact.tilings_from(ts)
        L, H = exact.layer_of(g), exact.hw_of(hw)
        ok = np.asarray(space.legal_mask(g, hw, T))
        got = optimise.exact_cycles(L, T, H, hw.num_cores, hw.coupled)
        for t, legal, cyc in zip(ts, ok, got):
            try:
                p = make_plan(g, "img2col", t, hw)
            except NpuError:
                assert not legal, (g.describe(), t)
                continue
            assert legal, (g.describe(), t)
            assert cyc == predict(p).cycles, (g.describe(), t)
            checked += 1
    assert checked >= (8 if preset == "tiny" else 50)  # the tiny core rejects most draws


@pytest.mark.slow
def test_relaxed_model_equals_exact_at_legal_integer_points(rng):
    """relaxed_cycles at x = log(legal tiling) is the exact model's cycles; its gradient is finite."""
    hw = HW["910b"]
    g = canonicalize(*LAYERS[0])
    s = space.build(g, hw)
    idx = rng.choice(s.size, 24, replace=False)
    T = jax.tree.map(lambda a: jnp.asarray(a[idx]), s.tilings)
    x, disc = relaxed.params_of(T)
    L, H = exact.layer_of(g), exact.hw_of(hw)
    f = jax.jit(jax.vmap(lambda x, d: relaxed.relaxed_cycles(x, d, L, H, 20, False)))
    got = np.asarray(f(x, disc))
    want = np.asarray([predict(make_plan(g, "img2col", exact.tiling_at(T, i), hw)).cycles for i in range(24)])
    np.testing.assert_allclose(got, want, rtol=2e-6)
    grads = jax.vmap(jax.grad(lambda x, d: relaxed.objective(x, d, L, H, 20, False)))(x, disc)
    assert np.isfinite(np.asarray(grads)).all()
    pen = jax.vmap(lambda x, d: relaxed.penalty(x, d, L, H, 20, False))(x, disc)
    assert float(jnp.max(pen)) < 1e-4  # legal points pay (almost) no penalty


def test_surrogate_gradient_points_the_right_way():
    """From a tiny tile on a GM-bound layer the descent direction grows the tile; an overflowing
    tile is pushed back by the penalty."""
    hw = HW["910b"]
    g = canonicalize((1, 64, 56, 56), (64, 64, 3, 3), 1, 1)
    L, H = exact.layer_of(g), exact.hw_of(hw)
    x = jnp.log(jnp.array([1.0, 16.0, 64.0, 4.0, 64.0, 1.0]))
    d = jnp.array([0, 2, 1])
    gr = jax.grad(relaxed.objective)(x, d, L, H, 20, False)
    assert gr[0] < 0  # more rows per tile is cheaper
    big = jnp.log(jnp.array([56.0, 56.0, 64.0, 4.0, 576.0, 1.0]))
    assert float(relaxed.penalty(big, d, L, H, 20, False)) > 0
    assert jax.grad(relaxed.penalty)(big, d, L, H, 20, False)[4] > 0


def test_snap_rounds_into_the_space():
    hw = HW["910b"]
    g = canonicalize(*LAYERS[0])
    L = exact.layer_of(g)
    s = space.build(g, hw)
    valid = {tuple(r) for r in exact.rows_of(s.tilings).tolist()}
    x = jnp.log(jnp.array([5.3, 13.0, 40.0, 2.7, 100.0, 2.0]))
    t = optimise._snap(20)(x[None], jnp.array([[0, 2, 2]]), L)
    rows = optimise._rows(t)
    inside = s.contains(rows)
    assert inside.sum() >= 3
    assert all(
        (tuple(r) in valid) == bool(o) for r, o in zip(rows.tolist(), inside)
    )  # contains == membership
    # the first row is the rounding: ho = ceil(14 / round(14 / 5.3)) = 5, wo = 14, the start's split
    first = rows[0].tolist()
    assert first[:2] == [5, 14] and first[5:] == [0, 2, 2]
    # a split the Cout blocks cannot take is kept, and the block shrinks to make room for it
    t = optimise._snap(20)(x[None], jnp.array([[0, 2, 4]]), L)
    assert all(r[7] == 4 and -(-64 // r[2]) >= 4 for r in optimise._rows(t).tolist())


def test_pattern_move_repeats_the_step_on_the_axes():
    hw = HW["910b"]
    g = canonicalize(*LAYERS[0])  # 14 x 14 output: ho, wo in 1 2 3 4 5 7 14
    s = space.build(g, hw)
    pts = exact.rows_of(s.tilings)
    old = pts[(pts[:, 0] == 7) & (pts[:, 1] == 3) & (pts[:, 5] == 0)][0]
    new = old.copy()
    new[0], new[1] = 5, 4  # one balanced step down in ho, one up in wo
    assert s.contains(new[None])[0]
    rows = optimise.pattern(s, old, new)
    assert len(rows) >= 1 and s.contains(rows).all()
    assert rows[0][:2].tolist() == [4, 5] and rows[0][2:].tolist() == new[2:].tolist()  # the rest unchanged
    assert rows[-1][:2].tolist() in ([3, 7], [4, 5])  # twice the step, unless it left the space
    assert len(optimise.pattern(s, new, new)) == 0  # no step: nothing new


def test_race_spends_its_share_and_never_loses_the_best():
    hw = HW["910b"]
    g = canonicalize(*LAYERS[0])
    s = space.build(g, hw)
    L, H = exact.layer_of(g), exact.hw_of(hw)
    ledger = optimise._Ledger(lambda r: optimise.exact_cycles(L, optimise._tilings(r), H, 20, False), 200)
    pts = exact.rows_of(s.tilings)
    ledger.evaluate(pts[np.random.default_rng(3).choice(s.size, 40, replace=False)])
    assert len(optimise._by_config(ledger)) >= 4
    first, history = ledger.best()[0][1], []
    optimise.race(s, ledger, 0.5, history, 0, 0)
    assert 80 <= ledger.left and len(ledger.seen) == 200 - ledger.left  # at most half of 160 spent
    assert ledger.best()[0][1] <= first and history and history[-1]["evals"] == len(ledger.seen)


@pytest.mark.slow
def test_exhaustive_and_random_baselines():
    hw = HW["910b"]
    g = canonicalize(*LAYERS[0])
    ex = baselines.exhaustive(g, hw)
    assert ex.evals == space.build(g, hw).size
    rnd = baselines.random_search(g, hw, evals=200, seed=1)
    assert rnd.evals == 200 and rnd.cycles >= ex.cycles
    ch = baselines.chooser(g, hw)
    assert ch.cycles >= ex.cycles or not ch.in_space
    # the exhaustive optimum is the minimum of predict over the space (spot-check a sample)
    s = space.build(g, hw)
    for i in np.random.default_rng(0).choice(s.size, 5, replace=False):
        t = exact.tiling_at(s.tilings, int(i))
        assert predict(make_plan(g, "img2col", t, hw)).cycles >= ex.cycles


@pytest.mark.slow
@pytest.mark.parametrize("fused", [False, True])
def test_tile_search_finds_a_verified_tiling_near_the_optimum(fused, rng):
    """Within 2% of the exhaustive optimum on a small layer with 5% of its evaluations (the
    ResNet-50 tables: benchmarks/bench_search.py), better than random search at equal evaluations,
    legal, and the emulator agrees with the model."""
    hw = HW["910b"]
    shapes = LAYERS[0]
    g = canonicalize(*shapes)
    ex = baselines.exhaustive(g, hw, fused)
    seed = int(rng.integers(2**16))
    r = npu_jax.search.tile_search(*shapes, hw=hw, seed=seed, finalists=1, budget=0.05, fused=fused)
    p = optimise.plan_of(g, r.tiling, hw, fused)  # legal (raises otherwise)
    assert r.emulated_cycles == r.model_cycles == predict(p).cycles
    assert r.model_cycles <= 1.02 * ex.cycles, (seed, r.model_cycles, ex.cycles)
    assert r.evals == r.relaxed_evals + r.exact_evals == r.history[-1]["evals"] <= r.budget
    assert r.budget == int(0.05 * ex.evals) and r.space_size == ex.evals
    assert [h["phase"] for h in r.history[:1]] == ["descent"] and r.history[-1]["phase"] == "exact"
    assert all(a["best"] >= b["best"] for a, b in zip(r.history, r.history[1:]) if a["best"])
    rnd = baselines.random_search(g, hw, evals=r.evals, seed=seed, fused=fused)
    assert r.model_cycles <= rnd.cycles


@pytest.mark.slow
def test_budget_and_any_optax_optimizer():
    hw = HW["910b"]
    g = canonicalize(*LAYERS[0])
    m = optimise.search_model(
        g, hw, starts=8, steps=16, max_evals=100, optimizer=optax.sgd(0.05, momentum=0.9)
    )
    assert m.evals <= 100 and m.exact_evals >= 1 and m.budget == 100
    assert np.all(np.diff(m.cycles) >= 0)  # ranked
    assert np.asarray(space.legal_mask(g, hw, optimise._tilings(m.rows))).all()
    # the default budget: 1% of the space, never under MIN_EVALS
    m = optimise.search_model(g, hw, optimizer=optax.lion(0.05))
    assert m.budget == max(optimise.MIN_EVALS, int(0.01 * m.space_size)) >= m.evals


def test_tile_search_rejects_bad_arguments():
    with pytest.raises(ValueError, match="objective"):
        npu_jax.search.tile_search((1, 16, 8, 8), (16, 16, 3, 3), objective="energy")
    with pytest.raises(ValueError, match="starts"):
        npu_jax.search.tile_search((1, 16, 8, 8), (16, 16, 3, 3), starts=0)
    with pytest.raises(ValueError, match="budget"):
        npu_jax.search.tile_search((1, 16, 8, 8), (16, 16, 3, 3), budget=1.5)
    with pytest.raises(TypeError, match="fused"):
        npu_jax.search.tile_search((1, 16, 8, 8), (16, 16, 3, 3), fused="yes")
    with pytest.raises(ValueError, match="finalists"):
        npu_jax.search.tile_search((1, 16, 8, 8), (16, 16, 3, 3), finalists=-1)


_SWEEP_SCRIPT = r"""
import json, sys
import jax, numpy as np, npu_jax
from npu_jax.search import sweep
from npu_jax.workload.conv import canonicalize
assert len(jax.devices()) == 4, jax.devices()
layers = [canonicalize((1, 64, 14, 14), (64, 64, 3, 3), 1, 1), canonicalize((1, 256, 7, 7), (128, 256, 1, 1), 1, 0)]
base = npu_jax.presets.ascend910b()
hws = [base, base.replace(l1_bytes=128 * 1024)]
kw = dict(starts=4, steps=8, rounds=2, seed=3)
one = sweep.sweep(layers, hws, devices=jax.devices()[:1], **kw)
four = sweep.sweep(layers, hws, progress=True, **kw)
print(json.dumps(dict(one=one.start_cycles.tolist(), four=four.start_cycles.tolist(),
                      t1=one.tilings.tolist(), t4=four.tilings.tolist(), devices=four.devices)))
"""


@pytest.mark.slow
def test_sweep_is_identical_on_one_and_four_host_devices():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    out = subprocess.run(
        [sys.executable, "-c", _SWEEP_SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["devices"] == 4
    assert r["one"] == r["four"] and r["t1"] == r["t4"]
    cyc = np.asarray(r["one"])
    assert (cyc.min(axis=2) < 2**31 - 1).all()  # every (layer, hardware) found a legal tiling
    # each (layer, hw) best is a legal tiling whose exact cycles the model reproduces
    hw = HW["910b"]
    g = canonicalize((1, 64, 14, 14), (64, 64, 3, 3), 1, 1)
    best = np.asarray(r["t1"])[0, 0]
    t = exact.tiling_at(exact.from_rows(best[None]))
    assert predict(make_plan(g, "img2col", t, hw)).cycles == cyc[0, 0].min()
    # a smaller L1 never gives fewer cycles than the searched ones on the full L1 by more than the
    # search's own spread: here it is at least the exhaustive optimum of the full-L1 space
    assert cyc[0, 1].min() >= baselines.exhaustive(g, hw).cycles


@pytest.mark.slow
def test_cli_search_one_layer(capsys):
    from npu_jax.cli import main

    rc = main(
        [
            "search",
            "--c",
            "32",
            "--h",
            "14",
            "--w",
            "14",
            "--k",
            "32",
            "--starts",
            "8",
            "--steps",
            "8",
            "--no-verify",
            "--exhaustive",
            "--json",
        ]
    )  # the emulator check: the test above
    assert rc == 0
    r = json.loads(capsys.readouterr().out)
    assert r["emulated_cycles"] is None
    assert r["exhaustive_cycles"] <= r["model_cycles"]
    assert r["evals"] == r["relaxed_evals"] + r["exact_evals"] <= max(64, 0.01 * r["space"])
    rc = main(
        [
            "search",
            "--c",
            "32",
            "--h",
            "14",
            "--w",
            "14",
            "--k",
            "32",
            "--fused",
            "--budget",
            "0.02",
            "--finalists",
            "1",
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert "model" in out and "emulated" in out and "% of" in out
    rc = main(["search", "--c", "16", "--h", "4", "--w", "4", "--kh", "7", "--kw", "7", "--padding", "0"])
    assert rc == 2
    assert "kernel 7x7" in capsys.readouterr().err
    assert main(["search", "--budget", "2"]) == 2
    assert "fraction" in capsys.readouterr().err


@pytest.mark.slow
def test_hw_gradient_more_gm_bandwidth_means_fewer_cycles():
    from npu_jax.search import codesign

    hw = HW["910b"]
    g = canonicalize(*LAYERS[0])
    t = baselines.exhaustive(g, hw).tiling
    grad = codesign.hw_gradient([g], hw, [t])
    assert grad["gm"] < 0
    assert grad["l1"] == 0.0  # capacities act through the penalty only, zero at a legal point


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["910b", "910", "tiny"])
def test_fused_exact_model_equals_predict_and_the_emulator(preset, rng):
    """The Conv + bias + ReLU kernel: exact.cycles == cost.conv.predict of the fused plan on random
    points of the fused space (whose legality is make_plan's with the epilogue), and == the
    emulator on one of them (910). The fused costs differ from the plain ones where they should."""
    hw = HW[preset]
    g = canonicalize(*LAYERS[int(rng.integers(len(LAYERS)))])
    s = space.build(g, hw, fused=True)
    idx = rng.choice(s.size, min(12, s.size), replace=False)
    T = jax.tree.map(lambda a: a[idx], s.tilings)
    L, H = exact.layer_of(g), exact.hw_of(hw)
    fused = optimise.exact_cycles(L, T, H, hw.num_cores, hw.coupled, fused=True)
    plain = optimise.exact_cycles(L, T, H, hw.num_cores, hw.coupled)
    for i, c in enumerate(fused):
        assert c == predict(optimise.plan_of(g, exact.tiling_at(T, i), hw, fused=True)).cycles, (
            g.describe(),
            i,
        )
    assert (fused > plain).all() if hw.coupled else (fused >= plain).all()  # bias load; UB vector steps
    # legality: the fused space's rows all make a fused plan; some plain points do not fit the fused kernel
    bad = _random_tilings(g, rng, 30)
    ok = space.legal_mask(g, hw, exact.tilings_from(bad), fused=True)
    for t, legal in zip(bad, ok):
        try:
            optimise.plan_of(g, t, hw, fused=True)
            assert legal, t
        except NpuError:
            assert not legal, t
    if hw.coupled:  # the emulator, on the UB path (the 910B's Fixpipe path: the tile_search test)
        i = int(rng.integers(len(idx)))
        assert optimise.emulate(g, exact.tiling_at(T, i), hw, fused=True) == fused[i]


def test_l2_sweep_never_slower_with_more_l2(rng):
    """The L2 co-design sweep: every layer's chooser pick at each L2 size, totals weighted by counts;
    a larger L2 keeps more tensors, so no total grows, and with none (0 MiB) re-reads pay HBM."""
    hw = npu_jax.presets.ascend910b()
    c = 16 * int(rng.integers(2, 5))
    layers = [
        canonicalize((2, c, 14, 14), (2 * c, c, 3, 3), 1, 1, 1),
        canonicalize((1, c, 8, 9), (c, c, 1, 1), 1, 0, 1),
    ]
    sizes, totals, per = l2_sweep(layers, hw, [0, 0.0625, 1, 96], counts=[3, 1])
    assert per.shape == (2, 4) and list(sizes) == [0, 0.0625, 1, 96]
    assert np.array_equal(totals, 3 * per[0] + per[1])
    assert all(a >= b for a, b in zip(totals, totals[1:])), totals
    assert totals[0] > totals[-1], totals
    best = smallest_sufficient(sizes, totals)
    assert best in sizes and totals[list(sizes).index(best)] == totals.min()

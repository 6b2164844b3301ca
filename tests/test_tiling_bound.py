"""The emulator's timing-only run under ``jax.vmap`` over stacked tilings.

``conv2d(..., tiling=t, tiling_bound=T, timing_only=True)`` sizes every buffer and window for the
concrete bound ``T`` and reads ``t``'s sizes, stages, Cout split and resident flag as (traced)
values: 64 stacked tilings of one layer run in one compiled program, each with the cycles, per-pipe
busy and bytes of its own single run. The 64 single calls are the closed-form model (``cost.predict``,
which equals the emulator exactly: tests/test_model_vs_emulator.py), plus real single emulator runs
on a few of them."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import npu_jax
from npu_jax import ConvTiling
from npu_jax.core.state import GmSpec
from npu_jax.cost import cycles, predict
from npu_jax.errors import TilingError
from npu_jax.mapping.conv import make_plan
from npu_jax.search.choose import candidate_tilings
from npu_jax.workload.conv import canonicalize

HW = npu_jax.presets.tiny()
X_SHAPE, W_SHAPE = (1, 32, 12, 12), (48, 32, 3, 3)
G = canonicalize(X_SHAPE, W_SHAPE, 1, 1)


def stack(tilings):
    return jax.tree.map(lambda *a: jnp.asarray(a), *tilings)


def entry(reps, i):
    """Entry ``i`` of a report batched by ``jax.vmap``: the report of tiling ``i``."""
    return jax.tree.map(lambda a: a[i], reps)


def data(rng, x_shape=X_SHAPE, w_shape=W_SHAPE):
    return rng.standard_normal(x_shape).astype(np.float16), rng.standard_normal(w_shape).astype(np.float16)


@pytest.mark.slow
def test_vmap_64_tilings_timing_only_equals_single_calls(rng):
    """The acceptance: 64 stacked img2col tilings of one layer (mixed tile sizes, Cout blocks, depths,
    stages, Cout splits and resident weights) through the emulator's timing-only run in one vmapped
    program: the cycles of 64 single calls (the closed form, vmapped and per plan) and, on two of
    them, the cycles, per-pipe busy and bytes of the emulator's own single runs. Sanitizers off here
    (they observe and change no figure; on, they quadruple this test's time): the next test runs
    the bounded kernel with them on."""
    ts = candidate_tilings(G, "img2col", HW)
    ts = [ts[i] for i in rng.choice(len(ts), 64, replace=False)]
    assert len({(t.weights_resident, t.cout_split, t.l1_stages) for t in ts}) > 1  # a mixed batch
    bound = ConvTiling.bound(ts)
    x, w = data(rng)

    def run(t):
        kw = dict(padding=1, hw=HW, tiling=t, tiling_bound=bound, timing_only=True, checks="none")
        return npu_jax.conv2d(x, w, **kw)[1]

    reps = jax.jit(jax.vmap(run))(stack(ts))
    got = [entry(reps, i).cycles for i in range(64)]
    model = np.asarray(jax.jit(jax.vmap(lambda t: cycles(G, t, HW)))(stack(ts))).tolist()
    assert got == model == [predict(make_plan(G, "img2col", t, HW)).cycles for t in ts]
    for i in rng.choice(64, 2, replace=False):
        one = entry(reps, i)
        _, rep = npu_jax.conv2d(x, w, padding=1, hw=HW, tiling=ts[i], timing_only=True, checks="none")
        assert (one.cycles, one.pipe_busy, one.bytes) == (rep.cycles, rep.pipe_busy, rep.bytes), ts[i]


@pytest.mark.slow
def test_vmap_coupled_chip_output_tiled(rng):
    """The UB output path (a coupled chip), a strategy reading NCHW, and a layer that leaves some
    tilings fewer tiles than cores (the bound's launch idles the cores a tiling does not use), with
    the sanitizers on (as everywhere in the suite): each tiling's run is clean."""
    hw = npu_jax.presets.tiny(coupled=True)
    g = canonicalize((1, 16, 9, 7), (40, 16, 3, 3), (2, 1), 1)
    cands = candidate_tilings(g, "output_tiled", hw)
    ts = [cands[i] for i in rng.choice(len(cands), 7, replace=False)]
    ts.append(next(t for t in cands if t.ho >= g.ho and t.wo >= g.wo))  # one tile: one core runs
    x, w = data(rng, (1, 16, 9, 7), (40, 16, 3, 3))

    def run(t):
        return npu_jax.conv2d(
            x, w, (2, 1), 1, strategy="output_tiled", hw=hw, tiling=t,
            tiling_bound=ConvTiling.bound(ts), timing_only=True,
        )[1]  # fmt: skip

    reps = jax.vmap(run)(stack(ts))
    got = [entry(reps, i).cycles for i in range(len(ts))]
    assert got == [predict(make_plan(g, "output_tiled", t, hw)).cycles for t in ts]
    for i in range(len(ts)):
        entry(reps, i).check()  # raises the sanitizers' findings, if any


def test_bound_of_a_batch(rng):
    ts = candidate_tilings(G, "img2col", HW)
    ts = [ts[i] for i in rng.choice(len(ts), 16, replace=False)]
    b = ConvTiling.bound(ts)
    for f in ("ho", "wo", "n", "cin1", "k_l0", "l1_stages", "l0_stages", "cout_split"):
        assert getattr(b, f) == max(getattr(t, f) for t in ts) and type(getattr(b, f)) is int
    assert b.weights_resident == any(t.weights_resident for t in ts) and b.cores is None
    assert ConvTiling.bound(stack(ts)) == b  # from the stacked form too
    mixed = [ConvTiling(ho=4, wo=4, n=16, cin1=1, k_l0=16, cores=c) for c in (None, 1)]
    with pytest.raises(TilingError, match=r"mixes cores=\[1, None\].*split the batch by cores"):
        ConvTiling.bound(mixed)


def test_bound_refusals(rng):
    x, w = data(rng)
    t = ConvTiling(ho=4, wo=6, n=32, cin1=1, k_l0=32)
    bound = ConvTiling(ho=4, wo=4, n=32, cin1=2, k_l0=64)
    with pytest.raises(TilingError, match=r"tiling 0 has wo=6, above the tiling_bound's wo=4"):
        npu_jax.conv2d(x, w, padding=1, hw=HW, tiling=t, tiling_bound=bound, timing_only=True)
    with pytest.raises(ValueError, match=r"tiling_bound runs the timing-only program.*timing_only=True"):
        npu_jax.conv2d(x, w, padding=1, hw=HW, tiling=t, tiling_bound=ConvTiling.bound([t]))
    with pytest.raises(ValueError, match=r"pass tiling= too"):
        npu_jax.conv2d(x, w, padding=1, hw=HW, tiling_bound=bound, timing_only=True)
    with pytest.raises(TypeError, match=r"tiling_bound must be a ConvTiling of Python ints"):
        make_plan(G, "img2col", t, HW, tiling_bound=stack([t, t]))
    with pytest.raises(TilingError, match=r"one tiling \(scalar fields\).*jax.vmap"):
        make_plan(G, "img2col", stack([t, t]), HW, tiling_bound=ConvTiling.bound([t]))
    with pytest.raises(TilingError, match=r"cores=1, the tiling_bound cores=None"):
        make_plan(
            G, "img2col", ConvTiling(ho=4, wo=4, n=32, cin1=1, k_l0=32, cores=1), HW, tiling_bound=bound
        )
    # a concrete tiling inside the bound is checked on its own too (k_l0 is not a multiple of C0)
    with pytest.raises(TilingError, match=r"k_l0 must be a multiple of C0=16"):
        make_plan(G, "img2col", ConvTiling(ho=4, wo=4, n=32, cin1=1, k_l0=40), HW, tiling_bound=bound)


def test_bound_refuses_a_batch_the_l2_keeps_differently():
    """The K-major weights take ceil(K / n) * n columns: an L2 that holds them at one n of the batch
    and not at another cannot serve the batch with one program."""
    g = canonicalize((1, 16, 8, 8), (40, 16, 3, 3), 1, 1)
    bound = ConvTiling(ho=4, wo=4, n=32, cin1=1, k_l0=16)
    p = make_plan(g, "img2col", bound, HW, tiling_bound=bound)
    x5 = GmSpec("x5", (1, p.c1_cap, 8, 8, p.c0), (1, p.c1_cap, 8, 8, p.c0), "fp16")
    y = GmSpec("y", (1, 8, 8, 40), p.y_pad, "fp16", output=True)
    gm = (x5, GmSpec("wkn", p.wkn_shape, p.wkn_pad, "fp16"), y)

    def wkn_bytes(n):  # 40 Cout at n=16: 48 columns; at n=32: 64
        return -(-40 // n) * n * p.k_total_cap * 2

    small = x5.padded[1] * 8 * 8 * p.c0 * 2 + 8 * 8 * 40 * 2
    ok = dataclasses.replace(p, hw=dataclasses.replace(HW, l2_bytes=small + wkn_bytes(32)))
    ok.check_l2(gm)  # room for every n up to 32: one decision
    tight = dataclasses.replace(p, hw=dataclasses.replace(HW, l2_bytes=small + wkn_bytes(16)))
    with pytest.raises(TilingError, match=r"with n=16 the L2 keeps .*'wkn'.* split the batch by n"):
        tight.check_l2(gm)

"""Tilings as pytrees: ConvTiling and MatmulTiling flatten to their fields, stack,
and pass through ``jax.vmap``; ``npu_jax.cost.cycles`` prices 64 stacked tilings of one layer in one
vmapped call, equal to 64 single calls, to ``cost.predict`` and (on a few) to the emulator's
timing-only run. Checks still refuse bad concrete values; traced values pass unchecked."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import npu_jax
from npu_jax import ConvTiling, MatmulTiling
from npu_jax.cost import cycles, predict
from npu_jax.errors import TilingError
from npu_jax.mapping.conv import STRATEGIES, make_plan
from npu_jax.search import exact, space
from npu_jax.search.choose import candidate_tilings
from npu_jax.workload.conv import canonicalize

HW = npu_jax.presets.tiny()
X_SHAPE, W_SHAPE = (1, 32, 12, 12), (48, 32, 3, 3)
G = canonicalize(X_SHAPE, W_SHAPE, 1, 1)


def stack(tilings):
    return jax.tree.map(lambda *a: jnp.asarray(a), *tilings)


def draw(rng, strategy: str, k: int) -> list[ConvTiling]:
    ts = candidate_tilings(G, strategy, HW)
    return [ts[i] for i in rng.choice(len(ts), min(k, len(ts)), replace=False)]


def random_conv_tiling(rng) -> ConvTiling:
    st = int(rng.integers(1, 3))
    return ConvTiling(
        ho=int(rng.integers(1, 64)),
        wo=int(rng.integers(1, 64)),
        n=16 * int(rng.integers(1, 9)),
        cin1=int(rng.integers(1, 9)),
        k_l0=16 * int(rng.integers(1, 9)),
        weights_resident=bool(rng.integers(2)),
        l1_stages=st,
        l0_stages=3 - st,
        cores=None if rng.integers(2) else int(rng.integers(1, 9)),
        cout_split=int(rng.integers(1, 5)),
    )


def test_flatten_unflatten_round_trip(rng):
    t = random_conv_tiling(rng)
    leaves, tree = jax.tree.flatten(t)
    assert jax.tree.unflatten(tree, leaves) == t
    names = [p[0].name for p, _ in jax.tree_util.tree_flatten_with_path(t)[0]]
    want = ["ho", "wo", "n", "cin1", "k_l0", "weights_resident", "l1_stages", "l0_stages"]
    want += ([] if t.cores is None else ["cores"]) + ["cout_split"]
    assert names == want
    m = MatmulTiling(m=16 * int(rng.integers(1, 9)), k_l1=128, k_l0=64, l1_stages=int(rng.integers(1, 3)))
    leaves, tree = jax.tree.flatten(m)
    assert jax.tree.unflatten(tree, leaves) == m and leaves[0] == m.m
    # JAX's own placeholders come back through unflatten without the checks raising
    odd = jax.tree.unflatten(tree, [object()] * len(leaves))
    assert isinstance(odd, MatmulTiling)


def test_stacked_tilings_pass_jit_and_vmap(rng):
    ts = [random_conv_tiling(rng) for _ in range(8)]
    ts = [ConvTiling(**{**t.__dict__, "cores": None}) for t in ts]
    T = stack(ts)
    area = jax.jit(jax.vmap(lambda t: t.ho * t.wo + t.n))(T)
    assert np.asarray(area).tolist() == [t.ho * t.wo + t.n for t in ts]
    ms = [MatmulTiling(m=16 * int(rng.integers(1, 9)), n=16 * int(rng.integers(1, 9))) for _ in range(5)]
    got = jax.vmap(lambda m: m.m * m.n // m.k_l0)(stack(ms))
    assert np.asarray(got).tolist() == [m.m * m.n // m.k_l0 for m in ms]


@pytest.mark.parametrize(
    "kw, pattern",
    [
        (dict(ho=np.array([4, 0, 2])), r"ConvTiling\.ho must be a positive int, got .* \(bad at index 1\)"),
        (dict(n=jnp.array([16, 24])), r"ConvTiling\.n .* multiple of 16, got .*bad at index 1"),
        (dict(wo=np.array([4.0, 2.0])), r"ConvTiling\.wo must be a positive int"),
        (dict(l1_stages=np.array([1, 3])), r"ConvTiling\.l1_stages must be 1 or 2, got .*bad at index 1"),
        (dict(cores=np.array([0])), r"ConvTiling\.cores must be None or an int >= 1"),
        (dict(ho=True), r"ConvTiling\.ho must be a positive int, got True"),
    ],
)
def test_concrete_arrays_are_checked_entry_by_entry(kw, pattern):
    base = dict(ho=4, wo=4, n=16, cin1=1, k_l0=16)
    with pytest.raises(TilingError, match=pattern):
        ConvTiling(**{**base, **kw})


def test_matmul_checks_on_arrays():
    with pytest.raises(TilingError, match=r"MatmulTiling\.m must be a positive multiple of 16"):
        MatmulTiling(m=np.array([16, 20]))
    with pytest.raises(TilingError, match=r"MatmulTiling\.k_l1 \(\[ 96 128\]\) must be a multiple of k_l0"):
        MatmulTiling(k_l1=np.array([96, 128]), k_l0=64)


def test_traced_values_are_not_checked():
    """Under jit a field is a tracer: building a tiling from it must not raise (nor check)."""

    @jax.jit
    def f(ho):
        t = ConvTiling(ho=ho, wo=4, n=16, cin1=1, k_l0=16)
        return t.ho * 2

    assert int(f(jnp.int32(-3))) == -6  # the value is unknown at trace time


@pytest.mark.slow
def test_vmap_64_tilings_equals_single_calls_and_predict(rng):
    """The acceptance: 64 stacked img2col tilings of one layer, one vmapped call, the same cycles as
    64 single calls and as cost.predict on each plan."""
    ts = draw(rng, "img2col", 64)
    assert len(ts) == 64
    batched = jax.jit(jax.vmap(lambda t: cycles(G, t, HW)))(stack(ts))
    one = jax.jit(lambda t: cycles(G, t, HW))  # one compile for scalar fields, 64 calls
    single = [int(one(t)) for t in ts]
    assert int(cycles(G, ts[0], HW)) == single[0]  # eager too
    want = [predict(make_plan(G, "img2col", t, HW)).cycles for t in ts]
    assert np.asarray(batched).tolist() == single == want


@pytest.mark.slow
@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "img2col"])
def test_vmap_other_strategies_equals_predict(strategy, rng):
    ts = draw(rng, strategy, 16)
    got = jax.jit(jax.vmap(lambda t: cycles(G, t, HW, strategy)))(stack(ts))
    want = [predict(make_plan(G, strategy, t, HW)).cycles for t in ts]
    assert np.asarray(got).tolist() == want


@pytest.mark.slow
def test_vmapped_cycles_equal_emulator_timing_only(rng):
    """Four of the stacked tilings through the emulator's timing-only run (one compile each)."""
    ts = draw(rng, "img2col", 64)
    got = np.asarray(jax.jit(jax.vmap(lambda t: cycles(G, t, HW)))(stack(ts)))
    x = rng.standard_normal(X_SHAPE).astype(np.float16)
    w = rng.standard_normal(W_SHAPE).astype(np.float16)
    for i in rng.choice(len(ts), 4, replace=False):
        _, rep = npu_jax.conv2d(x, w, padding=1, hw=HW, tiling=ts[i], timing_only=True)
        assert int(rep.cycles) == int(got[i]), (ts[i], int(rep.cycles), int(got[i]))


def test_cycles_refuses_a_core_count():
    t = ConvTiling(ho=4, wo=4, n=16, cin1=1, k_l0=16, cores=1)
    with pytest.raises(TilingError, match=r"cores=None.*got cores=1"):
        cycles(G, t, HW)


@pytest.mark.slow
def test_search_space_is_a_stacked_conv_tiling(rng):
    """The search's type is ConvTiling: a space's points, its rows and its single entries agree,
    and its batch cycles equal cost.cycles vmapped over the same stacked tilings."""
    s = space.build(G, HW)
    assert isinstance(s.tilings, ConvTiling)
    idx = rng.choice(s.size, min(s.size, 16), replace=False)
    T = jax.tree.map(lambda a: jnp.asarray(a[idx]), s.tilings)
    one = [exact.tiling_at(T, i) for i in range(len(idx))]
    assert exact.tiling_at(exact.tilings_from(one), 3) == one[3]
    assert (exact.rows_of(exact.from_rows(exact.rows_of(T))) == exact.rows_of(T)).all()
    got = exact.batch_cycles(exact.layer_of(G), T, exact.hw_of(HW), HW.num_cores, HW.coupled)
    want = jax.vmap(lambda t: cycles(G, t, HW))(T)
    assert np.asarray(got).tolist() == np.asarray(want).tolist()

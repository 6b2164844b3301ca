"""The cost rules' two arithmetics (``npu_jax/hw/costs.py``): :data:`~npu_jax.hw.costs.SMOOTH`, the
same rules over reals that the tile search's surrogate descends, equals :data:`~npu_jax.hw.costs.EXACT`
wherever no ceiling is active (whole fractals, byte counts that a rate divides), lies under it
elsewhere (a ceiling only rounds up), and is differentiable in the sizes and in the hardware's rates.

Sizes are drawn from the ``rng`` fixture (a fresh seed per test, printed; ``NPU_JAX_TEST_SEED``
replays one).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import npu_jax
from npu_jax.hw import costs
from npu_jax.hw.config import FRACTAL_ROWS
from npu_jax.hw.costs import EXACT, SMOOTH, HwNumbers
from npu_jax.hw.formats import itemsize

ISZ = itemsize("fp16")  # the operands: K0 = cube_k_bytes / ISZ
PRESETS = ("ascend910b", "ascend910", "ascend310p")
# presets whose rates are whole bytes per cycle (a byte count can be a multiple of each)
WHOLE_RATES = ("ascend910b", "ascend310p")
SIZES = ("m", "n", "k", "nbytes", "bursts", "vbytes", "out_bytes", "cores")


def _hw(name: str):
    return npu_jax.presets.tiny() if name == "tiny" else npu_jax.presets.get(name)


def _rules(h: HwNumbers, s: dict, arith) -> dict:
    """Every rule of an instruction at the sizes ``s``, in ``arith``."""
    gm = costs.gm_rate(h, s["cores"])
    return dict(
        dma_in=costs.dma_in(h, s["nbytes"], s["bursts"], gm, arith=arith),
        dma_out=costs.dma_out(h, s["out_bytes"], s["bursts"], gm, arith=arith),
        load_l0a=costs.load_l0a(h, costs.load_l0a_bytes(h, s["m"], s["k"], ISZ, arith=arith), arith=arith),
        load_l0b=costs.load_l0b(h, costs.load_l0b_bytes(h, s["k"], s["n"], ISZ, arith=arith), arith=arith),
        mmad=costs.mmad(h, s["m"], s["n"], s["k"], ISZ, arith=arith),
        flops=costs.mmad_flops_issued(h, s["m"], s["n"], s["k"], ISZ, arith=arith),
        fixpipe_gm=costs.fixpipe_gm(h, s["m"], s["n"], s["out_bytes"], s["bursts"], gm, arith=arith),
        fixpipe_l1=costs.fixpipe_l1(h, s["m"], s["n"], arith=arith),
        l0c_to_ub=costs.l0c_to_ub(h, s["m"], s["n"], arith=arith),
        vector=costs.vector(h, s["vbytes"], arith=arith),
    )


def _whole_sizes(rng, hw) -> dict:
    """Sizes at which no ceiling is active: whole fractals and Cube blocks, byte counts that every
    rate divides (``cores = 1``: the GM rate is the core's own)."""
    h = HwNumbers.of(hw)
    block = int(np.lcm.reduce([hw.cube_m, hw.cube_n, costs.k0(h, ISZ), FRACTAL_ROWS]))
    m, n, k = (block * int(rng.integers(1, 12)) for _ in range(3))
    gm = int(costs.gm_rate(h, 1).per_cycle)
    port = int(min(h.ub_gm_rate, gm))
    return dict(
        m=m,
        n=n,
        k=k,
        nbytes=gm * int(rng.integers(1, 5000)),
        out_bytes=int(np.lcm(gm, port)) * int(rng.integers(1, 5000)),
        vbytes=int(h.vec_rate) * int(rng.integers(1, 64)),
        bursts=int(rng.integers(1, 40)),
        cores=1,
    )


def _smooth(hw, sizes: dict, jit: bool) -> dict:
    """The SMOOTH rules at float32 sizes, over the hardware's arrays (as the search calls them)."""

    def f(s):
        return _rules(HwNumbers.arrays(hw), s, SMOOTH)

    s = {k: jnp.float32(v) for k, v in sizes.items()}
    return (jax.jit(f) if jit else f)(s)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("preset", WHOLE_RATES + ("tiny",))
def test_smooth_equals_exact_without_ceilings(preset, jit, rng):
    hw = _hw(preset)
    for _ in range(5):
        s = _whole_sizes(rng, hw)
        exact = _rules(HwNumbers.of(hw), s, EXACT)
        smooth = _smooth(hw, s, jit)
        for name, v in exact.items():
            assert float(smooth[name]) == float(v), (name, s, float(smooth[name]), v)


@pytest.mark.parametrize("preset", PRESETS + ("tiny",))
def test_smooth_under_exact(preset, rng):
    """At any sizes a ceiling only rounds up: SMOOTH <= EXACT, and a whole block (or a cycle per
    rate division) at most apart per ceiling."""
    hw = _hw(preset)
    for _ in range(10):
        s = dict(
            m=int(rng.integers(1, 300)),
            n=int(rng.integers(1, 300)),
            k=int(rng.integers(1, 600)),
            nbytes=int(rng.integers(1, 1 << 20)),
            out_bytes=int(rng.integers(1, 1 << 18)),
            vbytes=int(rng.integers(1, 1 << 14)),
            bursts=int(rng.integers(1, 40)),
            cores=int(rng.integers(1, hw.num_cores + 1)),
        )
        exact = _rules(HwNumbers.of(hw), s, EXACT)
        smooth = _smooth(hw, s, False)
        for name, v in exact.items():
            sv = float(smooth[name])
            assert sv <= v * (1 + 1e-6), (name, s, sv, v)  # float32 division vs its ceiling
            assert sv > 0, (name, s, sv)
        # a rate's ceiling adds under one cycle
        assert exact["vector"] - float(smooth["vector"]) < 1 + 1e-3


FD_STEP = 4.0  # the central difference's half-width, in each size's unit (bytes, rows, bursts)


def _kink_free_point(rng, h):
    """Sizes (above one block and 1 + FD_STEP bursts: away from the ``max(., 1)`` kinks) at which no
    SMOOTH rule bends within FD_STEP of the point along a size it depends on, with each rule's
    gradient and one-sided differences there: ``(s0, {rule: (grad, {size index: (d-, d+)})})``.

    The rules are piecewise linear, and convex in each size (maxima of linear pieces: ``max(a / b,
    1)``, Fixpipe's L0C read against its GM write), so equal one-sided differences over FD_STEP mean
    one straight piece through the whole stencil, whose slope the gradient must be; unequal ones mean
    a kink inside, across which a central difference is no derivative (a draw within a step of
    fixpipe_gm's read = write kink failed the test now and then). Such a point is drawn again."""
    rules = jax.jit(lambda x: _rules(h, dict(zip(SIZES, x)), SMOOTH))
    grads = jax.jit(jax.jacrev(rules))
    for _ in range(20):
        s0 = dict(
            m=rng.uniform(40, 300),
            n=rng.uniform(40, 300),
            k=rng.uniform(40, 600),
            nbytes=rng.uniform(1e3, 1e5),
            out_bytes=rng.uniform(1e3, 1e5),
            vbytes=rng.uniform(1e3, 1e4),
            bursts=rng.uniform(2 + FD_STEP, 40),
            cores=1.0,
        )
        x0 = jnp.array([s0[k] for k in SIZES], jnp.float32)
        at, jac = rules(x0), grads(x0)
        out, bent = {}, False
        for i in range(len(SIZES)):
            e = jnp.zeros_like(x0).at[i].set(FD_STEP)
            up, down = rules(x0 + e), rules(x0 - e)
            for name in at:
                g = np.asarray(jac[name])
                if g[i] == 0:
                    continue
                d_minus, d_plus = float(at[name]) - float(down[name]), float(up[name]) - float(at[name])
                # a kink, not float32 rounding (under 0.5% of a difference here)
                bent |= abs(d_plus - d_minus) > 1e-2 * (abs(d_plus) + abs(d_minus))
                out.setdefault(name, (g, {}))[1][i] = (d_minus, d_plus)
        if not bent:
            return s0, {name: out.get(name, (np.asarray(jac[name]), {})) for name in at}
    raise AssertionError("20 draws in a row had a SMOOTH rule bend within FD_STEP of them: see the rng seed")


@pytest.mark.parametrize("preset", PRESETS)
def test_smooth_rules_differentiable(preset, rng):
    """The gradient of every SMOOTH rule in the sizes is finite and agrees with a central difference
    (at a point with no kink within the difference's step: :func:`_kink_free_point`), and the rates'
    gradients are there."""
    hw = _hw(preset)
    h = HwNumbers.arrays(hw)
    s0, rules = _kink_free_point(rng, h)
    for name, (g, diffs) in rules.items():
        assert np.all(np.isfinite(g)) and np.any(g > 0), (name, g)
        for i, (d_minus, d_plus) in diffs.items():
            fd = (d_minus + d_plus) / (2 * FD_STEP)
            assert fd == pytest.approx(g[i], rel=2e-2), (name, SIZES[i], s0, fd, g[i])
    # co-design differentiates the hardware: more bytes per cycle, fewer cycles
    vb = jnp.float32(s0["vbytes"])
    d_rate = jax.grad(lambda r: costs.vector(h._replace(vec_rate=r), vb, arith=SMOOTH))(h.vec_rate)
    assert float(d_rate) == pytest.approx(-float(vb) / float(h.vec_rate) ** 2, rel=1e-4)
    nb = jnp.float32(s0["nbytes"])
    d_gm = jax.grad(lambda r: costs.dma_in(h, nb, 1, costs.gm_rate(h._replace(gm=r), 1), arith=SMOOTH))(h.gm)
    assert float(d_gm) < 0


def test_exact_is_the_default(rng):
    """A rule called without ``arith`` is the integer rule (the emulator's and the exact model's)."""
    hw = _hw("ascend910")
    h = HwNumbers.of(hw)
    m, n, k = (int(rng.integers(1, 300)) for _ in range(3))
    assert costs.mmad(h, m, n, k, ISZ) == costs.mmad(h, m, n, k, ISZ, arith=EXACT)
    blocks = -(-m // hw.cube_m) * -(-n // hw.cube_n) * -(-k // costs.k0(h, ISZ))
    assert costs.mmad(h, m, n, k, ISZ) == h.mmad_su + blocks
    assert costs.vector(h, 0) == 0 and float(costs.vector(h, jnp.float32(0), arith=SMOOTH)) == h.vec_su


def test_a_dma_moves_at_most_one_row_per_its_row_cycles():
    # the row rate: a copy of many short rows takes rows x row cycles where that is longer than its bytes'
    # time, and its bytes' time otherwise; the gap per burst comes on top; 0 is no limit (every preset
    # but the 910B1)
    hw = npu_jax.presets.ascend910b()
    h = HwNumbers.of(hw)._replace(row=4, burst=0)
    l2 = h.l2_read  # 110 B/cycle from L2
    short, long_ = 64 * 128, 64 * 2048  # 64 rows of 128 B (rows bind), of 2 KB (bytes bind)
    assert costs.dma_in(h, short, 64, 32.0, hit_bytes=short) == h.mte2_su + 64 * 4
    assert costs.dma_in(h, long_, 64, 32.0, hit_bytes=long_) == h.mte2_su + int(np.ceil(long_ / l2))
    assert costs.dma_in(h._replace(burst=2), short, 64, 32.0, short) == h.mte2_su + 64 * 4 + 63 * 2
    assert costs.dma_out(h, short, 64, 32.0) == h.mte3_su + max(64 * 4, short // 32)
    none = h._replace(row=0)
    assert costs.dma_in(none, short, 64, 32.0, hit_bytes=short) == h.mte2_su + int(np.ceil(short / l2))
    assert npu_jax.presets.ascend910b().assumed.dma_row_cycles == 0

"""The relaxed cost model: img2col cycles as a differentiable function of log tile sizes.

Parameters (per start of the search) are six continuous numbers, the logs of

    ho, wo (L1 output tile), n (Cout block), cin1 (input-channel blocks per weight part),
    k_l0 (Mmad depth), cout_split (core groups along Cout: the split over cores),

and three discrete choices, ``disc = (resident, stages, cout_split)``: the loop order (weights stay
in L1, or the input tile stays and weights stream), double buffering (1 or 2 stages) and the core
groups along Cout. The search enumerates them in parallel (every start carries one combination), so
``cout_split`` is not relaxed: :func:`project` pins its log parameter to ``log(disc[2])``, and the
way Cout blocks and spatial tiles divide over the cores stays a fixed choice of the start.

:func:`surrogate` is the cost model written over reals: the same per-instruction costs (start-up
plus bytes / rate, one fractal per Cube cycle, a gap per GM burst) for a full tile, trip counts
through the rules' smooth ceiling (``SMOOTH.cdiv``: max(a / b, 1); the search's points sit on
balanced sizes, whose trip counts are nearly integers), the burst counts' switches (a tile spanning whole
rows, a Cout block holding every channel) through sigmoids in log space, and the schedule
replaced by its shape: with two stages the kernel runs at its busiest chain
(MTE2; MTE1; Cube + Fixpipe, which share L0C) plus the fill; with one stage the chains add up.
:func:`penalty` turns buffer capacities (:func:`exact.buffer_needs`, the legality check's own code,
over reals: alignment round-ups straight-through) and the space's bounds into smooth squared hinges.
The surrogate's instruction costs are ``hw/costs.py``'s rules evaluated in
:data:`~npu_jax.hw.costs.SMOOTH` arithmetic (sizes over blocks ``max(x, 1)``, bytes over rates
unceilinged): pricing them with the exact rules' straight-through ceilings was measured to cost the
search (46 of 53 ResNet-50 layers within 1.02x of the optimum instead of 53).

:func:`relaxed_cycles` is the model the search descends: ``surrogate(x) * sg(exact(r) /
surrogate(r))`` with ``r`` the integer point ``round(exp(x))`` and ``exact`` the schedule of
:mod:`exact`. Its value at a legal integer point is the exact model's cycles (tested against
``cost.conv.predict``), and its gradient is the surrogate's (the ratio is a constant of the step).

Example:
    >>> import jax.numpy as jnp, npu_jax
    >>> from npu_jax.workload.conv import canonicalize
    >>> from npu_jax.search import exact, relaxed
    >>> hw = npu_jax.presets.ascend910b()
    >>> L = exact.layer_of(canonicalize((1, 64, 56, 56), (64, 64, 3, 3), 1, 1))
    >>> x = jnp.log(jnp.array([8.0, 56.0, 64.0, 4.0, 64.0, 1.0]))
    >>> disc = jnp.array([0, 2, 1])
    >>> g = jax.grad(relaxed.objective)(x, disc, L, exact.hw_of(hw), 20, False)  # doctest: +SKIP
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from npu_jax.hw import costs
from npu_jax.hw.config import FRACTAL_ROWS
from npu_jax.hw.costs import SMOOTH, cdiv
from npu_jax.hw.formats import itemsize
from npu_jax.mapping.conv import ConvTiling
from npu_jax.search import exact

DIMS = ("ho", "wo", "n", "cin1", "k_l0", "cout_split")
sg = jax.lax.stop_gradient
ISZ = itemsize(exact.OPERAND)  # operand and output element size (the search's formats)
F = FRACTAL_ROWS


def sizes(x):
    """exp of the log parameters: the six sizes as reals."""
    return jnp.exp(x)


def bounds(L: exact.Layer, num_cores: int, resident=None):
    """(lower, upper) log bounds of the six parameters for a layer (``k_l0`` up to cin1 kh kw C0 at
    the largest cin1; :func:`project` tightens it to the current cin1)."""
    f = jnp.float32
    c1 = cdiv(L.c, exact.C0)
    lo = jnp.log(jnp.array([1.0, 1.0, F, 1.0, exact.C0, 1.0], f))
    hi = jnp.log(
        jnp.stack(
            [
                L.ho,
                L.wo,
                cdiv(L.k, F) * F,
                c1,
                c1 * L.kh * L.kw * exact.C0,
                jnp.minimum(num_cores, cdiv(L.k, F)),
            ]
        ).astype(f)
    )
    return lo, hi


def project(x, disc, L: exact.Layer, num_cores: int):
    """Clip a parameter vector into the box of its layer and pin ``cout_split`` to the start's
    ``disc[2]``: a projection, not an update rule."""
    lo, hi = bounds(L, num_cores)
    x = jnp.clip(x, lo, hi)
    x = x.at[5].set(jnp.log(disc[2].astype(jnp.float32)))
    # at least cout_split Cout blocks: n <= F floor(ceil(K / F) / cout_split), F = 16 (fractal rows)
    nb = jnp.maximum(cdiv(L.k, F) // disc[2], 1)
    x = x.at[2].set(jnp.minimum(x[2], jnp.log(float(F) * nb.astype(jnp.float32))))
    # resident weights need the whole reduction: cin1 = C1
    x = x.at[3].set(jnp.where(disc[0] > 0, hi[3], x[3]))
    kmax = jnp.log(jnp.exp(x[3]) * (L.kh * L.kw * exact.C0).astype(jnp.float32))
    return x.at[4].set(jnp.minimum(x[4], kmax))


def _full(v, extent):
    """Smooth indicator of ``v >= extent`` in log space (0.94 at v = extent, 0.06 at half of it)."""
    return jax.nn.sigmoid(8.0 * (jnp.log(v) - jnp.log(extent) + 0.35))


def _pipes(x, disc, L: exact.Layer, hw: exact.Hw, num_cores: int, coupled: bool, fused: bool = False):
    """Per-core busy cycles of each chain at a continuous point, and the fill."""
    f = jnp.float32
    ho, wo, n, cin1, k_l0, cs = sizes(x)
    res, st = disc[0] > 0, disc[1]
    Lf = exact.Layer(*(v.astype(f) for v in L))
    c1 = jnp.ceil(Lf.c / exact.C0)
    taps = Lf.kh * Lf.kw
    cin1e = jnp.minimum(cin1, c1)
    ho_e, wo_e = jnp.minimum(ho, Lf.ho), jnp.minimum(wo, Lf.wo)
    n_tiles = Lf.n * SMOOTH.cdiv(Lf.ho, ho) * SMOOTH.cdiv(Lf.wo, wo)
    ncb = SMOOTH.cdiv(Lf.k, n)
    cb_per = SMOOTH.cdiv(ncb, cs)
    cores_sp = jnp.maximum(1.0, jnp.minimum(num_cores / cs, n_tiles))
    cores = cores_sp * cs
    tiles_pc = SMOOTH.cdiv(n_tiles, cores_sp)
    items = tiles_pc * cb_per
    k_total = c1 * taps * exact.C0
    k_l1 = cin1e * taps * exact.C0
    parts = jnp.where(res, 1.0, SMOOTH.cdiv(c1, cin1))
    steps = parts * SMOOTH.cdiv(k_l1, k_l0)
    gm_rate = costs.gm_rate(hw, cores)
    nv = jnp.minimum(n, Lf.k)
    m = ho_e * wo_e
    # one K step: Load3D (L0A) + LoadData (L0B), and the Mmad
    l0a_bytes = costs.load_l0a_bytes(hw, m, k_l0, ISZ, arith=SMOOTH)
    l0b_bytes = costs.load_l0b_bytes(hw, k_l0, nv, ISZ, arith=SMOOTH)
    load = costs.load_l0a(hw, l0a_bytes, arith=SMOOTH) + costs.load_l0b(hw, l0b_bytes, arith=SMOOTH)
    mmad = costs.mmad(hw, m, nv, k_l0, ISZ, arith=SMOOTH)
    # input tile (halo included) and weight parts; bursts: one per row and channel block unless
    # the tile spans whole rows (whole planes)
    rows = jnp.minimum((ho_e - 1) * Lf.sh + (Lf.kh - 1) * Lf.dh + 1, Lf.h)
    cols = jnp.minimum((wo_e - 1) * Lf.sw + (Lf.kw - 1) * Lf.dw + 1, Lf.w)
    wc, wr = _full(wo, Lf.wo), _full(ho, Lf.ho)
    x_bursts = wc * (wr + (1 - wr) * c1) + (1 - wc) * rows * c1
    # L2: the relayout kernel left the input there; the first core of a Cout group brings the
    # weights in on its first tile, its later tiles find them in L2 (the first core sets the time)
    x_bytes = c1 * exact.C0 * rows * cols * ISZ
    cx = costs.dma_in(hw, x_bytes, x_bursts, gm_rate, x_bytes, arith=SMOOTH)
    w_bytes = k_l1 * nv * ISZ
    cw = costs.dma_in(hw, w_bytes, 1, gm_rate, w_bytes * (1.0 - 1.0 / tiles_pc), arith=SMOOTH)
    cw_res = costs.dma_in(hw, cb_per * k_total * n * ISZ, 1, gm_rate, arith=SMOOTH)
    wrate = costs.write_rate(hw, cores)
    # epilogue: L0C out; one burst per output row of the tile unless it holds every channel
    out_bytes = m * nv * ISZ
    wn = _full(n, Lf.k)
    out_bursts = wn * (wc + (1 - wc) * ho_e) + (1 - wn) * m
    if coupled:
        fx = costs.l0c_to_ub(hw, m, nv, arith=SMOOTH)
        c3 = costs.dma_out(hw, out_bytes, out_bursts, wrate, arith=SMOOTH)
        if fused:  # the epilogue's vector steps (VAdd bias, VRelu, VCast) over the UB tile
            epi, out = exact.epilogue(coupled)
            vsz, osz = itemsize(epi.vector), itemsize(out)
            for _op, role in epi.vector_ops():
                width = max(vsz, osz) if role == "cast" else vsz
                c3 = c3 + costs.vector(hw, m * n * width, arith=SMOOTH)
    else:
        fx = costs.fixpipe_gm(hw, m, nv, out_bytes, out_bursts, wrate, arith=SMOOTH)
        c3 = jnp.zeros_like(fx)
    # per item, on each chain: MTE2 (input once per spatial tile, weight parts), MTE1 (loads),
    # Cube + Fixpipe (they share the one L0C tile), and the epilogue's own queue
    a = cx / cb_per + jnp.where(res, 0.0, parts * cw)
    b = steps * load
    c = steps * mmad + fx
    e = fx + c3
    # one item's latency: its first fetches, then loads and Mmads overlapped step by step
    lat = (
        cx + jnp.where(res, cw_res, cw) + steps * jnp.maximum(load, mmad) + jnp.minimum(load, mmad) + fx + c3
    )
    return dict(
        a=a,
        b=b,
        c=c,
        e=e,
        lat=lat,
        st=st,
        load=load,
        mmad=mmad,
        items=items,
        steps=steps,
        mte2_once=jnp.where(res, cw_res, 0.0),
        # the chip's HBM: the weights once, the output once (the input is in L2 already)
        hbm=costs.hbm_cycles(hw, Lf.k * k_total * ISZ + Lf.n * Lf.ho * Lf.wo * Lf.k * ISZ, arith=SMOOTH),
    )


def surrogate(x, disc, L: exact.Layer, hw: exact.Hw, num_cores: int, coupled: bool, fused: bool = False):
    """Smooth estimate of the cycles at a continuous point (see the module docstring).

    Two stages: a pipeline over the core's items, ``(items - 1) x`` the busiest chain per item
    (a smooth maximum) plus one item's latency and the resident weights' load. One stage: the
    chains in series, item after item."""
    p = _pipes(x, disc, L, hw, num_cores, coupled, fused)
    chains = jnp.stack([p["a"], p["b"], p["c"], p["e"]])
    tau = 0.05 * sg(jnp.max(chains))
    busiest = tau * jax.nn.logsumexp(chains / tau)
    piped = (p["items"] - 1) * busiest + p["lat"] + p["mte2_once"]
    serial = p["items"] * (p["a"] + p["steps"] * (p["load"] + p["mmad"]) + p["e"]) + p["mte2_once"]
    cores_end = jnp.where(p["st"] == 2, piped, serial)
    both = jnp.stack([cores_end, p["hbm"]])
    tau = 0.05 * sg(jnp.max(both))
    return hw.launch + tau * jax.nn.logsumexp(both / tau)  # launch, then the later of cores and HBM


def needs(x, disc, L: exact.Layer, coupled: bool, fused: bool = False):
    """Bytes per buffer at a continuous point: :func:`exact.buffer_needs` (the same code) over
    reals, whose ceilings and alignments are then straight-through (exact in value)."""
    f = jnp.float32
    ho, wo, n, cin1, k_l0, cs = sizes(x)
    t = exact.tilings(ho, wo, n, cin1, k_l0, disc[0], disc[1].astype(f), cs)
    Lf = exact.Layer(*(v.astype(f) for v in L))
    return exact.buffer_needs(Lf, t, coupled, 1, fused)


def penalty(x, disc, L: exact.Layer, hw: exact.Hw, num_cores: int, coupled: bool, fused: bool = False):
    """Squared hinges: each buffer's need over its capacity, tiles under one fractal of positions,
    and more Cout groups than Cout blocks. Zero at every legal point."""
    need = needs(x, disc, L, coupled, fused)
    caps = dict(L1=hw.l1, L0A=hw.l0a, L0B=hw.l0b, L0C=hw.l0c, UB=hw.ub)
    pen = sum(jax.nn.relu(need[b] / caps[b] - 1.0) ** 2 for b in caps)
    ho, wo, n, _, _, cs = sizes(x)
    f = jnp.float32
    area_min = jnp.minimum(float(F), (L.ho * L.wo).astype(f))
    pen += jax.nn.relu(jnp.log(area_min) - jnp.log(ho * wo)) ** 2
    pen += jax.nn.relu(jnp.log(cs) - jnp.log(jnp.ceil(L.k.astype(f) / n))) ** 2
    return pen


def objective(
    x,
    disc,
    L: exact.Layer,
    hw: exact.Hw,
    num_cores: int,
    coupled: bool,
    fused: bool = False,
    weight: float = 30.0,
):
    """What the optimiser descends: log surrogate cycles + weight x penalty."""
    return jnp.log(surrogate(x, disc, L, hw, num_cores, coupled, fused)) + weight * penalty(
        x, disc, L, hw, num_cores, coupled, fused
    )


def integer_point(x, disc) -> ConvTiling:
    """The integer tiling nearest a continuous point (sizes rounded; n to a multiple of the fractal's
    16 rows, k_l0 of C0)."""
    s = sizes(x)
    r = jnp.round(s).astype(jnp.int32)
    n = jnp.maximum(F, jnp.round(s[2] / F).astype(jnp.int32) * F)
    k = jnp.maximum(exact.C0, jnp.round(s[4] / exact.C0).astype(jnp.int32) * exact.C0)
    i32 = jnp.int32
    return exact.tilings(
        r[0], r[1], n, r[3], k, disc[0].astype(i32), disc[1].astype(i32), disc[2].astype(i32)
    )


def relaxed_cycles(x, disc, L: exact.Layer, hw: exact.Hw, num_cores: int, coupled: bool, fused: bool = False):
    """The relaxed model: the surrogate scaled to the exact schedule at the nearest integer point.

    Equals the exact cycles (``cost.conv.predict``) wherever ``exp(x)`` is a legal integer tiling;
    its gradient in ``x`` (and in ``hw``) is the surrogate's."""
    t = integer_point(x, disc)
    r = jnp.log(jnp.stack([t.ho, t.wo, t.n, t.cin1, t.k_l0, t.cout_split]).astype(jnp.float32))
    ex = exact.cycles(L, t, hw, num_cores, coupled, fused).astype(jnp.float32)
    ratio = sg(ex / surrogate(r, disc, L, hw, num_cores, coupled, fused))
    return surrogate(x, disc, L, hw, num_cores, coupled, fused) * ratio


def params_of(t: ConvTiling):
    """(x, disc) of integer tilings: the inverse of :func:`integer_point` on legal points."""
    x = jnp.log(jnp.stack([t.ho, t.wo, t.n, t.cin1, t.k_l0, t.cout_split], -1).astype(jnp.float32))
    return x, jnp.stack([t.weights_resident, t.l1_stages, t.cout_split], -1).astype(jnp.int32)

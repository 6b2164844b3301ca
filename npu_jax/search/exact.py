"""The img2col cost model over *array-valued* tilings: jittable, vmappable, exact.

:func:`npu_jax.cost.conv.predict` reads one :class:`~npu_jax.kernels.conv2d.ConvPlan` whose sizes are
Python ints, so its loops over items and weight parts unroll at trace time. The search needs the
same figure for thousands of tilings at once, with the layer and the hardware as arrays too (so one
compiled program serves every layer and every hardware variant of a sweep). This module writes the
same schedule recurrence over traced scalars: ``lax.fori_loop`` over a core's items and over the
weight parts of an item (trip counts traced), vectorised over the cores. :func:`cycles` is then
``vmap``-ed over candidates. It equals ``predict`` exactly at every legal tiling (tested).

Three pytrees carry the inputs, each a NamedTuple of arrays:

* :class:`Layer` -- the conv geometry (int32 scalars);
* :class:`Tilings` -- the img2col tiling (int32): ``ho, wo, n, cin1, k_l0, resident, stages,
  cout_split``. ``stages`` is the ping-pong depth of L1 *and* L0 together (1 or 2), the two
  depths the cost model is validated on; cores are always the preset's (``cores=None``);
* :class:`Hw` -- every rate, start-up and capacity of a :class:`HardwareConfig` (float32 / int32),
  so gradients and sweeps can treat the hardware as data. Two figures stay static:
  ``num_cores`` and ``coupled`` (they change the program's shape, not a number in it).

The output epilogue (how L0C leaves the core) enters as one term, :func:`epilogue_costs`, and one
capacity (UB), so a fused epilogue (ReLU on Fixpipe or on the Vector unit) changes only that term.

Example:
    >>> import jax, npu_jax
    >>> from npu_jax.kernels.conv_geometry import canonicalize
    >>> from npu_jax.search import exact
    >>> hw = npu_jax.presets.ascend910b()
    >>> g = canonicalize((1, 64, 56, 56), (64, 64, 3, 3), 1, 1)
    >>> t = exact.tilings_from([npu_jax.ConvTiling(ho=8, wo=56, n=64, cin1=4, k_l0=64,
    ...                         l1_stages=2, l0_stages=2)])
    >>> int(exact.batch_cycles(exact.layer_of(g), t, exact.hw_of(hw), hw.num_cores, hw.coupled)[0])
    ... # doctest: +SKIP
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from npu_jax.hw.config import HardwareConfig
from npu_jax.kernels.conv2d import ConvTiling
from npu_jax.kernels.conv_geometry import ConvGeometry

C0 = 16  # fp16 channel block (32 B / 2 B); the search tiles fp16 operands, fp16 outputs
ISZ = 2  # operand and output itemsize (fp16)
# the fused epilogue the search knows: bias + ReLU, as ``fusion.conv_relu`` with a bias and the
# default Policy (vector arithmetic in fp32; the Fixpipe's bias table is fp32 too)
VSZ = 4  # UB tile itemsize (Policy().vector = fp32)
BIAS_SZ = 4  # bias itemsize in GM and in L1 / UB (fp32 either way)


class Layer(NamedTuple):
    """A conv layer as int32 scalars (or a batch of them)."""

    n: jax.Array  # batch
    c: jax.Array  # input channels
    h: jax.Array  # input height
    w: jax.Array  # input width
    k: jax.Array  # output channels (Cout)
    kh: jax.Array
    kw: jax.Array
    sh: jax.Array  # stride
    sw: jax.Array
    dh: jax.Array  # dilation
    dw: jax.Array
    pt: jax.Array  # top / left padding (bottom / right enter through ho, wo)
    pl: jax.Array
    ho: jax.Array  # output height
    wo: jax.Array  # output width


class Tilings(NamedTuple):
    """img2col tilings as int32 arrays of one shape (vendor names in :class:`ConvTiling`)."""

    ho: jax.Array  # output rows per tile [hoL1]
    wo: jax.Array  # output cols per tile [woL1]
    n: jax.Array  # Cout block [nL0], multiple of 16
    cin1: jax.Array  # C0-blocks of input channels per weight part [kBL1 / (kh kw C0)]
    k_l0: jax.Array  # Mmad depth [kL0], multiple of 16
    resident: jax.Array  # 1 = weights stay in L1 (loop order "weights stay"), 0 = input stays
    stages: jax.Array  # 1 or 2: L1 and L0 ping-pong depth
    cout_split: jax.Array  # core groups along Cout


class Hw(NamedTuple):
    """The numbers of a :class:`HardwareConfig` the img2col kernel's cost depends on."""

    gm: jax.Array  # float32 B/cycle per core
    chip_gm: jax.Array  # float32 B/cycle for the chip (inf = unshared)
    l0a_rate: jax.Array  # L1 -> L0A B/cycle
    l0b_rate: jax.Array  # L1 -> L0B B/cycle
    fix_rate: jax.Array  # Fixpipe L0C read B/cycle
    l0c_ub_rate: jax.Array  # L0C -> UB B/cycle (coupled)
    ub_gm_rate: jax.Array  # UB -> GM B/cycle (coupled)
    mte2_su: jax.Array  # start-ups (cycles), int32
    mte3_su: jax.Array
    mte1_su: jax.Array
    mmad_su: jax.Array
    fix_su: jax.Array
    vec_su: jax.Array
    burst: jax.Array  # gap per extra GM burst
    vec_rate: jax.Array  # float32 B/cycle of one vector instruction (one repeat per cycle)
    l1: jax.Array  # capacities (bytes), float32 so that co-design can differentiate them
    l0a: jax.Array
    l0b: jax.Array
    l0c: jax.Array
    ub: jax.Array


def layer_of(g: ConvGeometry) -> Layer:
    """The :class:`Layer` arrays of a canonical :class:`ConvGeometry`."""
    v = (
        g.n,
        g.c,
        g.h,
        g.w,
        g.k,
        g.kh,
        g.kw,
        g.stride[0],
        g.stride[1],
        g.dilation[0],
        g.dilation[1],
        g.pads[0],
        g.pads[2],
        g.ho,
        g.wo,
    )
    return Layer(*(jnp.int32(x) for x in v))


def hw_of(hw: HardwareConfig) -> Hw:
    """The :class:`Hw` arrays of a :class:`HardwareConfig` (alignment is folded into the needs)."""
    a = hw.assumed
    chip = np.inf if hw.chip_gm_bytes_per_cycle is None else hw.chip_gm_bytes_per_cycle
    f, i = jnp.float32, jnp.int32
    return Hw(
        f(hw.gm_bytes_per_cycle),
        f(chip),
        f(hw.l1_to_l0a_bytes_per_cycle),
        f(hw.l0b_rate),
        f(a.fixpipe_bytes_per_cycle),
        f(hw.l0c_to_ub_bytes_per_cycle),
        f(hw.ub_to_gm_rate),
        i(a.mte2_startup),
        i(a.mte3_startup),
        i(a.mte1_startup),
        i(a.mmad_startup),
        i(a.fixpipe_startup),
        i(a.vector_startup),
        i(a.gm_burst_overhead),
        f(hw.vector_repeat_bytes),
        f(hw.l1_bytes),
        f(hw.l0a_bytes),
        f(hw.l0b_bytes),
        f(hw.l0c_bytes),
        f(hw.ub_bytes),
    )


def tilings_from(tilings) -> Tilings:
    """Stack :class:`ConvTiling` s (img2col, ``l1_stages == l0_stages``, ``cores=None``)."""
    rows = []
    for t in tilings:
        if t.l1_stages != t.l0_stages or t.cores is not None:
            raise ValueError(
                f"the search space ties l1_stages to l0_stages and uses every core "
                f"(cores=None); got {t}. Use l1_stages == l0_stages and cores=None."
            )
        rows.append((t.ho, t.wo, t.n, t.cin1, t.k_l0, int(t.weights_resident), t.l1_stages, t.cout_split))
    a = np.asarray(rows, np.int32).reshape(-1, 8)
    return Tilings(*(jnp.asarray(a[:, i]) for i in range(8)))


def tiling_at(t: Tilings, i: int = 0) -> ConvTiling:
    """Row ``i`` of a batch of :class:`Tilings` as a :class:`ConvTiling`."""
    v = [int(np.asarray(x).reshape(-1)[i]) for x in t]
    return ConvTiling(
        ho=v[0],
        wo=v[1],
        n=v[2],
        cin1=v[3],
        k_l0=v[4],
        weights_resident=bool(v[5]),
        l1_stages=v[6],
        l0_stages=v[6],
        cout_split=v[7],
    )


# ---- shared arithmetic ---------------------------------------------------------------------------
def _cdiv(a, b):
    return -(-a // b)


def _r(a, m):
    return _cdiv(a, m) * m


def _ceil_rate(nbytes, rate):
    """ceil(bytes / rate) as the cost model computes it (float32 division; exact below 2^24 B)."""
    return jnp.ceil(jnp.asarray(nbytes, jnp.float32) / rate).astype(jnp.int32)


def _gm(nbytes, bursts, rate, startup, burst):
    gaps = jnp.maximum(bursts - 1, 0) * burst
    return jnp.where(nbytes > 0, startup + _ceil_rate(nbytes, rate) + gaps, 0)


def _onchip(nbytes, rate, startup):
    return jnp.where(nbytes > 0, startup + _ceil_rate(nbytes, rate), 0)


def epilogue_costs(hw: Hw, coupled: bool, fused: bool, m_eff, nv, n, out_bytes, out_bursts, live, gm_rate):
    """(first, second) cycles of draining one item's L0C: the first frees L0C for the next item's
    Mmads, the second keeps the epilogue's queue busy after it. Fixpipe (separated chips; second =
    0; a fused bias + ReLU rides in the same instruction at no cost) or L0C -> UB on the Vector
    pipe, then (fused: VAdd bias, VRelu, VCast to fp16, each over the tile's ``m_eff x n`` values
    in fp32) and UB -> GM on MTE3 (coupled chips), as ``cost.conv.item_costs``."""
    l0c_bytes = _r(m_eff, 16) * _r(nv, 16) * 4
    if coupled:
        fx = _onchip(l0c_bytes, hw.l0c_ub_rate, hw.vec_su) * live
        c3 = _gm(out_bytes, out_bursts, jnp.minimum(hw.ub_gm_rate, gm_rate), hw.mte3_su, hw.burst)
        if fused:
            c3 = c3 + 3 * _onchip(m_eff * n * VSZ * live, hw.vec_rate, hw.vec_su)
        return fx, c3
    gaps = jnp.maximum(out_bursts - 1, 0) * hw.burst
    fx = jnp.where(
        out_bytes > 0,
        hw.fix_su + jnp.maximum(_ceil_rate(l0c_bytes, hw.fix_rate), _ceil_rate(out_bytes, gm_rate) + gaps),
        0,
    )
    return fx, jnp.zeros_like(fx)


# ---- capacities ----------------------------------------------------------------------------------
# Written against ``xp`` (jax.numpy inside the search's programs, numpy to enumerate a space): the
# same integer arithmetic either way.
def derived(L: Layer, t: Tilings, num_cores: int, xp=jnp) -> dict:
    """Loop counts and sizes of one tiling (the ConvPlan properties, for bound = layer)."""
    c1 = _cdiv(L.c, C0)
    ncb = _cdiv(L.k, t.n)
    n_th, n_tw = _cdiv(L.ho, t.ho), _cdiv(L.wo, t.wo)
    n_tiles = L.n * n_th * n_tw
    cores_sp = xp.maximum(1, xp.minimum(num_cores // t.cout_split, n_tiles))
    cb_per = _cdiv(ncb, t.cout_split)
    return dict(
        c1=c1,
        k_total=c1 * L.kh * L.kw * C0,
        k_l1=xp.minimum(t.cin1, c1) * L.kh * L.kw * C0,
        ncb=ncb,
        n_th=n_th,
        n_tw=n_tw,
        n_tiles=n_tiles,
        cores_sp=cores_sp,
        cb_per=cb_per,
        cores=cores_sp * t.cout_split,
        tiles_per_core=_cdiv(n_tiles, cores_sp),
        n_parts=_cdiv(c1, t.cin1),
        m_t=_r(t.ho * t.wo, 16),
        h_in=(t.ho - 1) * L.sh + (L.kh - 1) * L.dh + 1,
        w_in=(t.wo - 1) * L.sw + (L.kw - 1) * L.dw + 1,
    )


def buffer_needs(
    L: Layer,
    t: Tilings,
    coupled: bool,
    num_cores: int,
    fused: bool = False,
    align=(32, 512, 512, 64, 32),
    xp=jnp,
) -> dict:
    """Bytes each buffer needs (allocation order and alignment as ``ConvPlan.allocate``; with
    ``fused``, the bias + ReLU epilogue's buffers as ``kernels.epilogue.allocate``)."""
    d = derived(L, t, num_cores, xp)
    a1, a0a, a0b, a0c, aub = align
    st = t.stages
    x = _r(d["c1"] * d["h_in"] * d["w_in"] * C0 * ISZ, a1) * st
    w_res = _r((d["cb_per"] * d["k_total"] + t.k_l0) * t.n * ISZ, a1)
    w_part = _r(_r(d["k_l1"], t.k_l0) * t.n * ISZ, a1) * st
    bias = _r(d["cb_per"] * t.n * BIAS_SZ, a1 if not coupled else aub)  # the core's Cout group's bias
    need = dict(
        L1=x + xp.where(t.resident > 0, w_res, w_part),
        L0A=_r(d["m_t"] * t.k_l0 * ISZ, a0a) * st,
        L0B=_r(t.k_l0 * t.n * ISZ, a0b) * st,
        L0C=_r(d["m_t"] * t.n * 4, a0c),
    )
    zero = xp.zeros_like(need["L0C"])
    if fused and not coupled:  # Fixpipe: bias (fp32) in L1; the activation needs no buffer
        need["L1"] = need["L1"] + bias
        need["UB"] = zero
    elif fused:  # UB: the fp32 tile, the bias, the fp16 output tile (VCast's destination)
        need["UB"] = _r(d["m_t"] * t.n * VSZ, aub) + bias + _r(d["m_t"] * t.n * ISZ, aub)
    else:
        need["UB"] = _r(d["m_t"] * t.n * ISZ, aub) if coupled else zero
    return need


def legal(L: Layer, t: Tilings, hw: Hw, num_cores: int, coupled: bool, fused: bool = False, xp=jnp):
    """True where ``make_plan(g, "img2col", tiling, hw[, epi])`` would accept the tiling."""
    d = derived(L, t, num_cores, xp)
    need = buffer_needs(L, t, coupled, num_cores, fused, xp=xp)
    ok = (t.ho >= 1) & (t.wo >= 1) & (t.n >= 16) & (t.n % 16 == 0) & (t.cin1 >= 1)
    ok &= (t.k_l0 >= C0) & (t.k_l0 % C0 == 0) & ((t.stages == 1) | (t.stages == 2))
    ok &= (t.cout_split >= 1) & (t.cout_split <= num_cores) & (t.cout_split <= d["ncb"])
    ok &= (t.resident == 0) | (t.cin1 >= d["c1"])
    for buf, cap in (("L1", hw.l1), ("L0A", hw.l0a), ("L0B", hw.l0b), ("L0C", hw.l0c), ("UB", hw.ub)):
        ok &= need[buf] <= cap
    return ok


# ---- the schedule ----------------------------------------------------------------------------------
def cycles(L: Layer, t: Tilings, hw: Hw, num_cores: int, coupled: bool, fused: bool = False):
    """Cycles of one img2col tiling (scalars in, int32 scalar out): ``cost.conv.predict``'s schedule
    recurrence, with the items and weight parts as traced loops and the cores as a vector.
    ``fused``: the Conv + bias + ReLU kernel (``fusion.conv_relu`` with a bias)."""
    i32 = jnp.int32
    d = derived(L, t, num_cores)
    c1, k_total, k_l1, ncb = d["c1"], d["k_total"], d["k_l1"], d["ncb"]
    n_th, n_tw, n_tiles, cores_sp = d["n_th"], d["n_tw"], d["n_tiles"], d["cores_sp"]
    cb_per, cores, cs = d["cb_per"], d["cores"], t.cout_split
    items = d["tiles_per_core"] * cb_per
    gm_rate = jnp.minimum(hw.gm, hw.chip_gm / cores.astype(jnp.float32))
    st2 = t.stages == 2
    res = t.resident > 0
    b = jnp.arange(num_cores, dtype=i32)
    core_on = b < cores
    cb0 = (b % cs) * cb_per
    sgrp = b // cs
    blocks = jnp.clip(ncb - cb0, 0, cb_per)
    cw_res = jnp.where(res & core_on, _gm(blocks * k_total * t.n * ISZ, 1, gm_rate, hw.mte2_su, hw.burst), 0)
    z = jnp.zeros((num_cores,), i32)
    cbias = z
    if fused:  # each core's bias values, once, before the first item (MTE2; the epilogue waits)
        bias_bytes = jnp.clip(L.k - cb0 * t.n, 0, cb_per * t.n) * BIAS_SZ
        cbias = jnp.where(core_on, _gm(bias_bytes, 1, gm_rate, hw.mte2_su, hw.burst), 0)
    # state: mte2, le, me1, me2, mfree, ep_free, relx0, relx1, relw0, relw1
    state0 = (cw_res + cbias, cw_res, z, z, z, cw_res + cbias, z, z, z, z)

    def step(le, me1, me2, Lc, Mc, ready, mf, on):
        ls = jnp.maximum(jnp.maximum(le, jnp.where(st2, me2, me1)), ready)
        le_n = ls + Lc
        me_n = jnp.maximum(jnp.maximum(le_n, me1), mf) + Mc
        return jnp.where(on, le_n, le), jnp.where(on, me_n, me1), jnp.where(on, me1, me2)

    def item(j, s):
        mte2, le, me1, me2, mfree, ep_free, relx0, relx1, relw0, relw1 = s
        tile = sgrp + (j // cb_per) * cores_sp
        cbl = j % cb_per
        cb = cb0 + cbl
        live = core_on & (tile < n_tiles) & (cb < ncb)
        th = (tile // n_tw) % n_th
        tw = tile % n_tw
        ho_v = jnp.minimum(t.ho, L.ho - th * t.ho)
        wo_v = jnp.minimum(t.wo, L.wo - tw * t.wo)
        m_eff = (ho_v - 1) * t.wo + wo_v
        nv = jnp.minimum(t.n, L.k - cb * t.n)
        # the input tile (fetched by the first Cout block of a spatial tile)
        fetch = live & (cbl == 0)
        ih0, iw0 = th * t.ho * L.sh - L.pt, tw * t.wo * L.sw - L.pl
        r0, c0_ = jnp.maximum(ih0, 0), jnp.maximum(iw0, 0)
        rows = jnp.minimum((ho_v - 1) * L.sh + (L.kh - 1) * L.dh + 1 + ih0, L.h) - r0
        cols = jnp.minimum((wo_v - 1) * L.sw + (L.kw - 1) * L.dw + 1 + iw0, L.w) - c0_
        cols_full = (c0_ == 0) & (cols == L.w)
        rows_full = (r0 == 0) & (rows == L.h)
        x_bytes = c1 * C0 * rows * cols * ISZ * fetch
        x_bursts = jnp.where(cols_full, 1, rows) * jnp.where(cols_full & rows_full, 1, c1)
        cx = _gm(x_bytes, x_bursts, gm_rate, hw.mte2_su, hw.burst)
        # per-step costs
        L3 = _onchip(_r(m_eff, 16) * t.k_l0 * ISZ, hw.l0a_rate, hw.mte1_su)

        def load(kv):
            return L3 + _onchip(_r(kv, C0) * _r(nv, 16) * ISZ, hw.l0b_rate, hw.mte1_su)

        def mmad(kv):
            blk = _cdiv(m_eff, 16) * _cdiv(nv, 16) * _cdiv(kv, C0)
            return jnp.where(blk > 0, hw.mmad_su + blk, 0)

        Lf, MMf = load(t.k_l0), mmad(t.k_l0)
        period = jnp.where(st2, jnp.maximum(Lf, MMf), Lf + MMf)
        # epilogue
        out_bytes = ho_v * wo_v * nv * ISZ * live
        full_n = (cb == 0) & (nv == L.k)
        full_w = (tw == 0) & (wo_v == L.wo)
        out_bursts = jnp.where(full_n, 1, wo_v) * jnp.where(full_n & full_w, 1, ho_v)
        fx, c3 = epilogue_costs(hw, coupled, fused, m_eff, nv, t.n, out_bytes, out_bursts, live, gm_rate)
        release = live & ((cbl == cb_per - 1) | (cb == ncb - 1))

        xe = jnp.maximum(mte2, jnp.where(st2, relx1, relx0)) + cx
        mte2 = jnp.where(fetch, xe, mte2)
        xready = jnp.where(fetch, xe, 0)

        def part(q, ps):
            mte2, l_, m1_, m2_, rw0, rw1 = ps
            part_k = jnp.minimum(k_l1, k_total - q * k_l1)
            S = _cdiv(part_k, t.k_l0)
            kvS = part_k - (S - 1) * t.k_l0
            kv1 = jnp.where(S > 1, t.k_l0, kvS)
            w_bytes = part_k * nv * ISZ * live
            cw = _gm(w_bytes, jnp.where(nv == t.n, 1, part_k), gm_rate, hw.mte2_su, hw.burst)
            we = jnp.maximum(mte2, jnp.where(st2, rw1, rw0)) + cw
            first = q == 0
            ready = jnp.where(res, jnp.where(first, xready, 0), jnp.where(first, jnp.maximum(we, xready), we))
            mte2 = jnp.where(res, mte2, jnp.where(live, we, mte2))
            mf = jnp.where(first, mfree, 0)
            l_, m1_, m2_ = step(l_, m1_, m2_, load(kv1), mmad(kv1), ready, mf, live & (S >= 1))
            nmid = jnp.maximum(S - 2, 0)
            for k in range(2):
                l_, m1_, m2_ = step(l_, m1_, m2_, Lf, MMf, 0, 0, live & (nmid > k))
            jump = jnp.maximum(nmid - 2, 0) * period
            l_, m1_, m2_ = l_ + jump, m1_ + jump, m2_ + jump
            l_, m1_, m2_ = step(l_, m1_, m2_, load(kvS), mmad(kvS), 0, 0, live & (S >= 2))
            return mte2, l_, m1_, m2_, jnp.where(live, l_, rw0), jnp.where(live, rw0, rw1)

        mte2, l_, m1_, m2_, relw0, relw1 = lax.fori_loop(
            0, d["n_parts"], part, (mte2, le, me1, me2, relw0, relw1)
        )
        relx0, relx1 = jnp.where(release, l_, relx0), jnp.where(release, relx0, relx1)
        ep_end = jnp.maximum(m1_, ep_free) + fx
        le, me1, me2 = jnp.where(live, l_, le), jnp.where(live, m1_, me1), jnp.where(live, m2_, me2)
        mfree = jnp.where(live, ep_end, mfree)
        ep_free = jnp.where(live, ep_end + c3, ep_free)
        return mte2, le, me1, me2, mfree, ep_free, relx0, relx1, relw0, relw1

    s = lax.fori_loop(0, items, item, state0)
    mte2, le, ep_free = s[0], s[1], s[5]
    return jnp.max(jnp.maximum(jnp.maximum(ep_free, mte2), le))


def batch_cycles(L: Layer, t: Tilings, hw: Hw, num_cores: int, coupled: bool, fused: bool = False):
    """:func:`cycles` for a batch of tilings (leading axis), jitted per (num_cores, coupled, fused)."""
    return _batch(num_cores, coupled, fused)(L, t, hw)


def rows_cycles(L: Layer, rows: jax.Array, hw: Hw, num_cores: int, coupled: bool, fused: bool = False):
    """:func:`batch_cycles` of tilings given as one (k, 8) int32 array (``Tilings`` field order):
    one transfer instead of eight."""
    return _rows(num_cores, coupled, fused)(L, rows, hw)


@functools.cache
def _rows(num_cores: int, coupled: bool, fused: bool):
    f = _batch(num_cores, coupled, fused)
    return jax.jit(lambda L, r, hw: f(L, Tilings(*r.T), hw))


@functools.cache
def _batch(num_cores: int, coupled: bool, fused: bool):
    f = jax.vmap(lambda L, t, hw: cycles(L, t, hw, num_cores, coupled, fused), in_axes=(None, 0, None))
    return jax.jit(f)

"""Closed-form cost of the Conv2D kernel: cycles and bytes from shapes, tiling and hardware alone.

The model reads the same :class:`~npu_jax.kernels.conv2d.ConvPlan` and the same per-instruction
cost functions (``core/timing.py``) as the emulator, so the two share every number; what the model
adds is the *schedule*, in closed form instead of instruction by instruction:

* every instruction's cost is evaluated for every (core, item) at once (an item = one output tile
  x one Cout block), as arrays;
* single-buffered strategies form a dependency chain; per item the chain is summed exactly in
  closed form (first K step, identical middle steps, last step; first part, identical middle
  parts, last part), with the stall on the Fixpipe of the previous item;
* the double-buffered ``img2col`` strategy is a pipeline: each item costs the busiest of its three
  chains (MTE2: fetches; MTE1: loads; Cube + Fixpipe: Mmads then draining L0C), plus the fill of
  the first item and the drain of the last.

Array code is written against ``xp`` (``numpy`` for the tiling chooser's speed, ``jax.numpy`` for
gradients); ``predict`` returns cycles and GM bytes. The test suite holds it to the emulator.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from npu_jax.core.buffers import itemsize
from npu_jax.hw.config import HardwareConfig


@dataclasses.dataclass(frozen=True)
class Prediction:
    cycles: int
    gm_bytes: int
    bytes: dict
    flops: int


def _cdiv(a, b):
    return -(-a // b)


class _Ops:
    """The cost functions of ``core/timing.py`` on a chosen array module."""

    def __init__(self, xp, hw: HardwareConfig):
        self.xp, self.hw = xp, hw

    def ceil_div(self, a, rate):
        xp = self.xp
        if xp is np:
            return np.ceil(np.asarray(a, np.float64) / float(rate)).astype(np.int64)
        return xp.ceil(xp.asarray(a, xp.float32) / xp.float32(rate)).astype(xp.int32)

    def gm(self, nbytes, bursts, rate, startup):
        xp = self.xp
        gaps = xp.maximum(bursts - 1, 0) * self.hw.assumed.gm_burst_overhead
        return xp.where(nbytes > 0, startup + self.ceil_div(nbytes, rate) + gaps, 0)

    def onchip(self, nbytes, rate, startup):
        return self.xp.where(nbytes > 0, startup + self.ceil_div(nbytes, rate), 0)

    def mmad(self, m, n, k, k0):
        blocks = _cdiv(m, 16) * _cdiv(n, 16) * _cdiv(k, k0)
        return self.xp.where(blocks > 0, self.hw.assumed.mmad_startup + blocks, 0)


def item_costs(p, xp=np):
    """Per-(core, item) instruction costs and bytes of a ConvPlan, as arrays of shape (cores, items)."""
    g, t, hw, sp = p.g, p.t, p.hw, p.spec
    o = _Ops(xp, hw)
    isz, osz = itemsize(p.operand), itemsize(p.output)
    c0 = p.c0
    k0 = hw.k0(isz)
    sh, sw = g.stride
    dh, dw = g.dilation
    pt, _, pl, _ = g.pads
    cores, ncb = p.cores, p.n_cb
    items = p.tiles_per_core * ncb
    b = xp.arange(cores).reshape(-1, 1)
    j = xp.arange(items).reshape(1, -1)
    tile = b + (j // ncb) * cores
    cb = j % ncb + 0 * b
    live = tile < p.n_tiles
    th = (tile // p.n_tw) % p.n_th
    tw = tile % p.n_tw
    ho_v = xp.minimum(t.ho, g.ho - th * t.ho)
    wo_v = xp.minimum(t.wo, g.wo - tw * t.wo)
    m_eff = (ho_v - 1) * t.wo + wo_v
    nv = xp.minimum(t.n, g.k - cb * t.n)
    gm_rate = hw.gm_rate(p.cores)
    a = hw.assumed

    # input tile
    fetch = live & ((cb == 0) if sp.reuse_input else True)
    ih0, iw0 = th * t.ho * sh - pt, tw * t.wo * sw - pl
    r0, cs = xp.maximum(ih0, 0), xp.maximum(iw0, 0)
    rows = xp.minimum((ho_v - 1) * sh + (g.kh - 1) * dh + 1 + ih0, g.h) - r0
    cols = xp.minimum((wo_v - 1) * sw + (g.kw - 1) * dw + 1 + iw0, g.w) - cs
    cols_full = (cs == 0) & (cols == g.w)
    rows_full = (r0 == 0) & (rows == g.h)
    chans = p.c1 * c0 if sp.nc1hwc0_source else g.c
    x_bytes = chans * rows * cols * isz * fetch
    x_bursts = xp.where(cols_full, 1, rows) * xp.where(cols_full & rows_full, 1, p.c1 if sp.nc1hwc0_source else g.c)
    cx = o.gm(x_bytes, x_bursts, gm_rate, a.mte2_startup)

    # weight parts: (cores, items, parts)
    nparts = p.n_parts
    pi = xp.arange(nparts).reshape(1, 1, -1)
    nv3 = nv[..., None]
    if t.weights_resident:
        wr_bytes = g.k * g.c * g.kh * g.kw * isz if not sp.nc1hwc0_source else p.k_total * g.k * isz
        cw_res = o.gm(xp.asarray(wr_bytes), xp.asarray(1), gm_rate, a.mte2_startup)
        w_bytes = xp.zeros(pi.shape, dtype=int) * nv3
        cw = w_bytes
    else:
        if sp.nc1hwc0_source:
            rv = xp.minimum(p.k_l1_cap, p.k_total - pi * p.k_l1)
            full_cols = (cb[..., None] == 0) & (nv3 == g.k)
            w_bytes = rv * nv3 * isz
            w_bursts = xp.where(full_cols, 1, rv)
        else:
            cv = xp.clip(g.c - pi * p.cin1_eff * c0, 0, p.cin1_eff * c0)
            full_c = (pi == 0) & (cv == g.c)
            w_bytes = nv3 * cv * g.kh * g.kw * isz
            w_bursts = xp.where(full_c, 1, nv3)
        w_bytes = w_bytes * live[..., None]
        cw = o.gm(w_bytes, w_bursts, gm_rate, a.mte2_startup)
        cw_res = 0

    # K steps of each part: S steps, first kv1, last kvS
    part_k = xp.minimum(p.k_l1, p.k_total - pi * p.k_l1)
    S = _cdiv(part_k, t.k_l0)
    kvS = part_k - (S - 1) * t.k_l0
    kv1 = xp.where(S > 1, t.k_l0, kvS)
    m3 = m_eff[..., None]
    L3 = o.onchip(_cdiv(m3, 16) * 16 * t.k_l0 * isz, hw.l1_to_l0a_bytes_per_cycle, a.mte1_startup)

    def L(kv):
        return L3 + o.onchip(_cdiv(kv, k0) * k0 * _cdiv(nv3, 16) * 16 * isz, hw.l0b_rate, a.mte1_startup)

    def MM(kv):
        return o.mmad(m3, nv3, kv, k0)

    # epilogue
    l0c_bytes = _cdiv(m_eff, 16) * 16 * _cdiv(nv, 16) * 16 * 4
    out_bytes = ho_v * wo_v * nv * osz * live
    full_n = (cb == 0) & (nv == g.k)
    full_w = (tw == 0) & (wo_v == g.wo)
    out_bursts = xp.where(full_n, 1, wo_v) * xp.where(full_n & full_w, 1, ho_v)
    if hw.coupled:
        cv_ = o.onchip(l0c_bytes, hw.l0c_to_ub_bytes_per_cycle, a.vector_startup) * live
        c3 = o.gm(out_bytes, out_bursts, min(hw.ub_to_gm_rate, gm_rate), a.mte3_startup)
        fx = cv_
    else:
        gaps = xp.maximum(out_bursts - 1, 0) * a.gm_burst_overhead
        fx = xp.where(out_bytes > 0, a.fixpipe_startup + xp.maximum(
            o.ceil_div(l0c_bytes, a.fixpipe_bytes_per_cycle), o.ceil_div(out_bytes, gm_rate) + gaps), 0)
        c3 = 0 * fx

    return dict(live=live, cx=cx, cw=cw, cw_res=cw_res, S=S, kv1=kv1, kvS=kvS, L=L, MM=MM, fx=fx,
                c3=c3, x_bytes=x_bytes, w_bytes=w_bytes, out_bytes=out_bytes, m_eff=m_eff, nv=nv,
                nparts=nparts, L3=L3)


def predict(p, xp=np) -> Prediction:
    """Cycles and bytes of a ConvPlan, in closed form."""
    c = item_costs(p, xp)
    live = c["live"]
    S, kv1, kvS = c["S"], c["kv1"], c["kvS"]
    L, MM = c["L"], c["MM"]
    Lf, MMf = L(p.t.k_l0), MM(p.t.k_l0)
    L1_, Ls, MM1, MMs = L(kv1), L(kvS), MM(kv1), MM(kvS)
    cw, cx, fx, c3 = c["cw"], c["cx"], c["fx"], c["c3"]
    nparts = c["nparts"]
    body = xp.maximum(S - 2, 0) * (Lf + MMf) + Ls  # part after step 1's Mmad (when S >= 2)
    # one part from its first load's start to its last load's end, if nothing stalls M
    plen = xp.where(S >= 2, L1_ + MM1 + body, L1_)
    ms_last = MMs  # last Mmad of each part
    if not p.spec.double_buffer:
        cyc = _chain(c, live, S, plen, body, L1_, MM1, ms_last, cw, cx, fx, c3, xp)
    else:
        cyc = _pipeline(c, live, S, Lf, L1_, Ls, MMf, MM1, MMs, cw, cx, fx, c3, xp)
    gm_l1 = (c["x_bytes"].sum() + c["w_bytes"].sum()
             + (p.cores * (c["cw_res"] > 0) * _res_bytes(p)))
    out = c["out_bytes"].sum()
    path_out = "UB->GM" if p.hw.coupled else "L0C->GM"
    return Prediction(cycles=_to_int(cyc, xp), gm_bytes=_to_int(gm_l1 + out, xp),
                      bytes={"GM->L1": _to_int(gm_l1, xp), path_out: _to_int(out, xp)},
                      flops=p.g.flops if isinstance(p.g.n, int) else None)


def _shift(a, xp):
    """a[:, i-1] at position i (0 for the first item of each core)."""
    return xp.concatenate([xp.zeros(a[:, :1].shape, dtype=a.dtype), a[:, :-1]], axis=1)


def _chain(c, live, S, plen, body, L1_, MM1, ms_last, cw, cx, fx, c3, xp):
    """The single-buffered kernel's dependency chain, summed in closed form over items.

    Times are relative to the end of the previous item's last load (b). Per item: the first load
    waits for the input and first weight fetch (which start at b) and for the previous last Mmad
    (b + e_prev); the first Mmad also waits for the previous epilogue to drain L0C
    (b + e_prev + f_prev). Later parts wait for their weight fetch or the previous Mmad, whichever
    is later. An item's end state is (its length, its last Mmad's lag e); e depends on the previous
    item only through that first stall, so two passes settle it exactly."""
    S0, L10, MM10 = S[..., 0], L1_[..., 0], MM1[..., 0]
    f_prev = _shift(fx, xp)
    e_prev = xp.zeros_like(cx)
    for _ in range(2):
        s0 = xp.maximum(cx + cw[..., 0], e_prev)
        e1 = xp.maximum(s0 + L10, e_prev + f_prev) + MM10
        b0 = xp.where(S0 >= 2, e1 + body[..., 0], s0 + L10)
        me0 = xp.where(S0 >= 2, b0 + ms_last[..., 0], e1)
        lag = xp.concatenate([(me0 - b0)[..., None], ms_last[..., 1:-1]], axis=-1)
        inc = xp.maximum(cw[..., 1:], lag) + plen[..., 1:]
        blast = b0 + inc.sum(-1)
        melast = xp.where(S.shape[-1] >= 2, blast + ms_last[..., -1], me0) if S.shape[-1] >= 2 else me0
        e = melast - blast
        e_prev = _shift(e, xp)
    delta = xp.where(live, blast, 0)
    n_live = live.sum(axis=1)
    last = xp.maximum(n_live - 1, 0)
    take = lambda a: xp.take_along_axis(a, last[:, None], axis=1)[:, 0]  # noqa: E731
    end = take(e) + take(fx) + take(c3)
    return (c["cw_res"] + delta.sum(axis=1) + xp.where(n_live > 0, end, 0)).max()


def _pipeline(c, live, S, Lf, L1_, Ls, MMf, MM1, MMs, cw, cx, fx, c3, xp):
    """The double-buffered kernel as a three-stage flow line over items, in closed form.

    Per item: a = MTE2 work (input + weight fetches), b = MTE1 work (loads), m = Cube work plus
    the epilogue that blocks it (L0C is single-buffered). A flow line's makespan is its longest
    path: MTE2 through the first data of item i, MTE1 from item i's loads up to item j's first
    load, then the Cube from item j to the end -- maximised over i <= j with prefix/suffix sums
    and a running maximum (plus the paths that end on MTE2 or MTE1)."""
    steps = lambda a, first, last: xp.where(  # noqa: E731
        S > 0, first + xp.maximum(S - 2, 0) * a + xp.where(S >= 2, last, 0), 0).sum(-1)
    a = (cx + cw.sum(-1)) * live
    b = steps(Lf, L1_, Ls) * live
    m = (steps(MMf, MM1, MMs) + fx) * live
    first_data = (cx + cw[..., 0]) * live
    first_load = L1_[..., 0] * live
    n_live = live.sum(axis=1)
    last = xp.maximum(n_live - 1, 0)
    take = lambda v: xp.take_along_axis(v, last[:, None], axis=1)[:, 0]  # noqa: E731
    a_before = xp.cumsum(a, axis=1) - a  # MTE2 work of items before i
    b_before = xp.cumsum(b, axis=1) - b
    m_from = xp.flip(xp.cumsum(xp.flip(m, 1), axis=1), 1)  # Cube work of items j..end
    enter = a_before + first_data - b_before  # reach item i's loads, minus MTE1 work before i
    best_enter = _cummax(enter, xp)
    neg = -(10 ** 9)
    via_m = xp.where(live, best_enter + b_before + first_load + m_from, neg).max(axis=1)
    tail_m = take(fx) + take(c3)
    via_1 = best_enter.max(axis=1) + b.sum(axis=1) + take(MMs[..., -1]) + tail_m
    via_2 = a.sum(axis=1) + take(Ls[..., -1]) + take(MMs[..., -1]) + tail_m
    cyc = xp.maximum(xp.maximum(via_m + take(c3), via_1), via_2) + c["cw_res"]
    return xp.where(n_live > 0, cyc, 0).max()


def _cummax(v, xp):
    if xp is np:
        return np.maximum.accumulate(v, axis=1)
    import jax

    return jax.lax.cummax(v, axis=1)


def _res_bytes(p) -> int:
    g, isz = p.g, itemsize(p.operand)
    if p.spec.nc1hwc0_source:
        return p.k_total * g.k * isz
    return g.k * g.c * g.kh * g.kw * isz


def _to_int(v, xp):
    if xp is np:
        return int(np.asarray(v))
    return v


def predict_many(g, strategy: str, tilings, hw: HardwareConfig, operand: str = "fp16",
                 output: str = "fp16"):
    """(cycles, GM bytes) lists for many tilings of one layer (numpy; for the chooser)."""
    from npu_jax.kernels.conv2d import ConvPlan

    cyc, gmb = [], []
    for t in tilings:
        pr = predict(ConvPlan(g, strategy, t, hw, operand, output))
        cyc.append(pr.cycles)
        gmb.append(pr.gm_bytes)
    return cyc, gmb

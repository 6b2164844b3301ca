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
    cores, ncb, cb_per, cs = p.cores, p.n_cb, p.cb_per, t.cout_split
    items = p.tiles_per_core * cb_per
    b = xp.arange(cores).reshape(-1, 1)
    j = xp.arange(items).reshape(1, -1)
    cb0 = (b % cs) * cb_per
    tile = b // cs + (j // cb_per) * p.cores_sp
    cbl = j % cb_per + 0 * b
    cb = cb0 + cbl
    live = (tile < p.n_tiles) & (cb < ncb)
    th = (tile // p.n_tw) % p.n_th
    tw = tile % p.n_tw
    ho_v = xp.minimum(t.ho, g.ho - th * t.ho)
    wo_v = xp.minimum(t.wo, g.wo - tw * t.wo)
    m_eff = (ho_v - 1) * t.wo + wo_v
    nv = xp.minimum(t.n, g.k - cb * t.n)
    gm_rate = hw.gm_rate(p.cores)
    a = hw.assumed

    # input tile
    fetch = live & ((cbl == 0) if sp.reuse_input else True)
    ih0, iw0 = th * t.ho * sh - pt, tw * t.wo * sw - pl
    r0, cs = xp.maximum(ih0, 0), xp.maximum(iw0, 0)
    rows = xp.minimum((ho_v - 1) * sh + (g.kh - 1) * dh + 1 + ih0, g.h) - r0
    cols = xp.minimum((wo_v - 1) * sw + (g.kw - 1) * dw + 1 + iw0, g.w) - cs
    cols_full = (cs == 0) & (cols == g.w)
    rows_full = (r0 == 0) & (rows == g.h)
    chans = p.c1 * c0 if sp.nc1hwc0_source else g.c
    x_bytes = chans * rows * cols * isz * fetch
    x_bursts = xp.where(cols_full, 1, rows) * xp.where(
        cols_full & rows_full, 1, p.c1 if sp.nc1hwc0_source else g.c
    )
    cx = o.gm(x_bytes, x_bursts, gm_rate, a.mte2_startup)

    # weight parts: (cores, items, parts)
    nparts = p.n_parts
    pi = xp.arange(nparts).reshape(1, 1, -1)
    nv3 = nv[..., None]
    if t.weights_resident:  # each core loads its Cout group's blocks once
        blocks = xp.clip(ncb - cb0[:, 0], 0, p.cb_per_cap)
        if sp.nc1hwc0_source:
            wr_bytes = blocks * p.k_total * t.n * isz
        else:
            wr_bytes = xp.clip(g.k - cb0[:, 0] * t.n, 0, p.cb_per_cap * t.n) * g.c * g.kh * g.kw * isz
        cw_res = o.gm(wr_bytes, xp.ones_like(wr_bytes), gm_rate, a.mte2_startup)
        w_bytes = xp.zeros(pi.shape, dtype=int) * nv3
        cw = w_bytes
    else:
        if sp.nc1hwc0_source:  # Cout-block-major copy: a block's rows are contiguous
            rv = xp.minimum(p.k_l1_cap, p.k_total - pi * p.k_l1)
            w_bytes = rv * nv3 * isz
            w_bursts = xp.where(nv3 == t.n, 1, rv)
        else:
            cv = xp.clip(g.c - pi * p.cin1_eff * c0, 0, p.cin1_eff * c0)
            full_c = (pi == 0) & (cv == g.c)
            w_bytes = nv3 * cv * g.kh * g.kw * isz
            w_bursts = xp.where(full_c, 1, nv3)
        w_bytes = w_bytes * live[..., None]
        cw = o.gm(w_bytes, w_bursts, gm_rate, a.mte2_startup)
        cw_res, wr_bytes = 0, 0

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
    e = p.epi
    z = 0 * live
    vpre, vres, vpost, cr, res_bytes, cbias, bias_bytes = z, z, z, z, z, 0, 0
    if e is not None and e.has("bias"):  # once per core, before the first item
        bias_bytes = xp.clip(
            g.k - (xp.arange(cores) % t.cout_split) * cb_per * t.n, 0, p.cb_per_cap * t.n
        ) * itemsize(e.bias_format)
        cbias = o.gm(bias_bytes, xp.ones_like(bias_bytes), gm_rate, a.mte2_startup)
    if e is not None and e.where == "ub":
        vsz = itemsize(e.vector)
        cnt = m_eff * t.n * live
        seen_res = False
        for _op, role in e.vector_ops():
            width = max(vsz, osz) if role == "cast" else vsz
            cyc = o.onchip(cnt * width, hw.vector_repeat_bytes, a.vector_startup)
            if role == "residual":
                vres, seen_res = cyc, True
            elif seen_res:
                vpost = vpost + cyc
            else:
                vpre = vpre + cyc
        if e.has("residual"):
            res_bytes = ho_v * wo_v * nv * vsz * live
            cr = o.gm(res_bytes, out_bursts, gm_rate, a.mte2_startup)
    if hw.coupled:
        cv_ = o.onchip(l0c_bytes, hw.l0c_to_ub_bytes_per_cycle, a.vector_startup) * live
        c3 = o.gm(out_bytes, out_bursts, min(hw.ub_to_gm_rate, gm_rate), a.mte3_startup)
        fx = cv_
    else:
        gaps = xp.maximum(out_bursts - 1, 0) * a.gm_burst_overhead
        fx = xp.where(
            out_bytes > 0,
            a.fixpipe_startup
            + xp.maximum(
                o.ceil_div(l0c_bytes, a.fixpipe_bytes_per_cycle), o.ceil_div(out_bytes, gm_rate) + gaps
            ),
            0,
        )
        c3 = 0 * fx

    release = live & (((cbl == cb_per - 1) | (cb == ncb - 1)) if sp.reuse_input else True)
    return dict(
        live=live,
        fetch=fetch,
        release=release,
        cx=cx,
        cw=cw,
        cw_res=cw_res,
        wr_bytes=wr_bytes,
        S=S,
        kv1=kv1,
        kvS=kvS,
        L=L,
        MM=MM,
        fx=fx,
        c3=c3,
        x_bytes=x_bytes,
        w_bytes=w_bytes,
        out_bytes=out_bytes,
        m_eff=m_eff,
        nv=nv,
        nparts=nparts,
        L3=L3,
        vpre=vpre,
        vres=vres,
        vpost=vpost,
        cr=cr,
        res_bytes=res_bytes,
        cbias=cbias,
        bias_bytes=bias_bytes,
        has_res=e is not None and e.has("residual"),
    )


def predict(p, xp=np) -> Prediction:
    """Cycles and bytes of a ConvPlan, in closed form."""
    c = item_costs(p, xp)
    L, MM, kv1, kvS = c["L"], c["MM"], c["kv1"], c["kvS"]
    c.update(Lf=L(p.t.k_l0), MMf=MM(p.t.k_l0), L1=L(kv1), Ls=L(kvS), MM1=MM(kv1), MMs=MM(kvS))
    cyc = _schedule(p, c, xp)
    gm_l1 = c["x_bytes"].sum() + c["w_bytes"].sum() + xp.sum(c["wr_bytes"])
    gm_ub = xp.sum(c["res_bytes"])
    if p.epi is not None and p.epi.where == "fixpipe":
        gm_l1 = gm_l1 + xp.sum(c["bias_bytes"])
    else:
        gm_ub = gm_ub + xp.sum(c["bias_bytes"])
    out = c["out_bytes"].sum()
    path_out = "UB->GM" if p.hw.coupled else "L0C->GM"
    return Prediction(
        cycles=_to_int(cyc, xp),
        gm_bytes=_to_int(gm_l1 + gm_ub + out, xp),
        bytes={"GM->L1": _to_int(gm_l1, xp), "GM->UB": _to_int(gm_ub, xp), path_out: _to_int(out, xp)},
        flops=p.g.flops if isinstance(p.g.n, int) else None,
    )


def _schedule(p, c, xp):
    """The kernel's schedule, item by item (vectorised over cores), in closed form over K steps.

    One recurrence serves both buffering depths (``st`` = 1 or 2 stages): a fetch waits for the
    slot ``st`` fetches back to be released (its last load done); a load waits for the previous
    load, its data, and the Mmad ``st`` steps back (L0 slot); an Mmad waits for its load and the
    previous Mmad, and the first one of an item for the previous epilogue to have drained L0C.
    The epilogue queues on its own resource (Fixpipe; or V then MTE3 through the one UB tile on
    coupled chips). Within a part, the first two full steps are worked out and the rest advance
    by the steady period (L + MM serial, max(L, MM) double-buffered); the last step closes it."""
    st, st0 = p.t.l1_stages, p.t.l0_stages  # L1 slots (fetches), L0 slots (loads)
    live, cx, cw, fx, c3 = c["live"], c["cx"], c["cw"], c["fx"], c["c3"]
    shape = cx.shape + (c["S"].shape[-1],)
    S = xp.broadcast_to(c["S"], shape)
    L1_, Ls, MM1, MMs = (xp.broadcast_to(v, shape) for v in (c["L1"], c["Ls"], c["MM1"], c["MMs"]))
    Lf, MMf = (xp.broadcast_to(v, shape)[..., 0] for v in (c["Lf"], c["MMf"]))
    cw = xp.broadcast_to(cw, shape)
    period = Lf + MMf if st0 == 1 else xp.maximum(Lf, MMf)
    z = xp.zeros(cx.shape[:1], dtype=cx.dtype)
    mte2 = z + c["cw_res"] + c["cbias"]  # prologue: resident weights, then the bias
    le = z + c["cw_res"]  # MTE1 waited for the resident weights
    me1, me2, mfree = z, z, z
    ep_free = z + c["cw_res"] + c["cbias"]  # the Fixpipe / Vector waited for the bias
    res_free = z  # the residual tile's slot: free once the Vector has added it
    relx = [z, z]  # last-load ends that released the input slots (newest first)
    relw = [z, z]  # ... and the weight slots
    resident = p.t.weights_resident

    def step(le, me1, me2, L, M, ready, mf, on):
        ls = xp.maximum(xp.maximum(le, me1 if st0 == 1 else me2), ready)
        le_n = ls + L
        me_n = xp.maximum(xp.maximum(le_n, me1), mf) + M
        return (xp.where(on, le_n, le), xp.where(on, me_n, me1), xp.where(on, me1, me2))

    for i in range(cx.shape[1]):
        lv = live[:, i]
        fetch = c["fetch"][:, i]
        xe = xp.maximum(mte2, relx[st - 1]) + cx[:, i]
        mte2 = xp.where(fetch, xe, mte2)
        xready = xp.where(fetch, xe, 0)
        l_, m1_, m2_ = le, me1, me2
        rw = list(relw)
        for q in range(shape[-1]):
            if resident:
                ready = xready if q == 0 else z
            else:
                we = xp.maximum(mte2, rw[st - 1]) + cw[:, i, q]
                mte2 = xp.where(lv, we, mte2)
                ready = xp.maximum(we, xready) if q == 0 else we
            mf = mfree if q == 0 else z
            Sq = S[:, i, q]
            l_, m1_, m2_ = step(l_, m1_, m2_, L1_[:, i, q], MM1[:, i, q], ready, mf, lv & (Sq >= 1))
            nmid = xp.maximum(Sq - 2, 0)
            for k in range(2):
                l_, m1_, m2_ = step(l_, m1_, m2_, Lf[:, i], MMf[:, i], z, z, lv & (nmid > k))
            jump = xp.maximum(nmid - 2, 0) * period[:, i]
            l_, m1_, m2_ = l_ + jump, m1_ + jump, m2_ + jump
            l_, m1_, m2_ = step(l_, m1_, m2_, Ls[:, i, q], MMs[:, i, q], z, z, lv & (Sq >= 2))
            rw = [xp.where(lv, l_, rw[0]), xp.where(lv, rw[0], rw[1])]
        relw = rw
        rel = c["release"][:, i]
        relx = [xp.where(rel, l_, relx[0]), xp.where(rel, relx[0], relx[1])]
        ep_start = xp.maximum(m1_, ep_free)
        ep_end = ep_start + fx[:, i]  # L0C read out: the Cube may go on
        v_end = ep_end + c["vpre"][:, i]
        if c["has_res"]:  # MTE2 fetches the residual after this item's weights; the Vector waits for it
            re = xp.maximum(mte2, res_free) + c["cr"][:, i]
            mte2 = xp.where(lv, re, mte2)
            v_end = xp.maximum(v_end, re) + c["vres"][:, i]
            res_free = xp.where(lv, v_end, res_free)
        v_end = v_end + c["vpost"][:, i]
        le, me1, me2 = (xp.where(lv, a, b) for a, b in ((l_, le), (m1_, me1), (m2_, me2)))
        mfree = xp.where(lv, ep_end, mfree)
        ep_free = xp.where(lv, v_end + c3[:, i], ep_free)
    return xp.maximum(xp.maximum(ep_free, mte2), le).max()


def _to_int(v, xp):
    if xp is np:
        return int(np.asarray(v))
    return v


def lower_bound(p, xp=np, serial: bool = False) -> int:
    """A cheap lower bound on ``predict(p).cycles``: the busiest pipe of the busiest core, each
    pipe's work summed (no schedule). ``serial=True`` instead sums every pipe's work (an upper
    bound for the single-buffered chain). Used to rank the chooser's candidates."""
    c = item_costs(p, xp)
    L, MM, kv1, kvS, S = c["L"], c["MM"], c["kv1"], c["kvS"], c["S"]
    kf = p.t.k_l0
    steps = lambda f: xp.where(S > 0, f(kv1) + xp.maximum(S - 2, 0) * f(kf) + xp.where(S >= 2, f(kvS), 0), 0)  # noqa: E731
    live = c["live"]
    mte1 = (steps(L).sum(-1) * live).sum(1)
    cube = (steps(MM).sum(-1) * live).sum(1)
    mte2 = c["cx"].sum(1) + (c["cw"] * live[..., None]).sum((1, 2)) + c["cw_res"]
    epi = (c["fx"] + c["c3"] + c["vpre"] + c["vres"] + c["vpost"]).sum(1)
    mte2 = mte2 + c["cr"].sum(1) + c["cbias"]
    if serial:
        return int((mte1 + cube + mte2 + epi).max())
    return int(xp.maximum(xp.maximum(mte1, cube), xp.maximum(mte2, epi)).max())


def predict_many(
    g,
    strategy: str,
    tilings,
    hw: HardwareConfig,
    operand: str = "fp16",
    output: str = "fp16",
    exact: int | None = 48,
    epi=None,
):
    """(cycles, GM bytes) for many tilings of one layer (numpy; for the chooser).

    Grids of up to 8k tilings are all costed exactly. Larger ones: only k tilings get the full
    schedule (the lowest :func:`lower_bound`, and for single-buffered strategies half of them by
    the serial sum instead); the others keep their bound as a cycle count."""
    from npu_jax.kernels.conv2d import ConvPlan

    plans = [ConvPlan(g, strategy, t, hw, operand, output, epi=epi) for t in tilings]
    if exact is None or len(plans) <= 8 * exact:  # small grids: cost every candidate exactly
        preds = [predict(p) for p in plans]
        return [q.cycles for q in preds], [q.gm_bytes for q in preds]
    lbs = [lower_bound(p) for p in plans]
    order = sorted(range(len(plans)), key=lambda i: lbs[i])
    pick = order[:exact]
    if not plans[0].spec.double_buffer:
        # single-buffered work is mostly serial: also take the best by the serial sum
        ser = [lower_bound(p, serial=True) for p in plans]
        pick = list(
            dict.fromkeys(order[: exact // 2] + sorted(range(len(plans)), key=lambda i: ser[i])[: exact // 2])
        )
    cyc, gmb = list(lbs), [None] * len(plans)
    for i in pick:
        q = predict(plans[i])
        cyc[i], gmb[i] = q.cycles, q.gm_bytes
    big = max(x for x in gmb if x is not None) + 1
    return cyc, [big if x is None else x for x in gmb]

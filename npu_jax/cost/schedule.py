"""The Conv2D kernel's schedule in closed form, written once over arrays of (layer, tiling, hardware).

``kernels/conv.py`` (``build_kernel``) is the truth: a core runs its items (an item = one output
tile x one Cout block) one after another, each fetching its input tile (output tiling: once per
tap) and weight parts (MTE2), loading K steps into L0A / L0B (MTE1), multiplying them (Cube) and
draining L0C (Fixpipe, or L0C -> UB, vector steps and MTE3 on coupled chips). This module gives
its cycles without running it:

* every instruction's cost is a rule of ``npu_jax/hw/costs.py`` evaluated for every core at once
  (the core is the leading axis of every array);
* the recurrence follows the kernel's flags: a fetch waits for the slot ``l1_stages`` fetches back
  to be released (its last load done); a load waits for the previous load, its data and the Mmad
  ``l0_stages`` steps back (L0 slot); an Mmad waits for its load and the previous Mmad, the first of
  an item for the previous epilogue to have read L0C out. The epilogue queues on its own resource
  (Fixpipe; or V then MTE3 through the one UB tile). Within a weight part the first two full K
  steps are worked out and the rest advance by the steady period; the last step closes it.

Written against an array module ``xp``: numpy (``cost.conv.predict``, the chooser: items at once, the
recurrence a Python loop) or ``jax.numpy`` (the search: ``lax.fori_loop``, ``vmap``-ed over tilings);
:class:`Program` holds what changes a program's shape (cores, chip type, strategy, epilogue, formats).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
from jax import lax

from npu_jax.cost.l2 import l2_modes
from npu_jax.hw import costs
from npu_jax.hw.config import FRACTAL_ROWS
from npu_jax.hw.costs import HwNumbers, cdiv
from npu_jax.hw.formats import itemsize
from npu_jax.mapping.epilogue import EpiloguePlan


class Layer(NamedTuple):
    """A conv layer as integers (Python, numpy or jax; int32 scalars in the search).

    A grouped layer is its dense view (``ConvGeometry.dense_view``: ``n`` = N * G', ``c`` and ``k``
    one super-group's channels) with ``sg`` = G' super-groups: each has its own weights, and y is
    (N, Ho, Wo, G', K')."""

    n: object  # batch
    c: object  # input channels
    h: object  # input height
    w: object  # input width
    k: object  # output channels (Cout)
    kh: object
    kw: object
    sh: object  # stride
    sw: object
    dh: object  # dilation
    dw: object
    pt: object  # top / left padding (bottom / right enter through ho, wo)
    pl: object
    ho: object  # output height
    wo: object  # output width
    sg: object = 1  # super-groups of a grouped layer (1: dense)


class Tile(NamedTuple):
    """A tiling (``ConvTiling``'s fields; ``resident`` 0/1)."""

    ho: object
    wo: object
    n: object
    cin1: object
    k_l0: object
    resident: object
    l1_stages: object
    l0_stages: object
    cout_split: object


@dataclasses.dataclass(frozen=True)
class Program:
    """What fixes the schedule's program (static, hashable); ``num_cores``: the core vector's length."""

    num_cores: int
    coupled: bool
    reuse_input: bool = True  # the strategy's structure (``StrategySpec``)
    nc1hwc0_source: bool = True
    epi: EpiloguePlan | None = None
    operand: str = "fp16"
    output: str = "fp16"
    resident: tuple[str, ...] | None = None  # what a network's schedule left in L2: ConvPlan.l2_resident


def derived(L: Layer, t, c0, num_cores, xp=np) -> dict:
    """Loop counts and sizes of a tiling whose plan is bounded by its own layer (``ConvPlan``'s
    properties with ``bound=None`` and ``cores=None``), over arrays. ``t`` needs ``ho, wo, n, cin1,
    k_l0, cout_split``; ``c0`` is the channel block of the operand format."""
    c1 = cdiv(L.c, c0)
    ncb = cdiv(L.k, t.n)
    n_th, n_tw = cdiv(L.ho, t.ho), cdiv(L.wo, t.wo)
    n_tiles = L.n * n_th * n_tw
    cores_sp = xp.maximum(1, xp.minimum(num_cores // t.cout_split, n_tiles))
    cb_per = cdiv(ncb, t.cout_split)
    cin1_eff = xp.minimum(t.cin1, c1)
    k_l1 = cin1_eff * L.kh * L.kw * c0
    return dict(
        c1=c1,
        k_total=c1 * L.kh * L.kw * c0,
        k_l1=k_l1,
        ncb=ncb,
        n_th=n_th,
        n_tw=n_tw,
        n_tiles=n_tiles,
        cores_sp=cores_sp,
        cb_per=cb_per,
        cores=cores_sp * t.cout_split,
        tiles_per_core=cdiv(n_tiles, cores_sp),
        n_parts=cdiv(c1, t.cin1),
        m_t=costs.round_up(t.ho * t.wo, FRACTAL_ROWS),
        h_in=(t.ho - 1) * L.sh + (L.kh - 1) * L.dh + 1,
        w_in=(t.wo - 1) * L.sw + (L.kw - 1) * L.dw + 1,
        # the plan's static capacities: with the layer as its own bound, the layer's figures
        cin1_eff=cin1_eff,
        k_l1_cap=k_l1,
        cb_per_cap=cb_per,
    )


def _with_l2(pr, L, t, d, h, xp):
    return d if "l2" in d else {**d, "l2": l2_modes(pr, L, t, d, h, xp)}


def _overlap(xp, on, prev_end, start, extent):
    """How much of [start, start + extent) the window before it (ending at ``prev_end``) covers."""
    return xp.where(on, xp.clip(prev_end - start, 0, extent), 0)


# ---- instruction costs of one item (every core at once) ------------------------------------------
def _item(pr: Program, L: Layer, t: Tile, d: dict, h: HwNumbers, j, b, xp) -> dict:
    """Costs and bytes of item ``j`` on cores ``b`` (broadcast: (cores,) or (cores, items))."""
    isz, osz = itemsize(pr.operand), itemsize(pr.output)
    c0 = costs.k0(h, isz)  # C0: one fractal row of the operand
    cs, cb_per, ncb = t.cout_split, d["cb_per"], d["ncb"]
    gm_rate = costs.gm_rate(h, d["cores"])
    cb0 = (b % cs) * cb_per
    tile = b // cs + (j // cb_per) * d["cores_sp"]
    cbl = j % cb_per + 0 * b
    cb = cb0 + cbl
    live = (b < d["cores"]) & (tile < d["n_tiles"]) & (cb < ncb)
    th = (tile // d["n_tw"]) % d["n_th"]
    tw = tile % d["n_tw"]
    ho_v = xp.minimum(t.ho, L.ho - th * t.ho)
    wo_v = xp.minimum(t.wo, L.wo - tw * t.wo)
    m_eff = (ho_v - 1) * t.wo + wo_v  # rows of L0C holding real outputs (row pitch t.wo)
    nv = xp.minimum(t.n, L.k - cb * t.n)

    # the input tile: fetched per item, or once per spatial tile (reuse)
    fetch = live & (cbl == 0) if pr.reuse_input else live
    ih0, iw0 = th * t.ho * L.sh - L.pt, tw * t.wo * L.sw - L.pl
    r0, col0 = xp.clip(ih0, 0, L.h), xp.clip(iw0, 0, L.w)  # as the kernel: a window past the image is empty
    rows = xp.minimum((ho_v - 1) * L.sh + (L.kh - 1) * L.dh + 1 + ih0, L.h) - r0
    cols = xp.minimum((wo_v - 1) * L.sw + (L.kw - 1) * L.dw + 1 + iw0, L.w) - col0
    cols_full, rows_full = (col0 == 0) & (cols == L.w), (r0 == 0) & (rows == L.h)
    planes = d["c1"] if pr.nc1hwc0_source else L.c  # one burst per (channel plane, row)
    chans = d["c1"] * c0 if pr.nc1hwc0_source else L.c
    x_bytes = chans * rows * cols * isz * fetch
    x_bursts = xp.where(cols_full, 1, rows) * xp.where(cols_full & rows_full, 1, planes)
    # L2: the first core to read a tile (group 0, first Cout block) finds there what earlier tiles read
    # (the previous tile row's last rows, the previous tile's columns: lock-step order); others hit
    m = d["l2"]
    ov_r = _overlap(
        xp, th > 0, xp.minimum((th * t.ho - 1) * L.sh + (L.kh - 1) * L.dh + 1 - L.pt, L.h), r0, rows
    )
    ov_c = _overlap(
        xp, tw > 0, xp.minimum((tw * t.wo - 1) * L.sw + (L.kw - 1) * L.dw + 1 - L.pl, L.w), col0, cols
    )
    first = (cbl == 0) & (b % cs == 0)
    seen = chans * (ov_r * cols + (rows - ov_r) * ov_c) * isz * fetch
    hx = xp.where(m["x_res"] | (m["x_track"] & ~first), x_bytes, xp.where(m["x_track"], seen, 0))
    cx = costs.dma_in(h, x_bytes, x_bursts, gm_rate, hx)
    if not pr.reuse_input:  # output tiling: the same window again for every further tap, all of
        again = L.kh * L.kw - 1  # it in L2 where L2 keeps x (this core just read it), else missed
        hx_again = xp.where(m["x_track"], x_bytes, 0)
        cx = cx + again * costs.dma_in(h, x_bytes, x_bursts, gm_rate, hx_again)
        hx, x_bytes = hx + again * hx_again, x_bytes * (again + 1)

    # one K step: Load3D (a fixed k_l0-deep window) and LoadData of kv rows, then the Mmad
    l3 = costs.load_l0a(h, costs.load_l0a_bytes(h, m_eff, t.k_l0, isz))

    # the epilogue: L0C -> GM (Fixpipe) or L0C -> UB -> (vector steps) -> GM (MTE3)
    out_bytes = ho_v * wo_v * nv * osz * live
    full_n = (cb == 0) & (nv == L.k) & (L.sg == 1)  # y (N, Ho, Wo, G', K'): one G' at a time
    full_w = (tw == 0) & (wo_v == L.wo)
    out_bursts = xp.where(full_n, 1, wo_v) * xp.where(full_n & full_w, 1, ho_v)
    if pr.coupled:
        fx = costs.l0c_to_ub(h, m_eff, nv) * live
        c3 = costs.dma_out(h, out_bytes, out_bursts, costs.write_rate(h, d["cores"]))
    else:
        fx = costs.fixpipe_gm(h, m_eff, nv, out_bytes, out_bursts, costs.write_rate(h, d["cores"]))
        c3 = 0 * fx
    z = 0 * fx
    vpre, vres, vpost, cr, res_bytes, res_hit = z, z, z, z, z, z
    e = pr.epi
    if e is not None and e.where == "ub":
        vsz, rsz = itemsize(e.vector), itemsize(e.residual_format)
        cnt = m_eff * t.n * live  # the tile's real rows, all its columns
        seen_res, width = False, {"cast": max(vsz, osz), "widen_residual": max(vsz, rsz)}
        for _op, role in e.vector_ops():
            cyc = costs.vector(h, cnt * width.get(role, vsz))
            # vres: the op that waits for the residual tile and frees it (the widening VCast if any)
            if role == "widen_residual" or (role == "residual" and not e.widens_residual):
                vres, seen_res = cyc, True
            elif seen_res:
                vpost = vpost + cyc
            else:
                vpre = vpre + cyc
        if e.has("residual"):
            res_bytes = ho_v * wo_v * nv * rsz * live
            res_hit = xp.where(m["res_res"], res_bytes, 0)  # resident (the schedule), else all misses
            cr = costs.dma_in(h, res_bytes, out_bursts, gm_rate, res_hit)
    last_cb = (cbl == cb_per - 1) | (cb == ncb - 1)
    return dict(
        live=live,
        fetch=fetch,
        release=live & last_cb if pr.reuse_input else live,
        cx=cx,
        x_bytes=x_bytes,
        hbm=x_bytes - hx + xp.where(m["out_kept"], 0, out_bytes) + res_bytes - res_hit,
        # the first reader of its weights: the first tile of its super-group (cores read in tile order)
        first_round=(tile % (d["n_th"] * d["n_tw"]) == 0) & (tile < L.sg * d["n_th"] * d["n_tw"]),
        m_eff=m_eff,
        nv=nv,
        l3=l3,
        lf=l3 + _load_b(h, t.k_l0, nv, isz),
        mmf=costs.mmad(h, m_eff, nv, t.k_l0, isz),
        fx=fx,
        c3=c3,
        out_bytes=out_bytes,
        vpre=vpre,
        vres=vres,
        vpost=vpost,
        cr=cr,
        res_bytes=res_bytes,
    )


def _load_b(h, kv, nv, isz):
    return costs.load_l0b(h, costs.load_l0b_bytes(h, kv, nv, isz))


def _part(pr: Program, L: Layer, t: Tile, d: dict, h: HwNumbers, it: dict, pi, xp) -> dict:
    """Costs of weight part ``pi`` of an item (``it``: :func:`_item`'s arrays, broadcast to pi)."""
    isz = itemsize(pr.operand)
    c0 = costs.k0(h, isz)  # C0: one fractal row of the operand
    nv, live = it["nv"], it["live"]
    gm_rate = costs.gm_rate(h, d["cores"])
    if pr.nc1hwc0_source:  # Cout-block-major copy: a block's rows are contiguous
        rv = xp.minimum(d["k_l1"], d["k_total"] - pi * d["k_l1"])
        w_bytes = rv * nv * isz
        w_bursts = xp.where(nv == t.n, 1, rv)
    else:  # straight from OIHW: one burst per output channel unless the part spans every channel
        cpart = d["cin1_eff"] * c0
        cv = xp.clip(L.c - pi * cpart, 0, cpart)
        w_bytes = nv * cv * L.kh * L.kw * isz
        w_bursts = xp.where((pi == 0) & (cv == L.c), 1, nv)
    w_bytes = xp.where(t.resident > 0, 0, w_bytes * live)
    m = d["l2"]  # the group's first core misses, unless the schedule left the weights in L2
    hw_ = xp.where(m["w_res"] | (m["w_track"] & ~it["first_round"]), w_bytes, 0)
    part_k = xp.minimum(d["k_l1"], d["k_total"] - pi * d["k_l1"])
    steps = cdiv(part_k, t.k_l0)
    kv_last = part_k - (steps - 1) * t.k_l0
    kv_first = xp.where(steps > 1, t.k_l0, kv_last)
    m_eff, l3 = it["m_eff"], it["l3"]
    return dict(
        cw=costs.dma_in(h, w_bytes, w_bursts, gm_rate, hw_),
        w_bytes=w_bytes,
        hbm=w_bytes - hw_,
        steps=steps,
        l_first=l3 + _load_b(h, kv_first, nv, isz),
        l_last=l3 + _load_b(h, kv_last, nv, isz),
        mm_first=costs.mmad(h, m_eff, nv, kv_first, isz),
        mm_last=costs.mmad(h, m_eff, nv, kv_last, isz),
    )


def _prologue(pr: Program, L: Layer, t: Tile, d: dict, h: HwNumbers, b, xp) -> dict:
    """Per-core work before the first item: resident weights, then the epilogue's bias (MTE2)."""
    isz = itemsize(pr.operand)
    gm_rate = costs.gm_rate(h, d["cores"])
    on = b < d["cores"]
    cb0 = (b % t.cout_split) * d["cb_per"]
    if pr.nc1hwc0_source:
        blocks = xp.clip(d["ncb"] - cb0, 0, d["cb_per"])
        wr_bytes = blocks * d["k_total"] * t.n * isz
    else:
        wr_bytes = xp.clip(L.k - cb0 * t.n, 0, d["cb_per"] * t.n) * L.c * L.kh * L.kw * isz
    wr_bytes = xp.where((t.resident > 0) & on, wr_bytes, 0)
    bias_bytes = 0 * wr_bytes
    e = pr.epi
    if e is not None and e.row is not None:  # the core's Cout group's bias values (or scales)
        bias_bytes = xp.clip(L.k - cb0 * t.n, 0, d["cb_per"] * t.n) * itemsize(e.row_format) * on
    one = 1 + 0 * wr_bytes
    later = b // t.cout_split > 0  # every core of a Cout group but its first finds them in L2
    m = d["l2"]
    h_wr = xp.where(m["w_res"] | (m["w_track"] & later), wr_bytes, 0)
    h_bias = xp.where(m["bias_res"] | (m["bias_track"] & later), bias_bytes, 0)
    return dict(
        wr_bytes=wr_bytes,
        cw_res=costs.dma_in(h, wr_bytes, one, gm_rate, h_wr),
        bias_bytes=bias_bytes,
        cbias=costs.dma_in(h, bias_bytes, one, gm_rate, h_bias),
        hbm=wr_bytes - h_wr + bias_bytes - h_bias,
    )


# ---- the recurrence ------------------------------------------------------------------------------
def _pick(xp, cond, a, b):
    """``where(cond, a, b)``; a Python condition (numpy plans: the tiling is static) picks once."""
    if isinstance(cond, (bool, np.bool_)):
        return a if cond else b
    return xp.where(cond, a, b)


def reread_span(n_tw, cores_sp, cb_per, items, xp=np):
    """How many items back a re-read reaches (at most ``items``): the same item's cores, the next Cout
    block, a core's next tile, the tile row above, ``(ceil(n_tw / cores_sp) + 1) x cb_per``, and one
    more for the order inside an item (the recency bounds: ``many.recency_guard``, ``priced``)."""
    return xp.minimum(items, (-(-n_tw // cores_sp) + 1) * cb_per + 1)


def _cores_sum(xp, v):
    """A per-core figure summed over the cores (the last axis; a scalar stays itself)."""
    return xp.sum(v, axis=-1) if xp.ndim(v) else v


def _fori(xp, n, body, init):
    if xp is np:
        s = init
        for i in range(int(n)):
            s = body(i, s)
        return s
    return lax.fori_loop(0, n, body, init)


def _step(xp, t):
    """One K step (load, then Mmad) on (last load end, last Mmad end, the Mmad before it)."""
    l0_two = t.l0_stages == 2

    def step(le, me1, me2, lc, mc, ready, mfree, on):
        ls = xp.maximum(xp.maximum(le, _pick(xp, l0_two, me2, me1)), ready)
        le_n = ls + lc
        me_n = xp.maximum(xp.maximum(le_n, me1), mfree) + mc
        return xp.where(on, le_n, le), xp.where(on, me_n, me1), xp.where(on, me1, me2)

    return step


def schedule(pr: Program, L: Layer, t: Tile, d: dict, h: HwNumbers, xp=np, *, stacked=None) -> dict:
    """The kernel's ``cycles`` (``costs.kernel_cycles``), ``priced`` (exact under recency:
    ``costs.recency_priced``) and, with numpy, its GM bytes per path. ``d``: the plan's loop counts
    (:func:`derived`, or a ``ConvPlan``'s properties). With jax the item and part costs are evaluated
    inside ``lax.fori_loop`` bodies (trip counts may be traced). With numpy, ``stacked`` holds them for
    many tilings at once (``many.stacked_arrays``: items (tilings, cores, items, 1), parts (tilings,
    cores, items, parts), prologue (tilings, cores, 1, 1), zero outside each tiling's), ``t`` and
    ``d`` hold (tilings, 1) arrays, and the recurrence loops in Python over the longest tiling's items."""
    if xp is np:
        every, parts, pro = stacked
        b = np.arange(pr.num_cores)[None, :]
        items, nparts = every["live"].shape[2], parts["steps"].shape[3]
        pro = {k: np.asarray(v)[:, :, 0, 0] for k, v in pro.items()}

        def item_at(j):
            return {k: v[:, :, j, 0] for k, v in every.items()}

        def part_at(j, it, q):
            return {k: v[:, :, j, q] for k, v in parts.items()}
    else:
        d = _with_l2(pr, L, t, d, h, xp)
        b = xp.arange(pr.num_cores)
        items = d["tiles_per_core"] * d["cb_per"]
        nparts = d["n_parts"]
        pro = _prologue(pr, L, t, d, h, b, xp)

        def item_at(j):
            return _item(pr, L, t, d, h, j, b, xp)

        def part_at(j, it, q):
            return _part(pr, L, t, d, h, it, q, xp)

    step = _step(xp, t)
    l1_two = t.l1_stages == 2
    res = t.resident > 0
    has_res = pr.epi is not None and pr.epi.where == "ub" and pr.epi.has("residual")
    z = 0 * b
    # MTE2 free, last load end, last two Mmad ends, L0C free, epilogue free, residual slot free, slot loads
    state0 = (
        z + pro["cw_res"] + pro["cbias"],
        z + pro["cw_res"],
        z,
        z,
        z,
        z + pro["cw_res"] + pro["cbias"],
        z,
        (z, z),
        (z, z),
        _cores_sum(xp, pro["hbm"]),
        (0 * _cores_sum(xp, pro["hbm"]),) * 2,  # recency: the most an item brings in (weights aside), weights
    )

    def item(j, s):
        mte2, le, me1, me2, mfree, ep_free, res_free, relx, relw, hbm0, (emax, wsum) = s
        it = item_at(j)
        hbm = xin = hbm0 + _cores_sum(xp, it["hbm"])
        lv = it["live"]
        xe = xp.maximum(mte2, _pick(xp, l1_two, relx[1], relx[0])) + it["cx"]
        mte2 = xp.where(it["fetch"], xe, mte2)
        xready = xp.where(it["fetch"], xe, 0)
        period = _pick(xp, t.l0_stages == 2, xp.maximum(it["lf"], it["mmf"]), it["lf"] + it["mmf"])

        def part(q, ps):
            mte2, l_, m1_, m2_, rw, hbm = ps
            pc = part_at(j, it, q)
            hbm = hbm + _cores_sum(xp, pc["hbm"])
            first = q == 0
            n_s = pc["steps"]
            lvp = lv & (n_s > 0)  # a real part has a step; a padded one (numpy, stacked) none
            we = xp.maximum(mte2, _pick(xp, l1_two, rw[1], rw[0])) + pc["cw"]
            ready = _pick(xp, res, _pick(xp, first, xready, 0), _pick(xp, first, xp.maximum(we, xready), we))
            mte2 = _pick(xp, res, mte2, xp.where(lvp, we, mte2))
            mf = _pick(xp, first, mfree, 0)
            l_, m1_, m2_ = step(l_, m1_, m2_, pc["l_first"], pc["mm_first"], ready, mf, lv & (n_s >= 1))
            nmid = xp.maximum(n_s - 2, 0)
            for k in range(2):
                l_, m1_, m2_ = step(l_, m1_, m2_, it["lf"], it["mmf"], 0, 0, lv & (nmid > k))
            jump = xp.maximum(nmid - 2, 0) * period
            l_, m1_, m2_ = l_ + jump, m1_ + jump, m2_ + jump
            l_, m1_, m2_ = step(l_, m1_, m2_, pc["l_last"], pc["mm_last"], 0, 0, lv & (n_s >= 2))
            return mte2, l_, m1_, m2_, (xp.where(lvp, l_, rw[0]), xp.where(lvp, rw[0], rw[1])), hbm

        mte2, l_, m1_, m2_, relw, hbm = _fori(xp, nparts, part, (mte2, le, me1, me2, relw, hbm))
        rel = it["release"]
        relx = (xp.where(rel, l_, relx[0]), xp.where(rel, relx[0], relx[1]))
        ep_end = xp.maximum(m1_, ep_free) + it["fx"]  # L0C read out: the Cube may go on
        v_end = ep_end + it["vpre"]
        if has_res:  # MTE2 fetches the residual after this item's weights; the Vector waits for it
            re = xp.maximum(mte2, res_free) + it["cr"]
            mte2 = xp.where(lv, re, mte2)
            v_end = xp.maximum(v_end, re) + it["vres"]
            res_free = xp.where(lv, v_end, res_free)
        v_end = v_end + it["vpost"]
        le, me1, me2 = (xp.where(lv, a, c) for a, c in ((l_, le), (m1_, me1), (m2_, me2)))
        mfree = xp.where(lv, ep_end, mfree)
        ep_free = xp.where(lv, v_end + it["c3"], ep_free)
        emax = xp.maximum(emax, xin - hbm0 + _cores_sum(xp, it["out_bytes"]))
        return mte2, le, me1, me2, mfree, ep_free, res_free, relx, relw, hbm, (emax, wsum + hbm - xin)

    s = _fori(xp, items, item, state0)
    core_end = xp.max(xp.maximum(xp.maximum(s[5], s[0]), s[1]), axis=-1)
    out = dict(cycles=costs.kernel_cycles(h, core_end, s[9]), core_end=core_end, hbm=s[9])
    span = reread_span(d["n_tw"], d["cores_sp"], d["cb_per"], items, xp)
    emax, wsum = s[10]
    out["priced"] = costs.recency_priced(h, xp.reshape(span, xp.shape(emax)), emax, state0[9] + wsum, xp)
    if xp is np:
        e = pr.epi
        moved = {**every, "w_bytes": parts["w_bytes"]}
        tot = {
            k: moved[k].reshape(len(moved[k]), -1).sum(1)
            for k in ("x_bytes", "w_bytes", "res_bytes", "out_bytes")
        }
        gm_l1 = tot["x_bytes"] + tot["w_bytes"] + pro["wr_bytes"].sum(1)
        gm_ub = tot["res_bytes"]
        if e is not None and e.where == "fixpipe":
            gm_l1 = gm_l1 + pro["bias_bytes"].sum(1)
        else:
            gm_ub = gm_ub + pro["bias_bytes"].sum(1)
        out.update(gm_l1=gm_l1, gm_ub=gm_ub, gm_out=tot["out_bytes"])
    return out

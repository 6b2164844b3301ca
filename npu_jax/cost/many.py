"""The chooser's lower bounds for many tilings of one layer at once (numpy, one pass per chunk).

:func:`npu_jax.cost.conv.lower_bound` evaluates the schedule's item and part costs for one plan:
about a millisecond of numpy calls on small arrays, so a grid of 6,000 tilings took ten seconds.
Here the tilings are a leading axis: the same cost functions of :mod:`npu_jax.cost.schedule` run on
arrays shaped (tilings, cores, items, parts), each tiling padded to the chunk's largest core, item
and part counts, and every padded entry masked out, so each tiling's bound equals
``lower_bound(plan)`` exactly (tested).
"""

from __future__ import annotations

import numpy as np

from npu_jax.cost.schedule import Layer, Program, Tile, _item, _part, _prologue, _with_l2
from npu_jax.hw.costs import HwNumbers, kernel_cycles
from npu_jax.mapping.conv import ConvPlan

_CHUNK = 1 << 21  # entries of one (tilings, cores, items, parts) array: a few tens of MB a chunk

_D_FIELDS = {  # the schedule's loop counts (``cost.conv._inputs``) -> the ConvPlan property
    "c1": "c1",
    "k_total": "k_total",
    "k_l1": "k_l1",
    "ncb": "n_cb",
    "n_th": "n_th",
    "n_tw": "n_tw",
    "n_tiles": "n_tiles",
    "cores_sp": "cores_sp",
    "cb_per": "cb_per",
    "cores": "cores",
    "tiles_per_core": "tiles_per_core",
    "n_parts": "n_parts",
    "cin1_eff": "cin1_eff",
    "k_l1_cap": "k_l1_cap",
    "cb_per_cap": "cb_per_cap",
}


def bounds_many(plans: list[ConvPlan], layer: Layer) -> list[tuple[int, int]]:
    """``(lower_bound(p), lower_bound(p, serial=True))`` of every plan; the plans share a layer,
    strategy, hardware, formats and epilogue (the chooser's candidates)."""
    if not plans:
        return []
    p0 = plans[0]
    hw, sp = p0.hw, p0.spec
    pr = Program(hw.num_cores, hw.coupled, sp.reuse_input, sp.nc1hwc0_source, p0.epi, p0.operand, p0.output)
    h = HwNumbers.of(hw)
    size = [(p.tiles_per_core * p.cb_per, p.n_parts) for p in plans]
    order = sorted(range(len(plans)), key=lambda i: size[i][0] * size[i][1])
    out: list = [None] * len(plans)
    chunks, cur, i_max, p_max = [], [], 0, 0
    for i in order:  # chunks of similar sizes, each under _CHUNK entries once padded
        ni, np_ = max(i_max, size[i][0]), max(p_max, size[i][1])
        if cur and (len(cur) + 1) * hw.num_cores * ni * np_ > _CHUNK:
            chunks.append(cur)
            cur, ni, np_ = [], size[i][0], size[i][1]
        cur.append(i)
        i_max, p_max = ni, np_
    chunks.append(cur)
    for chunk in chunks:
        for i, b in zip(chunk, _chunk([plans[i] for i in chunk], pr, layer, h)):
            out[i] = b
    return out


def _chunk(plans, pr: Program, L: Layer, h: HwNumbers) -> list[tuple[int, int]]:
    """The bounds of a chunk of plans: arrays (tilings, cores, items, parts)."""

    def col(values):
        return np.asarray(values).reshape(-1, 1, 1, 1)

    t = Tile(
        *(
            col([getattr(p.t, f) for p in plans])
            for f in (
                "ho",
                "wo",
                "n",
                "cin1",
                "k_l0",
                "weights_resident",
                "l1_stages",
                "l0_stages",
                "cout_split",
            )
        )
    )
    t = t._replace(resident=t.resident.astype(np.int64))
    d = {k: col([getattr(p, attr) for p in plans]) for k, attr in _D_FIELDS.items()}
    d = _with_l2(pr, L, t, d, h, np)
    items = d["tiles_per_core"] * d["cb_per"]
    n_i, n_p = int(items.max()), int(d["n_parts"].max())
    b = np.arange(pr.num_cores).reshape(1, -1, 1, 1)
    j = np.arange(n_i).reshape(1, 1, -1, 1)
    pi = np.arange(n_p).reshape(1, 1, 1, -1)
    shape_i = (len(plans), pr.num_cores, n_i, 1)
    item_ok = (j < items) & (b < d["cores"])
    part_ok = item_ok & (pi < d["n_parts"])
    c = {k: np.broadcast_to(np.asarray(v), shape_i) for k, v in _item(pr, L, t, d, h, j, b, np).items()}
    q = _part(pr, L, t, d, h, c, pi, np)
    pro = _prologue(pr, L, t, d, h, b, np)

    def per_core(v, ok):  # (tilings, cores): summed over items and parts, padding masked out
        return np.where(ok, v, 0).sum((2, 3))

    live = c["live"] & item_ok
    n_s = np.where(part_ok, q["steps"], 0)

    def steps(first, full, last):
        return np.where(n_s > 0, first + np.maximum(n_s - 2, 0) * full + np.where(n_s >= 2, last, 0), 0)

    mte1 = per_core(steps(q["l_first"], c["lf"], q["l_last"]), live)
    cube = per_core(steps(q["mm_first"], c["mmf"], q["mm_last"]), live)
    pro_ok = b < d["cores"]
    cw_res = np.where(pro_ok, pro["cw_res"], 0)[:, :, 0, 0]
    cbias = np.where(pro_ok, pro["cbias"], 0)[:, :, 0, 0]
    mte2 = (
        per_core(c["cx"], item_ok) + per_core(q["cw"], live & part_ok) + cw_res + per_core(c["cr"], item_ok)
    )
    mte2 = mte2 + cbias
    epi = per_core(c["fx"] + c["c3"] + c["vpre"] + c["vres"] + c["vpost"], item_ok)
    hbm = (
        per_core(c["hbm"], item_ok).sum(1)
        + per_core(q["hbm"], live & part_ok).sum(1)
        + np.where(pro_ok, pro["hbm"], 0).sum((1, 2, 3))
    )
    par = kernel_cycles(h, np.maximum(np.maximum(mte1, cube), np.maximum(mte2, epi)).max(1), hbm)
    ser = kernel_cycles(h, (mte1 + cube + mte2 + epi).max(1), hbm)
    return [(int(a), int(s)) for a, s in zip(par, ser)]


__all__ = ["bounds_many"]

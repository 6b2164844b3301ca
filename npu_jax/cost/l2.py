"""What a Conv2D launch's GM reads find in L2, in closed form: ``core/l2.py``'s rules for the tensors
the conv launches with (``cost.conv.l2_kept`` lists the same tensors in the same order), over the
schedule's arrays (numpy, or jax under the search's trace)."""

from __future__ import annotations

import numpy as np

from npu_jax.hw import costs
from npu_jax.hw.costs import HwNumbers
from npu_jax.hw.formats import itemsize


def l2_modes(pr, L, t, d: dict, h: HwNumbers, xp=np) -> dict:
    """What L2 does with the launch's GM tensors (``costs.l2_keeps``): ``x_res`` (resident: the relayout
    kernel left it, or the network's schedule did), ``w/bias/res_res`` (resident: the schedule left them),
    ``x/w/bias_track`` (re-reads hit; recency: every input's), ``out_kept``."""
    isz, osz = itemsize(pr.operand), itemsize(pr.output)
    c0 = costs.k0(h, isz)
    e = pr.epi
    if pr.nc1hwc0_source:
        x_size = L.n * d["c1"] * L.h * L.w * c0 * isz
        w_size = d["ncb"] * d["k_total"] * t.n * isz
        relayout = costs.l2_keeps(h, [L.n * L.c * L.h * L.w * isz, x_size], xp)
        relaid = relayout[1]
    else:
        x_size = L.n * L.c * L.h * L.w * isz
        w_size = L.k * L.c * L.kh * L.kw * isz
        relaid = False
    row, has_res = e is not None and e.row is not None, e is not None and e.has("residual")
    sizes = [x_size, w_size * L.sg]
    if row:
        sizes.append(L.k * itemsize(e.row_format))
    if has_res:
        sizes.append(L.n * L.ho * L.wo * L.k * itemsize(e.residual_format))
    sizes.append(L.n * L.ho * L.wo * L.k * osz)
    kept = costs.l2_keeps(h, sizes, xp)
    tracked = [k | ((h.recency > 0) & (h.l2 > 0)) for k in kept]  # recency: every input (priced: schedule)
    roles = pr.resident  # the schedule's: each resident where this launch keeps it (core/l2.py's rule)
    res = {
        r: kept[i] & (roles is not None and r in roles)
        for r, i in (("x", 0), ("w", 1), ("row", 2), ("res", -2))
    }
    return dict(
        x_res=(kept[0] & relaid) if roles is None else res["x"],
        w_res=res["w"],
        bias_res=res["row"] & row,
        res_res=res["res"] & has_res,
        x_track=tracked[0],
        w_track=tracked[1],
        bias_track=tracked[2] if row else False,
        out_kept=kept[-1],
    )


__all__ = ["l2_modes"]

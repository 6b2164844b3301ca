"""The closed-form model over many tilings of one layer at once (numpy): item and part costs, the
chooser's lower bounds and the exact schedule.

The tilings are a leading axis: the cost functions of :mod:`npu_jax.cost.schedule` run on arrays
shaped (tilings, cores, items, parts), each tiling padded to its chunk's item and part counts and to
the chip's cores, every padded entry zero (and, in the recurrence, no step), so each tiling's figures
equal those of the tiling alone (tested). One tiling is a chunk of one: :func:`npu_jax.cost.conv.predict`
runs through here too. Costing 6,000 tilings one by one took seconds of numpy calls on small arrays.
"""

from __future__ import annotations

import numpy as np

from npu_jax.cost.schedule import (
    Layer,
    Program,
    Tile,
    _item,
    _part,
    _prologue,
    _with_l2,
    reread_span,
    schedule,
)
from npu_jax.hw.costs import HwNumbers, kernel_cycles, l2_recent
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


def _chunks(plans: list[ConvPlan], cores: int | None = None) -> list[list[int]]:
    """Indices of ``plans`` in chunks of similar sizes, each under ``_CHUNK`` entries once padded
    (over the chip's cores, or its first ``cores``)."""
    n_cores = plans[0].hw.num_cores if cores is None else min(cores, plans[0].hw.num_cores)
    size = [(p.tiles_per_core * p.cb_per, p.n_parts) for p in plans]
    chunks, cur, i_max, p_max = [], [], 0, 0
    for i in sorted(range(len(plans)), key=lambda i: size[i][0] * size[i][1]):
        ni, np_ = max(i_max, size[i][0]), max(p_max, size[i][1])
        if cur and (len(cur) + 1) * n_cores * ni * np_ > _CHUNK:
            chunks.append(cur)
            cur, ni, np_ = [], size[i][0], size[i][1]
        cur.append(i)
        i_max, p_max = ni, np_
    chunks.append(cur)
    return chunks


def _program(p: ConvPlan) -> Program:
    sp = p.spec
    return Program(
        p.hw.num_cores,
        p.hw.coupled,
        sp.reuse_input,
        sp.nc1hwc0_source,
        p.epi,
        p.operand,
        p.output,
        p.l2_resident,
    )


def _stack(plans: list[ConvPlan], ndim: int):
    """(Tile, loop counts) of the plans, each field a (tilings, 1, ...) array of ``ndim`` axes."""

    def col(values):
        return np.asarray(values).reshape((-1,) + (1,) * (ndim - 1))

    fields = ("ho", "wo", "n", "cin1", "k_l0", "weights_resident", "l1_stages", "l0_stages", "cout_split")
    t = Tile(*(col([getattr(p.t, f) for p in plans]) for f in fields))
    t = t._replace(resident=t.resident.astype(np.int64))
    return t, {k: col([getattr(p, attr) for p in plans]) for k, attr in _D_FIELDS.items()}


def stacked_arrays(plans: list[ConvPlan], L: Layer, h: HwNumbers, cores: int | None = None):
    """(item costs (C, B, I, 1), part costs (C, B, I, P), prologue (C, B, 1, 1)) of C plans that share
    a layer, strategy, hardware, formats and epilogue: B the chip's cores (or its first ``cores``),
    I and P the plans' most items and parts; zero outside each plan's cores, items and parts
    (``live``, ``fetch`` and ``release`` False, no K steps)."""
    pr = _program(plans[0])
    t, d = _stack(plans, 4)
    d = _with_l2(pr, L, t, d, h, np)
    items = d["tiles_per_core"] * d["cb_per"]
    n_i, n_p = int(items.max()), int(d["n_parts"].max())
    n_b = pr.num_cores if cores is None else min(cores, pr.num_cores)
    b = np.arange(n_b).reshape(1, -1, 1, 1)
    j = np.arange(n_i).reshape(1, 1, -1, 1)
    pi = np.arange(n_p).reshape(1, 1, 1, -1)
    item_ok = (j < items) & (b < d["cores"])
    part_ok = item_ok & (pi < d["n_parts"])
    shape_i, shape_p = (len(plans), n_b, n_i, 1), (len(plans), n_b, n_i, n_p)
    c = {
        k: np.where(item_ok, v, False if k in _FLAGS else 0)
        for k, v in _item(pr, L, t, d, h, j, b, np).items()
    }
    c = {k: np.broadcast_to(v, shape_i) for k, v in c.items()}
    q = {
        k: np.broadcast_to(np.where(part_ok, v, 0), shape_p)
        for k, v in _part(pr, L, t, d, h, c, pi, np).items()
    }
    pro = _prologue(pr, L, t, d, h, b, np)
    shape_b = (len(plans), n_b, 1, 1)
    pro = {k: np.broadcast_to(np.where(b < d["cores"], v, 0), shape_b) for k, v in pro.items()}
    return c, q, pro


_FLAGS = ("live", "fetch", "release", "first_round")


def bounds_many(plans: list[ConvPlan], layer: Layer, cores: int | None = None) -> list[tuple[int, int]]:
    """``(lower_bound(p), lower_bound(p, serial=True))`` of every plan (see :func:`stacked_arrays`
    for what they share): the later of the busiest pipe of the busiest core (each pipe's work
    summed, no schedule, between its unavoidable fill and drain) and the chip's HBM time, after the
    launch; or every pipe's work summed.

    ``cores=k`` looks at the first k cores only (their work, their HBM bytes): a floor under each
    bound, at a k-th of the cost; with ``k = 1``, core 0 (the most tiles, every Cout block of its
    group, the first reader of what it fetches), usually the busiest, so the floor is near the bound."""
    if not plans:
        return []
    h = HwNumbers.of(plans[0].hw)
    out: list = [None] * len(plans)
    for chunk in _chunks(plans, cores):
        c, q, pro = stacked_arrays([plans[i] for i in chunk], layer, h, cores)
        for i, b in zip(chunk, _bounds(c, q, pro, h, plans[0].hw.coupled)):
            out[i] = b
    return out


def _per_core(v):
    """(plans, cores): an item / part array summed over items and parts."""
    return v.sum((2, 3))


def _k_steps(n_s, first, full, last):
    """A pipe's work over an item's n_s K steps: the first, the full ones, the last."""
    return np.where(n_s > 0, first + np.maximum(n_s - 2, 0) * full + np.where(n_s >= 2, last, 0), 0)


def lane_work(c: dict, q: dict, pro: dict, coupled: bool) -> dict:
    """Each profiler lane's busy cycles per plan and core ((plans, cores) int arrays) from the
    instruction costs of :func:`stacked_arrays`: what the emulator's report counts in ``pipe_busy``
    (summed over the cores, tested equal). MTE2: input and weight fetches, the residual, the
    prologue's resident weights and bias; MTE1: the L0 loads; CUBE: the Mmads; the epilogue's L0C
    read-out is the Fixpipe's (separated chips) or, with the vector steps, the Vector unit's
    (coupled chips, L0C -> UB), its write MTE3's."""
    live, n_s = c["live"], q["steps"]

    pro2 = pro["cw_res"][:, :, 0, 0] + pro["cbias"][:, :, 0, 0]
    fx, vec = _per_core(c["fx"]), _per_core(c["vpre"] + c["vres"] + c["vpost"])
    zero = 0 * fx
    return {
        "MTE2": _per_core(c["cx"]) + _per_core(q["cw"] * live) + _per_core(c["cr"]) + pro2,
        "MTE1": _per_core(_k_steps(n_s, q["l_first"], c["lf"], q["l_last"]) * live),
        "CUBE": _per_core(_k_steps(n_s, q["mm_first"], c["mmf"], q["mm_last"]) * live),
        "FIXP": zero if coupled else fx,
        "VECTOR": vec + fx if coupled else vec,
        "MTE3": _per_core(c["c3"]),
        "SCALAR": zero,
    }


def _bounds(c: dict, q: dict, pro: dict, h: HwNumbers, coupled: bool) -> list[tuple[int, int]]:
    live, n_s = c["live"], q["steps"]

    lanes = lane_work(c, q, pro, coupled)
    mte1, cube, mte2 = lanes["MTE1"], lanes["CUBE"], lanes["MTE2"]
    mm = _k_steps(n_s, q["mm_first"], c["mmf"], q["mm_last"]) * live
    pro2 = pro["cw_res"][:, :, 0, 0] + pro["cbias"][:, :, 0, 0]
    drain = c["fx"] + c["c3"] + c["vpre"] + c["vres"] + c["vpost"]
    epi = lanes["FIXP"] + lanes["VECTOR"] + lanes["MTE3"]  # the drain, summed per core
    hbm = _per_core(c["hbm"]).sum(1) + _per_core(q["hbm"] * live).sum(1) + pro["hbm"].sum((1, 2, 3))
    # each pipe's work sits between a fill and a drain no schedule avoids: before the first load,
    # MTE2's work up to the first item's first weight part (item 0 is a working core's first live
    # item); after the last load and Mmad, the last live item's drain (its L0C read out); after the
    # last read (a residual's, in the drain) what the drain does with it
    fill = pro2 + c["cx"][:, :, 0, 0] + q["cw"][:, :, 0, 0] * live[:, :, 0, 0]
    first_load = q["l_first"][:, :, 0, 0] * (q["steps"][:, :, 0, 0] > 0) * live[:, :, 0, 0]
    last = live.shape[2] - 1 - np.argmax(live[..., 0][:, :, ::-1], axis=2)  # (tilings, cores)

    def at_last(v):
        return np.take_along_axis(v[..., 0], last[..., None], 2)[..., 0] * live.any((2, 3))

    tail = at_last(drain)
    # one L0C: an item's first Mmad waits for the item before it to be read out of L0C
    busy = np.maximum.reduce(
        [
            fill + mte1 + tail,
            fill + first_load + cube + _per_core(c["fx"]) + tail - at_last(c["fx"]),
            mte2 + at_last(c["vres"] + c["vpost"] + c["c3"]),  # a residual is read in the drain
            fill + first_load + mm[:, :, 0, :].sum(-1) + epi,
        ]
    )
    par = kernel_cycles(h, busy.max(1), hbm)
    ser = kernel_cycles(h, (mte1 + cube + mte2 + epi).max(1), hbm)
    return [(int(a), int(s)) for a, s in zip(par, ser)]


def recency_guard(plans: list[ConvPlan], arrs, h: HwNumbers) -> np.ndarray:
    """Whether each plan's closed form is exact under the L2's recency policy (``core/l2.py``): its
    re-reads all hit when fewer than the L2's bytes enter between two reads of an element, and the
    kernel re-reads only within a span of items (``schedule.reread_span``). So the bytes every core
    brings in (misses, counted as if every re-read hit, and all writes; the writes of an output the L2
    does not keep twice, which only loosens it) in the prologue and any window of that span bound
    every distance. A bound (False where a re-read
    could age out), not the distance: such tilings are not priced. The traced schedule, which keeps
    no history of its items, checks a looser one (``costs.recency_priced``): what it prices, this does."""
    c, q, pro = arrs
    entered = (c["hbm"] + c["out_bytes"])[..., 0] + q["hbm"].sum(axis=-1)  # (plans, cores, items)
    per_item = np.cumsum(np.pad(entered.sum(axis=1), ((0, 0), (1, 0))), axis=1)
    n_items = per_item.shape[1] - 1
    ok = np.zeros(len(plans), bool)
    for i, p in enumerate(plans):
        span = int(reread_span(p.n_tw, p.cores_sp, p.cb_per, n_items))
        window = np.max(per_item[i, span:] - per_item[i, : n_items + 1 - span]) if n_items else 0
        ok[i] = l2_recent(h, window + pro["hbm"][i].sum())
    return ok


def schedule_many(plans: list[ConvPlan], layer: Layer, lanes: bool = False, strict: bool = True) -> list:
    """The exact schedule of every plan (see :func:`stacked_arrays` for what they share): dicts of
    ``cycles``, ``gm_l1``, ``gm_ub``, ``gm_out``, ``core_end``, ``hbm`` (bytes) (ints); with
    ``lanes``, also ``pipe_busy`` (each lane's busy cycles summed over the cores, :func:`lane_work`;
    the chooser does without). Under the L2's recency policy a plan :func:`recency_guard` cannot
    price is refused (``strict``) or None."""
    if not plans:
        return []
    h = HwNumbers.of(plans[0].hw)
    pr = _program(plans[0])
    out: list = [None] * len(plans)
    for chunk in _chunks(plans):
        ps = [plans[i] for i in chunk]
        arrs = stacked_arrays(ps, layer, h)
        t, d = _stack(ps, 2)
        s = schedule(pr, layer, t, d, h, np, stacked=arrs)
        busy = lane_work(*arrs, plans[0].hw.coupled) if lanes else {}
        priced = recency_guard(ps, arrs, h) if h.recency else np.ones(len(ps), bool)
        for k, i in enumerate(chunk):
            if not priced[k]:
                if strict:
                    raise ValueError(
                        f"the conv's closed form: under l2_policy='recency' tiling {plans[i].t} of "
                        f"{plans[i].g.describe()} may re-read data the L2 has let go (the bytes entering "
                        f"between two reads can reach its {plans[i].hw.l2_bytes} B), which the closed form "
                        f"does not price. Run it on the emulator, take smaller tiles, or use "
                        f"hw.replace(l2_policy='smallest_first')."
                    )
                continue
            out[i] = {
                f: int(np.asarray(s[f]).reshape(-1)[k])
                for f in ("cycles", "gm_l1", "gm_ub", "gm_out", "core_end", "hbm")
            }
            if lanes:
                out[i]["pipe_busy"] = {lane: int(v[k].sum()) for lane, v in busy.items()}
    return out


__all__ = ["bounds_many", "lane_work", "schedule_many", "stacked_arrays"]

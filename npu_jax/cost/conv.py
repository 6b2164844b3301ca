"""Closed-form cost of the Conv2D kernel: cycles and bytes from shapes, tiling and hardware alone.

The model reads the same :class:`~npu_jax.mapping.conv.ConvPlan` as the emulator and prices every
instruction with the emulator's cost rules (``npu_jax/hw/costs.py``); the schedule itself is
:mod:`npu_jax.cost.schedule`, written once for this module (numpy, :func:`predict`) and for traced
tilings (jax, :func:`cycles`, vmappable over stacked :class:`ConvTiling` s; the tile search).
The test suite holds it to the emulator.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from npu_jax.core.policy import OPERANDS
from npu_jax.cost.many import bounds_many, schedule_many
from npu_jax.cost.schedule import Layer, Program, Tile, derived, schedule
from npu_jax.errors import InputError, InputTypeError, TilingError, check_choice
from npu_jax.hw import costs
from npu_jax.hw.config import FRACTAL_ROWS, HardwareConfig
from npu_jax.hw.costs import HwNumbers, cdiv, kernel_cycles
from npu_jax.hw.formats import itemsize
from npu_jax.mapping.conv import SPECS, ConvPlan, ConvTiling
from npu_jax.workload.conv import ConvGeometry


@dataclasses.dataclass(frozen=True)
class Prediction:
    cycles: int
    gm_bytes: int
    bytes: dict
    flops: int


def layer_of(g, c0: int | None = None) -> Layer:
    """The :class:`~npu_jax.cost.schedule.Layer` of a :class:`ConvGeometry` (its own fields); a grouped
    one's dense view (``ConvGeometry.dense_view``, batch N * G'), which needs ``c0`` (the operand's
    channel block)."""
    sg = 1
    if g.groups > 1:
        if c0 is None:
            raise ValueError(f"layer_of a grouped conv ({g.describe()}) needs c0 (hw.c0(itemsize)).")
        sg = g.supergroups(c0, FRACTAL_ROWS)
        g = g.dense_view(c0, FRACTAL_ROWS)
    return Layer(
        g.n, g.c, g.h, g.w, g.k, g.kh, g.kw, *g.stride, *g.dilation, g.pads[0], g.pads[2], g.ho, g.wo, sg
    )


def tile_of(t: ConvTiling) -> Tile:
    """The schedule's :class:`~npu_jax.cost.schedule.Tile` of a tiling (ints, arrays or tracers)."""
    return Tile(t.ho, t.wo, t.n, t.cin1, t.k_l0, t.weights_resident, t.l1_stages, t.l0_stages, t.cout_split)


def traced_cycles(pr: Program, L: Layer, t: ConvTiling, c0, h: HwNumbers, num_cores: int):
    """Cycles of one tiling whose fields are jax scalars (traced under ``vmap``/``jit``): the schedule
    of :func:`predict` over jax arrays, for a plan bounded by its own layer (``bound=None``) on
    ``num_cores`` cores (``cores=None``). ``L`` and ``h`` may be traced too (the search's sweeps)."""
    d = derived(L, t, c0, num_cores, jnp)
    return schedule(pr, L, tile_of(t), d, h, jnp)["cycles"]


def cycles(
    g,
    t: ConvTiling,
    hw: HardwareConfig,
    strategy: str = "img2col",
    operand: str = "fp16",
    output: str = "fp16",
    epi=None,
) -> jax.Array:
    """Cycles of Conv2D ``g`` with tiling ``t`` on ``hw``, a jax int32 scalar: ``predict``'s figure
    (and the emulator's ``timing_only`` run's), from a tiling whose fields may be traced.

    Vmappable over tilings: ``jax.vmap(lambda t: cycles(g, t, hw))(stacked)`` prices a
    :class:`ConvTiling` whose fields carry a leading axis (``jax.tree.map(lambda *a: jnp.stack(a),
    *tilings)``), one entry per tiling, in one compiled program. The layer, strategy, formats,
    epilogue (as ``ConvPlan.epi``) and ``hw`` are static. ``t.cores`` must be None (every core of
    ``hw``, capped by the work, as ``make_plan``). Legality is not checked here (a traced tiling
    cannot raise): cost only tilings that ``make_plan`` accepts (the search checks with
    ``search.exact.legal``); the figure of an illegal one means nothing."""
    _check_types("cost.cycles", g=(g, ConvGeometry), t=(t, ConvTiling), hw=(hw, HardwareConfig))
    check_choice("cost.cycles", "strategy", strategy, tuple(SPECS))
    check_choice("cost.cycles", "operand", operand, OPERANDS)
    check_choice("cost.cycles", "output", output, OPERANDS)
    if t.cores is not None:
        raise TilingError(
            f"cost.cycles prices tilings on every core of {hw.name} (cores=None), got cores={t.cores!r}; "
            f"use cost.predict(make_plan(...)) for a tiling on fewer cores."
        )
    sp = SPECS[strategy]
    c0 = hw.c0(itemsize(operand))
    sg = g.supergroups(c0, FRACTAL_ROWS)
    if sg > 1 and epi is not None:
        raise InputError(
            f"cost.cycles: a fused epilogue needs a conv of one super-group; {g.describe()} runs {sg}: "
            f"price the conv unfused (epi=None)."
        )
    pr = Program(hw.num_cores, hw.coupled, sp.reuse_input, sp.nc1hwc0_source, epi, operand, output)
    L = Layer(*(jnp.int32(x) for x in layer_of(g, c0)))
    t = jax.tree.map(jnp.asarray, t)
    return traced_cycles(pr, L, t, c0, HwNumbers.arrays(hw), hw.num_cores)


def _check_types(fn: str, **args) -> None:
    """Each argument (name -> (value, class)) an instance of its class, else an error naming it."""
    for name, (v, cls) in args.items():
        if not isinstance(v, cls):
            raise InputTypeError(f"{fn}: {name} must be a {cls.__name__}, got {type(v).__name__} {v!r}.")


def predict(p: ConvPlan) -> Prediction:
    """Cycles and bytes of a ConvPlan, in closed form (numpy; the search runs the same schedule in
    jax through :mod:`npu_jax.search.exact`)."""
    _check_types("cost.predict", p=(p, ConvPlan))
    return _prediction(p, schedule_many([p], layer_of(p.g, p.c0))[0])


def _prediction(p: ConvPlan, s: dict) -> Prediction:
    path_out = "UB->GM" if p.hw.coupled else "L0C->GM"
    return Prediction(
        cycles=s["cycles"],
        gm_bytes=s["gm_l1"] + s["gm_ub"] + s["gm_out"],
        bytes={"GM->L1": s["gm_l1"], "GM->UB": s["gm_ub"], path_out: s["gm_out"]},
        flops=p.g.flops if isinstance(p.g.n, int) else None,
    )


def lower_bound(p: ConvPlan, serial: bool = False) -> int:
    """A cheap lower bound on ``predict(p).cycles``: the launch, then the later of the busiest pipe of
    the busiest core (each pipe's work summed, no schedule) and the chip's HBM time. ``serial=True``
    instead sums every pipe's work (an upper bound for the single-buffered chain). Used to rank the
    chooser's candidates (:func:`npu_jax.cost.many.bounds_many`, many at once)."""
    return bounds_many([p], layer_of(p.g, p.c0))[0][int(serial)]


_BATCH = 256  # tilings bounded per numpy pass of the chooser


def _floor(p: ConvPlan, h: HwNumbers) -> int:
    """A lower bound on :func:`lower_bound` from a few integers: the launch, then the later of core 0's
    Mmads and the HBM bytes no schedule avoids. Core 0 is the busiest (the most tiles, every Cout block
    of its group); each of its items is costed at the layer's smallest tile and Cout block, its K
    steps as the kernel takes them (``costs.mmad`` of each part's full steps and last one). HBM: the
    output is written and every weight is read once from HBM (the first core of a Cout group
    misses)."""
    g, t = p.gv, p.t
    isz, osz = itemsize(p.operand), itemsize(p.output)
    items = p.tiles_per_core * min(p.cb_per, p.n_cb)
    m_min = (g.ho - (p.n_th - 1) * t.ho - 1) * t.wo + g.wo - (p.n_tw - 1) * t.wo
    n_min = g.k - (p.n_cb - 1) * t.n

    def part(k):  # the Mmads of one weight part of depth k: full k_l0 steps, then the rest
        steps = cdiv(k, t.k_l0)
        full = costs.mmad(h, m_min, n_min, t.k_l0, isz)
        return (steps - 1) * full + costs.mmad(h, m_min, n_min, k - (steps - 1) * t.k_l0, isz)

    cube = items * ((p.n_parts - 1) * part(p.k_l1) + part(p.k_total - (p.n_parts - 1) * p.k_l1))
    w_bytes = (p.k_total * g.k if p.spec.nc1hwc0_source else g.k * g.c * g.kh * g.kw) * isz * p.sgroups
    return int(kernel_cycles(h, cube, g.n * g.ho * g.wo * g.k * osz + w_bytes))


def predict_many(
    g,
    strategy: str,
    tilings,
    hw: HardwareConfig,
    operand: str = "fp16",
    output: str = "fp16",
    exact: int | None = 48,
    epi=None,
    prune: bool = True,
):
    """(cycles, GM bytes) for many tilings of one layer (numpy; for the chooser).

    Grids of up to 8k tilings are all costed exactly. Larger ones: only k tilings get the full
    schedule (the lowest :func:`lower_bound`, and where some are single-buffered half of them by
    the serial sum instead); the others rank after all of them (cycles: the worst exact cost plus
    their bound). ``prune`` finds those k without bounding every tiling: tilings are bounded in the
    order of :func:`_floor` (a bound on the bound) until the next floor exceeds the k-th best bound
    found; no tiling left has a bound that could rank, so the k are the same as bounding all.
    Bounds are computed :data:`_BATCH` tilings at a time (``cost.many``: one numpy pass each)."""
    plans = [ConvPlan(g, strategy, t, hw, operand, output, epi=epi) for t in tilings]
    L = layer_of(g, hw.c0(itemsize(operand)))
    if exact is None or len(plans) <= 8 * exact:  # small grids: cost every candidate exactly
        preds = [_prediction(p, s) for p, s in zip(plans, schedule_many(plans, L))]
        return [q.cycles for q in preds], [q.gm_bytes for q in preds]
    h = HwNumbers.of(hw)
    serial = any(p.t.l1_stages == 1 for p in plans)
    k = exact // 2 if serial else exact  # taken by each ranking
    floors = [_floor(p, h) if prune else 0 for p in plans]
    by_floor = sorted(range(len(plans)), key=lambda i: floors[i])
    bounds: dict[int, tuple[int, int]] = {}
    for start in range(0, len(plans), _BATCH):
        if len(bounds) >= k:
            par = sorted(b[0] for b in bounds.values())[k - 1]
            ser = sorted(b[1] for b in bounds.values())[k - 1] if serial else 0
            if floors[by_floor[start]] > max(par, ser):
                break  # every tiling left: bound >= floor > the k-th best of both rankings
        batch = by_floor[start : start + _BATCH]
        bounds.update(zip(batch, bounds_many([plans[i] for i in batch], L)))
    seen = sorted(bounds)
    order = sorted(seen, key=lambda i: bounds[i][0])
    pick = order[:exact]
    if serial:
        # single-buffered work is mostly serial: also take the best by the serial sum
        pick = list(dict.fromkeys(order[:k] + sorted(seen, key=lambda i: bounds[i][1])[:k]))
    cyc, gmb = [None] * len(plans), [None] * len(plans)
    for i, s in zip(pick, schedule_many([plans[i] for i in pick], L)):
        q = _prediction(plans[i], s)
        cyc[i], gmb[i] = q.cycles, q.gm_bytes
    # the others rank after every exactly costed one (a bound is not a cost: it may be far below it)
    worst, big = max(x for x in cyc if x is not None), max(x for x in gmb if x is not None) + 1
    rank = [bounds[i][0] if i in bounds else floors[i] for i in range(len(plans))]
    return [worst + rank[i] if x is None else x for i, x in enumerate(cyc)], [
        big if x is None else x for x in gmb
    ]

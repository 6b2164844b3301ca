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
import numpy as np

from npu_jax.cost.schedule import Layer, Program, Tile, arrays, derived, schedule
from npu_jax.errors import InputTypeError, TilingError, check_choice
from npu_jax.hw.config import HardwareConfig
from npu_jax.hw.costs import HwNumbers, kernel_cycles
from npu_jax.hw.formats import itemsize
from npu_jax.mapping.conv import SPECS, ConvPlan, ConvTiling
from npu_jax.workload.conv import ConvGeometry


@dataclasses.dataclass(frozen=True)
class Prediction:
    cycles: int
    gm_bytes: int
    bytes: dict
    flops: int


def layer_of(g) -> Layer:
    """The :class:`~npu_jax.cost.schedule.Layer` of a :class:`ConvGeometry` (its own fields)."""
    return Layer(
        g.n, g.c, g.h, g.w, g.k, g.kh, g.kw, *g.stride, *g.dilation, g.pads[0], g.pads[2], g.ho, g.wo
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
    check_choice("cost.cycles", "operand", operand, ("fp16", "bf16", "fp32"))
    check_choice("cost.cycles", "output", output, ("fp16", "bf16", "fp32"))
    if t.cores is not None:
        raise TilingError(
            f"cost.cycles prices tilings on every core of {hw.name} (cores=None), got cores={t.cores!r}; "
            f"use cost.predict(make_plan(...)) for a tiling on fewer cores."
        )
    sp = SPECS[strategy]
    pr = Program(hw.num_cores, hw.coupled, sp.reuse_input, sp.nc1hwc0_source, epi, operand, output)
    L = Layer(*(jnp.int32(x) for x in layer_of(g)))
    t = jax.tree.map(jnp.asarray, t)
    return traced_cycles(pr, L, t, hw.c0(itemsize(operand)), HwNumbers.arrays(hw), hw.num_cores)


def _check_types(fn: str, **args) -> None:
    """Each argument (name -> (value, class)) an instance of its class, else an error naming it."""
    for name, (v, cls) in args.items():
        if not isinstance(v, cls):
            raise InputTypeError(f"{fn}: {name} must be a {cls.__name__}, got {type(v).__name__} {v!r}.")


def _inputs(p: ConvPlan):
    """(Program, Layer, Tile, loop counts, HwNumbers) of a plan: its properties, bound included."""
    t, sp = p.t, p.spec
    pr = Program(p.cores, p.hw.coupled, sp.reuse_input, sp.nc1hwc0_source, p.epi, p.operand, p.output)
    tile = Tile(
        t.ho, t.wo, t.n, t.cin1, t.k_l0, int(t.weights_resident), t.l1_stages, t.l0_stages, t.cout_split
    )
    d = dict(
        c1=p.c1,
        k_total=p.k_total,
        k_l1=p.k_l1,
        ncb=p.n_cb,
        n_th=p.n_th,
        n_tw=p.n_tw,
        n_tiles=p.n_tiles,
        cores_sp=p.cores_sp,
        cb_per=p.cb_per,
        cores=p.cores,
        tiles_per_core=p.tiles_per_core,
        n_parts=p.n_parts,
        cin1_eff=p.cin1_eff,
        k_l1_cap=p.k_l1_cap,
        cb_per_cap=p.cb_per_cap,
    )
    return pr, layer_of(p.g), tile, d, HwNumbers.of(p.hw)


def predict(p: ConvPlan) -> Prediction:
    """Cycles and bytes of a ConvPlan, in closed form (numpy; the search runs the same schedule in
    jax through :mod:`npu_jax.search.exact`)."""
    _check_types("cost.predict", p=(p, ConvPlan))
    pr, L, t, d, h = _inputs(p)
    s = schedule(pr, L, t, d, h, np)
    path_out = "UB->GM" if p.hw.coupled else "L0C->GM"
    return Prediction(
        cycles=int(s["cycles"]),
        gm_bytes=s["gm_l1"] + s["gm_ub"] + s["gm_out"],
        bytes={"GM->L1": s["gm_l1"], "GM->UB": s["gm_ub"], path_out: s["gm_out"]},
        flops=p.g.flops if isinstance(p.g.n, int) else None,
    )


def lower_bound(p: ConvPlan, serial: bool = False) -> int:
    """A cheap lower bound on ``predict(p).cycles``: the launch, then the later of the busiest pipe of
    the busiest core (each pipe's work summed, no schedule) and the chip's HBM time. ``serial=True``
    instead sums every pipe's work (an upper bound for the single-buffered chain). Used to rank the
    chooser's candidates."""
    return _bounds(p)[int(serial)]


def _bounds(p: ConvPlan) -> tuple[int, int]:
    """(:func:`lower_bound`, its ``serial=True`` sum) from one pass over the plan's arrays."""
    c, q, pro = arrays(*_inputs(p))
    live = c["live"][..., None]
    n_s = q["steps"]

    def steps(first, full, last):
        return np.where(n_s > 0, first + np.maximum(n_s - 2, 0) * full + np.where(n_s >= 2, last, 0), 0)

    mte1 = (steps(q["l_first"], c["lf"][..., None], q["l_last"]) * live).sum((1, 2))
    cube = (steps(q["mm_first"], c["mmf"][..., None], q["mm_last"]) * live).sum((1, 2))
    mte2 = c["cx"].sum(1) + (q["cw"] * live).sum((1, 2)) + pro["cw_res"] + c["cr"].sum(1) + pro["cbias"]
    epi = (c["fx"] + c["c3"] + c["vpre"] + c["vres"] + c["vpost"]).sum(1)
    h = HwNumbers.of(p.hw)
    hbm = int(c["hbm"].sum() + (q["hbm"] * live).sum() + pro["hbm"].sum())
    par = int(kernel_cycles(h, np.maximum(np.maximum(mte1, cube), np.maximum(mte2, epi)).max(), hbm))
    return par, int(kernel_cycles(h, (mte1 + cube + mte2 + epi).max(), hbm))


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
    schedule (the lowest :func:`lower_bound`, and where some are single-buffered half of them by
    the serial sum instead); the others rank after all of them (cycles: the worst exact cost plus
    their bound)."""
    plans = [ConvPlan(g, strategy, t, hw, operand, output, epi=epi) for t in tilings]
    if exact is None or len(plans) <= 8 * exact:  # small grids: cost every candidate exactly
        preds = [predict(p) for p in plans]
        return [q.cycles for q in preds], [q.gm_bytes for q in preds]
    both = [_bounds(p) for p in plans]
    lbs = [b[0] for b in both]
    order = sorted(range(len(plans)), key=lambda i: lbs[i])
    pick = order[:exact]
    if any(p.t.l1_stages == 1 for p in plans):
        # single-buffered work is mostly serial: also take the best by the serial sum
        ser = [b[1] for b in both]
        pick = list(
            dict.fromkeys(order[: exact // 2] + sorted(range(len(plans)), key=lambda i: ser[i])[: exact // 2])
        )
    cyc, gmb = [None] * len(plans), [None] * len(plans)
    for i in pick:
        q = predict(plans[i])
        cyc[i], gmb[i] = q.cycles, q.gm_bytes
    # the others rank after every exactly costed one (a bound is not a cost: it may be far below it)
    worst, big = max(x for x in cyc if x is not None), max(x for x in gmb if x is not None) + 1
    return [worst + lbs[i] if x is None else x for i, x in enumerate(cyc)], [
        big if x is None else x for x in gmb
    ]

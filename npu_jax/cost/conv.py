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

from npu_jax.core import l2, pipes
from npu_jax.core.policy import OPERANDS
from npu_jax.core.state import GmSpec
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
    """What the emulator's Report of the plan's launch says, in closed form: ``cycles`` (launch
    included), ``gm_bytes`` and ``bytes`` per GM path, useful ``flops``, ``pipe_busy`` per profiler
    lane (summed over the cores), ``core_end`` (the last core's end, after the launch), the chip's
    ``hbm_bytes`` and ``hbm_cycles``, the cores launched (``n_cores``); ``pct_peak``, ``ratios`` and
    ``bottleneck`` by the Report's rules. Held exactly to the emulator (``tests/test_cost_model.py``)."""

    cycles: int
    gm_bytes: int
    bytes: dict
    flops: int
    pipe_busy: dict
    core_end: int
    hbm_bytes: int
    hbm_cycles: int
    n_cores: int
    peak_flops_per_cycle: int  # the whole chip's, as Report's

    @property
    def pct_peak(self) -> float:
        """Useful FLOPs / (cycles x the chip's peak FLOP per cycle), in percent, as ``Report.pct_peak``."""
        return 100.0 * self.flops / max(1, self.cycles * self.peak_flops_per_cycle)

    @property
    def ratios(self) -> dict[str, float]:
        """Busy / elapsed per lane over the launched cores, as ``Report.ratios``."""
        return pipes.ratios(self.pipe_busy, self.cycles, self.n_cores)

    @property
    def bottleneck(self) -> str:
        return pipes.bottleneck(self.pipe_busy, self.hbm_cycles, self.core_end)


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


# what the traced cost gives a tiling it cannot price (int32's largest: after every priced one)
UNPRICED = np.iinfo(np.int32).max


def traced_cycles(pr: Program, L: Layer, t: ConvTiling, c0, h: HwNumbers, num_cores: int):
    """Cycles of one tiling whose fields are jax scalars (traced under ``vmap``/``jit``): the schedule
    of :func:`predict` over jax arrays, for a plan bounded by its own layer (``bound=None``) on
    ``num_cores`` cores (``cores=None``). ``L`` and ``h`` may be traced too (the search's sweeps).
    Under the L2's recency policy, :data:`UNPRICED` where the schedule's bound does not hold
    (``costs.recency_priced``, looser than ``predict``'s: what it prices, ``predict`` prices alike)."""
    d = derived(L, t, c0, num_cores, jnp)
    s = schedule(pr, L, tile_of(t), d, h, jnp)
    return jnp.where(s["priced"], s["cycles"], UNPRICED)


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
    ``search.exact.legal``); the figure of an illegal one means nothing. Under ``l2_policy="recency"``
    a tiling whose re-reads the closed form cannot bound is :data:`UNPRICED` (int32's largest), where
    ``predict`` raises."""
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


def l2_kept(p: ConvPlan) -> tuple[str, ...]:
    """The GM tensors the conv's launch leaves in L2 (``l2.kept`` over the tensors ``run_plan``
    launches with, in its order: the same shapes, a grouped layer's super-groups as a leading
    axis), resident for the vector kernel after it (the Report's ``l2_kept``). Held to the emulator by the
    network's run == estimate tests and ``tests/test_fusion.py``'s modelled analysis."""
    sg = p.sgroups  # grouped convs: super-groups (G', ...) of the dense view ``Bv``
    B, op, e = p.Bv, p.operand, p.epi
    lead = (sg,) if sg > 1 else ()
    if p.spec.nc1hwc0_source:
        specs = [
            GmSpec("x5", (B.n, p.c1_cap, B.h, B.w, p.c0), (), op),
            GmSpec("wkn", lead + p.wkn_shape, (), op),
        ]
    else:
        specs = [
            GmSpec("x", (B.n, B.c, B.h, B.w), (), op),
            GmSpec("w", lead + (B.k, B.c, B.kh, B.kw), (), op),
        ]
    y_shape = (p.g.n, p.ho_cap, p.wo_cap, sg, B.k) if sg > 1 else (B.n, p.ho_cap, p.wo_cap, B.k)
    if e is not None and e.row is not None:
        specs.append(GmSpec(e.row, (1, B.k), (), e.row_format))
    if e is not None and e.has("residual"):
        specs.append(GmSpec("res", y_shape, (), e.residual_format))
    specs.append(GmSpec("y", y_shape, (), p.output, output=True))
    return l2.kept(p.hw, specs)


def _check_types(fn: str, **args) -> None:
    """Each argument (name -> (value, class)) an instance of its class, else an error naming it."""
    for name, (v, cls) in args.items():
        if not isinstance(v, cls):
            raise InputTypeError(f"{fn}: {name} must be a {cls.__name__}, got {type(v).__name__} {v!r}.")


def predict(p: ConvPlan) -> Prediction:
    """Cycles and bytes of a ConvPlan, in closed form (numpy; the search runs the same schedule in
    jax through :mod:`npu_jax.search.exact`)."""
    _check_types("cost.predict", p=(p, ConvPlan))
    return _prediction(p, schedule_many([p], layer_of(p.g, p.c0), lanes=True)[0])


def _prediction(p: ConvPlan, s: dict) -> Prediction:
    path_out = "UB->GM" if p.hw.coupled else "L0C->GM"
    return Prediction(
        cycles=s["cycles"],
        gm_bytes=_gm_bytes(s),
        bytes={"GM->L1": s["gm_l1"], "GM->UB": s["gm_ub"], path_out: s["gm_out"]},
        flops=p.g.flops if isinstance(p.g.n, int) else None,
        pipe_busy=s["pipe_busy"],
        core_end=s["core_end"],
        hbm_bytes=s["hbm"],
        hbm_cycles=int(costs.hbm_cycles(HwNumbers.of(p.hw), s["hbm"])),
        n_cores=p.cores,
        peak_flops_per_cycle=p.hw.peak_flops_per_cycle(p.operand) * p.hw.num_cores,
    )


def _gm_bytes(s: dict) -> int:
    """A schedule's GM bytes: into L1, into UB, out."""
    return s["gm_l1"] + s["gm_ub"] + s["gm_out"]


def lower_bound(p: ConvPlan, serial: bool = False) -> int:
    """A cheap lower bound on ``predict(p).cycles``: the launch, then the later of the chip's HBM time
    and the busiest pipe of the busiest core (each pipe's work summed, no schedule) with the fill
    before it and the drain after it that no schedule avoids (the Cube: the first fetches and load
    before it, each item's read-out of the one L0C between its Mmads, the last item's drain after).
    ``serial=True`` instead sums every pipe's work (an upper bound for the single-buffered chain).
    The chooser's branch and bound uses core 0's (:func:`npu_jax.cost.many.bounds_many`, many at
    once)."""
    return bounds_many([p], layer_of(p.g, p.c0))[0][int(serial)]


def floors(plans: list[ConvPlan], h: HwNumbers) -> np.ndarray:
    """Cheap lower bounds on :func:`lower_bound` of every plan (one layer, strategy, hardware,
    formats and epilogue): an array (plans, 2) of ``(parallel, serial)`` floors, each at most
    ``lower_bound(p)`` / ``lower_bound(p, serial=True)``, from a few integers per plan.

    Core 0 has the most tiles and every Cout block of its group (its work is at most the busiest
    core's); each of its items is costed at the layer's smallest tile and Cout block: its Mmads and
    MTE1 loads (the K steps as the kernel takes them: each part's full steps and last one) and its
    drain (Fixpipe; or L0C -> UB and MTE3 on coupled chips), its vector work and MTE2 counted as
    nothing. ``parallel`` is the busiest of those pipes, ``serial`` their sum; HBM: every weight read
    once (the first core of a Cout group misses; the output may stay in L2); then the launch
    (:func:`kernel_cycles`)."""
    p0 = plans[0]
    g = p0.gv
    isz, osz = itemsize(p0.operand), itemsize(p0.output)

    def col(f):
        return np.array([f(p) for p in plans], np.int64)

    tho, two, tn, kl0 = (col(lambda p, a=a: getattr(p.t, a)) for a in ("ho", "wo", "n", "k_l0"))
    n_th, n_tw, n_cb = col(lambda p: p.n_th), col(lambda p: p.n_tw), col(lambda p: p.n_cb)
    n_parts, k_l1, k_total = col(lambda p: p.n_parts), col(lambda p: p.k_l1), col(lambda p: p.k_total)
    items = col(lambda p: p.tiles_per_core) * np.minimum(col(lambda p: p.cb_per), n_cb)
    ho_min, wo_min = g.ho - (n_th - 1) * tho, g.wo - (n_tw - 1) * two
    m_min, n_min = (ho_min - 1) * two + wo_min, g.k - (n_cb - 1) * tn

    def reduction(step):  # an item's K steps, ``step(kv)`` the cost of one of depth kv
        def part(k):  # one weight part of depth k: its full k_l0 steps, then the rest
            n_steps = cdiv(k, kl0)
            return (n_steps - 1) * step(kl0) + step(k - (n_steps - 1) * kl0)

        return (n_parts - 1) * part(k_l1) + part(k_total - (n_parts - 1) * k_l1)

    l0a = costs.load_l0a(h, costs.load_l0a_bytes(h, m_min, kl0, isz))  # a fixed k_l0-deep window
    cube = items * reduction(lambda kv: costs.mmad(h, m_min, n_min, kv, isz))
    mte1 = items * reduction(lambda kv: l0a + costs.load_l0b(h, costs.load_l0b_bytes(h, kv, n_min, isz)))
    out_min, rate = ho_min * wo_min * n_min * osz, costs.write_rate(h, col(lambda p: p.cores))
    if p0.hw.coupled:
        drain = costs.l0c_to_ub(h, m_min, n_min) + costs.dma_out(h, out_min, 1, rate)
    else:
        drain = costs.fixpipe_gm(h, m_min, n_min, out_min, 1, rate)
    epi = items * drain
    w_bytes = (p0.k_total * g.k if p0.spec.nc1hwc0_source else g.k * g.c * g.kh * g.kw) * isz * p0.sgroups
    hbm = w_bytes
    par = kernel_cycles(h, np.maximum(cube, np.maximum(mte1, epi)), hbm)
    return np.stack(np.broadcast_arrays(par, kernel_cycles(h, cube + mte1 + epi, hbm)), 1).astype(np.int64)


_BATCH = 256  # tilings given core 0's bound per numpy pass of the chooser
_EXACT_BATCH = 16  # tilings costed exactly per pass


def predict_many(
    g,
    strategy: str,
    tilings,
    hw: HardwareConfig,
    operand: str = "fp16",
    output: str = "fp16",
    epi=None,
    every: bool = False,
):
    """(cycles, GM bytes) for many tilings of one layer (numpy; for the chooser): exact for every
    tiling that could be the cheapest, ties included; the others rank after all of those (cycles:
    the worst exact cost plus their best lower bound; GM bytes: more than any). ``every=True`` costs
    every tiling exactly.

    A branch and bound over two lower bounds of a tiling's cycles, each at most the next:
    :func:`floors` (a few integers a tiling) and core 0's bound (``bounds_many(..., cores=1)``: its
    busiest pipe between the fill and drain no schedule avoids, a core-count-th of the work of the
    whole chip's). Tilings are taken in the order of their floor, :data:`_BATCH` at a time, until
    the floor exceeds the best cost found; each batch gets core 0's bound, and those not above the
    best cost are costed exactly in its order. A bound never exceeds its tiling's cost (tested), so
    no tiling left out can be cheaper than the pick: the pick is the grid's cheapest. Under the L2's
    recency policy a tiling the closed form cannot price (``many.recency_guard``) is never the pick:
    it ranks after every priced one; if none is priced, the layer is refused."""
    plans = [ConvPlan(g, strategy, t, hw, operand, output, epi=epi) for t in tilings]
    L = layer_of(g, hw.c0(itemsize(operand)))
    if every:
        sch = [_unpriced(s) for s in schedule_many(plans, L, strict=False)]
        return _ranked([s["cycles"] for s in sch], [_gm_bytes(s) for s in sch], np.zeros(len(plans)), g, hw)
    rank = floors(plans, HwNumbers.of(hw))[:, 0]  # the best lower bound known of each tiling
    cyc, gmb = [None] * len(plans), [None] * len(plans)
    best = np.inf
    order = np.argsort(rank, kind="stable")
    for start in range(0, len(plans), _BATCH):
        batch = order[start : start + _BATCH]
        batch = batch[rank[batch] <= best]
        if not len(batch):
            break  # every tiling left: cost >= floor > the best cost found
        rank[batch] = [b[0] for b in bounds_many([plans[i] for i in batch], L, cores=1)]
        batch = batch[np.argsort(rank[batch], kind="stable")]
        for j in range(0, len(batch), _EXACT_BATCH):
            sub = [int(i) for i in batch[j : j + _EXACT_BATCH] if rank[i] <= best]
            if not sub:
                break  # in bound order: the rest of the batch costs more than the best found
            for i, s in zip(sub, schedule_many([plans[i] for i in sub], L, strict=False)):
                s = _unpriced(s)
                cyc[i], gmb[i], best = s["cycles"], _gm_bytes(s), min(best, s["cycles"])
    return _ranked(cyc, gmb, rank, g, hw)


_UNPRICED = 1 << 62  # the cycles and bytes of a tiling the closed form cannot price (recency)


def _unpriced(s: dict | None) -> dict:
    return s if s is not None else dict(cycles=_UNPRICED, gm_l1=_UNPRICED, gm_ub=0, gm_out=0)


def _ranked(cyc, gmb, rank, g, hw):
    """Exact figures where costed; after every one of those, the rest by their lower bound."""
    done = [x for x in cyc if x is not None and x < _UNPRICED]
    if not done:
        raise ValueError(
            f"the chooser: under l2_policy='recency' no tiling of {g.describe()} can be priced in closed "
            f"form on {hw.name} (each may re-read data the L2 has let go). Give an explicit tiling and run "
            f"it on the emulator, or use hw.replace(l2_policy='smallest_first')."
        )
    worst, big = max(done), max(x for x in gmb if x is not None and x < _UNPRICED) + 1
    after = [worst + int(r) + (x is not None) for x, r in zip(cyc, rank)]  # unpriced: after the rest too
    return [x if x is not None and x < _UNPRICED else a for x, a in zip(cyc, after)], [
        big if x is None or x >= _UNPRICED else x for x in gmb
    ]

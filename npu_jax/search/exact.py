"""The img2col cost model over *array-valued* tilings: jittable, vmappable, exact.

:func:`npu_jax.cost.conv.predict` reads one :class:`~npu_jax.mapping.conv.ConvPlan` whose sizes are
Python ints, so its loops over items and weight parts unroll at trace time. The search needs the
same figure for thousands of tilings at once, with the layer and the hardware as arrays too (so one
compiled program serves every layer and every hardware variant of a sweep). This module writes the
same schedule (:mod:`npu_jax.cost.schedule`, the same code) over traced scalars: ``lax.fori_loop`` over a core's items and over the
weight parts of an item (trip counts traced), vectorised over the cores. :func:`cycles` is then
``vmap``-ed over candidates. It equals ``predict`` exactly at every legal tiling (tested).

Three pytrees carry the inputs, each of arrays:

* :class:`Layer` -- the conv geometry (int32 scalars);
* :class:`~npu_jax.mapping.conv.ConvTiling` -- the img2col tiling itself (a pytree), each field an
  int32 array (a leading batch axis, or traced scalars under ``vmap``). The search's spaces tie
  ``l1_stages`` to ``l0_stages`` (:func:`tilings` builds them so; the cost reads both) and use
  every core (``cores=None``). The compact form is a (k, 8) int32 array of rows in :data:`ROW`
  order (:func:`from_rows`, :func:`rows_of`): one transfer instead of eight;
* :class:`Hw` -- :class:`~npu_jax.hw.costs.HwNumbers`: every rate, start-up, Cube size and capacity
  of a :class:`HardwareConfig` (float32 / int32), so gradients and sweeps can treat the hardware as
  data. Two figures stay static: ``num_cores`` and ``coupled`` (they change the program's shape,
  not a number in it).

The schedule is not written here: :func:`cycles` runs :func:`npu_jax.cost.conv.traced_cycles` (the
schedule that ``cost.conv.predict`` runs with numpy, over jax arrays; ``npu_jax.cost.cycles`` is its
public form for one layer and one ``HardwareConfig``), every instruction priced by
``npu_jax/hw/costs.py``. With ``fused``, the epilogue is :func:`epilogue` (bias + ReLU, as
``fusion.conv_relu`` with a bias and the default Policy).

Example:
    >>> import jax, npu_jax
    >>> from npu_jax.workload.conv import canonicalize
    >>> from npu_jax.search import exact
    >>> hw = npu_jax.presets.ascend910b()
    >>> g = canonicalize((1, 64, 56, 56), (64, 64, 3, 3), 1, 1)
    >>> t = exact.tilings_from([npu_jax.ConvTiling(ho=8, wo=56, n=64, cin1=4, k_l0=64,
    ...                         l1_stages=2, l0_stages=2)])  # a stacked ConvTiling
    >>> int(exact.batch_cycles(exact.layer_of(g), t, exact.hw_of(hw), hw.num_cores, hw.coupled)[0])
    ... # doctest: +SKIP
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from npu_jax.core.policy import Policy
from npu_jax.cost import schedule as sched
from npu_jax.cost.conv import UNPRICED, traced_cycles
from npu_jax.cost.conv import layer_of as _layer_ints
from npu_jax.hw.config import BUFFERS, FRACTAL_ROWS, L0C_ITEMSIZE, HardwareConfig
from npu_jax.hw.costs import HwNumbers, round_up
from npu_jax.hw.formats import itemsize
from npu_jax.mapping.conv import ConvTiling
from npu_jax.mapping.epilogue import EpiloguePlan, canonical_steps, split
from npu_jax.mapping.pytree import unchecked
from npu_jax.workload.conv import ConvGeometry

# the search tiles fp16 operands into fp16 outputs; C0 (one fractal row of the operand) is read from
# the hardware: every config the search accepts has the default fractal row (``check_hw``)
OPERAND = OUTPUT = "fp16"
C0 = HardwareConfig().c0(itemsize(OPERAND))
Layer = sched.Layer
Hw = HwNumbers
# the buffers' start alignments of the default HardwareConfig (``alignments(hw)`` for another)
ALIGN = tuple(HardwareConfig().alignment(b) for b in BUFFERS)


# the columns of a (k, 8) row of tilings; ``l0_stages`` is ``l1_stages`` (the search ties them)
ROW = ("ho", "wo", "n", "cin1", "k_l0", "weights_resident", "l1_stages", "cout_split")


def tilings(ho, wo, n, cin1, k_l0, resident, stages, cout_split) -> ConvTiling:
    """A :class:`ConvTiling` of the search (arrays or scalars, ``cores=None``), ``stages`` the depth
    of L1 and L0 together. Not checked here: :func:`legal` decides which entries are tilings."""
    return unchecked(
        ConvTiling,
        ho=ho,
        wo=wo,
        n=n,
        cin1=cin1,
        k_l0=k_l0,
        weights_resident=resident,
        l1_stages=stages,
        l0_stages=stages,
        cout_split=cout_split,
    )


def columns(t: ConvTiling) -> tuple:
    """The fields of ``t`` in :data:`ROW` order."""
    return tuple(getattr(t, f) for f in ROW)


def from_rows(rows) -> ConvTiling:
    """The stacked :class:`ConvTiling` of a (k, 8) array of rows (numpy or jax)."""
    return tilings(*(rows[:, i] for i in range(len(ROW))))


def rows_of(t: ConvTiling) -> np.ndarray:
    """The (k, 8) int32 rows of a stacked (or single) search tiling."""
    return np.stack([np.asarray(a).reshape(-1) for a in columns(t)], 1).astype(np.int32)


def layer_of(g: ConvGeometry) -> Layer:
    """The :class:`Layer` arrays (int32) of a canonical :class:`ConvGeometry` (a grouped one's dense
    view, with its super-groups: ``cost.conv.layer_of``)."""
    return Layer(*(jnp.int32(x) for x in _layer_ints(g, C0)))


def hw_of(hw: HardwareConfig) -> Hw:
    """The :class:`Hw` arrays of a :class:`HardwareConfig` (alignment is folded into the needs)."""
    check_hw(hw)
    return HwNumbers.arrays(hw)


def check_priced(fn: str, best: int, g: ConvGeometry, hw: HardwareConfig) -> None:
    """Refuse a search whose best tiling is :data:`~npu_jax.cost.conv.UNPRICED` (recency: none of the
    tilings it reached could be bounded), naming the fix."""
    if best >= UNPRICED:
        raise ValueError(
            f"{fn}: under l2_policy='recency' no tiling of {g.describe()} it reached is priced on {hw.name} "
            f"(each may re-read what the L2 let go). Use a larger l2_bytes, or hw.replace(l2_policy='smallest_first')."
        )


def alignments(hw: HardwareConfig) -> tuple:
    """Start alignment of each buffer (``BUFFERS`` order) of ``hw``."""
    return tuple(hw.alignment(b) for b in BUFFERS)


def check_hw(hw: HardwareConfig) -> None:
    """The search's spaces use the default fractal row (C0); reject hardware with another."""
    if hw.c0(itemsize(OPERAND)) != C0:
        raise ValueError(
            f"the tile search assumes C0 = {C0} {OPERAND} values per fractal row; {hw.name} has "
            f"cube_k_bytes={hw.cube_k_bytes} (C0 = {hw.c0(itemsize(OPERAND))}). Use "
            f"cube_k_bytes={HardwareConfig().cube_k_bytes} or cost such tilings with cost.conv.predict."
        )


@functools.cache
def epilogue(coupled: bool) -> tuple[EpiloguePlan, str]:
    """(EpiloguePlan, output format) of the fused kernel the search costs: bias + ReLU, as
    ``fusion.conv_relu`` with a bias and the default Policy (the Fixpipe on separated chips, UB
    vector steps on coupled ones)."""
    epi, rest, mid, _ = split(
        canonical_steps(["bias", "relu"]), HardwareConfig(coupled=coupled), Policy(), True
    )
    if rest:
        raise AssertionError(f"bias + ReLU should fuse whole, left {rest}")
    return epi, mid


def program(num_cores: int, coupled: bool, fused: bool) -> sched.Program:
    """The :class:`~npu_jax.cost.schedule.Program` of the img2col kernel the search tiles."""
    epi, out = epilogue(coupled) if fused else (None, OUTPUT)
    return sched.Program(num_cores, coupled, True, True, epi, OPERAND, out)


def tilings_from(tilings) -> ConvTiling:
    """Stack :class:`ConvTiling` s (img2col, ``l1_stages == l0_stages``, ``cores=None``) into one
    whose fields are int32 arrays (``weights_resident`` 0/1)."""
    rows = []
    for t in tilings:
        if t.l1_stages != t.l0_stages or t.cores is not None:
            raise ValueError(
                f"the search space ties l1_stages to l0_stages and uses every core "
                f"(cores=None); got {t}. Use l1_stages == l0_stages and cores=None."
            )
        rows.append([int(v) for v in columns(t)])
    a = np.asarray(rows, np.int32).reshape(-1, len(ROW))
    return from_rows(jnp.asarray(a))


def tiling_at(t: ConvTiling, i: int = 0) -> ConvTiling:
    """Entry ``i`` of a stacked search tiling as a checked :class:`ConvTiling` of Python ints."""
    v = dict(zip(ROW, (int(np.asarray(x).reshape(-1)[i]) for x in columns(t))))
    v["weights_resident"] = bool(v["weights_resident"])
    return ConvTiling(**v, l0_stages=v["l1_stages"])


# ---- capacities ----------------------------------------------------------------------------------
# Written against ``xp`` (jax.numpy inside the search's programs, numpy to enumerate a space): the
# same integer arithmetic either way.
def derived(L: Layer, t: ConvTiling, num_cores: int, xp=jnp) -> dict:
    """Loop counts and sizes of one tiling (the ConvPlan properties, for bound = layer)."""
    return sched.derived(L, t, C0, num_cores, xp)


def buffer_needs(
    L: Layer,
    t: ConvTiling,
    coupled: bool,
    num_cores: int,
    fused: bool = False,
    align=ALIGN,
    xp=jnp,
) -> dict:
    """Bytes each buffer needs (allocation order and alignment as ``ConvPlan.allocate``; with
    ``fused``, the bias + ReLU epilogue's buffers as ``mapping.epilogue.allocate_epilogue``)."""
    d = derived(L, t, num_cores, xp)
    a1, a0a, a0b, a0c, aub = align
    isz, osz = itemsize(OPERAND), itemsize(OUTPUT)
    s1, s0 = t.l1_stages, t.l0_stages
    x = round_up(d["c1"] * d["h_in"] * d["w_in"] * C0 * isz, a1) * s1
    w_res = round_up((d["cb_per"] * d["k_total"] + t.k_l0) * t.n * isz, a1)
    w_part = round_up(round_up(d["k_l1"], t.k_l0) * t.n * isz, a1) * s1
    need = dict(
        L1=x + xp.where(t.weights_resident > 0, w_res, w_part),
        L0A=round_up(d["m_t"] * t.k_l0 * isz, a0a) * s0,
        L0B=round_up(t.k_l0 * t.n * isz, a0b) * s0,
        L0C=round_up(d["m_t"] * t.n * L0C_ITEMSIZE, a0c),
    )
    zero = xp.zeros_like(need["L0C"])
    if fused:
        epi, out = epilogue(coupled)
        bias = d["cb_per"] * t.n * itemsize(epi.row_format)  # the core's Cout group's bias
    if fused and not coupled:  # Fixpipe: bias in L1; the activation needs no buffer
        need["L1"] = need["L1"] + round_up(bias, a1)
        need["UB"] = zero
    elif fused:  # UB: the vector tile, the bias, the output tile (VCast's destination)
        tile = d["m_t"] * t.n
        need["UB"] = round_up(tile * itemsize(epi.vector), aub) + round_up(bias, aub)
        if epi.needs_out_tile:
            need["UB"] = need["UB"] + round_up(tile * itemsize(out), aub)
    else:
        need["UB"] = round_up(d["m_t"] * t.n * osz, aub) if coupled else zero
    return need


def legal(
    L: Layer, t: ConvTiling, hw: Hw, num_cores: int, coupled: bool, fused: bool = False, xp=jnp, align=ALIGN
):
    """True where ``make_plan(g, "img2col", tiling, hw[, epi])`` would accept the tiling."""
    d = derived(L, t, num_cores, xp)
    need = buffer_needs(L, t, coupled, num_cores, fused, align, xp=xp)
    ok = (t.ho >= 1) & (t.wo >= 1) & (t.n >= FRACTAL_ROWS) & (t.n % FRACTAL_ROWS == 0) & (t.cin1 >= 1)
    ok &= (t.k_l0 >= C0) & (t.k_l0 % C0 == 0)
    ok &= ((t.l1_stages == 1) | (t.l1_stages == 2)) & ((t.l0_stages == 1) | (t.l0_stages == 2))
    ok &= (t.cout_split >= 1) & (t.cout_split <= num_cores) & (t.cout_split <= d["ncb"])
    ok &= (t.weights_resident == 0) | ((t.cin1 >= d["c1"]) & (L.sg == 1))  # one super-group's weights
    for buf, cap in (("L1", hw.l1), ("L0A", hw.l0a), ("L0B", hw.l0b), ("L0C", hw.l0c), ("UB", hw.ub)):
        ok &= need[buf] <= cap
    return ok


# ---- the schedule ----------------------------------------------------------------------------------
def cycles(L: Layer, t: ConvTiling, hw: Hw, num_cores: int, coupled: bool, fused: bool = False):
    """Cycles of one img2col tiling (scalars in, int32 scalar out): the schedule of
    :mod:`npu_jax.cost.schedule` (``cost.conv.predict``'s), with the items and weight parts as
    traced loops and the cores as a vector. ``fused``: the Conv + bias + ReLU kernel
    (``fusion.conv_relu`` with a bias)."""
    return traced_cycles(program(num_cores, coupled, fused), L, t, C0, hw, num_cores)


def batch_cycles(L: Layer, t: ConvTiling, hw: Hw, num_cores: int, coupled: bool, fused: bool = False):
    """:func:`cycles` for a stacked :class:`ConvTiling` (a leading axis on every field), jitted per
    (num_cores, coupled, fused)."""
    return _batch(num_cores, coupled, fused)(L, t, hw)


def rows_cycles(L: Layer, rows: jax.Array, hw: Hw, num_cores: int, coupled: bool, fused: bool = False):
    """:func:`batch_cycles` of tilings given as one (k, 8) int32 array (:data:`ROW` order):
    one transfer instead of eight."""
    return _rows(num_cores, coupled, fused)(L, rows, hw)


@functools.cache
def _rows(num_cores: int, coupled: bool, fused: bool):
    f = _batch(num_cores, coupled, fused)
    return jax.jit(lambda L, r, hw: f(L, from_rows(r), hw))


@functools.cache
def _batch(num_cores: int, coupled: bool, fused: bool):
    f = jax.vmap(lambda L, t, hw: cycles(L, t, hw, num_cores, coupled, fused), in_axes=(None, 0, None))
    return jax.jit(f)

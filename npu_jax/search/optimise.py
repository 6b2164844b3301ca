"""Gradient search over the relaxed cost model, then exact (raced) coordinate search, then the emulator.

:func:`tile_search` runs, for one layer, within a hard budget of cost-model evaluations (by default
1% of the layer's space, :func:`space.build`):

1. **Descent.** One start per discrete choice of the space -- (resident weights or not) x (core
   groups along Cout), all double-buffered (:func:`config_order`) -- each at a random point of the box of log sizes
   (:func:`relaxed.bounds`); ``steps`` optax steps (Adam by default; any
   ``optax.GradientTransformation``) on :func:`relaxed.objective`, all starts at once under
   ``vmap``, each step followed by the box projection. At most a quarter of the budget goes here;
   when that cuts the steps, the learning rate grows in proportion (the descent travels as far).
2. **Rounding.** Every ``round_every`` steps :func:`space.snap` turns each start into nearby
   points of the space; the new ones are costed by the exact schedule (:mod:`exact`), the best
   legal candidate so far is kept, and each start moves to its own best point.
3. **Race.** Successive halving over the discrete choices (:func:`race`): the best point of
   each of the 8 best (loop order, split) choices climbs the exact coordinate lines (below) on an
   equal share of half the evaluations left; the better half goes on, until one is left.
4. **Exact coordinate search.** From the ``width`` best points: the line of every coordinate
   through the point (each size over its balanced values, ``cin1`` with the nearest ``k_l0``,
   every split, every loop order x stages, the tile's two sides together one step each way) is
   costed exactly, nearest values first; each point moves to the best, and after a move first
   tries the same step again (a pattern move, :func:`pattern`), until none improves. A
   point that stops is replaced by the next best point found so far, then by random kicks of two
   coordinates around the best, until the budget is spent. This is what the smooth surrogate
   cannot do: see the load balance over the cores, which is a step function of the tile sizes.
5. **Emulator.** The ``finalists`` best distinct candidates are run on the emulator (timing-only
   ``npu_jax.conv2d``); the emulated cycles decide.

Every cost-model evaluation is counted: one relaxed evaluation per start per step, one exact one per
distinct tiling costed (points outside the space are never costed: membership is legality). Under
the L2's recency policy a tiling the exact model cannot bound is ``cost.conv.UNPRICED``, never kept.
"""

from __future__ import annotations

import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from npu_jax.core.buffers import DTYPES
from npu_jax.core.policy import Policy
from npu_jax.hw.config import FRACTAL_ROWS, HardwareConfig
from npu_jax.hw.costs import cdiv
from npu_jax.kernels.launch import run_plan
from npu_jax.mapping.conv import ConvTiling, make_plan
from npu_jax.search import exact, relaxed, space
from npu_jax.search.args import check_search_args
from npu_jax.search.local import (  # noqa: F401 (the coordinate search's names, re-exported)
    _best_of,
    _by_config,
    _interleave,
    _Ledger,
    coordinate_search,
    lines,
    pattern,
    race,
    repair,
)
from npu_jax.workload.conv import ConvGeometry, canonicalize

OBJECTIVES = ("cycles",)
BUDGET = 0.01  # default evaluation budget: this fraction of the layer's space
MIN_EVALS = 64  # ... but never fewer evaluations than this (small layers)
DESCENT_SHARE = 0.25  # at most this share of the budget goes to relaxed evaluations
ROUNDING_SHARE = 0.25  # ... and this share to costing the roundings (nearest points first)
RACE_SHARE = 0.5  # of what is left then, this share races the discrete choices' best points


@dataclasses.dataclass(frozen=True)
class SearchResult:
    """What :func:`tile_search` found.

    Attributes:
        tiling: the winner (a legal img2col :class:`ConvTiling`).
        model_cycles: the cost model's cycles for it (exact schedule).
        emulated_cycles: the emulator's cycles for it, or None if not verified.
        finalists: (tiling, model cycles, emulated cycles) of each candidate run on the emulator.
        history: one dict per round: ``phase`` ("descent" or "exact"), ``step``, ``best`` (best
            exact cycles so far), ``evals`` (evaluations so far), ``objective`` (mean relaxed
            objective over starts, descent rounds only).
        relaxed_evals, exact_evals: cost-model evaluations spent (see the module docstring).
        budget: the cap they were held to; space_size: the size of the layer's space.
        seconds: wall time of the search (model side), and ``verify_seconds`` of the emulator runs.
        fused: whether the Conv + bias + ReLU kernel was searched.
    """

    tiling: ConvTiling
    model_cycles: int
    emulated_cycles: int | None
    finalists: tuple
    history: tuple
    relaxed_evals: int
    exact_evals: int
    budget: int
    space_size: int
    seconds: float
    verify_seconds: float
    geometry: ConvGeometry
    hw_name: str
    fused: bool = False

    @property
    def evals(self) -> int:
        return self.relaxed_evals + self.exact_evals

    @property
    def agrees(self) -> bool:
        """Emulated cycles equal the model's (the model is exact; tests/test_cost_model.py)."""
        return self.emulated_cycles is None or self.emulated_cycles == self.model_cycles


@dataclasses.dataclass(frozen=True)
class ModelSearch:
    """The model side of a search: candidates best first, and what was spent.

    Attributes:
        rows: (k, 8) int32 tilings (``exact.ROW`` order), best first; cycles: (k,) their
        exact cycles; history: as :class:`SearchResult`; relaxed_evals, exact_evals, budget,
        space_size: as :class:`SearchResult`.
    """

    rows: np.ndarray
    cycles: np.ndarray
    history: list
    relaxed_evals: int
    exact_evals: int
    budget: int
    space_size: int

    @property
    def evals(self) -> int:
        return self.relaxed_evals + self.exact_evals


# ---- jitted pieces, one compile per (cores, coupled, fused, shape) -------------------------------
@functools.cache
def _descend(num_cores: int, coupled: bool, fused: bool, n_steps: int, opt: optax.GradientTransformation):
    """x (S, 6), state, disc (S, 3), L, hw -> x, state, mean objective per step (n_steps,)."""

    def obj(x, disc, L, hw):
        return relaxed.objective(x, disc, L, hw, num_cores, coupled, fused)

    grad = jax.vmap(jax.value_and_grad(obj), in_axes=(0, 0, None, None))
    proj = jax.vmap(lambda x, d, L: relaxed.project(x, d, L, num_cores), in_axes=(0, 0, None))

    def run(x, state, disc, L, hw):
        def body(carry, _):
            x, state = carry
            v, g = grad(x, disc, L, hw)
            g = jnp.where(jnp.isfinite(g), g, 0.0)
            upd, state = opt.update(g, state, x)
            x = proj(optax.apply_updates(x, upd), disc, L)
            return (x, state), jnp.mean(v)

        (x, state), vals = jax.lax.scan(body, (x, state), None, length=n_steps)
        return x, state, vals

    return jax.jit(run)


@functools.cache
def _snap(num_cores: int):
    """x (S, 6), disc (S, 3), L -> candidate tilings (S, NEAR) (membership is checked on the host)."""
    return jax.jit(jax.vmap(lambda x, d, L: space.snap(x, d, L, num_cores), in_axes=(0, 0, None)))


def exact_cycles(
    L: exact.Layer,
    t: ConvTiling,
    hw: exact.Hw,
    num_cores: int,
    coupled: bool,
    fused: bool = False,
    chunk: int = 8192,
) -> np.ndarray:
    """Exact cycles of a batch of tilings (numpy in, numpy out).

    The vectorised schedule runs its loops as long as the batch's longest row, so rows are
    grouped by their loop trips (items x weight parts, within a factor of 4) and each group is
    padded to a power-of-two size (a handful of compiles serve every batch)."""
    rows = np.stack([np.asarray(a, np.int64).reshape(-1) for a in exact.columns(t)], 1)
    n = rows.shape[0]
    out = np.empty(n, np.int64)
    if n == 0:
        return out
    Ln = exact.Layer(*(np.int64(v) for v in L))
    d = exact.derived(Ln, exact.from_rows(rows), num_cores, np)
    trips = np.maximum(d["tiles_per_core"] * d["cb_per"] * d["n_parts"], 1)
    order = np.argsort(trips, kind="stable")
    group = np.floor(np.log(trips[order]) / np.log(4.0)).astype(np.int64)
    cuts = np.nonzero(np.diff(group))[0] + 1
    for idx in np.split(order, cuts):
        for s in range(0, len(idx), chunk):
            part = rows[idx[s : s + chunk]].astype(np.int32)
            m = len(part)
            size = max(16, 1 << (m - 1).bit_length())
            part = np.concatenate([part, np.repeat(part[:1], size - m, 0)])
            out[idx[s : s + m]] = np.asarray(exact.rows_cycles(L, part, hw, num_cores, coupled, fused))[:m]
    return out


@functools.cache
def _adam(learning_rate: float) -> optax.GradientTransformation:
    """One Adam object per learning rate, so the jitted descent is compiled once for it."""
    return optax.adam(learning_rate)


def config_order(configs) -> list[tuple[int, int, int]]:
    """The descent's discrete choices (resident, stages, cout_split): every (loop order, split)
    with double buffering (it is optimal or within 0.3% of it on every ResNet-50 layer; the
    coordinate search still tries one stage), fewer Cout groups first."""
    two = sorted({(r, cs) for r, _, cs in configs}, key=lambda c: (c[1], -c[0]))
    return [(r, 2, cs) for r, cs in two]


def default_configs(L: exact.Layer, num_cores: int) -> list[tuple[int, int, int]]:
    """Every discrete choice a layer allows, without enumerating its space: splits up to the
    layer's Cout blocks (of the fractal's 16 rows)."""
    ncb = int(cdiv(int(L.k), FRACTAL_ROWS))
    res = (0, 1) if int(L.sg) == 1 else (0,)  # resident weights hold one super-group's
    cfg = [(r, st, cs) for r in res for st in (1, 2) for cs in space.splits_of(num_cores) if cs <= ncb]
    return config_order(cfg)


def init_points(key, L: exact.Layer, starts: int, num_cores: int, configs=None):
    """``starts`` uniform points in the log box, each with a discrete choice (``configs`` in turn,
    default :func:`default_configs`)."""
    configs = default_configs(L, num_cores) if configs is None else list(configs)
    lo, hi = relaxed.bounds(L, num_cores)
    u = jax.random.uniform(key, (starts, 6))
    disc = jnp.asarray([configs[i % len(configs)] for i in range(starts)], jnp.int32)
    return _project(num_cores)(lo + u * (hi - lo), disc, L), disc


@functools.cache
def _project(num_cores: int):
    return jax.jit(jax.vmap(lambda x, d, L: relaxed.project(x, d, L, num_cores), in_axes=(0, 0, None)))


def _rows(t: ConvTiling) -> np.ndarray:
    return exact.rows_of(t)


def _tilings(rows: np.ndarray) -> ConvTiling:
    return exact.from_rows(rows)


def _log_params(rows: np.ndarray) -> np.ndarray:
    return np.log(rows[:, [0, 1, 2, 3, 4, 7]].astype(np.float32))


def search_model(
    g: ConvGeometry,
    hw: HardwareConfig,
    *,
    fused: bool = False,
    starts: int | None = None,
    steps: int = 16,
    round_every: int = 8,
    seed: int = 0,
    learning_rate: float = 0.1,
    optimizer: optax.GradientTransformation | None = None,
    max_evals: int | None = None,
    budget: float = BUDGET,
    width: int = 1,
) -> ModelSearch:
    """The model side of :func:`tile_search` (steps 1-4 of the module docstring).

    ``max_evals`` caps the evaluations; by default it is ``budget`` x the space's size (at least
    :data:`MIN_EVALS`). ``starts`` defaults to one per discrete choice of the space; descent steps
    are cut so that relaxed evaluations take at most :data:`DESCENT_SHARE` of the cap."""
    if (starts is not None and starts < 1) or steps < 1 or round_every < 1 or width < 1:
        raise ValueError(
            f"starts, steps, round_every and width must be >= 1, got {starts}, {steps}, "
            f"{round_every}, {width}."
        )
    if not 0 < budget <= 1:
        raise ValueError(f"budget is a fraction of the space in (0, 1], got {budget}.")
    sp = space.build(g, hw, fused)
    if sp.size == 0:
        raise RuntimeError(
            f"{g.describe()} has no legal img2col tiling on {hw.name}"
            f"{' (fused)' if fused else ''}: every tile overflows a buffer."
        )
    cap = max_evals if max_evals is not None else max(MIN_EVALS, int(budget * sp.size))
    L, H = exact.layer_of(g), exact.hw_of(hw)
    nc, cp = hw.num_cores, hw.coupled
    configs = config_order(sp.discrete_configs())
    # starts in multiples of 8 and rounds of round_every steps: a handful of compiled shapes
    n_starts = -(-len(configs) // 8) * 8 if starts is None else starts
    n_starts = max(1, min(n_starts, int(DESCENT_SHARE * cap) // 8 * 8))
    n_steps = max(1, min(steps, int(DESCENT_SHARE * cap) // n_starts))
    if n_steps > round_every:
        n_steps -= n_steps % round_every
    rounds = -(-n_steps // round_every)
    # when the budget cuts the steps, each step goes further: the descent travels as far in log
    # space as ``steps`` steps at ``learning_rate`` would (else small layers hardly leave their starts)
    opt = optimizer if optimizer is not None else _adam(learning_rate * max(1.0, steps / n_steps))
    x, disc = init_points(jax.random.PRNGKey(seed), L, n_starts, nc, configs)
    state = opt.init(x)
    ledger = _Ledger(lambda r: exact_cycles(L, _tilings(r), H, nc, cp, fused), cap - n_starts * n_steps)
    history = []
    relaxed_evals = 0
    done = 0
    while done < n_steps:
        n = min(round_every, n_steps - done)
        x, state, vals = _descend(nc, cp, fused, n, opt)(x, state, disc, L, H)
        done += n
        relaxed_evals += n_starts * n
        near = _rows(_snap(nc)(x, disc, L)).reshape(n_starts, space.NEAR, 8)
        inside = sp.contains(near.reshape(-1, 8)).reshape(n_starts, space.NEAR)
        ledger.evaluate(
            _interleave([r[o] for r, o in zip(near, inside)] or [np.zeros((0, 8), np.int32)]),
            limit=int(ROUNDING_SHARE * cap) // rounds,
        )
        moved = np.asarray(x).copy()
        for i, (r, o) in enumerate(zip(near, inside)):
            _, best = _best_of(ledger, r[o])
            if best is not None:
                moved[i] = _log_params(np.asarray([best], np.int32))[0]
        x = jnp.asarray(moved)
        state = opt.init(x)
        history.append(
            dict(
                phase="descent",
                step=done,
                best=ledger.best()[0][1] if ledger.seen else None,
                evals=relaxed_evals + len(ledger.seen),
                objective=float(vals[-1]),
            )
        )
    if not ledger.seen:  # every rounding fell outside the space: start from its first point
        ledger.evaluate(exact.rows_of(sp.tilings)[:1])
    race(sp, ledger, RACE_SHARE, history, relaxed_evals, done)
    coordinate_search(sp, ledger, width, np.random.default_rng(seed), history, relaxed_evals, done)
    ranked = ledger.best(len(ledger.seen))
    return ModelSearch(
        rows=np.asarray([r for r, _ in ranked], np.int32),
        cycles=np.asarray([c for _, c in ranked], np.int64),
        history=history,
        relaxed_evals=relaxed_evals,
        exact_evals=len(ledger.seen),
        budget=cap,
        space_size=sp.size,
    )


def fused_epilogue(hw: HardwareConfig):
    """(EpiloguePlan, output format) of the fused kernel the search costs: :func:`exact.epilogue`."""
    return exact.epilogue(hw.coupled)


def plan_of(g: ConvGeometry, t: ConvTiling, hw: HardwareConfig, fused: bool = False):
    """The :class:`~npu_jax.mapping.conv.ConvPlan` a tiling of the search stands for."""
    if not fused:
        return make_plan(g, "img2col", t, hw)
    epi, mid = fused_epilogue(hw)
    return make_plan(g, "img2col", t, hw, "fp16", mid, epi=epi)


def emulate(g: ConvGeometry, t: ConvTiling, hw: HardwareConfig, fused: bool = False) -> int:
    """Cycles of the img2col kernel (with ``fused``: Conv + bias + ReLU) with tiling ``t`` on the
    emulator (timing-only run: the same program and costs, no data work)."""
    p = plan_of(g, t, hw, fused)
    x = jnp.zeros((g.n, g.c, g.h, g.w), DTYPES[p.operand])
    w = jnp.zeros((g.k, g.c // g.groups, g.kh, g.kw), DTYPES[p.operand])
    bias = jnp.zeros((g.k,), DTYPES[p.epi.bias_format]) if fused else None
    _, rep = run_plan(p, x, w, Policy(), bias=bias, move_data=False)
    return int(rep.cycles)


def tile_search(
    x_shape,
    w_shape,
    stride=1,
    padding=0,
    dilation=1,
    hw: HardwareConfig | None = None,
    *,
    fused: bool = False,
    objective: str = "cycles",
    starts: int | None = None,
    steps: int = 16,
    seed: int = 0,
    round_every: int = 8,
    finalists: int = 2,
    verify: bool = True,
    budget: float = BUDGET,
    max_evals: int | None = None,
    width: int = 1,
    learning_rate: float = 0.1,
    optimizer: optax.GradientTransformation | None = None,
    groups: int = 1,
) -> SearchResult:
    """Find the img2col tiling of a Conv2D: gradient descent on the relaxed cost model, a race
    of the discrete choices and exact coordinate search, the emulator's verdict (the module
    docstring has the steps).

    Args:
        x_shape: (N, C, H, W); w_shape: (K, C / groups, kh, kw); stride, padding, dilation, groups:
            as :func:`npu_jax.conv2d`.
        hw: hardware (default ``presets.ascend910b()``).
        fused: search the fused Conv + bias + ReLU kernel (``fusion.conv_relu`` with a bias):
            its epilogue's costs and buffers count (Fixpipe on the 910B; UB vector steps on
            coupled chips).
        objective: what to minimise; ``"cycles"``.
        starts: points descended at once (``vmap``); default one per (loop order, split) of the
            space, double-buffered, which they take in turn.
        steps: optax steps per start (cut to fit the budget); ``round_every``: steps between
            roundings to legal tilings.
        seed: PRNG seed of the starting points and the kicks.
        finalists: how many of the best candidates run on the emulator; 0 skips it (as does
            ``verify=False``).
        budget: evaluations as a fraction of the layer's space (default 1%, at least
            ``MIN_EVALS``); ``max_evals``: an absolute cap instead.
        width: points the exact coordinate search moves at once.
        learning_rate / optimizer: Adam's step in log space (scaled by ``steps`` / the steps the
            budget allows, when it allows fewer), or any optax transformation (used as given).

    Returns:
        A :class:`SearchResult`: tiling, model and emulated cycles, history, evaluations.

    Raises:
        ValueError: an unknown objective, bad counts or budget.

    Example:
        >>> import npu_jax
        >>> r = npu_jax.search.tile_search((1, 64, 14, 14), (64, 64, 3, 3), 1, 1,
        ...                                hw=npu_jax.presets.ascend910b(), finalists=1)
        >>> r.emulated_cycles == r.model_cycles and r.evals <= r.budget
        True
    """
    hw = check_search_args(
        "tile_search",
        hw=hw,
        fused=fused,
        objective=objective,
        objectives=OBJECTIVES,
        starts=starts,
        steps=steps,
        seed=seed,
        round_every=round_every,
        finalists=finalists,
        verify=verify,
        budget=budget,
        max_evals=max_evals,
        width=width,
        learning_rate=learning_rate,
        optimizer=optimizer,
    )
    g = canonicalize(x_shape, w_shape, stride, padding, dilation, groups)
    t0 = time.perf_counter()
    m = search_model(
        g,
        hw,
        fused=fused,
        starts=starts,
        steps=steps,
        round_every=round_every,
        seed=seed,
        learning_rate=learning_rate,
        optimizer=optimizer,
        max_evals=max_evals,
        budget=budget,
        width=width,
    )
    t1 = time.perf_counter()
    exact.check_priced("tile_search", int(m.cycles[0]), g, hw)
    fins = []
    if verify and finalists:
        for r, c in zip(m.rows[:finalists], m.cycles[:finalists]):
            t = exact.tiling_at(_tilings(r[None]))
            fins.append((t, int(c), emulate(g, t, hw, fused)))
        win = min(range(len(fins)), key=lambda i: (fins[i][2], i))
        tiling, model, emu = fins[win]
    else:
        tiling, model, emu = exact.tiling_at(_tilings(m.rows[:1])), int(m.cycles[0]), None
    return SearchResult(
        tiling=tiling,
        model_cycles=model,
        emulated_cycles=emu,
        finalists=tuple(fins),
        history=tuple(m.history),
        relaxed_evals=m.relaxed_evals,
        exact_evals=m.exact_evals,
        budget=m.budget,
        space_size=m.space_size,
        seconds=t1 - t0,
        verify_seconds=time.perf_counter() - t1,
        geometry=g,
        hw_name=hw.name,
        fused=fused,
    )

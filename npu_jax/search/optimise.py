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

Every cost-model evaluation is counted: one relaxed evaluation per start per step (value and
gradient), one exact evaluation per distinct tiling costed (points outside the space are never
costed: membership is the enumeration's legality check, not the cost model).
"""

from __future__ import annotations

import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from npu_jax.core.policy import Policy
from npu_jax.hw import presets
from npu_jax.hw.config import HardwareConfig
from npu_jax.hw.costs import cdiv
from npu_jax.kernels.conv2d import ConvTiling, make_plan, run_plan
from npu_jax.kernels.conv_geometry import ConvGeometry, canonicalize
from npu_jax.search import exact, relaxed, space

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
        rows: (k, 8) int32 tilings (``exact.Tilings`` field order), best first; cycles: (k,) their
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
    t: exact.Tilings,
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
    rows = np.stack([np.asarray(a, np.int64).reshape(-1) for a in t], 1)
    n = rows.shape[0]
    out = np.empty(n, np.int64)
    if n == 0:
        return out
    Ln = exact.Layer(*(np.int64(v) for v in L))
    d = exact.derived(Ln, exact.Tilings(*rows.T), num_cores, np)
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
    layer's Cout blocks of 16."""
    ncb = int(-(-int(L.k) // 16))
    return config_order(
        [(r, st, cs) for r in (0, 1) for st in (1, 2) for cs in space.splits_of(num_cores) if cs <= ncb]
    )


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


def _rows(t: exact.Tilings) -> np.ndarray:
    return np.stack([np.asarray(a).reshape(-1) for a in t], 1).astype(np.int32)


def _tilings(rows: np.ndarray) -> exact.Tilings:
    return exact.Tilings(*(rows[:, i] for i in range(8)))


def _log_params(rows: np.ndarray) -> np.ndarray:
    return np.log(rows[:, [0, 1, 2, 3, 4, 7]].astype(np.float32))


# ---- exact coordinate search ---------------------------------------------------------------------
def _nearest_first(values: np.ndarray, current: int) -> np.ndarray:
    """``values`` ordered by distance (in position) from the value nearest ``current``."""
    i = int(np.argmin(np.abs(np.log(values) - np.log(max(current, 1)))))
    return values[np.argsort(np.abs(np.arange(len(values)) - i), kind="stable")]


def repair(sp: space.Space, rows: np.ndarray) -> np.ndarray:
    """Rows outside the space moved back onto its boundary: the largest smaller ``k_l0`` that
    fits, else also the largest smaller Cout block. (A larger tile overflows L0A unless the Mmad
    gets shallower: without this the lines could not follow the capacity boundary, where the
    optima sit.) Rows that cannot be repaired stay as they are."""
    rows = rows.copy()
    bad = ~sp.contains(rows)
    ns = sp.axis_values("n")
    for cin1 in np.unique(rows[bad, 3]):
        idx = np.nonzero(bad & (rows[:, 3] == cin1))[0]
        ks = sp.axis_values("k_l0", int(cin1))
        # (rows, n, k) grid of candidates, ranked by n then k (largest first)
        grid = np.broadcast_to(rows[idx, None, None, :], (len(idx), len(ns), len(ks), 8)).copy()
        grid[..., 2] = ns[None, :, None]
        grid[..., 4] = ks[None, None, :]
        ok = sp.contains(grid.reshape(-1, 8)).reshape(grid.shape[:3])
        ok &= (grid[..., 2] <= rows[idx, None, None, 2]) & (grid[..., 4] <= rows[idx, None, None, 4])
        rank = np.where(
            ok, np.arange(len(ns))[None, :, None] * len(ks) + np.arange(len(ks))[None, None, :], -1
        )
        best = rank.reshape(len(idx), -1).argmax(1)
        fixed = ok.reshape(len(idx), -1)[np.arange(len(idx)), best]
        rows[idx[fixed]] = grid.reshape(len(idx), -1, 8)[np.arange(len(idx)), best][fixed]
    return rows


def _widest(sp: space.Space, rows: np.ndarray, col: int) -> np.ndarray:
    """Each row with column ``col`` (0: ho, 1: wo) at its largest value that is in the space
    after :func:`repair` (rows where none is stay as they are)."""
    vals = sp.axis_values("ho" if col == 0 else "wo")[::-1]
    grid = np.repeat(rows[:, None, :], len(vals), 1)
    grid[..., col] = vals[None, :]
    flat = repair(sp, grid.reshape(-1, 8))
    ok = sp.contains(flat).reshape(len(rows), len(vals))
    first = ok.argmax(1)
    out = rows.copy()
    has = ok.any(1)
    out[has] = flat.reshape(len(rows), len(vals), 8)[np.nonzero(has)[0], first[has]]
    return out


def lines(sp: space.Space, p: np.ndarray) -> list[np.ndarray]:
    """The coordinate lines through point ``p`` (one (k, 8) array each, nearest values first):
    ho; wo; n; k_l0; cin1 (streamed weights) with the k_l0 nearest the current one; Cout block
    and split together; every (loop order, stages) pair; and the tile's two sides together, one
    balanced step each way. Every line but k_l0's is :func:`repair` ed onto the space's
    boundary; rows may still fall outside it: check them with :meth:`space.Space.contains`."""
    out = []
    for col, dim in ((0, "ho"), (1, "wo"), (2, "n"), (4, "k_l0")):
        vals = _nearest_first(sp.axis_values(dim, int(p[3])), int(p[col]))
        r = np.repeat(p[None], len(vals), 0)
        r[:, col] = vals
        out.append(r)
    c1 = cdiv(sp.g.c, exact.C0)
    cins = _nearest_first(sp.axis_values("cin1"), int(p[3]))
    if len(cins) > 1 or p[5] == 0:  # streamed weight parts (from resident weights too)
        r = np.repeat(p[None], len(cins), 0)
        r[:, 3] = cins
        r[:, 5] = 0
        r[:, 4] = [_nearest_first(sp.axis_values("k_l0", int(c)), int(p[4]))[0] for c in cins]
        out.append(r)
        # ... each with the widest (or tallest) tile that the L1 it frees allows
        for col in (1, 0):
            out.append(_widest(sp, r, col))
    # Cout block and split together (a core's share of Cout, cb_per x n, is what balances the
    # cores): every pair, nearest first; the split alone is the pair's first row in each block
    ns = sp.axis_values("n")
    splits = np.asarray(space.splits(sp.hw))
    i_n, i_s = int(np.searchsorted(ns, p[2])), int(np.searchsorted(splits, p[7]))
    pairs = sorted(
        (abs(a - i_n) + abs(b - i_s), abs(b - i_s), a, b) for a in range(len(ns)) for b in range(len(splits))
    )
    r = np.repeat(p[None], len(pairs), 0)
    r[:, 2] = [ns[a] for *_, a, _ in pairs]
    r[:, 7] = [splits[b] for *_, b in pairs]
    out.append(r)
    disc = []
    for res in (0, 1):
        for st in (1, 2):
            q = p.copy()
            q[5], q[6] = res, st
            if res and q[3] != c1:  # resident weights need the whole reduction in one part
                q[3] = c1
                q[4] = _nearest_first(sp.axis_values("k_l0", c1), int(p[4]))[0]
            disc.append(q)
    out.append(np.asarray(disc))
    hos, wos = sp.axis_values("ho"), sp.axis_values("wo")
    # the tile's shape at (about) the same area: each ho with the wo nearest area / ho
    r = np.repeat(p[None], len(hos), 0)
    r[:, 0] = _nearest_first(hos, int(p[0]))
    r[:, 1] = [wos[np.argmin(np.abs(np.log(wos) - np.log(p[0] * p[1] / h)))] for h in r[:, 0]]
    out.append(r)
    ih, iw = int(np.searchsorted(hos, p[0])), int(np.searchsorted(wos, p[1]))
    diag = []
    for dh in (-1, 1):
        for dw in (-1, 1):
            if 0 <= ih + dh < len(hos) and 0 <= iw + dw < len(wos):
                q = p.copy()
                q[0], q[1] = hos[ih + dh], wos[iw + dw]
                diag.append(q)
    if diag:
        out.append(np.asarray(diag))
    return [ln if i == 3 else repair(sp, ln) for i, ln in enumerate(out)]  # 3: k_l0's line


def _interleave(arrays: list[np.ndarray]) -> np.ndarray:
    """Rows of several arrays, first rows first (so a cut keeps the nearest of every line)."""
    n = max(len(a) for a in arrays)
    picks = [a[i] for i in range(n) for a in arrays if i < len(a)]
    return np.asarray(picks, np.int32).reshape(-1, 8)


class _Ledger:
    """Exact cycles of every tiling costed so far, and the evaluations left."""

    def __init__(self, cost, budget: int):
        self.cost, self.left, self.seen = cost, budget, {}

    def evaluate(self, rows: np.ndarray, limit: int | None = None) -> None:
        """Cost the rows not seen yet, in order, up to the budget (and ``limit``)."""
        new = list(dict.fromkeys(tuple(r) for r in rows.tolist() if tuple(r) not in self.seen))
        new = new[: max(0, self.left if limit is None else min(limit, self.left))]
        if new:
            cyc = self.cost(np.asarray(new, np.int32))
            self.seen.update(zip(new, cyc.tolist()))
            self.left -= len(new)

    def best(self, k: int = 1) -> list[tuple[tuple, int]]:
        return sorted(self.seen.items(), key=lambda kv: (kv[1], kv[0]))[:k]


def pattern(sp: space.Space, old: np.ndarray, new: np.ndarray, steps=(1, 2)) -> np.ndarray:
    """Pattern moves (Hooke and Jeeves): ``new`` + s x (``new`` - ``old``) in axis positions, for
    each ``s`` in ``steps``; the discrete coordinates (cin1, loop order, stages) stay as in ``new``
    (k_l0 moves only when cin1 did not change). :func:`repair` ed; rows outside the space dropped."""
    cols = (0, 1, 2, 4, 7)  # ho, wo, n, k_l0, cout_split
    axes = [
        sp.axis_values("ho"),
        sp.axis_values("wo"),
        sp.axis_values("n"),
        sp.axis_values("k_l0", int(new[3])),
        np.asarray(space.splits(sp.hw)),
    ]
    a = np.asarray([np.searchsorted(ax, old[c]) for c, ax in zip(cols, axes)])
    b = np.asarray([np.searchsorted(ax, new[c]) for c, ax in zip(cols, axes)])
    if old[3] != new[3]:
        a[3] = b[3]
    out = []
    for s in steps:
        q = new.copy()
        for j, (col, ax) in enumerate(zip(cols, axes)):
            q[col] = ax[int(np.clip(b[j] + s * (b[j] - a[j]), 0, len(ax) - 1))]
        out.append(q)
    rows = repair(sp, np.asarray(out, np.int32))
    return rows[sp.contains(rows) & (rows != new).any(1)]


def _best_of(ledger: _Ledger, rows: np.ndarray) -> tuple[float, tuple | None]:
    known = [(ledger.seen[tuple(r)], tuple(r)) for r in rows.tolist() if tuple(r) in ledger.seen]
    return min(known, default=(np.inf, None))


def _move(sp: space.Space, ledger: _Ledger, c: np.ndarray, k: int, came, reach: int):
    """One move of a centre ``c``: the pattern move if it has just moved from ``came`` (taken if
    better), else ``k`` values along each line (:func:`lines`). Returns the next (centre, reach,
    came); a centre that found nothing better along ``reach`` values looks along the whole lines
    next (reach 10**6); one that found nothing there returns None."""
    here = ledger.seen.get(tuple(c), np.inf)  # (a kicked centre may be unpriced)
    if came is not None:
        pat = pattern(sp, came, c)
        ledger.evaluate(pat)
        cost, best = _best_of(ledger, pat)
        if cost < here:
            return np.asarray(best, np.int32), reach, c
    ls = [ln[sp.contains(ln)][:k] for ln in lines(sp, c)]
    cand = _interleave([ln for ln in ls if len(ln)] or [c[None]])
    ledger.evaluate(cand)
    cost, best = _best_of(ledger, cand)
    if cost < here:
        return np.asarray(best, np.int32), reach, c
    return (c, 10**6, None) if k == reach else None


def _by_config(ledger: _Ledger) -> list[np.ndarray]:
    """The best point of each discrete choice (loop order, split) costed so far, best first."""
    by_config = {}
    for r, _ in ledger.best(len(ledger.seen)):
        by_config.setdefault((r[5], r[7]), r)
    return [np.asarray(r, np.int32) for r in by_config.values()]


def race(
    sp: space.Space,
    ledger: _Ledger,
    share: float,
    history: list,
    relaxed_evals: int,
    step: int,
    arms: int = 8,
    reach: int = 5,
) -> None:
    """Successive halving over the discrete choices (Jamieson and Talwalkar 2016): the best point
    of each of the ``arms`` best (loop order, split) choices climbs (:func:`_move`) on an equal
    slice of the round's evaluations; the better half go on to the next round, until one is left.
    ``share`` of the evaluations left are spent here, in equal rounds. The descent ranks the
    choices by a few rounded points each; racing them on local searches is what stops one bad
    rounding from hiding the best basin."""
    starts = _by_config(ledger)[:arms]
    if len(starts) < 2:
        return
    rounds = int(np.ceil(np.log2(len(starts))))
    per_round = int(share * ledger.left) // rounds
    active = [dict(c=c, k=reach, came=None, done=False) for c in starts]
    for _ in range(rounds):
        slice_ = per_round // len(active)
        for arm in active:
            left, share_ = ledger.left, min(ledger.left, slice_)
            ledger.left = share_  # the arm's slice; what it leaves goes back
            while ledger.left > 0 and not arm["done"]:
                nxt = _move(sp, ledger, arm["c"], arm["k"], arm["came"], reach)
                if nxt is None:
                    arm["done"] = True
                else:
                    arm["c"], arm["k"], arm["came"] = nxt
            ledger.left = left - (share_ - ledger.left)
            arm["best"] = ledger.seen.get(tuple(arm["c"]), np.inf)
            history.append(
                dict(
                    phase="exact",
                    step=step,
                    best=ledger.best()[0][1],
                    evals=relaxed_evals + len(ledger.seen),
                    objective=None,
                )
            )
        active = sorted(active, key=lambda a: a["best"])[: max(1, len(active) // 2)]
        if len(active) == 1:
            break


def coordinate_search(
    sp: space.Space,
    ledger: _Ledger,
    width: int,
    rng: np.random.Generator,
    history: list,
    relaxed_evals: int,
    step: int,
    reach: int = 5,
) -> None:
    """Step 4 of the module docstring, until the ledger's budget is spent or nothing is left.

    A centre moves as :func:`_move` says (pattern move, then ``reach`` values along each line,
    then the whole lines); when it stops it gives way to the best point of another discrete
    choice, then to the next best points found, then to random kicks around the best."""
    queue = _by_config(ledger)
    # the two loop orders are two basins (one part of resident weights vs streamed parts with a
    # larger spatial tile); the coordinate lines rarely cross from one to the other, so the best
    # point of the other loop order comes second
    other = [i for i, c in enumerate(queue) if c[5] != queue[0][5]]
    if other:
        queue.insert(1, queue.pop(other[0]))
    centres = [(c, reach, None) for c in queue[:width]]  # (point, reach, where it came from)
    queue = queue[width:]
    used = {tuple(c) for c, _, _ in centres}
    stalls = 0
    while ledger.left > 0 and centres and stalls < 8:
        before = len(ledger.seen)
        moved = [m for m in (_move(sp, ledger, c, k, came, reach) for c, k, came in centres) if m is not None]
        fresh = [c for c in queue if tuple(c) not in used]
        fresh += [np.asarray(r, np.int32) for r, _ in ledger.best(len(ledger.seen)) if r not in used]
        while len(moved) < len(centres) and fresh:
            moved.append((fresh.pop(0), reach, None))
        while len(moved) < len(centres):
            moved.append((_kick(sp, np.asarray(ledger.best()[0][0], np.int32), rng), reach, None))
        for c, _, _ in moved:
            used.add(tuple(c))
        centres = moved
        stalls = stalls + 1 if len(ledger.seen) == before else 0
        history.append(
            dict(
                phase="exact",
                step=step,
                best=ledger.best()[0][1],
                evals=relaxed_evals + len(ledger.seen),
                objective=None,
            )
        )


def _kick(sp: space.Space, p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random point of the space that differs from ``p`` in two coordinates (or ``p``)."""
    for _ in range(32):
        q = p.copy()
        ls = lines(sp, p)
        for i in rng.choice(len(ls), 2, replace=False):
            q2 = ls[i][rng.integers(len(ls[i]))]
            changed = q2 != p
            q[changed] = q2[changed]
        if sp.contains(q[None])[0] and tuple(q) != tuple(p):
            return q
    return p


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
        ledger.evaluate(np.stack(sp.tilings, 1)[:1])
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
    """The :class:`~npu_jax.kernels.conv2d.ConvPlan` a tiling of the search stands for."""
    if not fused:
        return make_plan(g, "img2col", t, hw)
    epi, mid = fused_epilogue(hw)
    return make_plan(g, "img2col", t, hw, "fp16", mid, epi=epi)


def emulate(g: ConvGeometry, t: ConvTiling, hw: HardwareConfig, fused: bool = False) -> int:
    """Cycles of the img2col kernel (with ``fused``: Conv + bias + ReLU) with tiling ``t`` on the
    emulator (timing-only run: the same program and costs, no data work)."""
    p = plan_of(g, t, hw, fused)
    x = jnp.zeros((g.n, g.c, g.h, g.w), jnp.float16)
    w = jnp.zeros((g.k, g.c, g.kh, g.kw), jnp.float16)
    bias = jnp.zeros((g.k,), jnp.float32) if fused else None
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
) -> SearchResult:
    """Find the img2col tiling of a Conv2D: gradient descent on the relaxed cost model, a race
    of the discrete choices and exact coordinate search, the emulator's verdict (the module
    docstring has the steps).

    Args:
        x_shape: (N, C, H, W); w_shape: (K, C, kh, kw); stride, padding, dilation: as
            :func:`npu_jax.conv2d`.
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
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}.")
    if not isinstance(fused, bool):
        raise TypeError(f"fused must be True or False, got {fused!r}.")
    hw = presets.ascend910b() if hw is None else hw
    if finalists < 0:
        raise ValueError(f"finalists must be >= 0, got {finalists}.")
    g = canonicalize(x_shape, w_shape, stride, padding, dilation)
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

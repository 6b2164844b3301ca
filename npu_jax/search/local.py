"""Exact coordinate search over the space of :mod:`space`: the lines through a point, pattern moves,
the race of the discrete choices, and the ledger that counts every exact evaluation (steps 3-4 of
:mod:`optimise`'s docstring)."""

from __future__ import annotations

import numpy as np

from npu_jax.hw.config import FRACTAL_ROWS
from npu_jax.hw.costs import cdiv
from npu_jax.search import exact, space


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
    c1 = cdiv(sp.g.dense_view(exact.C0, FRACTAL_ROWS).c, exact.C0)
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

"""Gradient search over the relaxed cost model: optax, many starts at once, exact rounding, emulator.

:func:`tile_search` runs, for one layer:

1. ``starts`` random points in the box of log sizes (:func:`relaxed.bounds`), each with one of
   the discrete choices (resident weights or not x 1 or 2 stages), enumerated round-robin;
2. ``steps`` optax steps (Adam by default; any ``optax.GradientTransformation``) on
   :func:`relaxed.objective`, all starts at once under ``vmap``, each step followed by the box
   projection;
3. every ``round_every`` steps, the rounding: :func:`space.snap` turns each start into nearby legal
   tilings, the new ones are costed by the exact schedule (:mod:`exact`) and the best legal
   candidate so far is kept;
4. the ``finalists`` best distinct candidates are run on the emulator (timing-only
   ``npu_jax.conv2d``); the emulated cycles decide.

Every cost-model evaluation is counted: one relaxed evaluation per start per step (value and
gradient), one exact evaluation per distinct legal tiling costed. ``max_evals`` caps the total.
"""

from __future__ import annotations

import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from npu_jax.hw.config import HardwareConfig
from npu_jax.kernels.conv2d import ConvTiling
from npu_jax.kernels.conv_geometry import ConvGeometry, canonicalize
from npu_jax.search import exact, relaxed, space

# (resident, stages) of each start, cycled: every combination appears in any 8 consecutive starts,
# double buffering three times as often as single (it wins on every ResNet-50 layer)
DISCRETE = ((0, 2), (1, 2), (0, 2), (1, 2), (0, 1), (1, 1), (0, 2), (1, 2))
OBJECTIVES = ("cycles",)


@dataclasses.dataclass(frozen=True)
class SearchResult:
    """What :func:`tile_search` found.

    Attributes:
        tiling: the winner (a legal img2col :class:`ConvTiling`).
        model_cycles: the cost model's cycles for it (exact schedule).
        emulated_cycles: the emulator's cycles for it (timing-only run), or None if not verified.
        finalists: (tiling, model cycles, emulated cycles) of each candidate run on the emulator.
        history: one dict per rounding: ``step``, ``best`` (best exact cycles so far), ``evals``
            (evaluations so far), ``objective`` (mean relaxed objective over starts at that step).
        relaxed_evals, exact_evals: cost-model evaluations spent (see the module docstring).
        seconds: wall time of the search (model side), and ``verify_seconds`` of the emulator runs.
    """

    tiling: ConvTiling
    model_cycles: int
    emulated_cycles: int | None
    finalists: tuple
    history: tuple
    relaxed_evals: int
    exact_evals: int
    seconds: float
    verify_seconds: float
    geometry: ConvGeometry
    hw_name: str

    @property
    def evals(self) -> int:
        return self.relaxed_evals + self.exact_evals

    @property
    def agrees(self) -> bool:
        """Emulated cycles equal the model's (the model is exact; tests/test_cost_model.py)."""
        return self.emulated_cycles is None or self.emulated_cycles == self.model_cycles


# ---- jitted pieces, one compile per (cores, coupled, shape) --------------------------------------
@functools.cache
def _descend(num_cores: int, coupled: bool, n_steps: int, opt: optax.GradientTransformation):
    """x (S, 6), state, disc (S, 2), L, hw -> x, state, mean objective per step (n_steps,)."""

    def obj(x, disc, L, hw):
        return relaxed.objective(x, disc, L, hw, num_cores, coupled)

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
def _snap(num_cores: int, coupled: bool):
    """x (S, 6), disc (S, 2), L, hw -> candidate tilings (S, 12) and their legality (S, 12)."""

    def one(x, disc, L, hw):
        t = space.snap(x, disc, L, num_cores)
        ok = jax.vmap(lambda tt: exact.legal(L, tt, hw, num_cores, coupled) & space.in_space(L, tt))(t)
        return t, ok

    return jax.jit(jax.vmap(one, in_axes=(0, 0, None, None)))


def exact_cycles(L: exact.Layer, t: exact.Tilings, hw: exact.Hw, num_cores: int, coupled: bool,
                 chunk: int = 8192) -> np.ndarray:
    """Exact cycles of a batch of tilings (numpy in, numpy out), padded to power-of-two buckets so a
    handful of compiles serve every batch size."""
    n = int(np.asarray(t.ho).shape[0])
    out = np.empty(n, np.int64)
    for s in range(0, n, chunk):
        part = [np.asarray(a[s:s + chunk]) for a in t]
        m = len(part[0])
        size = max(16, 1 << (m - 1).bit_length())
        padded = exact.Tilings(*(jnp.asarray(np.concatenate([a, np.repeat(a[:1], size - m)])) for a in part))
        out[s:s + m] = np.asarray(exact.batch_cycles(L, padded, hw, num_cores, coupled))[:m]
    return out


@functools.cache
def _adam(learning_rate: float) -> optax.GradientTransformation:
    """One Adam object per learning rate, so the jitted descent is compiled once for it."""
    return optax.adam(learning_rate)


def init_points(key, L: exact.Layer, starts: int, num_cores: int):
    """``starts`` uniform points in the log box and their discrete choices (round-robin)."""
    lo, hi = relaxed.bounds(L, num_cores)
    u = jax.random.uniform(key, (starts, 6))
    disc = jnp.asarray([DISCRETE[i % len(DISCRETE)] for i in range(starts)], jnp.int32)
    x = lo + u * (hi - lo)
    x = jax.vmap(lambda x, d: relaxed.project(x, d, L, num_cores))(x, disc)
    return x, disc


def _rows(t: exact.Tilings) -> np.ndarray:
    return np.stack([np.asarray(a).reshape(-1) for a in t], 1).astype(np.int32)


def _tilings(rows: np.ndarray) -> exact.Tilings:
    return exact.Tilings(*(rows[:, i] for i in range(8)))


def search_model(g: ConvGeometry, hw: HardwareConfig, *, starts: int = 16, steps: int = 24,
                 round_every: int = 8, seed: int = 0, learning_rate: float = 0.1, polish: int = 8,
                 optimizer: optax.GradientTransformation | None = None, max_evals: int | None = None):
    """The model side of :func:`tile_search`.

    Returns (candidate rows (k, 8) best first, their exact cycles, history, relaxed evals, exact
    evals). Each rounding costs the new legal points near every start exactly and moves the start
    to the best of them (the descent resumes from a legal point, with a fresh optimiser state);
    ``polish`` rounds of the same neighbourhood around the best few finish the search."""
    if starts < 1 or steps < 1 or round_every < 1:
        raise ValueError(f"starts, steps and round_every must be >= 1, got {starts}, {steps}, {round_every}.")
    opt = optimizer if optimizer is not None else _adam(learning_rate)
    L, H = exact.layer_of(g), exact.hw_of(hw)
    nc, cp = hw.num_cores, hw.coupled
    x, disc = init_points(jax.random.PRNGKey(seed), L, starts, nc)
    state = opt.init(x)
    seen: dict[tuple, int] = {}
    history = []
    relaxed_evals = 0
    done = 0

    def left():
        return None if max_evals is None else max_evals - relaxed_evals - len(seen)

    def cost_near(x, disc):
        """Exact cycles of the unseen legal points near each row of x; each row's best point."""
        t, ok = _snap(nc, cp)(x, disc, L, H)
        rows = _rows(t).reshape(x.shape[0], space.NEAR, 8)
        ok = np.asarray(ok)
        new = sorted({tuple(r) for r in rows[ok].tolist()} - seen.keys())
        if left() is not None:
            new = new[: max(0, left())]
        if new:
            cyc = exact_cycles(L, _tilings(np.asarray(new, np.int32)), H, nc, cp)
            seen.update(zip(new, cyc.tolist()))
        best = []
        for r, o in zip(rows, ok):
            known = [(seen[tuple(q)], tuple(q)) for q in r[o].tolist() if tuple(q) in seen]
            best.append(min(known) if known else None)
        return best

    while done < steps:
        n = min(round_every, steps - done)
        if left() is not None and left() < starts * n:
            break
        x, state, vals = _descend(nc, cp, n, opt)(x, state, disc, L, H)
        done += n
        relaxed_evals += starts * n
        best = cost_near(x, disc)
        moved = np.asarray(x).copy()
        for i, b in enumerate(best):
            if b is not None:
                moved[i] = np.log(np.asarray(b[1], np.float32)[[0, 1, 2, 3, 4, 7]])
        x = jnp.asarray(moved)
        state = opt.init(x)
        history.append(dict(step=done, best=min(seen.values()) if seen else None,
                            evals=relaxed_evals + len(seen), objective=float(vals[-1])))
    for _ in range(polish):
        if not seen or (left() is not None and left() <= 0):
            break
        top = sorted(seen.items(), key=lambda kv: kv[1])[:4]
        pts = np.asarray([r for r, _ in top], np.int32)
        before = len(seen)
        cost_near(jnp.log(jnp.asarray(pts[:, [0, 1, 2, 3, 4, 7]], jnp.float32)), jnp.asarray(pts[:, [5, 6]]))
        history.append(dict(step=done, best=min(seen.values()), evals=relaxed_evals + len(seen), objective=None))
        if len(seen) == before:
            break
    if not seen:
        raise RuntimeError(f"the search found no legal tiling of {g.describe()} on {hw.name} in "
                           f"{steps} steps x {starts} starts (max_evals={max_evals}); raise them.")
    ranked = sorted(seen.items(), key=lambda kv: kv[1])
    return (np.asarray([r for r, _ in ranked], np.int32), np.asarray([c for _, c in ranked]), history,
            relaxed_evals, len(seen))


def emulate(g: ConvGeometry, t: ConvTiling, hw: HardwareConfig) -> int:
    """Cycles of the img2col kernel with tiling ``t`` on the emulator (timing-only run)."""
    from npu_jax.kernels.conv2d import conv2d

    x = jnp.zeros((g.n, g.c, g.h, g.w), jnp.float16)
    w = jnp.zeros((g.k, g.c, g.kh, g.kw), jnp.float16)
    pads = ((g.pads[0], g.pads[1]), (g.pads[2], g.pads[3]))
    _, rep = conv2d(x, w, g.stride, pads, g.dilation, strategy="img2col", hw=hw, tiling=t, timing_only=True)
    return int(rep.cycles)


def tile_search(x_shape, w_shape, stride=1, padding=0, dilation=1, hw: HardwareConfig | None = None, *,
                fused: bool = False, objective: str = "cycles", starts: int = 16, steps: int = 24,
                seed: int = 0, round_every: int = 8, finalists: int = 2, verify: bool = True,
                max_evals: int | None = None, learning_rate: float = 0.1,
                optimizer: optax.GradientTransformation | None = None) -> SearchResult:
    """Find the img2col tiling of a Conv2D by gradient descent on the relaxed cost model.

    Args:
        x_shape: (N, C, H, W); w_shape: (K, C, kh, kw); stride, padding, dilation: as
            :func:`npu_jax.conv2d`.
        hw: hardware (default ``presets.ascend910b()``).
        fused: search the fused Conv+ReLU kernel (needs fusion's epilogue cost; see below).
        objective: what to minimise; ``"cycles"``.
        starts: points optimised at once (``vmap``); they take the discrete choices (resident
            weights, stages) round-robin, so use a multiple of 4.
        steps: optax steps per start; ``round_every``: steps between roundings to legal tilings.
        seed: PRNG seed of the starting points.
        finalists: how many of the best candidates run on the emulator; 0 skips it (as does
            ``verify=False``).
        max_evals: cap on cost-model evaluations (relaxed + exact), or None.
        learning_rate / optimizer: Adam's step in log space, or any optax transformation.

    Returns:
        A :class:`SearchResult`: tiling, model and emulated cycles, history, evaluations.

    Raises:
        ValueError: an unknown objective, fused=True (not wired yet: see _check_fused), bad counts.

    Example:
        >>> import npu_jax
        >>> r = npu_jax.search.tile_search((1, 64, 14, 14), (64, 64, 3, 3), 1, 1,
        ...                                hw=npu_jax.presets.ascend910b(), starts=8, steps=16)
        >>> r.emulated_cycles == r.model_cycles
        True
    """
    from npu_jax.hw import presets

    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}.")
    if fused:
        _check_fused()
    hw = presets.ascend910b() if hw is None else hw
    if finalists < 0:
        raise ValueError(f"finalists must be >= 0, got {finalists}.")
    g = canonicalize(x_shape, w_shape, stride, padding, dilation)
    t0 = time.perf_counter()
    rows, cyc, history, n_rel, n_ex = search_model(
        g, hw, starts=starts, steps=steps, round_every=round_every, seed=seed, learning_rate=learning_rate,
        optimizer=optimizer, max_evals=max_evals)
    t1 = time.perf_counter()
    fins = []
    if verify and finalists:
        for r, c in zip(rows[:finalists], cyc[:finalists]):
            t = exact.tiling_at(_tilings(r[None]))
            fins.append((t, int(c), emulate(g, t, hw)))
        win = min(range(len(fins)), key=lambda i: (fins[i][2], i))
        tiling, model, emu = fins[win]
    else:
        tiling, model, emu = exact.tiling_at(_tilings(rows[:1])), int(cyc[0]), None
    return SearchResult(tiling=tiling, model_cycles=model, emulated_cycles=emu, finalists=tuple(fins),
                        history=tuple(history), relaxed_evals=n_rel, exact_evals=n_ex, seconds=t1 - t0,
                        verify_seconds=time.perf_counter() - t1, geometry=g, hw_name=hw.name)


def _check_fused():
    raise ValueError("fused=True: the search's array-valued model (npu_jax/search/exact.py, "
                     "epilogue_costs) does not yet mirror fusion's epilogue costs (bias, ReLU, UB vector "
                     "ops) in npu_jax.cost.conv; use fused=False.")

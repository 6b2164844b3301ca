"""Baselines for the tile search, on the same space and the same exact model.

* :func:`exhaustive` costs every legal point of the space (:func:`space.build`) with the
  vectorised exact schedule: the optimum, at the price of the whole space in evaluations.
* :func:`random_search` costs ``evals`` distinct points drawn uniformly from the space.
* :func:`chooser` is the Conv2D issue's grid chooser (``search/choose.py``), costed by
  ``cost.conv.predict``; its grid is not this space, so ``in_space`` says whether its pick is in it.

Example:
    >>> import npu_jax
    >>> from npu_jax.workload.conv import canonicalize
    >>> g = canonicalize((1, 64, 14, 14), (64, 64, 3, 3), 1, 1)
    >>> hw = npu_jax.presets.ascend910b()
    >>> exhaustive(g, hw).cycles <= random_search(g, hw, evals=100).cycles
    True
"""

from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np

from npu_jax.cost.conv import predict
from npu_jax.hw.config import HardwareConfig
from npu_jax.mapping.conv import ConvTiling
from npu_jax.search import exact, optimise, space
from npu_jax.search.choose import candidate_tilings, choose_tiling
from npu_jax.workload.conv import ConvGeometry


@dataclasses.dataclass(frozen=True)
class Baseline:
    """A baseline's pick: tiling, exact model cycles, evaluations spent, wall seconds."""

    name: str
    tiling: ConvTiling
    cycles: int
    evals: int
    seconds: float
    in_space: bool = True


def exhaustive(g: ConvGeometry, hw: HardwareConfig, fused: bool = False) -> Baseline:
    """The best legal tiling of the space, by costing all of it (ties: the first in order)."""
    s = space.build(g, hw, fused)
    t0 = time.perf_counter()
    cyc = optimise.exact_cycles(
        exact.layer_of(g), s.tilings, exact.hw_of(hw), hw.num_cores, hw.coupled, fused
    )
    i = int(np.argmin(cyc))
    exact.check_priced("exhaustive", int(cyc[i]), g, hw)
    return Baseline(
        "exhaustive", exact.tiling_at(s.tilings, i), int(cyc[i]), s.size, time.perf_counter() - t0
    )


def random_search(
    g: ConvGeometry, hw: HardwareConfig, evals: int, seed: int = 0, fused: bool = False
) -> Baseline:
    """The best of ``evals`` distinct tilings drawn uniformly from the space."""
    t0 = time.perf_counter()
    t, cyc = _draws(g, hw, evals, seed, fused)
    i = int(np.argmin(cyc))
    exact.check_priced("random_search", int(cyc[i]), g, hw)
    return Baseline("random", exact.tiling_at(t, i), int(cyc[i]), len(cyc), time.perf_counter() - t0)


def random_draws(
    g: ConvGeometry, hw: HardwareConfig, evals: int, seed: int = 0, fused: bool = False
) -> np.ndarray:
    """The exact cycles of the tilings :func:`random_search` draws, in the order drawn: their
    running minimum (``np.minimum.accumulate``) is the random search's best so far."""
    return np.asarray(_draws(g, hw, evals, seed, fused)[1])


def _draws(g, hw, evals, seed, fused):
    if evals < 1:
        raise ValueError(f"evals must be >= 1, got {evals}.")
    s = space.build(g, hw, fused)
    idx = np.random.default_rng(seed).choice(s.size, min(evals, s.size), replace=False)
    t = jax.tree.map(lambda a: np.asarray(a)[idx], s.tilings)
    return t, optimise.exact_cycles(exact.layer_of(g), t, exact.hw_of(hw), hw.num_cores, hw.coupled, fused)


def chooser(g: ConvGeometry, hw: HardwareConfig, fused: bool = False) -> Baseline:
    """The Conv2D issue's chooser for img2col (with ``fused``, under the fused kernel's own
    constraints, as ``fusion.conv_relu`` calls it), and the cost model's cycles for its pick."""
    epi, mid = optimise.fused_epilogue(hw) if fused else (None, "fp16")
    t0 = time.perf_counter()
    choose_tiling.cache_clear()
    t = choose_tiling(g, "img2col", hw, "fp16", mid, epi)
    secs = time.perf_counter() - t0
    cyc = predict(optimise.plan_of(g, t, hw, fused)).cycles
    s = space.build(g, hw, fused)
    row = (t.ho, t.wo, t.n, t.cin1, t.k_l0, int(t.weights_resident), t.l1_stages, t.cout_split)
    inside = (
        t.l1_stages == t.l0_stages
        and t.cores is None
        and bool(np.all(exact.rows_of(s.tilings) == np.asarray(row, np.int32), axis=1).any())
    )
    return Baseline(
        "chooser", t, int(cyc), len(candidate_tilings(g, "img2col", hw, "fp16", mid, epi)), secs, inside
    )


__all__ = ["Baseline", "chooser", "exhaustive", "random_draws", "random_search"]

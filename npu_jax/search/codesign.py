"""Hardware co-design: how a network's cycles move with the hardware, searched tiling by tiling.

Two questions, two tools:

* :func:`l1_sweep` -- "which L1 size minimises ResNet-50's total cycles?": for each L1 size the
  tilings are searched again (:func:`optimise.search_model`, or the sharded :func:`sweep.sweep`),
  and the network's total is the sum of its layers' best. More L1 never hurts (every tiling that fits still fits), so the answer is the
  *smallest* L1 that reaches the minimum: :func:`smallest_sufficient`.
* :func:`l2_sweep` -- "how much L2 does the network need?": for each L2 size every layer gets the
  chooser's tiling (the grid's cheapest by the closed-form model, L2 included) and the network's
  total is their sum. A larger L2 keeps more of a kernel's tensors (never fewer), so a tiling never
  gets slower and neither does the total: the answer is again the smallest size at the minimum.
* :func:`hw_gradient` -- the gradient of the network's relaxed cycles with respect to every
  continuous hardware figure (rates, start-ups, capacities), at the tilings found: how many cycles
  one more B/cycle of GM bandwidth buys, per layer and in total. Capacities enter only through the
  penalty, which is zero at legal points, so their gradient is zero there: the L1 question needs
  the sweep.

Example:
    >>> import npu_jax
    >>> from npu_jax.workload.resnet50 import RESNET50_REFERENCE
    >>> layers = [l.geometry() for l in RESNET50_REFERENCE]
    >>> sizes, totals, _ = l1_sweep(layers, npu_jax.presets.ascend910b(), [128, 512])  # doctest: +SKIP
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from npu_jax.cost.conv import predict
from npu_jax.hw.config import HardwareConfig
from npu_jax.mapping.conv import make_plan
from npu_jax.search import exact, optimise, relaxed, sweep
from npu_jax.search.choose import choose_tiling
from npu_jax.workload.conv import ConvGeometry


def l1_sweep(
    layers: list[ConvGeometry],
    hw: HardwareConfig,
    l1_kib,
    *,
    counts=None,
    method: str = "search",
    starts: int = 8,
    steps: int = 24,
    seed: int = 0,
    budget: float | None = None,
    progress: bool = False,
):
    """Total cycles of ``layers`` (each weighted by ``counts``, default 1) for each L1 size in KiB.

    ``method="search"`` runs :func:`optimise.search_model` (descent + exact coordinate search, 1%
    of each space by default) on every distinct layer at every size; ``method="sweep"`` runs the
    on-device :func:`sweep.sweep` (descent and rounding only, all layers and sizes as one sharded
    batch: faster, rougher). Returns (l1 sizes in KiB, totals (len(l1_kib),), a
    :class:`sweep.SweepResult` with each layer's best per size)."""
    if method not in ("search", "sweep"):
        raise ValueError(f"method must be 'search' or 'sweep', got {method!r}.")
    sizes = [int(k) for k in l1_kib]
    hws = [hw.replace(l1_bytes=k * 1024, name=f"{hw.name}-l1-{k}k") for k in sizes]
    if method == "sweep":
        res = sweep.sweep(layers, hws, starts=starts, steps=steps, seed=seed, progress=progress)
    else:

        def best(g, h):
            try:
                m = optimise.search_model(g, h, seed=seed, **({} if budget is None else {"budget": budget}))
                return int(m.cycles[0]), m.rows[0]
            except RuntimeError:  # no legal tiling at this L1 size
                return int(sweep.BIG), np.zeros(8, np.int32)

        found = _per_layer(layers, hws, best)
        cyc = np.array([[c for c, _ in row] for row in found], np.int64)
        rows = np.array([[r for _, r in row] for row in found], np.int32)
        res = sweep.SweepResult(cycles=cyc, tilings=rows, start_cycles=cyc[..., None], devices=1)
    cyc = np.where(res.cycles >= sweep.BIG, np.nan, res.cycles.astype(np.float64))
    return np.asarray(sizes), _total(cyc, counts), res


def _per_layer(layers, hws, fn) -> list[list]:
    """``fn(layer, hw)`` for every layer (rows) and hardware (columns), once per distinct pair."""
    found: dict = {}
    for g in layers:
        for j, h in enumerate(hws):
            if (g, j) not in found:
                found[g, j] = fn(g, h)
    return [[found[g, j] for j in range(len(hws))] for g in layers]


def _total(cyc, counts):
    """The network's totals per hardware: per-layer cycles (layers, hws) weighted by ``counts``."""
    w = np.ones(len(cyc)) if counts is None else np.asarray(counts, np.float64)
    return (w[:, None] * cyc).sum(0)


def l2_sweep(
    layers: list[ConvGeometry], hw: HardwareConfig, l2_mib, *, counts=None, strategy: str = "img2col"
):
    """Total cycles of ``layers`` (each weighted by ``counts``, default 1) for each L2 size in MiB
    (0: no L2, every GM byte from HBM), each layer with the chooser's tiling at that size. Returns
    (sizes in MiB, totals (len(l2_mib),), per-layer cycles (layers, sizes))."""
    sizes = [float(m) for m in l2_mib]
    hws = [hw.replace(l2_bytes=int(m * 2**20), name=f"{hw.name}-l2-{m:g}m") for m in sizes]

    def cycles(g, h):
        return predict(make_plan(g, strategy, choose_tiling(g, strategy, h), h)).cycles

    cyc = np.array(_per_layer(layers, hws, cycles), np.int64)
    return np.asarray(sizes), _total(cyc, counts), cyc


def smallest_sufficient(sizes, totals, tolerance: float = 0.0):
    """The smallest size whose total is within ``tolerance`` (relative) of the best total."""
    totals = np.asarray(totals, np.float64)
    best = np.nanmin(totals)
    ok = np.nonzero(totals <= best * (1 + tolerance))[0]
    return np.asarray(sizes)[ok[0]].item()  # as given: KiB ints, MiB floats


def hw_gradient(layers: list[ConvGeometry], hw: HardwareConfig, tilings, counts=None) -> dict:
    """d(total relaxed cycles) / d(hardware figure) at the given tilings (one per layer).

    Returns a dict field name -> derivative (cycles per unit of the figure), for every float field
    of :class:`exact.Hw`."""
    H = exact.hw_of(hw)
    w = np.ones(len(layers)) if counts is None else np.asarray(counts, np.float64)
    Ls = [exact.layer_of(g) for g in layers]
    xs = [relaxed.params_of(exact.tilings_from([t])) for t in tilings]

    def total(Hf):
        Hx = H._replace(**Hf)
        tot = 0.0
        for wi, L, (x, d) in zip(w, Ls, xs):
            tot = tot + wi * relaxed.relaxed_cycles(x[0], d[0], L, Hx, hw.num_cores, hw.coupled)
        return tot

    fields = {k: v for k, v in H._asdict().items() if jnp.issubdtype(v.dtype, jnp.floating)}
    g = jax.grad(total)(fields)
    return {k: float(v) for k, v in g.items()}


def plot_l1(sizes, totals, path=None, ax=None, clock_ghz: float | None = None):
    """Total cycles against L1 size (matplotlib); the smallest sufficient size marked."""
    import matplotlib

    if ax is None and path is not None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = None
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(sizes, totals, "o-")
    best = smallest_sufficient(sizes, totals)
    ax.axvline(best, color="grey", ls="--", label=f"smallest L1 at the minimum: {best} KiB")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("L1 size (KiB)")
    ax.set_ylabel("total cycles (searched tilings)")
    ax.legend()
    if path is not None and fig is not None:
        fig.tight_layout()
        fig.savefig(path, dpi=120)
    return ax


__all__ = ["hw_gradient", "l1_sweep", "l2_sweep", "plot_l1", "smallest_sufficient"]

"""Experiments: error vs depth and emulated speed of every strategy, in three scenarios.

A ResNet-like stack of 3x3 convs with ReLU (:class:`~precision.strategies.StackSpec`) runs under
each strategy on the emulator; its activations after every layer are compared with a float64
reference of the same stack (the fp32 weights and input, unrounded). One run of the deepest stack
gives every depth: the first d layers of it are a d-layer stack.

Scenarios, each making one strategy matter:

* ``well_scaled``: He-initialised weights, N(0, 1) input -- activations stay level.
* ``growing``: weights times a gain so activations grow per layer and reach fp16's max near three
  quarters of the depth (gain 1.5 at depth 32: the facts sheet's overflow between layers 20 and 25).
* ``tiny``: the input scaled by 2^-20 (~1e-6): activations live in fp16's subnormal range.

Example:
    >>> res = run_experiments(depths=(2, 4), channels=16, size=8)   # doctest: +SKIP
    >>> print(res.table())                                          # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import json
import time

import numpy as np

import npu_jax
from npu_jax.errors import InputTypeError, check_choice, check_int
from precision.budgets import budget_for
from precision.metrics import Metrics
from precision.strategies import STRATEGIES, StackRun, StackSpec, reference, run_strategy

SCENARIOS = ("well_scaled", "growing", "tiny")
TINY_INPUT = 2.0**-20


def scenario_spec(scenario: str, depth: int, channels: int = 16, size: int = 8, seed: int = 0) -> StackSpec:
    """The stack of ``scenario`` at ``depth`` layers (``size`` x ``size`` activations)."""
    if scenario == "well_scaled":
        gain, scale = 1.0, 1.0
    elif scenario == "growing":
        gain, scale = float(2.0 ** (14 / (0.75 * depth))), 1.0  # amax ~4 -> 65504 at 3/4 depth
    elif scenario == "tiny":
        gain, scale = 1.0, TINY_INPUT
    else:
        raise ValueError(f"scenario must be one of {SCENARIOS}, got {scenario!r}.")
    return StackSpec(
        depth=depth, channels=channels, height=size, width=size, gain=gain, input_scale=scale, seed=seed
    )


@dataclasses.dataclass
class Cell:
    """One (scenario, strategy): per-layer metrics and cycles."""

    scenario: str
    strategy: str
    metrics: list[Metrics]
    cycles: list[int]
    fp32_cycles: list[int]

    def error(self, depth: int) -> float:
        return self.metrics[depth - 1].rel_l2

    def speedup(self, depth: int) -> float:
        """FP32's emulated cycles over this strategy's, for the first ``depth`` layers."""
        return sum(self.fp32_cycles[:depth]) / max(1, sum(self.cycles[:depth]))

    def first_bad_layer(self) -> int | None:
        for i, m in enumerate(self.metrics):
            if not m.finite:
                return i + 1
        return None


@dataclasses.dataclass
class Results:
    depths: tuple
    cells: dict  # (scenario, strategy) -> Cell
    setup: str
    seconds: float
    floors: dict = dataclasses.field(default_factory=dict)  # scenario -> rel L2 per layer of the exact
    # stack with fp16-rounded weights: the error no activation strategy can remove

    def cell(self, scenario: str, strategy: str) -> Cell:
        return self.cells[(scenario, strategy)]

    def rows(self) -> list[dict]:
        out = []
        for (sc, st), c in self.cells.items():
            D = self.depths[-1]
            verdict = budget_for(st, sc).check(c.metrics[D - 1])
            out.append(
                {
                    "scenario": sc,
                    "strategy": st,
                    **{f"rel_l2@{d}": c.error(d) for d in self.depths},
                    "first_nonfinite_layer": c.first_bad_layer(),
                    "cycles": int(sum(c.cycles[:D])),
                    "speed_vs_fp32": c.speedup(D),
                    "within_claim": all(r[-1] for r in verdict),
                }
            )
        return out

    def table(self) -> str:
        """The experiments table: error (relative L2 vs float64) at each depth, emulated cycles of
        the deepest stack and its speed against FP32, and whether the kernel engineer's claim (the
        budget of :data:`precision.budgets.BUDGETS`: pure FP16 within 2%, the strategies within
        0.1%, FP32 within 1e-5, all finite) holds at the deepest depth."""
        D = self.depths[-1]
        head = (
            f"{'scenario':<12} {'strategy':<16}"
            + "".join(f"{'err@' + str(d):>10}" for d in self.depths)
            + f"{'cycles@' + str(D):>13} {'vs fp32':>8}  claim"
        )
        lines = [head, "-" * len(head)]
        for r in self.rows():
            errs = "".join(f"{_fmt_err(r[f'rel_l2@{d}']):>10}" for d in self.depths)
            bad = r["first_nonfinite_layer"]
            note = (
                "met" if r["within_claim"] else ("missed" + (f" (inf/NaN from layer {bad})" if bad else ""))
            )
            lines.append(
                f"{r['scenario']:<12} {r['strategy']:<16}{errs}{r['cycles']:>13,} "
                f"{r['speed_vs_fp32']:>7.2f}x  {note}"
            )
        for sc, fl in self.floors.items():
            lines.append(
                f"{sc:<12} {'(fp16 weights)':<16}"
                + "".join(f"{_fmt_err(fl[d - 1]):>10}" for d in self.depths)
                + "   exact arithmetic, weights rounded to fp16: the floor for fp16 weights"
            )
        return "\n".join(lines)

    def reading(self) -> str:
        """What the table says, in a few sentences computed from it."""
        D = self.depths[-1]
        lines = []
        for sc in dict.fromkeys(k[0] for k in self.cells):
            errs = {st: self.cell(sc, st).error(D) for (s, st) in self.cells if s == sc}
            finite = {k: v for k, v in errs.items() if np.isfinite(v)}
            failed = [k for k, v in errs.items() if not np.isfinite(v)]
            best16 = min((k for k in finite if k != "fp32"), key=finite.get, default=None)
            msg = f"{sc}: at depth {D}"
            if failed:
                msg += (
                    f" {', '.join(failed)} overflow (first inf/NaN at layer "
                    f"{', '.join(str(self.cell(sc, k).first_bad_layer()) for k in failed)})"
                )
            if best16:
                msg += (
                    f"{';' if failed else ''} the best fp16-storage strategy is {best16} "
                    f"({finite[best16]:.2e}, {self.cell(sc, best16).speedup(D):.2f}x FP32's speed)"
                )
            lines.append(msg + ".")
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps(
            {
                "setup": self.setup,
                "depths": list(self.depths),
                "rows": self.rows(),
                "fp16_weight_floor": {sc: [fl[d - 1] for d in self.depths] for sc, fl in self.floors.items()},
            },
            indent=1,
            default=float,
        )

    def plot(self, path: str | None = None):
        """Error vs depth per strategy, one panel per scenario (log scale; inf/NaN not drawn), with
        whole-number layer ticks, each budget's limit as a labelled horizontal line (the claims of
        :data:`precision.budgets.BUDGETS`) and a dotted vertical line, in the strategy's colour,
        where a strategy first overflows. Writes a PNG and returns ``path`` when given; else
        returns the figure (for a notebook)."""
        import matplotlib

        if path is not None:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator

        scs = list(dict.fromkeys(k[0] for k in self.cells))
        fig, axes = plt.subplots(1, len(scs), figsize=(5.5 * len(scs), 4.2), squeeze=False)
        for ax, sc in zip(axes[0], scs):
            limits: dict[float, list[str]] = {}
            for (s, st), c in self.cells.items():
                if s != sc:
                    continue
                e = np.array([m.rel_l2 for m in c.metrics])
                layers = np.arange(1, len(e) + 1)
                ok = np.isfinite(e) & (e > 0)
                (line,) = ax.semilogy(layers[ok], e[ok], marker=".", label=f"{st} ({c.speedup(len(e)):.2f}x)")
                bad = c.first_bad_layer()
                if bad:
                    ax.axvline(
                        bad, ls=":", color=line.get_color(), label=f"{st}: first inf/NaN (layer {bad})"
                    )
                limit = budget_for(st, sc).max_.get("rel_l2")
                if limit is not None:
                    limits.setdefault(limit, []).append(st)
            for (limit, sts), ls in zip(sorted(limits.items(), reverse=True), ("--", "-.", (0, (1, 3)))):
                ax.axhline(limit, color="grey", lw=0.9, ls=ls, label=f"budget {limit:g}: {', '.join(sts)}")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_title(sc)
            ax.set_xlabel("layer")
            ax.set_ylabel("relative L2 error vs float64")
            ax.legend(fontsize=6)
        fig.suptitle(self.setup, fontsize=8)
        fig.tight_layout()
        if path is None:
            return fig
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path


def _fmt_err(v: float) -> str:
    if np.isnan(v):
        return "NaN"
    if np.isinf(v):
        return "inf"
    return f"{v:.2e}"


def run_experiments(
    depths=(4, 8, 16, 32),
    strategies=STRATEGIES,
    scenarios=SCENARIOS,
    *,
    channels: int = 16,
    size: int = 8,
    hw=None,
    conv_strategy: str = "img2col",
    seed: int = 0,
    progress=None,
) -> Results:
    """Run every (scenario, strategy) on the deepest stack; read every depth off it.

    Args:
        depths: depths to report (increasing); the stacks have ``max(depths)`` layers.
        strategies, scenarios: subsets of :data:`~precision.strategies.STRATEGIES`, :data:`SCENARIOS`.
        channels, size: C (in = out) and the activations' height = width.
        hw: preset (default ``presets.tiny()``); conv_strategy: the Conv2D kernel.
        progress: called with (scenario, strategy) after each run.
    """
    t0 = time.perf_counter()
    hw = npu_jax.presets.tiny() if hw is None else hw
    seq = () if isinstance(depths, (str, bytes)) or not hasattr(depths, "__iter__") else tuple(depths)
    if not seq:
        raise InputTypeError(f"run_experiments: depths must be a non-empty sequence of ints, got {depths!r}.")
    depths = tuple(sorted(check_int("run_experiments", "depths", d, 1) for d in seq))
    D = depths[-1]
    strategies = tuple(check_choice("run_experiments", "strategies", st, STRATEGIES) for st in strategies)
    scenarios = tuple(check_choice("run_experiments", "scenarios", sc, SCENARIOS) for sc in scenarios)
    cells, floors = {}, {}
    for sc in scenarios:
        spec = scenario_spec(sc, D, channels, size, seed)
        ws = spec.weights()
        runs: dict[str, StackRun] = {}
        for st in dict.fromkeys(("fp32",) + strategies):
            runs[st] = run_strategy(st, spec, hw=hw, conv_strategy=conv_strategy)
            if progress:
                progress(sc, st)
        refs = {0: reference(spec.inputs(0), ws)}
        w16 = reference(spec.inputs(0), [w.astype(np.float16).astype(np.float32) for w in ws])
        floors[sc] = [float(np.linalg.norm(a - b) / np.linalg.norm(b)) for a, b in zip(w16, refs[0])]
        for st in strategies:
            it = 2 if st == "scaling_delayed" else 0  # delayed reports its third iteration
            if it not in refs:
                refs[it] = reference(spec.inputs(it), ws)
            cells[(sc, st)] = Cell(sc, st, runs[st].metrics(refs[it]), runs[st].cycles, runs["fp32"].cycles)
    setup = (
        f"{D}-layer stacks of 3x3 convs C={channels}->{channels} on {size}x{size}, ReLU; "
        f"{conv_strategy} on {hw.name}; error = relative L2 vs float64"
    )
    return Results(depths, cells, setup, time.perf_counter() - t0, floors)


__all__ = ["SCENARIOS", "Results", "run_experiments", "scenario_spec"]

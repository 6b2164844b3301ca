"""Studies that tell the kernel engineer's story with the emulator's own numbers.

``conv_strategies`` runs the four Conv2D strategies on a set of layers (each with the chooser's
tiling) and returns one row per (layer, strategy) read from the reports; ``format_rows`` prints
them. Timing-only runs give exactly the numbers of full runs (tested) in a fraction of the time, and
the closed-form models (``model=True``) exactly the timing-only runs' without compiling a kernel.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import numpy as np

from npu_jax.api.conv import conv2d
from npu_jax.core.policy import Policy
from npu_jax.cost import relayout
from npu_jax.cost.conv import predict
from npu_jax.hw.config import HardwareConfig
from npu_jax.mapping.conv import SPECS, STRATEGIES, make_plan
from npu_jax.search.choose import choose_tiling
from npu_jax.workload.resnet50 import RESNET50_REFERENCE, ConvLayer


@dataclasses.dataclass(frozen=True)
class StrategyRow:
    layer: str
    strategy: str
    cycles: int
    pct_peak: float
    gm_bytes: int
    mac_ratio: float
    mte2_ratio: float
    bottleneck: str
    relayout_cycles: int  # the NC1HWC0 relayout kernel, reported on its own (0 if none)
    tiling: object


def conv_strategies(
    hw: HardwareConfig,
    layers: tuple[ConvLayer, ...] = RESNET50_REFERENCE,
    strategies: tuple[str, ...] = STRATEGIES,
    timing_only: bool = True,
    progress=None,
    *,
    model: bool = False,
) -> list[StrategyRow]:
    """Run every strategy on every layer (random data; timing-only by default), each with the
    chooser's tiling.

    ``model=True`` reads the row from the closed-form models instead: the conv's
    (:func:`npu_jax.cost.conv.predict`: the emulator's cycles, bytes, busy cycles per lane and
    bottleneck exactly, tested in ``tests/test_cost_model.py``) and the NC1HWC0 relayout kernel's
    (:func:`npu_jax.cost.relayout.predict`, ``tests/test_relayout_model.py``), so no kernel compiles."""
    rng = np.random.default_rng(0)
    rows = []
    for layer in layers:
        if not model:  # the model reads no data
            x = rng.standard_normal(layer.x_shape).astype(np.float32)
            w = rng.standard_normal(layer.w_shape).astype(np.float32)
        g = layer.geometry()
        for s in strategies:
            t = choose_tiling(g, s, hw)
            if model:
                rep = predict(make_plan(g, s, t, hw))
                rel = relayout.predict(g, hw, Policy().operand) if SPECS[s].nc1hwc0_source else None
            else:
                run = jax.jit(
                    functools.partial(
                        conv2d,
                        stride=layer.stride,
                        padding=layer.padding,
                        strategy=s,
                        hw=hw,
                        tiling=t,
                        policy=Policy(),  # the hardware's default, stated: no note about fp32 data
                        timing_only=timing_only,
                    )
                )
                _, rep = run(x, w)
                rel = rep.extras.get("relayout")
            r = rep.ratios
            rows.append(
                StrategyRow(
                    layer.name,
                    s,
                    rep.cycles,
                    rep.pct_peak,
                    rep.gm_bytes,
                    r["mac_ratio"],
                    r["mte2_ratio"],
                    rep.bottleneck,
                    rel.cycles if rel is not None else 0,
                    t,
                )
            )
            if progress:
                progress(rows[-1])
    return rows


def format_rows(rows: list[StrategyRow]) -> str:
    head = (
        f"{'layer':<24}{'strategy':<14}{'% peak':>7}{'cycles':>11}{'GM bytes':>12}"
        f"{'mac':>6}{'mte2':>6}  {'bottleneck':<10}{'relayout':>9}"
    )
    out = [head, "-" * len(head)]
    for r in rows:
        out.append(
            f"{r.layer:<24}{r.strategy:<14}{r.pct_peak:>7.1f}{r.cycles:>11,}{r.gm_bytes:>12,}"
            f"{r.mac_ratio:>6.2f}{r.mte2_ratio:>6.2f}  {r.bottleneck:<10}"
            f"{(f'{r.relayout_cycles:,}' if r.relayout_cycles else '-'):>9}"
        )
    return "\n".join(out)


__all__ = ["StrategyRow", "conv_strategies", "format_rows"]

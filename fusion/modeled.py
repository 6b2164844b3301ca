"""The fusion analysis's two runs priced by the closed-form models instead of the emulator.

Each kernel ``conv2d_fused`` launches has a closed form equal to the emulator's report: the conv, with
or without its fused epilogue (:func:`npu_jax.cost.conv.predict`), the NC1HWC0 relayout before it
(:func:`npu_jax.cost.relayout.predict`) and the element-wise vector kernel after an unfused conv
(:func:`npu_jax.cost.eltwise.predict`, its inputs resident in L2 where the conv's launch keeps them:
:func:`npu_jax.cost.conv.l2_kept`). :func:`modeled_run` assembles them as ``conv2d_fused`` assembles
its reports, so ``fusion.analyze(..., model=True)`` gives the same table, readings and figures as the
timing-only runs without compiling a kernel (``tests/test_fusion.py`` holds the two together).
"""

from __future__ import annotations

import dataclasses

from npu_jax.core import pipes
from npu_jax.core.pipes import LANE_ORDER
from npu_jax.cost import eltwise, relayout
from npu_jax.cost.conv import l2_kept, predict
from npu_jax.hw.config import HardwareConfig
from npu_jax.mapping.conv import make_plan
from npu_jax.mapping.eltwise import make_eltwise_plan
from npu_jax.mapping.epilogue import split
from npu_jax.report.names import LaneDict
from npu_jax.report.sequence import SequenceReport

# the GM paths a kernel's output leaves by (read by the analysis: the intermediate's round trip)
_OUT_PATHS = ("L0C->GM", "UB->GM")


@dataclasses.dataclass(frozen=True)
class ModeledReport:
    """One kernel's closed-form prediction, read like the emulator's Report as far as the fusion
    analysis and :class:`~npu_jax.report.sequence.SequenceReport` read one: cycles, GM bytes, the
    bytes of the paths the model counts (GM, and HBM for the vector-side kernels; the on-chip paths
    it does not count are absent, not zero), busy cycles per lane, ratios and bottleneck by the
    Report's rules. No trace: it ran no instruction."""

    name: str
    hw: HardwareConfig
    operand: str
    prediction: object  # cost.conv.Prediction or cost.board.KernelPrediction
    flops: int = 0
    workload: str = ""
    extras: dict = dataclasses.field(default_factory=dict)
    trace_dropped: int = 0

    @property
    def cycles(self) -> int:
        return self.prediction.cycles

    @property
    def n_cores(self) -> int:
        return self.prediction.n_cores

    @property
    def gm_bytes(self) -> int:
        return self.prediction.gm_bytes

    @property
    def bytes(self) -> dict[str, int]:
        return {**dict.fromkeys(_OUT_PATHS, 0), **self.prediction.bytes}

    @property
    def pipe_busy(self) -> LaneDict:
        return LaneDict((lane, int(self.prediction.pipe_busy[lane])) for lane in LANE_ORDER)

    @property
    def ratios(self) -> dict[str, float]:
        """Busy / elapsed per lane over the launched cores, as ``Report.ratios``."""
        return pipes.ratios(self.pipe_busy, self.cycles, self.n_cores)

    @property
    def bottleneck(self) -> str:
        return self.prediction.bottleneck

    def check(self) -> ModeledReport:
        return self  # no run, no sanitizer findings

    def summary(self) -> str:
        return (
            f"{self.name} on {self.hw.name} (closed-form model): {self.cycles:,} cycles, "
            f"{self.gm_bytes:,} GM bytes, bottleneck {self.bottleneck}"
        )


def modeled_run(g, steps, fused: bool, strategy: str, tiling, hw: HardwareConfig, policy) -> SequenceReport:
    """The report ``conv2d_fused(..., fused=fused, tiling=tiling, timing_only=True)`` gives for layer
    ``g`` (concrete, one super-group when fused), from the closed-form models."""
    epi, rest, mid, final = split(steps, hw, policy, fused)
    op = policy.operand
    p = make_plan(g, strategy, tiling, hw, op, mid, epi=epi)
    extras = {}
    if p.spec.nc1hwc0_source:
        extras["relayout"] = ModeledReport("relayout", hw, op, relayout.predict(p.gv, hw, op))
    name = f"conv2d[{strategy}]" + (f"+{epi}" if epi is not None else "")
    parts = [("conv", ModeledReport(name, hw, op, predict(p), g.flops, g.describe(), extras))]
    if rest:
        ep = make_eltwise_plan(rest, g.n * g.ho * g.wo, g.k, mid, final, policy.vector, hw)
        vec = eltwise.predict(ep, l2_resident=l2_kept(p))
        label = "eltwise[" + " -> ".join(map(str, rest)) + "]"
        parts.append(("eltwise", ModeledReport(label, hw, mid, vec)))
    label = " -> ".join(["conv2d"] + [str(s) for s in steps])
    return SequenceReport(tuple(parts), f"{label} ({'fused' if fused else 'unfused'})")


__all__ = ["ModeledReport", "modeled_run"]

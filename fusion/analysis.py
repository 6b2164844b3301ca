"""What fusing an epilogue into the Conv saves, measured on the emulator, and why.

``analyze`` runs the unfused baseline and the fused kernel on one layer (each with the chooser's
tiling under its own constraints; timing-only, so a ResNet layer takes a second) and reads every
figure from the two reports: GM bytes of the intermediate saved, cycles, speed-up, busy cycles
per pipe, and a sentence that says why, from the same numbers.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fusion.api import _steps, conv2d_fused
from fusion.modeled import modeled_run
from npu_jax.api.validate import check_common, check_flag, check_hw, conv_gm_bytes, state_bytes
from npu_jax.core.pipes import LANE_ORDER, RATIO_NAMES
from npu_jax.core.policy import Policy
from npu_jax.errors import InputError, InputTypeError, check_choice
from npu_jax.hw.config import HardwareConfig
from npu_jax.mapping.conv import STRATEGIES
from npu_jax.mapping.epilogue import split
from npu_jax.report.names import LaneDict
from npu_jax.report.sequence import SequenceReport
from npu_jax.search.choose import choose_tiling
from npu_jax.workload.conv import canonicalize
from npu_jax.workload.resnet50 import RESNET50_REFERENCE, ConvLayer


@dataclasses.dataclass(frozen=True)
class FusionAnalysis:
    """Unfused vs fused runs of one layer, and what the difference is made of."""

    layer: str
    hw: HardwareConfig
    steps: str
    unfused: SequenceReport
    fused: SequenceReport
    unfused_tiling: object = None
    fused_tiling: object = None

    @property
    def intermediate_bytes(self) -> int:
        """GM traffic of the intermediate in the unfused version: the Conv writes it, the vector
        kernel reads the same bytes back."""
        return _round_trip(self.unfused)

    @property
    def fused_intermediate_bytes(self) -> int:
        """The same in the fused version: zero when the whole chain ran in the Conv's epilogue."""
        return _round_trip(self.fused)

    @property
    def gm_bytes_saved(self) -> int:
        """All GM bytes saved (the intermediate, and any change of tiling the fused kernel made)."""
        return self.unfused.gm_bytes - self.fused.gm_bytes

    @property
    def intermediate_saved_pct(self) -> float:
        """The intermediate's GM round trip saved by fusion, in %."""
        return 100.0 * (1.0 - self.fused_intermediate_bytes / max(1, self.intermediate_bytes))

    @property
    def gm_saved_pct(self) -> float:
        """GM bytes saved, as % of all the unfused version moves."""
        return 100.0 * self.gm_bytes_saved / max(1, self.unfused.gm_bytes)

    @property
    def speedup(self) -> float:
        return self.unfused.cycles / max(1, self.fused.cycles)

    @property
    def faster_pct(self) -> float:
        """Time saved, % of the unfused time (the engineer's "35% faster")."""
        return 100.0 * (1.0 - self.fused.cycles / max(1, self.unfused.cycles))

    @property
    def pipe_delta(self) -> dict[str, tuple[int, int]]:
        """Busy cycles per lane (all cores), (unfused, fused), for the lanes either version used."""
        u, f = self.unfused.pipe_busy, self.fused.pipe_busy
        return LaneDict((lane, (u[lane], f[lane])) for lane in LANE_ORDER if u[lane] or f[lane])

    @property
    def why(self) -> str:
        """The reading, from the numbers."""
        conv_u = self.unfused.part("conv")
        conv_f = self.fused.part("conv")
        r = conv_u.ratios
        bound = conv_u.bottleneck
        if bound == "CUBE":
            kind = f"compute-bound (mac_ratio {r['mac_ratio']:.2f})"
        elif bound in RATIO_NAMES:  # a lane
            kind = f"{bound}-bound ({r[RATIO_NAMES[bound]]:.2f} busy)"
        else:  # the chip's HBM, shared by every core
            kind = f"{bound}-bound"
        parts = [f"the Conv alone is {kind}"]
        if len(self.unfused.parts) > 1:
            elt = self.unfused.part("eltwise")
            parts.append(
                f"the separate vector kernel costs {elt.cycles:,} cycles "
                f"({100 * elt.cycles / max(1, self.unfused.cycles):.0f}% of the unfused time), "
                f"bound by {elt.bottleneck} moving {elt.gm_bytes:,} GM bytes"
            )
        extra = conv_f.cycles - conv_u.cycles
        where = "Fixpipe" if not self.hw.coupled else "Vector unit (then MTE3)"
        if len(self.fused.parts) > 1:
            parts.append(
                f"fused, only part of the chain runs on chip ({self.fused.part('conv').name}); "
                "the rest still goes through GM"
            )
        elif extra <= 0.02 * conv_u.cycles:
            parts.append(
                f"fused, the epilogue runs in the {where} behind the Cube's next tile: the fused "
                f"Conv takes {extra:+,} cycles against the Conv alone"
            )
        else:
            replaced = self.unfused.cycles - conv_u.cycles
            verdict = (
                "less than the kernel it replaces"
                if extra < replaced
                else f"more than the {replaced:,}-cycle kernel it replaces: fusion loses here"
            )
            parts.append(
                f"fused, the Conv takes {extra:,} cycles ({100 * extra / conv_u.cycles:.0f}%) more "
                f"than alone (its epilogue in the {where}, and its own tiling), {verdict}"
            )
        if self.fused_tiling is not None and self.fused_tiling != self.unfused_tiling:
            parts.append("the fused kernel picked a different tiling (its epilogue buffers count)")
        return "; ".join(parts) + "."

    def row(self) -> dict:
        return {
            "layer": self.layer,
            "hw": self.hw.name,
            "steps": self.steps,
            "intermediate_bytes": self.intermediate_bytes,
            "fused_intermediate_bytes": self.fused_intermediate_bytes,
            "intermediate_saved_pct": self.intermediate_saved_pct,
            "gm_saved_pct": self.gm_saved_pct,
            "cycles_unfused": self.unfused.cycles,
            "cycles_fused": self.fused.cycles,
            "speedup": self.speedup,
            "faster_pct": self.faster_pct,
        }

    def summary(self) -> str:
        lines = [
            f"{self.layer} on {self.hw.name}: conv -> {self.steps}",
            f"  cycles      unfused {self.unfused.cycles:>12,}   fused {self.fused.cycles:>12,}"
            f"   speed-up {self.speedup:.2f}x ({self.faster_pct:.0f}% less time)",
            f"  GM bytes    unfused {self.unfused.gm_bytes:>12,}   fused {self.fused.gm_bytes:>12,}"
            f"   ({100 * self.gm_bytes_saved / max(1, self.unfused.gm_bytes):.0f}% saved)",
            f"  intermediate round trip through GM: unfused {self.intermediate_bytes:,} B, fused "
            f"{self.fused_intermediate_bytes:,} B ({self.intermediate_saved_pct:.0f}% saved)",
            "  lane        busy unfused -> fused",
        ]
        for p, (u, f) in self.pipe_delta.items():
            lines.append(f"  {p:<10}{u:>14,} -> {f:>12,}")
        lines.append(f"  why: {self.why}")
        return "\n".join(lines)


def _inputs(fn, g, x_shape, w_shape, steps, hw, cap, checks):
    """Random x, w (and bias, residual where the chain reads them) for the emulated runs, after the
    host and runs' memory (float64 draws and the state) is estimated, before any allocation."""
    state_bytes(fn, hw, hw.num_cores, conv_gm_bytes(g) + 2 * 8 * (g.n * g.c * g.h * g.w), cap, checks)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    names = {s.op for s in steps}
    bias = rng.standard_normal(w_shape[0]).astype(np.float32) if "bias" in names else None
    residual = None
    if "residual" in names:
        residual = rng.standard_normal((g.n, g.k, g.ho, g.wo)).astype(np.float32)
    return x, w, bias, residual


def _round_trip(rep: SequenceReport) -> int:
    """Bytes of an intermediate tensor through GM: written by the Conv and read back by a vector
    kernel (the vector kernel reads exactly what the Conv wrote); 0 without a vector kernel."""
    if len(rep.parts) < 2:
        return 0
    conv = rep.part("conv")
    return 2 * (conv.bytes["L0C->GM"] + conv.bytes["UB->GM"])


def analyze(
    x_shape,
    w_shape,
    epilogue=("relu",),
    *,
    stride=1,
    padding=0,
    dilation=1,
    hw: HardwareConfig | None = None,
    policy: Policy | None = None,
    strategy: str = "img2col",
    name: str | None = None,
    trace: bool | int = False,
    model: bool = False,
) -> FusionAnalysis:
    """Run ``conv -> epilogue`` unfused and fused on random data (timing-only) and compare.
    ``trace`` keeps both runs' instruction traces (for timelines and Chrome traces).

    ``model=True`` prices both runs with the closed-form models instead (``fusion/modeled.py``: every
    kernel's, equal to the emulator's report), so no kernel compiles: the same table and reading in
    milliseconds; no traces (``trace`` must be False) and no sanitizer runs.

    Example:
        >>> import npu_jax, fusion
        >>> a = fusion.analyze((1, 16, 8, 8), (32, 16, 3, 3), padding=1, hw=npu_jax.presets.tiny())
        >>> a.speedup > 1.0
        True
    """

    fn = "analyze"
    hw, policy, checks, cap = check_common(hw, policy, None, trace, fn)
    check_choice(fn, "strategy", strategy, STRATEGIES)
    if name is not None and not isinstance(name, str):
        raise InputTypeError(f"{fn}: name must be a string or None, got {type(name).__name__} {name!r}.")
    steps = _steps(epilogue, fn)
    model = check_flag("model", model, fn)
    if model and cap:
        raise InputError(f"{fn}: model=True runs no instruction, so it keeps no trace; pass trace=False.")
    g = canonicalize(x_shape, w_shape, stride, padding, dilation)
    if not model:
        x, w, bias, residual = _inputs(fn, g, x_shape, w_shape, steps, hw, cap, checks)
    reps, tilings = {}, {}
    for fused in (False, True):
        epi, _, mid, _ = split(steps, hw, policy, fused)
        tilings[fused] = choose_tiling(g, strategy, hw, policy.operand, mid, epi)
        if model:
            reps[fused] = modeled_run(g, steps, fused, strategy, tilings[fused], hw, policy)
            continue
        # called eagerly: each kernel (relayout, conv, vector) is a kept timing-only program,
        # compiled fast (core/programs.py), the relayout shared by both runs
        _, reps[fused] = conv2d_fused(
            x,
            w,
            bias=bias,
            residual=residual,
            epilogue=steps,
            stride=stride,
            padding=padding,
            dilation=dilation,
            fused=fused,
            strategy=strategy,
            hw=hw,
            tiling=tilings[fused],
            policy=policy,
            trace=trace,
            timing_only=True,
        )
    label = name or f"{x_shape} * {w_shape}"
    return FusionAnalysis(
        label, hw, " -> ".join(map(str, steps)), reps[False], reps[True], tilings[False], tilings[True]
    )


def reference_table(
    hws: tuple[HardwareConfig, ...],
    layers: tuple[ConvLayer, ...] = RESNET50_REFERENCE,
    epilogue=("bias", "relu"),
    progress=None,
) -> list[FusionAnalysis]:
    """:func:`analyze` on every (layer, chip): the fusion table of the README."""
    if isinstance(hws, HardwareConfig) or not isinstance(hws, (tuple, list)):
        raise InputTypeError(
            f"reference_table: hws must be a tuple of HardwareConfig (e.g. (presets.ascend910b(),)), got "
            f"{type(hws).__name__} {hws!r}."
        )
    for hw in hws:
        check_hw(hw, "reference_table")
    out = []
    for hw in hws:
        for layer in layers:
            out.append(
                analyze(
                    layer.x_shape,
                    layer.w_shape,
                    epilogue,
                    stride=layer.stride,
                    padding=layer.padding,
                    hw=hw,
                    name=layer.name,
                )
            )
            if progress:
                progress(out[-1])
    return out


def format_table(rows: list[FusionAnalysis]) -> str:
    head = (
        f"{'layer':<24}{'chip':<12}{'interm. MB':>11}{'saved':>7}{'GM saved':>9}{'cycles unfused':>16}"
        f"{'fused':>11}{'speed-up':>9}{'faster':>8}"
    )
    bad = [r for r in rows if not isinstance(r, FusionAnalysis)]
    if bad:
        raise InputTypeError(
            f"format_table: rows must be FusionAnalysis values (from analyze / reference_table), got "
            f"{type(bad[0]).__name__} {bad[0]!r}."
        )
    out = [head, "-" * len(head)]
    for a in rows:
        out.append(
            f"{a.layer:<24}{a.hw.name:<12}{a.intermediate_bytes / 1e6:>11.2f}"
            f"{a.intermediate_saved_pct:>6.0f}%{a.gm_saved_pct:>8.0f}%{a.unfused.cycles:>16,}"
            f"{a.fused.cycles:>11,}"
            f"{a.speedup:>8.2f}x{a.faster_pct:>7.0f}%"
        )
    return "\n".join(out)

"""A report of kernels launched one after another (e.g. a Conv2D, then a ReLU kernel over its output).

Each kernel starts when the previous one has finished on every core (a launch boundary), so the
sequence's cycles are the sum of its parts'; bytes, busy cycles and FLOPs add up. Every part stays
available on its own (``parts``), and timelines place each part after the previous one.
"""

from __future__ import annotations

import dataclasses
import os

import jax

from npu_jax.core.pipes import LANE_ORDER, RATIO_NAMES
from npu_jax.report.chrome import write_chrome_trace
from npu_jax.report.events import pair_flows
from npu_jax.report.names import LaneDict
from npu_jax.report.plot import plot_timeline
from npu_jax.report.report import Report


@dataclasses.dataclass(frozen=True)
class SequenceReport:
    """Reports of kernels run in sequence, read like one :class:`Report`.

    Attributes:
        parts: (label, Report) per kernel, in launch order.
        name: what the sequence is (shown in summaries and timelines).

    Example:
        >>> seq = SequenceReport((("conv", rep_conv), ("relu", rep_relu)), "conv+relu")  # doctest: +SKIP
        >>> seq.cycles == rep_conv.cycles + rep_relu.cycles                                # doctest: +SKIP
        True
    """

    parts: tuple[tuple[str, Report], ...]
    name: str = "sequence"

    def __post_init__(self):
        if not self.parts:
            raise ValueError("a SequenceReport needs at least one part.")

    def part(self, label: str) -> Report:
        for lab, rep in self.parts:
            if lab == label:
                return rep
        raise KeyError(f"no part {label!r}; parts are {[lab for lab, _ in self.parts]}.")

    @property
    def reports(self) -> list[Report]:
        return [r for _, r in self.parts]

    @property
    def hw(self):
        return self.reports[0].hw

    @property
    def operand(self) -> str:
        return self.reports[0].operand

    @property
    def workload(self) -> str:
        return self.reports[0].workload

    @property
    def extras(self) -> dict:
        return self.reports[0].extras

    @property
    def offsets(self) -> list[int]:
        """Cycle at which each part starts."""
        out, t = [], 0
        for r in self.reports:
            out.append(t)
            t += r.cycles
        return out

    @property
    def cycles(self) -> int:
        return sum(r.cycles for r in self.reports)

    @property
    def time_us(self) -> float:
        return self.cycles / (self.hw.clock_ghz * 1e3)

    @property
    def pipe_busy(self) -> LaneDict:
        """Busy cycles per lane (CUBE, FIXP, ...), summed over the parts."""
        return LaneDict((lane, sum(r.pipe_busy[lane] for r in self.reports)) for lane in LANE_ORDER)

    @property
    def bytes(self) -> dict[str, int]:
        parts = [r.bytes for r in self.reports]
        return {k: sum(b.get(k, 0) for b in parts) for k in dict.fromkeys(k for b in parts for k in b)}

    @property
    def gm_bytes(self) -> int:
        return sum(r.gm_bytes for r in self.reports)

    @property
    def flops(self) -> int:
        return sum(r.flops for r in self.reports)

    @property
    def n_cores(self) -> int:
        return max(r.n_cores for r in self.reports)

    @property
    def ratios(self) -> dict[str, float]:
        """Busy / (elapsed x cores) per pipe, each part weighted by its own cores and cycles."""
        denom = max(1, sum(r.cycles * r.n_cores for r in self.reports))
        busy = self.pipe_busy
        return {RATIO_NAMES[lane]: busy[lane] / denom for lane in LANE_ORDER}

    @property
    def pct_peak(self) -> float:
        peak = self.hw.peak_flops_per_cycle(self.operand) * self.hw.num_cores
        return 100.0 * self.flops / max(1, self.cycles * peak)

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / max(1, self.gm_bytes)

    @property
    def bottleneck(self) -> str:
        busy = self.pipe_busy
        return max(LANE_ORDER, key=lambda lane: busy[lane])

    @property
    def trace_dropped(self) -> int:
        return sum(r.trace_dropped for r in self.reports)

    def check(self) -> SequenceReport:
        for r in self.reports:
            r.check()
        return self

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "hw": self.hw.name,
            "cycles": self.cycles,
            "time_us": self.time_us,
            "pct_peak": self.pct_peak,
            "flops": self.flops,
            "gm_bytes": self.gm_bytes,
            "bytes": self.bytes,
            "ratios": self.ratios,
            "bottleneck": self.bottleneck,
            "parts": {lab: r.as_dict() for lab, r in self.parts},
        }

    def summary(self) -> str:
        lines = [
            f"{self.name} on {self.hw.name}: {len(self.parts)} kernel"
            f"{'s' * (len(self.parts) > 1)} in sequence",
            f"  cycles            {self.cycles:>14,}   ({self.time_us:,.2f} us)",
            f"  % of peak         {self.pct_peak:>14.1f}",
            f"  GM bytes          {self.gm_bytes:>14,}",
            f"  bottleneck        {self.bottleneck:>14}",
        ]
        for (lab, r), off in zip(self.parts, self.offsets):
            lines.append(f"-- [{lab}] from cycle {off:,} --")
            lines.append(r.summary())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def events(self, core: int = 0) -> list[dict]:
        """Trace events of one core of every part (parts that ran on fewer cores are skipped for
        higher core indices), times shifted by each part's start; each event names its part."""
        out = []
        for (lab, r), off in zip(self.parts, self.offsets):
            if core < r.n_cores:
                out += [
                    {**ev, "start": ev["start"] + off, "end": ev["end"] + off, "part": lab}
                    for ev in r.events(core)
                ]
        return out

    def sync_events(self, core: int = 0) -> list[dict]:
        """SetFlag / WaitFlag operations of one core of every part, shifted like :meth:`events`."""
        out = []
        for (lab, r), off in zip(self.parts, self.offsets):
            if core < r.n_cores:
                out += [{**ev, "cycle": ev["cycle"] + off, "part": lab} for ev in r.sync_events(core)]
        return out

    def flows(self, core: int = 0) -> list[dict]:
        """Each SetFlag with the WaitFlag it released, within each part (flags end with a kernel)."""
        sync, out = self.sync_events(core), []
        for lab, _ in self.parts:
            out += pair_flows([ev for ev in sync if ev["part"] == lab])
        return out

    def to_chrome_trace(self, path: str | os.PathLike, cores: list[int] | None = None) -> str:
        """Trace Event JSON: one process per core, one lane per pipe, the parts one after another,
        flows and counter tracks as for a :class:`Report`."""
        return write_chrome_trace(self, path, cores)

    @property
    def offset(self) -> int:
        return 0

    def plot_timeline(
        self, path=None, core: int = 0, ax=None, max_cycles: int | None = None, title=None, lanes=None
    ):
        """A Gantt chart of one core across all parts (a dashed line where each part starts)."""
        ax = plot_timeline(self, path=None, core=core, ax=ax, max_cycles=max_cycles, title=title, lanes=lanes)
        for (lab, _), off in zip(self.parts[1:], self.offsets[1:]):
            ax.axvline(off, color="k", ls="--", lw=0.8)
            ax.text(off, -0.6, f" {lab}", fontsize=8, va="bottom")
        if path is not None:
            ax.figure.tight_layout()
            ax.figure.savefig(path, dpi=110)
        return ax


jax.tree_util.register_pytree_node(
    SequenceReport,
    lambda s: (tuple(r for _, r in s.parts), (tuple(lab for lab, _ in s.parts), s.name)),
    lambda meta, reps: SequenceReport(tuple(zip(meta[0], reps)), meta[1]),
)

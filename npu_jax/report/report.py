"""The Report: everything a kernel run cost, computed from the final core states.

A Report is a pytree (it can leave ``jax.jit``); its properties turn the exact wide counters into
Python ints and ratios once the arrays are concrete. Numbers here are never typed in: each one is
read from the state the kernel left.
"""

from __future__ import annotations

import dataclasses
import os

import jax
import numpy as np

from npu_jax.core import pipes, sanitize, wide
from npu_jax.core.pipes import COUNTER_INDEX, HBM_PATHS, LANE_ORDER, PATHS, RATIO_NAMES
from npu_jax.hw import costs
from npu_jax.hw.config import HardwareConfig
from npu_jax.report import events as trace_events
from npu_jax.report.chrome import write_chrome_trace
from npu_jax.report.names import LaneDict, by_lane
from npu_jax.report.plot import plot_timeline

_GM_PATHS = tuple(p for p in PATHS if "GM" in p)
_GM_IN_PATHS = tuple(p for p in PATHS if p.startswith("GM->"))


@dataclasses.dataclass(frozen=True)
class Report:
    """Cycles, bytes, FLOPs and pipe activity of one kernel run (or a sequence of runs).

    Arrays (n = cores, P = pipes, C = counters; trailing 2 = wide integer). Per-pipe figures
    (``pipe_busy``, ``bottleneck``, ``ratios``, traces) use the profiler's lane names: MTE2, MTE1,
    CUBE, FIXP, VECTOR, MTE3, SCALAR (``npu_jax.core.pipes.LANES`` maps the kernels' pipe names).
    """

    pipe_free: jax.Array  # (n, P, 2): each core's pipe end times
    busy: jax.Array  # (n, P, 2): busy cycles per pipe
    n_instr: jax.Array  # (n, P) int32: instructions per pipe
    counters: jax.Array  # (n, C, 2): bytes per path, flops
    trace: dict  # per-core trace arrays (leading n) or {}
    overlapping_writes: jax.Array  # () int32: output elements written by more than one core
    unwritten: jax.Array  # () int32: output elements no core wrote
    hw: HardwareConfig
    name: str = "kernel"
    workload: str = ""
    operand: str = "fp16"
    offset: int = 0  # cycle at which this run starts (for sequences of kernels)
    l2_kept: tuple = ()  # GM tensors the L2 keeps after this kernel (resident for the next one)
    extras: dict = dataclasses.field(default_factory=dict)  # related runs reported on their own
    useful_flops: jax.Array | None = None  # (2,) wide: the workload's FLOPs, when the kernel pads
    san_findings: jax.Array | None = None  # (n, 4, KEEP + 1, NF) int32: findings per sanitizer (sanitize.py)
    overlap_at: jax.Array | None = None  # (6,) int32: first element two cores wrote, and by what
    san_logged: jax.Array | None = None  # (n,) int32: instructions the sanitizers' log saw per core
    san_log: jax.Array | None = None  # (n, capacity, LW) int32: the sanitizers' event log, unanalysed
    san_flags: jax.Array | None = None  # (n, P, P, E) bool: flags still set at the end
    sanitizer: object = None  # sanitize.SiteTable: decodes findings into source lines (static)
    # findings the kernel's trace showed (an asc kernel's static checks): tuples of Finding's fields
    static_findings: tuple = ()

    @classmethod
    def from_cores(cls, cores, *, name, workload, operand, overlapping_writes, unwritten) -> Report:
        return cls(
            cores.pipe_free,
            cores.pipe_busy,
            cores.n_instr,
            cores.counters,
            cores.trace,
            overlapping_writes,
            unwritten,
            cores.ctx.hw,
            name,
            workload,
            operand,
        )

    # ---- raw figures ---------------------------------------------------------------------------
    @property
    def n_cores(self) -> int:
        return int(np.shape(self.n_instr)[0])

    @property
    def core_cycles(self) -> np.ndarray:
        """When each core's last pipe finishes: an int64 array, one entry per core."""
        return wide.to_numpy(self.pipe_free).max(axis=1)

    @property
    def core_end(self) -> int:
        """When the last pipe of the last core finishes, counted from the kernel's first instruction."""
        return int(self.core_cycles.max())

    @property
    def launch_cycles(self) -> int:
        """The kernel launch's start-up (``Assumed.launch_us``), before its first instruction."""
        return self.hw.launch_cycles

    @property
    def hbm_bytes(self) -> int:
        """Bytes the chip's HBM moved for this kernel: reads that missed L2, and every write."""
        return sum(self._counter(p) for p in HBM_PATHS)

    @property
    def hbm_cycles(self) -> int:
        """The fewest cycles the chip's HBM (shared by every core) needs for :attr:`hbm_bytes`."""
        return int(costs.hbm_cycles(costs.HwNumbers.of(self.hw), self.hbm_bytes))

    @property
    def l2_hit_bytes(self) -> int:
        """GM bytes read that were already in L2."""
        return sum(self._counter(p) for p in _GM_IN_PATHS) - self._counter("HBM->L2")

    @property
    def cycles(self) -> int:
        """Total cycles: the launch, then the later of the last core's last pipe and the chip's HBM
        time for what the kernel moved (``costs.kernel_cycles``)."""
        return int(costs.kernel_cycles(costs.HwNumbers.of(self.hw), self.core_end, self.hbm_bytes))

    @property
    def time_us(self) -> float:
        return self.cycles / (self.hw.clock_ghz * 1e3)

    @property
    def pipe_busy(self) -> LaneDict:
        """Busy cycles per lane (MTE2, MTE1, CUBE, FIXP, VECTOR, MTE3, SCALAR), summed over cores.
        Asked for a kernel-side pipe name (``"M"``), it raises a KeyError naming the lane (``"CUBE"``)."""
        return by_lane(int(v) for v in wide.to_numpy(self.busy).sum(axis=0))

    def _counter(self, name: str) -> int:
        return int(wide.to_numpy(self.counters)[:, COUNTER_INDEX[name]].sum())

    @property
    def bytes(self) -> dict[str, int]:
        """Bytes moved per path, summed over cores (the cores' paths, then HBM's)."""
        return {p: self._counter(p) for p in PATHS + HBM_PATHS}

    @property
    def gm_bytes(self) -> int:
        return sum(self._counter(p) for p in _GM_PATHS)

    @property
    def flops(self) -> int:
        """Useful FLOPs: the workload's own count when the kernel declared one (a conv's
        2 N Ho Wo K C kh kw, excluding channel and edge-tile padding), else 2 m n k summed over
        every Mmad's real m, n, k."""
        if self.useful_flops is not None:
            return wide.to_int(self.useful_flops)
        return self._counter("flops")

    @property
    def mmad_flops(self) -> int:
        """2 m n k summed over the m, n, k every Mmad was issued with (padding included)."""
        return self._counter("flops")

    @property
    def flops_issued(self) -> int:
        """FLOPs the Cube spent, padded to whole fractals."""
        return self._counter("flops_issued")

    # ---- ratios in the vendor's vocabulary -----------------------------------------------------
    @property
    def ratios(self) -> dict[str, float]:
        """Busy / elapsed per pipe over all cores: mac_ratio, mte1_ratio, mte2_ratio, ..."""
        return pipes.ratios(self.pipe_busy, self.cycles, self.n_cores)

    @property
    def peak_flops_per_cycle(self) -> int:
        """The chip's peak: every core of the preset, whether the kernel used it or not."""
        return self.hw.peak_flops_per_cycle(self.operand) * self.hw.num_cores

    @property
    def pct_peak(self) -> float:
        """Useful FLOPs / (cycles x the chip's peak FLOP per cycle), in percent. A kernel that
        leaves cores idle is charged for them, as a user of the chip would see it."""
        return 100.0 * self.flops / max(1, self.cycles * self.peak_flops_per_cycle)

    @property
    def pct_peak_launched(self) -> float:
        """% of the peak of the cores the kernel was launched on."""
        return (
            100.0
            * self.flops
            / max(1, self.cycles * self.hw.peak_flops_per_cycle(self.operand) * self.n_cores)
        )

    @property
    def arithmetic_intensity(self) -> float:
        """Useful FLOPs per GM byte."""
        return self.flops / max(1, self.gm_bytes)

    @property
    def bottleneck(self) -> str:
        """What sets the time: the lane that was busy longest (the one to fix first), or ``HBM`` when
        the chip's memory, shared by every core, needs longer than any core runs."""
        return pipes.bottleneck(self.pipe_busy, self.hbm_cycles, self.core_end)

    @property
    def roofline(self) -> str:
        """Compute- or memory-bound, from the machine balance (peak FLOP per GM byte)."""
        balance = self.hw.peak_flops_per_cycle(self.operand) / self.hw.gm_rate(self.n_cores)
        ai = self.arithmetic_intensity
        kind = "compute-bound" if ai >= balance else "memory-bound"
        return f"{kind} (intensity {ai:.1f} FLOP/B vs machine balance {balance:.1f})"

    def check(self) -> Report:
        """Raise (or warn, per the launch's ``checks``) if the run wrote an output element from two
        cores or a sanitizer found something, here or in ``extras``; returns self."""
        for r in [self] + [v for v in self.extras.values() if isinstance(v, Report)]:
            sanitize.raise_or_warn(r)
        return self

    def findings(self) -> list:
        """The sanitizers' findings, decoded: ``sanitize.Finding`` objects whose ``message()`` names
        the instruction, its source line, pipe, allocation and tile. Per check, up to ``KEEP`` distinct
        findings of the replay (each with its ``count``), or, for a check the kernel's trace found
        something for (an ``asc`` kernel), the trace's: one per line (the first rule broken there).
        The replay's findings of that check are then left out: they are most often the same bug seen
        again, later (a buffer never filled because its copy was refused, read by the next call)."""
        cached = self.__dict__.get("_found")
        if cached is not None:
            return list(cached)
        found = sanitize.findings_of(self)
        if self.static_findings:
            static, lines = [], set()
            for f in self.static_findings:
                if (f[0], f[7]) not in lines:
                    lines.add((f[0], f[7]))
                    static.append(sanitize.Finding(*f[:13], dict(f[13]), *f[14:]))
            checks = {f.check for f in static}
            found = static + [f for f in found if f.check not in checks]
        object.__setattr__(self, "_found", tuple(found))  # decoded once (the replay may run for it)
        return found

    # ---- presentation --------------------------------------------------------------------------
    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "workload": self.workload,
            "hw": self.hw.name,
            "cores": self.n_cores,
            "cycles": self.cycles,
            "time_us": self.time_us,
            "pct_peak": self.pct_peak,
            "flops": self.flops,
            "gm_bytes": self.gm_bytes,
            "bytes": self.bytes,
            "launch_cycles": self.launch_cycles,
            "hbm_bytes": self.hbm_bytes,
            "hbm_cycles": self.hbm_cycles,
            "l2_hit_bytes": self.l2_hit_bytes,
            "ratios": self.ratios,
            "bottleneck": self.bottleneck,
        }

    def summary(self) -> str:
        """A text table of the run."""
        r = self.ratios
        busy = self.pipe_busy
        lines = [
            f"{self.name} on {self.hw.name} ({self.n_cores} core{'s' * (self.n_cores > 1)})"
            + (f": {self.workload}" if self.workload else ""),
            f"  cycles            {self.cycles:>14,}   ({self.time_us:,.2f} us at {self.hw.clock_ghz} GHz)",
            f"  % of peak         {self.pct_peak:>14.1f}   ({self.flops:,} useful FLOP; "
            f"{self.pct_peak_launched:.1f}% of the {self.n_cores} launched core"
            f"{'s' * (self.n_cores > 1)})",
            f"  GM bytes          {self.gm_bytes:>14,}   (intensity {self.arithmetic_intensity:.1f} FLOP/B)",
            f"  bottleneck        {self.bottleneck:>14}   {self.roofline}",
            "  pipe    busy cycles   ratio           instr",
        ]
        ninstr = by_lane(np.asarray(self.n_instr).sum(axis=0))
        for lane in LANE_ORDER:
            if busy[lane] or ninstr[lane]:
                lines.append(
                    f"  {lane:<7}{busy[lane]:>13,}   {RATIO_NAMES[lane]:<13}{r[RATIO_NAMES[lane]]:>5.2f}"
                    f"{int(ninstr[lane]):>10,}"
                )
        lines.append("  path          bytes")
        for p, b in self.bytes.items():
            if b:
                lines.append(f"  {p:<9}{b:>14,}")
        if self.san_log is not None or self.san_findings is not None or self.static_findings:
            found = sanitize.summary_lines(self.findings())
            lines += ["  sanitizers"] * bool(found) + [f"    {line}" for line in found]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def events(self, core: int = 0) -> list[dict]:
        """Instructions of one core, in issue order: dicts with lane, op, start, end (cycles), seq,
        path and bytes (what it moved, if anything), tile (the coordinates of ``core.at_tile``)."""
        return trace_events.instr_events(self.trace, core, self.offset + self.launch_cycles)

    def sync_events(self, core: int = 0) -> list[dict]:
        """SetFlag / WaitFlag operations of one core, in program order (see ``report/events.py``)."""
        return trace_events.sync_events(self.trace, core, self.offset + self.launch_cycles)

    def flows(self, core: int = 0) -> list[dict]:
        """Each SetFlag of one core with the WaitFlag it released: dicts ``set`` and ``wait``."""
        return trace_events.pair_flows(self.sync_events(core))

    @property
    def trace_dropped(self) -> int:
        """Events (instructions and flag operations) over the trace's capacity, over all cores."""
        return trace_events.dropped(self.trace)

    def to_chrome_trace(self, path: str | os.PathLike, cores: list[int] | None = None) -> str:
        """Write Trace Event JSON, openable in Perfetto / chrome://tracing: one process per core, one
        lane per pipe (MTE2, MTE1, CUBE, FIXP, VECTOR, MTE3, SCALAR), flow arrows from each SetFlag
        to the WaitFlag it released, counter tracks of bytes per path and flags set (``chrome.py``).
        Times are in us."""
        return write_chrome_trace(self, path, cores)

    def plot_timeline(
        self,
        path: str | os.PathLike | None = None,
        core: int = 0,
        ax=None,
        max_cycles: int | None = None,
        title: str | None = None,
        lanes=None,
    ):
        """A Gantt chart of one core's lanes (matplotlib), consecutive instructions in alternating
        shades; saved as PNG when ``path`` is given. ``lanes``: the rows to draw (default: the lanes
        that ran something, in lane order)."""
        return plot_timeline(
            self, path=path, core=core, ax=ax, max_cycles=max_cycles, title=title, lanes=lanes
        )


jax.tree_util.register_dataclass(
    Report,
    data_fields=[
        "pipe_free",
        "busy",
        "n_instr",
        "counters",
        "trace",
        "overlapping_writes",
        "unwritten",
        "extras",
        "useful_flops",
        "san_findings",
        "overlap_at",
        "san_logged",
        "san_log",
        "san_flags",
    ],
    meta_fields=["hw", "name", "workload", "operand", "offset", "sanitizer", "l2_kept", "static_findings"],
)

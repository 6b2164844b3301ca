"""The Report: everything a kernel run cost, computed from the final core states.

A Report is a pytree (it can leave ``jax.jit``); its properties turn the exact wide counters into
Python ints and ratios once the arrays are concrete. Numbers here are never typed in: each one is
read from the state the kernel left.
"""

from __future__ import annotations

import dataclasses
import json
import os

import jax
import numpy as np

from npu_jax.core import sanitize, wide
from npu_jax.core.isa import OPS
from npu_jax.core.pipes import COUNTER_INDEX, HBM_PATHS, LANES, PATHS, PIPES, RATIO_NAMES
from npu_jax.hw import costs
from npu_jax.hw.config import HardwareConfig
from npu_jax.report.plot import plot_timeline

_GM_PATHS = tuple(p for p in PATHS if "GM" in p)
_GM_IN_PATHS = tuple(p for p in PATHS if p.startswith("GM->"))


@dataclasses.dataclass(frozen=True)
class Report:
    """Cycles, bytes, FLOPs and pipe activity of one kernel run (or a sequence of runs).

    Arrays (n = cores, P = pipes, C = counters; trailing 2 = wide integer):
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
    san_findings: jax.Array | None = None  # (n, 4, NF) int32: first finding per sanitizer (sanitize.py)
    overlap_at: jax.Array | None = None  # (6,) int32: first element two cores wrote, and by what
    san_logged: jax.Array | None = None  # (n,) int32: instructions the sanitizers' log saw per core
    san_log: jax.Array | None = None  # (n, capacity, LW) int32: the sanitizers' event log, unanalysed
    san_flags: jax.Array | None = None  # (n, P, P, E) bool: flags still set at the end
    sanitizer: object = None  # sanitize.SiteTable: decodes findings into source lines (static)

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
    def pipe_busy(self) -> dict[str, int]:
        """Busy cycles per pipe (MTE2, MTE1, M, FIX, V, MTE3, S), summed over cores."""
        b = wide.to_numpy(self.busy).sum(axis=0)
        return {p: int(b[i]) for i, p in enumerate(PIPES)}

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
        total = max(1, self.cycles) * self.n_cores
        busy = self.pipe_busy
        return {RATIO_NAMES[p]: busy[p] / total for p in PIPES}

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
        """What sets the time: the pipe that was busy longest (the one to fix first), or ``HBM`` when
        the chip's memory, shared by every core, needs longer than any core runs."""
        if self.hbm_cycles > self.core_end:
            return "HBM"
        busy = self.pipe_busy
        return max(PIPES, key=lambda p: busy[p])

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
        """The sanitizers' findings (first per check), decoded: ``sanitize.Finding`` objects whose
        ``message()`` names the instruction, its source line, pipe, allocation and tile."""
        return sanitize.findings_of(self)

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
        ninstr = np.asarray(self.n_instr).sum(axis=0)
        for i, p in enumerate(PIPES):
            if busy[p] or ninstr[i]:
                lines.append(
                    f"  {LANES[p]:<7}{busy[p]:>13,}   {RATIO_NAMES[p]:<13}{r[RATIO_NAMES[p]]:>5.2f}"
                    f"{int(ninstr[i]):>10,}"
                )
        lines.append("  path          bytes")
        for p, b in self.bytes.items():
            if b:
                lines.append(f"  {p:<9}{b:>14,}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def events(self, core: int = 0) -> list[dict]:
        """Trace events of one core: dicts with pipe, lane, op, start, end (cycles)."""
        if not self.trace:
            raise ValueError("this run kept no trace; pass trace=True (or trace_capacity=N).")
        t = {k: np.asarray(v)[core] for k, v in self.trace.items()}
        n = min(int(t["n"]), t["pipe"].shape[0])
        start, end = wide.to_numpy(t["start"][:n]), wide.to_numpy(t["end"][:n])
        return [
            {
                "pipe": PIPES[int(p)],
                "lane": LANES[PIPES[int(p)]],
                "op": OPS[int(o)],
                "start": int(s) + self.offset + self.launch_cycles,
                "end": int(e) + self.offset + self.launch_cycles,
            }
            for p, o, s, e in zip(t["pipe"][:n], t["op"][:n], start, end)
        ]

    @property
    def trace_dropped(self) -> int:
        if not self.trace:
            return 0
        n = np.asarray(self.trace["n"])
        cap = np.shape(self.trace["pipe"])[1]
        return int(np.maximum(n - cap, 0).sum())

    def to_chrome_trace(self, path: str | os.PathLike, cores: list[int] | None = None) -> str:
        """Write Trace Event JSON (one process per core, one thread lane per pipe: CUBE, VECTOR,
        SCALAR, MTE1, MTE2, MTE3, FIXP), openable in Perfetto / chrome://tracing. Times are in us."""
        return write_chrome_trace(self, path, cores)

    def plot_timeline(
        self, path: str | os.PathLike | None = None, core: int = 0, ax=None, max_cycles: int | None = None
    ):
        """A Gantt chart of one core's pipes (matplotlib); saved as PNG when ``path`` is given."""
        return plot_timeline(self, path=path, core=core, ax=ax, max_cycles=max_cycles)


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
    meta_fields=["hw", "name", "workload", "operand", "offset", "sanitizer", "l2_kept"],
)


def write_chrome_trace(rep, path: str | os.PathLike, cores: list[int] | None = None) -> str:
    """Trace Event JSON of any report with ``hw``, ``name``, ``cycles``, ``n_cores`` and
    ``events(core)`` (a Report, or a SequenceReport whose events name their ``part``)."""
    lanes = ["CUBE", "VECTOR", "SCALAR", "MTE1", "MTE2", "MTE3", "FIXP"]
    tid = {lane: i for i, lane in enumerate(lanes)}
    cyc_per_us = rep.hw.clock_ghz * 1e3
    out = []
    for c in cores if cores is not None else range(rep.n_cores):
        out.append(
            {"ph": "M", "name": "process_name", "pid": c, "tid": 0, "args": {"name": f"{rep.name} core {c}"}}
        )
        for lane in lanes:
            out.append({"ph": "M", "name": "thread_name", "pid": c, "tid": tid[lane], "args": {"name": lane}})
        for ev in rep.events(c):
            if ev["end"] <= ev["start"]:
                continue
            part = {"part": ev["part"]} if "part" in ev else {}
            out.append(
                {
                    "ph": "X",
                    "name": ev["op"],
                    "cat": "/".join([*part.values(), ev["pipe"]]),
                    "pid": c,
                    "tid": tid[ev["lane"]],
                    "ts": ev["start"] / cyc_per_us,
                    "dur": (ev["end"] - ev["start"]) / cyc_per_us,
                    "args": {**part, "start_cycle": ev["start"], "end_cycle": ev["end"]},
                }
            )
    with open(path, "w") as f:
        json.dump(
            {
                "traceEvents": out,
                "displayTimeUnit": "ns",
                "otherData": {"hw": rep.hw.name, "kernel": rep.name, "cycles": rep.cycles},
            },
            f,
        )
    return os.fspath(path)

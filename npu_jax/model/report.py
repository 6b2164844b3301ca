"""A network's report: per layer (kernels, fused ops, tiling, cycles, % of peak, bottleneck, bytes),
totals and images/s, a text table, a whole-network Perfetto trace, a per-layer time plot, and what
fusion saved (:func:`fusion_saving`)."""

from __future__ import annotations

import dataclasses
import json
import os

from npu_jax.hw.config import HardwareConfig


@dataclasses.dataclass(frozen=True)
class KernelCost:
    """One kernel launch: ``label`` (conv, eltwise, gemm, pool), the kernel's ``name``, its cycles
    (launch included), the launch's share, GM bytes, useful FLOPs, the bottleneck lane, the
    emulator's Report when the kernel ran (None when priced in closed form), the bytes the chip's
    DRAM moved for it (``hbm_bytes``) and whether the L2 kept its output (``out_kept``: its
    write-back to DRAM was not charged to the kernel)."""

    label: str
    name: str
    cycles: int
    launch_cycles: int
    gm_bytes: int
    flops: int
    bottleneck: str
    report: object = None
    hbm_bytes: int = 0
    out_kept: bool = False

    @classmethod
    def of(cls, label: str, rep, flops: int | None = None, output: str = "y") -> KernelCost:
        """From an emulator :class:`~npu_jax.Report` (its launch, bytes, FLOPs and bottleneck);
        ``output``: the GM tensor the kernel writes."""
        return cls(
            label,
            rep.name,
            int(rep.cycles),
            int(rep.launch_cycles),
            int(rep.gm_bytes),
            int(rep.flops if flops is None else flops),
            rep.bottleneck,
            rep,
            int(rep.hbm_bytes),
            output in rep.l2_kept,
        )


@dataclasses.dataclass(frozen=True, eq=False)
class LayerReport:
    """One emulated layer.

    Attributes:
        name: the graph node the layer starts at. op: ``conv``, ``gemm``, ``pool`` or ``eltwise``.
        fused: ``"OpType:node"`` of each ONNX node folded or fused into it.
        steps: its element-wise chain; ``epilogue``: where each part ran (the conv's, a vector kernel).
        inputs, output: the ONNX tensor names it reads and writes.
        tiling: the conv's :class:`~npu_jax.ConvTiling` (None for other kernels); tiling_by: how it
            was found. kernels: one :class:`KernelCost` per launch. flops: useful FLOPs.
        refused: ``"OpType:node: why"`` of each candidate the planner did not fuse into it.
    """

    name: str
    op: str
    fused: tuple[str, ...]
    steps: tuple[str, ...]
    inputs: tuple[str, ...]
    output: str
    tiling: object
    tiling_by: str
    kernels: tuple[KernelCost, ...]
    flops: int
    hw: HardwareConfig
    operand: str
    refused: tuple[str, ...] = ()
    wait_cycles: int = 0  # the "l2" schedule: its stack's DRAM time beyond its kernels (the last layer's)

    @property
    def cycles(self) -> int:
        return sum(k.cycles for k in self.kernels) + self.wait_cycles

    @property
    def launch_cycles(self) -> int:
        return sum(k.launch_cycles for k in self.kernels)

    @property
    def time_us(self) -> float:
        return self.cycles / (self.hw.clock_ghz * 1e3)

    @property
    def gm_bytes(self) -> int:
        return sum(k.gm_bytes for k in self.kernels)

    @property
    def pct_peak(self) -> float:
        peak = self.hw.peak_flops_per_cycle(self.operand) * self.hw.num_cores
        return 100.0 * self.flops / max(1, self.cycles * peak)

    @property
    def bottleneck(self) -> str:
        """The bottleneck of the layer's longest kernel."""
        return max(self.kernels, key=lambda k: k.cycles).bottleneck

    @property
    def epilogue(self) -> str:
        return " + ".join(k.name for k in self.kernels)

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "op": self.op,
            "fused": list(self.fused),
            "refused": list(self.refused),
            "steps": list(self.steps),
            "inputs": list(self.inputs),
            "output": self.output,
            "tiling": None if self.tiling is None else repr(self.tiling),
            "tiling_by": self.tiling_by,
            "kernels": [
                {
                    k: getattr(kc, k)
                    for k in ("label", "name", "cycles", "launch_cycles", "gm_bytes", "flops", "bottleneck")
                }
                for kc in self.kernels
            ],
            "cycles": self.cycles,
            "wait_cycles": self.wait_cycles,
            "time_us": self.time_us,
            "pct_peak": self.pct_peak,
            "bottleneck": self.bottleneck,
            "gm_bytes": self.gm_bytes,
            "flops": self.flops,
        }


@dataclasses.dataclass(frozen=True, eq=False)
class NetworkReport:
    """A whole network, estimated (timing only) or run (with data).

        ``layers`` in execution order; ``tensors`` the kept layer outputs by ONNX name (``run(keep=True)``);
        ``decisions`` the fusion planner's; ``wall_s`` and ``cpu_s`` how long the estimate or run took on
    the host (wall clock, and this process's CPU time).
    """

    name: str
    mode: str  # "estimate" or "run"
    layers: tuple[LayerReport, ...]
    hw: HardwareConfig
    batch: int
    operand: str
    strategy: str
    fused: bool
    decisions: tuple = ()
    tensors: dict = dataclasses.field(default_factory=dict)
    wall_s: float = 0.0
    cpu_s: float = 0.0
    schedule: object = None  # the npu_jax.model.schedule.Schedule the layers ran under

    @property
    def cycles(self) -> int:
        """Kernels run one after another: the sum of every layer's cycles (launches included)."""
        return sum(la.cycles for la in self.layers)

    @property
    def time_us(self) -> float:
        return self.cycles / (self.hw.clock_ghz * 1e3)

    @property
    def images_per_second(self) -> float:
        return self.batch / max(1e-30, self.cycles / (self.hw.clock_ghz * 1e9))

    @property
    def flops(self) -> int:
        return sum(la.flops for la in self.layers)

    @property
    def gm_bytes(self) -> int:
        return sum(la.gm_bytes for la in self.layers)

    @property
    def launches(self) -> int:
        return sum(len(la.kernels) for la in self.layers)

    @property
    def launch_cycles(self) -> int:
        return sum(la.launch_cycles for la in self.layers)

    @property
    def pct_peak(self) -> float:
        peak = self.hw.peak_flops_per_cycle(self.operand) * self.hw.num_cores
        return 100.0 * self.flops / max(1, self.cycles * peak)

    def layer(self, name: str) -> LayerReport:
        for la in self.layers:
            if la.name == name:
                return la
        raise KeyError(f"no layer {name!r}; layers are {[la.name for la in self.layers]}.")

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "mode": self.mode,
            "hw": self.hw.name,
            "batch": self.batch,
            "operand": self.operand,
            "strategy": self.strategy,
            "fused": self.fused,
            "cycles": self.cycles,
            "time_us": self.time_us,
            "images_per_second": self.images_per_second,
            "flops": self.flops,
            "gm_bytes": self.gm_bytes,
            "pct_peak": self.pct_peak,
            "launches": self.launches,
            "launch_cycles": self.launch_cycles,
            "wall_s": self.wall_s,
            "cpu_s": self.cpu_s,
            "layers": [la.as_dict() for la in self.layers],
            "schedule": None if self.schedule is None else self.schedule.as_dict(),
            "decisions": [dataclasses.asdict(d) for d in self.decisions],
        }

    def summary(self) -> str:
        """Per-layer rows, the totals and images/s."""
        head = ("layer", "op", "fused", "kernels", "cycles", "us", "% peak", "bottleneck", "GM MB")
        rows = [
            (
                la.name,
                la.op,
                ",".join(f.split(":")[0] for f in la.fused) or "-",
                str(len(la.kernels)),
                f"{la.cycles:,}",
                f"{la.time_us:,.2f}",
                f"{la.pct_peak:.1f}",
                la.bottleneck,
                f"{la.gm_bytes / 1e6:.2f}",
            )
            for la in self.layers
        ]
        total = ("total", "", "", str(self.launches), f"{self.cycles:,}", f"{self.time_us:,.2f}")
        total += (f"{self.pct_peak:.1f}", "", f"{self.gm_bytes / 1e6:.2f}")
        w = [max(len(r[i]) for r in [head, *rows, total]) for i in range(len(head))]
        fmt = lambda r: "  ".join(c.ljust(w[i]) if i < 4 else c.rjust(w[i]) for i, c in enumerate(r))  # noqa: E731
        kind = "fused" if self.fused else "unfused"
        lines = [
            f"{self.name} on {self.hw.name}, batch {self.batch}, {self.operand}, {self.strategy}, {kind} "
            f"({self.mode}: {len(self.layers)} layers, {self.launches} kernels)",
            fmt(head),
            *map(fmt, rows),
            fmt(total),
            f"{self.images_per_second:,.1f} images/s; launches {100 * self.launch_cycles / max(1, self.cycles):.1f}% "
            f"of the time; {self.flops / 1e9:.3f} GFLOP",
        ]
        if self.schedule is not None and self.schedule.stacks:
            lines.append(self.schedule.table())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def _launch_order(self):
        """(stack index or None, slice, layer, kernel) in the order the kernels run: layer by layer,
        or under an "l2" schedule stack by stack, slice by slice, the stack's layers within a slice."""
        stacks = self.schedule.stacks if self.schedule is not None else ()
        if not stacks:
            return [(None, 0, la, k) for la in self.layers for k in la.kernels]
        by_name = {la.name: la for la in self.layers}
        order = []
        for n, st in enumerate(stacks):
            for sl in range(st.slices):
                for name in st.layers:
                    la = by_name[name]
                    per = len(la.kernels) // st.slices
                    order += [(n, sl, la, k) for k in la.kernels[sl * per : (sl + 1) * per]]
        return order

    def to_chrome_trace(self, path: str | os.PathLike) -> str:
        """Trace Event JSON of the whole network (open in Perfetto): the kernels end to end on one
        track, each launch a slice of its own before its kernel, with cycles, bytes and bottleneck
        as arguments; times in microseconds of the chip's clock. Under an "l2" schedule a third
        track shows the stacks (what stayed on chip, what went to DRAM) and their slices, and a
        stack's DRAM wait follows its last kernel. Returns the path."""
        mhz = self.hw.clock_ghz * 1e3
        events = [
            {"ph": "M", "pid": 0, "name": "process_name", "args": {"name": f"{self.name} on {self.hw.name}"}},
            {"ph": "M", "pid": 0, "tid": 0, "name": "thread_name", "args": {"name": "launch"}},
            {"ph": "M", "pid": 0, "tid": 1, "name": "thread_name", "args": {"name": "kernels"}},
        ]
        stacks = self.schedule.stacks if self.schedule is not None else ()
        if stacks:
            events.append({"ph": "M", "pid": 0, "tid": 2, "name": "thread_name", "args": {"name": "stacks"}})
        t, opened = 0, {}  # opened: (stack, slice) -> its start
        order = self._launch_order()
        for pos, (n, sl, la, k) in enumerate(order):
            opened.setdefault((n, sl), t)
            args = {"layer": la.name, "fused": list(la.fused), "cycles": k.cycles, "gm_bytes": k.gm_bytes}
            args.update(
                bottleneck=k.bottleneck,
                flops=k.flops,
                dram_bytes=k.hbm_bytes,
                tiling=None if la.tiling is None else repr(la.tiling),
            )
            events.append(
                {
                    "ph": "X",
                    "pid": 0,
                    "tid": 0,
                    "name": "launch",
                    "ts": t / mhz,
                    "dur": k.launch_cycles / mhz,
                    "args": {"layer": la.name, "cycles": k.launch_cycles},
                }
            )
            body = k.cycles - k.launch_cycles
            events.append(
                {
                    "ph": "X",
                    "pid": 0,
                    "tid": 1,
                    "name": f"{la.name} [{k.label}]" + ("" if n is None else f" slice {sl}"),
                    "ts": (t + k.launch_cycles) / mhz,
                    "dur": body / mhz,
                    "args": args,
                }
            )
            t += k.cycles
            last = pos + 1 == len(order) or order[pos + 1][:2] != (n, sl)
            if n is not None and last:
                st = stacks[n]
                if sl + 1 == st.slices and la.wait_cycles:  # the stack's DRAM bound beyond its kernels
                    events.append(
                        {
                            "ph": "X",
                            "pid": 0,
                            "tid": 1,
                            "name": "DRAM wait",
                            "ts": t / mhz,
                            "dur": la.wait_cycles / mhz,
                            "args": {"stack": n, "cycles": la.wait_cycles},
                        }
                    )
                    t += la.wait_cycles
                events.append(
                    {
                        "ph": "X",
                        "pid": 0,
                        "tid": 2,
                        "name": f"stack {n} slice {sl} ({st.images} images)",
                        "ts": opened[(n, sl)] / mhz,
                        "dur": (t - opened[(n, sl)]) / mhz,
                        "args": {
                            "layers": list(st.layers),
                            "on_chip": list(st.on_chip),
                            "to_ddr": list(st.to_ddr),
                            "from_ddr": list(st.from_ddr),
                            "peak_bytes": st.peak_bytes,
                            "weight_bytes": st.weight_bytes,
                        },
                    }
                )
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ns"}, f)
        return os.fspath(path)

    def plot(self, path=None, ax=None):
        """A bar per layer: its time in microseconds, one segment per kernel coloured by kind (a conv's
        epilogue vector kernel orange), all the layer's launches hatched grey on top."""
        import matplotlib

        if ax is None and path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(max(6, 0.22 * len(self.layers)), 3.6))
        colours = {"conv": "tab:blue", "gemm": "tab:purple", "pool": "tab:green", "eltwise": "tab:orange"}
        mhz = self.hw.clock_ghz * 1e3
        xs = list(range(len(self.layers)))
        bottom = [0.0] * len(xs)
        for label, colour in colours.items():
            h = [
                sum(k.cycles - k.launch_cycles for k in la.kernels if k.label == label) / mhz
                for la in self.layers
            ]
            if any(h):
                ax.bar(xs, h, bottom=bottom, color=colour, label=label)
                bottom = [b + v for b, v in zip(bottom, h)]
        launches = [la.launch_cycles / mhz for la in self.layers]
        ax.bar(xs, launches, bottom=bottom, color="lightgrey", hatch="//", label="launch")
        waits = [la.wait_cycles / mhz for la in self.layers]  # an "l2" stack's DRAM wait, on its last layer
        if any(waits):
            bottom = [b + v for b, v in zip(bottom, launches)]
            ax.bar(xs, waits, bottom=bottom, color="tab:red", alpha=0.5, label="DRAM wait")
        ax.set_xticks(xs, [la.name for la in self.layers], rotation=90, fontsize=6)
        ax.set_ylabel("time (us)")
        ax.legend(fontsize=7, ncols=5, loc="upper left")
        ax.set_title(
            f"{self.name} on {self.hw.name}, batch {self.batch}: {self.time_us:,.1f} us, "
            f"{self.images_per_second:,.0f} img/s",
            fontsize=9,
        )
        if path is not None:
            ax.figure.tight_layout()
            ax.figure.savefig(path, dpi=110)
        return ax


@dataclasses.dataclass(frozen=True)
class FusionSaving:
    """What fusion saved across a network: per layer and in total, cycles and GM bytes."""

    rows: tuple  # (layer, unfused cycles, fused cycles, unfused GM bytes, fused GM bytes, kernels u/f)
    unfused: NetworkReport
    fused: NetworkReport

    @property
    def cycles_saved(self) -> int:
        return self.unfused.cycles - self.fused.cycles

    @property
    def gm_bytes_saved(self) -> int:
        return self.unfused.gm_bytes - self.fused.gm_bytes

    def table(self) -> str:
        head = ("layer", "unfused cyc", "fused cyc", "saved %", "unfused GM MB", "fused GM MB", "kernels")
        lines = []
        for name, uc, fc, ub, fb, uk, fk in self.rows:
            lines.append(
                (
                    name,
                    f"{uc:,}",
                    f"{fc:,}",
                    f"{100 * (uc - fc) / max(1, uc):.1f}",
                    f"{ub / 1e6:.2f}",
                    f"{fb / 1e6:.2f}",
                    f"{uk} -> {fk}",
                )
            )
        u, f = self.unfused, self.fused
        lines.append(
            (
                "total",
                f"{u.cycles:,}",
                f"{f.cycles:,}",
                f"{100 * self.cycles_saved / max(1, u.cycles):.1f}",
                f"{u.gm_bytes / 1e6:.2f}",
                f"{f.gm_bytes / 1e6:.2f}",
                f"{u.launches} -> {f.launches}",
            )
        )
        w = [max(len(r[i]) for r in [head, *lines]) for i in range(len(head))]
        return "\n".join(
            "  ".join(c.rjust(w[i]) if i else c.ljust(w[i]) for i, c in enumerate(r)) for r in [head, *lines]
        )

    def as_dict(self) -> dict:
        keys = (
            "layer",
            "unfused_cycles",
            "fused_cycles",
            "unfused_gm_bytes",
            "fused_gm_bytes",
            "unfused_kernels",
            "fused_kernels",
        )
        return {
            "layers": [dict(zip(keys, r)) for r in self.rows],
            "unfused_cycles": self.unfused.cycles,
            "fused_cycles": self.fused.cycles,
            "unfused_gm_bytes": self.unfused.gm_bytes,
            "fused_gm_bytes": self.fused.gm_bytes,
        }


def fusion_saving(unfused: NetworkReport, fused: NetworkReport) -> FusionSaving:
    """Layer by layer, what ``fused`` saves over ``unfused`` (two reports of the same network)."""
    if (
        [la.name for la in unfused.layers] != [la.name for la in fused.layers]
        or unfused.fused
        or not fused.fused
    ):
        raise ValueError(
            "fusion_saving compares an unfused and a fused report of the same network (same layers)."
        )
    rows = tuple(
        (u.name, u.cycles, f.cycles, u.gm_bytes, f.gm_bytes, len(u.kernels), len(f.kernels))
        for u, f in zip(unfused.layers, fused.layers)
    )
    return FusionSaving(rows, unfused, fused)


__all__ = ["FusionSaving", "KernelCost", "LayerReport", "NetworkReport", "fusion_saving"]

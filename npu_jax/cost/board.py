"""What the closed forms of the vector-side kernels share: the in-order pipe clocks and flags of
every core, kept as ``issue`` and ``sync`` keep them (numpy arrays over the cores), and the figures of
the Report they predict. ``cost/pool.py`` and ``cost/relayout.py`` walk their kernels' instruction
streams on it."""

from __future__ import annotations

import collections
import dataclasses

import numpy as np

from npu_jax.core import pipes
from npu_jax.core.pipes import LANES, PIPES
from npu_jax.hw import costs


@dataclasses.dataclass(frozen=True)
class KernelPrediction:
    """What the emulator's Report of a vector-side kernel's launch says (the pooling and relayout
    kernels' closed forms): ``cycles`` (launch included),
    ``core_end``, ``hbm_bytes`` and ``hbm_cycles``, ``bytes`` per path (the Report's ``bytes``,
    nonzero paths), ``pipe_busy`` per profiler lane (summed over cores), ``vector_bytes`` and
    ``bottleneck`` (the Report's rule)."""

    cycles: int
    core_end: int
    hbm_bytes: int
    hbm_cycles: int
    bytes: dict
    pipe_busy: dict
    vector_bytes: int

    @property
    def bottleneck(self) -> str:
        return pipes.bottleneck(self.pipe_busy, self.hbm_cycles, self.core_end)

    @property
    def gm_bytes(self) -> int:
        return self.bytes.get("GM->UB", 0) + self.bytes.get("UB->GM", 0)


class Board:
    """In-order pipe clocks and flags of every core (numpy arrays over the cores), as ``issue`` and
    ``sync`` keep them: an instruction starts when its pipe is free; SetFlag records the source
    pipe's free time, WaitFlag raises the destination's to it."""

    def __init__(self, ncores: int):
        z = np.zeros(ncores, np.int64)
        self.free = {p: z.copy() for p in PIPES}
        self.busy = {p: z.copy() for p in PIPES}
        self.flags = collections.defaultdict(lambda: z.copy())

    def run(self, pipe: str, cycles, when=True):
        c = np.where(when, np.asarray(cycles, np.int64), 0)
        self.free[pipe] = self.free[pipe] + c
        self.busy[pipe] = self.busy[pipe] + c

    def set(self, event: str, i: int, when=True):
        src = event.split("_")[0]
        self.flags[event, i] = np.where(when, self.free[src], self.flags[event, i])

    def wait(self, event: str, i: int, when=True):
        dst = event.split("_")[1]
        self.free[dst] = np.where(when, np.maximum(self.free[dst], self.flags[event, i]), self.free[dst])

    def prediction(self, h: costs.HwNumbers, counts: dict) -> KernelPrediction:
        """The launch's figures once every instruction has run: its cycles (the launch, then the
        later of the last core's end and the chip's HBM time for ``counts``' HBM bytes)."""
        core_end = int(max(int(f.max()) for f in self.free.values()))
        hbm = counts.get("HBM->L2", 0) + counts.get("L2->HBM", 0)
        return KernelPrediction(
            cycles=int(costs.kernel_cycles(h, core_end, hbm)),
            core_end=core_end,
            hbm_bytes=hbm,
            hbm_cycles=int(costs.hbm_cycles(h, hbm)),
            bytes={k: v for k, v in counts.items() if k != "vector_bytes" and v},
            pipe_busy={LANES[q]: int(self.busy[q].sum()) for q in PIPES},
            vector_bytes=counts.get("vector_bytes", 0),
        )


__all__ = ["Board", "KernelPrediction"]

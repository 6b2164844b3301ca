"""What the closed forms of the vector-side kernels share: the in-order pipe clocks and flags of
every core, kept as ``issue`` and ``sync`` keep them (numpy arrays over the cores), and the figures of
the Report they predict. ``cost/pool.py``, ``cost/relayout.py`` and ``cost/eltwise.py`` walk their
kernels' instruction streams on it."""

from __future__ import annotations

import collections
import dataclasses

import numpy as np

from npu_jax.core import l2, pipes
from npu_jax.core.board import BoardCore
from npu_jax.core.pipes import COUNTERS, HBM_PATHS, LANES, PATHS, PIPES
from npu_jax.hw import costs


@dataclasses.dataclass(frozen=True)
class KernelPrediction:
    """What the emulator's Report of a vector-side kernel's launch says (the pooling, relayout and
    element-wise kernels' closed forms): ``cycles`` (launch included), ``core_end``, ``hbm_bytes`` and
    ``hbm_cycles``, ``bytes`` per path (the Report's ``bytes``, nonzero paths), ``pipe_busy`` per
    profiler lane (summed over cores), ``vector_bytes``, the cores launched (``n_cores``) and
    ``bottleneck`` (the Report's rule)."""

    cycles: int
    core_end: int
    hbm_bytes: int
    hbm_cycles: int
    bytes: dict
    pipe_busy: dict
    vector_bytes: int
    n_cores: int
    l2_kept: tuple = ()  # GM tensors the L2 keeps after the launch (the Report's ``l2_kept``)

    @property
    def bottleneck(self) -> str:
        return pipes.bottleneck(self.pipe_busy, self.hbm_cycles, self.core_end)

    @property
    def gm_bytes(self) -> int:
        return self.bytes.get("GM->UB", 0) + self.bytes.get("UB->GM", 0)


class Board:
    """One launch on ``ncores`` cores, charged instruction by instruction as the emulator charges it:
    in-order pipe clocks and flags of every core (numpy arrays over the cores), as ``issue`` and
    ``sync`` keep them (an instruction starts when its pipe is free; SetFlag records the source pipe's
    free time, WaitFlag raises the destination's to it), and the launch's counters. The DataCopies
    and vector instructions cost the rules of ``hw/costs.py``; a read's L2 hits follow ``core/l2.py``
    for the launch's GM tensors ``gm`` and what the kernel before left in L2 (``l2_resident``)."""

    def __init__(self, hw, ncores: int, gm=(), l2_resident: tuple[str, ...] = ()):
        z = np.zeros(ncores, np.int64)
        self.free = {p: z.copy() for p in PIPES}
        self.busy = {p: z.copy() for p in PIPES}
        self.flags = collections.defaultdict(lambda: z.copy())
        self.h = costs.HwNumbers.of(hw)
        self.ncores = ncores
        self.mode = dict(l2.modes(hw, tuple(gm), tuple(l2_resident)))
        self.kept = l2.kept(hw, tuple(gm))  # what L2 keeps after the launch
        self.outputs = {s.name: s.name not in self.kept for s in gm if s.output}  # writes charged to HBM?
        self.rate, self.wrate = costs.gm_rate(self.h, ncores), costs.write_rate(self.h, ncores)
        self.counts: collections.Counter = collections.Counter()
        self.starts = collections.defaultdict(list)  # per GM input: bytes entered L2 before each read

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

    def _count(self, path: str, amount, when):
        self.counts[path] += int(np.where(when, amount, 0).sum())

    def read(self, name: str, nbytes, bursts, tracked=0, when=True, back: int | None = None):
        """DataCopy GM -> UB (MTE2) of ``nbytes`` of GM tensor ``name`` in ``bursts``: all of it hits
        L2 if the kernel before left the tensor there, ``tracked`` bytes (those some read of this
        kernel brought in before) if the L2 keeps it (or, under recency, tracks it), none if it
        streams. ``back``: how many reads of ``name`` ago (this one: 0) the tracked bytes were last
        read at the earliest (None: any time since the kernel began)."""
        m = self.mode.get(name, l2.STREAM)
        hits = nbytes if m == l2.RESIDENT else tracked if m in (l2.TRACK, l2.RECENT) else 0 * nbytes
        starts = self.starts[name]
        starts.append(self.counts["HBM->L2"] + self.counts["UB->GM"])  # bytes entered before this read
        if m == l2.RECENT and np.any(np.where(when, tracked, 0) > 0):
            # recency: a hit holds while fewer than the L2's bytes entered since the element's last
            # read (core/l2.py): bounded by all that entered from that read's start to this one's end
            first = starts[-1 - back] if back is not None and back < len(starts) else 0
            entered = starts[-1] + int(np.where(when, nbytes, 0).sum()) - first
            if not costs.l2_recent(self.h, entered):
                raise ValueError(
                    f"a vector kernel's closed form: under l2_policy='recency' a re-read of {name!r} "
                    f"may follow {entered} B entering the L2 ({int(self.h.l2)} B), which the closed form "
                    f"does not price. Run it on the emulator, or use hw.replace(l2_policy='smallest_first')."
                )
        self._count("GM->UB", nbytes, when)
        self._count("HBM->L2", nbytes - hits, when)
        bursts = np.where(nbytes > 0, bursts, 0)
        self.run("MTE2", costs.dma_in(self.h, nbytes, bursts, self.rate, hits), when)

    def write(self, nbytes, bursts, when=True, name: str | None = None):
        """DataCopy UB -> GM (MTE3) of ``nbytes`` in ``bursts`` of output ``name`` (None: the launch's
        one output), into L2: charged to HBM once unless the L2 keeps the tensor (``l2.write_back``)."""
        if name is None:
            if len(self.outputs) != 1:
                raise ValueError(f"Board.write: name one of the outputs {sorted(self.outputs)}.")
            (name,) = self.outputs
        self._count("UB->GM", nbytes, when)
        self._count("L2->HBM", nbytes if self.outputs[name] else 0 * nbytes, when)
        self.run("MTE3", costs.dma_out(self.h, nbytes, np.where(nbytes > 0, bursts, 0), self.wrate), when)

    def vector(self, nbytes, when=True, sources=None):
        """One vector instruction over ``nbytes`` (its widest operand's); ``sources``: the UB byte
        addresses of a binary op's two whole-tile sources, whose bank groups may collide
        (``costs.ub_read_conflict``, as the emulator decides it)."""
        self._count("vector_bytes", nbytes, when)
        conflict = False if sources is None else costs.ub_read_conflict(self.h, *sources)
        self.run("V", costs.vector(self.h, nbytes, conflict), when)

    def prediction(self) -> KernelPrediction:
        """The launch's figures once every instruction has run: its cycles (the launch, then the
        later of the last core's end and the chip's HBM time for the HBM bytes counted)."""
        core_end = int(max(int(f.max()) for f in self.free.values()))
        c, h = self.counts, self.h
        hbm = c["HBM->L2"] + c["L2->HBM"]
        return KernelPrediction(
            cycles=int(costs.kernel_cycles(h, core_end, hbm)),
            core_end=core_end,
            hbm_bytes=hbm,
            hbm_cycles=int(costs.hbm_cycles(h, hbm)),
            bytes={k: v for k, v in c.items() if k != "vector_bytes" and v},
            pipe_busy={LANES[q]: int(self.busy[q].sum()) for q in PIPES},
            vector_bytes=c["vector_bytes"],
            n_cores=self.ncores,
            l2_kept=self.kept,
        )


def prediction(core: BoardCore) -> KernelPrediction:
    """A kernel's figures from its run on the timing Board (``core/board.py``), by the Report's rules."""
    h = core.h
    c = {name: int(core.counters[:, i].sum()) for i, name in enumerate(COUNTERS)}
    hbm = sum(c[p] for p in HBM_PATHS)
    core_end = int(core.free.max())
    return KernelPrediction(
        cycles=int(costs.kernel_cycles(h, core_end, hbm)),
        core_end=core_end,
        hbm_bytes=hbm,
        hbm_cycles=int(costs.hbm_cycles(h, hbm)),
        bytes={p: c[p] for p in PATHS + HBM_PATHS if c[p]},
        pipe_busy={LANES[q]: int(core.busy[:, i].sum()) for i, q in enumerate(PIPES)},
        vector_bytes=c["vector_bytes"],
        n_cores=core.n,
        l2_kept=core.kept,
    )


__all__ = ["Board", "KernelPrediction", "prediction"]

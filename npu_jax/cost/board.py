"""The figures of a vector-side kernel's run on the timing Board (``core/board.py``), as the Report
states them: :class:`KernelPrediction` and :func:`prediction`. ``cost/eltwise.py``, ``cost/pool.py`` and
``cost/relayout.py`` run their kernels' own programs there; no instruction stream is walked twice."""

from __future__ import annotations

import dataclasses

import numpy as np

from npu_jax.core import l2, pipes
from npu_jax.core.board import BoardCore
from npu_jax.core.pipes import COUNTERS, HBM_PATHS, LANES, PATHS, PIPES
from npu_jax.core.policy import Policy
from npu_jax.core.state import Context
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


def on_board(hw, plan, gm, kernel, cores: int, l2_resident=(), extents=None) -> KernelPrediction:
    """A built-in vector-side kernel (``kernel(core, block)`` on ``plan``'s allocations and GM ``gm``)
    run on the timing Board, its figures as :func:`prediction` gives them; ``l2_resident``: the inputs
    the kernel before left in L2; ``extents``: the GM tensors' logical extents where smaller."""
    ctx = Context(
        hw,
        tuple(plan.allocs),
        tuple(gm),
        Policy().timing(),
        n_cores=cores,
        move_data=False,
        checks="none",
        l2_modes=l2.modes(hw, tuple(gm), tuple(l2_resident)),
    )
    return prediction(kernel(BoardCore(ctx, extents=extents), np.arange(cores)))


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
        l2_kept=core.mem.kept,
    )


__all__ = ["KernelPrediction", "on_board", "prediction"]

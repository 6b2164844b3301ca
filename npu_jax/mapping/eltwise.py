"""The element-wise vector kernel's mapping: how a (rows, cols) tensor is tiled through UB."""

from __future__ import annotations

import dataclasses

from npu_jax.core.buffers import Plan
from npu_jax.errors import CapacityError
from npu_jax.hw.config import FRACTAL_ROWS
from npu_jax.hw.costs import round_up
from npu_jax.hw.formats import itemsize
from npu_jax.mapping.epilogue import EpiloguePlan, Step


@dataclasses.dataclass(frozen=True)
class EltwisePlan:
    """Shapes and tiles of one element-wise launch over a (rows, cols) tensor.

    ``rows`` may be traced (bounded runs); ``rows_cap`` and ``cols`` are static.
    """

    steps: tuple[Step, ...]
    rows_cap: int
    cols: int
    in_fmt: str
    out_fmt: str
    vector: str
    hw: object
    rows_t: int
    cols_t: int
    rows: object = None

    @property
    def chain(self) -> EpiloguePlan:
        return EpiloguePlan(self.steps, "ub", self.vector, self.out_fmt)

    @property
    def has_work_tile(self) -> bool:
        return self.in_fmt != self.vector

    @property
    def n_rt(self):
        r = self.rows_cap if self.rows is None else self.rows
        return -(-r // self.rows_t)

    @property
    def n_ct(self) -> int:
        return -(-self.cols // self.cols_t)

    @property
    def cores(self) -> int:
        return max(1, min(self.hw.num_vector_cores, -(-self.rows_cap // self.rows_t) * self.n_ct))

    @property
    def n_items(self):
        """Tiles of the actual tensor (``rows`` may be traced)."""
        return self.n_rt * self.n_ct

    @property
    def per_core(self) -> int:
        """Tiles per core, as looped (static: the bound's tiles, round-robin over the cores)."""
        return -(-(-(-self.rows_cap // self.rows_t) * self.n_ct) // self.cores)

    def allocate(self) -> tuple[Plan, dict]:
        plan, a, rt, ct = Plan(self.hw), {}, self.rows_t, self.cols_t
        if self.chain.has("bias"):
            a["bias"] = plan.alloc("UB", "bias_ub", (1, self.n_ct * ct), self.vector)
        a["in"] = plan.alloc("UB", "in_ub", (rt, ct), self.in_fmt, stages=2)
        if self.has_work_tile:
            a["work"] = plan.alloc("UB", "work_ub", (rt, ct), self.vector)
        if self.chain.has("residual"):
            a["res"] = plan.alloc("UB", "res_ub", (rt, ct), self.vector, stages=2)
        a["out"] = plan.alloc("UB", "out_ub", (rt, ct), self.out_fmt, stages=2)
        return plan, a


def make_eltwise_plan(
    steps, rows_cap: int, cols: int, in_fmt: str, out_fmt: str, vector: str, hw, rows=None
) -> EltwisePlan:
    """Tile a (rows, cols) tensor for UB: whole channel rows when they fit (one contiguous burst
    per tile), else channel blocks; rows per tile as many as the double-buffered queues allow, but
    no more than gives every vector core two tiles (so all cores move data, each overlapping its
    CopyIn, Compute and CopyOut)."""
    ct = round_up(cols, FRACTAL_ROWS)
    probe = EltwisePlan(tuple(steps), rows_cap, cols, in_fmt, out_fmt, vector, hw, 1, ct, rows)
    per_row = (
        2 * itemsize(in_fmt)
        + 2 * itemsize(out_fmt)
        + probe.has_work_tile * itemsize(vector)
        + 2 * probe.chain.has("residual") * itemsize(vector)
    )
    bias = probe.chain.has("bias") * round_up(cols, FRACTAL_ROWS) * itemsize(vector)
    slack = 8 * hw.ub_align
    while ct > FRACTAL_ROWS and (hw.ub_bytes - bias - slack) // (per_row * ct) < 8:
        ct = round_up(ct // 2, FRACTAL_ROWS)
    fit = (hw.ub_bytes - bias - slack) // (per_row * ct)
    spread = -(-rows_cap * -(-cols // ct) // (2 * hw.num_vector_cores))
    rt = max(1, min(rows_cap, fit, spread))
    while True:
        p = dataclasses.replace(probe, rows_t=rt, cols_t=ct)
        try:
            p.allocate()
            return p
        except CapacityError:
            if rt == 1:
                raise
            rt = max(1, rt * 3 // 4)


__all__ = ["EltwisePlan", "make_eltwise_plan"]

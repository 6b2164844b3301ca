"""The pooling vector kernel's mapping: NC1HWC0 planes cut into row tiles that fit UB.

An *item* is one (image, group of ``c1_t`` C1 channel blocks, output row tile): ``rows_t`` output
rows of the full output width. Several C1 blocks share an item only when one item holds the whole
output plane (``rows_t == Ho``) and no reciprocal tile is needed: a small plane (a 7x7 global pool)
then gives each vector instruction ``c1_t`` times the elements, so its start-up is paid less often. Its input window, ``(rows_t - 1) * sh + kh`` rows of the full input width, lands in a
UB tile whose left / right padding columns (and, for the tiles at the top and bottom, padding rows)
hold the pad value: -inf for max (padded cells are ignored), 0 for average. Items go round-robin to
the chip's vector cores. Every size here is static; the plan is hashable (the program-cache key).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from npu_jax.core.buffers import Plan
from npu_jax.errors import CapacityError
from npu_jax.hw.formats import itemsize
from npu_jax.workload.pool import PoolGeometry

STAGES = 2  # every queue double-buffered: CopyIn, Compute and CopyOut overlap


@dataclasses.dataclass(frozen=True)
class PoolPlan:
    """Shapes and tiles of one pooling launch (all static).

    ``kind`` "max" or "avg"; ``include_pad`` is ONNX ``count_include_pad``; ``in_fmt`` the GM input's
    format (``policy.operand``), ``out_fmt`` the output's and the tiles' (``policy.output``).
    """

    g: PoolGeometry
    kind: str
    include_pad: bool
    in_fmt: str
    out_fmt: str
    hw: object
    rows_t: int  # output rows per tile
    c1_t: int = 1  # C1 blocks per tile

    # ---- derived sizes ---------------------------------------------------------------------------
    @property
    def c0(self) -> int:
        """Channels per C0 block of the GM layout (one 32-B block of ``in_fmt``)."""
        return self.hw.c0(itemsize(self.in_fmt))

    @property
    def c1(self) -> int:
        return -(-self.g.c // self.c0)

    @property
    def win_rows(self) -> int:
        """Input rows one tile's windows span: (rows_t - 1) * sh + kh."""
        return (self.rows_t - 1) * self.g.stride[0] + self.g.kh

    @property
    def in_rows(self) -> int:
        """Rows of the UB input tile: the window rows, plus the top padding (the first tile's
        window lands ``pt`` rows down)."""
        return self.win_rows + self.g.pads[0]

    @property
    def in_cols(self) -> int:
        """Cols of the UB input tile: left padding, the input's width, the cols the last window reaches."""
        return self.g.pads[2] + self.g.w + self.g.reach[1]

    @property
    def n_t(self) -> int:
        """Row tiles per (image, C1 group) plane."""
        return -(-self.g.ho // self.rows_t)

    @property
    def n_cg(self) -> int:
        """C1 groups per image."""
        return -(-self.c1 // self.c1_t)

    @property
    def n_items(self) -> int:
        return self.g.n * self.n_cg * self.n_t

    @property
    def cores(self) -> int:
        return max(1, min(self.hw.num_vector_cores, self.n_items))

    @property
    def per_core(self) -> int:
        return -(-self.n_items // self.cores)

    @property
    def has_work_tile(self) -> bool:
        """The input is cast to the output's format in UB first (vector ops take one format)."""
        return self.in_fmt != self.out_fmt

    @property
    def pad_value(self) -> float:
        return float("-inf") if self.kind == "max" else 0.0

    @property
    def padded(self) -> bool:
        """Whether any window reaches past the input (the UB tile then holds pad cells)."""
        return bool(max(self.g.pads[0], self.g.pads[2], *self.g.reach) > 0)

    @property
    def col_padded(self) -> bool:
        return bool(self.g.pads[2] > 0 or self.g.reach[1] > 0)

    def counts(self) -> np.ndarray:
        """(Ho, Wo) divisor of each output position (average pooling)."""
        rows, cols = self.g.counts(self.include_pad)
        return np.outer(rows, cols)

    @property
    def uniform(self) -> bool:
        """Every output position has the same divisor: one VMuls by a scalar; otherwise a VMul by a
        reciprocal tile read from GM (the vendor's *assist matrix*)."""
        c = self.counts()
        return bool((c == c.flat[0]).all())

    @property
    def taps(self) -> tuple[tuple[int, int], ...]:
        return tuple((i, j) for i in range(self.g.kh) for j in range(self.g.kw))

    def tile_rows(self, t, xp=np):
        """(first input row of tile t's window, rows moved from GM, their row in the UB tile, rows the
        tile's valid outputs need), in ``xp`` (numpy for the cost model, jax.numpy in the kernel)."""
        g = self.g
        sh, pt = g.stride[0], g.pads[0]
        r0 = t * self.rows_t
        nr = xp.minimum(self.rows_t, g.ho - r0)
        ih0 = r0 * sh - pt
        need = (nr - 1) * sh + g.kh
        lo = xp.maximum(ih0, 0)
        hi = xp.minimum(ih0 + need, g.h)
        return lo, hi - lo, lo - ih0, need

    @property
    def has_rcp(self) -> bool:
        return self.kind == "avg" and not self.uniform

    def allocate(self) -> tuple[Plan, dict]:
        plan, a, c0, cb = Plan(self.hw), {}, self.c0, self.c1_t
        if cb > 1 and (self.rows_t != self.g.ho or self.has_rcp):
            raise ValueError(f"c1_t={cb} > 1 needs rows_t == Ho and no reciprocal tile (see the module doc).")
        tile_in, tile_out = (cb, self.in_rows, self.in_cols, c0), (cb, self.rows_t, self.g.wo, c0)
        a["in"] = plan.alloc("UB", "in_ub", tile_in, self.in_fmt, stages=STAGES)
        if self.has_work_tile:
            a["work"] = plan.alloc("UB", "work_ub", tile_in, self.out_fmt)
        if self.has_rcp:
            a["rcp"] = plan.alloc("UB", "rcp_ub", tile_out, self.out_fmt, stages=STAGES)
        a["out"] = plan.alloc("UB", "out_ub", tile_out, self.out_fmt, stages=STAGES)
        return plan, a


def make_pool_plan(
    g: PoolGeometry, kind: str, include_pad: bool, in_fmt: str, out_fmt: str, hw, rows_t: int | None = None
) -> PoolPlan:
    """The plan of one pooling layer: ``rows_t`` output rows per tile (None: as many as the
    double-buffered tiles fit in UB, but no more than gives every vector core two items, so all
    cores move data and each overlaps its CopyIn, Compute and CopyOut); when a whole output plane
    is one tile and there are more planes than that, ``c1_t`` C1 blocks per item (as many as keep
    two items per core)."""
    c1 = -(-g.c // hw.c0(itemsize(in_fmt)))
    planes, two_each = g.n * c1, 2 * hw.num_vector_cores
    c1_t = 1
    if rows_t is None:
        rows_t = max(1, -(-g.ho // -(-two_each // planes)))
        probe = PoolPlan(g, kind, bool(include_pad), in_fmt, out_fmt, hw, g.ho)
        if rows_t >= g.ho and not probe.has_rcp:
            c1_t = max(1, c1 // -(-two_each // g.n))
    rows_t = min(rows_t, g.ho)
    while True:
        p = PoolPlan(g, kind, bool(include_pad), in_fmt, out_fmt, hw, rows_t, c1_t)
        try:
            p.allocate()
            return p
        except CapacityError as e:
            if c1_t > 1:
                c1_t = max(1, c1_t * 3 // 4)
                continue
            if rows_t == 1:
                raise CapacityError(
                    f"pool2d: one output row of {g.describe()} needs a {p.in_rows} x {p.in_cols} input "
                    f"tile per C0 block, double-buffered, which does not fit UB ({hw.ub_bytes} B): {e}"
                ) from None
            rows_t = max(1, rows_t * 3 // 4)


__all__ = ["STAGES", "PoolPlan", "make_pool_plan"]

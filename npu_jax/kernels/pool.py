"""MaxPool / AveragePool as a vector kernel: CopyIn (MTE2) -> Compute (V) -> CopyOut (MTE3), double-buffered.

Layout: the activation in GM is NC1HWC0 (the vendor's: channels in C0 blocks of 32 B, one block per
spatial position), input ``x`` (N, C1, H, W, C0) and output ``y`` (N, C1, Ho, Wo, C0). A C0 block
is what the vector unit's strides address, so a window tap is one strided view of the UB tile.

Per item (one image, ``c1_t`` C1 blocks, ``rows_t`` output rows; ``mapping/pool.py``):

* **CopyIn** (MTE2): the tile's window rows, full width, one DataCopy (one burst) into the UB input
  tile at (row ``o``, col ``pl``): rows and cols outside the input keep the pad value that a VDup
  wrote (``outside="keep"``: the DMA moves only valid bursts). The left / right padding columns are
  filled once per UB slot; a slot is filled again (VDup, on V, before it is freed) only when the
  item that uses it next has padding rows (the top and bottom tiles).
* **Compute** (V): ``kh * kw - 1`` VMax (max) or VAdd (avg) over the window's taps, each tap a view
  of the input tile with steps (sh, sw, 1) -- the first instruction takes two taps, a 1x1 window
  is one VCopy; then for avg one VMuls by 1/count when every position has the same divisor, else a
  VMul by the tile's rows of a reciprocal-count tensor ``rcp`` (Ho, Wo, C0) read from GM through a
  second input queue (the vendor's assist matrix: a border position's divisor counts only the
  cells its window covers, ONNX ``count_include_pad``). Only the tile's valid rows are computed.
  If ``policy.operand`` differs from ``policy.output``, one VCast first brings the input tile to
  the output's format (vector ops take one format).
* **CopyOut** (MTE3): the tile's output rows, one burst.
"""

from __future__ import annotations

from npu_jax.core import board
from npu_jax.core.board import fori_loop
from npu_jax.core.isa.data import View
from npu_jax.core.state import GmSpec
from npu_jax.core.sync import Queue
from npu_jax.mapping.pool import STAGES, PoolPlan


def pool_kernel(p: PoolPlan):
    """(plan, gm specs, kernel) of the pooling kernel."""
    plan, a = p.allocate()
    g, c0, c1, rt, cb = p.g, p.c0, p.c1, p.rows_t, p.c1_t
    sh, sw = g.stride
    n_t, n_items, ncores, per_core = p.n_t, p.n_items, p.cores, p.per_core
    q_in = Queue("MTE2", "V", a["in"], 0)
    q_rcp = Queue("MTE2", "V", a["rcp"], STAGES) if p.has_rcp else None
    q_out = Queue("V", "MTE3", a["out"], 0)
    reduce_op = "VMax" if p.kind == "max" else "VAdd"
    n_taps = g.kh * g.kw
    scale = 1.0 / float(p.counts().flat[0]) if p.kind == "avg" and p.uniform else None

    def rows_of(it, xp):
        t = it % n_t
        return p.tile_rows(t, xp)

    def needs_fill(it, xp):
        _, rows, o, need = rows_of(it, xp)
        return (o > 0) | (o + rows < need)

    def kernel(core, b):
        if p.padded:  # both slots start as padding (their pad columns stay so: no DMA writes them)
            for s in range(STAGES):
                core = core.vector("VDup", a["in"][s], scalar=p.pad_value)
        queues = [q for q in (q_in, q_rcp, q_out) if q is not None]
        for q in queues:
            core = q.init(core)

        # the block index as jax traces it, or (on the timing Board) every block's at once in numpy
        xp = board.xp(core)

        def item(j, core):
            it = b + j * ncores
            live = it < n_items
            plane, t = it // n_t, it % n_t
            n, ci = plane // p.n_cg, plane % p.n_cg * cb  # ci: the item's first C1 block
            r0 = t * rt
            nr = xp.minimum(rt, g.ho - r0)
            lo, rows, o, _ = rows_of(it, xp)
            cnt = xp.minimum(cb, c1 - ci) * nr * g.wo * c0  # rows_t == Ho when cb > 1: a prefix
            # CopyIn
            core = q_in.alloc_tensor(core, j, live)
            win = core.gm_window(
                "x", (n, ci, lo, 0, 0), (1, cb, p.win_rows, g.w, c0), limit=(None, None, rows, None, None)
            )
            dst = q_in.slot(j)
            core = core.data_copy(
                dst=dst.alloc.at(dst.stage, (0, o, g.pads[2], 0)), src=win, outside="keep", when=live
            )
            core = q_in.enque(core, j, live)
            if q_rcp is not None:
                core = q_rcp.alloc_tensor(core, j, live)
                core = core.data_copy(
                    dst=q_rcp.slot(j), src=core.gm_window("rcp", (0, r0, 0, 0), (1, rt, g.wo, c0)), when=live
                )
                core = q_rcp.enque(core, j, live)
            # Compute
            core = q_in.deque(core, j, live)
            core = q_out.alloc_tensor(core, j, live)
            src = q_in.slot(j)
            if p.has_work_tile:
                core = core.vector("VCast", a["work"][0], src, when=live)
                src = a["work"][0]
            acc = q_out.slot(j)

            def tap(k):  # the k-th tap (row-major over the window) of every output position
                return View(
                    src.alloc, src.stage, (0, k // g.kw, k % g.kw, 0), (cb, rt, g.wo, c0), (1, sh, sw, 1)
                )

            if n_taps == 1:
                core = core.vector("VCopy", acc, tap(0), count_elems=cnt, when=live)
            else:
                core = core.vector(reduce_op, acc, tap(0), tap(1), count_elems=cnt, when=live)
                core = fori_loop(  # one loop body whatever the window's size (7x7 global pools)
                    2,
                    n_taps,
                    lambda k, core: core.vector(reduce_op, acc, acc, tap(k), count_elems=cnt, when=live),
                    core,
                )
            if scale is not None:
                core = core.vector("VMuls", acc, acc, scalar=scale, count_elems=cnt, when=live)
            if q_rcp is not None:
                core = q_rcp.deque(core, j, live)
                core = core.vector("VMul", acc, acc, q_rcp.slot(j), count_elems=cnt, when=live)
                core = q_rcp.free(core, j, live)
            if p.padded:  # the slot's next item has padding rows: restore them before freeing it
                nxt = it + STAGES * ncores
                fill = live & (nxt < n_items) & needs_fill(nxt, xp)
                core = core.vector("VDup", q_in.slot(j), scalar=p.pad_value, when=fill)
            core = q_in.free(core, j, live)
            core = q_out.enque(core, j, live)
            # CopyOut
            core = q_out.deque(core, j, live)
            out = core.gm_window("y", (n, ci, r0, 0, 0), (1, cb, rt, g.wo, c0))
            core = core.data_copy(dst=out, src=acc, when=live)
            return q_out.free(core, j, live)

        core = fori_loop(0, per_core, item, core)
        for q in queues:
            core = q.drain(core)
        return core

    ho_pad = n_t * rt
    c1_pad = p.n_cg * cb
    gm = [GmSpec("x", (g.n, c1, g.h, g.w, c0), (g.n, c1_pad, g.h + p.in_rows, g.w, c0), p.in_fmt)]
    if q_rcp is not None:
        gm.append(GmSpec("rcp", (1, g.ho, g.wo, c0), (1, ho_pad, g.wo, c0), p.out_fmt))
    gm.append(GmSpec("y", (g.n, c1, g.ho, g.wo, c0), (g.n, c1_pad, ho_pad, g.wo, c0), p.out_fmt, output=True))
    return plan, tuple(gm), kernel


__all__ = ["pool_kernel"]

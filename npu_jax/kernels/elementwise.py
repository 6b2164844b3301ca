"""An element-wise vector kernel: an epilogue chain applied to a tensor in GM, as its own launch.

The shape every vector kernel of the vendor's has: CopyIn (MTE2, GM -> UB) -> Compute (V) ->
CopyOut (MTE3, UB -> GM), each stage double-buffered through a queue so the three pipes overlap.
The tensor is viewed as (rows, channels) -- an NHWC activation is (N Ho Wo, K) -- and tiled
(rows_t, cols_t) to fit UB; bias (a per-channel row) is loaded once per core and broadcast; a
residual is a second input queue. It runs on the chip's vector cores (``hw.num_vector_cores``: the
AIV cores of a 910B, the AI Cores of a 910/310P).

This is the unfused baseline's second kernel, and the remainder of a chain a Fixpipe cannot apply.
"""

from __future__ import annotations

import jax.numpy as jnp

from npu_jax.core.board import fori_loop
from npu_jax.core.state import GmSpec
from npu_jax.core.sync import Queue
from npu_jax.hw.costs import round_up
from npu_jax.mapping.eltwise import EltwisePlan


def eltwise_kernel(p: EltwisePlan):
    """(plan, gm specs, kernel) of the CopyIn -> Compute -> CopyOut kernel."""
    plan, a = p.allocate()
    rt, ct = p.rows_t, p.cols_t
    e = p.chain
    rows = p.rows_cap if p.rows is None else p.rows
    n_ct, n_items, ncores, per_core = p.n_ct, p.n_items, p.cores, p.per_core
    q_in = Queue("MTE2", "V", a["in"], 0)
    q_res = Queue("MTE2", "V", a["res"], 2) if "res" in a else None
    q_out = Queue("V", "MTE3", a["out"], 0)
    clip = [s.arg for s in e.steps if s.op == "clipped_relu"]
    alpha = [s.arg for s in e.steps if s.op == "leaky_relu"]
    ops = [(op, role) for op, role in e.vector_ops() if role != "cast"]

    def kernel(core, b):
        if e.has("bias"):  # every channel's bias, once per core
            win = core.gm_window("bias", (0, 0), (1, n_ct * ct), limit=(None, p.cols))
            core = core.data_copy(dst=a["bias"][0], src=win)
            core = core.set_flag("MTE2_V", 0).wait_flag("MTE2_V", 0)
        queues = [q for q in (q_in, q_res, q_out) if q is not None]
        for q in queues:
            core = q.init(core)

        def item(j, core):
            it = b + j * ncores
            live = it < n_items
            ri, ci = it // n_ct, it % n_ct
            r0, c0 = ri * rt, ci * ct
            nr = jnp.minimum(rt, rows - r0)
            # CopyIn
            core = q_in.alloc_tensor(core, j, live)
            core = core.data_copy(dst=q_in.slot(j), src=core.gm_window("y", (r0, c0), (rt, ct)), when=live)
            core = q_in.enque(core, j, live)
            if q_res is not None:
                core = q_res.alloc_tensor(core, j, live)
                core = core.data_copy(
                    dst=q_res.slot(j), src=core.gm_window("res", (r0, c0), (rt, ct)), when=live
                )
                core = q_res.enque(core, j, live)
            # Compute
            cnt = nr * ct
            core = q_in.deque(core, j, live)
            core = q_out.alloc_tensor(core, j, live)
            cur = q_in.slot(j)
            if p.has_work_tile:
                core = core.vector("VCast", a["work"][0], cur, count_elems=cnt, when=live)
                cur = a["work"][0]
            for op, role in ops:
                if role == "bias":
                    core = core.vector(op, cur, cur, a["bias"].at(0, (0, c0)), count_elems=cnt, when=live)
                elif role == "residual":
                    core = q_res.deque(core, j, live)
                    core = core.vector(op, cur, cur, q_res.slot(j), count_elems=cnt, when=live)
                    core = q_res.free(core, j, live)
                elif op == "VMaxs":
                    core = core.vector(op, cur, cur, scalar=0.0, count_elems=cnt, when=live)
                elif op == "VMins":
                    core = core.vector(op, cur, cur, scalar=clip[0], count_elems=cnt, when=live)
                else:
                    core = core.vector(
                        op, cur, cur, alpha=alpha[0] if alpha else 0.0, count_elems=cnt, when=live
                    )
            core = core.vector(
                "VCast" if p.out_fmt != cur.alloc.dtype else "VCopy",
                q_out.slot(j),
                cur,
                count_elems=cnt,
                when=live,
            )
            core = q_in.free(core, j, live)
            core = q_out.enque(core, j, live)
            # CopyOut
            core = q_out.deque(core, j, live)
            core = core.data_copy(dst=core.gm_window("z", (r0, c0), (rt, ct)), src=q_out.slot(j), when=live)
            return q_out.free(core, j, live)

        core = fori_loop(0, per_core, item, core)
        for q in queues:
            core = q.drain(core)
        return core

    pad = (round_up(p.rows_cap, rt), n_ct * ct)
    gm = [GmSpec("y", (p.rows_cap, p.cols), pad, p.in_fmt)]
    if e.has("bias"):
        gm.append(GmSpec("bias", (1, p.cols), (1, n_ct * ct), p.vector))
    if e.has("residual"):
        gm.append(GmSpec("res", (p.rows_cap, p.cols), pad, p.vector))
    gm.append(GmSpec("z", (p.rows_cap, p.cols), pad, p.out_fmt, output=True))
    return plan, tuple(gm), kernel


__all__ = ["eltwise_kernel"]

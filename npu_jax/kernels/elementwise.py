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

import dataclasses

import jax.numpy as jnp
from jax import lax

from npu_jax.core.buffers import Plan, itemsize
from npu_jax.core.run import launch
from npu_jax.core.state import Context, GmSpec
from npu_jax.core.sync import Queue
from npu_jax.errors import CapacityError
from npu_jax.mapping.epilogue import EpiloguePlan, Step


def _r(x: int, m: int) -> int:
    return -(-x // m) * m


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
    ct = _r(cols, 16)
    probe = EltwisePlan(tuple(steps), rows_cap, cols, in_fmt, out_fmt, vector, hw, 1, ct, rows)
    per_row = (
        2 * itemsize(in_fmt)
        + 2 * itemsize(out_fmt)
        + probe.has_work_tile * itemsize(vector)
        + 2 * probe.chain.has("residual") * itemsize(vector)
    )
    bias = probe.chain.has("bias") * _r(cols, 16) * itemsize(vector)
    slack = 8 * hw.ub_align
    while ct > 16 and (hw.ub_bytes - bias - slack) // (per_row * ct) < 8:
        ct = _r(ct // 2, 16)
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


def eltwise_kernel(p: EltwisePlan):
    """(plan, gm specs, kernel) of the CopyIn -> Compute -> CopyOut kernel."""
    plan, a = p.allocate()
    rt, ct = p.rows_t, p.cols_t
    e = p.chain
    rows = p.rows_cap if p.rows is None else p.rows
    n_rt, n_ct = p.n_rt, p.n_ct
    n_items = n_rt * n_ct
    ncores = p.cores
    per_core = -(-(-(-p.rows_cap // rt) * n_ct) // ncores)
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

        core = lax.fori_loop(0, per_core, item, core)
        for q in queues:
            core = q.drain(core)
        return core

    pad = (_r(p.rows_cap, rt), n_ct * ct)
    gm = [GmSpec("y", (p.rows_cap, p.cols), pad, p.in_fmt)]
    if e.has("bias"):
        gm.append(GmSpec("bias", (1, p.cols), (1, n_ct * ct), p.vector))
    if e.has("residual"):
        gm.append(GmSpec("res", (p.rows_cap, p.cols), pad, p.vector))
    gm.append(GmSpec("z", (p.rows_cap, p.cols), pad, p.out_fmt, output=True))
    return plan, tuple(gm), kernel


def run_eltwise(
    p: EltwisePlan,
    y,
    policy,
    *,
    bias=None,
    residual=None,
    trace_capacity: int = 0,
    move_data: bool = True,
    name: str = "eltwise",
    checks=None,
):
    """Launch the kernel on y (rows_cap, cols) in ``p.in_fmt``. Returns (z, report)."""
    from npu_jax.core.buffers import DTYPES

    plan, gm, kernel = eltwise_kernel(p)
    ins = {"y": jnp.asarray(y).astype(DTYPES[p.in_fmt])}
    rows = p.rows_cap if p.rows is None else p.rows
    extents = {"y": (rows, p.cols), "z": (rows, p.cols)}
    if p.chain.has("bias"):
        ins["bias"] = jnp.asarray(bias).reshape(1, p.cols).astype(DTYPES[p.vector])
        extents["bias"] = (1, p.cols)
    if p.chain.has("residual"):
        ins["res"] = jnp.asarray(residual).reshape(p.rows_cap, p.cols).astype(DTYPES[p.vector])
        extents["res"] = (rows, p.cols)
    ctx = Context(
        hw=p.hw,
        allocs=tuple(plan.allocs),
        gm=gm,
        policy=policy,
        n_cores=p.cores,
        trace_capacity=trace_capacity,
        move_data=move_data,
        checks=checks,
    )
    outs, report = launch(
        kernel,
        ctx,
        ins,
        name=name,
        operand=p.in_fmt,
        workload=f"{' -> '.join(map(str, p.steps))} over ({p.rows_cap}, {p.cols})",
        extents=extents,
    )
    return outs["z"], report

"""Launching the element-wise vector kernel (the unfused baseline's second kernel)."""

from __future__ import annotations

import jax.numpy as jnp

from npu_jax.core.buffers import DTYPES
from npu_jax.core.run import launch
from npu_jax.core.state import Context
from npu_jax.kernels.elementwise import eltwise_kernel
from npu_jax.mapping.eltwise import EltwisePlan


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
    l2_resident: tuple[str, ...] = (),
):
    """Launch the kernel on y (rows_cap, cols) in ``p.in_fmt``. Returns (z, report).

    ``l2_resident``: the GM inputs (``y``, ``bias``, ``res``) the kernel before it left in L2."""

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
    ctx = Context.of(
        plan, gm, policy, p.cores, trace_capacity=trace_capacity, move_data=move_data, checks=checks
    )
    outs, report = launch(
        kernel,
        ctx,
        ins,
        name=name,
        operand=p.in_fmt,
        workload=f"{' -> '.join(map(str, p.steps))} over ({p.rows_cap}, {p.cols})",
        extents=extents,
        l2_resident=l2_resident,
        key=("eltwise", p),
        board=True,
        values_apart=True,  # its addresses are the plan's: a repeat call computes its outputs alone
    )
    return outs["z"], report


__all__ = ["run_eltwise"]

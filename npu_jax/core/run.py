"""Launching a kernel: one core or many (``vmap`` over ``block_idx``), outputs merged.

A kernel is ``kernel(core, block_idx) -> core``. Every core starts from the same state; GM
inputs stay shared (vmap leaves unwritten values unbatched), each core writes its own copy of the
outputs along with a mask of what it wrote, and the merge takes each element from the one core
that wrote it -- counting elements written by two cores (a bug in the kernel's split) and
elements nobody wrote.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from npu_jax.core.state import Context, Core, init_core
from npu_jax.report.report import Report


def merge_outputs(ctx: Context, cores: Core):
    """(outputs by name at logical shape, overlapping-write count, unwritten count)."""
    outs, overlap, unwritten = {}, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32)
    for spec in ctx.gm:
        if not spec.output:
            continue
        vals, written = cores.gm[spec.name], cores.gm_written[spec.name]
        sl = tuple(slice(0, s) for s in spec.shape)
        vals, written = vals[(slice(None),) + sl], written[(slice(None),) + sl]
        writers = jnp.sum(written.astype(jnp.int32), axis=0)
        first = jnp.argmax(written, axis=0)
        val = jnp.take_along_axis(vals, first[None], axis=0)[0]
        outs[spec.name] = jnp.where(writers > 0, val, jnp.zeros((), val.dtype))
        inside = jnp.ones(spec.shape, jnp.bool_)
        for d in range(len(spec.shape)):
            inside = inside & (jax.lax.broadcasted_iota(jnp.int32, spec.shape, d) < cores.gm_shape[spec.name][0, d])
        overlap = overlap + jnp.sum(writers > 1).astype(jnp.int32)
        unwritten = unwritten + jnp.sum((writers == 0) & inside).astype(jnp.int32)
    return outs, overlap, unwritten


def launch(kernel: Callable[[Core, jax.Array], Core], ctx: Context, gm: dict, *, name: str,
           workload: str = "", operand: str = "fp16", extents: dict | None = None
           ) -> tuple[dict, Report]:
    """Run ``kernel`` on ``ctx.n_cores`` cores; returns (outputs, Report).

    Outputs come back at their spec's (static) shape; elements outside a traced ``extents`` are 0.
    """
    core0 = init_core(ctx, gm, extents)
    if ctx.n_cores == 1:
        cores = jax.tree.map(lambda x: x[None], kernel(core0, jnp.int32(0)))
    else:
        cores = jax.vmap(lambda b: kernel(core0, b))(jnp.arange(ctx.n_cores, dtype=jnp.int32))
    outs, overlap, unwritten = merge_outputs(ctx, cores)
    report = Report.from_cores(cores, name=name, workload=workload, operand=operand,
                               overlapping_writes=overlap, unwritten=unwritten)
    return outs, report

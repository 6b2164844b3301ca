"""An asc launch on the timing Board (``npu_jax/core/board.py``): its report without XLA (a timing-only
price; a launch's own report and the check that holds compiled launches to the Board are
``core.run.launch``'s ``board=``)."""

from __future__ import annotations

import dataclasses

from npu_jax.core import l2
from npu_jax.core.board import BOARD_CHECK
from npu_jax.core.run import board_report
from npu_jax.core.state import Context
from npu_jax.report.report import Report

__all__ = ["BOARD_CHECK", "board_run"]


def board_run(kernel_fn, ctx: Context, name: str, finish) -> Report:
    """The launch's Report from the timing Board: every block (``ctx.n_cores``) at once on numpy clocks
    (the kernel's Python once a path, its loops run in Python), the emulator's timing-only figures."""
    ctx = dataclasses.replace(ctx, l2_modes=l2.modes(ctx.hw, ctx.gm, ()), policy=ctx.policy.timing())
    return board_report(kernel_fn, ctx, name=name, workload="asc", operand="fp16", finish=finish)

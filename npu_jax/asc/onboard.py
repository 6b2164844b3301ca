"""An asc launch on the timing Board (``npu_jax/core/board.py``): its report without XLA, and the check
that holds every compiled launch to it."""

from __future__ import annotations

import dataclasses

from npu_jax.core import l2
from npu_jax.core.board import BOARD_CHECK, BoardUnsupported, hold
from npu_jax.core.run import board_report
from npu_jax.core.state import Context
from npu_jax.report.report import Report

__all__ = ["BOARD_CHECK", "board_run", "check_board"]


def board_run(kernel_fn, ctx: Context, num_blocks: int, name: str, finish) -> Report:
    """The launch's Report from the timing Board: every block at once on numpy clocks (the kernel's
    Python once a path, its loops run in Python), the emulator's timing-only figures."""
    ctx = dataclasses.replace(ctx, l2_modes=l2.modes(ctx.hw, ctx.gm, ()), policy=ctx.policy.timing())
    return board_report(
        kernel_fn, ctx, name=name, workload="asc", operand="fp16", finish=finish, blocks=num_blocks
    )


def check_board(kernel_fn, ctx, num_blocks, name, finish, report) -> None:
    """Raise where the Board's clocks, busy cycles, instruction counts, counters or unwritten output
    elements for this launch differ from the emulator's ``report`` (a kernel the Board does not price is skipped)."""
    try:
        board = board_run(kernel_fn, dataclasses.replace(ctx, trace_capacity=0), num_blocks, name, finish)
    except BoardUnsupported:
        return
    hold(report, board, name, overlapping=not ctx.move_data)

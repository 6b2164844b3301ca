"""An asc launch on the timing Board (``npu_jax/core/board.py``): its report without XLA, and the check
that holds every compiled launch to it."""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from npu_jax.core import l2
from npu_jax.core.board import BoardCore, BoardUnsupported, report_arrays
from npu_jax.core.state import Context
from npu_jax.report.report import Report


def board_run(kernel_fn, ctx: Context, num_blocks: int, name: str, finish) -> Report:
    """The launch's Report from the timing Board: every block at once on numpy clocks (the kernel's
    Python once a path, its loops run in Python), the emulator's timing-only figures."""
    ctx = dataclasses.replace(ctx, l2_modes=l2.modes(ctx.hw, ctx.gm, ()), policy=ctx.policy.timing())
    core = kernel_fn(BoardCore(ctx), np.arange(num_blocks))
    report = Report(
        **report_arrays(core),
        trace={},
        overlapping_writes=np.zeros((), np.int32),  # (a run with data: its outputs' program counts them)
        unwritten=np.asarray(core.mem.unwritten(), np.int32),
        hw=ctx.hw,
        name=name,
        workload="asc",
        operand="fp16",
        l2_kept=core.mem.kept,
    )
    return finish(report)


# Whether every compiled launch also runs on the Board and raises where a figure differs (the
# tests' hold on the Board; NPU_JAX_BOARD_CHECK=1 turns it on for a whole run), and how many it held.
BOARD_CHECK = [os.environ.get("NPU_JAX_BOARD_CHECK", "") not in ("", "0"), 0]


def check_board(kernel_fn, ctx, num_blocks, name, finish, report) -> None:
    """Raise where the Board's clocks, busy cycles, instruction counts, counters or unwritten output
    elements for this launch differ from the emulator's ``report`` (a kernel the Board does not price is skipped)."""
    try:
        board = board_run(kernel_fn, dataclasses.replace(ctx, trace_capacity=0), num_blocks, name, finish)
    except BoardUnsupported:
        return
    BOARD_CHECK[1] += 1
    for f in ("pipe_free", "busy", "n_instr", "counters", "unwritten"):
        if not np.array_equal(np.asarray(getattr(report, f)), np.asarray(getattr(board, f))):
            raise AssertionError(
                f"the Board's {f} differs from the emulator's for {name}: {report.cycles} against "
                f"{board.cycles} cycles"
            )

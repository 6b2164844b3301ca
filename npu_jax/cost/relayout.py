"""The NCHW -> NC1HWC0 relayout kernel's cost, without running the emulator: its own program on the Board.

:func:`predict` runs ``kernels/conv.py``'s ``relayout_kernel`` (its queue's flags, the DataCopy in with
its bursts, the DataCopy out, split by :func:`~npu_jax.kernels.conv.relayout_plan`) on the timing Board
(``core/board.py``): every core at once on numpy clocks, each DataCopy charged by the rule of
``hw/costs.py`` the emulator charges it. The kernel is the one definition; the result equals the
emulator's report, cycle for cycle and byte for byte (``tests/test_relayout_model.py``); the
``relayout`` and ``img2col`` strategies' rows of the demo's table read it, so no relayout kernel
compiles there.

Example:
    >>> import npu_jax
    >>> from npu_jax.workload.conv import canonicalize
    >>> g = canonicalize((1, 64, 56, 56), (64, 64, 3, 3), 1, 1)
    >>> npu_jax.cost.relayout.predict(g, npu_jax.presets.ascend910b()).cycles > 0
    True
"""

from __future__ import annotations

from npu_jax.cost.board import KernelPrediction, on_board
from npu_jax.hw.config import HardwareConfig
from npu_jax.kernels.conv import relayout_kernel
from npu_jax.workload.conv import ConvGeometry


def predict(g: ConvGeometry, hw: HardwareConfig, op: str = "fp16") -> KernelPrediction:
    """Cycles and bytes of the relayout launch of layer ``g``'s input (x (N, C, H, W) in format
    ``op``), as ``run_relayout`` reports them."""
    plan, gm, cores, kernel = relayout_kernel(g, hw, op)
    return on_board(hw, plan, gm, kernel, cores)


__all__ = ["predict"]

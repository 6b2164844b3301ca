"""The element-wise vector kernel's cost, without running the emulator: its own program on the Board.

:func:`predict` runs the kernel of ``kernels/elementwise.py`` (the bias load, the three queues' flags,
CopyIn, the vector instructions of the chain, CopyOut) on the timing Board (``core/board.py``): every
core at once on numpy clocks, each instruction charged by the rule of ``hw/costs.py`` the emulator
charges it, the L2's hits from the same per-element record (``core/l2.py``; ``l2_resident``: the inputs
the kernel before left in L2). No second walk of the instruction stream exists: the kernel is the one
definition, and the result equals the emulator's report, cycle for cycle and byte for byte
(``tests/test_eltwise_model.py``).

Example:
    >>> import npu_jax
    >>> from npu_jax.mapping.eltwise import make_eltwise_plan
    >>> from npu_jax.mapping.epilogue import canonical_steps
    >>> hw = npu_jax.presets.ascend910b()
    >>> p = make_eltwise_plan(canonical_steps(("bias", "relu")), 3136, 64, "fp16", "fp16", "fp32", hw)
    >>> npu_jax.cost.eltwise.predict(p).cycles > 0
    True
"""

from __future__ import annotations

from npu_jax.cost.board import KernelPrediction, on_board
from npu_jax.kernels.elementwise import eltwise_kernel
from npu_jax.mapping.eltwise import EltwisePlan


def predict(p: EltwisePlan, *, l2_resident: tuple[str, ...] = ()) -> KernelPrediction:
    """Cycles and bytes of the element-wise launch of plan ``p`` (``l2_resident`` as
    ``run_eltwise``'s); ``p.rows`` concrete."""
    plan, gm, kernel = eltwise_kernel(p)
    rows = p.rows_cap if p.rows is None else int(p.rows)
    extents = {"y": (rows, p.cols), "z": (rows, p.cols), "bias": (1, p.cols), "res": (rows, p.cols)}
    return on_board(p.hw, plan, gm, kernel, p.cores, l2_resident, extents)


__all__ = ["predict"]

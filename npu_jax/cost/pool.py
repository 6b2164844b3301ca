"""The pooling kernel's cost, without running the emulator: its own program on the Board.

:func:`predict` runs the kernel of ``kernels/pool.py`` (its queues, flags, copies and taps) on the
timing Board (``core/board.py``): every core at once on numpy clocks, each instruction charged by the
rule of ``hw/costs.py`` the emulator charges it, the L2's hits from the same per-element record
(``core/l2.py``: a tile's halo rows that the previous tile of the plane read, the reciprocal tensor
after the first plane; ``l2_resident``: the input the kernel before left in L2). The kernel is the one
definition; the result equals the emulator's report, cycle for cycle and byte for byte
(``tests/test_pool.py``); a ResNet-50 max pool at batch 8 takes milliseconds.

Example:
    >>> import npu_jax
    >>> from npu_jax.mapping.pool import make_pool_plan
    >>> from npu_jax.workload.pool import canonicalize
    >>> g = canonicalize("pool2d", (8, 64, 112, 112), 3, 2, 1)
    >>> p = make_pool_plan(g, "max", False, "fp16", "fp16", npu_jax.presets.ascend910b())
    >>> npu_jax.cost.pool.predict(p).cycles > 0
    True
"""

from __future__ import annotations

from npu_jax.cost.board import KernelPrediction, on_board
from npu_jax.kernels.pool import pool_kernel
from npu_jax.mapping.pool import PoolPlan


def predict(p: PoolPlan, *, l2_resident: tuple[str, ...] = ()) -> KernelPrediction:
    """Cycles and bytes of the pooling launch of plan ``p`` (``l2_resident`` as ``run_pool``'s)."""
    plan, gm, kernel = pool_kernel(p)
    return on_board(p.hw, plan, gm, kernel, p.cores, l2_resident)


PoolPrediction = KernelPrediction  # (its name before the relayout kernel's closed form shared it)

__all__ = ["PoolPrediction", "predict"]

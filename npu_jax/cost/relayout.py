"""The NCHW -> NC1HWC0 relayout kernel's cost, without running the emulator.

:func:`predict` walks the kernel's instruction stream (``kernels/conv.py``'s ``relayout_kernel``: its
queue's flags, the DataCopy in with its bursts, the DataCopy out, in the same order, split by the
same :func:`~npu_jax.kernels.conv.relayout_plan`) on every core at once, charging each DataCopy the
rule of ``hw/costs.py`` the emulator charges it. Every input element is read once (the bands are
disjoint), so no read hits the L2. The result equals the emulator's report, cycle for cycle and byte
for byte (``tests/test_relayout_model.py``); the ``relayout`` and ``img2col`` strategies' rows of the
demo's table read it, so no relayout kernel compiles there.

Example:
    >>> import npu_jax
    >>> from npu_jax.workload.conv import canonicalize
    >>> g = canonicalize((1, 64, 56, 56), (64, 64, 3, 3), 1, 1)
    >>> npu_jax.cost.relayout.predict(g, npu_jax.presets.ascend910b()).cycles > 0
    True
"""

from __future__ import annotations

import numpy as np

from npu_jax.cost.board import Board, KernelPrediction
from npu_jax.hw.config import HardwareConfig
from npu_jax.hw.formats import itemsize
from npu_jax.kernels.conv import relayout_kernel, relayout_plan
from npu_jax.workload.conv import ConvGeometry

_STAGES = 2  # the kernel's queue: a double-buffered UB band


def predict(g: ConvGeometry, hw: HardwareConfig, op: str = "fp16") -> KernelPrediction:
    """Cycles and bytes of the relayout launch of layer ``g``'s input (x (N, C, H, W) in format
    ``op``), as ``run_relayout`` reports them."""
    r = relayout_plan(g, hw, op)
    _, gm, _, _ = relayout_kernel(g, hw, op)
    bd = Board(hw, r.cores, gm)
    isz, c0 = itemsize(op), r.c0
    b = np.arange(r.cores)
    for s in range(_STAGES):  # Queue.init: every slot free
        bd.set("MTE3_MTE2", s)
    for j in range(r.per_core):
        it = b + j * r.cores
        live = it < r.n_items
        e = j % _STAGES
        _, ci, r0 = r.item(it)
        nr = np.minimum(r.rows, g.h - r0)
        bd.wait("MTE3_MTE2", e, live)  # alloc_tensor
        # DataCopy in: the band's rows of the block's channels (past C: none); one burst when the
        # band is whole planes (its channels' planes are contiguous in NCHW), else one per channel.
        # Every element is read once: no hit
        ch = np.clip(g.c - ci * c0, 0, c0)
        bd.read("x", ch * nr * g.w * isz, np.where((r0 == 0) & (nr == g.h), 1, ch), 0, live)
        bd.set("MTE2_MTE3", e, live)  # enque
        bd.wait("MTE2_MTE3", e, live)  # deque
        # DataCopy out: the band's rows of one C1 block, whole rows of C0: one burst
        bd.write(nr * g.w * c0 * isz, 1, live)
        bd.set("MTE3_MTE2", e, live)  # free
    for s in range(_STAGES):  # Queue.drain
        bd.wait("MTE3_MTE2", s)
    return bd.prediction()


__all__ = ["predict"]

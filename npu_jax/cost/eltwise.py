"""The element-wise vector kernel's cost, without running the emulator.

:func:`predict` walks the kernel's instruction stream (``kernels/elementwise.py``: the bias load, the
three queues' flags, CopyIn, the vector instructions of the chain, CopyOut, in the same order) on
every core at once, charging each instruction the rule of ``hw/costs.py`` the emulator charges it.
The L2's hits follow its model (``core/l2.py``): a tensor the kernel before left in L2
(``l2_resident``) hits on every read; of a kept one, the bias row every core reads hits for every
core after the first; the tiles of the input and the residual are read once (no hits). The result
equals the emulator's report, cycle for cycle and byte for byte (``tests/test_eltwise_model.py``).

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

import numpy as np

from npu_jax.cost.board import Board, KernelPrediction
from npu_jax.hw.formats import itemsize
from npu_jax.kernels.elementwise import eltwise_kernel
from npu_jax.mapping.eltwise import EltwisePlan

_STAGES = 2  # each queue: a double-buffered UB tile


def predict(p: EltwisePlan, *, l2_resident: tuple[str, ...] = ()) -> KernelPrediction:
    """Cycles and bytes of the element-wise launch of plan ``p`` (``l2_resident`` as
    ``run_eltwise``'s); ``p.rows`` concrete."""
    _, gm, _ = eltwise_kernel(p)
    _, a = p.allocate()
    bd = Board(p.hw, p.cores, gm, l2_resident)
    rows = p.rows_cap if p.rows is None else int(p.rows)
    rt, ct, n_ct, ncores = p.rows_t, p.cols_t, p.n_ct, p.cores
    e = p.chain
    isz_in, isz_out, isz_v = itemsize(p.in_fmt), itemsize(p.out_fmt), itemsize(p.vector)
    b = np.arange(ncores)

    if e.has("bias"):  # every channel's bias, once per core: the cores after the first hit a kept row
        nb = np.full(ncores, p.cols * isz_v)
        bd.read("bias", nb, 1, np.where(b > 0, nb, 0), back=0)  # the cores before, in this read
        bd.set("MTE2_V", 0)
        bd.wait("MTE2_V", 0)
    queues = [("V_MTE2", 0)] + ([("V_MTE2", 2)] if e.has("residual") else []) + [("MTE3_V", 0)]
    for back, base in queues:  # Queue.init
        for s in range(_STAGES):
            bd.set(back, base + s)
    roles = [role for _, role in e.vector_ops() if role != "cast"]
    for j in range(p.per_core):
        it = b + j * ncores
        live = it < p.n_items
        s = j % _STAGES
        r0, c0 = it // n_ct * rt, it % n_ct * ct
        nr = np.minimum(rt, rows - r0)
        vr, vc = np.clip(rows - r0, 0, rt), np.clip(p.cols - c0, 0, ct)
        bursts = np.where((c0 == 0) & (vc == p.cols), 1, vr)  # whole rows of channels: one run
        # CopyIn
        bd.wait("V_MTE2", s, live)
        bd.read("y", vr * vc * isz_in, bursts, 0, live)
        bd.set("MTE2_V", s, live)
        if e.has("residual"):
            bd.wait("V_MTE2", 2 + s, live)
            bd.read("res", vr * vc * isz_v, bursts, 0, live)
            bd.set("MTE2_V", 2 + s, live)
        # Compute: every instruction over the tile's valid rows, at its widest operand
        cnt = nr * ct
        bd.wait("MTE2_V", s, live)
        bd.wait("MTE3_V", s, live)
        if p.has_work_tile:
            bd.vector(cnt * max(isz_in, isz_v), live)
        for role in roles:
            if role == "residual":  # VAdd(cur, cur, res): two whole tiles, whose bank groups may collide
                bd.wait("MTE2_V", 2 + s, live)
                cur = a["work"].address(0) if p.has_work_tile else a["in"].address(s)
                bd.vector(cnt * isz_v, live, (cur, a["res"].address(s)))
                bd.set("V_MTE2", 2 + s, live)
            else:
                bd.vector(cnt * isz_v, live)
        bd.vector(cnt * max(isz_out, isz_v), live)  # VCast / VCopy into the out tile
        bd.set("V_MTE2", s, live)
        bd.set("V_MTE3", s, live)
        # CopyOut
        bd.wait("V_MTE3", s, live)
        bd.write(vr * vc * isz_out, bursts, live)
        bd.set("MTE3_V", s, live)
    for back, base in queues:  # Queue.drain
        for s in range(_STAGES):
            bd.wait(back, base + s)
    return bd.prediction()


__all__ = ["predict"]

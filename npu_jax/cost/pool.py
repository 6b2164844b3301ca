"""The pooling kernel's cost, without running the emulator: its schedule evaluated on the plan's numbers.

:func:`predict` walks the kernel's instruction stream (``kernels/pool.py``: the same instructions,
queues and flags, in the same order) on every core at once (numpy arrays over the cores), charging
each instruction the rule of ``hw/costs.py`` the emulator charges it, and keeps the in-order pipe
clocks and the flags as ``issue`` and ``sync`` do. The L2's hits follow its model (``core/l2.py``):
of a kept input, a tile's halo rows that the previous tile of the plane read hit, and the
reciprocal tensor hits after the first plane. The result equals the emulator's report, cycle for
cycle and byte for byte (``tests/test_pool.py``); a ResNet-50 max pool at batch 8 takes milliseconds.

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

import numpy as np

from npu_jax.cost.board import Board, KernelPrediction
from npu_jax.hw.formats import itemsize
from npu_jax.kernels.pool import pool_kernel
from npu_jax.mapping.pool import STAGES, PoolPlan


def predict(p: PoolPlan, *, l2_resident: tuple[str, ...] = ()) -> KernelPrediction:
    """Cycles and bytes of the pooling launch of plan ``p`` (``l2_resident`` as ``run_pool``'s)."""
    g, c0, ncores = p.g, p.c0, p.cores
    _, gm, _ = pool_kernel(p)
    _, a = p.allocate()
    bd = Board(p.hw, ncores, gm, l2_resident)
    isz_in, isz_out = itemsize(p.in_fmt), itemsize(p.out_fmt)
    slot = p.c1_t * p.in_rows * p.in_cols * c0
    src_isz = isz_out if p.has_work_tile else isz_in
    has_rcp = p.has_rcp
    n_taps = g.kh * g.kw
    b = np.arange(ncores)
    if p.padded:
        for _ in range(STAGES):
            bd.vector(np.full(ncores, slot * isz_in), True)
    for s in range(STAGES):
        bd.set("V_MTE2", s)
    if has_rcp:
        for s in range(STAGES):
            bd.set("V_MTE2", STAGES + s)
    for s in range(STAGES):
        bd.set("MTE3_V", s)

    for j in range(p.per_core):
        it = b + j * ncores
        live = it < p.n_items
        plane, t = it // p.n_t, it % p.n_t
        ncb = np.minimum(p.c1_t, p.c1 - plane % p.n_cg * p.c1_t)  # C1 blocks of the item
        nr = np.minimum(p.rows_t, g.ho - t * p.rows_t)
        lo, rows, o, need = p.tile_rows(t)
        plo, prows, _, _ = p.tile_rows(np.maximum(t - 1, 0))  # the plane's previous tile
        again = np.where(t > 0, np.maximum(0, np.minimum(lo + rows, plo + prows) - lo), 0)
        row_bytes = ncb * g.w * c0 * isz_in
        cnt = ncb * nr * g.wo * c0
        e = j % STAGES
        # CopyIn
        bd.wait("V_MTE2", e, live)
        nb = rows * row_bytes
        whole = (lo == 0) & (rows == g.h)  # whole planes: the C1 blocks are one contiguous burst
        bd.read("x", nb, np.where(whole, 1, ncb), again * row_bytes, live, back=1)  # the previous tile's
        bd.set("MTE2_V", e, live)
        if has_rcp:
            bd.wait("V_MTE2", STAGES + e, live)
            nb = cnt * isz_out
            # the same tile of the plane before: n_t items, at most ceil(n_t / cores) reads back
            bd.read("rcp", nb, 1, np.where(plane > 0, nb, 0), live, back=-(-p.n_t // ncores))
            bd.set("MTE2_V", STAGES + e, live)
        # Compute
        bd.wait("MTE2_V", e, live)
        bd.wait("MTE3_V", e, live)
        if p.has_work_tile:
            bd.vector(np.full(ncores, slot * max(isz_in, isz_out)), live)
        for _ in range(max(1, n_taps - 1)):
            bd.vector(cnt * max(isz_out, src_isz), live)
        if p.kind == "avg" and p.uniform:
            bd.vector(cnt * isz_out, live)
        if has_rcp:  # VMul(acc, acc, rcp): two whole tiles, whose bank groups may collide
            bd.wait("MTE2_V", STAGES + e, live)
            bd.vector(cnt * isz_out, live, (a["out"].address(e), a["rcp"].address(e)))
            bd.set("V_MTE2", STAGES + e, live)
        if p.padded:
            nxt = it + STAGES * ncores
            _, n_rows, n_o, n_need = p.tile_rows(nxt % p.n_t)
            fill = live & (nxt < p.n_items) & ((n_o > 0) | (n_o + n_rows < n_need))
            bd.vector(np.full(ncores, slot * isz_in), fill)
        bd.set("V_MTE2", e, live)
        bd.set("V_MTE3", e, live)
        # CopyOut
        bd.wait("V_MTE3", e, live)
        bd.write(cnt * isz_out, np.where(nr == g.ho, 1, ncb), live)
        bd.set("MTE3_V", e, live)

    for s in range(STAGES):
        bd.wait("V_MTE2", s)
    if has_rcp:
        for s in range(STAGES):
            bd.wait("V_MTE2", STAGES + s)
    for s in range(STAGES):
        bd.wait("MTE3_V", s)

    return bd.prediction()


PoolPrediction = KernelPrediction  # (its name before the relayout kernel's closed form shared it)

__all__ = ["PoolPrediction", "predict"]

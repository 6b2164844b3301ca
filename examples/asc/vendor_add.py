"""add_high_performance: the vendor's vector-add tuning ladder (cases 1-6), ported line by line.

Vendor sample: ``examples/01_simd_cpp_api/05_best_practices/00_vector_compute/add_high_performance``
(``add.asc``, asc-devkit). z = x + y, each 8192 x 8192 half, static tensors at fixed UB addresses and
hand-written flags. The cases:

1. ``ProcessSingle`` on one AIV, 4096-element copies (single buffer);
2. ``Process`` on 48 AIV (rows split evenly), 4096-element copies;
3. as 2 with 16384-element copies;
4. ``ProcessDoubleBuffer``: ping / pong buffers on two event ids;
5. ``ProcessDoubleBufferL2Bypass``: 4 with ``SetL2CacheHint(CACHE_MODE_DISABLE)`` on x and y;
6. ``ProcessDoubleBufferBankConflict``: 5 with 16256-element copies and x / y 256 B apart in UB.

The vendor splits 8192 rows over 48 cores as 171 rows on the first 32 and 170 on the rest. A launch
here runs one program on every block, so every core takes 171 rows (``ROWS_PER_CORE``) of arrays of
48 x 171 rows: the critical path is the vendor's, the total bytes 0.2% more.

    python examples/asc/vendor_add.py 6
"""

from __future__ import annotations

import sys

import jax
import numpy as np

from npu_jax import asc

TOTAL_N = 8192
MAX_DATA_COPY_LEN = 16384
BANK_CONFLICT_DATA_COPY_LEN = 16256
# case -> (cores, elements per copy, double buffered, L2 bypass for x and y, bank-conflict-free layout)
CASES = {
    1: (1, 4096, False, False, False),
    2: (48, 4096, False, False, False),
    3: (48, 16384, False, False, False),
    4: (48, 16384, True, False, False),
    5: (48, 16384, True, True, False),
    6: (48, 16256, True, True, True),
}


def rows_per_core(cores: int, total_m: int = TOTAL_N) -> int:
    """The rows of the longest core under the vendor's even split (the remainder to the first cores)."""
    return -(-total_m // cores)


def _ub_tensors(ping_pong: bool, bank_conflict_free: bool):
    """The vendor's UB layout: [x, y, z] (ping, then pong) at its fixed byte addresses."""
    n, nb = MAX_DATA_COPY_LEN, BANK_CONFLICT_DATA_COPY_LEN
    if not ping_pong:  # xAddr 0, yAddr, zAddr back to back
        at = [[0, n, 2 * n]]
    elif not bank_conflict_free:  # xPing, yPing, zPing, xPong, yPong, zPong back to back
        at = [[0, n, 2 * n], [3 * n, 4 * n, 5 * n]]
    else:  # yPing 16256 elements after xPing (x and y 256 B apart in the bank groups); z from 4 x 16384
        at = [[0, nb, 4 * n], [2 * n, 2 * n + nb, 4 * n + nb]]
    size = nb if bank_conflict_free else n
    order = sorted((a, i, j) for i, row in enumerate(at) for j, a in enumerate(row))  # declared by address
    ts = {(i, j): asc.local_tensor(asc.TPosition.VECCALC, asc.half, a * 2, size) for a, i, j in order}
    return [[ts[i, j] for j in range(3)] for i in range(len(at))]


@asc.kernel(core="vector")
def add_high_performance(
    x, y, z, rows: int, data_copy_len: int, double_buffer: bool, l2_bypass: bool, bank: bool
):
    per_core = rows * TOTAL_N
    start = asc.get_block_idx() * per_core
    x_gm, y_gm, z_gm = asc.GlobalTensor(asc.half), asc.GlobalTensor(asc.half), asc.GlobalTensor(asc.half)
    x_gm.set_global_buffer(x + start, per_core)
    y_gm.set_global_buffer(y + start, per_core)
    z_gm.set_global_buffer(z + start, per_core)
    if l2_bypass:
        x_gm.set_l2_cache_hint(asc.CacheMode.CACHE_MODE_DISABLE)
        y_gm.set_l2_cache_hint(asc.CacheMode.CACHE_MODE_DISABLE)
    bufs = _ub_tensors(double_buffer, bank)
    total_blocks = -(-per_core // data_copy_len)  # DivCeil
    tail = per_core - (total_blocks - 1) * data_copy_len  # curLen of the last block

    def cur_len(i: int) -> int:
        return tail if i == total_blocks - 1 else data_copy_len

    if not double_buffer:  # Process / ProcessSingle: one event id, the first wait skipped
        x_ub, y_ub, z_ub = bufs[0]

        def block(i, n: int, first: bool, last: bool):
            if not first:
                asc.wait_flag(asc.HardEvent.V_MTE2, 0)
            asc.data_copy(x_ub, x_gm[i * data_copy_len :], n)
            asc.data_copy(y_ub, y_gm[i * data_copy_len :], n)
            asc.set_flag(asc.HardEvent.MTE2_V, 0)
            asc.wait_flag(asc.HardEvent.MTE2_V, 0)
            if not first:
                asc.wait_flag(asc.HardEvent.MTE3_V, 0)
            asc.add(z_ub, x_ub, y_ub, n)
            if not last:
                asc.set_flag(asc.HardEvent.V_MTE2, 0)
            asc.set_flag(asc.HardEvent.V_MTE3, 0)
            asc.wait_flag(asc.HardEvent.V_MTE3, 0)
            asc.data_copy(z_gm[i * data_copy_len :], z_ub, n)
            if not last:
                asc.set_flag(asc.HardEvent.MTE3_V, 0)

        block(0, cur_len(0), True, total_blocks == 1)

        @asc.loop(max(total_blocks - 2, 0))
        def _(i):
            block(i + 1, data_copy_len, False, False)

        if total_blocks > 1:
            block(total_blocks - 1, tail, False, True)
    else:  # ProcessDoubleBuffer: ping / pong on event ids 0 / 1, the flags primed before the loop

        def block(i, ev: int, n: int):
            x_ub, y_ub, z_ub = bufs[ev]
            asc.wait_flag(asc.HardEvent.V_MTE2, ev)
            asc.data_copy(x_ub, x_gm[i * data_copy_len :], n)
            asc.data_copy(y_ub, y_gm[i * data_copy_len :], n)
            asc.set_flag(asc.HardEvent.MTE2_V, ev)
            asc.wait_flag(asc.HardEvent.MTE2_V, ev)
            asc.wait_flag(asc.HardEvent.MTE3_V, ev)
            asc.add(z_ub, x_ub, y_ub, n)
            asc.set_flag(asc.HardEvent.V_MTE2, ev)
            asc.set_flag(asc.HardEvent.V_MTE3, ev)
            asc.wait_flag(asc.HardEvent.V_MTE3, ev)
            asc.data_copy(z_gm[i * data_copy_len :], z_ub, n)
            asc.set_flag(asc.HardEvent.MTE3_V, ev)

        for ev in (0, 1):
            asc.set_flag(asc.HardEvent.V_MTE2, ev)
            asc.set_flag(asc.HardEvent.MTE3_V, ev)
        pairs = (total_blocks - 1) // 2  # whole ping-pong pairs before the last block

        @asc.loop(pairs)
        def _(p):
            block(2 * p, 0, data_copy_len)
            block(2 * p + 1, 1, data_copy_len)

        for i in range(2 * pairs, total_blocks):
            block(i, i % 2, cur_len(i))
        for ev in (0, 1):
            asc.wait_flag(asc.HardEvent.V_MTE2, ev)
            asc.wait_flag(asc.HardEvent.MTE3_V, ev)
    asc.pipe_barrier(asc.PIPE_ALL)


def run_case(
    case: int,
    hw=None,
    *,
    total_m: int = TOTAL_N,
    cores: int | None = None,
    timing_only: bool = True,
    checks=None,
):
    """Case ``case`` of the ladder at the vendor's size (``total_m`` rows of 8192 over the case's cores;
    fewer of both for tests): ``(outs, report)``; with ``timing_only=False`` on random data. ``checks``
    as ``asc.launch``'s (the process default if None; the benchmark runs with none)."""
    import npu_jax

    hw = npu_jax.presets.ascend910b1() if hw is None else hw
    case_cores, copy_len, double, bypass, bank = CASES[case]
    cores = case_cores if cores is None else cores
    rows = rows_per_core(cores, total_m)
    shape = (cores * rows, TOTAL_N)
    if timing_only:
        x = y = z = jax.ShapeDtypeStruct(shape, np.float16)
    else:
        rng = np.random.default_rng(case)
        x, y = (rng.uniform(-100, 100, shape).astype(np.float16) for _ in "xy")
        z = np.zeros(shape, np.float16)
    return add_high_performance[cores](
        x, y, z, rows, copy_len, double, bypass, bank, hw=hw, timing_only=timing_only, checks=checks
    )


def main(case: int = 6):
    _, report = run_case(case)
    print(report.summary())


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6)

"""data_copy: the vendor's GM -> UB and GM -> L1 copy micro-benchmark, ported.

Vendor sample: ``examples/01_simd_cpp_api/05_best_practices/04_memory_access/data_copy``
(``data_copy_ub.h``, ``KernelDataCopyPadGm2Ub``; ``data_copy_l1.h``, ``KernelDataCopyGm2L1``;
asc-devkit). A [12288, 12288] half matrix is read by 48 AIV into UB, or by 24 AIC into L1 (ND -> NZ
copies, ``Nd2NzParams``), each core its rows, in tiles of ``tile_m`` rows x ``tile_n`` columns, back
to back into one buffer at address 0 (no flags: the copies queue on MTE2). The UB scenarios:

1. tile [1, 64]: 128-B copies, the matrix once (``Process``);
2. tile [64, 64]: 64 rows of 128 B a copy, once;
3. tile [64, 1024]: 64 rows of 2048 B a copy, once;
5. tile [64, 1024], the whole matrix 4 times over (``ProcessRepeatWhole4Times``: 302 MB a round,
   more than the L2's 192 MB);
6. tile [64, 1024], the matrix in 4 column slices, each read 4 times before the next
   (``ProcessSplitFourAndRepeat4Times``: 75.5 MB a round). The vendor measures the L2's hit rate of
   both (msprof's L2Cache metrics): 0.005% and 75.00%;
7. / 8. a [6144, 512] matrix read whole by every core, past L2 (``SetL2CacheHint(CACHE_MODE_DISABLE)``),
   tile [128, 64]: all cores in the same order (``ProcessFullMatrixSameAddr``: each M block read by
   all 48 at once), or each core starting at its own block (``ProcessFullMatrixOffsetAddr``).

The L1 scenarios (``dst="L1"``): 1 tile [64, 64], 2 tile [64, 256] (once); 4 / 5 tile [64, 1024], the
whole matrix 4 times / 4 slices 4 times each; 6 / 7 the same-address pair, tile [256, 64].
(UB 4 and L1 3, a matrix of 12287 columns, are not ported.)

The vendor copies to UB with ``DataCopyPad`` (``DataCopyParams{tileM, tileN * 2, (n - tileN) * 2, 0}``
in bytes); every length here is a whole number of 32-B blocks, so ``DataCopy`` with the same rows and
stride moves the same bytes (``DataCopyParams`` counts in 32-B blocks).

    python examples/asc/vendor_data_copy.py 3 [UB | L1]
"""

from __future__ import annotations

import sys

import jax
import numpy as np

from npu_jax import asc

M = N = 12288
CONFLICT_M, CONFLICT_N = 6144, 512  # the same-address pair's matrix on the Atlas A2 (its README)
NUM_BLOCKS = {"UB": 48, "L1": 24}  # the AIV / AIC the vendor launches
SCENARIOS = {  # destination -> scenario -> (tile_m, tile_n)
    "UB": {1: (1, 64), 2: (64, 64), 3: (64, 1024), 5: (64, 1024), 6: (64, 1024), 7: (128, 64), 8: (128, 64)},
    "L1": {1: (64, 64), 2: (64, 256), 4: (64, 1024), 5: (64, 1024), 6: (256, 64), 7: (256, 64)},
}
REPEATS = {  # scenario -> (column slices, reads of each slice); the others (1, 1)
    "UB": {5: (1, 4), 6: (4, 4)},
    "L1": {4: (1, 4), 5: (4, 4)},
}
WHOLE = {"UB": {7: False, 8: True}, "L1": {6: False, 7: True}}  # the same-address pair -> staggered?


CORE = {"UB": "vector", "L1": "cube"}  # destination -> the cores that copy into it (AIV, AIC)


def _tile(dst: str, tile_m: int, tile_n: int, n: int):
    """The one buffer at address 0 every copy fills, and the copy's parameters: ``tile_m`` rows of
    ``tile_n`` columns out of rows of ``n``, as ``DataCopyParams`` in 32-B blocks (UB) or as an ND -> NZ
    copy whose ``dstNzC0Stride`` is the tile's rows rounded up to 16 (L1)."""
    if dst == "UB":
        per = 32 // asc.half.itemsize  # elements of one 32-B block
        buf = asc.local_tensor(asc.TPosition.VECIN, asc.half, 0, tile_m * tile_n)
        return buf, asc.DataCopyParams(tile_m, tile_n // per, (n - tile_n) // per, 0)
    buf = asc.local_tensor(asc.TPosition.A1, asc.half, 0, tile_m * tile_n)
    return buf, asc.Nd2NzParams(1, tile_m, tile_n, 0, n, -(-tile_m // 16) * 16, 1, 0)


def _rows(dst: str):
    """``Process`` (one slice, read once) and ``RepeatCopy`` over ``slices`` column slices, each read
    ``repeats`` times in a row, into UB or L1: each core its ``single_core_m`` rows."""

    def body(src, n: int, single_core_m: int, tile_m: int, tile_n: int, slices: int = 1, repeats: int = 1):
        src_gm = asc.GlobalTensor(asc.half)
        src_gm.set_global_buffer(src, single_core_m * asc.get_block_num() * n)
        buf, params = _tile(dst, tile_m, tile_n, n)
        m_start = asc.get_block_idx() * single_core_m
        width = n // slices
        n_loop, m_loop = width // tile_n, single_core_m // tile_m

        @asc.loop(slices * repeats * m_loop * n_loop)
        def _(i):
            piece = i % (m_loop * n_loop)  # the copy within one read of the slice
            m_idx = m_start + (piece // n_loop) * tile_m
            n_idx = (i // (repeats * m_loop * n_loop)) * width + (piece % n_loop) * tile_n
            asc.data_copy(buf, src_gm[m_idx * n + n_idx :], params)

        asc.pipe_barrier(asc.PIPE_ALL)

    body.__name__ = f"data_copy_gm2{dst.lower()}"
    return asc.kernel(core=CORE[dst])(body)


def _whole(dst: str):
    """``FullMatrixCopy(offsetAddr)`` into UB or L1: every core reads the whole matrix past L2, its M
    blocks (``single_core_m`` rows each, one per core) in order, or ``offset``: starting at its own."""

    def body(src, n: int, single_core_m: int, tile_m: int, tile_n: int, offset: bool):
        src_gm = asc.GlobalTensor(asc.half)
        blocks = asc.get_block_num()
        src_gm.set_global_buffer(src, single_core_m * blocks * n)
        src_gm.set_l2_cache_hint(asc.CacheMode.CACHE_MODE_DISABLE)
        buf, params = _tile(dst, tile_m, tile_n, n)
        n_loop, m_tiles = n // tile_n, single_core_m // tile_m
        first = asc.get_block_idx() if offset else 0

        @asc.loop(blocks * m_tiles * n_loop)
        def _(i):
            block = (i // (m_tiles * n_loop) + first) % blocks
            m_idx = block * single_core_m + ((i // n_loop) % m_tiles) * tile_m
            asc.data_copy(buf, src_gm[m_idx * n + (i % n_loop) * tile_n :], params)

        asc.pipe_barrier(asc.PIPE_ALL)

    body.__name__ = f"data_copy_whole_gm2{dst.lower()}"
    return asc.kernel(core=CORE[dst])(body)


KERNELS = {dst: _rows(dst) for dst in CORE}
WHOLE_KERNELS = {dst: _whole(dst) for dst in CORE}


def run_case(
    scenario: int,
    hw=None,
    *,
    dst: str = "UB",
    m: int | None = None,
    n: int | None = None,
    cores: int | None = None,
    tile: tuple[int, int] | None = None,
    timing_only: bool = True,
    checks=None,
):
    """Scenario ``scenario`` of destination ``dst`` ("UB", "L1") at the vendor's size (smaller ``m`` /
    ``n`` / ``cores``, or another ``tile``, for tests): ``(outs, report)``."""
    import npu_jax

    hw = npu_jax.presets.ascend910b1() if hw is None else hw
    whole = WHOLE[dst].get(scenario)
    m = m or (CONFLICT_M if whole is not None else M)
    n = n or (CONFLICT_N if whole is not None else N)
    cores = cores or NUM_BLOCKS[dst]
    tile_m, tile_n = SCENARIOS[dst][scenario] if tile is None else tile
    if timing_only:
        src = jax.ShapeDtypeStruct((m, n), np.float16)
    else:
        src = np.random.default_rng(scenario).uniform(-1, 1, (m, n)).astype(np.float16)
    kw = dict(hw=hw, timing_only=timing_only, checks=checks)
    if whole is not None:
        return WHOLE_KERNELS[dst][cores](src, n, m // cores, tile_m, tile_n, whole, **kw)
    slices, repeats = REPEATS[dst].get(scenario, (1, 1))
    return KERNELS[dst][cores](src, n, m // cores, tile_m, tile_n, slices, repeats, **kw)


def run_l1_case(scenario: int, hw=None, **kw):
    """An L1 scenario (:func:`run_case` with ``dst="L1"``)."""
    return run_case(scenario, hw, dst="L1", **kw)


def main(scenario: int = 3, dst: str = "UB"):
    _, report = run_case(scenario, dst=dst)
    print(report.summary())


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3, sys.argv[2] if len(sys.argv) > 2 else "UB")

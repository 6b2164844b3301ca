"""data_copy: the vendor's GM -> UB copy micro-benchmark (block granularity, L2 reuse), ported.

Vendor sample: ``examples/01_simd_cpp_api/05_best_practices/04_memory_access/data_copy``
(``data_copy_ub.h``, ``KernelDataCopyPadGm2Ub``, asc-devkit). A [12288, 12288] half matrix is read
by 48 AIV, each its 256 rows, in tiles of ``tile_m`` rows x ``tile_n`` columns, back to back into one
UB buffer at address 0 (no flags: the copies queue on MTE2). The scenarios:

1. tile [1, 64]: 128-B copies, the matrix once (``Process``);
2. tile [64, 64]: 64 rows of 128 B a copy, once;
3. tile [64, 1024]: 64 rows of 2048 B a copy, once;
5. tile [64, 1024], the whole matrix 4 times over (``ProcessRepeatWhole4Times``: 302 MB a round,
   more than the L2's 192 MB);
6. tile [64, 1024], the matrix in 4 column slices, each read 4 times before the next
   (``ProcessSplitFourAndRepeat4Times``: 75.5 MB a round). The vendor measures the L2's hit rate of
   both (msprof's L2Cache metrics): 0.005% and 75.00%.

(Scenario 4, a matrix of 12287 columns, and 7-8, the same-address pair, are not ported.)

The vendor copies with ``DataCopyPad`` (``DataCopyParams{tileM, tileN * 2, (n - tileN) * 2, 0}`` in
bytes); every length here is a whole number of 32-B blocks, so ``DataCopy`` with the same rows and
stride moves the same bytes (``DataCopyParams`` counts in 32-B blocks).

    python examples/asc/vendor_data_copy.py 3
"""

from __future__ import annotations

import sys

import jax
import numpy as np

from npu_jax import asc

M = N = 12288
NUM_BLOCKS = 48
SCENARIOS = {1: (1, 64), 2: (64, 64), 3: (64, 1024), 5: (64, 1024), 6: (64, 1024)}  # -> (tile_m, tile_n)
REPEATS = {5: (1, 4), 6: (4, 4)}  # scenario -> (column slices, reads of each slice); the others (1, 1)


@asc.kernel(core="vector")
def data_copy_gm2ub(
    src, n: int, single_core_m: int, tile_m: int, tile_n: int, slices: int = 1, repeats: int = 1
):
    """``Process`` (one slice, read once) and ``RepeatCopy`` over ``slices`` column slices, each read
    ``repeats`` times in a row."""
    src_gm = asc.GlobalTensor(asc.half)
    src_gm.set_global_buffer(src, single_core_m * asc.get_block_num() * n)
    ub = asc.local_tensor(asc.TPosition.VECIN, asc.half, 0, tile_m * tile_n)
    m_start = asc.get_block_idx() * single_core_m
    width = n // slices
    n_loop, m_loop = width // tile_n, single_core_m // tile_m
    per = 32 // asc.half.itemsize  # elements of one 32-B block
    params = asc.DataCopyParams(tile_m, tile_n // per, (n - tile_n) // per, 0)

    @asc.loop(slices * repeats * m_loop * n_loop)
    def _(i):
        piece = i % (m_loop * n_loop)  # the copy within one read of the slice
        m_idx = m_start + (piece // n_loop) * tile_m
        n_idx = (i // (repeats * m_loop * n_loop)) * width + (piece % n_loop) * tile_n
        asc.data_copy(ub, src_gm[m_idx * n + n_idx :], params)

    asc.pipe_barrier(asc.PIPE_ALL)


def run_case(
    scenario: int,
    hw=None,
    *,
    m: int = M,
    n: int = N,
    cores: int = NUM_BLOCKS,
    tile: tuple[int, int] | None = None,
    timing_only: bool = True,
    checks=None,
):
    """Scenario ``scenario`` at the vendor's size (smaller ``m`` / ``n`` / ``cores``, or another
    ``tile``, for tests): ``(outs, report)``."""
    import npu_jax

    hw = npu_jax.presets.ascend910b1() if hw is None else hw
    tile_m, tile_n = SCENARIOS[scenario] if tile is None else tile
    slices, repeats = REPEATS.get(scenario, (1, 1))
    if timing_only:
        src = jax.ShapeDtypeStruct((m, n), np.float16)
    else:
        src = np.random.default_rng(scenario).uniform(-1, 1, (m, n)).astype(np.float16)
    return data_copy_gm2ub[cores](
        src, n, m // cores, tile_m, tile_n, slices, repeats, hw=hw, timing_only=timing_only, checks=checks
    )


def main(scenario: int = 3):
    _, report = run_case(scenario)
    print(report.summary())


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)

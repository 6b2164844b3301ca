"""matmul_high_performance: the vendor's 8192^3 fp16 matmul tuning ladder (cases 0-8), ported.

Vendor sample: ``examples/01_simd_cpp_api/05_best_practices/01_matrix_compute/matmul_high_performance``
(``matmul.h``, ``matmul.asc``, asc-devkit). C = A @ B, A [M, K] half (ND), B stored transposed
([N, K], ``IS_TRANS_B``), C [M, N] half, through the high-level ``Matmul`` API (``asc.Matmul``). The
cases, each with the vendor's tiling (``SetFixSplit``, ``SetSingleShape``, the L1 depths and steps):

0. one core, base 64 x 64 x 64, L1 depth 1 (``SetL1``);
1. one core, base 128 x 256 x 64;
2. 24 cores split 2 (M) x 12 (N): singleM 4096, singleN 683 (its last base block an edge block of 171);
3. 24 cores split 4 x 6: singleM 2048, singleN 1536;
4. + ``CFG_MDL``: the tiling API's L1 depths, depthA1 4 / stepKa 2, depthB1 8 / stepKb 4 (README:
   "depthA1=4 and the double buffer ... two blocks each"; case 5's "depthB1=8" is the API's, untouched);
5. + depthA1 16, stepKa 8 (all 512 KB of L1);
6. + the L2 split: each core's M block in two halves of 1024 rows, one ``IterateAll`` each, A's halves
   ``M / 2`` rows apart (``MatmulKernelL2Cache::Process``);
7. + constant tiling (``MatmulApiStaticTiling``);
8. + the unit flag (``enUnitFlag``).

Every case uses L0A / L0B double buffering (the tiling API's dbL0A = dbL0B = 2) and one L0C block.
A launch here runs one program on every block, so every core takes the full block: in cases 3-8 the
vendor's last N column of 4 cores holds 512 of 1536 columns (``tailN``), here 1536 (arrays of
N = 9216: the critical path is the vendor's, the average over cores 12.5% more work); in case 2 the
last column's 679 of 683 are 683 (N = 8196).

    python examples/asc/vendor_matmul.py 8
"""

from __future__ import annotations

import dataclasses
import sys

import jax
import numpy as np

from npu_jax import asc

M = N = K = 8192
BASE = (128, 256, 64)


@dataclasses.dataclass(frozen=True)
class Case:
    cores: int
    m_blocks: int  # cores along M (mSingleBlocks); the rest split N
    single_m: int
    single_n: int
    base: tuple[int, int, int] = BASE
    depth_step: tuple[int, int, int, int] = (1, 1, 1, 1)  # depthA1, stepKa, depthB1, stepKb
    mdl: bool = False
    l2_split: bool = False
    constant: bool = False
    unit_flag: bool = False


_MDL = dict(mdl=True)
CASES = {
    0: Case(1, 1, M, N, base=(64, 64, 64)),
    1: Case(1, 1, M, N),
    2: Case(24, 2, 4096, 683),
    3: Case(24, 4, 2048, 1536),
    4: Case(24, 4, 2048, 1536, depth_step=(4, 2, 8, 4), **_MDL),
    5: Case(24, 4, 2048, 1536, depth_step=(16, 8, 8, 4), **_MDL),
    6: Case(24, 4, 2048, 1536, depth_step=(16, 8, 8, 4), l2_split=True, **_MDL),
    7: Case(24, 4, 2048, 1536, depth_step=(16, 8, 8, 4), l2_split=True, constant=True, **_MDL),
    8: Case(
        24, 4, 2048, 1536, depth_step=(16, 8, 8, 4), l2_split=True, constant=True, unit_flag=True, **_MDL
    ),
}


@asc.kernel(core="cube")
def matmul_custom(a, b, c, m: int, n: int, k: int, case: Case):
    """``matmul_custom*``: this core's block of C (``CalcOffset``), through one ``asc.Matmul``."""
    idx = asc.get_block_idx()
    m_idx, n_idx = idx % case.m_blocks, idx // case.m_blocks
    a_gm, b_gm, c_gm = asc.GlobalTensor(asc.half), asc.GlobalTensor(asc.half), asc.GlobalTensor(asc.half)
    a_gm.set_global_buffer(a, m * k)
    b_gm.set_global_buffer(b, n * k)
    c_gm.set_global_buffer(c, m * n)
    passes = 2 if case.l2_split else 1  # the L2 split: A's M block in halves M / 2 rows apart
    single_m = case.single_m // passes
    depth_a1, step_ka, depth_b1, step_kb = case.depth_step
    tiling = asc.TCubeTiling(
        m, n, k, single_m, case.single_n, k, *case.base,
        depth_a1=depth_a1, depth_b1=depth_b1, step_ka=step_ka, step_kb=step_kb, db_l0a=2, db_l0b=2,
    )  # fmt: skip
    cfg = asc.MatmulConfig(mdl=case.mdl, unit_flag=case.unit_flag, constant_tiling=case.constant)
    pipe = asc.TPipe()
    mm = asc.Matmul(pipe, tiling, c_dtype=asc.half, config=cfg)
    off_a = m_idx * k * single_m
    off_b = n_idx * k * case.single_n  # B stored [N, K]
    off_c = m_idx * n * single_m + n_idx * case.single_n

    @asc.loop(passes)  # one loop, not two copies of the Matmul's: the compile time stays that of one pass
    def _(i):
        mm.set_tensor_a(a_gm[off_a + i * (m // 2) * k :])
        mm.set_tensor_b(b_gm[off_b:], is_transpose=True)
        mm.iterate_all(c_gm[off_c + i * (m // 2) * n :])

    mm.end()


def problem(case: Case, m: int = M, k: int = K) -> tuple[int, int, int]:
    """(M, N, K) of the arrays: N covers every core's full block (see the module's notes)."""
    n_blocks = case.cores // case.m_blocks
    return m, n_blocks * case.single_n, k


def run_case(case: int | Case, hw=None, *, m: int = M, k: int = K, timing_only: bool = True, checks=None):
    """Case ``case`` at the vendor's size (or a :class:`Case` with smaller blocks and ``m`` / ``k``, for
    tests): ``(outs, report)``; with ``timing_only=False`` on random data (a, b^T, c)."""
    import npu_jax

    hw = npu_jax.presets.ascend910b1() if hw is None else hw
    c = CASES[case] if isinstance(case, int) else case
    m, n, k = problem(c, m, k)
    if timing_only:
        a = jax.ShapeDtypeStruct((m, k), np.float16)
        bt = jax.ShapeDtypeStruct((n, k), np.float16)
        out = jax.ShapeDtypeStruct((m, n), np.float16)
    else:
        rng = np.random.default_rng(0)
        a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
        bt = rng.uniform(-1, 1, (n, k)).astype(np.float16)
        out = np.zeros((m, n), np.float16)
    return matmul_custom[c.cores](a, bt, out, m, n, k, c, hw=hw, timing_only=timing_only, checks=checks)


def main(case: int = 8):
    _, report = run_case(case)
    print(report.summary())


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)

"""The project's own GEMM kernel (``npu_jax/kernels/gemm.py``) written in ``npu_jax.asc``.

C (M, N) = A (M, K) @ B (K, N), fp16 in, fp32 accumulation in L0C, fp16 out. Output blocks of
``m`` x ``n`` are spread round-robin over the cores; A and B stream through L1 in K slices of
``k_l1`` (ND -> NZ on the way in), then through L0A / L0B in slices of ``k_l0`` into the Cube. L1 and
L0 are ping-pong buffered through queues, and the block leaves through Fixpipe (910B) or, on the
coupled 910 / 310P, L0C -> UB (V) -> GM (MTE3). It is the built-in kernel under the vendor's names:
``tests/test_asc_cube.py`` holds it equal to ``npu_jax.matmul``'s bits and report.

    python examples/asc/gemm.py
"""

from __future__ import annotations

import numpy as np

from npu_jax import asc

P = asc.TPosition


@asc.kernel(core="cube")
def gemm(a, b, c, M: int, N: int, K: int, tiling: tuple, coupled: bool):
    m, n, k_l1, k_l0, l1_stages, l0_stages, cores = tiling
    nbn = N // n
    blocks_per_core = (M // m) * nbn // cores
    nk, nkk = K // k_l1, k_l1 // k_l0
    c0 = 16  # fp16: a fractal row of 32 B
    a_gm, b_gm, c_gm = asc.GlobalTensor(), asc.GlobalTensor(), asc.GlobalTensor()
    a_gm.set_global_buffer(a)
    b_gm.set_global_buffer(b)
    c_gm.set_global_buffer(c)
    pipe = asc.TPipe()
    q_a1, q_b1 = asc.TQue(P.A1, l1_stages), asc.TQue(P.B1, l1_stages)
    q_a2, q_b2 = asc.TQue(P.A2, l0_stages), asc.TQue(P.B2, l0_stages)
    q_c1 = asc.TQue(P.CO1, 1)
    pipe.init_buffer(q_a1, l1_stages, m * k_l1 * 2)
    pipe.init_buffer(q_b1, l1_stages, k_l1 * n * 2)
    pipe.init_buffer(q_a2, l0_stages, m * k_l0 * 2)
    pipe.init_buffer(q_b2, l0_stages, k_l0 * n * 2)
    pipe.init_buffer(q_c1, 1, m * n * 4)
    if coupled:
        q_c2 = asc.TQue(P.CO2, 1)
        pipe.init_buffer(q_c2, 1, m * n * 2)
    first = asc.get_block_idx()

    @asc.loop(blocks_per_core)
    def _(j):
        blk = first + j * cores
        bm, bn = blk // nbn, blk % nbn
        c1 = q_c1.alloc_tensor(asc.float32)

        @asc.loop(nk)
        def _(kt):
            a1, b1 = q_a1.alloc_tensor(asc.half), q_b1.alloc_tensor(asc.half)
            asc.data_copy(a1, a_gm[bm * m * K + kt * k_l1 :], asc.Nd2NzParams(1, m, k_l1, 0, K, m, 1, 0))
            asc.data_copy(b1, b_gm[kt * k_l1 * N + bn * n :], asc.Nd2NzParams(1, k_l1, n, 0, N, k_l1, 1, 0))
            q_a1.enque(a1)
            q_b1.enque(b1)
            a1, b1 = q_a1.deque(asc.half), q_b1.deque(asc.half)

            @asc.loop(nkk)
            def _(kk):
                a2, b2 = q_a2.alloc_tensor(asc.half), q_b2.alloc_tensor(asc.half)
                # fractals run down a column block of the NZ tile: A's k-th C0 columns start at fractal k * m/16
                asc.load_data(a2, a1, asc.LoadData2DParams(start_index=kk * (k_l0 // c0) * (m // 16)))
                asc.load_data(b2, b1, asc.LoadData2DParams(start_index=kk * (k_l0 // 16)))
                q_a2.enque(a2)
                q_b2.enque(b2)
                a2, b2 = q_a2.deque(asc.half), q_b2.deque(asc.half)
                asc.mmad(c1, a2, b2, asc.MmadParams(m, n, k_l0, 0, False, (kt == 0) & (kk == 0)))
                q_a2.free_tensor(a2)
                q_b2.free_tensor(b2)

            q_a1.free_tensor(a1)
            q_b1.free_tensor(b1)

        q_c1.enque(c1)
        c1 = q_c1.deque(asc.float32)
        out = c_gm[bm * m * N + bn * n :]
        if not coupled:
            params = asc.FixpipeParamsV220(
                n_size=n, m_size=m, src_stride=m, dst_stride=N, quant_pre=asc.QuantMode.F322F16
            )
            asc.fixpipe(out, c1, params)
            q_c1.free_tensor(c1)
        else:
            c2 = q_c2.alloc_tensor(asc.half)
            asc.data_copy(c2, c1, m * n)
            q_c1.free_tensor(c1)
            q_c2.enque(c2)
            c2 = q_c2.deque(asc.half)
            asc.data_copy(out, c2, asc.DataCopyParams(m, n * 2 // 32, 0, (N - n) * 2 // 32))
            q_c2.free_tensor(c2)


def run(a, b, hw, tiling):
    """C = A @ B on ``hw`` with ``tiling`` (an ``npu_jax.MatmulTiling`` whose sizes divide the shape)."""
    (M, K), N = a.shape, b.shape[1]
    blocks = (M // tiling.m) * (N // tiling.n)
    cores = min(hw.num_cores if tiling.cores is None else tiling.cores, blocks)
    t = (tiling.m, tiling.n, tiling.k_l1, tiling.k_l0, tiling.l1_stages, tiling.l0_stages, cores)
    c = np.zeros((M, N), np.float16)
    (_, _, c), report = gemm[cores](a, b, c, M, N, K, t, hw.coupled, hw=hw)
    return c, report


def main():
    import npu_jax

    rng = np.random.default_rng(0)
    a = rng.integers(-4, 5, (256, 512)).astype(np.float16)
    b = rng.integers(-4, 5, (512, 256)).astype(np.float16)
    hw = npu_jax.presets.ascend910b()
    c, report = run(a, b, hw, npu_jax.MatmulTiling(m=128, n=128, k_l1=256, k_l0=64))
    assert np.array_equal(c, (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float16))
    print(report.summary())


if __name__ == "__main__":
    main()

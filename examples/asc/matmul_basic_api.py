"""matmul_basic_api: the vendor's Cube kernel written with the basic API (DataCopy Nd2Nz, LoadData,
Mmad, Fixpipe), ported line by line. a [256, 64] @ b [64, 256], fp16 in, fp16 out; 2 blocks, each
computing singleCoreM = 128 rows in one base block of 128 x 64 x 256. A 910B (Fixpipe) kernel.

    python examples/asc/matmul_basic_api.py
"""

from __future__ import annotations

import numpy as np

from npu_jax import asc

M, N, K = 256, 256, 64
SINGLE_CORE_M = 128
P = asc.TPosition


@asc.kernel(core="cube")
def matmul_basic_api(a, b, c, m: int = SINGLE_CORE_M, n: int = N, k: int = K):
    a_gm, b_gm, c_gm = asc.GlobalTensor(), asc.GlobalTensor(), asc.GlobalTensor()
    a_gm.set_global_buffer(a + asc.get_block_idx() * m * k)
    b_gm.set_global_buffer(b)
    c_gm.set_global_buffer(c + asc.get_block_idx() * m * n)
    pipe = asc.TPipe()
    in_a1, in_b1 = asc.TQue(P.A1, 1), asc.TQue(P.B1, 1)
    in_a2, in_b2 = asc.TQue(P.A2, 1), asc.TQue(P.B2, 1)
    out_co1 = asc.TQue(P.CO1, 1)
    pipe.init_buffer(in_a1, 1, m * k * 2)
    pipe.init_buffer(in_b1, 1, k * n * 2)
    pipe.init_buffer(in_a2, 1, m * k * 2)
    pipe.init_buffer(in_b2, 1, k * n * 2)
    pipe.init_buffer(out_co1, 1, m * n * 4)

    # CopyIn: GM (ND) -> L1 (NZ)
    a1, b1 = in_a1.alloc_tensor(asc.half), in_b1.alloc_tensor(asc.half)
    asc.data_copy(a1, a_gm, asc.Nd2NzParams(1, m, k, 0, k, m, 1, 0))
    asc.data_copy(b1, b_gm, asc.Nd2NzParams(1, k, n, 0, n, k, 1, 0))
    in_a1.enque(a1)
    in_b1.enque(b1)
    # SplitA / SplitB: L1 -> L0A / L0B
    a1, b1 = in_a1.deque(asc.half), in_b1.deque(asc.half)
    a2, b2 = in_a2.alloc_tensor(asc.half), in_b2.alloc_tensor(asc.half)
    asc.load_data(a2, a1, asc.LoadData2DParams(0, (m // 16) * (k // 16), 1, 0, 0, False, 0))
    asc.load_data(b2, b1, asc.LoadData2DParams(0, (k // 16) * (n // 16), 1, 0, 0, False, 0))
    in_a1.free_tensor(a1)
    in_b1.free_tensor(b1)
    in_a2.enque(a2)
    in_b2.enque(b2)
    # Compute: Mmad into L0C
    a2, b2 = in_a2.deque(asc.half), in_b2.deque(asc.half)
    c1 = out_co1.alloc_tensor(asc.float32)
    asc.mmad(c1, a2, b2, asc.MmadParams(m, n, k, 0, False, True))
    out_co1.enque(c1)
    in_a2.free_tensor(a2)
    in_b2.free_tensor(b2)
    # CopyOut: Fixpipe L0C -> GM, fp32 -> fp16
    c1 = out_co1.deque(asc.float32)
    asc.fixpipe(c_gm, c1, asc.FixpipeParamsV220(n, m, m, n, False, asc.QuantMode.F322F16))
    out_co1.free_tensor(c1)
    asc.pipe_barrier(asc.PIPE_ALL)


def main():
    import npu_jax

    rng = np.random.default_rng(0)
    a = rng.integers(-4, 5, (M, K)).astype(np.float16)
    b = rng.integers(-4, 5, (K, N)).astype(np.float16)
    (_, _, c), report = matmul_basic_api[M // SINGLE_CORE_M](
        a, b, np.zeros((M, N), np.float16), hw=npu_jax.presets.ascend910b()
    )
    assert np.array_equal(c, (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float16))
    print(report.summary())


if __name__ == "__main__":
    main()

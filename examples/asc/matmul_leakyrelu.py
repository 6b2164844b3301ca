"""MatmulLeakyRelu: the vendor's mix kernel, the high-level Matmul on the Cube and LeakyReLU on the
vector unit. a [1024, 256] @ b [256, 640], fp16 in, fp32 out; base blocks of 256 x 128 (x 64 deep),
alpha 0.001; two blocks of 512 rows. The Cube's block reaches UB through a GM workspace on the 910B
(Fixpipe), straight from L0C (CO1 -> CO2) on the coupled 910 / 310P.

    python examples/asc/matmul_leakyrelu.py
"""

from __future__ import annotations

import numpy as np

from npu_jax import asc

M, N, K = 1024, 640, 256
ALPHA = 0.001
BLOCKS = 2
TILING = asc.TCubeTiling(M, N, K, M // BLOCKS, N, K, 256, 128, 64)


@asc.kernel(core="mix")
def matmul_leakyrelu(a, b, c, workspace, tiling: asc.TCubeTiling = TILING, alpha: float = ALPHA):
    t = tiling
    blk = asc.get_block_idx()
    a_gm, b_gm, c_gm, ws = asc.GlobalTensor(), asc.GlobalTensor(), asc.GlobalTensor(), asc.GlobalTensor()
    a_gm.set_global_buffer(a + blk * t.single_core_m * t.k)
    b_gm.set_global_buffer(b)
    c_gm.set_global_buffer(c + blk * t.single_core_m * t.n)
    ws.set_global_buffer(workspace + blk * t.base_m * t.base_n)
    pipe = asc.TPipe()
    mm = asc.Matmul(pipe, t, c_dtype=asc.float32)
    relu_out = asc.TQue(asc.TPosition.VECOUT, 1)
    pipe.init_buffer(relu_out, 1, t.base_m * t.base_n * 4)
    mm.set_tensor_a(a_gm)
    mm.set_tensor_b(b_gm)
    while mm.iterate():
        i, j = mm.block
        r = relu_out.alloc_tensor(asc.float32)
        mm.get_tensor_c(r, workspace=ws)
        asc.leaky_relu(r, r, alpha, t.base_m * t.base_n)
        relu_out.enque(r)
        r = relu_out.deque(asc.float32)
        rows = asc.DataCopyParams(t.base_m, t.base_n * 4 // 32, 0, (t.n - t.base_n) * 4 // 32)
        asc.data_copy(c_gm[i * t.base_m * t.n + j * t.base_n :], r, rows)
        relu_out.free_tensor(r)
    mm.end()


def reference(a, b, alpha=ALPHA):
    """The vendor's golden: fp32 product of the fp16 inputs, then LeakyReLU."""
    y = a.astype(np.float64) @ b.astype(np.float64)
    return np.where(y >= 0, y, alpha * y)


def main():
    import npu_jax

    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    ws = np.zeros((BLOCKS, TILING.base_m * TILING.base_n), np.float32)
    (_, _, c, _), report = matmul_leakyrelu[BLOCKS](
        a, b, np.zeros((M, N), np.float32), ws, hw=npu_jax.presets.ascend910b()
    )
    print(
        "max rel error vs float64:",
        float(np.max(np.abs(c - reference(a, b)) / (np.abs(reference(a, b)) + 1e-3))),
    )
    print(report.summary())


if __name__ == "__main__":
    main()

"""An int8 Cube kernel in the basic API: a [256, 64] @ b [64, 256] with int8 operands, the products
summed exactly into int32 in L0C, and the Fixpipe's way out chosen by its quantisation mode:
``NoQuant`` (int32 out), ``DEQF16`` (dequantised to half by ``deq_scalar``) or ``REQ8`` (requantised
to int8). The structure of the vendor's matmul_basic_api, with int8 fractals (16 x 32: C0 = 32). A
910B (Fixpipe) kernel.

    python examples/asc/matmul_int8.py
"""

from __future__ import annotations

import numpy as np

import npu_jax
from npu_jax import asc

M, N, K = 256, 256, 64
SINGLE_CORE_M = 128
P = asc.TPosition
FRACTAL_BYTES = 512  # one fractal: 16 rows of 32 bytes (16 x 32 int8)
OUT = {asc.QuantMode.NoQuant: asc.int32, asc.QuantMode.DEQF16: asc.half, asc.QuantMode.REQ8: asc.int8}


@asc.kernel(core="cube")
def matmul_int8(a, b, c, mode: asc.QuantMode, deq: float, m: int = SINGLE_CORE_M, n: int = N, k: int = K):
    a_gm, b_gm = asc.GlobalTensor(), asc.GlobalTensor()
    c_gm = asc.GlobalTensor()
    a_gm.set_global_buffer(a + asc.get_block_idx() * m * k)
    b_gm.set_global_buffer(b)
    c_gm.set_global_buffer(c + asc.get_block_idx() * m * n)
    pipe = asc.TPipe()
    in_a1, in_b1 = asc.TQue(P.A1, 1), asc.TQue(P.B1, 1)
    in_a2, in_b2 = asc.TQue(P.A2, 1), asc.TQue(P.B2, 1)
    out_co1 = asc.TQue(P.CO1, 1)
    pipe.init_buffer(in_a1, 1, m * k)  # int8: one byte an element
    pipe.init_buffer(in_b1, 1, k * n)
    pipe.init_buffer(in_a2, 1, m * k)
    pipe.init_buffer(in_b2, 1, k * n)
    pipe.init_buffer(out_co1, 1, m * n * 4)  # int32 accumulators

    a1, b1 = in_a1.alloc_tensor(asc.int8), in_b1.alloc_tensor(asc.int8)
    asc.data_copy(a1, a_gm, asc.Nd2NzParams(1, m, k, 0, k, m, 1, 0))
    asc.data_copy(b1, b_gm, asc.Nd2NzParams(1, k, n, 0, n, k, 1, 0))
    in_a1.enque(a1)
    in_b1.enque(b1)
    a1, b1 = in_a1.deque(asc.int8), in_b1.deque(asc.int8)
    a2, b2 = in_a2.alloc_tensor(asc.int8), in_b2.alloc_tensor(asc.int8)
    asc.load_data(a2, a1, asc.LoadData2DParams(0, m * k // FRACTAL_BYTES, 1, 0, 0, False, 0))
    asc.load_data(b2, b1, asc.LoadData2DParams(0, k * n // FRACTAL_BYTES, 1, 0, 0, False, 0))
    in_a1.free_tensor(a1)
    in_b1.free_tensor(b1)
    in_a2.enque(a2)
    in_b2.enque(b2)
    a2, b2 = in_a2.deque(asc.int8), in_b2.deque(asc.int8)
    c1 = out_co1.alloc_tensor(asc.int32)
    asc.mmad(c1, a2, b2, asc.MmadParams(m, n, k, 0, False, True))  # int8 x int8 -> int32
    out_co1.enque(c1)
    in_a2.free_tensor(a2)
    in_b2.free_tensor(b2)
    c1 = out_co1.deque(asc.int32)
    asc.fixpipe(c_gm, c1, asc.FixpipeParamsV220(n, m, m, n, False, mode, deq_scalar=deq))
    out_co1.free_tensor(c1)


def run(mode=asc.QuantMode.REQ8, deq: float = 1.0 / 256, seed: int = 0, hw=None):
    """(c, reference, report): the kernel's output and the integer reference through
    :func:`npu_jax.requantize` (the Fixpipe's formula)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    c = np.zeros((M, N), {"int32": np.int32, "half": np.float16, "int8": np.int8}[OUT[mode].name])
    outs, rep = matmul_int8[M // SINGLE_CORE_M](a, b, c, mode, deq, hw=hw or npu_jax.presets.ascend910b())
    acc = a.astype(np.int32) @ b.astype(np.int32)
    if mode is asc.QuantMode.NoQuant:
        ref = acc
    else:
        ref = np.asarray(npu_jax.requantize(acc, deq, 0, "int8" if mode is asc.QuantMode.REQ8 else "fp16"))
    return np.asarray(outs[2]), ref, rep


if __name__ == "__main__":
    for mode in OUT:
        got, ref, rep = run(mode)
        print(
            f"{mode.name:8s} equal: {bool((got == ref).all())}  {rep.cycles} cycles, {rep.pct_peak:.1%} of peak"
        )

"""A convolution on the Cube with img2col in the load (``LoadData`` 3D): one block computes a whole
output map. The feature map arrives in GM as NC1HWC0 (C1, H, W, C0) and is copied to L1 as is;
``load_data`` with ``LoadData3DParamsV2`` expands it into L0A (rows = output positions, columns =
(c1, kh, kw, c0)); the weights, already a (K, N) matrix in that column order, go GM -> L1 (Nd2Nz) ->
L0B; ``mmad`` and ``fixpipe`` finish as in matmul_basic_api. A 910B (Fixpipe) kernel.

    python examples/asc/conv_img2col.py
"""

from __future__ import annotations

import numpy as np

from npu_jax import asc

P = asc.TPosition
C0 = 16  # fp16


@asc.kernel(core="cube")
def conv_img2col(x, w, y, c: int, h: int, wd: int, n: int, kh: int, kw: int, stride: int, pad: int):
    out_h, out_w = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    m, k = out_h * out_w, c * kh * kw
    m16 = -(-m // 16) * 16  # L0A / L0C hold whole fractals of rows
    x_gm, w_gm, y_gm = asc.GlobalTensor(), asc.GlobalTensor(), asc.GlobalTensor()
    x_gm.set_global_buffer(x)
    w_gm.set_global_buffer(w)
    y_gm.set_global_buffer(y)
    pipe = asc.TPipe()
    q_a1, q_b1 = asc.TQue(P.A1, 1), asc.TQue(P.B1, 1)
    q_a2, q_b2 = asc.TQue(P.A2, 1), asc.TQue(P.B2, 1)
    q_c1 = asc.TQue(P.CO1, 1)
    pipe.init_buffer(q_a1, 1, c * h * wd * 2)
    pipe.init_buffer(q_b1, 1, k * n * 2)
    pipe.init_buffer(q_a2, 1, m16 * k * 2)
    pipe.init_buffer(q_b2, 1, k * n * 2)
    pipe.init_buffer(q_c1, 1, m16 * n * 4)

    a1, b1 = q_a1.alloc_tensor(asc.half), q_b1.alloc_tensor(asc.half)
    asc.data_copy(a1, x_gm, c * h * wd)  # NC1HWC0, as it lies in GM
    asc.data_copy(b1, w_gm, asc.Nd2NzParams(1, k, n, 0, n, k, 1, 0))
    q_a1.enque(a1)
    q_b1.enque(b1)
    a1, b1 = q_a1.deque(asc.half), q_b1.deque(asc.half)
    a2, b2 = q_a2.alloc_tensor(asc.half), q_b2.alloc_tensor(asc.half)
    img2col = asc.LoadData3DParamsV2(
        pad_list=(pad, pad, pad, pad), l1_h=h, l1_w=wd, channel_size=c, k_extension=k, m_extension=m,
        k_start_pt=0, m_start_pt=0, stride_w=stride, stride_h=stride, filter_w=kw, filter_h=kh,
    )  # fmt: skip
    asc.load_data(a2, a1, img2col)
    asc.load_data(b2, b1, asc.LoadData2DParams(0, (k // 16) * (n // 16), 1))
    q_a1.free_tensor(a1)
    q_b1.free_tensor(b1)
    q_a2.enque(a2)
    q_b2.enque(b2)
    a2, b2 = q_a2.deque(asc.half), q_b2.deque(asc.half)
    c1 = q_c1.alloc_tensor(asc.float32)
    asc.mmad(c1, a2, b2, asc.MmadParams(m, n, k, 0, False, True))
    q_a2.free_tensor(a2)
    q_b2.free_tensor(b2)
    q_c1.enque(c1)
    c1 = q_c1.deque(asc.float32)
    asc.fixpipe(y_gm, c1, asc.FixpipeParamsV220(n, m, m16, n, False, asc.QuantMode.F322F16))
    q_c1.free_tensor(c1)


def to_nc1hwc0(x):
    """(C, H, W) -> (C1, H, W, C0), C a multiple of C0."""
    c, h, w = x.shape
    return x.reshape(c // C0, C0, h, w).transpose(0, 2, 3, 1)


def weights_as_kn(wt):
    """(N, C, kh, kw) -> the (K, N) matrix whose rows run (c1, i, j, c0), img2col's column order."""
    n, c, kh, kw = wt.shape
    return wt.reshape(n, c // C0, C0, kh, kw).transpose(1, 3, 4, 2, 0).reshape(-1, n)


def reference(x, wt, stride, pad):
    """The convolution in int64 (exact on small integers): (C, H, W) * (N, C, kh, kw) -> (Ho * Wo, N)."""
    c, h, w = x.shape
    n, _, kh, kw = wt.shape
    xp = np.pad(x.astype(np.int64), ((0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
    cols = np.stack(
        [
            xp[:, i * stride : i * stride + kh, j * stride : j * stride + kw].reshape(-1)
            for i in range(oh)
            for j in range(ow)
        ]
    )
    return cols @ wt.astype(np.int64).reshape(n, -1).T


def run(x, wt, stride, pad, hw):
    (c, h, w), (n, _, kh, kw) = x.shape, wt.shape
    m = ((h + 2 * pad - kh) // stride + 1) * ((w + 2 * pad - kw) // stride + 1)
    y = np.zeros((m, n), np.float16)
    (_, _, y), report = conv_img2col[1](
        to_nc1hwc0(x), weights_as_kn(wt), y, c, h, w, n, kh, kw, stride, pad, hw=hw
    )
    return y, report


def main():
    import npu_jax

    rng = np.random.default_rng(0)
    x = rng.integers(-4, 5, (32, 8, 8)).astype(np.float16)
    wt = rng.integers(-4, 5, (16, 32, 3, 3)).astype(np.float16)
    y, report = run(x, wt, 1, 1, npu_jax.presets.ascend910b())
    assert np.array_equal(y, reference(x, wt, 1, 1).astype(np.float16))
    print(report.summary())


if __name__ == "__main__":
    main()

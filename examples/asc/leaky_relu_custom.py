"""LeakyReluCustom: the vendor's vector kernel with one input queue, one output queue and two TBuf
temporaries: y = max(x, 0) + slope * min(x, 0) (Maxs, Mins, Muls, Add). x [8, 200, 1024] fp32, slope
an attribute, 8 blocks, tile_num 16, BUFFER_NUM 2 (32 tiles of 6400 elements per block).

    python examples/asc/leaky_relu_custom.py
"""

from __future__ import annotations

import numpy as np

from npu_jax import asc

SHAPE = (8, 200, 1024)
BLOCKS, TILE_NUM, BUFFER_NUM = 8, 16, 2
SLOPE = 0.01


@asc.kernel
def leaky_relu_custom(x, y, total_length: int, tile_num: int = TILE_NUM, slope: float = SLOPE):
    block_length = total_length // asc.get_block_num()
    tile_length = block_length // tile_num // BUFFER_NUM
    x_gm, y_gm = asc.GlobalTensor(), asc.GlobalTensor()
    x_gm.set_global_buffer(x + block_length * asc.get_block_idx(), block_length)
    y_gm.set_global_buffer(y + block_length * asc.get_block_idx(), block_length)
    pipe = asc.TPipe()
    in_queue_x = asc.TQue(asc.TPosition.VECIN, BUFFER_NUM)
    out_queue_y = asc.TQue(asc.TPosition.VECOUT, BUFFER_NUM)
    tmp_buffer1, tmp_buffer2 = asc.TBuf(asc.TPosition.VECCALC), asc.TBuf(asc.TPosition.VECCALC)
    pipe.init_buffer(in_queue_x, BUFFER_NUM, tile_length * 4)
    pipe.init_buffer(out_queue_y, BUFFER_NUM, tile_length * 4)
    pipe.init_buffer(tmp_buffer1, tile_length * 4)
    pipe.init_buffer(tmp_buffer2, tile_length * 4)

    @asc.loop(tile_num * BUFFER_NUM)
    def _(i):
        # CopyIn
        x_local = in_queue_x.alloc_tensor(asc.float32)
        asc.data_copy(x_local, x_gm[i * tile_length :], tile_length)
        in_queue_x.enque(x_local)
        # Compute
        x_local = in_queue_x.deque(asc.float32)
        y_local = out_queue_y.alloc_tensor(asc.float32)
        tmp1, tmp2 = tmp_buffer1.get(asc.float32), tmp_buffer2.get(asc.float32)
        asc.maxs(tmp1, x_local, 0.0, tile_length)
        asc.mins(tmp2, x_local, 0.0, tile_length)
        asc.muls(tmp2, tmp2, slope, tile_length)
        asc.add(y_local, tmp1, tmp2, tile_length)
        out_queue_y.enque(y_local)
        in_queue_x.free_tensor(x_local)
        # CopyOut
        y_local = out_queue_y.deque(asc.float32)
        asc.data_copy(y_gm[i * tile_length :], y_local, tile_length)
        out_queue_y.free_tensor(y_local)


def reference(x, slope=SLOPE):
    """The same four fp32 operations in numpy, each rounded once: the bits the kernel must give."""
    x = x.astype(np.float32)
    return np.maximum(x, np.float32(0)) + np.minimum(x, np.float32(0)) * np.float32(slope)


def main():
    import npu_jax

    rng = np.random.default_rng(0)
    x = rng.uniform(-10, 10, SHAPE).astype(np.float32)
    (_, y), report = leaky_relu_custom[BLOCKS](x, np.zeros_like(x), x.size, hw=npu_jax.presets.ascend910b())
    assert np.array_equal(y, reference(x))
    print(report.summary())


if __name__ == "__main__":
    main()

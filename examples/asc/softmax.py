"""A row softmax, the kernel today's networks run most: y = softmax(x) over the last axis of an [R, C]
tensor, R split over the vector cores, each core's rows in tiles of ``tile_rows`` rows, double
buffered (copy in, the vendor's SoftMax, copy out). Half or float.

    python examples/asc/softmax.py
"""

from __future__ import annotations

import numpy as np

from npu_jax import asc

BUFFER_NUM = 2


@asc.kernel
def softmax_rows(x, y, rows: int, cols: int, tile_rows: int):
    per_block = rows // asc.get_block_num()
    tiles = per_block // tile_rows
    tile = tile_rows * cols
    dt = x.dtype
    xg, yg = asc.GlobalTensor(), asc.GlobalTensor()
    xg.set_global_buffer(x + asc.get_block_idx() * per_block * cols, per_block * cols)
    yg.set_global_buffer(y + asc.get_block_idx() * per_block * cols, per_block * cols)
    pipe = asc.TPipe()
    q_in, q_out = asc.TQue(asc.TPosition.VECIN, BUFFER_NUM), asc.TQue(asc.TPosition.VECOUT, BUFFER_NUM)
    stats = asc.TBuf(asc.TPosition.VECCALC)
    pipe.init_buffer(q_in, BUFFER_NUM, tile * dt.sizeof())
    pipe.init_buffer(q_out, BUFFER_NUM, tile * dt.sizeof())
    pipe.init_buffer(stats, 2 * tile_rows * 32)  # each row's sum and max: one 32-B block a row
    per = 32 // dt.sizeof()
    shape = asc.SoftMaxShapeInfo(tile_rows, cols, tile_rows, cols)
    tiling = asc.softmax_tiling_func((tile_rows, cols), dt.sizeof())

    @asc.loop(tiles)
    def _(i):
        x_local = q_in.alloc_tensor(dt)
        asc.data_copy(x_local, xg[i * tile :], tile)
        q_in.enque(x_local)
        x_local = q_in.deque(dt)
        y_local = q_out.alloc_tensor(dt)
        s = stats.get(dt)
        asc.softmax(y_local, s, s[tile_rows * per :], x_local, tiling, shape)
        q_out.enque(y_local)
        q_in.free_tensor(x_local)
        y_local = q_out.deque(dt)
        asc.data_copy(yg[i * tile :], y_local, tile)
        q_out.free_tensor(y_local)


def reference(x):
    """The softmax of every row in float64."""
    x = x.astype(np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def main():
    import npu_jax

    rng = np.random.default_rng(0)
    x = rng.uniform(-8, 8, (40 * 64, 256)).astype(np.float16)
    (_, y), report = softmax_rows[40](x, np.zeros_like(x), *x.shape, 16, hw=npu_jax.presets.ascend910b())
    print("max |error|:", np.abs(y - reference(x)).max())
    print(report.summary())


if __name__ == "__main__":
    main()

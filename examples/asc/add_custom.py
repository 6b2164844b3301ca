"""AddCustom: the vendor's first vector kernel (z = x + y, fp16), ported line by line.

Vendor sample: ``add_custom.cpp`` (TPipe, two VECIN queues and one VECOUT queue, double buffered).
Constants: x, y, z [8, 2048] half; 8 blocks; TILE_NUM 8; BUFFER_NUM 2; TILE_LENGTH 128; loop 16.

    python examples/asc/add_custom.py
"""

from __future__ import annotations

import numpy as np

from npu_jax import asc

TOTAL_LENGTH = 8 * 2048
USE_CORE_NUM = 8
BLOCK_LENGTH = TOTAL_LENGTH // USE_CORE_NUM
TILE_NUM = 8


@asc.kernel
def add_custom(x, y, z, block_length: int = BLOCK_LENGTH, tile_num: int = TILE_NUM, buffer_num: int = 2):
    tile_length = block_length // tile_num // buffer_num
    x_gm, y_gm, z_gm = asc.GlobalTensor(), asc.GlobalTensor(), asc.GlobalTensor()
    x_gm.set_global_buffer(x + block_length * asc.get_block_idx(), block_length)
    y_gm.set_global_buffer(y + block_length * asc.get_block_idx(), block_length)
    z_gm.set_global_buffer(z + block_length * asc.get_block_idx(), block_length)
    pipe = asc.TPipe()
    in_queue_x = asc.TQue(asc.TPosition.VECIN, buffer_num)
    in_queue_y = asc.TQue(asc.TPosition.VECIN, buffer_num)
    out_queue_z = asc.TQue(asc.TPosition.VECOUT, buffer_num)
    pipe.init_buffer(in_queue_x, buffer_num, tile_length * 2)
    pipe.init_buffer(in_queue_y, buffer_num, tile_length * 2)
    pipe.init_buffer(out_queue_z, buffer_num, tile_length * 2)

    @asc.loop(tile_num * buffer_num)
    def _(i):
        # CopyIn
        x_local = in_queue_x.alloc_tensor(asc.half)
        y_local = in_queue_y.alloc_tensor(asc.half)
        asc.data_copy(x_local, x_gm[i * tile_length :], tile_length)
        asc.data_copy(y_local, y_gm[i * tile_length :], tile_length)
        in_queue_x.enque(x_local)
        in_queue_y.enque(y_local)
        # Compute
        x_local = in_queue_x.deque(asc.half)
        y_local = in_queue_y.deque(asc.half)
        z_local = out_queue_z.alloc_tensor(asc.half)
        asc.add(z_local, x_local, y_local, tile_length)
        out_queue_z.enque(z_local)
        in_queue_x.free_tensor(x_local)
        in_queue_y.free_tensor(y_local)
        # CopyOut
        z_local = out_queue_z.deque(asc.half)
        asc.data_copy(z_gm[i * tile_length :], z_local, tile_length)
        out_queue_z.free_tensor(z_local)


def main():
    import npu_jax

    rng = np.random.default_rng(0)
    x = rng.uniform(1, 100, (8, 2048)).astype(np.float16)
    y = rng.uniform(1, 100, (8, 2048)).astype(np.float16)
    z = np.zeros((8, 2048), np.float16)
    (x, y, z), report = add_custom[USE_CORE_NUM](
        x, y, z, BLOCK_LENGTH, TILE_NUM, 2, hw=npu_jax.presets.ascend910b()
    )
    assert np.array_equal(z, (x + y).astype(np.float16))
    print(report.summary())


if __name__ == "__main__":
    main()

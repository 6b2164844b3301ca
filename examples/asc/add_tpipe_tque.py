"""add_tpipe_tque: the vendor's smallest queue kernel, z = x + y on [8 * 2048] fp32, 8 blocks, depth-1
queues, one CopyIn / Compute / CopyOut per block (no loop), ported line by line.

    python examples/asc/add_tpipe_tque.py
"""

from __future__ import annotations

import numpy as np

from npu_jax import asc

TOTAL_LENGTH = 8 * 2048
BLOCKS = 8


@asc.kernel
def add_tpipe_tque(x, y, z, block_length: int = TOTAL_LENGTH // BLOCKS):
    off = asc.get_block_idx() * block_length
    x_gm, y_gm, z_gm = asc.GlobalTensor(), asc.GlobalTensor(), asc.GlobalTensor()
    x_gm.set_global_buffer(x + off, block_length)
    y_gm.set_global_buffer(y + off, block_length)
    z_gm.set_global_buffer(z + off, block_length)
    pipe = asc.TPipe()
    que_x, que_y = asc.TQue(asc.TPosition.VECIN, 1), asc.TQue(asc.TPosition.VECIN, 1)
    que_z = asc.TQue(asc.TPosition.VECOUT, 1)
    for q in (que_x, que_y, que_z):
        pipe.init_buffer(q, 1, block_length * 4)
    # CopyIn
    x_local, y_local = que_x.alloc_tensor(asc.float32), que_y.alloc_tensor(asc.float32)
    asc.data_copy(x_local, x_gm, block_length)
    asc.data_copy(y_local, y_gm, block_length)
    que_x.enque(x_local)
    que_y.enque(y_local)
    # Compute
    x_local, y_local = que_x.deque(asc.float32), que_y.deque(asc.float32)
    z_local = que_z.alloc_tensor(asc.float32)
    asc.add(z_local, x_local, y_local, block_length)
    que_z.enque(z_local)
    que_x.free_tensor(x_local)
    que_y.free_tensor(y_local)
    # CopyOut
    z_local = que_z.deque(asc.float32)
    asc.data_copy(z_gm, z_local, block_length)
    que_z.free_tensor(z_local)


def main():
    import npu_jax

    rng = np.random.default_rng(0)
    x = rng.uniform(-10, 10, TOTAL_LENGTH).astype(np.float32)
    y = rng.uniform(-10, 10, TOTAL_LENGTH).astype(np.float32)
    (_, _, z), report = add_tpipe_tque[BLOCKS](x, y, np.zeros_like(x), hw=npu_jax.presets.ascend910b())
    assert np.array_equal(z, x + y)
    print(report.summary())


if __name__ == "__main__":
    main()

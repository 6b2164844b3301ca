"""A vector add in pyasc's dialect, run on the emulator (our own program, written for npu_jax).

A pyasc program runs here with its imports changed: ``from npu_jax import asc`` for ``import asc``,
``npu_jax.asc.runtime.config`` for ``asc.runtime.config``, ``npu_jax.asc.lib.runtime`` for
``asc.lib.runtime``. The launch writes ``z`` in place, as pyasc does, and returns the emulator's report.

    python examples/pyasc/add.py                    # the Model backend, Ascend910B1
    python examples/pyasc/add.py -v Ascend910B4     # another platform (the closest preset)
"""

from __future__ import annotations

import argparse

import numpy as np

import npu_jax.asc.lib.runtime as rt
import npu_jax.asc.runtime.config as config
from npu_jax import asc

CORES = 8
BUFFERS = 2
TILES = 4


@asc.jit
def load(i: int, x_gm: asc.GlobalTensor, y_gm: asc.GlobalTensor, qx: asc.TQue, qy: asc.TQue,
         tile: asc.ConstExpr[int]):  # fmt: skip
    xs = qx.alloc_tensor(x_gm.dtype)
    ys = qy.alloc_tensor(y_gm.dtype)
    asc.data_copy(xs, x_gm[i * tile :], count=tile)
    asc.data_copy(ys, y_gm[i * tile :], count=tile)
    qx.enque(xs)
    qy.enque(ys)


@asc.jit
def add_tile(qx: asc.TQue, qy: asc.TQue, qz: asc.TQue, dtype, tile: asc.ConstExpr[int]):
    xs = qx.deque(dtype)
    ys = qy.deque(dtype)
    zs = qz.alloc_tensor(dtype)
    asc.add(zs, xs, ys, count=tile)
    qz.enque(zs)
    qx.free_tensor(xs)
    qy.free_tensor(ys)


@asc.jit
def store(i: int, z_gm: asc.GlobalTensor, qz: asc.TQue, tile: asc.ConstExpr[int]):
    zs = qz.deque(z_gm.dtype)
    asc.data_copy(z_gm[i * tile :], zs, count=tile)
    qz.free_tensor(zs)


@asc.jit
def add_kernel(
    x: asc.GlobalAddress, y: asc.GlobalAddress, z: asc.GlobalAddress, per_core: asc.ConstExpr[int]
):
    start = asc.get_block_idx() * per_core
    tile = per_core // TILES // BUFFERS
    x_gm, y_gm, z_gm = asc.GlobalTensor(), asc.GlobalTensor(), asc.GlobalTensor()
    x_gm.set_global_buffer(x + start, per_core)
    y_gm.set_global_buffer(y + start, per_core)
    z_gm.set_global_buffer(z + start, per_core)
    pipe = asc.TPipe()
    qx = asc.TQue(asc.TPosition.VECIN, BUFFERS)
    qy = asc.TQue(asc.TPosition.VECIN, BUFFERS)
    qz = asc.TQue(asc.TPosition.VECOUT, BUFFERS)
    for q in (qx, qy, qz):
        pipe.init_buffer(que=q, num=BUFFERS, len=tile * x.dtype.sizeof())
    for i in asc.range(TILES * BUFFERS):
        load(i, x_gm, y_gm, qx, qy, tile)
        add_tile(qx, qy, qz, x.dtype, tile)
        store(i, z_gm, qz, tile)


def main(backend: str, platform: str | None) -> None:
    config.set_platform(config.Backend(backend), platform)
    rng = np.random.default_rng(0)
    x = rng.random(CORES * 2048, dtype=np.float32)
    y = rng.random(CORES * 2048, dtype=np.float32)
    z = np.zeros_like(x)
    report = add_kernel[CORES, rt.current_stream()](x, y, z, z.size // CORES)
    assert np.array_equal(z, x + y)
    print(report.summary())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-r", default="Model", help="backend (Model: the emulator)")
    parser.add_argument("-v", default=None, help="platform, e.g. Ascend910B1")
    args = parser.parse_args()
    main(args.r, args.v)

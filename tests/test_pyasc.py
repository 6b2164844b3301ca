"""pyasc's programs on the emulator: our own programs in pyasc's dialect (``npu_jax.asc.pyasc``).

One program per pyasc tutorial (01 add with static tensors and hand-set flags, 02 add with TPipe /
TQue and jit helpers, 03 Matmul MIX, 04 Matmul cube-only, 05 Matmul + LeakyReLU in the iterate loop)
and per pyasc kernel test (vadd; bilinear interpolation; Matmul with a host tiling and with one made
in the kernel; insert_sync's vadd, vadd with a scalar, quant, dynamic quant, softmax, Matmul), written
with pyasc's calls, keywords and sizes and checked against numpy on fresh seeded inputs. The outputs
are written in place, as pyasc writes them. The default run uses small sizes; the samples' own sizes
are the ``slow`` variants. Tests that need a part the emulator does not have yet skip, naming it.
"""

from __future__ import annotations

import numpy as np
import pytest

import npu_jax.asc.lib.host as host
import npu_jax.asc.lib.runtime as rt
import npu_jax.asc.runtime.config as config
from npu_jax import asc
from npu_jax.asc import launcher


@pytest.fixture(autouse=True)
def _model_backend():
    config.set_platform(config.Backend.Model)
    yield
    config.set_platform(config.Backend.Model)


# =====================================================================================================
# tutorial 01: vector add, static LocalTensors at byte addresses, flags by hand
# =====================================================================================================
def tutorial_01(TILE_NUM: int, BUFFER_NUM: int):
    @asc.jit
    def vadd_kernel(x: asc.GlobalAddress, y: asc.GlobalAddress, z: asc.GlobalAddress, block_length: int):
        offset = asc.get_block_idx() * block_length
        x_gm = asc.GlobalTensor()
        y_gm = asc.GlobalTensor()
        z_gm = asc.GlobalTensor()
        x_gm.set_global_buffer(x + offset, block_length)
        y_gm.set_global_buffer(y + offset, block_length)
        z_gm.set_global_buffer(z + offset, block_length)
        tile_length = block_length // TILE_NUM // BUFFER_NUM
        data_type = x.dtype
        buffer_size = tile_length * BUFFER_NUM * data_type.sizeof()
        x_local = asc.LocalTensor(data_type, asc.TPosition.VECIN, 0, tile_length * BUFFER_NUM)
        y_local = asc.LocalTensor(data_type, asc.TPosition.VECIN, buffer_size, tile_length * BUFFER_NUM)
        z_local = asc.LocalTensor(
            data_type, asc.TPosition.VECOUT, buffer_size + buffer_size, tile_length * BUFFER_NUM
        )
        for i in range(TILE_NUM * BUFFER_NUM):
            buf_id = i % BUFFER_NUM
            asc.data_copy(x_local[buf_id * tile_length :], x_gm[i * tile_length :], tile_length)
            asc.data_copy(y_local[buf_id * tile_length :], y_gm[i * tile_length :], tile_length)
            asc.set_flag(asc.HardEvent.MTE2_V, buf_id)
            asc.wait_flag(asc.HardEvent.MTE2_V, buf_id)
            asc.add(
                z_local[buf_id * tile_length :],
                x_local[buf_id * tile_length :],
                y_local[buf_id * tile_length :],
                tile_length,
            )
            asc.set_flag(asc.HardEvent.V_MTE3, buf_id)
            asc.wait_flag(asc.HardEvent.V_MTE3, buf_id)
            asc.data_copy(z_gm[i * tile_length :], z_local[buf_id * tile_length :], tile_length)
            asc.set_flag(asc.HardEvent.MTE3_MTE2, buf_id)
            asc.wait_flag(asc.HardEvent.MTE3_MTE2, buf_id)

    return vadd_kernel


def _run_tutorial_01(rng, use_core_num, size, tile_num, buffer_num):
    vadd_kernel = tutorial_01(tile_num, buffer_num)
    x = rng.random(size, dtype=np.float32)
    y = rng.random(size, dtype=np.float32)
    z = np.zeros_like(x)
    block_length = z.size // use_core_num
    report = vadd_kernel[use_core_num, rt.current_stream()](x, y, z, block_length)
    np.testing.assert_array_equal(z, x + y)
    assert report.cycles > 0


def test_tutorial_01_add_static_tensors(rng):
    _run_tutorial_01(rng, 8, 8 * 128, 1, 2)  # one tile, both buffers


# =====================================================================================================
# tutorial 02: vector add with TPipe / TQue and @asc.jit helpers
# =====================================================================================================
@asc.jit
def copy_in_02(
    i: int,
    x_gm: asc.GlobalAddress,
    y_gm: asc.GlobalAddress,
    in_queue_x: asc.TQue,
    in_queue_y: asc.TQue,
    tile_length: asc.ConstExpr[int],
):
    x_local = in_queue_x.alloc_tensor(x_gm.dtype)
    y_local = in_queue_y.alloc_tensor(y_gm.dtype)
    asc.data_copy(x_local, x_gm[i * tile_length :], tile_length)
    asc.data_copy(y_local, y_gm[i * tile_length :], tile_length)
    in_queue_x.enque(x_local)
    in_queue_y.enque(y_local)


@asc.jit
def compute_02(
    z_gm: asc.GlobalTensor,
    in_queue_x: asc.TQue,
    in_queue_y: asc.TQue,
    out_queue_z: asc.TQue,
    tile_length: asc.ConstExpr[int],
):
    x_local = in_queue_x.deque(z_gm.dtype)
    y_local = in_queue_y.deque(z_gm.dtype)
    z_local = out_queue_z.alloc_tensor(z_gm.dtype)
    asc.add(z_local, x_local, y_local, tile_length)
    out_queue_z.enque(z_local)
    in_queue_x.free_tensor(x_local)
    in_queue_y.free_tensor(y_local)


@asc.jit
def copy_out_02(i: int, z_gm: asc.GlobalTensor, out_queue_z: asc.TQue, tile_length: asc.ConstExpr[int]):
    z_local = out_queue_z.deque(z_gm.dtype)
    asc.data_copy(z_gm[i * tile_length :], z_local, tile_length)
    out_queue_z.free_tensor(z_local)


def tutorial_02(TILE_NUM: int, BUFFER_NUM: int):
    @asc.jit
    def vadd_kernel(
        x: asc.GlobalAddress,
        y: asc.GlobalAddress,
        z: asc.GlobalAddress,
        block_length: int,
        tile_length: asc.ConstExpr[int],
    ):
        offset = asc.get_block_idx() * block_length
        x_gm = asc.GlobalTensor()
        y_gm = asc.GlobalTensor()
        z_gm = asc.GlobalTensor()
        x_gm.set_global_buffer(x + offset)
        y_gm.set_global_buffer(y + offset)
        z_gm.set_global_buffer(z + offset)
        pipe = asc.TPipe()
        in_queue_x = asc.TQue(asc.TPosition.VECIN, BUFFER_NUM)
        in_queue_y = asc.TQue(asc.TPosition.VECIN, BUFFER_NUM)
        out_queue_z = asc.TQue(asc.TPosition.VECOUT, BUFFER_NUM)
        pipe.init_buffer(in_queue_x, BUFFER_NUM, tile_length * x.dtype.sizeof())
        pipe.init_buffer(in_queue_y, BUFFER_NUM, tile_length * y.dtype.sizeof())
        pipe.init_buffer(out_queue_z, BUFFER_NUM, tile_length * z.dtype.sizeof())
        for i in range(TILE_NUM * BUFFER_NUM):
            copy_in_02(i, x_gm, y_gm, in_queue_x, in_queue_y, tile_length)
            compute_02(z_gm, in_queue_x, in_queue_y, out_queue_z, tile_length)
            copy_out_02(i, z_gm, out_queue_z, tile_length)

    return vadd_kernel


def _run_tutorial_02(rng, use_core_num, size, tile_num, buffer_num):
    vadd_kernel = tutorial_02(tile_num, buffer_num)
    x = rng.random(size, dtype=np.float32)
    y = rng.random(size, dtype=np.float32)
    z = np.zeros_like(x)
    block_length = (z.size + use_core_num - 1) // use_core_num
    tile_length = block_length // tile_num // buffer_num
    vadd_kernel[use_core_num, rt.current_stream()](x, y, z, block_length, tile_length)
    np.testing.assert_array_equal(z, x + y)


def test_tutorial_02_add_framework(rng):
    _run_tutorial_02(rng, 8, 8 * 128, 1, 2)  # one tile, both buffers


# =====================================================================================================
# kernels/test_vadd: every size a ConstExpr, count= keywords
# =====================================================================================================
@asc.jit
def vadd_copy_in(
    i: int,
    x_gm: asc.GlobalAddress,
    y_gm: asc.GlobalAddress,
    in_queue_x: asc.TQue,
    in_queue_y: asc.TQue,
    TILE_LENGTH: asc.ConstExpr[int],
):
    x_local = in_queue_x.alloc_tensor(x_gm.dtype)
    y_local = in_queue_y.alloc_tensor(y_gm.dtype)
    asc.data_copy(x_local, x_gm[i * TILE_LENGTH :], count=TILE_LENGTH)
    asc.data_copy(y_local, y_gm[i * TILE_LENGTH :], count=TILE_LENGTH)
    in_queue_x.enque(x_local)
    in_queue_y.enque(y_local)


@asc.jit
def vadd_compute(
    z_gm: asc.GlobalTensor,
    in_queue_x: asc.TQue,
    in_queue_y: asc.TQue,
    out_queue_z: asc.TQue,
    TILE_LENGTH: asc.ConstExpr[int],
):
    x_local = in_queue_x.deque(z_gm.dtype)
    y_local = in_queue_y.deque(z_gm.dtype)
    z_local = out_queue_z.alloc_tensor(z_gm.dtype)
    asc.add(z_local, x_local, y_local, TILE_LENGTH)
    out_queue_z.enque(z_local)
    in_queue_x.free_tensor(x_local)
    in_queue_y.free_tensor(y_local)


@asc.jit
def vadd_copy_out(i: int, z_gm: asc.GlobalTensor, out_queue_z: asc.TQue, TILE_LENGTH: asc.ConstExpr[int]):
    z_local = out_queue_z.deque(z_gm.dtype)
    asc.data_copy(z_gm[i * TILE_LENGTH :], z_local, count=TILE_LENGTH)
    out_queue_z.free_tensor(z_local)


@asc.jit
def vadd_kernel(
    x: asc.GlobalAddress,
    y: asc.GlobalAddress,
    z: asc.GlobalAddress,
    BLOCK_LENGTH: asc.ConstExpr[int],
    BUFFER_NUM: asc.ConstExpr[int],
    TILE_LENGTH: asc.ConstExpr[int],
    TILE_NUM: asc.ConstExpr[int],
):
    offset = asc.get_block_idx() * BLOCK_LENGTH
    x_gm = asc.GlobalTensor()
    y_gm = asc.GlobalTensor()
    z_gm = asc.GlobalTensor()
    x_gm.set_global_buffer(x + offset)
    y_gm.set_global_buffer(y + offset)
    z_gm.set_global_buffer(z + offset)
    pipe = asc.TPipe()
    in_queue_x = asc.TQue(asc.TPosition.VECIN, BUFFER_NUM)
    in_queue_y = asc.TQue(asc.TPosition.VECIN, BUFFER_NUM)
    out_queue_z = asc.TQue(asc.TPosition.VECOUT, BUFFER_NUM)
    pipe.init_buffer(que=in_queue_x, num=BUFFER_NUM, len=TILE_LENGTH * x.dtype.sizeof())
    pipe.init_buffer(que=in_queue_y, num=BUFFER_NUM, len=TILE_LENGTH * y.dtype.sizeof())
    pipe.init_buffer(que=out_queue_z, num=BUFFER_NUM, len=TILE_LENGTH * z.dtype.sizeof())
    for i in range(TILE_NUM):
        vadd_copy_in(i, x_gm, y_gm, in_queue_x, in_queue_y, TILE_LENGTH)
        vadd_compute(z_gm, in_queue_x, in_queue_y, out_queue_z, TILE_LENGTH)
        vadd_copy_out(i, z_gm, out_queue_z, TILE_LENGTH)


def vadd_launch(x: np.ndarray, y: np.ndarray, tile_num: int = 8) -> np.ndarray:
    assert x.shape == y.shape and x.dtype == y.dtype
    z = np.zeros_like(x)
    TOTAL_LENGTH = z.size
    USE_CORE_NUM = 16
    BLOCK_LENGTH = asc.ceildiv(TOTAL_LENGTH, USE_CORE_NUM)
    TILE_NUM = tile_num
    TILE_LENGTH = asc.ceildiv(BLOCK_LENGTH, TILE_NUM)
    BUFFER_NUM = 1
    vadd_kernel[USE_CORE_NUM, rt.current_stream()](x, y, z, BLOCK_LENGTH, BUFFER_NUM, TILE_LENGTH, TILE_NUM)
    return z


def test_kernel_vadd(rng):
    config.set_platform(config.Backend.Model)
    x = rng.random(16 * 128, dtype=np.float32)
    y = rng.random(16 * 128, dtype=np.float32)
    np.testing.assert_allclose(vadd_launch(x, y, tile_num=2), x + y)


def test_launch_forms_and_in_place_outputs(rng):
    """kernel[n](...) without a stream, keyword arguments, the Report returned, z written in place (the
    program compiled by test_kernel_vadd is reused: the same sizes)."""
    x = rng.random(16 * 128, dtype=np.float32)
    y = rng.random(16 * 128, dtype=np.float32)
    z = np.zeros_like(x)
    report = vadd_kernel[16](x, y, z, BLOCK_LENGTH=128, BUFFER_NUM=1, TILE_LENGTH=64, TILE_NUM=2)
    np.testing.assert_array_equal(z, x + y)
    assert report.cycles > 0 and report.name == "vadd_kernel"
    assert report.hw.name == "ascend910b1"  # pyasc's Model default platform, Ascend910B1


@pytest.mark.slow
def test_kernel_vadd_sample_size(rng):
    config.set_platform(config.Backend.Model)
    x = rng.random(8192, dtype=np.float32)
    y = rng.random(8192, dtype=np.float32)
    np.testing.assert_allclose(vadd_launch(x, y), x + y)


# =====================================================================================================
# kernels/test_bilinear_interpolation: a TBuf's scratch, explicit dtypes, uint32 byte offsets
# =====================================================================================================
@asc.jit
def bil_copy_in(x_gm, x0_gm, y_gm, in_queue_x, in_queue_x0, in_queue_y, src0_len, src0_offset_len, src1_len):
    x_local = in_queue_x.alloc_tensor(x_gm.dtype)
    x0_local = in_queue_x0.alloc_tensor(x0_gm.dtype)
    y_local = in_queue_y.alloc_tensor(y_gm.dtype)
    asc.data_copy(x_local, x_gm, count=src0_len)
    asc.data_copy(x0_local, x0_gm, count=src0_offset_len)
    asc.data_copy(y_local, y_gm, count=src1_len)
    in_queue_x.enque(x_local)
    in_queue_x0.enque(x0_local)
    in_queue_y.enque(y_local)


@asc.jit
def bil_compute(
    in_queue_x,
    in_queue_x0,
    in_queue_y,
    out_queue_z,
    tmp_buf: asc.TBuf,
    h_repeat: asc.ConstExpr[int],
    repeat_mode: asc.ConstExpr[bool],
    dst_blk_stride: asc.ConstExpr[int],
    v_r_offset: asc.ConstExpr[int],
    v_repeat: asc.ConstExpr[int],
):
    x_local = in_queue_x.deque(asc.half)
    x0_local = in_queue_x0.deque(asc.uint32)
    y_local = in_queue_y.deque(asc.half)
    z_local = out_queue_z.alloc_tensor(asc.half)
    tmp = tmp_buf.alloc_tensor(asc.uint8)
    if dst_blk_stride > 1:  # not pyasc's: the gaps between blocks are read by the copy out
        asc.duplicate(z_local, 0.0, v_r_offset * v_repeat)
    mask = 128
    asc.bilinear_interpolation(
        z_local,
        x_local,
        x0_local,
        y_local,
        mask,
        h_repeat,
        repeat_mode,
        dst_blk_stride,
        v_r_offset,
        v_repeat,
        tmp,
    )
    out_queue_z.enque(z_local)
    in_queue_x.free_tensor(x_local)
    in_queue_x0.free_tensor(x0_local)
    in_queue_y.free_tensor(y_local)
    tmp_buf.free_tensor(tmp)


@asc.jit
def bil_copy_out(z_gm, out_queue_z, dst_len):
    z_local = out_queue_z.deque(asc.half)
    asc.data_copy(z_gm, z_local, count=dst_len)
    out_queue_z.free_tensor(z_local)


@asc.jit
def vbilinear_kernel(
    x: asc.GlobalAddress,
    x0: asc.GlobalAddress,
    y: asc.GlobalAddress,
    z: asc.GlobalAddress,
    src0_len: asc.ConstExpr[int],
    src0_offset_len: asc.ConstExpr[int],
    src1_len: asc.ConstExpr[int],
    dst_len: asc.ConstExpr[int],
    h_repeat: asc.ConstExpr[int],
    repeat_mode: asc.ConstExpr[bool],
    dst_blk_stride: asc.ConstExpr[int],
    v_r_offset: asc.ConstExpr[int],
    v_repeat: asc.ConstExpr[int],
):
    x_gm, x0_gm, y_gm, z_gm = asc.GlobalTensor(), asc.GlobalTensor(), asc.GlobalTensor(), asc.GlobalTensor()
    x_gm.set_global_buffer(x)
    x0_gm.set_global_buffer(x0)
    y_gm.set_global_buffer(y)
    z_gm.set_global_buffer(z)
    pipe = asc.TPipe()
    in_queue_x = asc.TQue(asc.TPosition.VECIN, 1)
    in_queue_x0 = asc.TQue(asc.TPosition.VECIN, 1)
    in_queue_y = asc.TQue(asc.TPosition.VECIN, 1)
    out_queue_z = asc.TQue(asc.TPosition.VECOUT, 1)
    tmp_buf = asc.TBuf(asc.TPosition.VECCALC)
    pipe.init_buffer(que=in_queue_x, num=1, len=src0_len * x.dtype.sizeof())
    pipe.init_buffer(que=in_queue_x0, num=1, len=src0_offset_len * x0.dtype.sizeof())
    pipe.init_buffer(que=in_queue_y, num=1, len=src1_len * y.dtype.sizeof())
    pipe.init_buffer(que=out_queue_z, num=1, len=dst_len * z.dtype.sizeof())
    pipe.init_buffer(buf=tmp_buf, num=(src0_len + src1_len) * x.dtype.sizeof())
    bil_copy_in(x_gm, x0_gm, y_gm, in_queue_x, in_queue_x0, in_queue_y, src0_len, src0_offset_len, src1_len)
    bil_compute(
        in_queue_x,
        in_queue_x0,
        in_queue_y,
        out_queue_z,
        tmp_buf,
        h_repeat,
        repeat_mode,
        dst_blk_stride,
        v_r_offset,
        v_repeat,
    )
    bil_copy_out(z_gm, out_queue_z, dst_len)


def _bilinear_numpy(
    src0, offsets, src1, h_repeat, repeat_mode, dst_blk_stride, v_r_offset, v_repeat, dst_len
):
    """The vendor's BilinearInterpolation in numpy, one product and one partial sum at a time, each
    rounded to half: vertical repeat v sums its h_repeat horizontal repeats of 8 blocks, the blocks read
    at the repeat's 8 byte offsets."""
    out = np.zeros(dst_len, np.float16)
    for v in range(v_repeat):
        acc = None
        for h in range(h_repeat):
            r = v * h_repeat + h
            for_blocks = []
            for j in range(8):
                start = int(offsets[r * 8 + j]) // 2
                s = src1[r * 8 + j] if repeat_mode else src1[r]
                for_blocks.append(
                    (src0[start : start + 16].astype(np.float32) * np.float32(s)).astype(np.float16)
                )
            p = np.stack(for_blocks)
            acc = p if acc is None else (acc.astype(np.float32) + p.astype(np.float32)).astype(np.float16)
        for j in range(8):
            o = v * v_r_offset + j * dst_blk_stride * 16
            out[o : o + 16] = acc[j]
    return out


@pytest.mark.parametrize("repeat_mode, dst_blk_stride", [(False, 1), (True, 1), (False, 2)])
def test_kernel_bilinear_interpolation(rng, repeat_mode, dst_blk_stride):
    """pyasc's sample sizes (src0 512 halves, 32 byte offsets, h_repeat 2, v_repeat 2), the offsets
    shuffled so the blocks are read out of order; the sample's atol of 1e-5 on fp16 results is exact
    agreement. With a dst block stride of 2 the gaps are zeros, duplicated first (initcheck finds the
    copy out's read of them otherwise)."""
    h_repeat, v_repeat = 2, 2
    v_r_offset = 128 * dst_blk_stride
    src0_len, src0_offset_len = 512, 32
    src1_len = 32 * 8 if repeat_mode else 16
    dst_len = v_r_offset * v_repeat
    x = rng.uniform(-10, 10, src0_len).astype(np.float16)
    x0 = (rng.permutation(32).astype(np.uint32)) * 32
    y = rng.uniform(-10, 10, src1_len).astype(np.float16)
    z = np.zeros(dst_len, np.float16)
    vbilinear_kernel[1, rt.current_stream()](
        x,
        x0,
        y,
        z,
        src0_len,
        src0_offset_len,
        src1_len,
        dst_len,
        h_repeat,
        repeat_mode,
        dst_blk_stride,
        v_r_offset,
        v_repeat,
    )
    ref = _bilinear_numpy(x, x0, y, h_repeat, repeat_mode, dst_blk_stride, v_r_offset, v_repeat, dst_len)
    np.testing.assert_allclose(z.astype(np.float32), ref.astype(np.float32), atol=1e-5)
    assert np.count_nonzero(z) > dst_len // dst_blk_stride // 2


# =====================================================================================================
# insert_sync/test_vadd and test_vadd_scalar: LocalTensorAuto, the flags inserted
# =====================================================================================================
@asc.jit
def auto_copy_in(
    i: int,
    x_gm: asc.GlobalTensor,
    y_gm: asc.GlobalTensor,
    x_local: asc.LocalTensorAuto,
    y_local: asc.LocalTensorAuto,
    tile_length: asc.ConstExpr[int],
):
    asc.data_copy(x_local, x_gm[i * tile_length :], count=tile_length)
    asc.data_copy(y_local, y_gm[i * tile_length :], count=tile_length)


@asc.jit
def auto_compute(
    x_local: asc.LocalTensorAuto,
    y_local: asc.LocalTensorAuto,
    z_local: asc.LocalTensorAuto,
    tile_length: asc.ConstExpr[int],
):
    asc.add(z_local, x_local, y_local, tile_length)


@asc.jit
def auto_copy_out(
    i: int, z_gm: asc.GlobalTensor, z_local: asc.LocalTensorAuto, tile_length: asc.ConstExpr[int]
):
    asc.data_copy(z_gm[i * tile_length :], z_local, count=tile_length)


@asc.jit
def vadd_auto_kernel(
    x: asc.GlobalAddress,
    y: asc.GlobalAddress,
    z: asc.GlobalAddress,
    block_length: asc.ConstExpr[int],
    tile_length: asc.ConstExpr[int],
    tile_num: asc.ConstExpr[int],
):
    # insert_sync=True is implied: the kernel uses LocalTensorAuto
    offset = asc.get_block_idx() * block_length
    x_gm = asc.GlobalTensor()
    y_gm = asc.GlobalTensor()
    z_gm = asc.GlobalTensor()
    x_gm.set_global_buffer(x + offset)
    y_gm.set_global_buffer(y + offset)
    z_gm.set_global_buffer(z + offset)
    for i in range(tile_num):
        x_local = asc.LocalTensorAuto(x.dtype, tile_length)
        y_local = asc.LocalTensorAuto(y.dtype, tile_length)
        z_local = asc.LocalTensorAuto(z.dtype, tile_length)
        auto_copy_in(i, x_gm, y_gm, x_local, y_local, tile_length)
        auto_compute(x_local, y_local, z_local, tile_length)
        auto_copy_out(i, z_gm, z_local, tile_length)


@asc.jit(insert_sync=True)
def vadd_scalar_kernel(
    x: asc.GlobalAddress,
    y: asc.GlobalAddress,
    z: asc.GlobalAddress,
    block_length: asc.ConstExpr[int],
    tile_length: asc.ConstExpr[int],
    tile_num: asc.ConstExpr[int],
):
    offset = asc.get_block_idx() * block_length
    x_gm = asc.GlobalTensor()
    y_gm = asc.GlobalTensor()
    z_gm = asc.GlobalTensor()
    x_gm.set_global_buffer(x + offset)
    y_gm.set_global_buffer(y)
    z_gm.set_global_buffer(z + offset)
    for i in range(tile_num):
        x_local = asc.LocalTensorAuto(x.dtype, tile_length)
        y_local = asc.LocalTensorAuto(y.dtype, tile_length)
        asc.data_copy(x_local, x_gm[i * tile_length :], count=tile_length)
        asc.data_copy(y_local, y_gm[0], count=tile_length)
        new_y_local = asc.LocalTensorAuto(y.dtype, tile_length)
        val = y_local.get_value(0)
        asc.duplicate(new_y_local, val, tile_length)
        z_local = asc.LocalTensorAuto(z.dtype, tile_length)
        asc.add(z_local, x_local, new_y_local, tile_length)
        asc.data_copy(z_gm[i * tile_length :], z_local, count=tile_length)


def _auto_vadd(kernel, x, y, tile_num):
    z = np.zeros_like(x)
    core_num = 16
    block_length = asc.ceildiv(z.size, core_num)
    tile_length = asc.ceildiv(block_length, tile_num)
    kernel[core_num, rt.current_stream()](x, y, z, block_length, tile_length, tile_num)
    return z


def test_insert_sync_vadd(rng):
    x = rng.random(16 * 128, dtype=np.float32)
    y = rng.random(16 * 128, dtype=np.float32)
    np.testing.assert_allclose(_auto_vadd(vadd_auto_kernel, x, y, 2), x + y)


def test_insert_sync_vadd_scalar(rng):
    x = rng.random(16 * 64, dtype=np.float32)
    y = rng.random(16 * 64, dtype=np.float32)
    np.testing.assert_allclose(_auto_vadd(vadd_scalar_kernel, x, y, 1), x + y[0])


# =====================================================================================================
# insert_sync/test_quant and test_quant_dynamic: asc.adv.quant
# =====================================================================================================
@asc.jit(kernel_type=config.KernelType.AIV_ONLY, insert_sync=True)
def quant_kernel(
    src_gm: asc.GlobalAddress,
    dst_gm: asc.GlobalAddress,
    size: asc.ConstExpr[int],
    tmp_min_bytes: asc.ConstExpr[int],
):
    src_global = asc.GlobalTensor()
    src_global.set_global_buffer(src_gm)
    dst_global = asc.GlobalTensor()
    dst_global.set_global_buffer(dst_gm)
    src_local = asc.LocalTensorAuto(src_global.dtype, size)
    asc.data_copy(src_local, src_global, count=size)
    dst_local = asc.LocalTensorAuto(asc.int8, size)
    tmp_local = asc.LocalTensorAuto(asc.uint8, tmp_min_bytes)
    scale = 2.0
    offset = 0.9
    asc.adv.quant(dst_local, src_local, scale, offset, size, tmp_local)
    asc.data_copy(dst_global, dst_local, count=size)


@asc.jit(kernel_type=config.KernelType.AIV_ONLY, insert_sync=True)
def quant_dynamic_kernel(
    src_gm: asc.GlobalAddress,
    dst_gm: asc.GlobalAddress,
    dim1: asc.ConstExpr[int],
    dim2: int,
    tmp_min_bytes: int,
):
    src_global = asc.GlobalTensor()
    src_global.set_global_buffer(src_gm)
    dst_global = asc.GlobalTensor()
    dst_global.set_global_buffer(dst_gm)
    src_local = asc.LocalTensorAuto(src_global.dtype, (dim1, dim2))
    asc.data_copy(src_local, src_global, dim1 * dim2)
    dst_local = asc.LocalTensorAuto(asc.int8, (dim1, dim2))
    tmp_local = asc.LocalTensorAuto(asc.uint8, tmp_min_bytes)
    scale = 2.0
    offset = 0.9
    asc.adv.quant(dst_local, src_local, scale, offset, dim1 * dim2, tmp_local)
    asc.data_copy(dst_global, dst_local, dim1 * dim2)


def _quant_golden(src: np.ndarray) -> np.ndarray:
    """fp16 arithmetic (src * 2.0 + 0.9, each step rounded to fp16), then round half to even."""
    return np.round((src * np.float16(2.0)) + np.float16(0.9)).astype(np.int8)


def test_insert_sync_quant(rng):
    size = 32
    src = (rng.random(size) * 8.0 - 4.0).astype(np.float16)
    grid = np.arange(-4, 4, 2**-10).astype(np.float16)  # values whose fp16 src * 2 + 0.9 is a tie (x.5)
    v = grid * np.float16(2.0) + np.float16(0.9)
    ties = np.unique(grid[(v - np.floor(v)) == 0.5])
    src[: len(ties)] = ties  # ties round to even (-6.5 -> -6, -5.5 -> -6 ...)
    dst = np.zeros_like(src, dtype=np.int8)
    quant_kernel[1, rt.current_stream()](src, dst, src.size, 512)
    np.testing.assert_allclose(dst, _quant_golden(src))


def test_insert_sync_quant_dynamic(rng):
    dim1, dim2 = 4, 8
    src = (rng.random((dim1, dim2)) * 8.0 - 4.0).astype(np.float16)
    dst = np.zeros_like(src, dtype=np.int8)
    quant_dynamic_kernel[1, rt.current_stream()](src, dst, dim1, dim2, 512)
    np.testing.assert_allclose(dst, _quant_golden(src))


# =====================================================================================================
# insert_sync/test_softmax: asc.adv.softmax on ShapeInfo rows, asc.range
# =====================================================================================================
@asc.jit(kernel_type=config.KernelType.AIV_ONLY, insert_sync=True)
def softmax_kernel(
    src: asc.GlobalAddress,
    dst: asc.GlobalAddress,
    height: asc.ConstExpr[int],
    width: asc.ConstExpr[int],
    tile_num: asc.ConstExpr[int],
    block_num: asc.ConstExpr[int],
):
    assert src.dtype == dst.dtype, "type not equal"
    total_length = height * width
    block_length = total_length // block_num
    tile_length = block_length // tile_num
    count = tile_length // width
    src_global = asc.GlobalTensor()
    src_global.set_global_buffer(src)
    dst_global = asc.GlobalTensor()
    dst_global.set_global_buffer(dst)
    for i in asc.range(tile_num):
        offset = asc.get_block_idx() * block_length + i * tile_length
        src_local = asc.LocalTensorAuto(src.dtype, tile_length)
        sum_local = asc.LocalTensorAuto(src.dtype, (height // block_num // tile_num) * count)
        max_local = asc.LocalTensorAuto(src.dtype, (height // block_num // tile_num) * count)
        dst_local = asc.LocalTensorAuto(dst.dtype, tile_length)
        asc.data_copy(src_local, src_global[offset:], count=tile_length)
        shape = asc.ShapeInfo(asc.array(asc.int32, (height // block_num // tile_num, width)))
        src_local.set_shape_info(shape)
        dst_local.set_shape_info(shape)
        shape = asc.ShapeInfo(asc.array(asc.int32, (height // block_num // tile_num, count)))
        sum_local.set_shape_info(shape)
        max_local.set_shape_info(shape)
        tiling = asc.adv.SoftmaxTiling()
        asc.adv.softmax(src_local, sum_local, max_local, src_local, tiling)
        asc.data_copy(dst_local, src_local, count=tile_length)
        asc.data_copy(dst_global[offset:], dst_local, count=tile_length)


def _softmax_numpy(t: np.ndarray) -> np.ndarray:
    e = np.exp(t.astype(np.float64) - np.max(t))
    return e / e.sum(axis=-1, keepdims=True)


def test_insert_sync_softmax(rng):
    height, width, tile_num, block_num = 256, 32, 2, 16  # 8 rows a tile, as the sample's
    src = rng.random((height, width), dtype=np.float32) * 5.0
    dst = np.zeros_like(src)
    softmax_kernel[16, rt.current_stream()](src, dst, height, width, tile_num=tile_num, block_num=block_num)
    np.testing.assert_allclose(dst, _softmax_numpy(src), atol=1 / src.size)


@pytest.mark.slow
def test_insert_sync_softmax_sample_size(rng):
    # the sample's own 1024 x 1024 on 16 blocks: 8 tiles unrolled a block (70 s, 2.4 GB, all checks on)
    src = rng.random((1024, 1024), dtype=np.float32) * 5.0
    dst = np.zeros_like(src)
    softmax_kernel[16, rt.current_stream()](src, dst, 1024, 1024, tile_num=8, block_num=16)
    np.testing.assert_allclose(dst, _softmax_numpy(src), atol=1 / src.size)


# =====================================================================================================
# Matmul: the host tiling, and the kernels' shared offsets
# =====================================================================================================
def generate_tiling(
    m, n, k, dim, c_position=host.TPosition.GM, bias=False, fix_split=None, trans=(False, False)
):
    """The tutorials' host tiling (pyasc's MultiCoreMatmulTiling calls, in their order)."""
    matmul_tiling = host.MultiCoreMatmulTiling(host.get_ascendc_platform())
    matmul_tiling.set_a_type(host.TPosition.GM, host.CubeFormat.ND, host.DataType.DT_FLOAT16, trans[0])
    matmul_tiling.set_b_type(host.TPosition.GM, host.CubeFormat.ND, host.DataType.DT_FLOAT16, trans[1])
    matmul_tiling.set_c_type(c_position, host.CubeFormat.ND, host.DataType.DT_FLOAT)
    matmul_tiling.set_bias_type(host.TPosition.GM, host.CubeFormat.ND, host.DataType.DT_FLOAT)
    matmul_tiling.set_dim(dim)
    matmul_tiling.set_org_shape(m, n, k)
    matmul_tiling.set_shape(m, n, k)
    matmul_tiling.enable_bias(bias)
    if fix_split is not None:
        matmul_tiling.set_traverse(host.MatrixTraverse.FIRSTM)
        matmul_tiling.set_fix_split(*fix_split)
    matmul_tiling.set_buffer_space(-1, -1, -1)
    tiling = asc.adv.TCubeTiling()
    matmul_tiling.get_tiling(tiling)
    return tiling


def _ints(rng, shape):
    return rng.integers(-5, 5, shape).astype(np.float16)


def _matmul_ref(a, b, bias=None):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    return ref if bias is None else ref + bias.astype(np.float64)


WORKSPACE_BYTES = 16 * 1024 * 1024


# =====================================================================================================
# tutorial 03: Matmul, MIX (1 AIC + 2 AIV a group), iterate_all into GM
# =====================================================================================================
IS_TRANS_A = False
IS_TRANS_B = False


@asc.jit
def calc_offsets_03(tiling: asc.adv.TCubeTiling, is_trans_a: bool = False, is_trans_b: bool = False):
    block_idx = asc.get_block_idx()
    m_single_blocks = tiling.m.ceildiv(tiling.single_core_m)
    m_index = block_idx % m_single_blocks
    n_index = block_idx // m_single_blocks
    offset_a = m_index * tiling.k_a * tiling.single_core_m
    if is_trans_a:
        offset_a = m_index * tiling.single_core_m
    offset_b = n_index * tiling.single_core_n
    if is_trans_b:
        offset_b = n_index * tiling.k_b * tiling.single_core_n
    offset_c = m_index * tiling.n * tiling.single_core_m + n_index * tiling.single_core_n
    tail_m = tiling.m - m_index * tiling.single_core_m
    if tail_m >= tiling.single_core_m:
        tail_m = tiling.single_core_m
    tail_n = tiling.n - n_index * tiling.single_core_n
    if tail_n >= tiling.single_core_n:
        tail_n = tiling.single_core_n
    return offset_a, offset_b, offset_c, tail_m, tail_n


@asc.jit(always_compile=True)
def matmul_mix_kernel(
    a: asc.GlobalAddress,
    b: asc.GlobalAddress,
    c: asc.GlobalAddress,
    tiling: asc.adv.TCubeTiling,
    workspace: asc.GlobalAddress,
):
    offset_a, offset_b, offset_c, tail_m, tail_n = calc_offsets_03(tiling, IS_TRANS_A, IS_TRANS_B)
    a_global = asc.GlobalTensor()
    b_global = asc.GlobalTensor()
    c_global = asc.GlobalTensor()
    a_global.set_global_buffer(a + offset_a)
    b_global.set_global_buffer(b + offset_b)
    c_global.set_global_buffer(c + offset_c)
    pipe = asc.TPipe()
    matmul = asc.adv.Matmul(
        a=asc.adv.MatmulType(asc.TPosition.GM, asc.CubeFormat.ND, a_global.dtype, IS_TRANS_A),
        b=asc.adv.MatmulType(asc.TPosition.GM, asc.CubeFormat.ND, b_global.dtype, IS_TRANS_B),
        c=asc.adv.MatmulType(asc.TPosition.GM, asc.CubeFormat.ND, c_global.dtype),
    )
    asc.adv.register_matmul(pipe, workspace, matmul, tiling)
    if asc.get_block_idx() < tiling.used_core_num:
        matmul.set_tensor_a(a_global, IS_TRANS_A)
        matmul.set_tensor_b(b_global, IS_TRANS_B)
        matmul.set_tail(tail_m, tail_n)
        matmul.iterate_all(c_global)
        matmul.end()
    asc.pipe_barrier(asc.PipeID.PIPE_ALL)


def _run_tutorial_03(rng, m, k, n, use_core_num):
    a, b = _ints(rng, (m, k)), _ints(rng, (k, n))
    tiling = generate_tiling(m, n, k, use_core_num)
    c = np.zeros((m, n), dtype=np.float32)
    workspace = np.zeros(WORKSPACE_BYTES, dtype=np.uint8)
    # the block_num of a MIX kernel is its number of AIC-AIV groups
    matmul_mix_kernel[use_core_num // 2, rt.current_stream()](a, b, c, tiling, workspace)
    np.testing.assert_allclose(c, _matmul_ref(a, b), rtol=1e-3, atol=1e-3)


def test_tutorial_03_matmul_mix(rng):
    _run_tutorial_03(rng, 32, 32, 48, 4)  # 2 groups: AIV blocks 0-3, three single-core blocks (3 skips)


@pytest.mark.slow
def test_tutorial_03_matmul_mix_sample_size(rng):
    _run_tutorial_03(rng, 512, 512, 1024, 48)


# =====================================================================================================
# tutorial 04: Matmul, cube only (AIC_ONLY), bias from the tiling's is_bias
# =====================================================================================================
ENABLE_BIAS = False


@asc.jit
def calc_offsets_04(tiling: asc.adv.TCubeTiling, is_trans_a: bool = False, is_trans_b: bool = False):
    block_idx = asc.get_block_idx()
    m_single_blocks = tiling.m.ceildiv(tiling.single_core_m)
    m_index = block_idx % m_single_blocks
    n_index = block_idx // m_single_blocks
    offset_a = m_index * tiling.k_a * tiling.single_core_m
    if is_trans_a:
        offset_a = m_index * tiling.single_core_m
    offset_b = n_index * tiling.single_core_n
    if is_trans_b:
        offset_b = n_index * tiling.k_b * tiling.single_core_n
    offset_c = m_index * tiling.n * tiling.single_core_m + n_index * tiling.single_core_n
    offset_bias = n_index * tiling.single_core_n
    tail_m = tiling.m - m_index * tiling.single_core_m
    if tail_m <= 0 or tail_m >= tiling.single_core_m:
        tail_m = tiling.single_core_m
    tail_n = tiling.n - n_index * tiling.single_core_n
    if tail_n <= 0 or tail_n >= tiling.single_core_n:
        tail_n = tiling.single_core_n
    return offset_a, offset_b, offset_c, offset_bias, tail_m, tail_n


@asc.jit(matmul_cube_only=True, always_compile=True)
def matmul_cube_only_kernel(
    a: asc.GlobalAddress,
    b: asc.GlobalAddress,
    c: asc.GlobalAddress,
    bias: asc.GlobalAddress,
    tiling: asc.adv.TCubeTiling,
    workspace: asc.GlobalAddress,
):
    if asc.ascend_is_aic():
        offset_a, offset_b, offset_c, offset_bias, tail_m, tail_n = calc_offsets_04(
            tiling, IS_TRANS_A, IS_TRANS_B
        )
        a_global = asc.GlobalTensor()
        b_global = asc.GlobalTensor()
        c_global = asc.GlobalTensor()
        bias_global = asc.GlobalTensor()
        a_global.set_global_buffer(a + offset_a)
        b_global.set_global_buffer(b + offset_b)
        c_global.set_global_buffer(c + offset_c)
        bias_global.set_global_buffer(bias + offset_bias)
        pipe = asc.TPipe()
        matmul = asc.adv.Matmul(
            a=asc.adv.MatmulType(asc.TPosition.GM, asc.CubeFormat.ND, a_global.dtype, IS_TRANS_A),
            b=asc.adv.MatmulType(asc.TPosition.GM, asc.CubeFormat.ND, b_global.dtype, IS_TRANS_B),
            c=asc.adv.MatmulType(asc.TPosition.GM, asc.CubeFormat.ND, c_global.dtype),
            bias=asc.adv.MatmulType(asc.TPosition.GM, asc.CubeFormat.ND, bias_global.dtype),
        )
        asc.adv.register_matmul(pipe, workspace, matmul, tiling)
        if asc.get_block_idx() < tiling.used_core_num:
            matmul.set_tensor_a(a_global, IS_TRANS_A)
            matmul.set_tensor_b(b_global, IS_TRANS_B)
            if tiling.is_bias:
                matmul.set_bias(bias_global)
            matmul.set_tail(tail_m, tail_n, tiling.k_a)
            matmul.iterate_all(c_global)
            matmul.end()
        asc.pipe_barrier(asc.PipeID.PIPE_ALL)


def _run_tutorial_04(rng, m, k, n, use_core_num, enable_bias):
    a, b = _ints(rng, (m, k)), _ints(rng, (k, n))
    bias = rng.integers(-5, 5, (1, n)).astype(np.float32)
    tiling = generate_tiling(m, n, k, use_core_num, bias=enable_bias)
    c = np.zeros((m, n), dtype=np.float32)
    workspace = np.zeros(WORKSPACE_BYTES, dtype=np.uint8)
    matmul_cube_only_kernel[tiling.used_core_num, rt.current_stream()](a, b, c, bias, tiling, workspace)
    ref = _matmul_ref(a, b, bias if enable_bias else None)
    np.testing.assert_allclose(c, ref, rtol=1e-3, atol=1e-3)


def test_tutorial_04_matmul_cube_only_bias(rng):
    _run_tutorial_04(rng, 32, 32, 128, 2, True)


@pytest.mark.slow
def test_tutorial_04_matmul_cube_only_sample_size(rng):
    _run_tutorial_04(rng, 128, 64, 30720, 24, ENABLE_BIAS)


# =====================================================================================================
# tutorial 05: Matmul + bias in the iterate loop, LeakyReLU on the vector side (MIX)
# =====================================================================================================
@asc.jit
def calc_offsets_05(tiling: asc.adv.TCubeTiling):
    block_idx = asc.get_block_idx()
    m_single_blocks = tiling.m.ceildiv(tiling.single_core_m)
    m_index = block_idx % m_single_blocks
    n_index = block_idx // m_single_blocks
    offset_a = m_index * tiling.k_a * tiling.single_core_m
    offset_b = n_index * tiling.single_core_n
    offset_c = m_index * tiling.n * tiling.single_core_m + n_index * tiling.single_core_n
    offset_bias = n_index * tiling.single_core_n
    return offset_a, offset_b, offset_c, offset_bias


@asc.jit(always_compile=True)
def matmul_leakyrelu_kernel(
    a: asc.GlobalAddress,
    b: asc.GlobalAddress,
    c: asc.GlobalAddress,
    bias: asc.GlobalAddress,
    alpha: float,
    tiling: asc.adv.TCubeTiling,
    workspace: asc.GlobalAddress,
):
    offset_a, offset_b, offset_c, offset_bias = calc_offsets_05(tiling)
    a_global = asc.GlobalTensor()
    b_global = asc.GlobalTensor()
    c_global = asc.GlobalTensor()
    bias_global = asc.GlobalTensor()
    a_global.set_global_buffer(a + offset_a)
    b_global.set_global_buffer(b + offset_b)
    c_global.set_global_buffer(c + offset_c)
    bias_global.set_global_buffer(bias + offset_bias)
    size = tiling.base_m * tiling.base_n * c.dtype.sizeof()
    pipe = asc.TPipe()
    relu_out_queue = asc.TQue(asc.TPosition.VECOUT, 1)
    pipe.init_buffer(que=relu_out_queue, num=1, len=size)
    matmul = asc.adv.Matmul(
        a=asc.adv.MatmulType(asc.TPosition.GM, asc.CubeFormat.ND, a_global.dtype),
        b=asc.adv.MatmulType(asc.TPosition.GM, asc.CubeFormat.ND, b_global.dtype),
        c=asc.adv.MatmulType(asc.TPosition.VECCALC, asc.CubeFormat.ND, c_global.dtype),
        bias=asc.adv.MatmulType(asc.TPosition.GM, asc.CubeFormat.ND, bias_global.dtype),
    )
    asc.adv.register_matmul(pipe, workspace, matmul, tiling)
    matmul.set_tensor_a(a_global)
    matmul.set_tensor_b(b_global)
    matmul.set_bias(bias_global)
    with matmul.iterate() as count:
        relu_out_local = relu_out_queue.alloc_tensor(c.dtype)
        matmul.get_tensor_c(relu_out_local, en_sequential_write=True)
        asc.leaky_relu(relu_out_local, relu_out_local, alpha, count=tiling.base_m * tiling.base_n)
        relu_out_queue.enque(relu_out_local)
        relu_out_local = relu_out_queue.deque(c.dtype)
        round_m = tiling.single_core_m // tiling.base_m
        start_offset = count % round_m * tiling.base_m * tiling.n + count // round_m * tiling.base_n
        params = asc.DataCopyParams(
            block_count=tiling.base_m,
            block_len=tiling.base_n * c.dtype.sizeof() // asc.property(asc.DEFAULT_C0_SIZE),
            src_stride=0,
            dst_stride=(tiling.n - tiling.base_n) * c.dtype.sizeof() // asc.property(asc.DEFAULT_C0_SIZE),
        )
        asc.data_copy(c_global[start_offset:], relu_out_local, repeat_params=params)
        relu_out_queue.free_tensor(relu_out_local)
    matmul.end()
    asc.pipe_barrier(asc.PipeID.PIPE_ALL)


def _leaky(ref, alpha):
    return np.where(ref >= 0, ref, ref * alpha)


def _run_tutorial_05(rng, m, k, n, dim, fix_split):
    a, b = _ints(rng, (m, k)), _ints(rng, (k, n))
    bias = rng.integers(-5, 5, (1, n)).astype(np.float32)
    alpha = 0.001
    tiling = generate_tiling(m, n, k, dim, c_position=host.TPosition.VECCALC, bias=True, fix_split=fix_split)
    c = np.zeros((m, n), dtype=np.float32)
    workspace = np.zeros(WORKSPACE_BYTES, dtype=np.uint8)
    report = matmul_leakyrelu_kernel[tiling.used_core_num // 2, rt.current_stream()](
        a, b, c, bias, alpha, tiling, workspace
    )
    np.testing.assert_allclose(c, _leaky(_matmul_ref(a, b, bias), alpha), rtol=1e-3, atol=1e-3)
    return tiling, report


def test_tutorial_05_matmul_leakyrelu(rng):
    # one group: two AIV blocks of 32 x 32, one base block each
    tiling, report = _run_tutorial_05(rng, 64, 32, 32, 2, (32, 32, -1))
    assert (tiling.used_core_num, tiling.single_core_m, tiling.single_core_n) == (2, 32, 32)
    assert report.pipe_busy["CUBE"] > 0 and report.pipe_busy["VECTOR"] > 0


@pytest.mark.slow
def test_tutorial_05_matmul_leakyrelu_walks_m_first(rng):
    # two AIV blocks of 64 x 64, each four 32 x 32 base blocks: count 1 is the block below count 0
    tiling, _ = _run_tutorial_05(rng, 128, 32, 64, 2, (32, 32, -1))
    assert (tiling.used_core_num, tiling.single_core_m, tiling.single_core_n) == (2, 64, 64)


# =====================================================================================================
# kernels/test_matmul: a TCubeTiling made on the host by keyword, fields assigned in the kernel
# =====================================================================================================
@asc.jit
def calc_offsets_kernel(tiling: asc.adv.TCubeTiling):
    block_idx = asc.get_block_idx()
    temp0 = tiling.m.ceildiv(tiling.single_core_m)
    temp1 = tiling.k_a.ceildiv(tiling.single_core_k)
    temp2 = tiling.used_core_num // temp1
    m_index = (block_idx % temp2) % temp0
    n_index = (block_idx % temp2) // temp0
    offset_a = m_index * tiling.k_a * tiling.single_core_m
    offset_b = n_index * tiling.single_core_n
    offset_c = m_index * tiling.n * tiling.single_core_m + n_index * tiling.single_core_n
    offset_bias = n_index * tiling.single_core_n
    return offset_a, offset_b, offset_c, offset_bias


@asc.jit
def matmul_kernel(
    a: asc.GlobalAddress,
    b: asc.GlobalAddress,
    c: asc.GlobalAddress,
    alpha: float,
    tiling: asc.adv.TCubeTiling,
    bias: asc.GlobalAddress,
    workspace: asc.GlobalAddress,
):
    tiling.share_l1_size = asc.property(asc.TOTAL_L1_SIZE)
    tiling.share_l0c_size = asc.property(asc.TOTAL_L0C_SIZE)
    offset_a, offset_b, offset_c, offset_bias = calc_offsets_kernel(tiling)
    a_global = asc.GlobalTensor()
    b_global = asc.GlobalTensor()
    c_global = asc.GlobalTensor()
    bias_global = asc.GlobalTensor()
    a_global.set_global_buffer(a + offset_a)
    b_global.set_global_buffer(b + offset_b)
    c_global.set_global_buffer(c + offset_c)
    bias_global.set_global_buffer(bias + offset_bias)
    size = tiling.base_m * tiling.base_n * c.dtype.sizeof()
    pipe = asc.TPipe()
    relu_out_queue = asc.TQue(asc.TPosition.VECOUT, 1)
    pipe.init_buffer(que=relu_out_queue, num=2, len=size)
    matmul = asc.adv.Matmul(
        a=asc.adv.MatmulType(asc.TPosition.GM, asc.CubeFormat.ND, a_global.dtype),
        b=asc.adv.MatmulType(asc.TPosition.GM, asc.CubeFormat.ND, b_global.dtype),
        c=asc.adv.MatmulType(asc.TPosition.VECCALC, asc.CubeFormat.ND, c_global.dtype),
        bias=asc.adv.MatmulType(asc.TPosition.GM, asc.CubeFormat.ND, bias_global.dtype),
        matmul_config=asc.adv.MatmulConfig(),
    )
    asc.adv.register_matmul(pipe, workspace, matmul)
    matmul.init(tiling)
    matmul.set_tensor_a(a_global)
    matmul.set_tensor_b(b_global)
    matmul.set_bias(bias_global)
    with matmul.iterate() as count:
        relu_out_local = relu_out_queue.alloc_tensor(c.dtype)
        matmul.get_tensor_c(relu_out_local, en_sequential_write=True)
        asc.leaky_relu(relu_out_local, relu_out_local, alpha, count=tiling.base_m * tiling.base_n)
        relu_out_queue.enque(relu_out_local)
        relu_out_local = relu_out_queue.deque(c.dtype)
        round_m = tiling.single_core_m // tiling.base_m
        start_offset = count % round_m * tiling.base_m * tiling.n + count // round_m * tiling.base_n
        params = asc.DataCopyParams(
            block_count=tiling.base_m,
            block_len=tiling.base_n * c.dtype.sizeof() // asc.property(asc.DEFAULT_C0_SIZE),
            src_stride=0,
            dst_stride=(tiling.n - tiling.base_n) * c.dtype.sizeof() // asc.property(asc.DEFAULT_C0_SIZE),
        )
        asc.data_copy(c_global[start_offset:], relu_out_local, repeat_params=params)
        relu_out_queue.free_tensor(relu_out_local)
    matmul.end()
    asc.pipe_barrier(asc.PipeID.PIPE_ALL)


# AIVs used_core_num.. 2 x used_core_num - 1 recompute and rewrite the blocks of AIVs 0.. (the sample's
# `% temp2`): the same bits written twice, which gives the same C in any order and is no race; the
# checks (all on, raising) find nothing.
CHECKS = "all"


def matmul_launch(a, b, bias, alpha, kernel=matmul_kernel, block=64):
    size_m, size_k = a.shape
    size_n = b.shape[1]
    c = np.empty((size_m, size_n), dtype=a.dtype if a.dtype == np.float32 else np.float32)
    blocksize_m, blocksize_n, blocksize_k = block, block, block
    single_m, single_n, single_k = block, block, size_k
    used_core_num = asc.ceildiv(size_m, single_m) * asc.ceildiv(size_n, single_n)
    tiling = asc.adv.TCubeTiling(
        used_core_num=used_core_num,
        m=size_m,
        k_a=size_k,
        k_b=size_k,
        n=size_n,
        base_m=blocksize_m,
        base_k=blocksize_k,
        base_n=blocksize_n,
        single_core_m=single_m,
        single_core_k=single_k,
        single_core_n=single_n,
        depth_a1=1,
        depth_b1=1,
        step_m=1,
        step_n=1,
        share_mode=0,
        is_bias=1,
    )
    workspace = np.zeros(WORKSPACE_BYTES, dtype="uint8")
    if kernel is matmul_kernel:
        kernel[used_core_num, rt.current_stream()](a, b, c, alpha, tiling, bias, workspace, checks=CHECKS)
    else:
        kernel[used_core_num, rt.current_stream()](
            a, b, c, alpha, tiling, workspace, bias, blocksize_m * blocksize_n, checks=CHECKS
        )
    return c, tiling


def _matmul_data(rng, m, k, n, dtype):
    a = ((rng.random((m, k), dtype="float32") - 0.5) * 10).astype(dtype)
    b = ((rng.random((k, n), dtype="float32") - 0.5) * 10).astype(dtype)
    bias = (rng.random((1, n), dtype="float32") - 0.5) * 10
    return a, b, bias


def _check_matmul(rng, m, k, n, block, kernel=matmul_kernel, dtype=np.float32):
    a, b, bias = _matmul_data(rng, m, k, n, dtype)
    alpha = 0.01
    c, tiling = matmul_launch(a, b, bias, alpha, kernel, block)
    ref = _matmul_ref(a, b, bias)
    # fp16 operands: exact products, sums in fp32; fp32 operands (the Cube's fp32 mode on the 910B):
    # each product within 1.5 ulp of fp32, the sums in fp32
    np.testing.assert_allclose(c, _leaky(ref, alpha), rtol=1e-5, atol=1e-3)
    assert tiling.share_l1_size == 0  # the kernel's assignments were made on its copy


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_kernel_matmul(rng, dtype):
    """pyasc's test_matmul: float32 A, B, bias and C, as it has them; and with half A and B."""
    _check_matmul(rng, 64, 64, 64, 32, dtype=dtype)


@pytest.mark.slow
def test_kernel_matmul_sample_size(rng):
    _check_matmul(rng, 256, 256, 256, 64)


# =====================================================================================================
# kernels/test_matmul_torch: the TCubeTiling made inside the kernel from ConstExprs; keyword arguments
# =====================================================================================================
@asc.jit
def calc_offsets_torch(tiling: asc.adv.TCubeTiling):
    block_idx = asc.get_block_idx()
    temp0 = tiling.m.ceildiv(tiling.single_core_m)
    temp1 = tiling.k_a.ceildiv(tiling.single_core_k)
    temp2 = tiling.used_core_num // temp1
    m_index = (block_idx % temp2) % temp0
    n_index = (block_idx % temp2) // temp0
    offset_a = m_index * tiling.k_a * tiling.single_core_m
    offset_b = n_index * tiling.single_core_n
    offset_c = m_index * tiling.n * tiling.single_core_m + n_index * tiling.single_core_n
    return offset_a, offset_b, offset_c


@asc.jit
def matmul_torch_kernel(
    a: asc.GlobalAddress,
    b: asc.GlobalAddress,
    c: asc.GlobalAddress,
    alpha: float,
    size_m: asc.ConstExpr[int],  # the problem
    size_k: asc.ConstExpr[int],
    size_n: asc.ConstExpr[int],
    size_base_m: asc.ConstExpr[int],  # the base block
    size_base_k: asc.ConstExpr[int],
    size_base_n: asc.ConstExpr[int],
    size_single_m: asc.ConstExpr[int],  # one core's block
    size_single_k: asc.ConstExpr[int],
    size_single_n: asc.ConstExpr[int],
    used_core_num: asc.ConstExpr[int],
    workspace: asc.GlobalAddress,
):
    tiling = asc.adv.TCubeTiling(
        used_core_num=used_core_num,
        m=size_m,
        k_a=size_k,
        k_b=size_k,
        n=size_n,
        base_m=size_base_m,
        base_k=size_base_k,
        base_n=size_base_n,
        single_core_m=size_single_m,
        single_core_k=size_single_k,
        single_core_n=size_single_n,
        depth_a1=1,
        depth_b1=1,
        step_m=1,
        step_n=1,
        share_mode=0,
        share_ub_size=0,
        share_l1_size=asc.property(asc.TOTAL_L1_SIZE),
        share_l0c_size=asc.property(asc.TOTAL_L0C_SIZE),
    )
    offset_a, offset_b, offset_c = calc_offsets_torch(tiling)
    a_global = asc.GlobalTensor()
    b_global = asc.GlobalTensor()
    c_global = asc.GlobalTensor()
    a_global.set_global_buffer(a + offset_a)
    b_global.set_global_buffer(b + offset_b)
    c_global.set_global_buffer(c + offset_c)
    size = tiling.base_m * tiling.base_n * c.dtype.sizeof()
    pipe = asc.TPipe()
    relu_out_queue = asc.TQue(asc.TPosition.VECOUT, 1)
    pipe.init_buffer(que=relu_out_queue, num=2, len=size)
    matmul = asc.adv.Matmul(
        a=asc.adv.MatmulType(asc.TPosition.GM, asc.CubeFormat.ND, a_global.dtype),
        b=asc.adv.MatmulType(asc.TPosition.GM, asc.CubeFormat.ND, b_global.dtype),
        c=asc.adv.MatmulType(asc.TPosition.VECCALC, asc.CubeFormat.ND, c_global.dtype),
    )
    asc.adv.register_matmul(pipe, workspace, matmul)
    matmul.init(tiling)
    matmul.set_tensor_a(a_global)
    matmul.set_tensor_b(b_global)
    with matmul.iterate() as count:
        relu_out_local = relu_out_queue.alloc_tensor(c.dtype)
        matmul.get_tensor_c(relu_out_local, en_sequential_write=True)
        asc.leaky_relu(relu_out_local, relu_out_local, alpha, count=tiling.base_m * tiling.base_n)
        relu_out_queue.enque(relu_out_local)
        relu_out_local = relu_out_queue.deque(c.dtype)
        round_m = tiling.single_core_m // tiling.base_m
        start_offset = count % round_m * tiling.base_m * tiling.n + count // round_m * tiling.base_n
        params = asc.DataCopyParams(
            block_count=tiling.base_m,
            block_len=tiling.base_n * c.dtype.sizeof() // asc.property(asc.DEFAULT_C0_SIZE),
            src_stride=0,
            dst_stride=(tiling.n - tiling.base_n) * c.dtype.sizeof() // asc.property(asc.DEFAULT_C0_SIZE),
        )
        asc.data_copy(c_global[start_offset:], relu_out_local, repeat_params=params)
        relu_out_queue.free_tensor(relu_out_local)
    matmul.end()
    asc.pipe_barrier(asc.PipeID.PIPE_ALL)


def matmul_torch_launch(a, b, alpha, block=64):
    size_m, size_k = a.shape
    size_n = b.shape[1]
    c = np.empty((size_m, size_n), dtype=np.float32)
    blocksize_m, blocksize_n, blocksize_k = block, block, block
    single_m, single_n, single_k = block, block, size_k
    used_core_num = asc.ceildiv(size_m, single_m) * asc.ceildiv(size_n, single_n)
    workspace = np.zeros(WORKSPACE_BYTES, dtype=np.uint8)
    matmul_torch_kernel[used_core_num, rt.current_stream()](
        a,
        b,
        c,
        alpha,
        size_m=size_m,
        size_k=size_k,
        size_n=size_n,
        size_base_m=blocksize_m,
        size_base_k=blocksize_k,
        size_base_n=blocksize_n,
        size_single_m=single_m,
        size_single_k=single_k,
        size_single_n=single_n,
        used_core_num=used_core_num,
        workspace=workspace,
        checks=CHECKS,
    )
    return c


def test_kernel_matmul_in_kernel_tiling(rng):
    a, b, _ = _matmul_data(rng, 64, 64, 64, np.float32)
    c = matmul_torch_launch(a, b, 0.01, block=32)
    np.testing.assert_allclose(c, _leaky(_matmul_ref(a, b), 0.01), rtol=1e-5, atol=1e-3)


@pytest.mark.slow
def test_kernel_matmul_in_kernel_tiling_sample_size(rng):
    a, b, _ = _matmul_data(rng, 256, 256, 256, np.float32)
    c = matmul_torch_launch(a, b, 0.01)
    np.testing.assert_allclose(c, _leaky(_matmul_ref(a, b), 0.01), rtol=1e-5, atol=1e-3)


def test_kernel_matmul_torch_tensors(rng):
    """The same program on torch CPU tensors (written in place, as pyasc writes them)."""
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(int(rng.integers(2**31)))
    a = (torch.randn((64, 64), generator=gen) - 0.5) * 10  # float32, as pyasc's test has them
    b = (torch.randn((64, 64), generator=gen) - 0.5) * 10
    c = torch.empty((64, 64), dtype=a.dtype)
    workspace = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8)
    matmul_torch_kernel[4, rt.current_stream()](
        a,
        b,
        c,
        0.01,
        size_m=64,
        size_k=64,
        size_n=64,
        size_base_m=32,
        size_base_k=32,
        size_base_n=32,
        size_single_m=32,
        size_single_k=64,
        size_single_n=32,
        used_core_num=4,
        workspace=workspace,
        checks=CHECKS,
    )
    ref = torch.from_numpy(_matmul_ref(a.numpy(), b.numpy()).astype(np.float32))
    assert torch.allclose(c, torch.where(ref >= 0, ref, ref * 0.01), rtol=1e-5, atol=1e-3)


# =====================================================================================================
# insert_sync/test_matmul: the iterate loop's UB tensor a LocalTensorAuto; a bare ConstExpr
# =====================================================================================================
@asc.jit(insert_sync=True)
def matmul_auto_kernel(
    a: asc.GlobalAddress,
    b: asc.GlobalAddress,
    c: asc.GlobalAddress,
    alpha: float,
    tiling: asc.adv.TCubeTiling,
    workspace: asc.GlobalAddress,
    bias: asc.GlobalAddress,
    blocksize: asc.ConstExpr,
):
    tiling.share_l1_size = asc.property(asc.TOTAL_L1_SIZE)
    tiling.share_l0c_size = asc.property(asc.TOTAL_L0C_SIZE)
    offset_a, offset_b, offset_c, offset_bias = calc_offsets_kernel(tiling)
    a_global = asc.GlobalTensor()
    b_global = asc.GlobalTensor()
    c_global = asc.GlobalTensor()
    bias_global = asc.GlobalTensor()
    a_global.set_global_buffer(a + offset_a)
    b_global.set_global_buffer(b + offset_b)
    c_global.set_global_buffer(c + offset_c)
    bias_global.set_global_buffer(bias + offset_bias)
    pipe = asc.TPipe()
    matmul = asc.adv.Matmul(
        a=asc.adv.MatmulType(asc.TPosition.GM, asc.CubeFormat.ND, a_global.dtype),
        b=asc.adv.MatmulType(asc.TPosition.GM, asc.CubeFormat.ND, b_global.dtype),
        c=asc.adv.MatmulType(asc.TPosition.VECCALC, asc.CubeFormat.ND, c_global.dtype),
        bias=asc.adv.MatmulType(asc.TPosition.GM, asc.CubeFormat.ND, bias_global.dtype),
        matmul_config=asc.adv.MatmulConfig(),
    )
    asc.adv.register_matmul(pipe, workspace, matmul)
    matmul.init(tiling)
    matmul.set_tensor_a(a_global)
    matmul.set_tensor_b(b_global)
    matmul.set_bias(bias_global)
    with matmul.iterate() as count:
        relu_out_local = asc.LocalTensorAuto(c.dtype, blocksize)
        matmul.get_tensor_c(relu_out_local, en_sequential_write=True)
        asc.leaky_relu(relu_out_local, relu_out_local, alpha, count=tiling.base_m * tiling.base_n)
        round_m = tiling.single_core_m // tiling.base_m
        start_offset = count % round_m * tiling.base_m * tiling.n + count // round_m * tiling.base_n
        params = asc.DataCopyParams(
            block_count=tiling.base_m,
            block_len=tiling.base_n * c.dtype.sizeof() // asc.property(asc.DEFAULT_C0_SIZE),
            src_stride=0,
            dst_stride=(tiling.n - tiling.base_n) * c.dtype.sizeof() // asc.property(asc.DEFAULT_C0_SIZE),
        )
        asc.data_copy(c_global[start_offset:], relu_out_local, repeat_params=params)
    matmul.end()
    asc.pipe_barrier(asc.PipeID.PIPE_ALL)


def test_insert_sync_matmul(rng):
    _check_matmul(rng, 64, 64, 64, 32, kernel=matmul_auto_kernel)


@pytest.mark.slow
def test_insert_sync_matmul_sample_size(rng):
    _check_matmul(rng, 256, 256, 256, 64, kernel=matmul_auto_kernel)


# =====================================================================================================
# tutorials 03 and 04 with jit=False: the kernel runs block by block, the block index a Python int (slow:
# call by call; the jitted tests above run them once the launcher branches on the block index)
# =====================================================================================================
@pytest.mark.slow
def test_tutorial_03_matmul_mix_call_by_call(rng):
    m, k, n, use_core_num = 32, 32, 48, 4  # 2 groups: AIV blocks 0-3, three single-core blocks of C
    a, b = _ints(rng, (m, k)), _ints(rng, (k, n))
    tiling = generate_tiling(m, n, k, use_core_num)
    assert tiling.used_core_num == 3
    c = np.zeros((m, n), dtype=np.float32)
    report = matmul_mix_kernel[use_core_num // 2, rt.current_stream()](
        a, b, c, tiling, np.zeros(1024, np.uint8), jit=False
    )
    np.testing.assert_allclose(c, _matmul_ref(a, b), rtol=1e-3, atol=1e-3)
    assert report.pipe_busy["CUBE"] > 0


@pytest.mark.slow
def test_tutorial_04_matmul_cube_only_call_by_call(rng):
    m, k, n = 32, 32, 128
    a, b = _ints(rng, (m, k)), _ints(rng, (k, n))
    bias = rng.integers(-5, 5, (1, n)).astype(np.float32)
    tiling = generate_tiling(m, n, k, 2, bias=True)
    c = np.zeros((m, n), dtype=np.float32)
    matmul_cube_only_kernel[tiling.used_core_num, rt.current_stream()](
        a, b, c, bias, tiling, np.zeros(1024, np.uint8), jit=False
    )
    np.testing.assert_allclose(c, _matmul_ref(a, b, bias), rtol=1e-3, atol=1e-3)


# =====================================================================================================
# the interface itself: options, launch forms, config, rt, the host tiler, structs, the rewrite
# =====================================================================================================
def test_jit_options():
    kt = config.KernelType.AIV_ONLY
    for opts in (
        {},
        {"always_compile": True},
        {"matmul_cube_only": True, "insert_sync": False},
        {
            "kernel_type": kt,
            "debug": True,
            "opt_level": 2,
            "auto_sync": True,
            "capture_exceptions": False,
            "bisheng_options": ("-O2",),
            "verify_sync": True,
        },
    ):
        k = asc.jit(**opts)(lambda x: None)
        assert isinstance(k, launcher.Kernel) and k.options == opts
    with pytest.raises(TypeError, match="bogus"):
        asc.jit(bogus=1)
    with pytest.raises(TypeError, match="debug"):

        @asc.jit
        def clash(x, debug):
            pass

    with pytest.raises(TypeError, match="launch an asc.jit kernel"):
        vadd_kernel(1, 2, 3, 4, 5, 6, 7)
    with pytest.raises(asc.AscError, match="core_num"):
        vadd_kernel[0, rt.current_stream()]
    x = np.ones(16 * 128, np.float32)
    with pytest.raises(TypeError, match="ConstExpr"):
        vadd_kernel[16](x, x, x.copy(), 128.5, 1, 64, 2)
    with pytest.raises(TypeError, match="vadd_kernel"):
        vadd_kernel[16](x, x, x.copy(), 128, 1, 64, 2, bogus=3)


def test_config_and_rt():
    assert config.Backend("Model") is config.Backend.Model is config.Backend(config.Backend.Model)
    assert "Model" in config.Backend.__members__
    assert config.Platform("Ascend910B4-1") is config.Platform.Ascend910B4_1
    assert config.KernelType.MIX_AIC_1_2 == 7
    assert config.current_platform() is config.Platform.Ascend910B1
    assert config.hardware().name == "ascend910b1"
    assert asc.property(asc.TOTAL_L1_SIZE) == 512 * 1024 and asc.property(asc.TOTAL_L0C_SIZE) == 128 * 1024
    assert asc.property(asc.DEFAULT_C0_SIZE) == 32 == asc.property(asc.ONE_BLK_SIZE)
    config.set_platform("Model", "Ascend910B4")
    assert config.hardware().name == "ascend910b" and host.get_ascendc_platform().get_core_num_aic() == 20
    config.set_platform(config.Backend.Model, config.Platform.Ascend910_9391)
    assert config.hardware().name == "ascend910b1"
    with pytest.raises(RuntimeError, match="NPU"):
        config.set_platform(config.Backend.NPU)
    with pytest.raises(ValueError, match="platform"):
        config.set_platform("Model", "Ascend310P3")
    assert rt.current_stream() == rt.current_stream() and rt.synchronize() is None and rt.is_available()


@pytest.mark.parametrize(
    "m, n, k, dim, fix, want",
    [
        (
            512,
            1024,
            512,
            48,
            None,
            dict(used_core_num=32, single_core_m=128, single_core_n=128, base_m=128, base_n=128, base_k=256),
        ),
        (
            128,
            30720,
            64,
            24,
            None,
            dict(used_core_num=24, single_core_m=128, single_core_n=1280, base_m=128, base_n=256, base_k=64),
        ),
        (
            1024,
            640,
            256,
            2,
            (256, 128, -1),
            dict(used_core_num=2, single_core_m=512, single_core_n=640, base_m=256, base_n=128, base_k=128),
        ),
    ],
)
def test_host_tiling_of_the_tutorials(m, n, k, dim, fix, want):
    c_pos = host.TPosition.GM if fix is None else host.TPosition.VECCALC
    t = generate_tiling(m, n, k, dim, c_position=c_pos, bias=fix is not None, fix_split=fix)
    assert {f: getattr(t, f) for f in want} == want
    assert (t.m, t.n, t.k_a, t.k_b, t.single_core_k, t.iterate_order) == (m, n, k, k, k, 0)
    assert t.is_bias == int(fix is not None)


def test_host_tiling_rule(rng):
    """Every tiling is exact and fits the buffers; a shape the rule cannot split raises."""
    hw = config.hardware()
    for _ in range(40):
        m, n = (16 * int(rng.integers(1, 40)) for _ in range(2))
        k, dim = 16 * int(rng.integers(1, 20)), int(rng.integers(1, 49))
        t = generate_tiling(m, n, k, dim, c_position=host.TPosition.VECCALC)
        assert t.used_core_num <= dim and t.m % t.single_core_m == 0 and t.n % t.single_core_n == 0
        assert (t.m // t.single_core_m) * (t.n // t.single_core_n) == t.used_core_num
        assert t.single_core_m % t.base_m == 0 and t.single_core_n % t.base_n == 0 and k % t.base_k == 0
        assert t.base_m * t.base_n * 4 <= hw.l0c_bytes and 2 * t.base_m * t.base_n * 4 <= hw.ub_bytes
        assert t.base_m * t.base_k * 2 <= hw.l0a_bytes and t.base_k * t.base_n * 2 <= hw.l0b_bytes
    with pytest.raises(ValueError, match="no split"):
        generate_tiling(8, 64, 32, 4)


def test_tiling_struct():
    t = asc.adv.TCubeTiling(m=100, single_core_m=32, is_bias=1)
    assert (t.m, t.n, t.batch_num, t.is_bias) == (100, 0, 0, 1)
    assert t.m.ceildiv(t.single_core_m) == 4 and asc.ceildiv(100, 32) == 4
    with pytest.raises(TypeError, match="bogus"):
        asc.adv.TCubeTiling(bogus=1)
    with pytest.raises(AttributeError):
        t.bogus = 1
    copy = t.freeze().thaw()
    copy.m = 7
    assert (
        t.m == 100
        and copy.m == 7
        and t.freeze() == asc.adv.TCubeTiling(m=100, single_core_m=32, is_bias=1).freeze()
    )
    assert len(asc.adv.TCubeTiling.FIELDS) == 49 and asc.adv.SoftmaxTiling().tail_reduce_size == 0


def test_iterate_rewrite():
    class Mm:
        def iterate(self, n=3):
            return iter(range(n))

    seen = []
    step = 10

    @asc.jit
    def body(mm):
        with mm.iterate() as count:
            seen.append(count * step)
        with mm.iterate(2):
            seen.append(-1)

    assert body.fn is not body.source and body.fn.__code__.co_filename == __file__
    body.fn(Mm())
    assert seen == [0, 10, 20, -1, -1]
    assert body.fn.__code__.co_firstlineno == body.source.__code__.co_firstlineno + 1  # the def line

    @asc.jit
    def plain(x):
        return x

    assert plain.fn is plain.source


def test_language_helpers():
    assert list(asc.range(2, 9, 3)) == [2, 5, 8] and list(asc.static_range(3)) == [0, 1, 2]
    with pytest.raises(TypeError):
        asc.range(1.5)
    assert asc.PipeID.PIPE_ALL == "ALL" and asc.CubeFormat.ND == 0
    info = asc.ShapeInfo(asc.array(asc.int32, (8, 1024)))
    assert (info.shape(0), info[-1], len(info)) == (8, 1024, 2)
    assert asc.array(asc.int32, 3, fill_value=7) == [7, 7, 7]
    assert asc.ConstExpr.unwrap(asc.ConstExpr(5)) == 5 == asc.ConstExpr.unwrap(5)

"""Ascend C in Python: write a kernel in the vendor's vocabulary and run it on the emulated core.

The names are Ascend C's in snake_case, as the vendor's own Python front end (pyasc) spells them,
so a sample ports line by line::

    from npu_jax import asc

    @asc.kernel
    def add_custom(x, y, z, block_length: int, tile_num: int):
        tile = block_length // tile_num // 2
        off = asc.get_block_idx() * block_length
        x_gm, y_gm, z_gm = asc.GlobalTensor(), asc.GlobalTensor(), asc.GlobalTensor()
        x_gm.set_global_buffer(x + off, block_length)
        ...
    outs, report = add_custom[8](x, y, z, 2048, 8, hw=npu_jax.presets.ascend910b(), checks="all")

Every call issues the existing instructions of :mod:`npu_jax.core` (one machine: the same costs,
flags, queues and sanitizers as the built-in kernels). docs/kernels.md is the guide, with a table
of every supported call beside its Ascend C name.
"""

from npu_jax.asc.cube import data_copy, fixpipe, load_3d, load_data, mmad
from npu_jax.asc.debug import dump_tensor, printf
from npu_jax.asc.launcher import Kernel, kernel, last_run, launch, loop
from npu_jax.asc.matmul import Matmul, TCubeTiling
from npu_jax.asc.ops import (
    AscWarning,
    abs,
    add,
    adds,
    cast,
    data_copy_pad,
    div,
    duplicate,
    exp,
    get_block_idx,
    get_block_num,
    leaky_relu,
    ln,
    max,
    maxs,
    min,
    mins,
    mul,
    muls,
    pipe_barrier,
    reduce_max,
    reduce_sum,
    relu,
    set_flag,
    sqrt,
    sub,
    wait_flag,
)
from npu_jax.asc.pipe import LocalMemAllocator, TBuf, TPipe, TQue
from npu_jax.asc.runtime import AscError
from npu_jax.asc.tensors import GlobalAddress, GlobalTensor, LocalTensor
from npu_jax.asc.types import (
    PIPE_ALL,
    PIPE_FIX,
    PIPE_M,
    PIPE_MTE1,
    PIPE_MTE2,
    PIPE_MTE3,
    PIPE_S,
    PIPE_V,
    DataCopyExtParams,
    DataCopyPadExtParams,
    DataCopyParams,
    DType,
    FixpipeParamsV220,
    HardEvent,
    Hardware,
    LoadData2DParams,
    LoadData3DParamsV2,
    MmadParams,
    Nd2NzParams,
    QuantMode,
    RoundMode,
    TPosition,
    bfloat16,
    float16,
    float32,
    half,
    int8,
    int32,
)

__all__ = [
    "AscError",
    "AscWarning",
    "DType",
    "DataCopyExtParams",
    "DataCopyPadExtParams",
    "DataCopyParams",
    "FixpipeParamsV220",
    "GlobalAddress",
    "GlobalTensor",
    "HardEvent",
    "Hardware",
    "Kernel",
    "LoadData2DParams",
    "LoadData3DParamsV2",
    "LocalMemAllocator",
    "LocalTensor",
    "Matmul",
    "MmadParams",
    "Nd2NzParams",
    "PIPE_ALL",
    "PIPE_FIX",
    "PIPE_M",
    "PIPE_MTE1",
    "PIPE_MTE2",
    "PIPE_MTE3",
    "PIPE_S",
    "PIPE_V",
    "QuantMode",
    "RoundMode",
    "TBuf",
    "TCubeTiling",
    "TPipe",
    "TPosition",
    "TQue",
    "abs",
    "add",
    "adds",
    "bfloat16",
    "cast",
    "data_copy",
    "data_copy_pad",
    "div",
    "dump_tensor",
    "duplicate",
    "exp",
    "fixpipe",
    "float16",
    "float32",
    "get_block_idx",
    "get_block_num",
    "half",
    "int32",
    "int8",
    "kernel",
    "last_run",
    "launch",
    "leaky_relu",
    "ln",
    "load_3d",
    "load_data",
    "loop",
    "max",
    "maxs",
    "min",
    "mins",
    "mmad",
    "mul",
    "muls",
    "pipe_barrier",
    "printf",
    "reduce_max",
    "reduce_sum",
    "relu",
    "set_flag",
    "sqrt",
    "sub",
    "wait_flag",
]

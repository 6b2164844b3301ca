"""The vendor's API list, row by row: which calls ``asc`` runs and which it refuses, and why.

The rows are the families of asc-devkit's ``Ascend-C-API列表.md`` (vector compute, data movement,
synchronisation, system variables, atomics, the high-level calls kernels use). ``REFUSED`` names every
call of those families ``asc`` does not run; ``npu_jax.asc.<name>`` of one of them is a function that
raises ``NotImplementedError`` naming the call and the reason when it is called (never an
``AttributeError``). docs/kernels.md prints the same table; ``tests/test_asc_coverage.py`` holds the
two together.
"""

from __future__ import annotations

# asc name -> (the vendor's name, its family, why it is refused)
REFUSED: dict[str, tuple[str, str, str]] = {
    "get_cmp_mask": (
        "GetCmpMask",
        "compare / select",
        "the CmpMask register is not modelled: compare into a uint8 tensor",
    ),
    "set_cmp_mask": (
        "SetCmpMask",
        "compare / select",
        "the CmpMask register is not modelled: select with a mask tensor",
    ),
    "gather_mask": (
        "GatherMask",
        "compare / select",
        "its data-dependent compaction (rsvdCnt) is not emulated yet",
    ),
    "get_gather_mask_remain_count": (
        "GetGatherMaskRemainCount",
        "compare / select",
        "GatherMask is not emulated yet",
    ),
    "divs": ("Divs", "arithmetic", "the Ascend 950's (not the 910B's nor the 310P's): muls by 1 / s"),
    "subs": ("Subs", "arithmetic", "the Ascend 950's (not the 910B's nor the 310P's): adds of -s"),
    "neg": ("Neg", "arithmetic", "the Ascend 950's: muls by -1"),
    "prelu": ("Prelu", "arithmetic", "the Ascend 950's: leaky_relu, or maxs / mins / mul"),
    "mul_cast": ("MulCast", "composite", "not emulated yet: Mul, then Cast"),
    "add_relu_cast": ("AddReluCast", "composite", "not emulated yet: AddRelu, then Cast"),
    "sub_relu_cast": ("SubReluCast", "composite", "not emulated yet: SubRelu, then Cast"),
    "add_deq_relu": ("AddDeqRelu", "composite", "the deq scale register (SetDeqScale) is not modelled"),
    "cast_deq": ("CastDequant", "cast", "the deq scale register (SetDeqScale) is not modelled"),
    "cast_dequant": ("CastDequant", "cast", "the deq scale register (SetDeqScale) is not modelled"),
    "set_deq_scale": (
        "SetDeqScale",
        "cast",
        "the deq scale register is not modelled: Muls by the scale, then Cast",
    ),
    "get_acc_val": (
        "GetAccVal",
        "reductions",
        "the reduction's special register is not modelled: read dst with get_value",
    ),
    "get_reduce_max_min_count": (
        "GetReduceMaxMinCount",
        "reductions",
        "the reduction's special register is not modelled",
    ),
    "trans_data_to_5hd": (
        "TransDataTo5HD",
        "layout",
        "its 16 address lists are not emulated; a data_copy into an NC1HWC0 tile is",
    ),
    "gatherb": ("Gatherb", "gather / scatter", "not emulated yet: Gather with byte offsets of whole blocks"),
    "scatter": ("Scatter", "gather / scatter", "not emulated yet (the 310P's; the 910B has none)"),
    "vector_padding": ("VectorPadding", "fill", "not emulated (the 310P's ISASI call)"),
    "proposal_concat": ("ProposalConcat", "sort", "the proposal (region) instructions are not emulated"),
    "proposal_extract": ("ProposalExtract", "sort", "the proposal (region) instructions are not emulated"),
    "rp_sort16": ("RpSort16", "sort", "the sort instructions are not emulated"),
    "mrg_sort4": ("MrgSort4", "sort", "the sort instructions are not emulated"),
    "sort32": ("Sort32", "sort", "the sort instructions are not emulated"),
    "mrg_sort": ("MrgSort", "sort", "the sort instructions are not emulated"),
    "get_mrg_sort_result": ("GetMrgSortResult", "sort", "the sort instructions are not emulated"),
    "data_sync_barrier": (
        "DataSyncBarrier",
        "sync",
        "memory barriers are not modelled: pipe_barrier(PIPE_ALL) orders every pipe",
    ),
    "ib_set": (
        "IBSet",
        "sync",
        "blocks see each other's GM only when the launch ends: split the kernel in two launches",
    ),
    "ib_wait": (
        "IBWait",
        "sync",
        "blocks see each other's GM only when the launch ends: split the kernel in two launches",
    ),
    "set_atomic_type": (
        "SetAtomicType",
        "atomics",
        "set_atomic_add / set_atomic_max / set_atomic_min take the type",
    ),
    "set_store_atomic_config": ("SetStoreAtomicConfig", "atomics", "use set_atomic_add / max / min"),
    "get_store_atomic_config": ("GetStoreAtomicConfig", "atomics", "use set_atomic_add / max / min"),
    "load_data_with_transpose": (
        "LoadDataWithTranspose",
        "cube",
        "not emulated yet: load_data with if_transpose",
    ),
    "load_data_with_sparse": ("LoadDataWithSparse", "cube", "sparse matrices are not emulated"),
    "mmad_with_sparse": ("MmadWithSparse", "cube", "sparse matrices are not emulated"),
    "init_const_value": ("InitConstValue", "cube", "not emulated: fill L1 with duplicate in UB and a copy"),
    "softmax_flash": ("SoftmaxFlash", "high level", "deprecated by the vendor: softmax_flash_v2"),
    "softmax_grad": ("SoftmaxGrad", "high level", "no training here (GradientError)"),
    "faster_gelu_v2": ("FasterGeluV2", "high level", "not written yet: faster_gelu is"),
    "erf": ("Erf", "high level", "not written yet"),
    "acos": ("Acos", "math library", "not written yet"),
    "asin": ("Asin", "math library", "not written yet"),
    "atan": ("Atan", "math library", "not written yet"),
    "cos": ("Cos", "math library", "not written yet"),
    "sin": ("Sin", "math library", "not written yet"),
    "tan": ("Tan", "math library", "not written yet"),
    "cosh": ("Cosh", "math library", "not written yet"),
    "sinh": ("Sinh", "math library", "not written yet"),
    "power": ("Power", "math library", "not written yet: exp(y * ln(x)) in basic calls"),
    "quant": (
        "AscendQuant",
        "high level",
        "as pyasc spells it, asc.adv.quant (Muls, Adds, then Cast with RoundMode.CAST_RINT)",
    ),
    "dequant": ("AscendDequant", "high level", "not written yet: cast, muls"),
}

# the rows asc runs, by family (docs/kernels.md's table): the vendor's name -> asc's
SUPPORTED: dict[str, dict[str, str]] = {
    "arithmetic": {
        "Add / Sub / Mul / Div / Max / Min": "add, sub, mul, div, max, min",
        "Adds / Muls / Maxs / Mins / LeakyRelu": "adds, muls, maxs, mins, leaky_relu",
        "Exp / Ln / Abs / Reciprocal / Sqrt / Rsqrt / Relu": "exp, ln, abs, reciprocal, sqrt, rsqrt, relu",
        "BilinearInterpolation (ISASI)": "bilinear_interpolation",
    },
    "logic": {
        "And / Or / Not / ShiftLeft / ShiftRight": "bitwise_and, bitwise_or, bitwise_not, shift_left, shift_right"
    },
    "composite": {
        "Axpy / MulAddDst / FusedMulAdd / FusedMulAddRelu (MulAddRelu)": "axpy, mul_add_dst, fused_mul_add, fused_mul_add_relu",
        "AddRelu / SubRelu": "add_relu, sub_relu",
    },
    "compare / select": {
        "Compare / Compares (CompareScalar) / Select": "compare, compares (compare_scalar), select"
    },
    "cast": {"Cast (every RoundMode, CAST_ODD too)": "cast"},
    "reductions": {
        "ReduceSum / ReduceMax / ReduceMin (calIndex)": "reduce_sum, reduce_max, reduce_min",
        "WholeReduceSum / WholeReduceMax / WholeReduceMin (ReduceOrder)": "whole_reduce_sum, whole_reduce_max, whole_reduce_min",
        "BlockReduceSum / BlockReduceMax / BlockReduceMin": "block_reduce_sum, block_reduce_max, block_reduce_min",
        "PairReduceSum / RepeatReduceSum": "pair_reduce_sum, repeat_reduce_sum",
    },
    "layout": {"Transpose (16 x 16)": "transpose"},
    "fill": {"Duplicate / Brcb / CreateVecIndex": "duplicate, brcb, create_vec_index"},
    "gather / scatter": {"Gather": "gather"},
    "mask": {
        "SetMaskCount / SetMaskNorm / SetVectorMask / ResetMask": "set_mask_count, set_mask_norm, set_vector_mask, reset_mask"
    },
    "data movement": {
        "DataCopy (count, DataCopyParams, Nd2NzParams, L0C -> UB) / DataCopyPad / Copy": "data_copy, data_copy_pad, copy",
        "LocalTensor::GetValue / SetValue / ReinterpretCast": "t.get_value, t.set_value, t.reinterpret_cast",
    },
    "sync": {
        "SetFlag / WaitFlag / PipeBarrier": "set_flag, wait_flag, pipe_barrier",
        "CrossCoreSetFlag / CrossCoreWaitFlag / SyncAll": "cross_core_set_flag, cross_core_wait_flag, sync_all",
    },
    "system": {
        "GetBlockIdx / GetBlockNum / GetSystemCycle": "get_block_idx, get_block_num, get_system_cycle"
    },
    "atomics": {
        "SetAtomicAdd / SetAtomicMax / SetAtomicMin / SetAtomicNone (DisableDmaAtomic)": "set_atomic_add, set_atomic_max, set_atomic_min, set_atomic_none",
    },
    "cube": {
        "LoadData (2D: srcStride, dstGap, ifTranspose; 3D: LoadData3DParamsV2) / Mmad / Fixpipe": "load_data, load_3d, mmad, fixpipe",
        "Matmul (high level)": "Matmul",
    },
    "high level": {
        "SoftMax / SimpleSoftMax / SoftmaxFlashV2": "softmax, simple_softmax, softmax_flash_v2",
        "LayerNorm / RmsNorm": "layer_norm, rms_norm",
        "Gelu / FasterGelu / Silu / Swish / Sigmoid / Tanh / Log": "gelu, faster_gelu, silu, swish, sigmoid, tanh, log",
    },
}


def refused(name: str):
    """The function ``npu_jax.asc.<name>`` is for a call of the vendor's list that asc does not run."""
    vendor, family, why = REFUSED[name]

    def call(*args, **kwargs):
        raise NotImplementedError(
            f"asc.{name} (the vendor's {vendor}, {family}) is not supported by the emulator: {why}. See the "
            f"table of every call in docs/kernels.md."
        )

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"``{vendor}``: refused ({why})."
    return call

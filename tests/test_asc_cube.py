"""npu_jax.asc's Cube side: the vendor's matmul_basic_api, and the project's GEMM written in asc held
equal to the built-in ``npu_jax.matmul`` in bits and in every figure of its report (one machine)."""

from __future__ import annotations

import dataclasses
import os
import sys

import jax.numpy as jnp
import numpy as np
import pytest

import npu_jax
from npu_jax import asc
from npu_jax.asc.runtime import AscError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "asc"))
import gemm  # noqa: E402
import matmul_basic_api as mba  # noqa: E402

HW910B = npu_jax.presets.ascend910b()


def test_matmul_basic_api_is_the_exact_product_in_fp16(rng):
    # the vendor's golden rule: small integers, so fp32 accumulation is exact; fp16 of the product
    a = rng.integers(-8, 9, (mba.M, mba.K)).astype(np.float16)
    b = rng.integers(-8, 9, (mba.K, mba.N)).astype(np.float16)
    (_, _, c), report = mba.matmul_basic_api[2](a, b, np.zeros((mba.M, mba.N), np.float16), hw=HW910B)
    np.testing.assert_array_equal(c, (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float16))
    assert report.flops == 2 * mba.M * mba.N * mba.K and report.pipe_busy["CUBE"] > 0


# (chip, shape, tiling): one case per chip in the default run, the rest with the slow studies
GEMM_CASES = [
    ("ascend910b", (256, 512, 256), dict(m=128, n=128, k_l1=256, k_l0=64)),
    ("ascend310p", (128, 256, 384), dict(m=64, n=128, k_l1=128, k_l0=32, l1_stages=1)),
    *[
        pytest.param(chip, shape, tiling, marks=pytest.mark.slow)
        for chip, shape, tiling in [
            ("ascend310p", (256, 512, 256), dict(m=128, n=128, k_l1=256, k_l0=64)),
            ("ascend910b", (128, 256, 384), dict(m=64, n=128, k_l1=128, k_l0=32, l1_stages=1)),
            ("ascend910b", (192, 128, 128), dict(m=64, n=64, k_l1=64, k_l0=64, l0_stages=1, cores=3)),
            ("ascend310p", (192, 128, 128), dict(m=64, n=64, k_l1=64, k_l0=64, l0_stages=1, cores=3)),
            ("ascend910", (256, 512, 256), dict(m=128, n=128, k_l1=256, k_l0=64)),
            ("tiny", (128, 256, 128), dict(m=32, n=32, k_l1=64, k_l0=32)),
        ]
    ],
]


@pytest.mark.parametrize("chip,shape,tiling", GEMM_CASES)
def test_the_gemm_in_asc_is_the_built_in_gemm(rng, chip, shape, tiling):
    hw = getattr(npu_jax.presets, chip)()
    M, K, N = shape
    t = npu_jax.MatmulTiling(**tiling)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c, mine = gemm.run(a, b, hw, t)
    ref, theirs = npu_jax.matmul(a, b, hw=hw, tiling=t)
    np.testing.assert_array_equal(c, np.asarray(ref))  # bit for bit
    assert mine.n_cores == theirs.n_cores
    assert mine.cycles == theirs.cycles and mine.core_end == theirs.core_end
    assert mine.pipe_busy == theirs.pipe_busy
    assert mine.bytes == theirs.bytes and mine.flops == theirs.flops
    np.testing.assert_array_equal(np.asarray(mine.n_instr), np.asarray(theirs.n_instr))
    np.testing.assert_array_equal(np.asarray(mine.pipe_free), np.asarray(theirs.pipe_free))


@asc.kernel
def _mmad_into_ub(x):
    pipe = asc.TPipe()
    q = asc.TQue(asc.TPosition.VECIN, 1)
    a2 = asc.TQue(asc.TPosition.A2, 1)
    b2 = asc.TQue(asc.TPosition.B2, 1)
    for que, nbytes in ((q, 1024), (a2, 512), (b2, 512)):
        pipe.init_buffer(que, 1, nbytes)
    c, a, b = q.alloc_tensor(asc.float32), a2.alloc_tensor(asc.half), b2.alloc_tensor(asc.half)
    asc.mmad(c, a, b, asc.MmadParams(16, 16, 16))


def test_a_cube_call_on_the_wrong_buffer_names_the_call_and_line(rng):
    with pytest.raises(asc.AscError, match=r"Mmad at tests/test_asc_cube.py:\d+.*L0C, got UB"):
        _mmad_into_ub[1](rng.standard_normal(16).astype(np.float16), hw=HW910B)


@asc.kernel
def _transposed_load(x):
    pipe = asc.TPipe()
    a1, a2 = asc.TQue(asc.TPosition.A1, 1), asc.TQue(asc.TPosition.A2, 1)
    pipe.init_buffer(a1, 1, 512)
    pipe.init_buffer(a2, 1, 512)
    asc.load_data(
        a2.alloc_tensor(asc.half), a1.alloc_tensor(asc.half), asc.LoadData2DParams(if_transpose=True)
    )


@asc.kernel
def _load_with(x, field: str, value: int):
    pipe = asc.TPipe()
    a1, a2 = asc.TQue(asc.TPosition.A1, 1), asc.TQue(asc.TPosition.A2, 1)
    pipe.init_buffer(a1, 1, 512)
    pipe.init_buffer(a2, 1, 512)
    asc.load_data(
        a2.alloc_tensor(asc.half), a1.alloc_tensor(asc.half), asc.LoadData2DParams(**{field: value})
    )


def test_an_unsupported_parameter_names_it_and_the_guide(rng):
    x = rng.standard_normal(16).astype(np.float16)
    with pytest.raises(NotImplementedError, match=r"if_transpose=True.*docs/kernels.md"):
        _transposed_load[1](x, hw=HW910B)
    # a LoadData2DParams field the emulator would otherwise ignore is refused by name, never dropped
    with pytest.raises(NotImplementedError, match=r"addr_mode=1.*docs/kernels.md"):
        _load_with[1](x, "addr_mode", 1, hw=HW910B)


import matmul_leakyrelu as mlr  # noqa: E402


def _leaky_relu_case(rng, tiling, blocks):
    M, N, K = tiling.m, tiling.n, tiling.k
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    ws = np.zeros((blocks, tiling.base_m * tiling.base_n), np.float32)
    c = np.zeros((M, N), np.float32)
    (_, _, out, _), report = mlr.matmul_leakyrelu[blocks](a, b, c, ws, tiling, mlr.ALPHA, hw=HW910B)
    return a, b, out, report


def test_matmul_leakyrelu_through_the_high_level_matmul(rng):
    t = asc.TCubeTiling(256, 256, 128, 128, 256, 128, 128, 128, 64)
    a, b, c, report = _leaky_relu_case(rng, t, blocks=2)
    ref = mlr.reference(a, b)  # fp32 accumulation of exact fp16 products: within fp32 rounding
    np.testing.assert_allclose(c, ref, rtol=0, atol=1e-6 * np.abs(ref).max() * np.sqrt(t.k))
    assert report.pipe_busy["CUBE"] > 0 and report.pipe_busy["VECTOR"] > 0 and report.pipe_busy["FIXP"] > 0


@pytest.mark.slow
def test_matmul_leakyrelu_at_the_vendors_size(rng):
    a, b, c, report = _leaky_relu_case(rng, mlr.TILING, mlr.BLOCKS)
    assert report.flops == 2 * mlr.M * mlr.N * mlr.K
    ref = mlr.reference(a, b)
    np.testing.assert_allclose(c, ref, rtol=0, atol=1e-6 * np.abs(ref).max() * np.sqrt(mlr.K))


@asc.kernel(core="cube")
def _matmul_all(
    a, b, c, tiling: asc.TCubeTiling, ab: object = asc.half, cd: object = asc.half, b_trans=False
):
    """C = A @ B, each block a row block of C: A and B of ``ab`` (B given as [N, K] with ``b_trans``),
    C of ``cd``."""
    t = tiling
    blk = asc.get_block_idx()
    a_gm, b_gm, c_gm = asc.GlobalTensor(), asc.GlobalTensor(), asc.GlobalTensor()
    a_gm.set_global_buffer(a + blk * t.single_core_m * t.k)
    b_gm.set_global_buffer(b)
    c_gm.set_global_buffer(c + blk * t.single_core_m * t.n)
    mm = asc.Matmul(asc.TPipe(), t, c_dtype=cd, a_dtype=ab)
    mm.set_tensor_a(a_gm)
    mm.set_tensor_b(b_gm, is_transpose=b_trans)
    mm.iterate_all(c_gm)
    mm.end()


@pytest.mark.parametrize("chip", ["ascend910b", "ascend310p"])
def test_matmul_iterate_all_is_the_exact_product_on_both_data_paths(rng, chip):
    # 910B: Fixpipe L0C -> GM; 310P (coupled): L0C -> UB (CO2) -> GM (MTE3), no Fixpipe
    hw = getattr(npu_jax.presets, chip)()
    t = asc.TCubeTiling(256, 256, 128, 128, 256, 128, 128, 128, 64)
    a = rng.integers(-4, 5, (t.m, t.k)).astype(np.float16)
    b = rng.integers(-4, 5, (t.k, t.n)).astype(np.float16)
    (_, _, c), report = _matmul_all[2](a, b, np.zeros((t.m, t.n), np.float16), t, hw=hw)
    np.testing.assert_array_equal(c, (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float16))
    assert (report.pipe_busy["FIXP"] > 0) == (not hw.coupled)


def test_matmul_leakyrelu_on_a_coupled_chip_goes_through_ub(rng):
    # 310P: get_tensor_c(ub) moves L0C to UB directly (CO1 -> CO2); the GM workspace is not used
    hw = npu_jax.presets.ascend310p()
    t = asc.TCubeTiling(256, 256, 128, 128, 256, 128, 128, 128, 64)
    a = rng.uniform(-1, 1, (t.m, t.k)).astype(np.float16)
    b = rng.uniform(-1, 1, (t.k, t.n)).astype(np.float16)
    ws = np.zeros((2, t.base_m * t.base_n), np.float32)
    (_, _, c, _), report = mlr.matmul_leakyrelu[2](
        a, b, np.zeros((t.m, t.n), np.float32), ws, t, mlr.ALPHA, hw=hw
    )
    ref = mlr.reference(a, b)
    np.testing.assert_allclose(c, ref, rtol=0, atol=1e-6 * np.abs(ref).max() * np.sqrt(t.k))
    assert report.pipe_busy["FIXP"] == 0 and report.pipe_busy["VECTOR"] > 0


@pytest.mark.parametrize(
    "ab, b_trans", [(asc.float32, False), (asc.float32, True), (asc.bfloat16, False)], ids=str
)
def test_matmul_takes_the_cubes_other_operand_types_on_the_910b(rng, ab, b_trans):
    # fp32 tiles: C0 = 8 (a fractal 16 x 8 in A, 8 x 16 in B); small integers: every sum exact
    t = asc.TCubeTiling(64, 64, 64, 32, 64, 64, 32, 32, 32)
    np_ab = {"float32": np.float32, "bfloat16": jnp.bfloat16}[ab.name]
    a = rng.integers(-8, 9, (t.m, t.k)).astype(np_ab)
    b = rng.integers(-8, 9, (t.k, t.n)).astype(np_ab)
    bt = np.ascontiguousarray(b.T) if b_trans else b
    (_, _, c), report = _matmul_all[2](
        a, bt, np.zeros((t.m, t.n), np.float32), t, ab, asc.float32, b_trans, hw=HW910B, checks="all"
    )
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_array_equal(c, ref.astype(np.float32))
    assert report.flops == 2 * t.m * t.n * t.k and not report.findings()


def test_matmul_refuses_an_operand_type_the_chips_cube_lacks():
    # the 310P's Cube takes fp16 and int8 (the vendor's Mmad page), not fp32
    t = asc.TCubeTiling(32, 32, 32, 32, 32, 32, 32, 32, 32)
    z = np.zeros((32, 32), np.float32)
    with pytest.raises(AscError, match=r"ascend310p.s Cube takes fp16 / int8 operands.*not asc.float32"):
        _matmul_all[1](z, z, z, t, asc.float32, asc.float32, hw=npu_jax.presets.ascend310p())


def test_hardware_config_checks_its_cube_operand_formats():
    with pytest.raises(ValueError, match="cube_operands"):
        dataclasses.replace(HW910B, cube_operands=("fp64",))
    assert npu_jax.presets.ascend910().cube_operands == ("fp16", "int8")


import conv_img2col as cim  # noqa: E402


@pytest.mark.parametrize("stride,pad", [(1, 1), (2, 1), (1, 0)])
def test_load_3d_img2col_conv_is_the_exact_convolution(rng, stride, pad):
    x = rng.integers(-4, 5, (32, 8, 8)).astype(np.float16)
    wt = rng.integers(-4, 5, (16, 32, 3, 3)).astype(np.float16)
    y, report = cim.run(x, wt, stride, pad, HW910B)
    np.testing.assert_array_equal(y, cim.reference(x, wt, stride, pad).astype(np.float16))
    assert report.bytes["L1->L0A"] > 0


@asc.kernel
def _transposed_img2col(x):
    pipe = asc.TPipe()
    a1, a2 = asc.TQue(asc.TPosition.A1, 1), asc.TQue(asc.TPosition.A2, 1)
    pipe.init_buffer(a1, 1, 2048)
    pipe.init_buffer(a2, 1, 2048)
    params = asc.LoadData3DParamsV2((0, 0, 0, 0), 4, 4, 16, 16, 16, en_transpose=True)
    asc.load_data(a2.alloc_tensor(asc.half), a1.alloc_tensor(asc.half), params)


def test_an_unsupported_load_3d_parameter_names_it_and_the_guide(rng):
    with pytest.raises(NotImplementedError, match=r"en_transpose=True.*docs/kernels.md"):
        _transposed_img2col[1](rng.standard_normal(16).astype(np.float16), hw=HW910B)


@asc.kernel(core="cube")
def _matmul_bias(a, b, bias, c, tiling: asc.TCubeTiling):
    t = tiling
    blk = asc.get_block_idx()
    a_gm, b_gm, bias_gm, c_gm = (asc.GlobalTensor() for _ in range(4))
    a_gm.set_global_buffer(a + blk * t.single_core_m * t.k)
    b_gm.set_global_buffer(b)
    bias_gm.set_global_buffer(bias)
    c_gm.set_global_buffer(c + blk * t.single_core_m * t.n)
    mm = asc.Matmul(asc.TPipe(), t, c_dtype=asc.float32)
    mm.set_tensor_a(a_gm)
    mm.set_tensor_b(b_gm)
    mm.set_bias(bias_gm)
    while mm.iterate():
        mm.get_tensor_c(c_gm)
    mm.end()


def test_matmul_set_bias_adds_a_row_to_every_block_exactly(rng):
    t = asc.TCubeTiling(256, 256, 128, 128, 256, 128, 128, 128, 64)
    a = rng.integers(-4, 5, (t.m, t.k)).astype(np.float16)
    b = rng.integers(-4, 5, (t.k, t.n)).astype(np.float16)
    bias = rng.integers(-100, 101, t.n).astype(np.float32)
    (_, _, _, c), report = _matmul_bias[2](
        a, b, bias, np.zeros((t.m, t.n), np.float32), t, hw=HW910B, checks="all"
    )
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64) + bias)
    assert not report.findings()  # the bias row's MTE2 -> FIX flags order it before every Fixpipe


def test_matmul_set_bias_on_a_coupled_chip_is_not_supported_and_says_so(rng):
    t = asc.TCubeTiling(128, 128, 64, 128, 128, 64, 128, 128, 64)
    a = np.zeros((t.m, t.k), np.float16)
    b = np.zeros((t.k, t.n), np.float16)
    with pytest.raises(NotImplementedError, match=r"set_bias.*docs/kernels.md"):
        _matmul_bias[1](
            a,
            b,
            np.zeros(t.n, np.float32),
            np.zeros((t.m, t.n), np.float32),
            t,
            hw=npu_jax.presets.ascend310p(),
        )


@asc.kernel
def _misuse(x, y, which: str):
    x_gm, y_gm = asc.GlobalTensor(), asc.GlobalTensor()
    x_gm.set_global_buffer(x)
    y_gm.set_global_buffer(y)
    pipe = asc.TPipe()
    ub, a1, co1 = (
        asc.TQue(asc.TPosition.VECIN, 1),
        asc.TQue(asc.TPosition.A1, 1),
        asc.TQue(asc.TPosition.CO1, 1),
    )
    for que, nbytes in ((ub, 1024), (a1, 512), (co1, 1024)):
        pipe.init_buffer(que, 1, nbytes)
    u, a, c = ub.alloc_tensor(asc.half), a1.alloc_tensor(asc.half), co1.alloc_tensor(asc.float32)
    if which == "load_data":
        asc.load_data(u, a, asc.LoadData2DParams())
    elif which == "nd2nz":
        asc.data_copy(u, x_gm, asc.Nd2NzParams(1, 16, 16, 0, 16, 16, 1, 0))
    elif which == "fixpipe":
        asc.fixpipe(y_gm, u, asc.FixpipeParamsV220(16, 16, 16, 16, False, asc.QuantMode.F322F16))
    elif which == "fixpipe_l0c":
        asc.fixpipe(y_gm, c, asc.FixpipeParamsV220(16, 16, 16, 16, False, asc.QuantMode.F322F16))
    elif which == "co1_to_ub":
        asc.data_copy(u, c, 256)


@pytest.mark.parametrize(
    "which,chip,message",
    [
        ("load_data", "ascend910b", r"LoadData at tests/test_asc_cube.py:\d+.*L0A or L0B, got UB"),
        ("nd2nz", "ascend910b", r"DataCopy\(Nd2Nz\) at tests/test_asc_cube.py:\d+.*in L1, got UB"),
        ("fixpipe", "ascend910b", r"Fixpipe at tests/test_asc_cube.py:\d+.*in L0C, got UB"),
        ("fixpipe_l0c", "ascend310p", r"Fixpipe at tests/test_asc_cube.py:\d+.*has no Fixpipe"),
        (
            "co1_to_ub",
            "ascend910b",
            r"DataCopy\(CO1 -> CO2\) at tests/test_asc_cube.py:\d+.*no L0C -> UB path",
        ),
    ],
)
def test_cube_calls_on_the_wrong_buffer_or_chip_name_the_call_and_line(rng, which, chip, message):
    x = rng.standard_normal(256).astype(np.float16)
    with pytest.raises(asc.AscError, match=message):
        _misuse[1](x, np.zeros(256, np.float16), which, hw=getattr(npu_jax.presets, chip)())


@asc.kernel(core="cube")
def _matmul_2201(a, b, c, m: int, n: int, k: int):
    """The vendor's matmul_basic_api as written for arch 2201: A split Nz -> Zz one 16-row strip at a
    time (src_stride = the tile's row blocks), B Nz -> Zn one 16-row strip of K at a time (if_transpose)."""
    ag, bg, cg = asc.GlobalTensor(), asc.GlobalTensor(), asc.GlobalTensor()
    ag.set_global_buffer(a)
    bg.set_global_buffer(b)
    cg.set_global_buffer(c)
    pipe = asc.TPipe()
    qa1, qb1, qa2, qb2 = (
        asc.TQue(p, 1) for p in (asc.TPosition.A1, asc.TPosition.B1, asc.TPosition.A2, asc.TPosition.B2)
    )
    qc = asc.TQue(asc.TPosition.CO1, 1)
    for q, nbytes in (
        (qa1, m * k * 2),
        (qb1, k * n * 2),
        (qa2, m * k * 2),
        (qb2, k * n * 2),
        (qc, m * n * 4),
    ):
        pipe.init_buffer(q, 1, nbytes)
    a1, b1 = qa1.alloc_tensor(asc.half), qb1.alloc_tensor(asc.half)
    asc.data_copy(a1, ag, asc.Nd2NzParams(1, m, k, 0, k, m, 1, 0))
    asc.data_copy(b1, bg, asc.Nd2NzParams(1, k, n, 0, n, k, 1, 0))
    qa1.enque(a1)
    qb1.enque(b1)
    a1, b1 = qa1.deque(asc.half), qb1.deque(asc.half)
    a2, b2 = qa2.alloc_tensor(asc.half), qb2.alloc_tensor(asc.half)
    for i in range(m // 16):
        asc.load_data(
            a2[i * k * 16 :], a1[i * 256 :], asc.LoadData2DParams(0, k // 16, m // 16, 0, 0, False, 0)
        )
    for i in range(k // 16):
        asc.load_data(
            b2[i * n * 16 :], b1[i * 256 :], asc.LoadData2DParams(0, n // 16, k // 16, 0, 0, True, 0)
        )
    qa1.free_tensor(a1)
    qb1.free_tensor(b1)
    qa2.enque(a2)
    qb2.enque(b2)
    a2, b2 = qa2.deque(asc.half), qb2.deque(asc.half)
    c1 = qc.alloc_tensor(asc.float32)
    asc.mmad(c1, a2, b2, asc.MmadParams(m, n, k, 0, False, True))
    qc.enque(c1)
    qa2.free_tensor(a2)
    qb2.free_tensor(b2)
    c1 = qc.deque(asc.float32)
    asc.fixpipe(cg, c1, asc.FixpipeParamsV220(n, m, m, n, False, asc.QuantMode.F322F16))
    qc.free_tensor(c1)


def test_the_vendors_2201_load_data_walks(rng):
    m, n, k = 64, 48, 32
    a = rng.integers(-4, 5, (m, k)).astype(np.float16)
    b = rng.integers(-4, 5, (k, n)).astype(np.float16)
    (_, _, c), rep = _matmul_2201[1](a, b, np.zeros((m, n), np.float16), m, n, k, hw=HW910B, checks="all")
    np.testing.assert_array_equal(c, (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float16))
    # one LoadData a strip: m / 16 for A and k / 16 for B, each whole fractals at L1 -> L0's rate
    assert rep.bytes["L1->L0A"] == m * k * 2 and rep.bytes["L1->L0B"] == k * n * 2
    assert not rep.findings()

"""npu_jax.matmul against float64 numpy on the fp16-rounded inputs, with an error bound derived
from the hardware's arithmetic, and its report against hand-counted bytes, FLOPs and Cube cycles.

Error bound. The kernel rounds A and B to fp16 at the boundary (the reference uses the same fp16
values). fp16 x fp16 products are exact in fp32 (11 + 11 <= 24 significant bits), so the only
errors are (1) the fp32 accumulation of K products, at most gamma_K * S with S = |A| @ |B| and
gamma_K = K u / (1 - K u), u = 2^-24, whatever the summation order and tiling; and (2) one rounding
of the fp32 sum s to fp16: at most 2^-11 |s| in the normal range, or 2^-25 absolute among fp16
subnormals. With |s| <= |ref| + gamma_K S:
    |c - ref| <= 2^-11 |ref| + (1 + 2^-11) gamma_K S + 2^-25.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from conftest import assert_bits_equal

import npu_jax
from npu_jax import MatmulTiling, Policy, presets
from npu_jax.core import wide
from npu_jax.core.pipes import PIPE_INDEX
from npu_jax.errors import CapacityError, TilingError
from npu_jax.mapping.gemm import allocate_gemm, default_tiling


def gamma(n, u=2.0**-24):
    return n * u / (1 - n * u)


def _inputs(rng, M, N, K):
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    return a, b


def _check_numbers(c, a, b):
    M, K = a.shape
    N = b.shape[1]
    c = np.asarray(c)
    assert c.dtype == np.float16 and c.shape == (M, N)
    a16, b16 = a.astype(np.float16).astype(np.float64), b.astype(np.float16).astype(np.float64)
    ref = a16 @ b16
    S = np.abs(a16) @ np.abs(b16)
    bound = 2.0**-11 * np.abs(ref) + (1 + 2.0**-11) * gamma(K) * S + 2.0**-25
    err = np.abs(c.astype(np.float64) - ref)
    assert np.all(np.isfinite(c))
    assert np.all(err <= bound), f"max err / bound = {np.max(err / bound):.3f}"


def _cube_cycles(M, N, K, t: MatmulTiling, hw):
    """Cube busy cycles by hand: one Mmad per (output block, k_l0 slice), each costing start-up plus
    one cycle per 16 x 16 x 16 fractal block of its real (m, n, k)."""
    total = 0
    for bm in range(math.ceil(M / t.m)):
        for bn in range(math.ceil(N / t.n)):
            mv, nv = min(t.m, M - bm * t.m), min(t.n, N - bn * t.n)
            for k0 in range(0, K, t.k_l0):
                kv = min(t.k_l0, K - k0)
                total += hw.assumed.mmad_startup + math.ceil(mv / 16) * math.ceil(nv / 16) * math.ceil(
                    kv / 16
                )
    return total


def _check_report(rep, M, N, K, t: MatmulTiling, hw):
    assert rep.flops == 2 * M * N * K
    assert rep.flops_issued >= rep.flops
    assert int(rep.overlapping_writes) == 0 and int(rep.unwritten) == 0
    nbm, nbn = math.ceil(M / t.m), math.ceil(N / t.n)
    # every output block streams its rows of A and its columns of B through L1 once
    assert rep.bytes["GM->L1"] == 2 * (nbn * M * K + nbm * K * N)
    out_path = "UB->GM" if hw.coupled else "L0C->GM"
    assert rep.bytes[out_path] == M * N * 2
    assert rep.pipe_busy["CUBE"] == _cube_cycles(M, N, K, t, hw)
    # a core is done when its last pipe is: no pipe can be busy longer than that
    busy = wide.to_numpy(rep.busy)
    assert np.all(busy.max(axis=1) <= rep.core_cycles)
    assert rep.core_end == int(rep.core_cycles.max()) > 0
    assert rep.cycles == rep.launch_cycles + max(rep.core_end, rep.hbm_cycles)
    expect_cores = min(hw.num_cores if t.cores is None else t.cores, nbm * nbn)
    assert rep.n_cores == expect_cores
    if hw.coupled:
        assert rep.pipe_busy["FIXP"] == 0 and rep.pipe_busy["MTE3"] > 0
    else:
        assert rep.pipe_busy["FIXP"] > 0 and rep.pipe_busy["MTE3"] == 0


def _same_report(r1, r2):
    for f in ("pipe_free", "busy", "counters"):
        np.testing.assert_array_equal(wide.to_numpy(getattr(r1, f)), wide.to_numpy(getattr(r2, f)), err_msg=f)
    np.testing.assert_array_equal(np.asarray(r1.n_instr), np.asarray(r2.n_instr))
    assert r1.cycles == r2.cycles


T2 = MatmulTiling(m=32, n=32, k_l1=64, k_l0=32)  # ping-pong L1 and L0
T1 = MatmulTiling(m=32, n=32, k_l1=32, k_l0=32, l1_stages=1, l0_stages=1, cores=2)  # serial
T21 = MatmulTiling(m=32, n=32, k_l1=64, k_l0=32, l1_stages=2, l0_stages=1, cores=1)


def test_matmul_eager_equals_jit(rng):
    hw = presets.tiny()
    M, N, K = 17, 33, 65
    a, b = _inputs(rng, M, N, K)

    def f(a, b):
        return npu_jax.matmul(a, b, hw=hw, tiling=T2)

    c_e, r_e = f(a, b)
    c_j, r_j = jax.jit(f)(a, b)
    assert_bits_equal(c_e, c_j)
    _same_report(r_e, r_j)
    _check_numbers(c_e, a, b)
    _check_report(r_e, M, N, K, T2, hw)


# (hw, shape, tiling): odd shapes, 1 and 2 stages, one and several cores, all four data paths
CASES = [
    ("tiny", (100, 70, 130), T1),
    ("tiny-coupled", (17, 33, 65), T21),
    ("tiny", (1, 1, 1), None),
    ("ascend910b", (256, 256, 256), None),
    ("ascend910", (100, 70, 130), None),
]
HW = {
    "tiny": presets.tiny(),
    "tiny-coupled": presets.tiny(coupled=True),
    "ascend910b": presets.ascend910b(),
    "ascend910": presets.ascend910(),
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "hw_name, shape, tiling", CASES, ids=[f"{h}-{'x'.join(map(str, s))}" for h, s, _ in CASES]
)
def test_matmul(rng, hw_name, shape, tiling):
    hw = HW[hw_name]
    M, N, K = shape
    f = jax.jit(lambda a, b: npu_jax.matmul(a, b, hw=hw, tiling=tiling))
    a, b = _inputs(rng, M, N, K)
    c, rep = f(a, b)
    t = default_tiling(M, N, K, hw) if tiling is None else tiling
    _check_numbers(c, a, b)
    _check_report(rep, M, N, K, t, hw)
    # the same shape on other data: other numbers, the very same cycles (timing is data-blind)
    a2, b2 = _inputs(rng, M, N, K)
    c2, rep2 = f(a2 * 3, b2)
    _check_numbers(c2, a2 * 3, b2)
    _same_report(rep, rep2)


def test_matmul_bf16_policy(rng):
    hw = presets.tiny()
    M, N, K = 17, 33, 65
    a, b = _inputs(rng, M, N, K)
    c, rep = jax.jit(
        lambda a, b: npu_jax.matmul(a, b, hw=hw, tiling=T2, policy=Policy(operand="bf16", output="fp32"))
    )(a, b)
    c = np.asarray(c)
    assert c.dtype == np.float32
    import ml_dtypes

    a16 = a.astype(ml_dtypes.bfloat16).astype(np.float64)
    b16 = b.astype(ml_dtypes.bfloat16).astype(np.float64)
    ref = a16 @ b16
    # bf16 x bf16 products are exact in fp32 too; only the fp32 accumulation rounds (output is fp32)
    assert np.all(np.abs(c - ref) <= gamma(K) * (np.abs(a16) @ np.abs(b16)))
    assert rep.flops == 2 * M * N * K


def test_bad_tiling_multiple_of_16():
    with pytest.raises(TilingError, match=r"MatmulTiling\.m.*16.*20"):
        MatmulTiling(m=20)
    with pytest.raises(TilingError, match="k_l1"):
        MatmulTiling(k_l1=96, k_l0=64)
    with pytest.raises(TilingError, match="l1_stages"):
        MatmulTiling(l1_stages=3)
    with pytest.raises(TilingError, match="cores"):
        MatmulTiling(cores=0)


def test_tiling_too_big_for_l0c(rng):
    hw = presets.tiny()  # L0C 16 KiB: a 128 x 128 fp32 block needs 64 KiB
    a, b = _inputs(rng, 64, 64, 64)
    with pytest.raises(CapacityError) as ei:
        npu_jax.matmul(a, b, hw=hw, tiling=MatmulTiling(m=128, n=128, k_l1=64, k_l0=16))
    msg = str(ei.value)
    assert "L0C" in msg and str(128 * 128 * 4) in msg and str(hw.l0c_bytes) in msg


def test_tiling_too_big_for_l0a(rng):
    hw = presets.tiny()  # L0A 8 KiB: 2 stages of 64 x 64 fp16 need 16 KiB
    a, b = _inputs(rng, 64, 64, 64)
    with pytest.raises(CapacityError, match="L0A"):
        npu_jax.matmul(a, b, hw=hw, tiling=MatmulTiling(m=64, n=16, k_l1=64, k_l0=64))


def test_tiling_cores_beyond_the_chip(rng):
    """Asking for more cores than the preset has must be refused (or capped), not emulated."""
    hw = presets.tiny()  # 2 cores
    a, b = _inputs(rng, 48, 16, 16)  # 3 output blocks of 16 x 16
    t = MatmulTiling(m=16, n=16, k_l1=16, k_l0=16, cores=3)
    try:
        _, rep = npu_jax.matmul(a, b, hw=hw, tiling=t)
    except (TilingError, ValueError) as e:
        assert "cores" in str(e)
        return
    assert rep.n_cores <= hw.num_cores, f"ran on {rep.n_cores} cores of a {hw.num_cores}-core chip"


def test_mismatched_k_and_bad_inputs(rng):
    a, b = _inputs(rng, 8, 8, 8)
    with pytest.raises(ValueError, match="K"):
        npu_jax.matmul(a, b[:5], hw=presets.tiny())
    with pytest.raises(ValueError, match="2-D"):
        npu_jax.matmul(a[0], b, hw=presets.tiny())
    with pytest.raises(TypeError, match="float"):
        npu_jax.matmul(a.astype(np.int32), b, hw=presets.tiny())
    with pytest.raises(ValueError, match="empty"):
        npu_jax.matmul(a[:0], b, hw=presets.tiny())


@pytest.mark.parametrize("hw_name", ["tiny", "ascend910b", "ascend910"])
@pytest.mark.parametrize("shape", [(1, 1, 1), (17, 33, 65), (100, 70, 130), (256, 256, 256), (512, 48, 2000)])
def test_default_tiling_is_legal(hw_name, shape):
    """The default tiling fits every buffer (checked by the allocator) without running the kernel."""
    hw = HW[hw_name]
    M, N, K = shape
    t = default_tiling(M, N, K, hw)
    plan, _ = allocate_gemm(hw, t, "fp16", "fp16")
    used = plan.used()
    for buf, n in used.items():
        assert n <= hw.buffer_bytes(buf)
    assert t.m * t.n * 4 <= hw.l0c_bytes


def test_pipe_index_names():
    # the report speaks the vendor's pipe names
    assert set(PIPE_INDEX) == {"MTE2", "MTE1", "M", "FIX", "V", "MTE3", "S"}

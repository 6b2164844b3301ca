"""matmul_basic_api_high_performance: the vendor's 8192^3 fp16 matmul on the basic API (scenarios 1-2).

Vendor sample: ``examples/01_simd_cpp_api/05_best_practices/01_matrix_compute/
matmul_basic_api_high_performance`` (``mmad.asc``, ``KernelMmad``, asc-devkit). Static tensors at the
vendor's fixed addresses (L1: A1 ping / pong from 0, B1 ping / pong from 256 KB; L0A / L0B ping at 0,
pong at 32 KB; one L0C block) and hand-written flags: MTE1_MTE2 events 0-3 (A1 / B1 ping / pong) and
M_MTE1 0-1 primed, large packets of ``step_ka`` = 8 and ``step_kb`` = 4 base blocks along K (B's
first: it is needed sooner), forward MTE2_MTE1 waits only on a packet's first base block, the unit
flag on every Mmad (2, and 3 on a block's last) and on the Fixpipe. 24 cores, base 128 x 256 x 64,
B stored [N, K]:

1. ``Process``: each core's block of 2048 x 1536 (4 x 6 cores), N blocks outer, M blocks inner;
2. ``ProcessL2Cache``: the same in two rounds of 1024-row blocks (A's halves M / 2 apart).

Where the port differs, and why: the vendor loads A with one LoadData3DParamsV2 (l1H 1) and B^T with
four LoadData2D (one per 16 rows of K); here each is one LoadData2D of the whole base slice (the same
bytes; 3 MTE1 start-ups fewer per B slice). The unit flag's synchronisation of the Mmad with the
Fixpipe (per 512-B unit, no flag in the vendor's code) is an M_FIX flag set as a block's last Mmad
starts and a FIX_M flag the next block's first Mmad waits on (``asc.Matmul`` does the same). As in
``vendor_matmul.py``, every core takes a full 1536 columns (N = 9216; the vendor's last 4 cores 512).

    python examples/asc/vendor_matmul_basic.py 2
"""

from __future__ import annotations

import math
import sys

import jax
import numpy as np

from npu_jax import asc

M = N = K = 8192
BASE_M, BASE_N, BASE_K = 128, 256, 64
STEP_KA, STEP_KB = 8, 4
SINGLE_N = 1536
CORES = 24
L0_PINGPONG_BYTES = 32 * 1024
L1_PINGPONG_BYTES = 256 * 1024
SCENARIOS = {1: 2048, 2: 1024}  # scenario -> singleCoreM
E = asc.HardEvent


def _tensors(base_m, base_n, base_k, step_ka, step_kb):
    """The vendor's static tensors, by address (declared in increasing address order per buffer)."""
    P, h = asc.TPosition, asc.half
    a1_size, b1_size = base_m * base_k * step_ka, base_k * base_n * step_kb
    a1 = [asc.local_tensor(P.A1, h, 0, a1_size), asc.local_tensor(P.A1, h, a1_size * 2, a1_size)]
    b1 = [
        asc.local_tensor(P.B1, h, L1_PINGPONG_BYTES, b1_size),
        asc.local_tensor(P.B1, h, L1_PINGPONG_BYTES + b1_size * 2, b1_size),
    ]
    a2 = [asc.local_tensor(P.A2, h, a, base_m * base_k) for a in (0, L0_PINGPONG_BYTES)]
    b2 = [asc.local_tensor(P.B2, h, a, base_k * base_n) for a in (0, L0_PINGPONG_BYTES)]
    c1 = asc.local_tensor(P.CO1, asc.float32, 0, base_m * base_n)
    return a1, b1, a2, b2, c1


@asc.kernel(core="cube")
def mmad_custom(a, b, c, m: int, n: int, k: int, single_m: int, single_n: int, tiling: tuple, rounds: int):
    base_m, base_n, base_k, step_ka, step_kb = tiling
    a_gm, b_gm, c_gm = asc.GlobalTensor(asc.half), asc.GlobalTensor(asc.half), asc.GlobalTensor(asc.half)
    a_gm.set_global_buffer(a, m * k)
    b_gm.set_global_buffer(b, n * k)
    c_gm.set_global_buffer(c, m * n)
    a1, b1, a2, b2, c1 = _tensors(base_m, base_n, base_k, step_ka, step_kb)
    k_loop, m_loop, n_loop = k // base_k, single_m // base_m, single_n // base_n
    period = math.lcm(2 * step_ka, 2 * step_kb)  # K steps after which every ping / pong choice repeats
    periods = k_loop // period
    if periods < 1 or k_loop % period or step_ka < 2 or step_kb < 2:
        raise ValueError(f"mmad_custom: K steps ({k_loop}) in whole periods of {period}; steps >= 2.")
    m_per_round = m // (single_m * rounds)
    c0 = 32 // asc.half.itemsize

    def copy_a(buf: int, chunk, mb, a0):
        p = asc.Nd2NzParams(1, base_m, base_k * step_ka, 0, k, base_m, 1, 0)
        asc.data_copy(a1[buf], a_gm[a0 + chunk * step_ka * base_k + mb * k * base_m :], p)

    def copy_b(buf: int, chunk, nb, b0):
        p = asc.Nd2NzParams(1, base_n, base_k * step_kb, 0, k, base_n, 1, 0)
        asc.data_copy(b1[buf], b_gm[b0 + chunk * step_kb * base_k + nb * base_n * k :], p)

    def k_step(c, s: int, last: bool, mb, nb, a0, b0):
        """K step ``c * period + s`` of block (mb, nb): DataLoad, Mmad, then the next packets."""
        kb = c * period + s
        ra, rb, ka, kbo, l0 = (s // step_ka) % 2, (s // step_kb) % 2, s % step_ka, s % step_kb, s % 2
        asc.wait_flag(E.M_MTE1, l0)
        if ka == 0:
            asc.wait_flag(E.MTE2_MTE1, ra)
        if kbo == 0:
            asc.wait_flag(E.MTE2_MTE1, 2 + rb)
        asc.load_data(a2[l0], a1[ra], asc.LoadData2DParams(ka * base_k // c0 * (base_m // 16)))
        asc.load_data(
            b2[l0], b1[rb], asc.LoadData2DParams(kbo * base_k // c0 * (base_n // 16), if_transpose=True)
        )
        if ka + 1 == step_ka:
            asc.set_flag(E.MTE1_MTE2, ra)
        if kbo + 1 == step_kb:
            asc.set_flag(E.MTE1_MTE2, 2 + rb)
        asc.set_flag(E.MTE1_M, l0)
        asc.wait_flag(E.MTE1_M, l0)
        final = last and s == period - 1
        if final:  # the Fixpipe drains this Mmad's units as they complete
            asc.set_flag(E.M_FIX, 0)
        asc.mmad(
            c1, a2[l0], b2[l0], asc.MmadParams(base_m, base_n, base_k, 3 if final else 2, False, kb == 0)
        )
        asc.set_flag(E.M_MTE1, l0)
        # the next packets, B's first: at K step 0 the pong packets, then each packet consumed is refilled
        # with the one two packets on, while there is one (chunk * step < k_loop)
        for step, ko, copy, ev0, nxt in ((step_kb, kbo, copy_b, 2, nb), (step_ka, ka, copy_a, 0, mb)):
            j = s // step  # the packet this step reads, within the period
            if ko + 1 == step and not (last and j + 2 >= period // step):
                chunk, buf = c * (period // step) + j + 2, j % 2
            else:
                continue
            asc.wait_flag(E.MTE1_MTE2, ev0 + buf)
            copy(buf, chunk, nxt, a0 if copy is copy_a else b0)
            asc.set_flag(E.MTE2_MTE1, ev0 + buf)

    def block(mb, nb, a0, b0, c0_off):
        asc.wait_flag(E.MTE1_MTE2, 0)
        copy_a(0, 0, mb, a0)
        asc.set_flag(E.MTE2_MTE1, 0)
        asc.wait_flag(E.MTE1_MTE2, 2)
        copy_b(0, 0, nb, b0)
        asc.set_flag(E.MTE2_MTE1, 2)
        # the vendor's K step 0 also starts the pong packets (B's, then A's) once its Mmad is issued: they
        # are the next instructions on MTE2 either way, so they are issued here, before the K loop
        for copy, ev, nxt, off in ((copy_b, 3, nb, b0), (copy_a, 1, mb, a0)):
            asc.wait_flag(E.MTE1_MTE2, ev)
            copy(1, 1, nxt, off)
            asc.set_flag(E.MTE2_MTE1, ev)
        asc.wait_flag(E.FIX_M, 0)  # the previous block's Fixpipe has drained L0C (the unit flag's wait)

        @asc.loop(periods - 1)
        def _(c):
            for s in range(period):
                k_step(c, s, False, mb, nb, a0, b0)

        for s in range(period):
            k_step(periods - 1, s, True, mb, nb, a0, b0)
        asc.wait_flag(E.M_FIX, 0)
        fp = asc.FixpipeParamsV220(base_n, base_m, base_m, n, False, asc.QuantMode.F322F16, unit_flag=3)
        asc.fixpipe(c_gm[c0_off + mb * base_m * n + nb * base_n :], c1, fp)
        asc.set_flag(E.FIX_M, 0)

    for ev in range(4):
        asc.set_flag(E.MTE1_MTE2, ev)
    for ev in range(2):
        asc.set_flag(E.M_MTE1, ev)
    asc.set_flag(E.FIX_M, 0)
    idx = asc.get_block_idx()

    @asc.loop(rounds * n_loop * m_loop)  # ProcessL2Cache's M rounds (Process: one), N blocks, M blocks inner
    def _(i):
        r, i = i // (n_loop * m_loop), i % (n_loop * m_loop)
        m_iter, n_iter = idx % m_per_round + r * m_per_round, idx // m_per_round
        a0, b0 = m_iter * single_m * k, n_iter * k * single_n
        block(i % m_loop, i // m_loop, a0, b0, m_iter * single_m * n + n_iter * single_n)

    for ev in range(2):
        asc.wait_flag(E.M_MTE1, ev)
    for ev in range(4):
        asc.wait_flag(E.MTE1_MTE2, ev)
    asc.wait_flag(E.FIX_M, 0)
    asc.pipe_barrier(asc.PIPE_ALL)


def run_case(
    scenario: int,
    hw=None,
    *,
    m: int = M,
    k: int = K,
    single_m: int | None = None,
    single_n: int = SINGLE_N,
    cores: int = CORES,
    tiling: tuple = (BASE_M, BASE_N, BASE_K, STEP_KA, STEP_KB),
    timing_only: bool = True,
    checks=None,
):
    """Scenario 1 or 2 at the vendor's size (smaller ``m``, ``k``, blocks and cores for tests):
    ``(outs, report)``; with ``timing_only=False`` on random data (a, b^T, c)."""
    import npu_jax

    hw = npu_jax.presets.ascend910b1() if hw is None else hw
    single_m = SCENARIOS[scenario] if single_m is None else single_m
    rounds = 2 if scenario == 2 else 1
    n = cores // (m // (single_m * rounds)) * single_n
    if timing_only:
        a, bt, out = (jax.ShapeDtypeStruct(s, np.float16) for s in ((m, k), (n, k), (m, n)))
    else:
        rng = np.random.default_rng(scenario)
        a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
        bt = rng.uniform(-1, 1, (n, k)).astype(np.float16)
        out = np.zeros((m, n), np.float16)
    return mmad_custom[cores](
        a, bt, out, m, n, k, single_m, single_n, tiling, rounds, hw=hw, timing_only=timing_only, checks=checks
    )


def main(scenario: int = 2):
    _, report = run_case(scenario)
    print(report.summary())


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)

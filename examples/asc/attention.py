"""Single-head attention on the 910B, the FlashAttention-2 way: O = softmax(Q K^T / sqrt(D)) V, Q, K, V
[S, D] half. Each block takes ``br`` rows of Q and walks K and V in blocks of ``bc`` rows: the Cube
computes S_j = Q K_j^T, the vector side the online softmax of S_j (the vendor's SoftmaxFlashV2: the
running row max and sum, P_j = exp(S_j - max) unnormalised), the Cube O_j = P_j V_j, and the vector side
rescales and adds O_j into its O; O / sum at the end. The Cube and the vector side hand S_j, P_j and O_j
over through GM workspaces, each hand-over a cross-core flag (CrossCoreSetFlag / WaitFlag, mode 2: one
AIC and its AIVs), as the vendor's mix kernels do.

    python examples/asc/attention.py
"""

from __future__ import annotations

import math

import numpy as np

from npu_jax import asc

P = asc.TPosition
S_READY, P_READY, O_READY = 0, 1, 2  # the cross-core flags forward: S_j, P_j, O_j are in GM
S_FREE, P_FREE, O_FREE = 3, 4, 5  # and back: S_j, P_j, O_j were read, their workspace may be written again


@asc.kernel(core="mix")
def attention(q, k, v, o, s_ws, p_ws, o_ws, seq: int, d: int, br: int, bc: int):
    blk = asc.get_block_idx()
    qg, kg, vg, og = (asc.GlobalTensor() for _ in range(4))
    qg.set_global_buffer(q + blk * br * d, br * d)
    kg.set_global_buffer(k, seq * d)
    vg.set_global_buffer(v, seq * d)
    og.set_global_buffer(o + blk * br * d, br * d)
    sg, pg, wg = (asc.GlobalTensor() for _ in range(3))  # this block's workspaces
    sg.set_global_buffer(s_ws + blk * br * bc, br * bc)
    pg.set_global_buffer(p_ws + blk * br * bc, br * bc)
    wg.set_global_buffer(o_ws + blk * br * d, br * d)
    pipe = asc.TPipe()
    # the Cube side: L1, L0A, L0B, L0C tiles (one queue per shape: a Cube tile keeps its shape)
    q1, k1, p1, v1 = (asc.TQue(pos, 1) for pos in (P.A1, P.B1, P.A1, P.B1))
    q2, k2, p2, v2 = (asc.TQue(pos, 1) for pos in (P.A2, P.B2, P.A2, P.B2))
    cs, co = asc.TQue(P.CO1, 1), asc.TQue(P.CO1, 1)
    for que, nbytes in ((q1, br * d * 2), (k1, bc * d * 2), (p1, br * bc * 2), (v1, bc * d * 2)):
        pipe.init_buffer(que, 1, nbytes)
    for que, nbytes in ((q2, br * d * 2), (k2, bc * d * 2), (p2, br * bc * 2), (v2, bc * d * 2)):
        pipe.init_buffer(que, 1, nbytes)
    pipe.init_buffer(cs, 1, br * bc * 4)
    pipe.init_buffer(co, 1, br * d * 4)
    # the vector side: S_j and P_j, the running O, O_j, the per-row statistics (one 32-B block a row)
    ub = asc.TBuf(P.VECCALC)
    rows8 = br * 8
    pipe.init_buffer(ub, (br * bc * 4) + (br * bc * 2) + 2 * (br * d * 4) + 5 * rows8 * 4)
    buf = ub.get(asc.float32)
    s_ub = buf
    p_ub = buf[br * bc :].reinterpret_cast(asc.half)
    o_acc = buf[br * bc + br * bc // 2 :]
    o_j = o_acc[br * d :]
    stats = o_j[br * d :]
    mx, sm, mx_in, sm_in, ex = (stats[i * rows8 :] for i in range(5))
    shape = asc.SoftMaxShapeInfo(br, bc, br, bc)
    scale = 1.0 / math.sqrt(d)

    # Q once: GM -> L1 (Nz) -> L0A (Zz)
    qa = q1.alloc_tensor(asc.half)
    asc.data_copy(qa, qg, asc.Nd2NzParams(1, br, d, 0, d, br, 1, 0))
    q1.enque(qa)
    qa = q1.deque(asc.half)
    qz = q2.alloc_tensor(asc.half)
    asc.load_data(qz, qa, asc.LoadData2DParams(0, br * d // 256, 1))
    q1.free_tensor(qa)
    q2.enque(qz)
    qz = q2.deque(asc.half)

    n = seq // bc
    for j in range(n):
        # Cube: S_j = Q K_j^T (K_j [bc, d] is B stored [N, K]) -> GM, then the hand-over
        kb = k1.alloc_tensor(asc.half)
        asc.data_copy(kb, kg[j * bc * d :], asc.Nd2NzParams(1, bc, d, 0, d, bc, 1, 0))
        k1.enque(kb)
        kb = k1.deque(asc.half)
        kz = k2.alloc_tensor(asc.half)
        asc.load_data(kz, kb, asc.LoadData2DParams(0, bc * d // 256, 1, 0, 0, True))
        k1.free_tensor(kb)
        k2.enque(kz)
        kz = k2.deque(asc.half)
        c = cs.alloc_tensor(asc.float32)
        asc.mmad(c, qz, kz, asc.MmadParams(br, bc, d, 0, False, True))
        cs.enque(c)
        k2.free_tensor(kz)
        c = cs.deque(asc.float32)
        if j:
            asc.cross_core_wait_flag(S_FREE, 2, asc.PIPE_FIX)
        asc.fixpipe(sg, c, asc.FixpipeParamsV220(bc, br, br, bc, False, asc.QuantMode.NoQuant))
        cs.free_tensor(c)
        asc.cross_core_set_flag(S_READY, 2, asc.PIPE_FIX)

        # vector: the online softmax of S_j; P_j (half) -> GM
        asc.cross_core_wait_flag(S_READY, 2, asc.PIPE_MTE2)
        asc.data_copy(s_ub, sg, br * bc)
        if j < n - 1:
            asc.cross_core_set_flag(S_FREE, 2, asc.PIPE_MTE2)
        asc.set_flag(asc.HardEvent.MTE2_V, 0)
        asc.wait_flag(asc.HardEvent.MTE2_V, 0)
        asc.muls(s_ub, s_ub, scale, br * bc)
        if j:
            asc.adds(mx_in, mx, 0.0, rows8)  # the running max and sum become the update's inputs
            asc.adds(sm_in, sm, 0.0, rows8)
        asc.softmax_flash_v2(
            s_ub, sm, mx, s_ub, ex, sm_in, mx_in, asc.SoftMaxTiling(), shape, is_update=j > 0
        )
        asc.cast(p_ub, s_ub, asc.RoundMode.CAST_RINT, br * bc)
        asc.set_flag(asc.HardEvent.V_MTE3, 0)
        asc.wait_flag(asc.HardEvent.V_MTE3, 0)
        if j:
            asc.cross_core_wait_flag(P_FREE, 2, asc.PIPE_MTE3)
        asc.data_copy(pg, p_ub, br * bc)
        asc.cross_core_set_flag(P_READY, 2, asc.PIPE_MTE3)
        asc.set_flag(asc.HardEvent.MTE3_V, 0)  # P_j left UB: the next cast may write there
        asc.wait_flag(asc.HardEvent.MTE3_V, 0)

        # Cube: O_j = P_j V_j -> GM
        asc.cross_core_wait_flag(P_READY, 2, asc.PIPE_MTE2)
        pa, vb = p1.alloc_tensor(asc.half), v1.alloc_tensor(asc.half)
        asc.data_copy(pa, pg, asc.Nd2NzParams(1, br, bc, 0, bc, br, 1, 0))
        asc.data_copy(vb, vg[j * bc * d :], asc.Nd2NzParams(1, bc, d, 0, d, bc, 1, 0))
        if j < n - 1:
            asc.cross_core_set_flag(P_FREE, 2, asc.PIPE_MTE2)
        p1.enque(pa)
        v1.enque(vb)
        pa, vb = p1.deque(asc.half), v1.deque(asc.half)
        pz, vz = p2.alloc_tensor(asc.half), v2.alloc_tensor(asc.half)
        asc.load_data(pz, pa, asc.LoadData2DParams(0, br * bc // 256, 1))
        asc.load_data(vz, vb, asc.LoadData2DParams(0, bc * d // 256, 1))
        p1.free_tensor(pa)
        v1.free_tensor(vb)
        p2.enque(pz)
        v2.enque(vz)
        pz, vz = p2.deque(asc.half), v2.deque(asc.half)
        c = co.alloc_tensor(asc.float32)
        asc.mmad(c, pz, vz, asc.MmadParams(br, d, bc, 0, False, True))
        co.enque(c)
        p2.free_tensor(pz)
        v2.free_tensor(vz)
        c = co.deque(asc.float32)
        if j:
            asc.cross_core_wait_flag(O_FREE, 2, asc.PIPE_FIX)
        asc.fixpipe(wg, c, asc.FixpipeParamsV220(d, br, br, d, False, asc.QuantMode.NoQuant))
        co.free_tensor(c)
        asc.cross_core_set_flag(O_READY, 2, asc.PIPE_FIX)

        # vector: O = O * exp(max_old - max_new) + O_j (the rescale: one block a row, read again along it)
        asc.cross_core_wait_flag(O_READY, 2, asc.PIPE_MTE2)
        target = o_acc if j == 0 else o_j
        asc.data_copy(target, wg, br * d)
        if j < n - 1:
            asc.cross_core_set_flag(O_FREE, 2, asc.PIPE_MTE2)
        asc.set_flag(asc.HardEvent.MTE2_V, 1)
        asc.wait_flag(asc.HardEvent.MTE2_V, 1)
        if j:
            for c0 in range(0, d, 64):
                asc.mul(
                    o_acc[c0:], o_acc[c0:], ex, 64, br, asc.BinaryRepeatParams(1, 1, 0, d // 8, d // 8, 1)
                )
            asc.add(o_acc, o_acc, o_j, br * d)
        asc.set_flag(asc.HardEvent.V_MTE2, 0)  # the S_j / O_j buffers are read: the next copies may land
        asc.wait_flag(asc.HardEvent.V_MTE2, 0)

    # O / sum, half, out
    for c0 in range(0, d, 64):
        asc.div(o_acc[c0:], o_acc[c0:], sm, 64, br, asc.BinaryRepeatParams(1, 1, 0, d // 8, d // 8, 1))
    o_half = buf[br * bc :].reinterpret_cast(asc.half)
    asc.cast(o_half, o_acc, asc.RoundMode.CAST_RINT, br * d)
    asc.set_flag(asc.HardEvent.V_MTE3, 1)
    asc.wait_flag(asc.HardEvent.V_MTE3, 1)
    asc.data_copy(og, o_half, br * d)
    q2.free_tensor(qz)


def workspaces(seq: int, d: int, br: int, bc: int):
    """The GM workspaces (S_j, P_j, O_j: one region a block) and the output."""
    blocks = seq // br
    return (
        np.zeros((seq, d), np.float16),
        np.zeros(blocks * br * bc, np.float32),
        np.zeros(blocks * br * bc, np.float16),
        np.zeros(blocks * br * d, np.float32),
    )


def reference(q, k, v):
    """softmax(Q K^T / sqrt(D)) V in float64."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = q @ k.T / math.sqrt(q.shape[1])
    e = np.exp(s - s.max(1, keepdims=True))
    return (e / e.sum(1, keepdims=True)) @ v


def main():
    import npu_jax

    rng = np.random.default_rng(0)
    seq, d, br, bc = 512, 64, 64, 128
    q, k, v = (rng.normal(0, 1, (seq, d)).astype(np.float16) for _ in range(3))
    outs, report = attention[seq // br](
        q, k, v, *workspaces(seq, d, br, bc), seq, d, br, bc, hw=npu_jax.presets.ascend910b()
    )
    print("max |error|:", np.abs(outs[3] - reference(q, k, v)).max())
    print(report.summary())


if __name__ == "__main__":
    main()

"""The vector unit's two forms, its mask and its shaped ops, against numpy written from the vendor's
pages (asc-devkit): a repeat is 8 blocks of 32 B; operand X's element k of block b of repeat r is at
X + (r * rep_stride + b * blk_stride) * 32 B + k * sizeof(T); a mask bit i selects lane i; reductions,
Brcb, Compare / Select, Gather, Transpose as their pages describe them. Each test runs a few ops in one
launch (one compile) on fresh random data."""

from __future__ import annotations

import numpy as np
import pytest

import npu_jax
from npu_jax import asc

HW = npu_jax.presets.ascend910b()


@asc.kernel
def _harness(x, y, out, body, nx: int, ny: int, no: int):
    """x, y into UB; ``body(xl, yl, ol)`` on the vector unit; ol out."""
    pipe = asc.TPipe()
    bx, by, bo = (asc.TBuf(asc.TPosition.VECCALC) for _ in range(3))
    pipe.init_buffer(bx, nx * x.dtype.sizeof())
    pipe.init_buffer(by, ny * y.dtype.sizeof())
    pipe.init_buffer(bo, no * out.dtype.sizeof())
    xl, yl, ol = bx.get(x.dtype), by.get(y.dtype), bo.get(out.dtype)
    gx, gy, go = asc.GlobalTensor(), asc.GlobalTensor(), asc.GlobalTensor()
    gx.set_global_buffer(x, nx)
    gy.set_global_buffer(y, ny)
    go.set_global_buffer(out, no)
    asc.data_copy(xl, gx, nx)
    asc.data_copy(yl, gy, ny)
    asc.data_copy(ol, go, no)
    asc.set_flag(asc.HardEvent.MTE2_V, 0)
    asc.wait_flag(asc.HardEvent.MTE2_V, 0)
    body(xl, yl, ol)
    asc.set_flag(asc.HardEvent.V_MTE3, 0)
    asc.wait_flag(asc.HardEvent.V_MTE3, 0)
    asc.data_copy(go, ol, no)


def run(body, x, y, out, **kw):
    outs, report = _harness[1](
        x, y, out, body, x.size, y.size, out.size, hw=kw.pop("hw", HW), checks="all", **kw
    )
    return outs[2], report


def walk(base, repeats, blk, rep, per, lanes):
    """Element offsets (R, L) of an operand's walk, from the vendor's formula."""
    r = np.arange(repeats)[:, None]
    lane = np.arange(lanes)[None, :]
    return base + (r * rep + (lane // per) * blk) * per + lane % per


def bits(words, lanes):
    return np.array([(words[i // 64] >> (i % 64)) & 1 for i in range(lanes)], bool)


# ---- the mask + repeat form -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_repeats_that_are_whole_runs_apart(rng, dtype):
    """Every lane on and each repeat one run of elements (block stride 1), the runs apart (repeat
    strides past a repeat, as a row walk takes them): read and written a run at a time. Overlapping
    destination repeats (a later one wins) and a gap of one block on the way back."""
    lanes, per = 256 // np.dtype(dtype).itemsize, 32 // np.dtype(dtype).itemsize
    n = 8192 // np.dtype(dtype).itemsize
    x, y, out = (rng.uniform(-4, 4, n).astype(dtype) for _ in range(3))
    repeats = 4

    def body(xl, yl, ol):
        asc.add(ol, xl, yl, lanes, repeats, asc.BinaryRepeatParams(1, 1, 1, 16, 12, 9))
        asc.mul(ol[n // 2 :], xl, yl, lanes, repeats, asc.BinaryRepeatParams(1, 1, 1, 4, 8, 8))

    got, rep = run(body, x, y, out)
    want = out.copy()
    d, a, b = (walk(0, repeats, 1, s, per, lanes) for s in (16, 12, 9))
    want[d] = x[a] + y[b]
    d2, a2 = walk(n // 2, repeats, 1, 4, per, lanes), walk(0, repeats, 1, 8, per, lanes)
    for r in range(repeats):  # overlapping repeats: in order, a later one wins
        want[d2[r]] = x[a2[r]] * y[a2[r]]
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    assert not rep.findings()


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
def test_integer_copies_walk_runs_and_masked_repeats(rng, dtype):
    """Copy (VCopy) of 1- and 2-byte integers read from and written to byte buffers: whole runs apart
    (a window a repeat) and half-masked repeats (element by element)."""
    n = 4096 // np.dtype(dtype).itemsize
    lanes, per = 256 // np.dtype(dtype).itemsize, 32 // np.dtype(dtype).itemsize
    x = rng.integers(0, 100, n).astype(dtype)
    out = rng.integers(0, 100, n).astype(dtype)

    def body(xl, yl, ol):
        asc.copy(ol, xl, lanes, 3, asc.CopyRepeatParams(1, 1, 12, 9))
        asc.copy(ol[n // 2 :], xl, lanes // 2, 2, asc.CopyRepeatParams(1, 1, 10, 8))

    got, rep = run(body, x, x.copy(), out)
    want = out.copy()
    want[walk(0, 3, 1, 12, per, lanes)] = x[walk(0, 3, 1, 9, per, lanes)]
    half = lanes // 2
    want[walk(n // 2, 2, 1, 10, per, lanes)[:, :half]] = x[walk(0, 2, 1, 8, per, lanes)[:, :half]]
    np.testing.assert_array_equal(got, want)
    assert not rep.findings()


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_binary_repeat_form_walks_strides_and_a_bit_mask(rng, dtype):
    lanes, per = 256 // np.dtype(dtype).itemsize, 32 // np.dtype(dtype).itemsize
    n = 4096 // np.dtype(dtype).itemsize
    x = rng.uniform(-4, 4, n).astype(dtype)
    y = rng.uniform(-4, 4, n).astype(dtype)
    out = rng.uniform(-4, 4, n).astype(dtype)
    words = [int(rng.integers(0, 2**63)), int(rng.integers(0, 2**63))][: 2 if lanes == 128 else 1]
    params = asc.BinaryRepeatParams(1, 2, 1, 8, 16, 4)
    repeats = 3

    def body(xl, yl, ol):
        asc.add(ol, xl, yl, words, repeats, params)
        # the counter mode: the first 130 elements over every repeat, with the mask set outside the call
        asc.set_mask_count()
        asc.set_vector_mask(130, dtype=xl.dtype, mode=asc.MaskMode.COUNTER)
        asc.mul(ol[n // 2 :], xl, yl, 0, 0, asc.BinaryRepeatParams(), is_set_mask=False)
        asc.set_mask_norm()
        asc.reset_mask()

    got, rep = run(body, x, y, out)
    want = out.copy()
    on = bits(words, lanes)
    d, a, b = (
        walk(0, repeats, 1, 8, per, lanes),
        walk(0, repeats, 2, 16, per, lanes),
        walk(0, repeats, 1, 4, per, lanes),
    )
    for r in range(repeats):
        for lane in np.nonzero(on)[0]:
            want[d[r, lane]] = x[a[r, lane]] + y[b[r, lane]]
    want[n // 2 : n // 2 + 130] = x[:130] * y[:130]
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    assert not rep.findings()


def test_scalar_unary_and_integer_ops(rng):
    n = 512
    x = rng.uniform(0.5, 4, n).astype(np.float32)
    y = rng.integers(-(2**15), 2**15, n).astype(np.int16)
    out = np.zeros(8 * n, np.float32)

    def body(xl, yl, ol):
        asc.rsqrt(ol, xl, n)
        asc.reciprocal(ol[n:], xl, 64, 8, asc.UnaryRepeatParams(1, 1, 8, 8))  # mask 64, 8 repeats
        asc.axpy(ol[2 * n :], xl, 3.0, n)  # dst += 3 * x (dst holds zeros)
        asc.fused_mul_add(ol[2 * n :], xl, xl, n)  # dst = x * dst + x
        asc.add_relu(ol[3 * n :], xl, ol[n:], n)
        yi = ol[4 * n :].reinterpret_cast(asc.int16)
        asc.bitwise_not(yi, yl, n)
        asc.shift_left(yi[n:], yl, 3, n)
        asc.bitwise_and(yi[2 * n :], yl, yi, n)

    got, _ = run(body, x, y, out)
    np.testing.assert_allclose(got[:n], 1 / np.sqrt(x.astype(np.float64)), rtol=2e-7)
    np.testing.assert_allclose(got[n : 2 * n], 1 / x.astype(np.float64), rtol=2e-7)
    # the fused ops' products come from exact partial products: within 2 units in the last place of fp32
    axpy = np.float32(3) * x
    np.testing.assert_allclose(got[2 * n : 3 * n], x.astype(np.float64) * axpy + x, rtol=2.5e-7)
    np.testing.assert_array_equal(got[3 * n : 4 * n], np.maximum(x + got[n : 2 * n], 0))
    ints = got[4 * n :].view(np.int16)
    np.testing.assert_array_equal(ints[:n], ~y)
    np.testing.assert_array_equal(ints[n : 2 * n], (y.astype(np.int32) << 3).astype(np.int16))
    np.testing.assert_array_equal(ints[2 * n : 3 * n], y & ~y)


def test_transcendental_and_division_are_charged_the_vendors_rates(rng):
    """Exp / Div at 32 elements a cycle (4 cycles a half repeat), Mul at 128 (1): the vendor's table."""
    n = 128 * 16
    x = rng.uniform(-2, 2, n).astype(np.float16)

    def mul(xl, yl, ol):
        asc.mul(ol, xl, yl, n)

    def exp(xl, yl, ol):
        asc.exp(ol, xl, n)

    def div(xl, yl, ol):
        asc.div(ol, xl, yl, n)

    busy = {}
    for f in (mul, exp, div):
        got, rep = run(f, x, x + np.float16(3), np.zeros(n, np.float16))
        busy[f.__name__] = int(rep.pipe_busy["VECTOR"])
    su = HW.assumed.vector_startup
    assert busy["mul"] - su == 16 * 2  # the two sources share bank groups (start 0 apart): two cycles a beat
    assert busy["exp"] - su == 16 * 4 and busy["div"] - su == 16 * 4 * 2


# ---- reductions ---------------------------------------------------------------------------------------
def _tree(v, f32=True):
    v = list(v)
    while len(v) > 1:
        v = [
            np.float32(a) + np.float32(b) if f32 else np.float16(np.float32(a) + np.float32(b))
            for a, b in zip(v[0::2], v[1::2])
        ]
    return v[0]


def test_whole_block_pair_and_tensor_reductions(rng):
    n = 64 * 6  # six float repeats
    x = rng.uniform(-3, 3, n).astype(np.float32)
    x[100] = x[37] = 9.0  # a tie: the first index wins
    out = np.zeros(256, np.float32)

    def body(xl, yl, ol):  # ol[192:] is the work tensor of the whole-tensor reductions
        asc.whole_reduce_sum(ol, xl, 64, 6, 1, 1, 8)
        asc.whole_reduce_max(ol[8:], xl, 64, 6, 1, 1, 8)  # [value, index] pairs, 2 elements a repeat
        asc.block_reduce_max(ol[24:], xl, 2, 64, 1, 1, 8)  # 8 a repeat
        asc.pair_reduce_sum(ol[40:], xl, 1, 64, 1, 1, 8)
        asc.reduce_max(ol[80:], xl, ol[192:], n, True)
        asc.reduce_sum(ol[88:], xl, ol[192:], n)

    got, _ = run(body, x, x, out)
    reps = x.reshape(6, 64)
    np.testing.assert_array_equal(got[:6], [_tree(r) for r in reps])
    pairs = got[8:20].reshape(6, 2)
    np.testing.assert_array_equal(pairs[:, 0], reps.max(1))
    np.testing.assert_array_equal(pairs[:, 1].view(np.uint32), reps.argmax(1))
    np.testing.assert_array_equal(got[24:40], x[:128].reshape(16, 8).max(1))
    np.testing.assert_array_equal(got[40:72], x[:64:2] + x[1:64:2])
    assert got[80] == 9.0 and got[81:82].view(np.uint32)[0] == 37
    seq = np.float32(0)  # the count form on the 910B: a tree in each repeat, the repeats added in order
    for r in reps:
        seq = np.float32(seq + _tree(r)) if seq else _tree(r)
    assert got[88] == seq


def test_half_reduction_saturates(rng):
    x = np.full(128, 60000, np.float16)
    got, _ = run(
        lambda xl, yl, ol: asc.whole_reduce_sum(ol, xl, 128, 1, 1, 1, 8), x, x, np.zeros(16, np.float16)
    )
    assert got[0] == np.float16(65504)


# ---- Brcb, Compare + Select, CreateVecIndex, Gather, Transpose, Duplicate ----------------------------
def test_softmax_building_blocks(rng):
    rows, cols = 8, 64
    x = rng.uniform(-3, 3, rows * cols).astype(np.float32)
    out = np.zeros(rows * cols + 64, np.float32)

    def body(xl, yl, ol):
        # a row's max spread over the row: WholeReduceMax (value only) -> Brcb -> Sub against it
        asc.whole_reduce_max(ol[rows * cols :], xl, 64, rows, 1, 1, 8, asc.ReduceOrder.ORDER_ONLY_VALUE)
        asc.brcb(yl, ol[rows * cols :], 1, asc.BrcbRepeatParams(1, 8))  # 8 maxima -> 8 blocks of 8
        asc.sub(ol, xl, yl, 64, rows, asc.BinaryRepeatParams(1, 1, 0, 8, 8, 1))  # src1 one block per row

    got, _ = run(body, x, np.zeros(rows * cols, np.float32), out)
    m = x.reshape(rows, cols).max(1)
    np.testing.assert_array_equal(got[:-64].reshape(rows, cols), x.reshape(rows, cols) - m[:, None])


def test_compare_select_index_gather_transpose(rng):
    n = 128
    y = rng.uniform(-2, 2, n).astype(np.float16)
    out = np.zeros(5 * n, np.float16)

    def body(xl, yl, ol):
        m = ol[4 * n :].reinterpret_cast(asc.uint8)
        asc.compare(m, xl, yl, asc.CMPMODE.GT, n)
        asc.select(ol, m, xl, yl, asc.SELMODE.VSEL_TENSOR_TENSOR_MODE, n)
        asc.create_vec_index(ol[n:], 0.0, n)
        asc.transpose(ol[2 * n :], xl)  # a 16 x 16: 256 halves out (into the next region too)

    x2 = rng.uniform(-2, 2, 256).astype(np.float16)
    got, rep = run(body, x2, y, out)
    gt = x2[:n] > y
    np.testing.assert_array_equal(got[4 * n : 4 * n + 8].view(np.uint8), np.packbits(gt, bitorder="little"))
    np.testing.assert_array_equal(got[:n], np.where(gt, x2[:n], y))
    np.testing.assert_array_equal(got[n : 2 * n], np.arange(n, dtype=np.float16))
    np.testing.assert_array_equal(got[2 * n : 2 * n + 256], x2.reshape(16, 16).T.reshape(-1))


def test_gather_reads_byte_offsets(rng):
    x = rng.uniform(-2, 2, 128).astype(np.float32)
    perm = rng.permutation(128).astype(np.uint32)
    out = np.zeros(128, np.float32)

    def body(xl, yl, ol):
        asc.gather(ol, xl, yl, 0, 128)

    outs, _ = _harness[1](x, perm * 4, out, body, 128, 128, 128, hw=HW, checks="all")
    np.testing.assert_array_equal(outs[2], x[perm])


def test_a_lane_past_the_tensor_is_a_finding_at_the_call(rng):
    x = rng.uniform(-2, 2, 64).astype(np.float32)
    with pytest.warns(npu_jax.errors.SanitizerWarning, match="illegal (read|write)"):
        _harness[1](
            x,
            x,
            np.zeros(64, np.float32),
            lambda xl, yl, ol: asc.abs(ol, xl, 64, 2, asc.UnaryRepeatParams()),
            64,
            64,
            64,
            hw=HW,
            checks=npu_jax.Checks.parse("all", action="warn"),
        )


# ---- GetValue / SetValue on the Scalar pipe -----------------------------------------------------------
def _scalar_body(synced: bool):
    def body(xl, yl, ol):
        asc.reduce_max(yl, xl, yl[64:], 256)  # the max into yl[0] (V)
        if synced:
            asc.set_flag(asc.HardEvent.V_S, 0)
            asc.wait_flag(asc.HardEvent.V_S, 0)
        m = yl.get_value(0)  # S
        ol.set_value(300, m)  # S
        if synced:
            asc.set_flag(asc.HardEvent.S_V, 0)
            asc.wait_flag(asc.HardEvent.S_V, 0)
        asc.adds(ol, xl, -m, 256)  # x - max: the scalar read back, broadcast by the instruction

    return body


def test_get_value_broadcasts_a_reduced_value(rng):
    x = rng.uniform(-5, 5, 256).astype(np.float32)
    got, rep = run(_scalar_body(True), x, np.zeros(128, np.float32), np.zeros(320, np.float32))
    np.testing.assert_array_equal(got[:256], x - x.max())
    assert got[300] == x.max() and not rep.findings()
    assert rep.pipe_busy["SCALAR"] >= 2 * HW.assumed.scalar_ub_cycles


def test_a_scalar_read_without_the_vendors_flags_is_a_race(rng):
    x = rng.uniform(-5, 5, 256).astype(np.float32)
    with pytest.warns(npu_jax.errors.SanitizerWarning, match=r"racecheck \[RAW\].*GetValue on pipe S"):
        _harness[1](
            x,
            np.zeros(128, np.float32),
            np.zeros(320, np.float32),
            _scalar_body(False),
            256,
            128,
            320,
            hw=HW,
            checks=npu_jax.Checks.parse("all", action="warn"),
        )

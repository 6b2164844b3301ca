"""Each instruction against an independent numpy implementation, eager and under jax.jit.

References here are written from the definitions (reference doc, docstrings, the Assumed table), not
from the emulator's code: layouts by explicit indexing, img2col by its index formula, GEMM in float64,
rounding with numpy's float16, DMA bursts by counting runs of consecutive GM addresses.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from conftest import (
    assert_bits_equal,
    assert_same_core,
    busy,
    counter,
    free_at,
    gm_spec,
    make_core,
    run_both,
)

from npu_jax.core import wide
from npu_jax.core.buffers import Plan
from npu_jax.core.isa import OPS, Load3DGeometry, charge
from npu_jax.core.pipes import PIPE_INDEX, PIPES
from npu_jax.core.policy import Policy
from npu_jax.core.sync import Queue
from npu_jax.hw import presets

A = presets.tiny().assumed  # the start-up latencies every cost below is built from
C0 = 16  # fp16 fractal row: 32 B / 2 B


def ceil(a, b):
    return -(-a // b)


def setbuf(core, **arrays):
    """Write stage 0 of allocations directly (test set-up that charges no pipe)."""
    buf = dict(core.buf)
    for name, x in arrays.items():
        old = buf[name]
        buf[name] = old.at[0].set(jnp.asarray(x, old.dtype))
    return core.replace(buf=buf)


def f16(x):
    return np.asarray(x, np.float32).astype(np.float16)


def gm_runs(shape, starts, sizes):
    """(elements, bursts) of the valid part of a window of a row-major tensor: bursts = maximal runs
    of consecutive linear addresses."""
    idx = [np.arange(s, min(s + z, n)) for s, z, n in zip(starts, sizes, shape)]
    if any(len(i) == 0 for i in idx):
        return 0, 0
    addr = np.sort(np.ravel_multi_index(np.meshgrid(*idx, indexing="ij"), shape).ravel())
    return addr.size, 1 + int(np.count_nonzero(np.diff(addr) != 1))


def dma_cycles(nbytes, bursts, rate, startup):
    return 0 if nbytes == 0 else startup + math.ceil(nbytes / rate) + (bursts - 1) * A.gm_burst_overhead


# =================================================================================================
# DataCopy GM -> L1 / UB (MTE2) and UB -> GM (MTE3)
# =================================================================================================
XS, XP = (40, 48), (48, 64)  # logical and padded GM shape
WIN = (16, 32)
# (row, col) starts: interior, unaligned, bottom-right edge (8 x 16 valid), right edge, bottom edge
STARTS = [(0, 0), (3, 5), (32, 32), (8, 32), (30, 0)]


def _copy_setup(hw, rng, layout):
    plan = Plan(hw)
    if layout == "nz":
        dst = plan.alloc("L1", "t", (WIN[1] // C0, WIN[0], C0), "fp16", fmt="NZ")
    else:
        dst = plan.alloc("L1", "t", WIN, "fp16")
    x = f16(rng.standard_normal(XS) * 4)
    core = make_core(hw, plan, [gm_spec("x", XS, padded=XP)], {"x": x})
    return core, dst, x


def _nd_to_nz(t):
    # (R, C) -> (C / C0, R, C0): column block c1 of the ND tile becomes slab c1
    return np.stack([t[:, c1 * C0 : (c1 + 1) * C0] for c1 in range(t.shape[1] // C0)])


@pytest.mark.parametrize("layout", [None, "nz"])
def test_data_copy_gm_to_l1(rng, layout):
    hw = presets.tiny()
    core0, dst, x = _copy_setup(hw, rng, layout)

    def prog(core, r, c):
        return core.data_copy(dst=dst[0], src=core.gm_window("x", (r, c), WIN), layout=layout)

    jprog = jax.jit(prog)
    for r, c in STARTS:
        eager = prog(core0, r, c)
        assert_same_core(eager, jprog(core0, r, c))
        want = np.zeros(WIN, np.float16)
        vr, vc = min(WIN[0], XS[0] - r), min(WIN[1], XS[1] - c)
        want[:vr, :vc] = x[r : r + vr, c : c + vc]  # zero-filled beyond the logical shape
        if layout == "nz":
            want = _nd_to_nz(want)
        assert_bits_equal(eager.read(dst), want, f"window at {(r, c)}")
        elems, bursts = gm_runs(XS, (r, c), WIN)
        assert bursts == vr  # partial-width windows: one burst per row
        assert counter(eager, "GM->L1") == elems * 2
        cost = dma_cycles(elems * 2, bursts, hw.gm_rate(1), A.mte2_startup)
        assert busy(eager, "MTE2") == free_at(eager, "MTE2") == cost
        assert sum(busy(eager, p) for p in PIPES) == cost  # nothing else charged


def test_data_copy_full_rows_is_one_burst(rng):
    """A window spanning whole rows is one contiguous GM run; both eager and jit must say so."""
    hw = presets.tiny()
    plan = Plan(hw)
    dst = plan.alloc("L1", "t", (16, 48), "fp16")
    x = f16(rng.standard_normal(XS))
    core0 = make_core(hw, plan, [gm_spec("x", XS, padded=XP)], {"x": x})

    def prog(core, r, c):
        return core.data_copy(dst=dst[0], src=core.gm_window("x", (r, c), (16, 48)))

    elems, bursts = gm_runs(XS, (8, 0), (16, 48))
    assert bursts == 1
    want = dma_cycles(elems * 2, 1, hw.gm_rate(1), A.mte2_startup)
    eager = prog(core0, 8, 0)
    assert busy(eager, "MTE2") == want
    jitted = jax.jit(prog)(core0, 8, 0)  # the same window with a traced start
    assert_bits_equal(jitted.read(dst), eager.read(dst))
    assert busy(jitted, "MTE2") == want, "jit charges a burst per row for a contiguous window"


def test_data_copy_window_past_padding_reads_wrong_rows(rng):
    """A static window that runs past the padded extent must raise (habit 8), not silently shift."""
    hw = presets.tiny()
    plan = Plan(hw)
    dst = plan.alloc("L1", "t", (8, 16), "fp16")
    x = f16(rng.standard_normal((10, 16)) + 10)
    core = make_core(hw, plan, [gm_spec("x", (10, 16), padded=(16, 16))], {"x": x})
    try:
        out = core.data_copy(dst=dst[0], src=core.gm_window("x", (9, 0), (8, 16)))
    except ValueError:
        return  # raising is a fine answer
    want = np.zeros((8, 16), np.float16)
    want[0] = x[9]
    assert_bits_equal(out.read(dst), want, "row 0 must be GM row 9 (got a clamped window)")


@pytest.mark.parametrize("C", [3, 17])
def test_data_copy_nc1hwc0(rng, C):
    hw = presets.tiny()
    H, W, PH, PW = 5, 6, 8, 8
    c1n = ceil(C, C0)
    plan = Plan(hw)
    dst = plan.alloc("L1", "fm", (c1n, 4, 4, C0), "fp16", fmt="NC1HWC0")
    x = f16(rng.standard_normal((C, H, W)) + 2)  # + 2: padded channels must be zero, not "small"
    core0 = make_core(hw, plan, [gm_spec("x", (C, H, W), padded=(C, PH, PW))], {"x": x})

    def prog(core, h, w):
        return core.data_copy(dst=dst[0], src=core.gm_window("x", (0, h, w), (C, 4, 4)), layout="nc1hwc0")

    jprog = jax.jit(prog)
    for h, w in [(0, 0), (1, 2), (4, 4)]:
        eager = prog(core0, h, w)
        assert_same_core(eager, jprog(core0, h, w))
        hv, wv = min(4, H - h), min(4, W - w)
        want = np.zeros((c1n, 4, 4, C0), np.float16)
        for c in range(C):  # channel c lands in slab c // C0, lane c % C0
            want[c // C0, :hv, :wv, c % C0] = x[c, h : h + hv, w : w + wv]
        assert_bits_equal(eager.read(dst), want, f"window at {(h, w)}")
        elems, bursts = gm_runs((C, H, W), (0, h, w), (C, 4, 4))
        assert counter(eager, "GM->L1") == elems * 2
        assert busy(eager, "MTE2") == dma_cycles(elems * 2, bursts, hw.gm_rate(1), A.mte2_startup)


def test_data_copy_nc1hwc0_from_nchw_window(rng):
    """A (1, C, H, W) window of an NCHW tensor is taken as its (C, H, W)."""
    hw = presets.tiny()
    plan = Plan(hw)
    dst = plan.alloc("L1", "fm", (1, 3, 4, C0), "fp16", fmt="NC1HWC0")
    x = f16(rng.standard_normal((2, 5, 3, 4)) + 1)
    core = make_core(hw, plan, [gm_spec("x", x.shape)], {"x": x})
    core = core.data_copy(dst=dst[0], src=core.gm_window("x", (1, 0, 0, 0), (1, 5, 3, 4)), layout="nc1hwc0")
    want = np.zeros((1, 3, 4, C0), np.float16)
    want[0, :, :, :5] = x[1].transpose(1, 2, 0)
    assert_bits_equal(core.read(dst), want)
    # (c, h, w) of one image are contiguous: a single burst
    assert busy(core, "MTE2") == dma_cycles(5 * 3 * 4 * 2, 1, hw.gm_rate(1), A.mte2_startup)


def test_data_copy_ub_round_trip_on_mte3(rng):
    hw = presets.tiny()
    plan = Plan(hw)
    u = plan.alloc("UB", "u", WIN, "fp16")
    x = f16(rng.standard_normal(XS))
    y0 = f16(rng.standard_normal(XS) + 100)  # an output's old contents: must survive outside the window
    core0 = make_core(
        hw, plan, [gm_spec("x", XS, padded=XP), gm_spec("y", XS, padded=XP, output=True)], {"x": x, "y": y0}
    )

    def prog(core, r, c, r2, c2):
        core = core.data_copy(dst=u[0], src=core.gm_window("x", (r, c), WIN))
        return core.data_copy(dst=core.gm_window("y", (r2, c2), WIN), src=u[0])

    jprog = jax.jit(prog)
    for (r, c), (r2, c2) in [((0, 0), (3, 5)), ((32, 32), (24, 16)), ((8, 8), (30, 32))]:
        eager = prog(core0, r, c, r2, c2)
        assert_same_core(eager, jprog(core0, r, c, r2, c2))
        tile = np.zeros(WIN, np.float16)
        vr, vc = min(WIN[0], XS[0] - r), min(WIN[1], XS[1] - c)
        tile[:vr, :vc] = x[r : r + vr, c : c + vc]
        want = y0.copy()
        wr, wc = min(WIN[0], XS[0] - r2), min(WIN[1], XS[1] - c2)
        want[r2 : r2 + wr, c2 : c2 + wc] = tile[:wr, :wc]
        assert_bits_equal(np.asarray(eager.gm["y"])[: XS[0], : XS[1]], want)
        written = np.zeros(XP, bool)
        written[r2 : r2 + wr, c2 : c2 + wc] = True
        np.testing.assert_array_equal(np.asarray(eager.gm_written["y"]) != -1, written)
        e_in, b_in = gm_runs(XS, (r, c), WIN)
        e_out, b_out = gm_runs(XS, (r2, c2), WIN)
        assert counter(eager, "GM->UB") == e_in * 2 and counter(eager, "UB->GM") == e_out * 2
        assert busy(eager, "MTE2") == dma_cycles(e_in * 2, b_in, hw.gm_rate(1), A.mte2_startup)
        rate = min(hw.ub_to_gm_rate, hw.gm_rate(1))
        assert busy(eager, "MTE3") == dma_cycles(e_out * 2, b_out, rate, A.mte3_startup)


def test_data_copy_errors(rng):
    hw = presets.tiny()
    plan = Plan(hw)
    t = plan.alloc("L1", "t", WIN, "fp16")
    t32 = plan.alloc("L1", "t32", WIN, "fp32")
    a = plan.alloc("L0A", "a", (16, 32), "fp16", fmt="ZZ")
    u = plan.alloc("UB", "u", WIN, "fp16")
    core = make_core(hw, plan, [gm_spec("x", XS, padded=XP)], {"x": f16(rng.standard_normal(XS))})
    win = core.gm_window("x", (0, 0), WIN)
    with pytest.raises(ValueError, match="L0A"):
        core.data_copy(dst=a[0], src=win)
    with pytest.raises(TypeError, match="convert"):
        core.data_copy(dst=t32[0], src=win)
    with pytest.raises(ValueError, match="input"):  # GM "x" is not an output
        core.data_copy(dst=win, src=u[0])
    with pytest.raises(ValueError, match="UB"):  # L1 -> GM is not a DataCopy path
        core.data_copy(dst=core.gm_window("x", (0, 0), WIN), src=t[0])
    with pytest.raises(ValueError, match="window size"):
        core.gm_window("x", (0, 0), (16, 65))


# =================================================================================================
# LoadData 2D (MTE1)
# =================================================================================================
def test_load2d_nd_and_nz_at_traced_offsets(rng):
    hw = presets.tiny()
    R, C = 48, 64
    plan = Plan(hw)
    snd = plan.alloc("L1", "snd", (R, C), "fp16")
    snz = plan.alloc("L1", "snz", (C // C0, R, C0), "fp16", fmt="NZ")
    a = plan.alloc("L0A", "a", (16, 32), "fp16", fmt="ZZ")  # (M, K)
    b = plan.alloc("L0B", "b", (32, 16), "fp16", fmt="ZN")  # (K, N)
    s = f16(rng.standard_normal((R, C)))
    core0 = setbuf(make_core(hw, plan), snd=s, snz=_nd_to_nz(s))

    def prog(core, ra, ca, rb, cb):
        core = core.load2d(dst=a[0], src=snd[0], start=(ra, ca))
        return core.load2d(dst=b[0], src=snz[0], start=(rb, cb))

    jprog = jax.jit(prog)
    for ra, ca, rb, cb in [(0, 0, 0, 0), (32, 32, 16, 48), (16, 16, 0, 16), (5, 7, 13, 32)]:
        eager = prog(core0, ra, ca, rb, cb)
        assert_same_core(eager, jprog(core0, ra, ca, rb, cb))
        assert_bits_equal(eager.read(a), s[ra : ra + 16, ca : ca + 32], "L0A from ND")
        assert_bits_equal(eager.read(b), s[rb : rb + 32, cb : cb + 16], "L0B from NZ")
        ca_bytes, cb_bytes = 16 * 32 * 2, 32 * 16 * 2
        assert counter(eager, "L1->L0A") == ca_bytes and counter(eager, "L1->L0B") == cb_bytes
        want = (
            A.mte1_startup
            + ceil(ca_bytes, int(hw.l1_to_l0a_bytes_per_cycle))
            + A.mte1_startup
            + ceil(cb_bytes, int(hw.l0b_rate))
        )
        assert busy(eager, "MTE1") == free_at(eager, "MTE1") == want


def test_load2d_nz_source_into_l0a_and_edge_cost(rng):
    hw = presets.tiny()
    plan = Plan(hw)
    snz = plan.alloc("L1", "snz", (4, 32, C0), "fp16", fmt="NZ")
    a = plan.alloc("L0A", "a", (32, 48), "fp16", fmt="ZZ")
    nz = f16(rng.standard_normal((4, 32, C0)))
    core = setbuf(make_core(hw, plan), snz=nz)
    s = np.concatenate(list(nz), axis=1)  # NZ -> ND by its definition
    core = core.load2d(dst=a[0], src=snz[0], start=(0, 16), valid=(20, 33))
    assert_bits_equal(core.read(a), s[:32, 16:64])
    # an edge tile moves whole fractals: 20 rows -> 32, 33 cols -> 48
    nbytes = 32 * 48 * 2
    assert counter(core, "L1->L0A") == nbytes
    assert busy(core, "MTE1") == A.mte1_startup + ceil(nbytes, 512)


def test_load2d_errors():
    hw = presets.tiny()
    plan = Plan(hw)
    s = plan.alloc("L1", "s", (32, 32), "fp16")
    s32 = plan.alloc("L1", "s32", (32, 32), "fp32")
    u = plan.alloc("UB", "u", (32, 32), "fp16")
    a = plan.alloc("L0A", "a", (16, 16), "fp16", fmt="ZZ")
    core = make_core(hw, plan)
    with pytest.raises(TypeError, match="convert"):
        core.load2d(dst=a[0], src=s32[0])
    with pytest.raises(ValueError, match="L1"):
        core.load2d(dst=a[0], src=u[0])
    with pytest.raises(ValueError, match="L0A or L0B"):
        core.load2d(dst=u[0], src=s[0])


# =================================================================================================
# Load3D (img2col, MTE1)
# =================================================================================================
def img2col_ref(
    x,
    kh,
    kw,
    stride,
    dil,
    out_w,
    pad_top,
    pad_left,
    m_start,
    k_start,
    M,
    K,
    h_valid=None,
    w_valid=None,
    m_valid=None,
):
    """The (M, K) window of the virtual img2col matrix of an NC1HWC0 tile, from its definition."""
    c1n, H, W, c0n = x.shape
    h_valid = H if h_valid is None else h_valid
    w_valid = W if w_valid is None else w_valid
    mi, ki = np.meshgrid(np.arange(M), np.arange(K), indexing="ij")
    m, k = m_start + mi, k_start + ki
    oh, ow = m // out_w, m % out_w
    c0 = k % c0n
    c1 = k // c0n // (kh * kw)
    i = k // c0n % (kh * kw) // kw
    j = k // c0n % kw
    ih = oh * stride[0] + i * dil[0] - pad_top
    iw = ow * stride[1] + j * dil[1] - pad_left
    ok = (c1 < c1n) & (ih >= 0) & (ih < h_valid) & (iw >= 0) & (iw < w_valid)
    if m_valid is not None:
        ok &= mi < m_valid
    out = np.zeros((M, K), x.dtype)
    out[ok] = x[c1[ok], ih[ok], iw[ok], c0[ok]]
    return out


FM = (2, 6, 7, C0)  # (C1, H, W, C0) feature-map tile
LM, LK = 32, 64  # L0A tile


def _load3d_setup(rng):
    hw = presets.tiny()
    plan = Plan(hw)
    fm = plan.alloc("L1", "fm", FM, "fp16", fmt="NC1HWC0")
    a = plan.alloc("L0A", "a", (LM, LK), "fp16", fmt="ZZ")
    x = f16(rng.standard_normal(FM) + 3)  # no zeros: padding must come from the window, not the data
    return hw, fm, a, x, setbuf(make_core(hw, plan), fm=x)


# (kernel, stride, dilation) combinations also checked under jit (one compile each); every
# combination of the grid runs eagerly.
LOAD3D_JIT = {((1, 1), 1, 1), ((3, 3), 2, 1), ((2, 3), 1, 2), ((5, 5), 2, 2)}


@pytest.mark.parametrize("kernel", [(1, 1), (3, 3), (2, 3), (5, 5)])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("dil", [1, 2])
def test_load3d_img2col(rng, kernel, stride, dil):
    hw, fm, a, x, core0 = _load3d_setup(rng)
    kh, kw = kernel
    _, H, W, _ = FM
    ktotal = FM[0] * kh * kw * C0
    out_w = max(1, (W + 2 - dil * (kw - 1) - 1) // stride + 1)  # output width at pad 1
    geom = Load3DGeometry(kh=kh, kw=kw, stride=(stride, stride), dilation=(dil, dil), out_w=out_w)

    def prog(core, k_start, m_start, pad_top, pad_left):
        # m_valid covers the whole window whether it counts from row 0 or from m_start
        return core.load3d(
            dst=a[0],
            src=fm[0],
            geom=geom,
            k_start=k_start,
            m_start=m_start,
            pad_top=pad_top,
            pad_left=pad_left,
            m_valid=m_start + LM,
        )

    jprog = jax.jit(prog) if (kernel, stride, dil) in LOAD3D_JIT else None
    # (k_start, m_start) windows: the corner; one crossing into the second C1 slab at a later
    # output row; one running past the last K column (reads zero)
    windows = [(0, 0), (max(0, (kh * kw - 1) * C0), 16), (ktotal - 2 * C0, 5)]
    for pad in (0, 1, 2):
        for k_start, m_start in windows:
            args = (k_start, m_start, pad, (pad + 1) % 3)  # top and left padding differ
            out = prog(core0, *args)
            if jprog is not None and pad != 1:
                assert_same_core(out, jprog(core0, *args))
            want = img2col_ref(
                x, kh, kw, (stride, stride), (dil, dil), out_w, pad, (pad + 1) % 3, m_start, k_start, LM, LK
            )
            assert_bits_equal(out.read(a), want, f"k_start={k_start} m_start={m_start} pad={pad}")
            nbytes = LM * LK * 2
            assert counter(out, "L1->L0A") == nbytes
            assert busy(out, "MTE1") == A.mte1_startup + ceil(nbytes, int(hw.l1_to_l0a_bytes_per_cycle))


def test_load3d_valid_extents(rng):
    """Rows past h_valid / cols past w_valid read as padding; rows past m_valid are zero and cost
    only whole fractals of the valid rows."""
    hw, fm, a, x, core = _load3d_setup(rng)
    geom = Load3DGeometry(kh=3, kw=3, out_w=5)
    out = core.load3d(
        dst=a[0],
        src=fm[0],
        geom=geom,
        k_start=16,
        m_start=0,
        pad_top=1,
        pad_left=1,
        h_valid=4,
        w_valid=5,
        m_valid=20,
    )
    want = img2col_ref(x, 3, 3, (1, 1), (1, 1), 5, 1, 1, 0, 16, LM, LK, h_valid=4, w_valid=5, m_valid=20)
    assert_bits_equal(out.read(a), want)
    nbytes = 32 * LK * 2  # 20 rows -> two whole fractal rows of 16
    assert counter(out, "L1->L0A") == nbytes


def test_load3d_m_start_with_default_m_valid(rng):
    """m_valid=None means 'the whole window is valid': a window starting at m_start > 0 must
    still hold img2col rows m_start .. m_start + M - 1."""
    hw, fm, a, x, core = _load3d_setup(rng)
    geom = Load3DGeometry(kh=1, kw=1, out_w=7)  # 6 x 7 = 42 output positions, all inside the map
    out = core.load3d(dst=a[0], src=fm[0], geom=geom, k_start=0, m_start=8)
    want = img2col_ref(x, 1, 1, (1, 1), (1, 1), 7, 0, 0, 8, 0, LM, LK)
    got = np.asarray(out.read(a))
    assert np.all(want[24:, :32] != 0)  # rows m = 32..39 are real output positions (C1 = 2 slabs)
    assert_bits_equal(got, want, "rows m >= M of a window at m_start > 0 were zeroed")


def test_load3d_geometry_validation():
    with pytest.raises(ValueError, match="kh"):
        Load3DGeometry(kh=0, kw=1)
    with pytest.raises(ValueError, match="stride"):
        Load3DGeometry(kh=1, kw=1, stride=(64, 1))
    with pytest.raises(ValueError, match="dilation"):
        Load3DGeometry(kh=1, kw=1, dilation=(0, 1))


# =================================================================================================
# Mmad (M)
# =================================================================================================
MM_M, MM_K, MM_N = 32, 48, 32
K0 = {"fp16": 16, "bf16": 16, "fp32": 8}
NP = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32}


def _mmad_setup(rng, dtype, policy=None):
    hw = presets.tiny()
    plan = Plan(hw)
    a = plan.alloc("L0A", "a", (MM_M, MM_K), dtype, fmt="ZZ")
    b = plan.alloc("L0B", "b", (MM_K, MM_N), dtype, fmt="ZN")
    c = plan.alloc("L0C", "c", (MM_M, MM_N), "fp32", fmt="NZ")
    return hw, a, b, c, make_core(hw, plan, policy=policy)


def gamma(n, u=2.0**-24):
    return n * u / (1 - n * u)


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_mmad(rng, dtype):
    hw, a, b, c, core0 = _mmad_setup(rng, dtype)
    A_ = rng.standard_normal((MM_M, MM_K)).astype(NP[dtype])
    B_ = rng.standard_normal((MM_K, MM_N)).astype(NP[dtype])
    C_ = rng.standard_normal((MM_M, MM_N)).astype(np.float32) * 8

    def prog(core, m, n, k, init):
        return core.mmad(dst=c[0], a=a[0], b=b[0], m=m, n=n, k=k, init=init)

    jprog = jax.jit(prog)
    for m, n, k, init in [
        (32, 32, 48, True),
        (20, 7, 33, False),
        (1, 32, 1, True),
        (32, 17, 48, False),
        (16, 16, 0, False),
    ]:
        Am, Bm = A_.copy(), B_.copy()
        Am[m:, :] = np.nan  # entries outside m x k and k x n must be ignored
        Am[:, k:] = np.nan
        Bm[k:, :] = np.nan
        Bm[:, n:] = np.nan
        C_in = C_.copy()
        C_in[m:, :] = np.nan  # ... and entries of C outside m x n left as they were
        core = setbuf(core0, a=Am, b=Bm, c=C_in)
        out = prog(core, m, n, k, init)
        assert_same_core(out, jprog(core, m, n, k, jnp.asarray(init)))
        got = np.asarray(out.read(c))
        a64, b64 = A_[:m, :k].astype(np.float64), B_[:k, :n].astype(np.float64)
        base = np.zeros((m, n)) if init else C_[:m, :n].astype(np.float64)
        ref = base + a64 @ b64
        # fp32 accumulation of k products (+ C): |err| <= gamma_{k+1} (|C| + |A||B|)
        bound = gamma(k + 1) * (np.abs(base) + np.abs(a64) @ np.abs(b64)) + 1e-30
        err = np.abs(got[:m, :n] - ref)
        assert np.all(err <= bound), f"max err/bound {np.max(err / bound)} at m,n,k={m, n, k}"
        assert_bits_equal(got[m:, :], C_in[m:, :], "rows of C past m")
        assert_bits_equal(got[:, n:], C_in[:, n:], "cols of C past n")
        k0 = K0[dtype]
        blocks = ceil(m, 16) * ceil(n, 16) * ceil(k, k0)
        assert busy(out, "M") == (A.mmad_startup + blocks if blocks else 0)
        assert counter(out, "flops") == 2 * m * n * k
        assert counter(out, "flops_issued") == 2 * ceil(m, 16) * 16 * ceil(n, 16) * 16 * ceil(k, k0) * k0


def _fp16_emulation(C_start, As, Bs, accumulate, m, n, k):
    """numpy emulation of the fp16 what-ifs on integer data (every fp32 sum below is exact)."""
    c = C_start.astype(np.float64)
    out = []
    for A_, B_ in zip(As, Bs):
        a64 = np.where(np.arange(MM_K)[None, :] < k, A_.astype(np.float64), 0)[:m]
        b64 = np.where(np.arange(MM_K)[:, None] < k, B_.astype(np.float64), 0)[:, :n]
        if accumulate == "fp16_tile":
            c = (c + a64 @ b64).astype(np.float16).astype(np.float64)
        else:  # fp16_step: rounded after every K0-deep fractal step
            for s in range(MM_K // 16):
                sl = slice(16 * s, 16 * s + 16)
                c = (c + a64[:, sl] @ b64[sl, :]).astype(np.float16).astype(np.float64)
        out.append(c)
    return out


@pytest.mark.parametrize("accumulate", ["fp16_tile", "fp16_step"])
def test_mmad_fp16_accumulate_whatifs(rng, accumulate):
    hw, a, b, c, core0 = _mmad_setup(rng, "fp16", Policy(accumulate=accumulate))
    m, n, k = 29, 32, 41
    # Integers in [-32, 32]: products and every partial sum are exact in fp32 (< 2^24), so the
    # only rounding is the fp16 one under test; sums reach a few thousand, past 2048 where the
    # fp16 spacing becomes 2, 4, 8 -- and stay far below 65504.
    As = [rng.integers(-32, 33, (MM_M, MM_K)).astype(np.float16) for _ in range(3)]
    Bs = [rng.integers(-32, 33, (MM_K, MM_N)).astype(np.float16) for _ in range(3)]

    def prog(core, A1, B1, A2, B2, A3, B3):
        for i, (A_, B_) in enumerate(((A1, B1), (A2, B2), (A3, B3))):
            core = setbuf(core, a=A_, b=B_)
            core = core.mmad(dst=c[0], a=a[0], b=b[0], m=m, n=n, k=k, init=i == 0)
        return core

    args = [x for pair in zip(As, Bs) for x in pair]
    out = run_both(prog, core0, *args)
    want = _fp16_emulation(np.zeros((m, n)), As, Bs, accumulate, m, n, k)[-1]
    got = np.asarray(out.read(c))
    assert_bits_equal(got[:m, :n], want.astype(np.float32))
    exact = sum(A_[:m, :k].astype(np.float64) @ B_[:k, :n].astype(np.float64) for A_, B_ in zip(As, Bs))
    assert np.any(got[:m, :n] != exact), "the fp16 what-if should lose bits against fp32"
    assert np.all(np.isnan(got[m:]))  # rows past m keep their poison


# =================================================================================================
# Fixpipe (910B) and L0C -> UB (910 / 310P)
# =================================================================================================
OUT, OUTP = (40, 40), (48, 64)  # padded so every 32 x 32 window below stays inside it
ACTS = {
    "none": {},
    "relu": {"relu": True},
    "leaky": {"activation": "leaky_relu", "alpha": 0.1},
    "relu6": {"relu": True, "clip": 6.0},
}


def _l0c_values(rng, shape):
    """fp32 values that exercise fp16 rounding: random, exact fp16 ties, and near-overflow."""
    x = (rng.standard_normal(shape) * 100).astype(np.float32)
    h = rng.standard_normal(shape).astype(np.float16)
    up = np.nextafter(h, np.float16(np.inf))
    ties = ((h.astype(np.float64) + up.astype(np.float64)) / 2).astype(np.float32)  # exact in fp32
    pick = rng.random(shape)
    x = np.where(pick < 0.3, ties, x)
    x.flat[:6] = [65504.0, 65519.0, 65520.0, -70000.0, 3e-6, -(2.0**-25)]
    return x.astype(np.float32)


def _fixpipe_setup(rng, hw=None, policy=None):
    hw = presets.tiny() if hw is None else hw
    plan = Plan(hw)
    c = plan.alloc("L0C", "c", (32, 32), "fp32", fmt="NZ")
    l1 = plan.alloc("L1", "o", (32, 32), "fp16")
    y0 = f16(rng.standard_normal(OUT) - 50)  # old output contents, all nonzero
    specs = [gm_spec(f"y_{k}", OUT, padded=OUTP, output=True) for k in ACTS]
    core = make_core(hw, plan, specs, {f"y_{k}": y0 for k in ACTS}, policy=policy)
    cv = _l0c_values(rng, (32, 32))
    return hw, c, l1, y0, setbuf(core, c=cv), cv


def _act(x, act, alpha=0.0, clip=None):
    x = x.astype(np.float32)
    if act == "relu":
        x = np.maximum(x, np.float32(0))
    elif act == "leaky_relu":
        x = np.where(x >= 0, x, x * np.float32(alpha)).astype(np.float32)
    if clip is not None:
        x = np.minimum(x, np.float32(clip))
    return x


def test_fixpipe_to_gm(rng):
    hw, c, _, y0, core0, cv = _fixpipe_setup(rng)

    def prog(core, r, col, m, n):
        for k, kw in ACTS.items():
            core = core.fixpipe(dst=core.gm_window(f"y_{k}", (r, col), (32, 32)), src=c[0], m=m, n=n, **kw)
        return core

    jprog = jax.jit(prog)
    with np.errstate(over="ignore"):  # numpy: round to nearest even, IEEE overflow
        conv = {
            "none": cv.astype(np.float16),
            "relu": _act(cv, "relu").astype(np.float16),
            "leaky": _act(cv, "leaky_relu", 0.1).astype(np.float16),
            "relu6": _act(cv, "relu", clip=6.0).astype(np.float16),
        }
    for r, col, m, n in [(0, 0, 32, 32), (8, 3, 20, 27), (16, 16, 32, 32), (0, 24, 5, 32)]:
        out = prog(core0, r, col, m, n)
        assert_same_core(out, jprog(core0, r, col, m, n))
        vm, vn = min(m, OUT[0] - r), min(n, OUT[1] - col)
        written = np.zeros(OUTP, bool)
        written[r : r + vm, col : col + vn] = True
        for k in ACTS:
            want = y0.copy()
            want[r : r + vm, col : col + vn] = conv[k][:vm, :vn]
            assert_bits_equal(
                np.asarray(out.gm[f"y_{k}"])[: OUT[0], : OUT[1]], want, f"{k}: window {(r, col, m, n)}"
            )
            np.testing.assert_array_equal(np.asarray(out.gm_written[f"y_{k}"]) != -1, written)
        nbytes = vm * vn * 2
        assert counter(out, "L0C->GM") == len(ACTS) * nbytes
        elems, bursts = gm_runs(OUT, (r, col), (vm, vn))
        l0c_bytes = ceil(m, 16) * 16 * ceil(n, 16) * 16 * 4
        one = A.fixpipe_startup + max(
            math.ceil(l0c_bytes / A.fixpipe_bytes_per_cycle),
            math.ceil(nbytes / hw.l2_write_rate) + (bursts - 1) * A.gm_burst_overhead,  # into L2
        )
        assert busy(out, "FIX") == len(ACTS) * one


def test_fixpipe_saturate(rng):
    hw, c, _, y0, core, cv = _fixpipe_setup(rng, policy=Policy(overflow="saturate"))
    cv = cv.copy()
    cv[0, :8] = [np.inf, -np.inf, np.nan, 1e6, -1e6, 65519.0, 65520.0, 65536.0]
    core = setbuf(core, c=cv)
    out = core.fixpipe(dst=core.gm_window("y_none", (0, 0), (32, 32)), src=c[0], m=32, n=32)
    got = np.asarray(out.gm["y_none"])[:32, :32]
    want = np.clip(np.nan_to_num(cv, nan=0.0), -65504, 65504).astype(np.float16)
    assert_bits_equal(got, want)
    np.testing.assert_array_equal(
        got[0, :8].astype(np.float32), [65504, -65504, 0, 65504, -65504, 65504, 65504, 65504]
    )


def test_fixpipe_clip_without_activation(rng):
    """clip= with no activation must clip (or be refused), not be silently dropped."""
    hw, c, _, y0, core, cv = _fixpipe_setup(rng)
    try:
        out = core.fixpipe(dst=core.gm_window("y_none", (0, 0), (32, 32)), src=c[0], m=32, n=32, clip=1.0)
    except ValueError:
        return
    got = np.asarray(out.gm["y_none"])[:32, :32].astype(np.float32)
    assert np.all(got <= 1.0), f"clip=1.0 ignored: max output {got.max()}"


def test_fixpipe_to_l1_partial(rng):
    hw, c, l1, _, core, cv = _fixpipe_setup(rng)
    out = core.fixpipe(dst=l1[0], src=c[0], m=20, n=9, relu=True)
    got = np.asarray(out.read(l1))
    with np.errstate(over="ignore"):
        want = np.maximum(cv, 0).astype(np.float16)
    assert_bits_equal(got[:20, :9], want[:20, :9])
    assert np.all(np.isnan(got[20:])) and np.all(np.isnan(got[:, 9:]))  # untouched poison
    assert counter(out, "L0C->L1") == 20 * 9 * 2
    assert busy(out, "FIX") == A.fixpipe_startup + math.ceil(32 * 16 * 4 / A.fixpipe_bytes_per_cycle)


@pytest.mark.parametrize(
    "hw", [presets.tiny(coupled=True), presets.ascend910(), presets.ascend310p()], ids=lambda h: h.name
)
def test_fixpipe_absent_on_coupled_chips(rng, hw):
    _, c, _, _, core, _ = _fixpipe_setup(rng, hw=hw)
    with pytest.raises(ValueError, match="l0c_to_ub"):
        core.fixpipe(dst=core.gm_window("y_none", (0, 0), (32, 32)), src=c[0], m=32, n=32)


def test_l0c_to_ub_coupled(rng):
    hw = presets.tiny(coupled=True)  # saturating conversion, as 910/310P
    plan = Plan(hw)
    c = plan.alloc("L0C", "c", (32, 32), "fp32", fmt="NZ")
    u = plan.alloc("UB", "u", (32, 32), "fp16")
    cv = _l0c_values(rng, (32, 32))
    cv[1, :3] = [np.nan, np.inf, -np.inf]
    core0 = setbuf(make_core(hw, plan), c=cv)

    def prog(core, m, n):
        return core.l0c_to_ub(dst=u[0], src=c[0], m=m, n=n)

    for m, n in [(32, 32), (20, 9)]:
        out = run_both(prog, core0, m, n)
        want = np.clip(np.nan_to_num(cv, nan=0.0, posinf=np.inf, neginf=-np.inf), -65504, 65504)
        assert_bits_equal(np.asarray(out.read(u))[:m, :n], want.astype(np.float16)[:m, :n])
        assert counter(out, "L0C->UB") == m * n * 2
        l0c_bytes = ceil(m, 16) * 16 * ceil(n, 16) * 16 * 4
        assert busy(out, "V") == A.vector_startup + ceil(l0c_bytes, int(hw.l0c_to_ub_bytes_per_cycle))


def test_l0c_to_ub_absent_on_910b(rng):
    for hw in (presets.ascend910b(), presets.tiny()):
        plan = Plan(hw)
        c = plan.alloc("L0C", "c", (16, 16), "fp32", fmt="NZ")
        u = plan.alloc("UB", "u", (16, 16), "fp16")
        with pytest.raises(ValueError, match="fixpipe"):
            make_core(hw, plan).l0c_to_ub(dst=u[0], src=c[0], m=16, n=16)


# =================================================================================================
# Vector unit (V)
# =================================================================================================
VS = (4, 80)  # 320 elements: 640 B of fp16 = 2.5 repeats


def cast_ref(x, mode):
    """float32 -> fp16 rounding by its definition, from the two fp16 neighbours of x.

    Past the largest finite value the grid continues (for deciding) with 2^16, which rounds to inf.
    """
    with np.errstate(over="ignore"):
        r = x.astype(np.float16)  # numpy's conversion: round to nearest even, IEEE overflow
        lo = np.where(r.astype(np.float32) <= x, r, np.nextafter(r, np.float16(-np.inf)))
        hi = np.where(r.astype(np.float32) >= x, r, np.nextafter(r, np.float16(np.inf)))
    if mode == "nearest_even":
        return r
    if mode == "toward_zero":
        return np.where(x >= 0, lo, hi)
    if mode == "up":
        return hi
    if mode == "down":
        return lo
    if mode == "away":

        def grid(v):
            v = v.astype(np.float64)
            return np.where(np.isinf(v), np.copysign(65536.0, v), v)

        x64 = x.astype(np.float64)
        dlo, dhi = x64 - grid(lo), grid(hi) - x64
        return np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(x >= 0, hi, lo)))
    raise ValueError(mode)


def test_vector_ops(rng):
    hw = presets.tiny()
    plan = Plan(hw)
    x = plan.alloc("UB", "x", VS, "fp16")
    y = plan.alloc("UB", "y", VS, "fp16")
    ops = [
        "VAdd",
        "VSub",
        "VMul",
        "VMax",
        "VMin",
        "VAdds",
        "VMuls",
        "VMaxs",
        "VRelu",
        "VLeakyRelu",
        "VExp",
        "VCopy",
        "VAbs",
    ]
    dst = {op: plan.alloc("UB", op, VS, "fp16") for op in ops}
    xv = f16(rng.uniform(-8, 8, VS))
    yv = f16(rng.standard_normal(VS) * 3)
    yv.flat[:4] = xv.flat[:4]  # equal operands for VMax / VMin / VSub
    core0 = setbuf(make_core(hw, plan), x=xv, y=yv)
    s = 1.7

    def prog(core):
        for op in ops:
            if op in ("VAdd", "VSub", "VMul", "VMax", "VMin"):
                core = core.vector(op, dst[op][0], x[0], y[0])
            elif op in ("VAdds", "VMuls", "VMaxs"):
                core = core.vector(op, dst[op][0], x[0], scalar=s)
            else:
                core = core.vector(op, dst[op][0], x[0], alpha=0.2)
        return core

    out = run_both(prog, core0)
    x32, y32, s32 = xv.astype(np.float32), yv.astype(np.float32), np.float32(s)
    ref32 = {
        "VAdd": x32 + y32,
        "VSub": x32 - y32,
        "VMul": x32 * y32,
        "VMax": np.maximum(x32, y32),
        "VMin": np.minimum(x32, y32),
        "VAdds": x32 + s32,
        "VMuls": x32 * s32,
        "VMaxs": np.maximum(x32, s32),
        "VRelu": np.maximum(x32, np.float32(0)),
        "VLeakyRelu": np.where(x32 >= 0, x32, x32 * np.float32(0.2)),
        "VCopy": x32,
        "VAbs": np.abs(x32),
    }
    for op, r in ref32.items():
        assert_bits_equal(out.read(dst[op]), r.astype(np.float32).astype(np.float16), op)
    # exp: fp32 libm results may differ by an fp32 ulp, which can move an fp16 rounding by one ulp
    got = np.asarray(out.read(dst["VExp"])).astype(np.float64)
    ref = np.exp(xv.astype(np.float64))
    ulp = np.spacing(ref.astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(got - ref) <= ulp)
    # cost: one 256-B repeat per cycle + start-up, per instruction; Exp 4 cycles a half repeat (the
    # vendor's 32 elements a cycle)
    reps = ceil(math.prod(VS) * 2, 256)
    assert busy(out, "V") == len(ops) * A.vector_startup + (len(ops) - 1) * reps + 4 * reps
    assert int(out.n_instr[PIPE_INDEX["V"]]) == len(ops)
    assert counter(out, "vector_bytes") == len(ops) * math.prod(VS) * 2


@pytest.mark.parametrize("mode", ["nearest_even", "toward_zero", "up", "down", "away"])
def test_vector_cast_modes(rng, mode):
    hw = presets.tiny()
    plan = Plan(hw)
    src = plan.alloc("UB", "src", VS, "fp32")
    d16 = plan.alloc("UB", "d16", VS, "fp16")
    back = plan.alloc("UB", "back", VS, "fp32")
    xv = (rng.standard_normal(VS) * rng.choice([1e-6, 1e-3, 1.0, 300.0, 3e4], VS)).astype(np.float32)
    h = f16(rng.standard_normal(VS))
    ties = (h.astype(np.float64) + np.nextafter(h, np.float16(np.inf)).astype(np.float64)) / 2
    xv = np.where(rng.random(VS) < 0.3, ties.astype(np.float32), xv)  # exact fp16 ties
    xv.flat[:4] = [65504.0, 65519.0, 70000.0, -70000.0]
    core = setbuf(make_core(hw, plan), src=xv)
    out = core.vector("VCast", d16[0], src[0], mode=mode)
    out = out.vector("VCast", back[0], d16[0], mode=mode)  # fp16 -> fp32 is exact
    assert_bits_equal(out.read(d16), cast_ref(xv, mode), mode)
    assert_bits_equal(out.read(back), np.asarray(out.read(d16)).astype(np.float32))
    # the widest operand (fp32) sets the repeats
    assert busy(out, "V") == 2 * (A.vector_startup + ceil(math.prod(VS) * 4, 256))


def test_vector_reduce_sum_and_partial(rng):
    hw = presets.tiny()
    plan = Plan(hw)
    x = plan.alloc("UB", "x", VS, "fp16")
    acc = plan.alloc("UB", "acc", (8,), "fp32")
    part = plan.alloc("UB", "part", VS, "fp16")
    xv = f16(rng.standard_normal(VS))
    acc0 = rng.standard_normal(8).astype(np.float32)
    core0 = setbuf(make_core(hw, plan), x=xv, acc=acc0)

    def prog(core, count):
        core = core.vector("VReduceSum", acc[0], x[0])
        return core.vector("VMuls", part[0], x[0], scalar=2.0, count_elems=count)

    out = run_both(prog, core0, 100)
    got = np.asarray(out.read(acc))
    ref = xv.astype(np.float64).sum()
    assert abs(got[0] - ref) <= gamma(math.prod(VS)) * np.abs(xv.astype(np.float64)).sum()
    assert_bits_equal(got[1:], acc0[1:], "VReduceSum writes element 0 only")
    p = np.asarray(out.read(part)).reshape(-1)
    assert_bits_equal(p[:100], (xv.reshape(-1)[:100].astype(np.float32) * 2).astype(np.float16))
    assert np.all(np.isnan(p[100:]))  # past count_elems: untouched
    reduce_cost = A.vector_startup + ceil(math.prod(VS) * 4, 256)  # fp32 dst sets the width
    part_cost = A.vector_startup + ceil(100 * 2, 256)
    assert busy(out, "V") == reduce_cost + part_cost


def test_vector_reduce_sum_partial_reads_only_counted_elements(rng):
    """VReduceSum with count_elems=n (a tail tile) must sum the first n elements only, as the
    elementwise ops process only the first n; here the uncounted tail is unwritten (NaN poison)."""
    hw = presets.tiny()
    plan = Plan(hw)
    x = plan.alloc("UB", "x", VS, "fp32")
    acc = plan.alloc("UB", "acc", (8,), "fp32")
    core = make_core(hw, plan)
    head = rng.standard_normal(100).astype(np.float32)
    flat = np.asarray(core.read(x)).reshape(-1).copy()  # poison everywhere ...
    flat[:100] = head  # ... but the first 100 elements
    core = setbuf(core, x=flat.reshape(VS))
    out = core.vector("VReduceSum", acc[0], x[0], count_elems=100)
    got = float(np.asarray(out.read(acc))[0])
    assert abs(got - head.astype(np.float64).sum()) <= gamma(100) * np.abs(head).sum(), got


def test_vector_errors():
    hw = presets.tiny()
    plan = Plan(hw)
    x = plan.alloc("UB", "x", VS, "fp16")
    z = plan.alloc("UB", "z", (4, 16), "fp16")
    l1 = plan.alloc("L1", "l1", VS, "fp16")
    core = make_core(hw, plan)
    with pytest.raises(ValueError, match="unknown vector op"):
        core.vector("VFoo", x[0], x[0], x[0])
    with pytest.raises(ValueError, match="2 source"):
        core.vector("VAdd", x[0], x[0])
    with pytest.raises(ValueError, match="scalar"):
        core.vector("VAdds", x[0], x[0])
    with pytest.raises(ValueError, match="UB"):
        core.vector("VRelu", x[0], l1[0])
    with pytest.raises(ValueError, match="destination"):
        core.vector("VRelu", x[0], z[0])


# =================================================================================================
# Flags, barriers, queues, trace
# =================================================================================================
def _empty_core(hw=None, trace_capacity=0):
    hw = presets.tiny() if hw is None else hw
    return make_core(hw, Plan(hw), trace_capacity=trace_capacity)


def test_set_wait_flag_moves_time():
    def prog(core, e):
        core = charge(core, "MTE2", 100, "DataCopy")
        core = charge(core, "MTE1", 10, "LoadData2D")
        core = core.set_flag("MTE2_MTE1", e)  # fires at MTE2's free time: 100
        core = charge(core, "MTE2", 50, "DataCopy")  # later MTE2 work does not move the flag
        core = core.wait_flag("MTE2_MTE1", e)  # MTE1 held until 100
        core = charge(core, "MTE1", 5, "LoadData2D")
        # a flag that fired earlier than the waiter's own clock does not move it back
        core = charge(core, "M", 500, "Mmad")
        core = core.set_flag("MTE1_M", 1)  # MTE1 at 105
        core = core.wait_flag("MTE1_M", 1)
        return core

    core = run_both(prog, _empty_core(), 2)
    assert free_at(core, "MTE2") == 150
    assert free_at(core, "MTE1") == 105 and busy(core, "MTE1") == 15
    assert free_at(core, "M") == 500
    assert not bool(jnp.any(core.flag_set))


def test_flags_are_per_id_and_when():
    core = _empty_core()
    core = charge(core, "V", 30, "VAdd")
    core = core.set_flag("V_MTE3", 0)
    core = charge(core, "V", 30, "VAdd")
    core = core.set_flag("V_MTE3", 1)
    assert bool(core.flag_set[PIPE_INDEX["V"], PIPE_INDEX["MTE3"], 0])
    c1 = core.wait_flag("V_MTE3", 1, when=False)  # predicated off: nothing changes
    assert free_at(c1, "MTE3") == 0 and bool(c1.flag_set[PIPE_INDEX["V"], PIPE_INDEX["MTE3"], 1])
    c0 = core.wait_flag("V_MTE3", 0)
    assert free_at(c0, "MTE3") == 30
    c1 = c0.wait_flag("V_MTE3", 1)
    assert free_at(c1, "MTE3") == 60 and not bool(jnp.any(c1.flag_set))


def test_flag_errors():
    core = _empty_core(presets.ascend910())  # event ids 0-3
    with pytest.raises(ValueError, match="0..3"):
        core.set_flag("MTE2_MTE1", 4)
    with pytest.raises(ValueError, match="SRC_DST"):
        core.set_flag("MTE2_MTE2", 0)
    with pytest.raises(ValueError, match="SRC_DST"):
        core.set_flag("MTE9_M", 0)
    with pytest.raises(ValueError, match="pipe"):
        core.pipe_barrier("XYZ")


def test_pipe_barrier_all():
    def prog(core):
        core = charge(core, "MTE2", 70, "DataCopy")
        core = charge(core, "M", 20, "Mmad")
        core = core.pipe_barrier("M")  # one pipe is already in order: no change
        core = core.pipe_barrier("ALL")
        return charge(core, "V", 9, "VAdd")

    core = run_both(prog, _empty_core())
    fa = wide.to_numpy(core.pipe_free)
    assert fa[PIPE_INDEX["V"]] == 79
    assert all(fa[i] == 70 for p, i in PIPE_INDEX.items() if p != "V")
    assert busy(core, "M") == 20 and busy(core, "V") == 9  # waiting is not work


def test_queue_double_buffered(rng):
    hw = presets.tiny()
    plan = Plan(hw)
    xin = plan.alloc("UB", "xin", (16, 32), "fp16", stages=2)
    yo = plan.alloc("UB", "yo", (16, 32), "fp16", stages=2)
    T = 5
    x = f16(rng.standard_normal((T * 16, 32)))
    core0 = make_core(
        hw, plan, [gm_spec("x", x.shape), gm_spec("y", x.shape, output=True)], {"x": x}, trace_capacity=64
    )
    qin = Queue("MTE2", "V", xin, event_base=0)
    qout = Queue("V", "MTE3", yo, event_base=2)

    def prog(core):
        core = qout.init(qin.init(core))

        def body(i, core):
            core = qin.alloc_tensor(core, i)
            core = core.data_copy(dst=qin.slot(i), src=core.gm_window("x", (i * 16, 0), (16, 32)))
            core = qin.enque(core, i)
            core = qin.deque(core, i)
            core = qout.alloc_tensor(core, i)
            core = core.vector("VMuls", qout.slot(i), qin.slot(i), scalar=3.0)
            core = qin.free(core, i)
            core = qout.enque(core, i)
            core = qout.deque(core, i)
            core = core.data_copy(dst=core.gm_window("y", (i * 16, 0), (16, 32)), src=qout.slot(i))
            return qout.free(core, i)

        core = jax.lax.fori_loop(0, T, body, core)
        return qout.drain(qin.drain(core))

    out = run_both(prog, core0)
    assert not bool(jnp.any(out.flag_set)), "queue left a flag set"
    assert_bits_equal(np.asarray(out.gm["y"]), (x.astype(np.float32) * 3).astype(np.float16))
    # order in time: V of tile i after its copy-in; copy-in of tile i + 2 after V of tile i freed the slot
    ev = _events(out)
    mte2 = [e for e in ev if e[0] == "MTE2"]
    vec = [e for e in ev if e[0] == "V"]
    mte3 = [e for e in ev if e[0] == "MTE3"]
    assert len(mte2) == len(vec) == len(mte3) == T
    for i in range(T):
        assert vec[i][2] >= mte2[i][3] and mte3[i][2] >= vec[i][3]
        if i + 2 < T:
            assert mte2[i + 2][2] >= vec[i][3]
            assert vec[i + 2][2] >= mte3[i][3]
    # double buffering: copy-in of tile 1 does not wait for V of tile 0
    assert mte2[1][2] == mte2[0][3]


def _events(core):
    """(pipe, op, start, end) per recorded trace event, in issue order."""
    t = core.trace
    n = min(int(t["n"]), t["pipe"].shape[0])
    st, en = wide.to_numpy(t["start"]), wide.to_numpy(t["end"])
    return [(PIPES[int(t["pipe"][i])], OPS[int(t["op"][i])], int(st[i]), int(en[i])) for i in range(n)]


def test_trace_records_in_order():
    def prog(core, go):
        core = charge(core, "MTE2", 40, "DataCopy")
        core = charge(core, "MTE1", 8, "LoadData2D")
        core = charge(core, "MTE2", 40, "DataCopy")
        core = charge(core, "M", 7, "Mmad", when=go)  # predicated off: not recorded
        core = core.set_flag("MTE2_M", 0).wait_flag("MTE2_M", 0)
        core = charge(core, "M", 12, "Mmad")
        core = core.scalar(3)
        return charge(core, "FIX", 5, "Fixpipe")

    core = run_both(prog, _empty_core(trace_capacity=16), False)
    assert _events(core) == [
        ("MTE2", "DataCopy", 0, 40),
        ("MTE1", "LoadData2D", 0, 8),
        ("MTE2", "DataCopy", 40, 80),
        ("M", "Mmad", 80, 92),
        ("S", "Scalar", 0, 3),
        ("FIX", "Fixpipe", 0, 5),
    ]
    # per pipe: in issue order, back to back or later
    ev = _events(core)
    for p in PIPES:
        mine = [e for e in ev if e[0] == p]
        assert all(b[2] >= a[3] for a, b in zip(mine, mine[1:]))


def test_trace_capacity_overflow():
    core = _empty_core(trace_capacity=3)
    for i in range(5):
        core = charge(core, "V", i + 1, "VAdd")
    assert int(core.trace["n"]) == 5  # counts every event ...
    assert [e[3] - e[2] for e in _events(core)] == [1, 2, 3]  # ... keeps the first `capacity`
    assert busy(core, "V") == 15


def test_no_trace_by_default():
    assert _empty_core().trace == {}

"""The timing Board (``npu_jax/core/board.py``) against the emulator: an asc kernel priced on numpy clocks
has the compiled run's every clock, busy cycle, instruction count and counter, on the samples' launches
(every launch of their ``main``), on Cube and vector kernels over tilings, chips, L2 policies, waves of
blocks and paths through a kernel; a kernel that needs data falls back to the emulator; the tile search
prices on the Board and compiles one program, its pick's."""

from __future__ import annotations

import importlib
import os
import sys

import jax
import numpy as np
import pytest

import npu_jax
from npu_jax import asc
from npu_jax.asc import launcher, onboard
from npu_jax.core.board import BoardCore, BoardUnsupported

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "examples", "asc"), os.path.join(ROOT, "benchmarks")]
import asc_ladder  # noqa: E402
from test_asc_blocks import N, scaled_copy  # noqa: E402

B910 = npu_jax.presets.ascend910b()
P310 = npu_jax.presets.ascend310p()
FIELDS = ("pipe_free", "busy", "n_instr", "counters", "unwritten")


@pytest.fixture
def held():
    """Every compiled asc launch inside the test also runs on the Board, which must agree
    (``onboard.BOARD_CHECK``); yields how many launches were held so far."""
    was, before = onboard.BOARD_CHECK
    onboard.BOARD_CHECK[0] = True
    yield lambda: onboard.BOARD_CHECK[1] - before
    onboard.BOARD_CHECK[0] = was


def same_timing(kern, blocks, *args, hw=B910, **kw):
    """The Board's report of a timing-only launch and the emulator's: every array equal."""
    _, emu = asc.launch(kern, blocks, *args, hw=hw, checks="none", timing_only=True, board=False, **kw)
    _, brd = asc.launch(kern, blocks, *args, hw=hw, checks="none", timing_only=True, board=True, **kw)
    assert not brd.trace and brd.san_log is None
    for f in FIELDS:
        np.testing.assert_array_equal(np.asarray(getattr(brd, f)), np.asarray(getattr(emu, f)), err_msg=f)
    assert brd.cycles == emu.cycles and brd.bytes == emu.bytes and brd.bottleneck == emu.bottleneck
    return brd


@pytest.mark.parametrize("example", ["add_custom", "matmul_basic_api"])
def test_every_launch_of_a_sample_is_the_boards(held, example, capsys):
    importlib.import_module(example).main()
    assert held() > 0


@pytest.mark.slow  # the larger samples: every launch of their main
@pytest.mark.parametrize(
    "example",
    [
        "leaky_relu_custom",
        "add_tpipe_tque",
        "gemm",
        "conv_img2col",
        "softmax",
        "layer_norm",
    ],
)
def test_every_launch_of_the_larger_samples_is_the_boards(held, example, capsys):
    importlib.import_module(example).main()
    assert held() > 0


# the high-level Matmul: C = A @ B + bias, each block its rows of C (benchmarks/asc_ladder.py's)
matmul_bias = asc_ladder._kernels()["matmul"]


def _shapes(m, n, k):
    f16, f32 = np.float16, np.float32
    return [jax.ShapeDtypeStruct(s, d) for s, d in (((m, k), f16), ((k, n), f16), ((n,), f32), ((m, n), f32))]


@pytest.mark.parametrize(
    "base, hw",
    [
        ((16, 16, 32), B910),  # many small blocks: every L2 re-read
        pytest.param((64, 128, 64), B910, marks=pytest.mark.slow),
        pytest.param((32, 64, 128), B910, marks=pytest.mark.slow),
        ((64, 128, 64), B910.replace(l2_policy="smallest_first")),  # whole tensors kept or streamed
        ((64, 128, 64), B910.replace(l2_bytes=64 << 10)),  # an L2 too small: streams
        # recency (the 910B1's policy), an L2 so small that re-reads age out of it
        ((16, 16, 32), npu_jax.presets.ascend910b1().replace(l2_bytes=128 << 10)),
    ],
)
def test_matmul_tilings_and_l2_policies(base, hw):
    m, n, k, blocks = 256, 256, 128, 4
    t = asc.TCubeTiling(m, n, k, m // blocks, n, k, *base)
    same_timing(matmul_bias, blocks, *_shapes(m, n, k), t, hw=hw)


def test_paths_through_a_kernel_and_blocks_in_waves():
    """Three paths (an exit, block 0's, the others'), and 50 blocks on the 910B's 40 vector cores."""
    x = jax.ShapeDtypeStruct((50 * N,), np.float32)
    rep = same_timing(scaled_copy, 50, x, x, 45)
    assert rep.n_cores == 50


def test_a_vector_kernel_on_the_310p_and_its_rows_apart():
    """The row softmax (reductions, broadcasts, strided repeats) on the 310P, fp16."""
    import softmax as sm

    x = jax.ShapeDtypeStruct((4 * 16, 128), np.float16)
    same_timing(sm.softmax_rows, 4, x, x, 64, 128, 8, hw=P310)


@asc.kernel
def reads_a_value(x, z):
    pipe = asc.TPipe()
    q = asc.TBuf(asc.TPosition.VECCALC)
    pipe.init_buffer(q, 256 * 4)
    t = q.get(asc.float32)
    xg, zg = asc.GlobalTensor(), asc.GlobalTensor()
    xg.set_global_buffer(x, 256)
    zg.set_global_buffer(z, 256)
    asc.data_copy(t, xg, 256)
    asc.set_flag(asc.HardEvent.MTE2_S, 0)
    asc.wait_flag(asc.HardEvent.MTE2_S, 0)
    t.set_value(1, t.get_value(0))
    asc.set_flag(asc.HardEvent.S_MTE3, 0)
    asc.wait_flag(asc.HardEvent.S_MTE3, 0)
    asc.data_copy(zg, t, 256)


def test_a_kernel_that_reads_data_is_priced_by_the_emulator(rng):
    x = rng.uniform(-1, 1, 256).astype(np.float32)
    _, emu = asc.launch(
        reads_a_value, 1, x, np.zeros_like(x), hw=B910, checks="none", timing_only=True, board=False
    )
    _, got = asc.launch(
        reads_a_value, 1, x, np.zeros_like(x), hw=B910, checks="none", timing_only=True, board=True
    )
    assert got.cycles == emu.cycles
    with pytest.raises(BoardUnsupported, match="GetValue reads data"):
        BoardCore(launcher.Context(B910, (), (), npu_jax.Policy())).get_value(None)


def test_the_tile_search_prices_on_the_board_and_compiles_only_its_pick(rng, monkeypatch):
    m, n, k, blocks = 128, 128, 64, 2
    args = (
        rng.integers(-4, 5, (m, k)).astype(np.float16),
        rng.integers(-4, 5, (k, n)).astype(np.float16),
        rng.integers(-50, 51, n).astype(np.float32),
        np.zeros((m, n), np.float32),
    )
    space = {
        "tiling": [
            asc.TCubeTiling(m, n, k, m // blocks, n, k, bm, bn, 32) for bm in (16, 64) for bn in (32, 128)
        ]
    }
    compiled = []
    real = launcher.core_run.launch
    monkeypatch.setattr(
        launcher.core_run, "launch", lambda *a, **kw: compiled.append(kw["name"]) or real(*a, **kw)
    )
    r = npu_jax.search.kernel_search(matmul_bias, blocks, *args, space=space, hw=B910)
    assert compiled == ["matmul"]  # the verifying run alone; every price from the Board
    assert int(r.report.cycles) == r.cycles == min(c for _, c in r.priced)
    np.testing.assert_array_equal(r.outputs[3], args[0].astype(np.float64) @ args[1] + args[2])

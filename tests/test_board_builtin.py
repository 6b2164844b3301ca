"""The built-in kernels on the timing Board (``core.run.launch(..., board=True)``): the conv's four
strategies (with their relayout kernel), grouped, fused and int8 layers, the GEMM, pooling and the
element-wise kernel take their reports from the Board, and those reports are the compiled runs' (every
clock, busy cycle, instruction count, counter, unwritten and overlapping element); an unchecked
timing-only launch compiles nothing."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import npu_jax
from fusion import conv2d_fused
from npu_jax.core import board, programs
from npu_jax.core.buffers import Plan
from npu_jax.core.policy import Policy
from npu_jax.core.run import clear_kept_reports, launch
from npu_jax.core.state import Context, GmSpec
from npu_jax.errors import SanitizerError

PRESETS = {
    "ascend910b": npu_jax.presets.ascend910b(),
    "ascend310p": npu_jax.presets.ascend310p(),
    "ascend910": npu_jax.presets.ascend910(),
}


@pytest.fixture
def held():
    """Every compiled launch of a kernel that runs on the Board also runs there, and must agree
    (``board.BOARD_CHECK``); yields how many launches were held so far. Kept reports are forgotten
    first, so every launch of the test runs."""
    clear_kept_reports()
    was, before = board.BOARD_CHECK
    board.BOARD_CHECK[0] = True
    yield lambda: board.BOARD_CHECK[1] - before
    board.BOARD_CHECK[0] = was
    clear_kept_reports()


def _fp16(rng, shape):
    return jnp.asarray(rng.standard_normal(shape), jnp.float16)


LAYERS = [  # (x shape, w shape, stride, padding, dilation, groups)
    ((2, 24, 13, 11), (40, 24, 3, 3), 2, 1, 1, 1),
    ((1, 32, 9, 9), (48, 8, 3, 3), 1, 2, 2, 4),
]
# each strategy on one chip and one layer in the default run (the two coupled chips and the separated
# one among them, both layers among them), every pairing with both layers in the slow set
_PAIRS = {
    "output_tiled": ("ascend910", 0),
    "input_tiled": ("ascend310p", 1),
    "relayout": ("ascend910b", 0),
    "img2col": ("ascend310p", 1),
}
CONV_CASES = [
    pytest.param(s, c, (_PAIRS[s][1],))
    if _PAIRS[s][0] == c
    else pytest.param(s, c, (0, 1), marks=pytest.mark.slow)
    for s in npu_jax.STRATEGIES
    for c in sorted(PRESETS)
]


@pytest.mark.parametrize("strategy, preset, layers", CONV_CASES)
def test_every_conv_strategy_is_the_boards(held, rng, preset, strategy, layers):
    """Odd sizes, stride, padding, dilation, batch and groups, on a separated and two coupled chips."""
    hw = PRESETS[preset]
    for i in layers:
        xs, ws, s, p, d, grp = LAYERS[i]
        y, rep = npu_jax.conv2d(
            _fp16(rng, xs), _fp16(rng, ws), stride=s, padding=p, dilation=d, groups=grp, hw=hw,
            strategy=strategy, checks="none",
        )  # fmt: skip
        assert int(rep.unwritten) == 0 and int(rep.overlapping_writes) == 0
    assert held() >= len(layers)


@pytest.mark.parametrize("preset", ["ascend910b", pytest.param("ascend310p", marks=pytest.mark.slow)])
def test_fused_epilogues_and_int8_are_the_boards(held, rng, preset):
    hw = PRESETS[preset]
    x, w = _fp16(rng, (1, 16, 10, 10)), _fp16(rng, (32, 16, 3, 3))
    bias = jnp.asarray(rng.standard_normal(32), jnp.float16)
    res = _fp16(rng, (1, 32, 10, 10))
    conv2d_fused(x, w, ("bias", "relu"), bias=bias, padding=1, hw=hw, checks="none")
    conv2d_fused(x, w, ("bias", "residual", "relu"), bias=bias, residual=res, padding=1, hw=hw, checks="none")
    xq = jnp.asarray(rng.integers(-128, 128, (1, 32, 8, 8)), jnp.int8)
    wq = jnp.asarray(rng.integers(-128, 128, (32, 32, 3, 3)), jnp.int8)
    npu_jax.conv2d(xq, wq, padding=1, hw=hw, policy=Policy(operand="int8", output="int32"), checks="none")
    assert held() >= 3


@pytest.mark.parametrize(
    "preset", ["ascend910b", *(pytest.param(c, marks=pytest.mark.slow) for c in ("ascend310p", "ascend910"))]
)
def test_gemm_pooling_and_the_eltwise_kernel_are_the_boards(held, rng, preset):
    """The default run takes one pooling of three (the slow set's chips take every one)."""
    hw = PRESETS[preset]
    npu_jax.matmul(_fp16(rng, (70, 90)), _fp16(rng, (90, 50)), hw=hw, policy=Policy(), checks="none")
    x = _fp16(rng, (2, 24, 15, 13))
    npu_jax.pool2d(x, "max", 3, stride=2, padding=1, hw=hw, checks="none")
    if preset != "ascend910b":
        npu_jax.pool2d(x, "avg", 2, stride=2, hw=hw, checks="none")
        npu_jax.global_avg_pool(x, hw=hw, checks="none")
    # the element-wise kernel: an unfused epilogue's vector kernel
    conv2d_fused(
        _fp16(rng, (1, 8, 6, 6)), _fp16(rng, (16, 8, 1, 1)), ("relu",), fused=False, hw=hw, checks="none"
    )
    assert held() >= 3


def test_an_unchecked_timing_only_launch_compiles_nothing(rng):
    """conv2d's report (relayout and conv kernels) comes from the Board: the program cache gains only
    what the checked run compiles; the cycles are the same either way."""
    clear_kept_reports()
    x, w = _fp16(rng, (1, 16, 12, 12)), _fp16(rng, (24, 16, 3, 3))
    before = programs.program_cache_info()["misses"]
    _, rep = npu_jax.conv2d(x, w, padding=1, strategy="img2col", checks="none")
    assert programs.program_cache_info()["misses"] == before
    _, checked = npu_jax.conv2d(x, w, padding=1, strategy="img2col", checks="all")
    assert programs.program_cache_info()["misses"] > before
    assert checked.cycles == rep.cycles and checked.bytes == rep.bytes
    np.testing.assert_array_equal(np.asarray(checked.busy), np.asarray(rep.busy))


@pytest.mark.parametrize("atomic", [None, "add"])
def test_two_cores_writing_one_window_race_on_the_board_as_in_the_emulator(atomic):
    """Timing-only with the writes marked (no bits: a second core's write is a race, an atomic one
    never): the Board's overlapping and unwritten counts are the compiled run's."""
    hw = npu_jax.presets.tiny()
    plan = Plan(hw)
    ub = plan.alloc("UB", "t", (8, 16), "fp16")

    def kernel(core, b):
        # both cores write rows 0-7, core 1 also rows 8-15 (16-23 stay unwritten)
        core = core.data_copy(dst=core.gm_window("y", (0, 0), (8, 16)), src=ub[0], atomic=atomic)
        return core.data_copy(dst=core.gm_window("y", (8, 0), (8, 16)), src=ub[0], when=b == 1)

    ctx = Context(
        hw=hw,
        allocs=tuple(plan.allocs),
        gm=(GmSpec("y", (24, 16), (24, 16), "fp16", output=True),),
        policy=Policy().timing(),
        n_cores=2,
        move_data=False,
        mark_writes=True,
        checks="none",
    )
    reps, raised = {}, {}
    for on_board in (False, True):
        clear_kept_reports()
        key = ("test_board_builtin.race", atomic, on_board)
        try:
            _, reps[on_board] = launch(kernel, ctx, {}, name="race", key=key, board=on_board)
        except SanitizerError as e:  # the race, raised as a concrete run raises it
            raised[on_board] = str(e)
    if atomic is None:
        assert raised[True] == raised[False] and "128 output element" in raised[True], raised
    else:
        assert not raised
        assert int(reps[True].overlapping_writes) == int(reps[False].overlapping_writes) == 0
        assert int(reps[True].unwritten) == int(reps[False].unwritten) == 128
        assert reps[True].cycles == reps[False].cycles

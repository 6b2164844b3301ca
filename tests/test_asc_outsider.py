"""A kernel written as a stranger would port one (the vendor's row-max-subtract-exp step of a softmax,
basic calls only, its own sizes), checked against numpy, and three bugs injected into it: a missing
hand-over (the wait of MTE2 -> V), a copy past its buffer, a read of what a rounded-down copy never wrote.
Each is found, at its own line."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import npu_jax
from npu_jax import asc

HW = npu_jax.presets.ascend910b()
WARN = npu_jax.Checks.parse("all", action="warn")
ROWS, COLS = 8, 40  # 40 floats a row: 5 blocks, a partial repeat (mask 40)


@asc.kernel
def exp_minus_rowmax(x, y, bug: str):
    n = ROWS * COLS
    xg, yg = asc.GlobalTensor(), asc.GlobalTensor()
    xg.set_global_buffer(x + asc.get_block_idx() * n, n)
    yg.set_global_buffer(y + asc.get_block_idx() * n, n)
    pipe = asc.TPipe()
    q_in, q_out = asc.TQue(asc.TPosition.VECIN, 1), asc.TQue(asc.TPosition.VECOUT, 1)
    work = asc.TBuf(asc.TPosition.VECCALC)
    pipe.init_buffer(q_in, 1, n * 4)
    pipe.init_buffer(q_out, 1, n * 4)
    pipe.init_buffer(work, ROWS * 4 + ROWS * 32)
    x_local = q_in.alloc_tensor(asc.float32)
    if bug == "overrun":
        asc.data_copy(x_local, xg, n + 64)  # BUG: 64 floats past the buffer
    elif bug == "uninit":
        asc.data_copy(x_local, xg, n - 4)  # BUG: 316 floats = 1264 B, rounded down to 1248 B: 4 unwritten
    else:
        asc.data_copy(x_local, xg, n)
    q_in.enque(x_local)
    x_local = q_in.deque(asc.float32) if bug != "handover" else x_local  # BUG: no DeQue (no MTE2 -> V wait)
    y_local = q_out.alloc_tensor(asc.float32)
    w = work.get(asc.float32)
    m, blocks = w, w[ROWS:]
    asc.whole_reduce_max(m, x_local, COLS, ROWS, 1, 1, COLS // 8, asc.ReduceOrder.ORDER_ONLY_VALUE)
    asc.brcb(blocks, m, 1, asc.BrcbRepeatParams(1, 8))
    asc.sub(y_local, x_local, blocks, COLS, ROWS, asc.BinaryRepeatParams(1, 1, 0, COLS // 8, COLS // 8, 1))
    asc.exp(y_local, y_local, n)
    q_out.enque(y_local)
    if bug != "handover":
        q_in.free_tensor(x_local)
    else:
        q_in.deque(asc.float32)
        q_in.free_tensor(x_local)
    y_local = q_out.deque(asc.float32)
    asc.data_copy(yg, y_local, n)
    q_out.free_tensor(y_local)


def _line(text: str) -> int:
    lines, first = inspect.getsourcelines(exp_minus_rowmax.fn)
    (hit,) = [first + i for i, line in enumerate(lines) if text in line]
    return hit


def test_the_port_matches_numpy(rng):
    x = rng.uniform(-4, 4, (4, ROWS, COLS)).astype(np.float32)
    (_, y), rep = exp_minus_rowmax[4](x, np.zeros_like(x), "", hw=HW, checks="all")
    want = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    np.testing.assert_allclose(y, want, rtol=2e-6)
    assert not rep.findings()


@pytest.mark.parametrize(
    "bug, check, line",
    [
        ("handover", r"racecheck \[RAW\]", "asc.whole_reduce_max(m, x_local"),
        ("overrun", r"memcheck \[illegal write\]", "n + 64"),
        ("uninit", r"initcheck", "asc.whole_reduce_max(m, x_local"),
    ],
)
def test_each_injected_bug_is_found_at_its_line(rng, bug, check, line):
    x = rng.uniform(-4, 4, (4, ROWS, COLS)).astype(np.float32)
    with pytest.warns(npu_jax.errors.SanitizerWarning) as w:
        exp_minus_rowmax[4](x, np.zeros_like(x), bug, hw=HW, checks=WARN)
    text = "\n".join(str(m.message) for m in w if isinstance(m.message, npu_jax.errors.SanitizerWarning))
    assert re.search(check, text), text
    assert f"test_asc_outsider.py:{_line(line)}" in text, text

"""A repeat call of an ``asc`` kernel (and of the pooling and element-wise kernels) runs its outputs'
program alone (``core.run.launch``'s values_apart): the same bits, the first call's report, and a
whole run wherever the report could differ (a value read into a scalar, two cores racing on an
element). An asc kernel's report comes from the timing Board where it can: unchecked, no call
compiles more than the outputs' program; checked, the sanitizers' program drops the clocks."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import npu_jax
from npu_jax import asc
from npu_jax.core import programs
from npu_jax.core import run as core_run
from npu_jax.errors import SanitizerError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "asc"))
from add_custom import add_custom  # noqa: E402

HW = npu_jax.presets.ascend910b()
N = 256


@pytest.fixture
def apart(monkeypatch):
    """Values apart at every size (the suite's kernels are small), from a clean slate."""
    monkeypatch.setattr(core_run, "VALUES_APART_BYTES", 0)
    programs.wait_compiled()
    programs._LATER.clear()
    core_run._REPORTS.clear()
    yield
    programs.wait_compiled()
    programs._LATER.clear()


def _calls_of_the_whole_program() -> int:
    info = programs.program_cache_info()
    return info["hits"] + info["misses"]


def _data(rng, n=8 * 2048):
    return [rng.uniform(-8, 8, n).astype(np.float16) for _ in range(2)]


@pytest.mark.parametrize("checks", ["none", "all"])
def test_a_repeat_call_runs_the_outputs_alone_with_the_first_report(apart, rng, checks):
    x, y = _data(rng)
    (_, _, z1), rep1 = add_custom[8](x, y, np.zeros_like(x), hw=HW, checks=checks, board=False)
    x2, y2 = _data(rng)
    # (board=False: the whole program's own clocks, not the Board's report)
    (_, _, z2), rep2 = add_custom[8](x2, y2, np.zeros_like(x), hw=HW, checks=checks, board=False)
    programs.wait_compiled()
    assert len(programs._LATER) == 1
    x3, y3 = _data(rng)
    before = _calls_of_the_whole_program()
    (_, _, z3), rep3 = add_custom[8](x3, y3, np.zeros_like(x), hw=HW, checks=checks, board=False)
    assert _calls_of_the_whole_program() == before  # the whole program did not run
    assert rep3 is rep1 and rep2 is not rep1
    for (a, b), z in (((x, y), z1), ((x2, y2), z2), ((x3, y3), z3)):
        np.testing.assert_array_equal(z, a + b)
    # the same bits as the whole program on the same data
    programs._LATER.clear()
    core_run._REPORTS.clear()
    (_, _, whole), rep = add_custom[8](x3, y3, np.zeros_like(x), hw=HW, checks=checks, board=False)
    np.testing.assert_array_equal(whole.view(np.uint16), z3.view(np.uint16))
    assert (rep.cycles, rep.bytes, dict(rep.pipe_busy)) == (rep1.cycles, rep1.bytes, dict(rep1.pipe_busy))


def test_below_the_size_the_whole_program_runs(monkeypatch, rng):
    monkeypatch.setattr(core_run, "VALUES_APART_BYTES", 1 << 30)
    programs._LATER.clear()
    for _ in range(3):
        x, y = _data(rng)
        add_custom[8](x, y, np.zeros_like(x), hw=HW, checks="none", board=False)
    assert not programs._LATER


def test_unchecked_the_report_is_the_boards_and_only_the_outputs_compile(apart, rng):
    before = _calls_of_the_whole_program()
    for _ in range(3):
        x, y = _data(rng)
        (_, _, z), rep = add_custom[8](x, y, np.zeros_like(x), hw=HW, checks="none")
        np.testing.assert_array_equal(z, x + y)
    assert _calls_of_the_whole_program() == before and len(programs._LATER) == 1
    (_, _, whole), emu = add_custom[8](x, y, np.zeros_like(x), hw=HW, checks="none", board=False)
    np.testing.assert_array_equal(whole.view(np.uint16), z.view(np.uint16))
    for f in ("pipe_free", "busy", "n_instr", "counters", "overlapping_writes", "unwritten"):
        np.testing.assert_array_equal(np.asarray(getattr(rep, f)), np.asarray(getattr(emu, f)), err_msg=f)


def test_checked_the_clocks_are_the_boards_and_the_findings_the_programs(apart, rng):
    x, y = _data(rng)
    _, rep = add_custom[8](x, y, np.zeros_like(x), hw=HW, checks="all")
    _, emu = add_custom[8](x, y, np.zeros_like(x), hw=HW, checks="all", board=False)
    for f in ("pipe_free", "busy", "n_instr", "counters", "san_findings", "overlapping_writes", "unwritten"):
        np.testing.assert_array_equal(np.asarray(getattr(rep, f)), np.asarray(getattr(emu, f)), err_msg=f)
    assert not rep.findings() and rep.san_logged is not None
    # a kernel with a finding: the program that found it has no clocks, its report the Board's
    with pytest.raises(SanitizerError, match="racecheck"):
        unsynced[1](np.zeros(N, np.float32), np.zeros(N, np.float32), hw=HW, checks="all")


@asc.kernel
def unsynced(x, z):
    """The vector unit reads what MTE2 copies in with no flag between them: a race."""
    t, zg = _staged(x, z)
    asc.muls(t, t, 2.0, N)
    asc.set_flag(asc.HardEvent.V_MTE3, 0)
    asc.wait_flag(asc.HardEvent.V_MTE3, 0)
    asc.data_copy(zg, t, N)


def _staged(x, z, x_at=0):
    """The small kernels' set-up: N fp32 of x from element ``x_at`` copied into a UB buffer, and z."""
    pipe = asc.TPipe()
    q = asc.TBuf(asc.TPosition.VECCALC)
    pipe.init_buffer(q, N * 4)
    t = q.get(asc.float32)
    xg, zg = asc.GlobalTensor(), asc.GlobalTensor()
    xg.set_global_buffer(x + x_at, N)
    zg.set_global_buffer(z, N)
    asc.data_copy(t, xg, N)
    return t, zg


@asc.kernel
def scaled_by_first(x, z):
    """z = x * x[0]: a value read into a scalar (its value could reach an address)."""
    t, zg = _staged(x, z)
    asc.set_flag(asc.HardEvent.MTE2_S, 0)
    asc.wait_flag(asc.HardEvent.MTE2_S, 0)
    s = t.get_value(0)
    asc.set_flag(asc.HardEvent.S_V, 0)
    asc.wait_flag(asc.HardEvent.S_V, 0)
    asc.muls(t, t, s, N)
    asc.set_flag(asc.HardEvent.V_MTE3, 0)
    asc.wait_flag(asc.HardEvent.V_MTE3, 0)
    asc.data_copy(zg, t, N)


def test_a_kernel_that_reads_a_value_into_a_scalar_runs_whole(apart, rng):
    for _ in range(3):
        x = rng.uniform(-4, 4, N).astype(np.float32)
        (_, z), _ = scaled_by_first[1](x, np.zeros_like(x), hw=HW, checks="none")
        programs.wait_compiled()
        np.testing.assert_array_equal(z, x * x[0])
    assert not programs._LATER


@asc.kernel
def every_core_writes_the_front(x, z):
    """Core b copies its own part of x to the front of z: the cores race unless the parts are equal."""
    t, zg = _staged(x, z, asc.get_block_idx() * N)
    asc.set_flag(asc.HardEvent.MTE2_MTE3, 0)
    asc.wait_flag(asc.HardEvent.MTE2_MTE3, 0)
    asc.data_copy(zg, t, N)


def test_a_race_the_first_data_did_not_have_runs_the_whole_program(apart, rng):
    part = rng.uniform(-4, 4, N).astype(np.float32)
    same = np.concatenate([part, part])  # both cores write the same bits: no race
    for _ in range(2):
        _, rep = every_core_writes_the_front[2](same, np.zeros_like(same), hw=HW, checks="none")
        assert rep.overlapping_writes == 0
    programs.wait_compiled()
    _, rep = every_core_writes_the_front[2](same, np.zeros_like(same), hw=HW, checks="none")
    assert rep.overlapping_writes == 0
    other = rng.uniform(-4, 4, 2 * N).astype(np.float32)  # now they differ: the race is reported
    with pytest.raises(SanitizerError, match=f"{N} output elements were written by more than one core"):
        every_core_writes_the_front[2](other, np.zeros_like(other), hw=HW, checks="none")


def test_checks_on_and_off_share_the_outputs_program(apart, rng):
    for checks in ("none", "none", "all", "all"):
        x, y = _data(rng)
        (_, _, z), rep = add_custom[8](x, y, np.zeros_like(x), hw=HW, checks=checks)
        programs.wait_compiled()
        np.testing.assert_array_equal(z, x + y)
    assert len(programs._LATER) == 1  # compiled once, for the first setting's second call


def test_pooling_repeats_with_its_outputs_alone(apart, rng):
    xs = [rng.uniform(-4, 4, (1, 32, 16, 16)).astype(np.float16) for _ in range(3)]
    got = []
    for x in xs:
        y, rep = npu_jax.pool2d(x, "max", 3, stride=2, padding=1, hw=HW, checks="all")
        programs.wait_compiled()
        got.append((np.asarray(y), rep))
    assert len(programs._LATER) == 1 and got[2][1] is got[0][1]
    programs._LATER.clear()
    core_run._REPORTS.clear()
    whole, rep = npu_jax.pool2d(xs[2], "max", 3, stride=2, padding=1, hw=HW, checks="all")
    np.testing.assert_array_equal(np.asarray(whole).view(np.uint16), got[2][0].view(np.uint16))
    assert rep.cycles == got[0][1].cycles


def test_checks_none_traces_and_compiles_nothing_of_the_sanitizers(monkeypatch, rng):
    """With checks="none" no event is logged and no analysis is traced or compiled: the analysis
    would fail here if anything called it."""
    from npu_jax.core import findings, sanitize

    def refuse(*a, **k):
        raise AssertionError("the sanitizers' analysis ran with checks='none'")

    monkeypatch.setattr(sanitize, "run_analysis", refuse)
    monkeypatch.setattr(findings, "run_analysis", refuse)
    x, y = _data(rng)
    (_, _, z), rep = add_custom[8](x, y, np.zeros_like(x), hw=HW, checks="none")
    np.testing.assert_array_equal(z, x + y)
    assert rep.san_log is None and rep.san_findings is None and rep.san_logged is None
    xc = rng.uniform(-1, 1, (1, 16, 8, 8)).astype(np.float16)
    wc = rng.uniform(-1, 1, (16, 16, 3, 3)).astype(np.float16)
    _, rep = npu_jax.conv2d(xc, wc, padding=1, hw=HW, checks="none")
    assert rep.san_log is None and rep.san_findings is None and rep.san_logged is None

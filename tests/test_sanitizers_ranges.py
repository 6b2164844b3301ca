"""initcheck at 32-B block granularity, and several findings per check (npu_jax/core/checks/).

* A DataCopy the vendor rounds down (100 floats -> 96) followed by a vector op that reads all 100 is an
  initcheck finding at the vector op's line, naming the first unwritten element; reading only what was
  written (or copying a multiple of 32 B) is not.
* Core level: a partial write, then reads through Views (contiguous, strided, 2-D, at traced offsets):
  only the reads that touch a block no instruction wrote are findings.
* Several findings per check: two bugs of one check at two lines are both reported, with the count;
  a bug repeated in a loop is one finding counted once per call; past KEEP distinct ones, the rest
  are counted ("... and N more").
"""

from __future__ import annotations

import inspect
import re
import warnings

import jax
import numpy as np

import npu_jax
from npu_jax import asc
from npu_jax.core import Plan, Policy
from npu_jax.core.checks.columns import KEEP
from npu_jax.core.isa.data import View
from npu_jax.core.run import launch
from npu_jax.core.sanitize import Checks
from npu_jax.core.state import Context, GmSpec
from npu_jax.errors import SanitizerWarning

HW = npu_jax.presets.ascend910b()
WARN = npu_jax.Checks.parse("all", action="warn")


def _at(kernel, text: str) -> str:
    """'tests/test_sanitizers_ranges.py:LINE (name)': where the kernel's one line containing ``text`` is."""
    fn = kernel.fn if isinstance(kernel, asc.Kernel) else kernel
    lines, first = inspect.getsourcelines(fn)
    (line,) = [first + i for i, src in enumerate(lines) if text in src]
    return f"tests/test_sanitizers_ranges.py:{line} ({fn.__name__})"


def _run(kernel, *args, rounded: bool = False):
    """A launch with every check on, findings as warnings: (outputs, report, the sanitizer warnings'
    texts). ``rounded``: the launch warns that a DataCopy count is rounded down (else: it does not)."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        outs, report = kernel[1](*args, hw=HW, checks=WARN)
    asc_warnings = [str(w.message) for w in rec if issubclass(w.category, asc.AscWarning)]
    assert bool(asc_warnings) == rounded and all("rounds it down" in w for w in asc_warnings), asc_warnings
    return outs, report, [str(w.message) for w in rec if issubclass(w.category, SanitizerWarning)]


# ---- asc: a DataCopy rounded down to whole 32-B blocks ----------------------------------------------
@asc.kernel
def _rounded(x, z, count: int, n_read: int):
    g, o = asc.GlobalTensor(), asc.GlobalTensor()
    g.set_global_buffer(x)
    o.set_global_buffer(z)
    ub = asc.LocalMemAllocator(asc.Hardware.UB)
    a = ub.alloc(asc.TPosition.VECIN, asc.float32, 104)
    c = ub.alloc(asc.TPosition.VECOUT, asc.float32, 104)
    asc.data_copy(a, g, count)  # 100 floats = 400 B: the vendor moves 384 B (96 floats)
    asc.set_flag(asc.HardEvent.MTE2_V, 0)
    asc.wait_flag(asc.HardEvent.MTE2_V, 0)
    asc.adds(c, a, 1.0, n_read)
    asc.set_flag(asc.HardEvent.V_MTE3, 0)
    asc.wait_flag(asc.HardEvent.V_MTE3, 0)
    asc.data_copy(o, c, 96)


def test_a_rounded_down_copy_then_a_read_of_all_of_it_is_an_uninitialised_read(rng):
    x = rng.uniform(-1, 1, 104).astype(np.float32)
    (_, z), report, msgs = _run(_rounded, x, np.zeros(104, np.float32), 100, 100, rounded=True)
    (f,) = report.findings()
    assert (f.check, f.kind, f.op, f.pipe) == ("initcheck", "uninitialised-read", "VAdds", "V"), f.message()
    assert f.where.startswith(_at(_rounded, "asc.adds(c, a, 1.0, n_read)")), f.where
    assert "'ub0_VECIN'" in f.alloc or "VECIN" in f.alloc, f.alloc
    assert (
        "no instruction wrote is byte 384 (element 96; what is written is tracked in 32-B blocks)" in f.detail
    ), f.detail
    assert len(msgs) == 1 and "initcheck: 1 finding (first at" in msgs[0], msgs
    np.testing.assert_array_equal(z[:96], x[:96] + np.float32(1))
    # what was written, read: 96 floats; and a copy of 104 floats (416 B, whole blocks) fills all 100
    for count, n_read in ((100, 96), (104, 100)):
        (_, z), report, msgs = _run(
            _rounded, x, np.zeros(104, np.float32), count, n_read, rounded=count == 100
        )
        assert report.findings() == [] and msgs == [], [f.message() for f in report.findings()]
        np.testing.assert_array_equal(z[:96], x[:96] + np.float32(1))


# ---- asc: two bugs of one check, at two lines ---------------------------------------------------------
@asc.kernel
def _two_bugs(x, z):
    g, o = asc.GlobalTensor(), asc.GlobalTensor()
    g.set_global_buffer(x)
    o.set_global_buffer(z)
    ub = asc.LocalMemAllocator(asc.Hardware.UB)
    a, b, c, d, e = (ub.alloc(asc.TPosition.VECCALC, asc.float32, 64) for _ in range(5))
    asc.data_copy(a, g, 128)  # memcheck: 128 floats into a 64-float tensor
    asc.data_copy(b, g, 128)  # memcheck again, another line
    asc.set_flag(asc.HardEvent.MTE2_V, 0)
    asc.wait_flag(asc.HardEvent.MTE2_V, 0)
    asc.add(c, a, d, 64)  # initcheck: d was never written
    asc.mul(d, b, e, 64)  # initcheck: e was never written
    asc.set_flag(asc.HardEvent.V_MTE3, 0)
    asc.wait_flag(asc.HardEvent.V_MTE3, 0)
    asc.data_copy(o, c, 64)


def test_two_bugs_of_one_check_at_two_lines_are_both_reported(rng):
    _, report, msgs = _run(_two_bugs, rng.uniform(-1, 1, 128).astype(np.float32), np.zeros(64, np.float32))
    found = report.findings()
    by = {}
    for f in found:
        by.setdefault(f.check, []).append(f)
    assert sorted(by) == ["initcheck", "memcheck"], [f.message() for f in found]
    mem, init = by["memcheck"], by["initcheck"]
    assert [f.kind for f in mem] == ["illegal write"] * 2
    assert [f.where.split(" <- ")[0] for f in mem] == [
        _at(_two_bugs, "data_copy(a, g"),
        _at(_two_bugs, "data_copy(b, g"),
    ]
    assert [(f.op, f.kind) for f in init] == [("VAdd", "uninitialised-read"), ("VMul", "uninitialised-read")]
    assert [f.where.split(" <- ")[0] for f in init] == [
        _at(_two_bugs, "add(c, a, d"),
        _at(_two_bugs, "mul(d, b, e"),
    ]
    assert "wrote is byte 0 (element 0;" in init[0].detail and "'" in init[0].alloc, init[0].message()
    (m,) = msgs
    assert m.startswith("4 sanitizer finding(s) in _two_bugs"), m
    for check, first in (("memcheck", mem[0]), ("initcheck", init[0])):
        assert f"{check}: 2 findings (first at {first.where})" in m, m
    assert all(f.message() in m for f in found), m


# ---- core level: partial writes, reads through Views -------------------------------------------------
def _launch(build, gm_specs, gm, checks="all"):
    hw = npu_jax.presets.tiny()
    plan = Plan(hw)
    kernel = build(plan)
    ctx = Context(
        hw=hw,
        allocs=tuple(plan.allocs),
        gm=tuple(gm_specs),
        policy=Policy(),
        n_cores=1,
        checks=Checks.parse(checks, action="warn"),
    )
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        _, rep = launch(kernel, ctx, dict(gm), name="ranges")
    return rep, [str(w.message) for w in rec if issubclass(w.category, SanitizerWarning)]


_SPECS = (GmSpec("x", (64,), (64,), "fp32"), GmSpec("h", (8, 16), (8, 16), "fp16"))
_GM = {"x": np.arange(64, dtype=np.float32), "h": np.ones((8, 16), np.float16)}


def test_a_partial_write_then_reads_through_views_at_block_granularity():
    def build(plan):
        u = plan.alloc("UB", "u", (64,), "fp32")  # 256 B: 8 blocks of 32 B
        v = plan.alloc("UB", "v", (64,), "fp32")
        t = plan.alloc("UB", "t", (8, 16), "fp16")  # one 32-B block per row
        t2 = plan.alloc("UB", "t2", (8, 16), "fp16")

        def adds(core, dst, src):
            return core.vector("VAdds", dst, src, scalar=1.0)

        def kernel(core, b):
            x, h = core.gm_window("x", (0,), (32,)), [core.gm_window("h", (r, 0), (1, 16)) for r in range(8)]
            core = core.data_copy(dst=View(u, 0, (0,), shape=(32,)), src=x)  # #0: u[:32]
            for r in (0, 2, 4, 6):  # #1-#4: every other row of t
                core = core.data_copy(dst=View(t, 0, (r, 0), shape=(1, 16)), src=h[r])
            core = core.set_flag("MTE2_V", 0).wait_flag("MTE2_V", 0)  # #5, #6
            q, rows = View(v, 0, (0,), shape=(16,)), View(t2, 0, (0, 0), shape=(4, 16))
            core = adds(core, View(v, 0, (0,), shape=(32,)), View(u, 0, (0,), shape=(32,)))  # #7: written
            core = adds(core, v[0], View(u, 0, (0,), shape=(64,)))  # #8: all of u
            core = adds(core, q, View(u, 0, (b * 0 + 16,), shape=(16,)))  # #9: traced, inside
            core = adds(core, q, View(u, 0, (b * 0 + 24,), shape=(16,)))  # #10: traced, past u[:32]
            core = adds(core, rows, View(t, 0, (0, 0), shape=(4, 16), step=(2, 1)))  # #11: rows 0, 2, 4, 6
            cols = View(t2, 0, (0, 0), shape=(4, 8))
            core = adds(
                core, cols, View(t, 0, (0, 0), shape=(4, 8), step=(2, 2))
            )  # #12: and every other column
            return adds(core, rows, View(t, 0, (2, 0), shape=(4, 16)))  # #13: rows 2..5

        return kernel

    rep, msgs = _launch(build, _SPECS, _GM)
    found = rep.findings()
    assert [(f.check, f.op, f.instr) for f in found] == [("initcheck", "VAdds", i) for i in (8, 10, 13)], [
        f.message() for f in found
    ]
    whole, traced, rows = found
    assert (
        "'u'" in whole.alloc
        and "wrote is byte 128 (element 32; what is written is tracked in 32-B" in whole.detail
    )
    assert "wrote is byte 128 (element 32;" in traced.detail, traced.detail  # it starts at byte 96, written
    assert "'t'" in rows.alloc and "wrote is byte 96 (element 48 (3, 0);" in rows.detail, rows.detail
    assert len(msgs) == 1 and "initcheck: 3 findings (first at" in msgs[0], msgs


def test_repeats_are_counted_and_past_keep_the_rest_is_summarised():
    def build(plan):
        u = plan.alloc("UB", "u", (16,), "fp32")  # never written
        v = plan.alloc("UB", "v", (16,), "fp32")

        def kernel(core, b):
            core = jax.lax.fori_loop(0, 3, lambda i, c: c.vector("VMuls", v[0], u[0], scalar=2.0), core)
            for _ in range(KEEP + 2):  # KEEP + 2 more instructions, each reading u
                core = core.vector("VAdds", v[0], u[0], scalar=1.0)
            return core

        return kernel

    rep, msgs = _launch(build, _SPECS, _GM, checks="initcheck")
    found = rep.findings()
    assert len(found) == KEEP and {f.check for f in found} == {"initcheck"}
    assert found[0].op == "VMuls" and found[0].count == 3 and all(f.count == 1 for f in found[1:])
    assert all(f.more == 3 for f in found)  # the last 3 of the KEEP + 2 VAdds
    (m,) = msgs
    head = f"initcheck: {3 + KEEP + 2} findings, {KEEP} distinct (first at {found[0].where}) ... and 3 more (kept the first {KEEP})"
    assert head in m and "[3 times]" in m, m
    assert re.search(r"^\s+sanitizers\n\s+initcheck: 13 findings", rep.summary(), re.M), rep.summary()


def test_every_flag_left_set_is_a_finding():
    def build(plan):
        def kernel(core, b):
            return core.set_flag("M_FIX", 3).set_flag("MTE2_MTE1", 1).set_flag("MTE2_MTE1", 2)

        return kernel

    rep, msgs = _launch(build, _SPECS, _GM, checks="synccheck")
    found = rep.findings()
    assert [(f.kind, f.count) for f in found] == [("left-set", 1)] * 3, [f.message() for f in found]
    assert {f.detail.split(" is still set")[0] for f in found} == {
        "flag MTE2_MTE1(1)",
        "flag MTE2_MTE1(2)",
        "flag M_FIX(3)",
    }
    assert len(msgs) == 1 and "synccheck: 3 findings (first at the kernel's last instruction)" in msgs[0], (
        msgs
    )

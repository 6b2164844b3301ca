"""The sanitizers: racecheck, memcheck, initcheck, synccheck (npu_jax/core/sanitize.py).

* Mutation test: every shipped kernel, with each WaitFlag (Queue DeQue / AllocTensor and drains
  included) removed in turn, must be reported by racecheck or synccheck; the unmutated kernels
  must report nothing. One compile per kernel: the mutant index is a traced argument. The figure
  is printed (``pytest -s`` or ``-rP`` shows it) and must be 100%.
* Seeded bugs in small hand-written kernels: each check names the right instruction (op, index,
  source line), pipe and allocation.
* Selection (``checks=``), warn mode, inline analysis, timing-only mode, and jit.

To add a kernel to the mutation test, add one line to ``MUTATION_KERNELS``: a name and a
zero-argument callable that runs the kernel on small inputs and returns its Report (or
``(y, report)``, or a SequenceReport). Pick inputs where every WaitFlag executes at least once
(a wait predicated off on every iteration cannot be caught by running it).
"""

from __future__ import annotations

import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import npu_jax
from npu_jax.core import Plan, Policy, Queue, sanitize
from npu_jax.core.checks.columns import CHECK_NAMES, KINDS, NF, Code, F
from npu_jax.core.checks.sites import flag_transform
from npu_jax.core.findings import decode
from npu_jax.core.run import launch
from npu_jax.core.sanitize import Checks
from npu_jax.core.state import Context, GmSpec
from npu_jax.errors import SanitizerError, SanitizerWarning, WindowError
from npu_jax.hw import presets

RACE_SYNC = ("racecheck", "synccheck")
_R = np.random.default_rng(20240607)  # fixed inputs: the mutation test is about flags, not values
_A, _B = _R.standard_normal((64, 96)).astype(np.float16), _R.standard_normal((96, 48)).astype(np.float16)
_X, _W = (
    _R.standard_normal((1, 20, 9, 9)).astype(np.float32),
    _R.standard_normal((24, 20, 3, 3)).astype(np.float32),
)
_GEMM_T = npu_jax.MatmulTiling(m=32, n=32, k_l1=64, k_l0=32)  # 2 K steps, ping-pong L1 and L0
_SINGLE = dict(ho=4, wo=4, n=16, cin1=1, k_l0=16)


def _conv(strategy, coupled=False, **tiling):
    t = npu_jax.ConvTiling(**{**_SINGLE, **tiling})
    return lambda: npu_jax.conv2d(
        _X,
        _W,
        padding=1,
        strategy=strategy,
        hw=presets.tiny(coupled),
        tiling=t,
        checks=RACE_SYNC,
        timing_only=True,
    )[1]


def _fused(steps, coupled=False, fused=True):
    import fusion

    t = npu_jax.ConvTiling(ho=4, wo=4, n=16, cin1=1, k_l0=32, l1_stages=2, l0_stages=2)
    extra = {
        "bias": _R.standard_normal(24).astype(np.float32) if "bias" in steps else None,
        "residual": _R.standard_normal((1, 24, 9, 9)).astype(np.float32) if "residual" in steps else None,
    }
    return lambda: fusion.conv2d_fused(
        _X,
        _W,
        steps,
        padding=1,
        hw=presets.tiny(coupled),
        tiling=t,
        fused=fused,
        checks=RACE_SYNC,
        timing_only=True,
        **extra,
    )[1]


def _gemm(coupled=False):
    return lambda: npu_jax.matmul(_A, _B, hw=presets.tiny(coupled), tiling=_GEMM_T, checks=RACE_SYNC)[1]


# name -> zero-argument callable returning the kernel's report (runs under jax.jit in the sweep)
MUTATION_KERNELS = {
    "matmul (910B, Fixpipe)": _gemm(),
    "matmul (910, L0C->UB->MTE3)": _gemm(coupled=True),
    "conv2d output_tiled": _conv("output_tiled"),
    "conv2d input_tiled, weights resident": _conv("input_tiled", weights_resident=True, cin1=2),
    "conv2d relayout (+ NC1HWC0 relayout kernel, a Queue)": _conv("relayout"),
    "conv2d img2col, ping-pong": _conv("img2col", l1_stages=2, l0_stages=2),
    "conv2d img2col, ping-pong (910)": _conv("img2col", coupled=True, l1_stages=2, l0_stages=2),
    "conv+bias+relu fused (910B, Fixpipe)": _fused(["bias", "relu"], fused=True),
    "conv+bias+residual+relu fused (910, UB)": _fused(["bias", "residual", "relu"], coupled=True, fused=True),
    "conv, then bias+residual+relu vector kernel (unfused, queues)": _fused(
        ["bias", "residual", "relu"], fused=False
    ),
}
_RESULTS: dict[str, sanitize.MutationResult] = {}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MUTATION_KERNELS))
def test_every_removed_waitflag_is_caught(name):
    r = sanitize.sweep_waits(MUTATION_KERNELS[name], name)  # raises if the unmutated kernel reports anything
    _RESULTS[name] = r
    print(r.figure)
    assert r.mutants >= 4, f"{name}: only {r.mutants} WaitFlags traced; is the kernel running?"
    assert r.caught == r.mutants, f"{r.figure}; not reported: {r.escaped}"


@pytest.mark.slow
def test_mutation_figure():
    """The overall figure, printed; 100% (runs after the per-kernel sweeps, or runs them)."""
    for name, run in MUTATION_KERNELS.items():
        if name not in _RESULTS:
            _RESULTS[name] = sanitize.sweep_waits(run, name)
    caught = sum(r.caught for r in _RESULTS.values())
    total = sum(r.mutants for r in _RESULTS.values())
    by_race = sum(r.by_race for r in _RESULTS.values())
    print(
        f"\nmutation test: {caught}/{total} single-WaitFlag mutants caught ({100 * caught / total:.0f}%) over "
        f"{len(_RESULTS)} kernels; racecheck alone caught {by_race} (the rest leave only sync evidence: "
        f"a flag set twice or left set)"
    )
    assert caught == total


# ---- seeded bugs ------------------------------------------------------------------------------
def _launch(build, *, gm_specs=(), gm=None, n_cores=1, checks="all", coupled=False, move_data=True):
    """Run a hand-written kernel with findings as warnings; returns (report, warning messages)."""
    hw = presets.tiny(coupled)
    plan = Plan(hw)
    kernel = build(plan)
    ctx = Context(
        hw=hw,
        allocs=tuple(plan.allocs),
        gm=tuple(gm_specs),
        policy=Policy(),
        n_cores=n_cores,
        checks=Checks.parse(checks, action="warn"),
        move_data=move_data,
    )
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        _, rep = launch(kernel, ctx, dict(gm or {}), name="seeded")
    return rep, [str(w.message) for w in rec if issubclass(w.category, SanitizerWarning)]


def _x(rows=48, cols=16):
    return (GmSpec("x", (rows, cols), (rows, cols), "fp16"),), {"x": np.ones((rows, cols), np.float16)}


def _x_distinct(rows=48, cols=16):
    """x's values all different, so that two cores copying different rows write different bits."""
    return {"x": np.arange(rows * cols, dtype=np.float16).reshape(rows, cols)}


def _one(rep, check):
    found = [f for f in rep.findings() if f.check == check]
    assert len(found) == 1, f"expected a {check} finding, got {[f.message() for f in rep.findings()]}"
    return found[0]


def _cube(plan):
    x1 = plan.alloc("L1", "x_l1", (1, 16, 16), fmt="NZ", stages=2)
    a0 = plan.alloc("L0A", "a_l0", (16, 16), fmt="ZZ")
    b0 = plan.alloc("L0B", "b_l0", (16, 16), fmt="ZN")
    c0 = plan.alloc("L0C", "c_l0c", (16, 16), "fp32", fmt="NZ")
    return x1, a0, b0, c0


def test_uninitialised_read_names_the_mmad_and_the_allocation():
    def build(plan):
        x1, a0, b0, c0 = _cube(plan)

        def kernel(core, b):
            core = core.data_copy(dst=x1[0], src=core.gm_window("x", (0, 0), (16, 16)), layout="nz")
            core = core.set_flag("MTE2_MTE1", 0).wait_flag("MTE2_MTE1", 0)
            core = core.load2d(dst=a0[0], src=x1[0])
            core = core.set_flag("MTE1_M", 0).wait_flag("MTE1_M", 0)
            return core.mmad(dst=c0[0], a=a0[0], b=b0[0], m=16, n=16, k=16, init=True)  # b_l0 never loaded

        return kernel

    rep, msgs = _launch(build, gm_specs=_x()[0], gm=_x()[1])
    f = _one(rep, "initcheck")
    assert (f.kind, f.op, f.pipe, f.instr) == ("uninitialised-read", "Mmad", "M", 6), f.message()
    assert "'b_l0'" in f.alloc and "test_sanitizers.py" in f.where, f.message()
    assert rep.findings() == [f] and len(msgs) == 1 and "initcheck" in msgs[0] and "b_l0" in msgs[0]


def test_missing_flag_is_a_raw_race_naming_both_instructions():
    def build(plan):
        x1, a0, b0, c0 = _cube(plan)

        def kernel(core, b):
            core = core.data_copy(dst=x1[0], src=core.gm_window("x", (0, 0), (16, 16)), layout="nz")
            return core.load2d(dst=a0[0], src=x1[0])  # no MTE2_MTE1 flag between the DMA and the load

        return kernel

    rep, _ = _launch(build, gm_specs=_x()[0], gm=_x()[1])
    f = _one(rep, "racecheck")
    assert (f.kind, f.op, f.pipe, f.other_op, f.other_pipe, f.instr) == (
        "RAW",
        "LoadData2D",
        "MTE1",
        "DataCopy",
        "MTE2",
        1,
    ), f.message()
    assert "'x_l1'" in f.alloc and "MTE2_MTE1" in f.fix, f.message()


def test_slot_reused_without_its_free_flag_is_a_war_race_with_tile_coordinates():
    def build(plan):
        x1, a0, b0, c0 = _cube(plan)

        def kernel(core, b):
            def step(i, core):
                core = core.at_tile(step=i)
                core = core.data_copy(dst=x1[0], src=core.gm_window("x", (16 * i, 0), (16, 16)), layout="nz")
                core = core.set_flag("MTE2_MTE1", 0).wait_flag("MTE2_MTE1", 0)
                return core.load2d(dst=a0[0], src=x1[0])  # MTE1 reads; nothing tells MTE2 it is done

            return jax.lax.fori_loop(0, 3, step, core)

        return kernel

    rep, _ = _launch(build, gm_specs=_x()[0], gm=_x()[1])
    f = _one(rep, "racecheck")
    assert (f.kind, f.op, f.pipe, f.other_op, f.other_pipe) == (
        "WAR",
        "DataCopy",
        "MTE2",
        "LoadData2D",
        "MTE1",
    )
    assert f.tile == {"step": 1} and f.stage == 0 and "MTE1_MTE2" in f.fix, f.message()


def test_pipe_barrier_all_orders_everything():
    def build(plan):
        x1, a0, b0, c0 = _cube(plan)

        def kernel(core, b):
            core = core.data_copy(dst=x1[0], src=core.gm_window("x", (0, 0), (16, 16)), layout="nz")
            core = core.pipe_barrier("ALL")
            return core.load2d(dst=a0[0], src=x1[0])

        return kernel

    rep, msgs = _launch(build, gm_specs=_x()[0], gm=_x()[1])
    assert rep.findings() == [] and msgs == []


def test_out_of_range_gm_window_with_a_traced_start():
    def build(plan):
        x1 = plan.alloc("L1", "x_l1", (1, 16, 16), fmt="NZ")

        def kernel(core, b):
            r = 40 + 0 * b  # traced: the DMA would clamp it silently
            return core.data_copy(dst=x1[0], src=core.gm_window("x", (r, 0), (16, 16)), layout="nz")

        return kernel

    rep, _ = _launch(build, gm_specs=_x()[0], gm=_x()[1])
    f = _one(rep, "memcheck")
    assert (f.kind, f.op, f.pipe, f.instr) == ("gm-out-of-range", "DataCopy", "MTE2", 0), f.message()
    assert "GM tensor 'x'" in f.alloc and "starts at 40 on dim 0" in f.detail, f.message()


def test_out_of_range_allocation_window_stage_and_extent():
    def build(plan):
        x1, a0, b0, c0 = _cube(plan)

        def kernel(core, b):
            core = core.data_copy(dst=x1[0], src=core.gm_window("x", (0, 0), (16, 16)), layout="nz")
            core = core.data_copy(dst=x1[1], src=core.gm_window("x", (16, 0), (16, 16)), layout="nz")
            core = core.set_flag("MTE2_MTE1", 0).wait_flag("MTE2_MTE1", 0)
            core = core.load2d(dst=a0[0], src=x1[0], start=(8 + 0 * b, 0))  # rows 8..23 of a 16-row tile
            return core

        return kernel

    rep, _ = _launch(build, gm_specs=_x()[0], gm=_x()[1])
    f = _one(rep, "memcheck")
    assert (f.kind, f.op, f.instr) == ("window-out-of-range", "LoadData2D", 4) and "'x_l1'" in f.alloc, (
        f.message()
    )

    def build_stage(plan):
        x1, a0, b0, c0 = _cube(plan)

        def kernel(core, b):
            return core.data_copy(dst=x1[b + 2], src=core.gm_window("x", (0, 0), (16, 16)), layout="nz")

        return kernel

    f = _one(_launch(build_stage, gm_specs=_x()[0], gm=_x()[1])[0], "memcheck")
    assert (f.kind, f.op) == ("stage-out-of-range", "DataCopy") and "'x_l1'" in f.alloc, f.message()

    def build_extent(plan):
        x1, a0, b0, c0 = _cube(plan)

        def kernel(core, b):
            core = core.data_copy(dst=x1[0], src=core.gm_window("x", (0, 0), (16, 16)), layout="nz")
            core = core.set_flag("MTE2_MTE1", 0).wait_flag("MTE2_MTE1", 0)
            core = core.load2d(dst=a0[0], src=x1[0]).load2d(dst=b0[0], src=x1[0])
            core = core.set_flag("MTE1_M", 0).wait_flag("MTE1_M", 0)
            return core.mmad(dst=c0[0], a=a0[0], b=b0[0], m=b + 32, n=16, k=16, init=True)

        return kernel

    f = _one(_launch(build_extent, gm_specs=_x()[0], gm=_x()[1])[0], "memcheck")
    assert (f.kind, f.op, f.pipe) == ("extent-out-of-range", "Mmad", "M") and "32" in f.detail, f.message()


def test_static_out_of_range_is_refused_at_trace_time():
    hw = presets.tiny()
    plan = Plan(hw)
    x1, a0, b0, c0 = _cube(plan)
    from conftest import make_core

    core = make_core(hw, plan, _x()[0], _x()[1])
    with pytest.raises(WindowError, match="stage 2 of allocation 'x_l1'.*alloc\\[i % 2\\]"):
        core.data_copy(dst=x1[2], src=core.gm_window("x", (0, 0), (16, 16)), layout="nz")
    with pytest.raises(WindowError, match="window of 'x'.*leaves the tensor on dim 0"):
        core.gm_window("x", (40, 0), (16, 16))
    with pytest.raises(WindowError, match="LoadData2D window of 'x_l1'.*starts at 32 on dim 0"):
        core.load2d(dst=a0[0], src=x1[0], start=(0, 32))
    with pytest.raises(WindowError, match="Mmad m=17 is outside 0..16"):
        core.mmad(dst=c0[0], a=a0[0], b=b0[0], m=17, n=16, k=16)


def test_synccheck_hang_set_twice_left_set_and_event_range():
    def build(kind):
        def b_(plan):
            def kernel(core, b):
                if kind == "hang":
                    return core.wait_flag("MTE2_MTE1", 1)
                if kind == "twice":
                    core = core.set_flag("MTE2_MTE1", 1).set_flag("MTE2_MTE1", 1)
                    return core.wait_flag("MTE2_MTE1", 1)
                if kind == "left":
                    return core.set_flag("M_FIX", 3)
                core = core.set_flag("MTE2_MTE1", b + 8)  # traced id past the chip's 0..7
                return core.wait_flag("MTE2_MTE1", b + 8)

            return kernel

        return b_

    for kind, want, fix in [
        ("hang", "wait-without-set", "set_flag('MTE2_MTE1', 1)"),
        ("twice", "set-twice", "wait_flag('MTE2_MTE1', 1)"),
        ("left", "left-set", "wait_flag('M_FIX', 3)"),
        ("range", "event-id-out-of-range", "num_event_ids"),
    ]:
        rep, msgs = _launch(build(kind))
        if kind == "range":  # the set and the wait both use the id: two instructions, two findings
            f, g = [x for x in rep.findings() if x.check == "synccheck"]
            assert (f.op, g.op, g.kind) == ("SetFlag", "WaitFlag", want), g.message()
        else:
            f = _one(rep, "synccheck")
        assert f.kind == want and fix in f.fix and len(msgs) == 1, f.message()
    with pytest.raises(ValueError, match="event id must be in 0..7"):
        _launch(lambda plan: lambda core, b: core.set_flag("MTE2_MTE1", 8))


def test_overlapping_multicore_writes_name_both_cores_and_the_instruction():
    def build(plan):
        ub = plan.alloc("UB", "y_ub", (16, 16))

        def kernel(core, b):
            core = core.data_copy(dst=ub[0], src=core.gm_window("x", (16 * b, 0), (16, 16)))
            core = core.set_flag("MTE2_MTE3", 0).wait_flag("MTE2_MTE3", 0)
            # both cores write rows 8..23: rows 8..15 overlap
            return core.data_copy(dst=core.gm_window("y", (8 * b, 0), (16, 16)), src=ub[0])

        return kernel

    specs = _x()[0] + (GmSpec("y", (32, 16), (32, 16), "fp16", output=True),)
    gm = _x_distinct()  # the two cores' rows differ
    for move_data in (True, False):  # timing-only runs still see the overlap
        rep, msgs = _launch(build, gm_specs=specs, gm=gm, n_cores=2, move_data=move_data)
        assert int(rep.overlapping_writes) == 8 * 16 and len(msgs) == 1, msgs
        m = msgs[0]
        assert "y[8, 0]" in m and "core 0 (DataCopy on MTE3" in m and "core 1 (DataCopy on MTE3" in m, m
        assert "test_sanitizers.py" in m, m
    hw = presets.tiny()
    for checks, match in [
        ("none", "written by more than one core"),  # counted even with checks off
        ("all", "racecheck \\[multi-core overlap\\].*y\\[8, 0\\]"),
    ]:
        plan = Plan(hw)
        kern = build(plan)
        ctx = Context(hw=hw, allocs=tuple(plan.allocs), gm=specs, policy=Policy(), n_cores=2, checks=checks)
        with pytest.raises(SanitizerError, match=match):
            launch(kern, ctx, gm, name="seeded")


def test_gm_write_marks_name_the_issuing_instruction():
    """The issue hook marks each written output element with the site of the instruction that
    wrote it (not the one before or after): the overlap names the UB->GM DataCopy of each core."""

    def build(plan):
        ub = plan.alloc("UB", "y_ub", (16, 16))

        def kernel(core, b):
            core = core.data_copy(dst=ub[0], src=core.gm_window("x", (16 * b, 0), (16, 16)))
            core = core.set_flag("MTE2_MTE3", 0).wait_flag("MTE2_MTE3", 0)
            core = core.data_copy(dst=core.gm_window("y", (8 * b, 0), (16, 16)), src=ub[0])
            return core.pipe_barrier("ALL")

        return kernel

    specs = _x()[0] + (GmSpec("y", (32, 16), (32, 16), "fp16", output=True),)
    rep, _ = _launch(build, gm_specs=specs, gm=_x_distinct(), n_cores=2)
    gid, flat, ca, sa, cb, sb = (int(v) for v in np.asarray(rep.overlap_at))
    assert (gid, flat, ca, cb) == (0, 8 * 16, 0, 1)
    table = rep.sanitizer
    assert sa == sb == 3 and table.site(sa)[:2] == ("DataCopy", "MTE3"), table.sites
    assert [op for op, _, _ in table.sites] == ["DataCopy", "SetFlag", "WaitFlag", "DataCopy", "PipeBarrier"]


def test_flag_ops_pass_through_one_hook_with_checks_on_or_off():
    """set_flag / wait_flag / pipe_barrier call the flag hook once each, in program order, whether
    or not any check is on; a transform there (the mutation test's mechanism) changes what runs."""
    seen = []

    def spy(op):
        seen.append((op.name, op.pipe or f"{npu_jax.core.PIPES[op.src]}_{npu_jax.core.PIPES[op.dst]}"))
        return op

    def build(plan):
        def kernel(core, b):
            core = core.set_flag("MTE2_MTE1", 1).wait_flag("MTE2_MTE1", 1).pipe_barrier("M")
            return core.pipe_barrier("ALL")

        return kernel

    want = [("SetFlag", "MTE2_MTE1"), ("WaitFlag", "MTE2_MTE1"), ("PipeBarrier", "M"), ("PipeBarrier", "ALL")]
    for checks in ("none", "all"):
        seen.clear()
        with flag_transform(spy):
            rep, msgs = _launch(build, checks=checks)
        assert seen == want and not msgs, (checks, seen, msgs)
    with flag_transform(lambda op: op._replace(when=op.when & (op.name != "WaitFlag"))):
        rep, msgs = _launch(build)  # the wait predicated off: the flag is left set
    f = _one(rep, "synccheck")
    assert f.kind == "left-set" and "MTE2_MTE1(1)" in f.detail and len(msgs) == 1, f.message()


def test_every_finding_code_decodes_to_a_message(rng):
    """Each code of the named column layout has a check, a short name and a message with a fix."""
    assert sorted(KINDS) == list(Code) and [int(c) for c in Code] == list(range(1, len(Code) + 1))
    for code in Code:
        row = np.zeros(NF, np.int32)
        row[F.CODE], row[F.SITE], row[F.ALLOC], row[F.OSITE] = code, -1, -1, -1
        row[F.STAGE], row[F.X0], row[F.X1] = rng.integers(0, 4, size=3)
        f = decode(row, None, core=int(rng.integers(0, 8)))
        check, kind = KINDS[code]
        assert (f.check, f.kind) == (CHECK_NAMES[check], kind) and f.fix, f
        assert f.message().startswith(f"{f.check} [{kind}]") and "Fix: " in f.message(), f.message()


def test_queue_deque_removed_is_caught():
    def build(drop):
        def b_(plan):
            ub = plan.alloc("UB", "band", (16, 16), stages=2)
            q = Queue("MTE2", "MTE3", ub)

            def kernel(core, b):
                core = q.init(core)

                def item(j, core):
                    core = q.alloc_tensor(core, j)
                    core = core.data_copy(dst=q.slot(j), src=core.gm_window("x", (16 * j, 0), (16, 16)))
                    core = q.enque(core, j)
                    if not drop:
                        core = q.deque(core, j)
                    core = core.data_copy(dst=core.gm_window("y", (16 * j, 0), (16, 16)), src=q.slot(j))
                    return q.free(core, j)

                core = jax.lax.fori_loop(0, 3, item, core)
                return q.drain(core)

            return kernel

        return b_

    specs = _x()[0] + (GmSpec("y", (48, 16), (48, 16), "fp16", output=True),)
    rep, msgs = _launch(build(False), gm_specs=specs, gm=_x()[1])
    assert msgs == [] and rep.findings() == []
    rep, msgs = _launch(build(True), gm_specs=specs, gm=_x()[1])
    kinds = {}
    for f in rep.findings():  # the first of each check (the flags left set at the end follow)
        kinds.setdefault(f.check, f.kind)
    assert kinds == {"racecheck": "RAW", "synccheck": "set-twice"}, [f.message() for f in rep.findings()]


# ---- selection, modes, jit --------------------------------------------------------------------
def test_checks_selection_parsing_and_default():
    assert Checks.parse("all").enabled == frozenset(sanitize.CHECK_NAMES)
    assert Checks.parse("none").enabled == frozenset() and not Checks.parse("none").any
    assert Checks.parse("racecheck, synccheck").enabled == {"racecheck", "synccheck"}
    assert Checks.parse(["memcheck"]).mem and Checks.parse(None) == sanitize.get_default_checks()
    want = Checks.parse(os.environ.get("NPU_JAX_CHECKS", "all"))  # conftest: tests run all unless told
    assert sanitize.get_default_checks() == want
    with npu_jax.default_checks("none") as ch:
        assert not ch.any and Checks.parse(None) == ch
    with npu_jax.default_checks("synccheck"):
        assert Checks.parse(None).enabled == {"synccheck"}
    assert Checks.parse(None) == want
    with pytest.raises(ValueError, match="unknown check.*'racecheckk'"):
        Checks.parse("racecheckk")
    with pytest.raises(ValueError, match="action must be one of"):
        Checks(frozenset(), action="ignore")
    with pytest.raises(TypeError, match="checks must be"):
        Checks.parse(3)


def test_only_the_selected_checks_report():
    def build(plan):
        x1, a0, b0, c0 = _cube(plan)

        def kernel(core, b):
            core = core.set_flag("M_FIX", 0)  # left set: synccheck
            core = core.data_copy(dst=x1[0], src=core.gm_window("x", (0, 0), (16, 16)), layout="nz")
            return core.load2d(dst=a0[0], src=x1[0])  # unordered: racecheck

        return kernel

    kw = dict(gm_specs=_x()[0], gm=_x()[1])
    assert {f.check for f in _launch(build, **kw)[0].findings()} == {"racecheck", "synccheck"}
    assert {f.check for f in _launch(build, checks="racecheck", **kw)[0].findings()} == {"racecheck"}
    assert {f.check for f in _launch(build, checks="synccheck", **kw)[0].findings()} == {"synccheck"}
    rep, msgs = _launch(build, checks="none", **kw)
    assert rep.findings() == [] and msgs == [] and rep.san_log is None


def test_inline_analysis_and_timing_only_agree():
    def build(plan):
        x1, a0, b0, c0 = _cube(plan)

        def kernel(core, b):
            core = core.data_copy(dst=x1[0], src=core.gm_window("x", (0, 0), (16, 16)), layout="nz")
            core = core.load2d(dst=a0[0], src=x1[0])
            return core.wait_flag("FIX_M", 2)

        return kernel

    kw = dict(gm_specs=_x()[0], gm=_x()[1])
    base = [f.message() for f in _launch(build, **kw)[0].findings()]
    assert len(base) == 2
    inline = _launch(build, checks=Checks(frozenset(sanitize.CHECK_NAMES), inline=True), **kw)[0]
    assert inline.san_log is None and [f.message() for f in inline.findings()] == base
    assert [f.message() for f in _launch(build, move_data=False, **kw)[0].findings()] == base


@pytest.mark.slow
def test_under_jit_findings_travel_in_the_report_and_check_raises():
    def one(k):
        with sanitize.mutate(k), npu_jax.default_checks("all"):  # checks=None: the default
            return npu_jax.matmul(_A, _B, hw=presets.tiny(), tiling=_GEMM_T)[1]

    f = jax.jit(one)
    assert f(jnp.int32(-1)).check().findings() == []
    rep = f(jnp.int32(0))  # launch cannot raise on tracers: the report carries the log
    with pytest.raises(SanitizerError, match="synccheck|racecheck"):
        rep.check()
    with pytest.raises(SanitizerError, match="matmul"):
        with sanitize.mutate(0):
            npu_jax.matmul(_A, _B, hw=presets.tiny(), tiling=_GEMM_T, checks="all")  # eager: launch raises


def test_log_overflow_warns():
    with pytest.warns(SanitizerWarning, match="log holds 16"):
        npu_jax.matmul(
            _A, _B, hw=presets.tiny(), tiling=_GEMM_T, checks=Checks(frozenset(RACE_SYNC), capacity=16)
        )

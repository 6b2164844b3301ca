"""Launching a kernel: one core or many (``vmap`` over ``block_idx``), outputs merged.

A kernel is ``kernel(core, block_idx) -> core``. Every core starts from the same state. What the
chip keeps once for all cores stays one array under the vmap (``core/shared.py``): the GM tensors,
each output element's writer, the L2's record. The cores write the outputs in the SPMD program's
order (an instruction on every core, core ``b`` after cores ``< b``, then the next instruction), and
an element written by two cores with different bits is a race (a bug in the kernel's split; several
cores writing the same bits, as a launch with more blocks than tiles whose block index wraps around
does, give the same result in any order and are no race; a timing-only run, which keeps no values,
counts every element a second core writes). Elements nobody wrote are counted too. With racecheck on,
the first race is named with the instruction of each core that wrote it.

After a concrete run, ``launch`` raises (or warns about) the sanitizers' findings
(``sanitize.py``); under ``jax.jit`` they travel in the Report, and ``report.check()`` raises them
once the values are concrete.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import gc
import time
from collections.abc import Callable, Hashable

import jax
import jax.numpy as jnp
import numpy as np

from npu_jax.core import board as board_mod
from npu_jax.core import l2, programs, sanitize
from npu_jax.core.board import BoardCore, BoardUnsupported, report_arrays
from npu_jax.core.buffers import DTYPES
from npu_jax.core.checks.sites import TRACE
from npu_jax.core.cores import join_shared, merge_outputs, per_core, split_shared
from npu_jax.core.state import Context, Core, init_core
from npu_jax.report.report import Report

CORE_AXIS = "cores"  # the vmap axis of the cores: a kernel's all-core barrier (asc.sync_all) gathers on it


def _mapping_count() -> tuple[int, int]:
    """(memory mappings this process holds, the kernel's limit); (0, 0) where /proc is not there."""
    try:
        with open("/proc/self/maps", "rb") as f:
            n = sum(1 for _ in f)
        with open("/proc/sys/vm/max_map_count") as f:
            return n, int(f.read())
    except (OSError, ValueError):
        return 0, 0


def release_compiled_if_near_limit(fraction: float = 0.6) -> bool:
    """Drop JAX's compiled-program caches when this process nears Linux's mapping limit.

    XLA:CPU keeps every compiled program's JIT code in its own memory mappings for as long as
    JAX caches the program. A long session that compiles a few hundred distinct kernels (a sweep
    over layers and tilings, a notebook run many times) reaches ``vm.max_map_count`` (65530 by
    default) and the next compile dies with a segmentation fault. Called before every launch;
    clearing costs only recompiles. Returns whether it cleared."""
    n, limit = _mapping_count()
    if limit and n > fraction * limit:
        programs.clear_program_cache()
        jax.clear_caches()
        gc.collect()  # the executables go now, not at the next collection
        return True
    return False


# Reading the mappings takes about a millisecond (thousands of lines): a launch reads them at most
# every _MAP_CHECK_S (a compile takes 10 ms or more and adds tens of mappings, far inside the margin)
_MAP_CHECK_S = 0.25
_LAST_MAP_CHECK = [-1e9]  # time.monotonic() of the launch that last read them


def _release_if_due() -> None:
    now = time.monotonic()
    if now - _LAST_MAP_CHECK[0] >= _MAP_CHECK_S:
        _LAST_MAP_CHECK[0] = now
        release_compiled_if_near_limit()


def launch(
    kernel: Callable[[Core, jax.Array], Core],
    ctx: Context,
    gm: dict,
    *,
    name: str,
    workload: str = "",
    operand: str = "fp16",
    extents: dict | None = None,
    l2_resident: tuple[str, ...] = (),
    key: Hashable = None,
    keep_unwritten: bool = False,
    finish: Callable[[Report], Report] | None = None,
    values_apart: bool = False,
    timing: Callable[[], Report] | None = None,
    board: bool = False,
    sequential: bool = False,
) -> tuple[dict, Report]:
    """Run ``kernel`` on ``ctx.n_cores`` cores; returns (outputs, Report).

    ``keep_unwritten``: output elements no core wrote keep the values given in ``gm`` (else 0).
    ``finish``: applied to the Report inside the launch's program, after the kernel is traced (an
    ``asc`` launch adds what its trace found); it must be determined by ``key`` too.

    ``key``: a hashable description of what builds ``kernel`` (its plan): with it, a concrete launch
    reuses the program compiled for an earlier identical one (``programs.py``); None compiles anew.

    ``l2_resident`` names the GM inputs an earlier kernel of the same sequence left in L2 (see
    ``l2.py``: each is resident if this kernel keeps it too).

    ``values_apart``: the caller promises that no address, count or flag of the kernel depends on
    the data (an ``asc`` kernel that reads no value into a scalar). Then only the first concrete run
    of a ``key`` computes the report; later ones run a program of the outputs alone (no clocks, L2
    record, trace or sanitizer log: XLA keeps none of it) and return the first run's report, its
    findings raised or warned again. One figure of a report can depend on the data: two cores
    writing one element race only if their bits differ. So the outputs' program counts the races
    too, and runs only where the first run had none; where it finds one, the whole program runs
    again and its report is returned (:func:`_values_run`).

    ``timing``: with ``values_apart`` and no trace, a function that computes the launch's report
    without XLA (an asc kernel's Board, ``core/board.py``: the same figures), or raises
    :class:`~npu_jax.core.board.BoardUnsupported`; it is called once a key. Then no call compiles the
    whole program: with no checks, the outputs come from their own program (which counts races too:
    where two cores wrote one element, the program below runs for its report); with checks, the
    program is compiled without the report's clocks, busy cycles, instruction counts and counters
    (XLA drops their arithmetic) and ``timing``'s are put in.

    ``board``: the kernel runs on the timing Board as it is (it loops with ``board.fori_loop`` and
    computes its addresses in numpy there: the built-in kernels): ``timing`` is then
    :func:`board_report` of it. A timing-only launch (no data) with no checks then compiles nothing;
    with checks, its sanitizers' program without the clocks. Under ``board.BOARD_CHECK`` (the tests'
    hold on the Board) the launch compiles its clocks and raises where the Board's differ.

    ``sequential``: nothing compiled: the cores run one after another in Python, every instruction op
    by op (``jax.disable_jit``), each core from the GM, writers and L2 record the core before it left
    (an asc kernel launched with ``jit=False``, to step through it in a debugger).

    Outputs come back at their spec's (static) shape; elements outside a traced ``extents`` are 0.
    Called with concrete inputs, the whole launch (every core, the merge, the report, an inline
    sanitizer analysis) is compiled as one XLA program (``jax.jit``, kept under ``key``) and run; inside a trace it
    becomes part of the caller's program. Sanitizer findings (``ctx.checks``) are raised or warned
    here when the run is concrete; under ``jax.jit`` call ``report.check()`` on the result.
    """

    ctx = dataclasses.replace(ctx, l2_modes=l2.modes(ctx.hw, ctx.gm, tuple(l2_resident)))
    if not ctx.move_data:  # no data: the policy's arithmetic what-ifs change nothing (Policy.timing)
        ctx = dataclasses.replace(ctx, policy=ctx.policy.timing())

    def run(gm, sequential=False):
        return _launch(
            kernel,
            ctx,
            gm,
            name=name,
            workload=workload,
            operand=operand,
            extents=extents,
            keep_unwritten=keep_unwritten,
            finish=finish,
            sequential=sequential,
        )

    def on_board():
        return board_report(
            kernel, ctx, name=name, workload=workload, operand=operand, extents=extents, finish=finish
        )

    if sequential:
        with jax.disable_jit():
            outs, report = run(gm, sequential=True)
        sanitize.raise_or_warn(report)
        return outs, report
    traced = any(isinstance(v, jax.core.Tracer) for v in jax.tree.leaves((gm, extents)))
    if traced:
        return run(gm)
    held = board and board_mod.BOARD_CHECK[0]
    if board and not held:
        timing = on_board
    _release_if_due()
    # one program instead of thousands of op-by-op dispatches (each a small compile of its own),
    # reused by every later launch with the same key; never under the mutation test's transforms,
    # which change what is traced without changing the key
    full = (
        None
        if key is None or TRACE.flag_transforms
        else (key, ctx, name, workload, operand, _frozen(extents))
    )
    try:
        hash(full)
    except TypeError:  # a key part is traced (a plan holding the caller's tracers): not kept
        full = None
    timed = None
    if (
        timing is not None
        and (values_apart or not ctx.move_data)
        and full is not None
        and not ctx.trace_capacity
    ):
        timed = _timing_report(full, timing)
    if timed is not None and not ctx.checks.any and not ctx.move_data:  # the Board's report is the launch's
        sanitize.raise_or_warn(timed)
        outs = {s.name: jnp.zeros(s.shape, DTYPES[s.dtype]) for s in ctx.gm if s.output}
        return outs, timed
    if timed is not None and not ctx.checks.any:
        got = _timed_apart(kernel, ctx, gm, full, name, extents, keep_unwritten, timed)
        if got is not None:
            sanitize.raise_or_warn(got[1])
            return got
    key = full
    if timed is not None:  # checks on: their program without the clocks (XLA drops them), the Board's
        key, run = ("clockless",) + full, _clockless(run)
    apart = values_apart and ctx.move_data and full is not None and _nbytes(gm) >= VALUES_APART_BYTES
    # a timing-only program runs once, and where the outputs are computed apart the whole program runs
    # twice: compile it fast (programs.jit)
    fast = not ctx.move_data or apart
    if apart:
        kept = _REPORTS.get(("run",) + full)
        if kept is not None:
            outs = _values_run(kernel, ctx, gm, full, name, extents, keep_unwritten)
            if outs is not None:
                _REPORTS.move_to_end(("run",) + full)
                sanitize.raise_or_warn(kept)  # (the first run raised or warned them the first time)
                return outs, kept
    if full is None:
        outs, report = programs.jit(run, fast)(gm)
    else:
        outs, report = programs.call(key, run, gm, fast_compile=fast)
    if timed is not None:
        report = dataclasses.replace(report, **{f: getattr(timed, f) for f in _CLOCKS})
    sanitize.raise_or_warn(report)
    if apart and ("run",) + full not in _REPORTS and int(report.overlapping_writes) == 0:
        _keep(("run",) + full, report)
    if held:  # (a traced run's clocks are the same: the trace only records them)
        try:
            b = on_board()
        except BoardUnsupported:
            b = None
        if b is not None:
            board_mod.hold(report, b, name, overlapping=not ctx.move_data)
    return outs, report


def board_report(kernel, ctx: Context, *, name, workload, operand, extents=None, finish=None):
    """A launch's Report from the timing Board (``core/board.py``): ``kernel(core, block)`` run once on
    every core at once, its loops in Python, no data:
    every figure of the emulator's run, its unwritten output elements where the run marks its writes,
    and (timing-only) the elements two cores wrote. Raises ``BoardUnsupported`` where the kernel needs data."""
    core = kernel(BoardCore(ctx, extents=extents), np.arange(ctx.n_cores))
    report = Report(
        **report_arrays(core),
        trace={},
        overlapping_writes=np.asarray(core.mem.overlapping(), np.int32),
        unwritten=np.asarray(core.mem.unwritten(), np.int32),
        hw=ctx.hw,
        name=name,
        workload=workload,
        operand=operand,
        l2_kept=core.mem.kept,
        sanitizer=sanitize.SiteTable(name, ctx),
    )
    return report if finish is None else finish(report)


# A launch's outputs computed apart from its report (``launch``'s ``values_apart``): only where the GM
# data is this large. Below it a whole repeat run takes a few ms, not worth a second compiled program.
VALUES_APART_BYTES = 1 << 20


def _nbytes(gm: dict) -> int:
    return sum(int(getattr(v, "nbytes", 0)) for v in gm.values())


def _values_run(kernel, ctx: Context, gm: dict, key, name: str, extents, keep_unwritten: bool):
    """The outputs of :func:`launch`'s kernel alone, or None: while their program is still compiling
    (in the background, ``programs.compile_later``, started by the first call that asks: the call
    itself runs the whole program, so no call waits for a compile), where that compile failed, or
    where two cores raced on an element (the report then differs from the kept one). The program is
    the same kernel on a context without sanitizers or trace, its Report never built: XLA computes
    only what the outputs need."""
    fut = _values_program(kernel, ctx, gm, key, name, extents, keep_unwritten)
    if not fut.done() or fut.exception() is not None:
        return None
    outs, overlap = fut.result()(gm)
    return outs if int(overlap) == 0 else None


def _values_program(kernel, ctx: Context, gm: dict, key, name: str, extents, keep_unwritten: bool):
    """The future of the compiled outputs' program (:func:`_values_run`): ``gm -> (outputs, elements
    two cores wrote)``."""
    vctx = dataclasses.replace(ctx, checks="none", trace_capacity=0)

    def values(gm):
        with sanitize.tracing(sanitize.SiteTable(name, vctx)):
            core0 = init_core(vctx, gm, extents)
            own, shared = jax.vmap(
                lambda b: split_shared(kernel(per_core(core0, b), b)),
                axis_name=CORE_AXIS,
                out_axes=(0, None),
            )(jnp.arange(vctx.n_cores, dtype=jnp.int32))
        initial = core0.gm if keep_unwritten else None
        outs, overlap, _ = merge_outputs(vctx, join_shared(own, shared), initial=initial)
        return outs, overlap

    # keyed on the context without sanitizers: a kernel run with checks on and off shares it
    return programs.compile_later(("values", key[0], vctx) + key[2:], values, gm)


def _timing_report(key, timing) -> Report | None:
    """The launch's report from ``timing()`` (the Board: its clocks, busy cycles, instruction counts
    and counters), computed once a ``key``; None where the Board does not price the kernel."""
    tkey = ("timing",) + key
    report = _REPORTS.get(tkey)
    if report is None:
        try:
            report = timing()
        except BoardUnsupported:
            report = _UNPRICED
        _keep(tkey, report)
    else:
        _REPORTS.move_to_end(tkey)
    return None if report is _UNPRICED else report


def _timed_apart(kernel, ctx: Context, gm: dict, key, name: str, extents, keep_unwritten: bool, timed):
    """(outputs, report) of an unchecked launch whose report ``timed`` the Board computed: the outputs
    by the outputs' program alone; None where two cores raced on an element (the whole program's
    report then)."""
    outs, overlap = _values_program(kernel, ctx, gm, key, name, extents, keep_unwritten).result()(gm)
    return None if int(overlap) else (outs, timed)


# A launch's figures of time (the Board's where it prices the launch): a checked program drops them
_CLOCKS = ("pipe_free", "busy", "n_instr", "counters")


def _clockless(run):
    """``run`` whose report's clocks, busy cycles, instruction counts and counters are zeros: XLA
    computes none of them (the sanitizers' log and analysis, the outputs, the merge stay)."""

    def fn(gm):
        outs, report = run(gm)
        return outs, dataclasses.replace(report, **{f: jnp.zeros_like(getattr(report, f)) for f in _CLOCKS})

    return fn


_UNPRICED = "the Board does not price this kernel"


_REPORTS: collections.OrderedDict = collections.OrderedDict()
_REPORTS_KEPT = 256
_REPORTS_BYTES = 256 << 20  # a checked run's sanitizer log is MBs: bound the bytes too


def kept_report(key: Hashable, make: Callable[[], Report], traced: bool = False) -> Report:
    """The report ``make()`` returns, kept under ``key`` (the last 256, and at most 256 MB of arrays:
    least recently used out).

    For a kernel whose output values are computed apart from its timing (``kernels/values.py``):
    ``make`` runs it timing-only, with its GM writes marked, on zeros of its inputs' shapes. No
    figure of that report depends on the data, so it is computed once, and a repeat call does only
    the data work. ``traced``: the caller is inside a trace (its inputs are tracers, under
    ``jax.jit`` or ``vmap``); ``make`` then runs in a thread of its own, where no trace is active,
    so the launch compiles and runs as one program and its report is concrete (it enters the
    caller's program as constants). A kept report's sanitizer findings are raised or warned again
    as a fresh run's would be."""

    def outside(fn, *args):
        if not traced:
            return fn(*args)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:  # JAX's trace state is per thread
            return pool.submit(fn, *args).result()

    report = _REPORTS.get(key)
    if report is None:
        report = outside(make)
        _keep(key, report)
    else:
        _REPORTS.move_to_end(key)
        outside(sanitize.raise_or_warn, report)  # (make's launch raised or warned them the first time)
    return report


def _keep(key: Hashable, report: Report) -> None:
    """Keep ``report`` under ``key`` (the last 256, at most 256 MB of arrays: least recently used out)."""
    _REPORTS[key] = report
    nbytes = {k: sum(getattr(a, "nbytes", 0) for a in jax.tree.leaves(r)) for k, r in _REPORTS.items()}
    while len(_REPORTS) > 1 and (len(_REPORTS) > _REPORTS_KEPT or sum(nbytes.values()) > _REPORTS_BYTES):
        nbytes.pop(_REPORTS.popitem(last=False)[0])


def timing_apart() -> bool:
    """Whether a kernel's report may come from :func:`kept_report`, its data computed apart: not
    while a kernel transform is in effect (the mutation sweep's, whose mutant index may be traced
    and which changes the program without changing its key)."""
    return not TRACE.flag_transforms


def clear_kept_reports() -> None:
    """Forget every report :func:`kept_report` keeps."""
    _REPORTS.clear()


def _frozen(extents):
    """A dict of extents (tuples of concrete ints) as a hashable key part."""
    if extents is None:
        return None
    return tuple(sorted((k, tuple(int(e) for e in v)) for k, v in extents.items()))


def _launch(
    kernel,
    ctx: Context,
    gm: dict,
    *,
    name: str,
    workload: str,
    operand: str,
    extents,
    keep_unwritten: bool = False,
    finish=None,
    sequential: bool = False,
) -> tuple[dict, Report]:
    """:func:`launch`'s body, traced (or run op by op). ``sequential``: the cores one after another in
    Python (no vmap: a kernel run call by call), each from the GM, writers and L2 record the core before
    it left, so its reads and writes come after all of that core's (not interleaved by instruction)."""
    table = sanitize.SiteTable(name, ctx)
    with sanitize.tracing(table):
        core0 = init_core(ctx, gm, extents)
        if sequential:  # core b starts from the shared state core b - 1 left (GM, L2, writers)
            each, shared = [], split_shared(core0)[1]
            for b in range(ctx.n_cores):
                c, shared = split_shared(kernel(join_shared(core0, shared).replace(block=jnp.int32(b)), b))
                each.append(c)
            cores = join_shared(jax.tree.map(lambda *xs: jnp.stack(xs), *each), shared)
        else:
            # cores always under vmap (one core too), their shared state one array along this axis
            # (core/shared.py): vmap hands it back unbatched (out_axes None), never a copy per core
            def one(b):
                return split_shared(kernel(per_core(core0, b), b))

            own, shared = jax.vmap(one, axis_name=CORE_AXIS, out_axes=(0, None))(
                jnp.arange(ctx.n_cores, dtype=jnp.int32)
            )
            cores = join_shared(own, shared)
    race = bool(cores.san) and ctx.checks.race
    merged = merge_outputs(ctx, cores, with_site=race, initial=core0.gm if keep_unwritten else None)
    outs, overlap, unwritten = merged[:3]
    report = Report.from_cores(
        cores, name=name, workload=workload, operand=operand, overlapping_writes=overlap, unwritten=unwritten
    )
    if cores.san:  # each core's event log; its analysis runs here (inline) or when checked
        log, n = cores.san["log"], cores.san["n"]
        if ctx.checks.inline:
            report = dataclasses.replace(
                report, san_logged=n, san_findings=sanitize.run_analysis(ctx, log, n, cores.flag_set, table)
            )
        else:
            report = dataclasses.replace(report, san_log=log, san_logged=n, san_flags=cores.flag_set)
    report = dataclasses.replace(
        report, overlap_at=merged[3] if race else None, sanitizer=table, l2_kept=l2.kept(ctx.hw, ctx.gm)
    )
    return outs, (report if finish is None else finish(report))

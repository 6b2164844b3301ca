"""``@asc.kernel``, ``kernel[num_blocks](...)`` / ``asc.launch`` and ``asc.loop``.

A launch runs the kernel function twice (``runtime.py``): a plan pass that learns its buffers and
how it addresses GM, then the run pass, traced on the emulated core by ``core.run.launch`` (one
XLA program over every block, kept and reused: a repeat with new data compiles nothing). With
``jit=False`` the run pass executes call by call, block after block, in plain Python: ``print``,
``pdb`` and ``asc.printf`` see concrete values, and ``asc.last_run()`` keeps the state a failure
left.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import inspect
import math

import jax
import jax.numpy as jnp
import numpy as np

from npu_jax.asc import blockidx, runtime
from npu_jax.asc.onboard import board_run
from npu_jax.asc.runtime import AscError, KernelRun
from npu_jax.asc.tensors import GlobalAddress
from npu_jax.asc.types import dtype_of
from npu_jax.core import run as core_run
from npu_jax.core import wide
from npu_jax.core.board import BoardUnsupported
from npu_jax.core.buffers import Plan
from npu_jax.core.policy import Policy
from npu_jax.core.state import Context, GmSpec
from npu_jax.errors import AlignmentError, CapacityError
from npu_jax.hw import presets
from npu_jax.hw.config import HardwareConfig

CORES = ("vector", "cube", "mix")
_LAST: list = [None]
# A kernel's plan pass (its buffers, GM use, paths through it) is the same for the same function,
# static arguments, GM shapes and formats, blocks and chip (what its compiled program is keyed on
# too): kept, the last 256, so a repeat call runs none of the kernel's Python (1-2 ms a call)
_PLANS: collections.OrderedDict = collections.OrderedDict()
_PLANS_KEPT = 256


class Kernel:
    """A kernel function (``__global__ __aicore__``); launch it with ``kernel[num_blocks](args...)``."""

    def __init__(self, fn, core: str | None = None):
        if core is not None and core not in CORES:
            raise ValueError(f"@asc.kernel(core=...) is one of {CORES}, got {core!r}.")
        self.fn = fn
        self.core = core
        functools.update_wrapper(self, fn)

    def __getitem__(self, num_blocks):
        return functools.partial(launch, self, num_blocks)

    def __call__(self, *args, **kwargs):
        raise TypeError(
            f"launch a kernel with {self.fn.__name__}[num_blocks](args..., hw=hw) or "
            f"asc.launch({self.fn.__name__}, num_blocks, args..., hw=hw)."
        )

    def __repr__(self) -> str:
        return f"asc.kernel({self.fn.__name__}, core={self.core})"


def kernel(fn=None, *, core: str | None = None):
    """``@asc.kernel`` (or ``@asc.kernel(core="vector" | "cube" | "mix")``): a kernel function.

    Its GM arguments arrive as :class:`~npu_jax.asc.tensors.GlobalAddress` (flat memory), its other
    arguments (ints, floats, tuples: a tiling struct) as they are, static. Without ``core`` the launch
    puts a kernel that issues only vector work on the vector cores (the 910B's AIV) and anything with
    Cube work on the cube cores; ``"mix"`` is the vendor's 1 AIC : 2 AIV, here one core with every pipe.
    """
    if fn is None:
        return lambda f: Kernel(f, core)
    return Kernel(fn, core)


def loop(n: int, *, unroll: int = 1):
    """``@asc.loop(n)``: run the decorated ``body(i)`` for i in 0..n-1 as one ``fori_loop`` (compile
    time flat in n). The body must leave every queue as it found it (as many alloc/enque as
    deque/free per queue); with ``jit=False`` it is a Python loop and ``i`` a Python int."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise AscError(
            f"asc.loop(n): n is a Python int >= 0, got {n!r} (a traced trip count is not supported)."
        )
    n = int(n)

    def deco(body):
        run = runtime.current()
        before = [(q.n_alloc, q.n_queued, q.n_deq) for q in run.queues]
        fifos = [list(q.fifo) for q in run.queues]
        if run.planning or run.eager or run.board:
            for i in range(min(n, 1) if run.planning else n):
                body(i)
                if i == 0 and run.board:  # (its first iteration: the balance the traced loop checks)
                    _balanced(run, body, before, fifos, restore=False)
            return body

        def step(i, carry):
            run.core, run.state = carry
            run.loop_depth += 1
            try:
                body(i)
            finally:
                run.loop_depth -= 1
            return run.core, run.state

        if n:
            carry = (run.core, run.state)
            # trace the body once to check its balance, then the loop itself
            run.core, run.state = jax.lax.fori_loop(0, n, step, carry, unroll=unroll)
        _balanced(run, body, before, fifos, restore=True)
        return body

    return deco


def _balanced(run, body, before, fifos, restore: bool) -> None:
    """Refuse a loop body that changes a queue's counts (``asc.loop``); ``restore``: put back the FIFOs
    the traced body consumed."""
    after = [(q.n_alloc, q.n_queued, q.n_deq) for q in run.queues]
    for q, b, a, f in zip(run.queues, before, after, fifos):
        if a != b:
            raise AscError(
                f"asc.loop at {body.__code__.co_filename}:{body.__code__.co_firstlineno}: one iteration changes "
                f"{q!r} from {b} to {a} (allocated, enqueued, dequeued); each iteration must leave every queue "
                f"as it found it (each alloc_tensor enqueued or freed, each deque freed). Use a Python for "
                f"loop to unroll an unbalanced one."
            )
        if restore:
            q.fifo = f


def launch(
    kern,
    num_blocks: int,
    *args,
    hw: HardwareConfig | None = None,
    checks=None,
    jit: bool = True,
    timing_only: bool = False,
    trace: bool | int = False,
    policy: Policy | None = None,
    name: str | None = None,
    board: bool | None = None,
):
    """Run ``kern`` on ``num_blocks`` blocks; returns (outs, Report).

    Args:
        kern: an ``@asc.kernel`` function (a plain function is taken as one).
        num_blocks: blocks to launch, in [1, 65535]. More blocks than the chip has cores run in waves:
            block b starts on core b % cores when block b - cores ends.
        *args: the kernel's arguments: arrays are GM (flat memory, their contents the initial GM);
            Python scalars, tuples and dataclasses are static.
        hw: the chip (``npu_jax.presets.ascend910b()`` by default).
        checks: the sanitizers (``"all"``, ``"none"``, names, a ``Checks``; None: the process default).
        jit: False runs the kernel call by call (Python control flow, print and pdb work).
        timing_only: no data moves (for sizes whose data would not fit): every cycle and byte.
        trace: keep a timeline (True, or the number of events per core) for ``report.to_chrome_trace``.
        policy: precision what-ifs (rounding of vector ops); the hardware's rules by default.
        name: the report's kernel name (default: the function's).
        board: whether the report's figures of time come from the timing Board (``core/board.py``:
            numpy clocks, nothing compiled; the emulator's figures, ``tests/test_board.py``) instead of
            the compiled program. None (default): for a run with data and no trace; with no checks its
            outputs then come from a program of the data alone, with checks the sanitizers' program
            is compiled without the clocks. True: ``timing_only`` launches with no checks too (what the
            tile search and autotune price with; the instructions' own operand checks then run only
            when the pick runs). False: never. A kernel that reads data (GetValue, a print of a tensor)
            or syncs across cores always runs on the emulator.

    Returns:
        outs: every GM array argument's final contents, in order, each in its shape and dtype;
        report: the usual :class:`~npu_jax.report.report.Report` (cycles, pipes, bytes, findings).
    """
    kern = kern if isinstance(kern, Kernel) else Kernel(kern)
    if (
        isinstance(num_blocks, bool)
        or not isinstance(num_blocks, (int, np.integer))
        or not 1 <= num_blocks <= 65535
    ):
        raise AscError(
            f"num_blocks must be an int in [1, 65535] (the vendor's launch limit), got {num_blocks!r}; usually the "
            f"chip's core count or a multiple."
        )
    num_blocks = int(num_blocks)
    hw = presets.ascend910b() if hw is None else hw
    if not isinstance(hw, HardwareConfig):
        raise TypeError(
            f"hw must be a HardwareConfig (npu_jax.presets.ascend910b()), got {type(hw).__name__}."
        )
    if board is not None and not isinstance(board, bool):
        raise TypeError(f"board must be None, True or False, got {board!r}.")
    for flag, v in (("jit", jit), ("timing_only", timing_only)):
        if not isinstance(v, bool):
            raise TypeError(f"{flag} must be True or False, got {v!r}.")
    policy = Policy() if policy is None else policy
    fn = kern.fn
    sig = inspect.signature(fn)
    params = list(sig.parameters)
    try:
        bound = sig.bind(*args)
    except TypeError:
        raise TypeError(
            f"{fn.__name__} takes {len(params)} argument(s) ({', '.join(params)}), got {len(args)}."
        ) from None
    bound.apply_defaults()
    args = tuple(bound.arguments[p] for p in params)
    gm_args, gm_vals, statics = {}, {}, []
    for p, a in zip(params, args):
        if hasattr(a, "shape") and hasattr(a, "dtype") and not np.isscalar(a):
            if isinstance(a, jax.core.Tracer):
                raise AscError(
                    f"asc.launch under a JAX transform is not supported (argument {p!r} is traced)."
                )
            dt = dtype_of(a.dtype)
            if isinstance(a, jax.ShapeDtypeStruct) and not timing_only:
                raise AscError(
                    f"argument {p!r} is a jax.ShapeDtypeStruct (a shape without data): pass timing_only=True, "
                    f"or an array."
                )
            gm_args[p] = (math.prod(a.shape), dt, tuple(a.shape))
            gm_vals[p] = a
            statics.append(None)
        else:
            try:
                hash(a)
            except TypeError:
                raise TypeError(
                    f"argument {p!r} of {fn.__name__} is neither an array (GM) nor a hashable static value "
                    f"(int, float, tuple, frozen dataclass): got {type(a).__name__}."
                ) from None
            statics.append(a)

    def call_args():
        return [
            GlobalAddress(p, 0, gm_args[p][1], gm_args[p][0]) if p in gm_args else s
            for p, s in zip(params, statics)
        ]

    # ---- the plan pass: once, or once a block where the kernel branches on its block index
    def plan_pass(block: int) -> KernelRun:
        p = KernelRun(runtime.PLAN, hw, n_blocks=num_blocks, gm_args=gm_args)
        p.block = block
        with runtime.active(p):
            fn(*call_args())
        return p

    gm_key = tuple((p, v[2], v[1].fmt) for p, v in gm_args.items())  # GM shapes and formats
    pkey = (fn, tuple(statics), gm_key, num_blocks, hw)
    kept = _PLANS.get(pkey)
    if kept is None:
        plan = plan_pass(0)
        paths = [plan]  # one plan per path through the kernel
        group_of = None
        if plan.decisions:
            plan, paths, group_of = blockidx.paths(plan, plan_pass, num_blocks, fn.__name__)
        kept = _PLANS[pkey] = (plan, paths, group_of)
        while len(_PLANS) > _PLANS_KEPT:
            _PLANS.popitem(last=False)
    else:
        _PLANS.move_to_end(pkey)
    plan, paths, group_of = kept
    core_kind = kern.core or ("cube" if any(r.buffer != "UB" for r in plan.requests) else "vector")
    physical = hw.num_vector_cores if core_kind == "vector" else hw.num_cores
    if (
        core_kind != "vector"
        and plan.requests
        and any(r.buffer == "UB" for r in plan.requests)
        and kern.core is None
    ):
        core_kind = "mix"
    allocs = _allocate(hw, plan)
    specs = tuple(
        GmSpec(
            p,
            _gm_shape(p, size, plan),
            _gm_shape(p, size, plan),
            dt.fmt,
            output=p in plan.gm_use and plan.gm_use[p].written,
            l2_bypass=p in plan.gm_use and plan.gm_use[p].l2_bypass,
        )
        for p, (size, dt, _) in gm_args.items()
    )
    ctx = Context(
        hw,
        tuple(allocs.values()),
        specs,
        policy,
        n_cores=num_blocks,
        trace_capacity=_trace_capacity(trace),
        move_data=not timing_only,
        checks=checks,
    )
    # timing-only: no GM data at all (sizes whose data would not fit); the core starts from nothing
    gm = {} if timing_only else {s.name: jnp.reshape(jnp.asarray(gm_vals[s.name]), s.shape) for s in specs}
    holder = {}

    holder["runs"] = []

    def kernel_fn(core, b):
        if num_blocks > physical:  # blocks run in waves: only `physical` share the GM bandwidth at once
            core = core.replace(active=jnp.asarray(physical, jnp.int32))
        if group_of is None or not jit:
            return path_fn(core, b, paths[0] if group_of is None else paths[group_of[int(b)]])
        # every path runs on every core, its instructions predicated on the core's own path (one program:
        # the cores stay one vmap, the L2 shared between them)
        mine = jnp.asarray(group_of)[b]
        for g, p in enumerate(paths):
            core = path_fn(core.replace(pred=mine == g), b, p)
        return core.replace(pred=None)

    def path_fn(core, b, path):
        run = KernelRun(runtime.RUN, hw, n_blocks=num_blocks, gm_args=gm_args, plan=plan, allocs=allocs)
        run.decisions = path.decisions
        run.core, run.eager = core, not jit
        run.block = b
        holder["run"] = run
        holder["runs"].append(run)
        _LAST[0] = run
        with runtime.active(run):
            blockidx.traced_call(fn, call_args())
            for q in run.queues:
                if q.busy():
                    tok = q.first_live()  # the finding is at the AllocTensor of the first one never freed
                    tok = tok.where if tok is not None else q.where
                    run.finding(
                        "synccheck",
                        "tensor never freed",
                        "FreeTensor",
                        "-",
                        f"{q!r} ends the kernel with {q.n_alloc} allocated, {q.n_queued} enqueued and {q.n_deq} "
                        f"dequeued tensor(s) never freed (first at {tok}).",
                        "free_tensor every tensor the kernel allocates (after its last use).",
                        alloc=q.position.name,
                        where=tok,
                    )
                q.drain(run)
        return run.core

    def finish(report):
        seen, found = set(), []
        for run in holder["runs"] or [holder["run"]]:  # every path's trace-time findings, once each
            for f in run.findings:
                if (f.where, f.kind) not in seen:
                    seen.add((f.where, f.kind))
                    found.append(f)
        fs = tuple(
            dataclasses.astuple(dataclasses.replace(f, kernel=report.name, core=-1))[:13]
            + (tuple(f.tile.items()),)
            + (f.detail, f.fix)
            for f in found
        )
        return dataclasses.replace(report, static_findings=fs, pipe_free=_waves(report.pipe_free, physical))

    kname = name or fn.__name__
    if board and timing_only and jit and not ctx.trace_capacity and not ctx.checks.any:  # (else: below)
        try:
            report = board_run(kernel_fn, ctx, kname, finish)
        except BoardUnsupported:
            pass
        else:
            return [None for p in params if p in gm_args], report
    # jit=False: the cores one after another, op by op (core.run.launch's sequential); a kernel that reads
    # no value into a scalar has the same report for every input: a repeat call runs its outputs' program
    # alone (values_apart), the report the timing Board's unless board=False
    key = ("asc", fn, tuple(statics), gm_key, num_blocks, core_kind, policy)
    outs, report = core_run.launch(
        kernel_fn,
        ctx,
        gm,
        name=kname,
        workload="asc",
        key=key,
        keep_unwritten=True,
        finish=finish,
        values_apart=not any(p.reads_data for p in paths),
        board=board is not False,
        sequential=not jit,
    )
    out_list = []
    for p, a in zip(params, args):
        if p in gm_args:
            if p in outs:
                o = None if timing_only else np.asarray(outs[p])
                out_list.append(o.reshape(gm_args[p][2]) if o is not None else None)
            else:
                out_list.append(a if not timing_only else None)
    return out_list, report


def _waves(pipe_free, physical: int):
    """More blocks than cores: block b starts when block b - cores ends (its core's previous block),
    so its pipes' end times shift by the ends of the blocks its core ran before (exact, wide)."""
    n = pipe_free.shape[0]
    if n <= physical:
        return pipe_free
    ends = wide.max_over(pipe_free, 1)  # (n, 2): each block's own end
    starts = [wide.zeros(())] * physical
    for b in range(physical, n):
        starts.append(wide.add(starts[b - physical], ends[b - physical]))
    return wide.add(pipe_free, jnp.stack(starts)[:, None, :])


def _trace_capacity(trace) -> int:
    if trace is False or trace is None:
        return 0
    if trace is True:
        return 4096
    if isinstance(trace, int) and trace > 0:
        return trace
    raise TypeError(f"trace is True, False or a number of events per core, got {trace!r}.")


def _gm_shape(name: str, size: int, plan: KernelRun) -> tuple[int, ...]:
    """A GM argument's shape in the core: flat, or rows of the pitch a Cube copy reads it with."""
    use = plan.gm_use.get(name)
    if use is None or use.pitch is None:
        return (size,)
    if size % use.pitch:
        raise NotImplementedError(
            f"asc: GM argument {name!r} ({size} elements) is read as rows of {use.pitch} at {use.where}, which do not "
            f"divide it; see docs/kernels.md."
        )
    return (size // use.pitch, use.pitch)


def _allocate(hw, plan: KernelRun) -> dict:
    """The plan's buffer requests as allocations of the core (capacity and alignment checked)."""
    p = Plan(hw)
    out = {}
    for r in plan.requests + ([plan.pool] if plan.pool is not None else []):
        dt = r.dtype or dtype_of(np.float16)
        if r.raw:  # used as several types: bytes, read as each (core/isa/data.py)
            if r.shape is not None:
                raise NotImplementedError(
                    f"asc: the {r.position.name} tile made at {r.where} is used as {sorted(map(str, r.dtypes))}; a Cube "
                    f"tile keeps one type (reinterpret_cast works on UB tensors). See docs/kernels.md."
                )
            dt = dtype_of(np.uint8)
        shape = r.shape or (r.nbytes // dt.itemsize,)
        try:
            out[r.index] = p.alloc(
                r.buffer,
                f"{r.kind}{r.index}_{r.position.name}",
                shape,
                dt.fmt,
                stages=r.num,
                fmt=r.fmt,
                offset=r.addr,
            )
        except CapacityError as e:
            raise CapacityError(f"init_buffer at {r.where}: {e}") from None
        except AlignmentError as e:
            raise AscError(f"the tensor at {r.where}: {e}") from None
    return out


def last_run() -> KernelRun | None:
    """The last kernel run traced (with ``jit=False``: its state as the kernel left it, or as a failure
    left it): ``.core`` is the emulated core, ``.state`` the queues'."""
    return _LAST[0]

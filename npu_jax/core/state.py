"""The per-core machine state: one pytree, transformed by pure instructions.

:class:`Core` carries the arrays (GM tensors, on-chip allocations, pipe clocks, flags, counters,
trace) and, as static metadata, the :class:`Context` (hardware, allocations, GM tensor specs,
policy). Its methods are the instruction set; each returns a new Core. The methods dispatch to the
functions that :mod:`npu_jax.core.isa` binds here (:func:`bind_instructions`), so this module
imports no instruction.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp

from npu_jax.core import l2, sanitize, wide
from npu_jax.core.buffers import DTYPES, Alloc, poison
from npu_jax.core.pipes import COUNTERS, PIPES
from npu_jax.core.policy import Policy
from npu_jax.core.sanitize import Checks
from npu_jax.core.trace import init_trace, record_tile
from npu_jax.errors import WindowError
from npu_jax.hw.config import HardwareConfig


@dataclasses.dataclass(frozen=True)
class GmSpec:
    """A global-memory tensor: logical ``shape``; stored zero-padded to ``padded`` so tile windows
    at the edges stay in bounds (copies still move and charge only the logical part).

    ``shape`` is static. A launch may declare a smaller *traced* logical extent per tensor
    (``init_core(..., extents=...)``): one compiled kernel then serves every layer that fits.
    """

    name: str
    shape: tuple[int, ...]
    padded: tuple[int, ...]
    dtype: str
    output: bool = False
    l2_bypass: bool = False  # reads skip L2 (the vendor's CACHE_MODE_DISABLE): never hit, never kept


@dataclasses.dataclass(frozen=True)
class GmWindow:
    """A window of a GM tensor: traced ``starts``, static ``sizes``, and optionally a traced
    ``limit`` per dim (None = no limit) on how much of it is really moved."""

    name: str
    starts: tuple
    sizes: tuple[int, ...]
    limit: tuple | None = None


@dataclasses.dataclass(frozen=True)
class Context:
    """Static description of one kernel launch (hashable: it is pytree metadata)."""

    hw: HardwareConfig
    allocs: tuple[Alloc, ...]
    gm: tuple[GmSpec, ...]
    policy: Policy
    n_cores: int = 1
    trace_capacity: int = 0
    move_data: bool = True  # False = timing-only: every cost and counter, no data moved
    # timing-only whose data is computed apart (kernels/values.py): GM output writes still marked,
    # so the merge counts overlapping and unwritten elements as a full run does
    mark_writes: bool = False
    checks: Checks | None = None  # sanitizers to run; None = the process default (sanitize.py)
    l2_modes: tuple = ()  # (GM input name, L2 mode) pairs: see l2.py; an input not named streams

    def __post_init__(self):
        object.__setattr__(self, "checks", Checks.parse(self.checks))

    @classmethod
    def of(cls, plan, gm, policy: Policy, n_cores: int = 1, **launch) -> Context:
        """The Context of a launch of the kernel whose buffers ``plan`` (a :class:`~npu_jax.core.buffers.Plan`)
        allocated, on GM tensors ``gm`` (GmSpecs), over ``n_cores`` cores; ``launch``: the other fields
        (``trace_capacity``, ``move_data``, ``mark_writes``, ``checks``, ``l2_modes``)."""
        return cls(plan.hw, tuple(plan.allocs), tuple(gm), policy, n_cores=n_cores, **launch)

    def alloc(self, name: str) -> Alloc:
        for a in self.allocs:
            if a.name == name:
                return a
        raise KeyError(name)

    def gm_spec(self, name: str) -> GmSpec:
        for g in self.gm:
            if g.name == name:
                return g
        raise KeyError(f"no GM tensor named {name!r}; known: {[g.name for g in self.gm]}")

    @property
    def gm_rate(self) -> float:
        return self.hw.gm_rate(self.n_cores)


_DATA_FIELDS = (
    "gm",
    "gm_shape",
    "gm_written",
    "buf",
    "pipe_free",
    "pipe_busy",
    "n_instr",
    "flag_time",
    "flag_set",
    "counters",
    "trace",
    "san",
    "l2",
    "block",
    "active",
    "pred",
)


@dataclasses.dataclass(frozen=True)
class Core:
    """One AI Core's state. Methods are instructions (see ``isa/``, ``sync.py``).

    Shapes (P = len(PIPES), E = hw.num_event_ids, C = len(COUNTERS), T = trace capacity;
    a trailing 2 is a wide integer, see ``wide.py``):
    """

    gm: dict  # name -> padded array (bf16 as its bits: gm_values), shared by the cores (core/shared.py)
    gm_shape: dict  # name -> (ndim,) int32: logical extent (traced; <= GmSpec.shape)
    gm_written: dict  # output name -> ints (padded shape): each element's writer (isa/data.write_gm; shared)
    buf: dict  # alloc name -> (stages, *shape) array
    pipe_free: jax.Array  # (P, 2) wide: cycle at which each pipe is free
    pipe_busy: jax.Array  # (P, 2) wide: cycles each pipe spent working
    n_instr: jax.Array  # (P,) int32: instructions issued per pipe
    flag_time: jax.Array  # (P, P, E, 2) wide: cycle at which flag (src, dst, id) fired
    flag_set: jax.Array  # (P, P, E) bool: flag pending (set, not yet waited)
    counters: jax.Array  # (C, 2) wide: bytes per path, FLOPs
    trace: dict  # {} (tracing off) or the event buffer of trace.py: instructions and flag operations
    san: dict  # {} (checks off) or the sanitizers' state: see sanitize.init_state
    l2: dict  # tracked GM input name -> bool (padded shape): elements some core has read (l2.py)
    block: jax.Array  # () int32: this core's index (block_idx)
    ctx: Context
    # sanitizer log rows traced since the last flatten (trace-time only; see _flatten_core)
    pending: tuple = ()
    # () int32 or None: cores moving data at once, when fewer than launched (a kernel under a tiling
    # bound, its core count traced); None = ctx.n_cores. GM rates are each core's share of these.
    active: jax.Array | None = None
    # () bool or None: a predicate on every instruction and flag (None: none), while the core runs one of a
    # kernel's paths that is not its own (asc's branches on the block index, asc/blockidx.py)
    pred: jax.Array | None = None

    def replace(self, **kw) -> Core:
        return dataclasses.replace(self, **kw)

    @property
    def hw(self) -> HardwareConfig:
        return self.ctx.hw

    @property
    def active_cores(self):
        """Cores moving data at once (the GM rates' share): ``active``, or every launched core."""
        return self.ctx.n_cores if self.active is None else self.active

    def read(self, alloc: Alloc, stage=0) -> jax.Array:
        """The contents of one stage of an allocation (for kernels' own checks and tests)."""
        return jax.lax.dynamic_index_in_dim(self.buf[alloc.name], stage, keepdims=False)

    def gm_window(self, name: str, starts, sizes, limit=None) -> GmWindow:
        spec = self.ctx.gm_spec(name)
        if len(starts) != len(spec.shape) or len(sizes) != len(spec.shape):
            raise ValueError(
                f"window of {name!r} needs {len(spec.shape)} starts and sizes, got "
                f"{len(starts)} and {len(sizes)}."
            )
        for d, (s, p) in enumerate(zip(sizes, spec.padded)):
            if not 0 < int(s) <= p:
                raise ValueError(f"window size {s} on dim {d} of {name!r} must be in 1..{p}.")
            st = starts[d]
            if isinstance(st, int) and not 0 <= st <= p - int(s):
                raise WindowError(
                    f"memcheck: window of {name!r} at {tuple(starts)} size {tuple(sizes)} leaves the tensor "
                    f"on dim {d} (start {st} + size {s} > stored extent {p}); move or shrink the window."
                )
        if limit is not None and len(limit) != len(sizes):
            raise ValueError(f"limit needs one entry (or None) per dim of {name!r}.")
        return GmWindow(
            name, tuple(starts), tuple(int(s) for s in sizes), None if limit is None else tuple(limit)
        )

    # ---- the instruction set, as methods returning a new Core (see isa/, sync.py) ----
    def data_copy(
        self, *, dst, src, layout=None, kernel=None, block_n=None, outside="zero", atomic=None, when=True
    ) -> Core:
        return _op("data_copy")(
            self,
            dst=dst,
            src=src,
            layout=layout,
            kernel=kernel,
            block_n=block_n,
            outside=outside,
            atomic=atomic,
            when=when,
        )

    def load2d(self, *, dst, src, start=(0, 0), valid=None, when=True, transpose=False, shape=None) -> Core:
        return _op("load2d")(
            self, dst=dst, src=src, start=start, valid=valid, when=when, transpose=transpose, shape=shape
        )

    def load3d(self, **kw) -> Core:
        return _op("load3d")(self, **kw)

    def mmad(self, *, dst, a, b, m, n, k, init=False, when=True) -> Core:
        return _op("mmad")(self, dst=dst, a=a, b=b, m=m, n=n, k=k, init=init, when=when)

    def fixpipe(self, **kw) -> Core:
        return _op("fixpipe")(self, **kw)

    def l0c_to_ub(self, **kw) -> Core:
        return _op("l0c_to_ub")(self, **kw)

    def vector(self, op: str, dst, *srcs, **kw) -> Core:
        return _op("vector")(self, op, dst, *srcs, **kw)

    def vector_lanes(self, op: str, dst, *srcs, **kw) -> Core:
        return _op("vector_lanes")(self, op, dst, *srcs, **kw)

    def get_value(self, src, when=True):
        """(core, value): GetValue of one UB element on the Scalar pipe."""
        return _op("get_value")(self, src, when)

    def set_value(self, dst, value, when=True) -> Core:
        return _op("set_value")(self, dst, value, when)

    def scalar(self, cycles, when=True) -> Core:
        return _op("scalar")(self, cycles, when)

    def set_flag(self, event: str, event_id=0, when=True) -> Core:
        return _op("set_flag")(self, event, event_id, when)

    def wait_flag(self, event: str, event_id=0, when=True) -> Core:
        return _op("wait_flag")(self, event, event_id, when)

    def pipe_barrier(self, pipe: str = "ALL", when=True) -> Core:
        return _op("pipe_barrier")(self, pipe, when)

    def at_tile(self, **coords) -> Core:
        """Name the tile being worked on (up to 4 ints, traced allowed), so that sanitizer findings
        say where in the loop nest they happened, and trace events carry them. A no-op when every
        check and the trace are off."""
        core = sanitize.at_tile(self, coords)
        return core.replace(trace=record_tile(core.trace, coords)) if core.trace else core


# name -> function(core, ...) -> Core: the instruction set behind Core's methods. Filled once, when
# npu_jax.core is imported, by npu_jax.core.isa (which imports the instructions and sync.py).
_INSTRUCTIONS: dict[str, Callable[..., Core]] = {}
_METHODS = (
    "data_copy",
    "load2d",
    "load3d",
    "mmad",
    "fixpipe",
    "l0c_to_ub",
    "vector",
    "vector_lanes",
    "get_value",
    "set_value",
    "scalar",
    "set_flag",
    "wait_flag",
    "pipe_barrier",
)


def bind_instructions(**functions: Callable[..., Core]) -> None:
    """Make ``functions`` (name -> instruction) the targets of Core's instruction methods."""
    unknown = sorted(set(functions) - set(_METHODS))
    if unknown:
        raise ValueError(f"no Core method named {unknown}; the instruction methods are {_METHODS}.")
    _INSTRUCTIONS.update(functions)


def _op(name: str) -> Callable[..., Core]:
    try:
        return _INSTRUCTIONS[name]
    except KeyError:
        raise RuntimeError(
            f"Core.{name} has no instruction bound; import npu_jax.core (its isa module binds them)."
        ) from None


def _flatten_core(core: Core):
    # The sanitizers' log rows of the instructions traced since the last flatten are written as
    # one block here: a fori_loop body (flattened when it returns) then costs one log write, not
    # one per instruction -- XLA's CPU backend compiles each write as a kernel of its own.
    san = sanitize.flush(core.san, core.pending) if core.pending else core.san
    return tuple(san if f == "san" else getattr(core, f) for f in _DATA_FIELDS), core.ctx


def _unflatten_core(ctx, children) -> Core:
    return Core(**dict(zip(_DATA_FIELDS, children)), ctx=ctx)


jax.tree_util.register_pytree_node(Core, _flatten_core, _unflatten_core)


# GM arrays of these formats are kept as their bits: XLA:CPU computes an update of bf16 values in fp32,
# converting the whole array there and back for every write (isa/data.write_gm)
_GM_BITS = {"bf16": jnp.uint16}


def gm_stored(x, fmt: str):
    """A GM tensor's values of format ``fmt`` as the core keeps them (bf16 as its bits)."""
    return jax.lax.bitcast_convert_type(x, _GM_BITS[fmt]) if fmt in _GM_BITS else x


def gm_values(x, fmt: str):
    """The values of GM data of format ``fmt`` read from the core (the inverse of :func:`gm_stored`)."""
    return jax.lax.bitcast_convert_type(x, DTYPES[fmt]) if fmt in _GM_BITS else x


def writer_dtype(n_cores: int):
    """The integer type of a GM output's writer record: the block indices and -1, -2, in as few bytes
    as they fit (the record is read and written with every output element)."""
    return jnp.int8 if n_cores < 127 else jnp.int16 if n_cores < 32767 else jnp.int32


def init_core(ctx: Context, gm: dict, extents: dict | None = None) -> Core:
    """A fresh core: GM tensors padded, allocations poisoned (NaN), clocks and flags at zero.

    ``extents`` optionally gives, per GM tensor, a (traced) logical extent smaller than its spec's
    shape; data outside it counts as absent (never moved, never charged, never written).
    """
    extents = extents or {}
    arrays, written, shapes = {}, {}, {}
    for spec in ctx.gm:
        if spec.name in gm:
            x = jnp.asarray(gm[spec.name])
            if tuple(x.shape) != spec.shape:
                raise ValueError(
                    f"GM tensor {spec.name!r} has shape {tuple(x.shape)}, expected {spec.shape}."
                )
            x = x.astype(DTYPES[spec.dtype])
        elif spec.output or not ctx.move_data:  # timing-only: no data is read (XLA drops these)
            x = jnp.zeros(spec.shape, DTYPES[spec.dtype])
        else:
            raise ValueError(f"GM input {spec.name!r} was not given.")
        pad = [(0, p - s) for s, p in zip(spec.shape, spec.padded)]
        arrays[spec.name] = gm_stored(jnp.pad(x, pad) if any(p for _, p in pad) else x, spec.dtype)
        ext = extents.get(spec.name, spec.shape)
        if len(ext) != len(spec.shape):
            raise ValueError(f"extent of {spec.name!r} needs {len(spec.shape)} entries, got {len(ext)}.")
        shapes[spec.name] = jnp.stack([jnp.asarray(e, jnp.int32) for e in ext])
        if spec.output:
            written[spec.name] = jnp.full(
                spec.padded, -1, writer_dtype(ctx.n_cores)
            )  # isa/data.py's UNWRITTEN
    P, E, T = len(PIPES), ctx.hw.num_event_ids, ctx.trace_capacity
    return Core(
        gm=arrays,
        gm_shape=shapes,
        gm_written=written,
        buf={a.name: poison(a) for a in ctx.allocs},
        pipe_free=wide.zeros((P,)),
        pipe_busy=wide.zeros((P,)),
        n_instr=jnp.zeros((P,), jnp.int32),
        flag_time=wide.zeros((P, P, E)),
        flag_set=jnp.zeros((P, P, E), jnp.bool_),
        counters=wide.zeros((len(COUNTERS),)),
        trace=init_trace(T),
        san=sanitize.init_state(ctx),
        l2=l2.init_state(ctx),
        block=jnp.zeros((), jnp.int32),
        ctx=ctx,
    )


def padded_shape(shape, multiples) -> tuple[int, ...]:
    return tuple(int(math.ceil(s / m) * m) for s, m in zip(shape, multiples))

"""Sanitizers inside the jitted program: racecheck, memcheck, initcheck, synccheck.

Named after the vendor's own sanitizer. Data is computed in program order, so a missing
``WaitFlag`` changes nothing the emulator computes -- it is a silent race on hardware. These checks
look for it (docs/sanitizers.md):

* **racecheck** -- a vector clock per pipe (``vc[p, q]``: how many instructions of pipe q are known
  to have finished before pipe p's next one). ``SetFlag<S_D>`` snapshots ``vc[S]`` into the flag;
  ``WaitFlag<S_D>`` joins it into ``vc[D]``; ``PipeBarrier<ALL>`` joins every pipe. Queues are
  flags, so they carry clocks too. Every read and write of an allocation stage is checked for
  happens-before against the last write (RAW, WAW) and the reads since (WAR) from other pipes;
  output elements written by two cores are named by :func:`~npu_jax.core.run.merge_outputs`.
* **memcheck** -- windows of GM tensors and allocations (starts, stages, Mmad/Fixpipe extents,
  fractal alignment) out of range. Static indices raise :class:`~npu_jax.errors.WindowError` at
  trace time; traced ones are checked in the program (XLA would otherwise clamp them silently).
* **initcheck** -- a read of an allocation stage nothing has written.
* **synccheck** -- a ``WaitFlag`` with no pending ``SetFlag`` (a hang on hardware), a flag set
  twice, flags left set at the end of the kernel, event ids outside the chip's range.

How: every instruction appends one row to an event log in the core's state (site id + the traced
stages, event id, memcheck result, ``when``); the static facts of each site (op, pipe, source line,
allocations) sit in a :class:`SiteTable` built at trace time. :func:`analyze` -- one
kernel-independent ``while_loop`` -- replays the log and keeps the first finding of each check
(instruction index, pipe, allocation, stage, tile coordinates, the conflicting access). It runs as
its own jitted program when the Report is checked (compiled once per process and shape), or inside
the kernel's program with ``Checks(inline=True)``. :func:`~npu_jax.core.run.launch` raises
:class:`~npu_jax.errors.SanitizerError` (or warns) after a concrete run; under ``jax.jit`` call
``report.check()``.

Checks are chosen per launch (``checks=`` on ``conv2d``/``matmul``, stored in the static
:class:`~npu_jax.core.state.Context`); ``None`` means the process default, which is
``NPU_JAX_CHECKS`` (``all``/``none``/comma-separated names; ``none`` if unset) or whatever
:func:`set_default_checks` / :func:`default_checks` set (the test suite turns them all on).

Example:
    >>> import numpy as np, npu_jax
    >>> a = np.ones((32, 32), np.float16)
    >>> c, rep = npu_jax.matmul(a, a, hw=npu_jax.presets.tiny(), checks="all")
    >>> rep.findings()
    []
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from npu_jax.core.timing import PIPE_INDEX, PIPES
from npu_jax.errors import WindowError

CHECK_NAMES = ("racecheck", "memcheck", "initcheck", "synccheck")
RACE, MEM, INIT, SYNC = range(4)
ACTIONS = ("raise", "warn")

# finding codes: code -> (check index, short name)
RAW, WAR, WAW, GM_OOB, BUF_OOB, STAGE_OOB, MISALIGNED, EXTENT, UNINIT, HANG, TWICE, LEFT, EVENT_ID = range(
    1, 14
)
KINDS = {
    RAW: (RACE, "RAW"),
    WAR: (RACE, "WAR"),
    WAW: (RACE, "WAW"),
    GM_OOB: (MEM, "gm-out-of-range"),
    BUF_OOB: (MEM, "window-out-of-range"),
    STAGE_OOB: (MEM, "stage-out-of-range"),
    MISALIGNED: (MEM, "misaligned"),
    EXTENT: (MEM, "extent-out-of-range"),
    UNINIT: (INIT, "uninitialised-read"),
    HANG: (SYNC, "wait-without-set"),
    TWICE: (SYNC, "set-twice"),
    LEFT: (SYNC, "left-set"),
    EVENT_ID: (SYNC, "event-id-out-of-range"),
}
# columns of one finding record
(
    F_CODE,
    F_INSTR,
    F_SITE,
    F_PIPE,
    F_ALLOC,
    F_STAGE,
    F_OPIPE,
    F_OSITE,
    F_TAG,
    F_T0,
    F_T1,
    F_T2,
    F_T3,
    F_X0,
    F_X1,
) = range(15)
NF = 15
N_COORDS = 4
# site kinds, and the columns of one log row
K_INSTR, K_SET, K_WAIT, K_BARRIER_ALL, K_TILE, K_NOP = range(6)
L_SITE, L_ST, L_AUX, L_MCID, L_MDIM, L_MVAL, L_WHEN = 0, 1, 5, 6, 7, 8, 9
LW = 10
MAX_REFS = 4
SLACK = 128  # log rows past the capacity, where blocks that overflow land
SKIP = -(1 << 30)  # a stage value meaning "this slot is not accessed" (a read predicated off)
_i32 = jnp.int32


# ---- which checks run -------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Checks:
    """The sanitizers a launch runs, and what happens to their findings.

    Attributes:
        enabled: a subset of ``("racecheck", "memcheck", "initcheck", "synccheck")``.
        action: ``"raise"`` (a :class:`~npu_jax.errors.SanitizerError` after the run) or ``"warn"``
            (a :class:`~npu_jax.errors.SanitizerWarning`).
        capacity: log rows per core (one per instruction call, flag ops, tile marks and
            predicated-off calls included); a run that makes more is checked up to this many and
            warns.
        inline: run the analysis of the log inside the kernel's own program (the Report then
            carries only the findings) rather than as a separate program, compiled once per
            process and shape, when the Report is checked. Both give the same findings; ``False``
            keeps the kernel's compile time low.

    Example:
        >>> Checks.parse("all").enabled == frozenset(CHECK_NAMES)
        True
        >>> Checks.parse(("racecheck", "synccheck"), action="warn").action
        'warn'
    """

    enabled: frozenset = frozenset()
    action: str = "raise"
    capacity: int = 1 << 14
    inline: bool = False

    def __post_init__(self):
        bad = sorted(set(self.enabled) - set(CHECK_NAMES))
        if bad:
            raise ValueError(f"checks: unknown check(s) {bad}; choose from {CHECK_NAMES}, 'all' or 'none'.")
        if self.action not in ACTIONS:
            raise ValueError(f"checks: action must be one of {ACTIONS}, got {self.action!r}.")
        if not isinstance(self.capacity, int) or isinstance(self.capacity, bool) or self.capacity < 16:
            raise ValueError(
                f"checks: capacity (log rows per core) must be an int >= 16, got {self.capacity!r}."
            )
        object.__setattr__(self, "enabled", frozenset(self.enabled))

    @classmethod
    def parse(cls, value, action: str | None = None) -> Checks:
        """Canonicalise ``checks=``: None (the process default), ``"all"``, ``"none"``, one name,
        a comma-separated string, an iterable of names, or a :class:`Checks`."""
        if value is None:
            base = _DEFAULT[0]
            return base if action is None else dataclasses.replace(base, action=action)
        if isinstance(value, Checks):
            return value if action is None else dataclasses.replace(value, action=action)
        if isinstance(value, str):
            names = [v.strip().lower() for v in value.split(",") if v.strip()]
        else:
            try:
                names = [str(v).strip().lower() for v in value]
            except TypeError:
                raise TypeError(
                    f"checks must be None, 'all', 'none', a check name or a tuple of "
                    f"names from {CHECK_NAMES}; got {value!r}."
                ) from None
        if names in (["all"], ["on"], ["true"]):
            names = list(CHECK_NAMES)
        elif names in (["none"], ["off"], ["false"], []):
            names = []
        return cls(frozenset(names), action or "raise")

    @property
    def race(self) -> bool:
        return "racecheck" in self.enabled

    @property
    def mem(self) -> bool:
        return "memcheck" in self.enabled

    @property
    def init(self) -> bool:
        return "initcheck" in self.enabled

    @property
    def sync(self) -> bool:
        return "synccheck" in self.enabled

    @property
    def any(self) -> bool:
        return bool(self.enabled)

    def __str__(self) -> str:
        return ",".join(n for n in CHECK_NAMES if n in self.enabled) or "none"


def _env_default() -> Checks:
    raw = os.environ.get("NPU_JAX_CHECKS", "none")
    try:
        return Checks.parse(raw)
    except (ValueError, TypeError) as e:
        raise ValueError(f"environment variable NPU_JAX_CHECKS={raw!r}: {e}") from None


_DEFAULT = [_env_default()]


def set_default_checks(value) -> Checks:
    """Set the checks that ``checks=None`` means, for the whole process; returns the previous ones.

    Programs already traced keep the checks they were traced with (the choice is static)."""
    old = _DEFAULT[0]
    _DEFAULT[0] = Checks.parse(value if value is not None else "none")
    return old


def get_default_checks() -> Checks:
    return _DEFAULT[0]


@contextlib.contextmanager
def default_checks(value):
    """``with default_checks("none"): ...`` -- the process default, for a block."""
    old = set_default_checks(value)
    try:
        yield _DEFAULT[0]
    finally:
        _DEFAULT[0] = old


# ---- instruction sites: where in the kernel's source each traced instruction is -----------------
_SKIP_DIRS = (
    os.path.dirname(os.path.abspath(__file__)) + os.sep,
    os.path.dirname(os.path.abspath(jax.__file__)) + os.sep,
    os.path.dirname(os.path.abspath(contextlib.__file__)) + os.sep + "contextlib",
)


def _short(path: str) -> str:
    parts = os.path.normpath(path).split(os.sep)
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in ("npu_jax", "fusion", "precision", "tests", "benchmarks", "notebooks"):
            return "/".join(parts[i:])
    return "/".join(parts[-2:])


def _caller(depth: int = 2) -> str:
    """'file:line (function)' of the first frames outside npu_jax/core and jax: the kernel's line
    (and the line that called a shared helper such as ``output_step``)."""
    out = []
    f = sys._getframe(1)
    while f is not None and len(out) < depth:
        fn = os.path.abspath(f.f_code.co_filename)
        if not fn.startswith(_SKIP_DIRS):
            out.append(f"{_short(fn)}:{f.f_lineno} ({f.f_code.co_name})")
        f = f.f_back
    return " <- ".join(out) or "?"


class SiteTable:
    """The instructions of one traced kernel, in trace order, with what each touches.

    Every traced instruction (and flag, barrier, tile mark) registers a *site*: its op, pipe, source
    line, kind, flag pipes, and the allocation slots it reads and writes (``refs``: alloc id, first
    stage in the flat stage table, stage count, 1 = read / 2 = write). Log rows carry only the site
    id and the traced values; the analysis reads the rest from this table (as constants), and the
    Report keeps it (static metadata) to turn findings back into lines a kernel author can open.
    ``cands`` are memcheck conditions: (code, alloc id).
    """

    def __init__(self, name: str = "kernel", ctx=None):
        self.name = name
        self.ctx = ctx
        self.sites: list[tuple[str, str, str]] = []  # (op, pipe, where)
        self.meta: list[tuple] = []  # (kind, pipe index, src, dst, refs, tag names)
        self.cands: list[tuple[int, int]] = []

    def _add(self, op, pipe, kind, s=0, d=0, refs=(), names=()) -> int:
        self.sites.append((op, pipe, _caller()))
        self.meta.append((kind, PIPE_INDEX.get(pipe, 0), s, d, tuple(refs), tuple(names)))
        return len(self.sites) - 1

    def add(self, op: str, pipe: str, refs=()) -> int:
        return self._add(op, pipe, K_INSTR, refs=refs)

    def add_cand(self, code: int, alloc: int) -> int:
        self.cands.append((code, alloc))
        return len(self.cands) - 1

    def next_id(self) -> int:
        """The id the next site gets (an instruction's GM write is marked before it issues)."""
        return len(self.sites)

    def site(self, i: int) -> tuple[str, str, str]:
        return self.sites[i] if 0 <= i < len(self.sites) else ("?", "?", "?")

    def tag_names(self, i: int) -> tuple[str, ...]:
        return self.meta[i][5] if 0 <= i < len(self.meta) else ()

    def arrays(self):
        """(site table (n, 4 + 4 * 4), cand table (m, 2)) as numpy, padded to powers of two so that
        the analysis program is reused across kernels of similar size."""
        n = 1 << max(6, (len(self.meta) - 1).bit_length())
        t = np.zeros((n, 4 + 4 * MAX_REFS), np.int32)
        for i, (kind, p, s, d, refs, _) in enumerate(self.meta):
            t[i, :4] = (kind, p, s, d)
            for j, ref in enumerate(refs):
                t[i, 4 + 4 * j : 8 + 4 * j] = ref
        m = 1 << max(4, (len(self.cands) - 1).bit_length())
        c = np.zeros((m, 2), np.int32)
        c[: len(self.cands)] = self.cands or np.zeros((0, 2), np.int32)
        return t, c

    def __repr__(self) -> str:
        return f"SiteTable({self.name!r}, {len(self.sites)} sites)"


_TABLES: list[SiteTable] = []
_FALLBACK = SiteTable("(no launch)")


def current_table() -> SiteTable:
    return _TABLES[-1] if _TABLES else _FALLBACK


@contextlib.contextmanager
def tracing(table: SiteTable):
    """Register the sites of instructions traced inside the block into ``table``."""
    _TABLES.append(table)
    try:
        yield table
    finally:
        _TABLES.pop()


# ---- mutation: drop one WaitFlag, to prove the checks see it -------------------------------------
class Mutation:
    """Makes the ``skip``-th WaitFlag traced inside :func:`mutate` a no-op (``skip`` may be traced,
    so one compiled program serves every mutant). ``sites`` lists every WaitFlag traced."""

    def __init__(self, skip):
        self.skip = skip
        self.sites: list[str] = []

    def apply(self, when):
        i = len(self.sites)
        self.sites.append(_caller())
        return jnp.asarray(when, jnp.bool_) & (jnp.asarray(self.skip, _i32) != i)


_MUTATIONS: list[Mutation] = []


def current_mutation() -> Mutation | None:
    return _MUTATIONS[-1] if _MUTATIONS else None


@contextlib.contextmanager
def mutate(skip_wait):
    """Inside the block, the ``skip_wait``-th WaitFlag call traced (Queue DeQue/AllocTensor and
    drains included) is removed; -1 removes none. Yields the :class:`Mutation`."""
    m = Mutation(skip_wait)
    _MUTATIONS.append(m)
    try:
        yield m
    finally:
        _MUTATIONS.pop()


# ---- state: an event log per core ---------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def stage_base(allocs: tuple) -> tuple[dict, int]:
    """(alloc name -> index of its stage 0 in the flat stage table, number of stages)."""
    base, s = {}, 0
    for a in allocs:
        base[a.name] = s
        s += a.stages
    return base, s


def init_state(ctx) -> dict:
    """The sanitizer's part of a fresh core ({} when every check is off: no cost at all).

    log (capacity, LW) int32: one row per instruction call (flag ops, barriers and tile marks
        included, predicated-off calls too): (site, four stage values or tile coordinates,
        event id, memcheck cand, dim, value, when)
    n (): rows written
    gm_site {output: padded int32}: site + 1 of the last write per element      [racecheck]
    """
    ch = ctx.checks
    if not ch.any:
        return {}
    st = {"log": jnp.zeros((ch.capacity + SLACK, LW), _i32), "n": jnp.zeros((), _i32)}
    if ch.race:
        st["gm_site"] = {g.name: jnp.zeros(g.padded, _i32) for g in ctx.gm if g.output}
    return st


def alloc_id(ctx, key) -> int:
    """Findings name allocations by index: allocations first, then GM tensors."""
    if isinstance(key, tuple):  # ("gm", name)
        return len(ctx.allocs) + [g.name for g in ctx.gm].index(key[1])
    return [a.name for a in ctx.allocs].index(key)


def _static_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _log(core, site: int, when, vals=(), aux=0, mem=None):
    """Append one row, predicated-off calls included (``when`` is a column); returns the core.

    The row waits in ``core.pending`` until the core is flattened (a loop body returning, a
    vmap or jit boundary), where :func:`flush` writes all pending rows as one block. Every call
    appends, so positions count instruction *calls*: they do not depend on the data, stay the
    same on every core, and under ``vmap`` the write remains an in-place dynamic-update-slice.
    """
    vals = list(vals) + [SKIP] * (4 - len(vals))
    mc, md, mv = mem if mem is not None else (-1, 0, 0)
    if not isinstance(when, bool):
        when = jnp.asarray(when, jnp.bool_).astype(_i32)
    pieces, run = [], []
    for v in [site, *vals, aux, mc, md, mv, when]:
        if isinstance(v, bool) or _static_int(v):
            run.append(int(v))
            continue
        if run:
            pieces.append(np.asarray(run, np.int32))
            run = []
        pieces.append(jnp.reshape(jnp.asarray(v, _i32), (1,)))
    if run:
        pieces.append(np.asarray(run, np.int32))
    row = pieces[0] if len(pieces) == 1 else jnp.concatenate(pieces)
    return core.replace(pending=core.pending + (row,))


def flush(san: dict, pending: tuple) -> dict:
    """Write pending rows at the log's end as one block (blocks of at most ``SLACK`` rows).

    The log has ``SLACK`` rows past its capacity: a block that does not fit lands there (XLA
    clamps the start), so the first ``capacity`` rows stay an exact prefix of the run, and ``n``
    keeps counting so that the overflow is reported."""
    log, n = san["log"], san["n"]
    for i in range(0, len(pending), SLACK):
        block = jnp.stack([jnp.asarray(r, _i32) for r in pending[i : i + SLACK]])
        log = lax.dynamic_update_slice(log, block, (n, jnp.int32(0)), allow_negative_indices=False)
        n = n + block.shape[0]
    return {**san, "log": log, "n": n}


def check_ref_static(ref, op: str) -> None:
    """Static stage / offset of a Ref out of range: raise at trace time (memcheck, static part)."""
    a = ref.alloc
    if _static_int(ref.stage) and not 0 <= int(ref.stage) < a.stages:
        raise WindowError(
            f"memcheck: {op} uses stage {int(ref.stage)} of allocation {a.name!r} in {a.buffer}, "
            f"which has {a.stages} stage(s) (0..{a.stages - 1}); index it as "
            f"alloc[i % {a.stages}]."
        )
    if ref.offset is not None:
        for d, (o, s) in enumerate(zip(ref.offset, a.shape)):
            if _static_int(o) and not 0 <= int(o) < s:
                raise WindowError(
                    f"memcheck: {op}: offset {tuple(ref.offset)} of {a.name!r} {a.shape} is "
                    f"out of range on dim {d}; offsets must lie inside the allocation."
                )


# ---- the hooks: called by issue() and sync.py when checks are on ----------------------------------
def on_issue(core, pipe: str, op: str, when, reads=(), writes=(), oob=()):
    """Log one instruction on ``pipe``: ``reads``/``writes`` are Refs (a read may be ``(ref, cond)``:
    read only where cond), ``oob`` the memcheck conditions the instruction computed:
    ``(bad, code, alloc_key, dim, value)``; the first that holds is logged."""
    ctx = core.ctx
    table = current_table()
    base, _ = stage_base(ctx.allocs)
    refs, vals = [], []
    for r in reads:
        ref, cond = r if isinstance(r, tuple) else (r, None)
        refs.append((alloc_id(ctx, ref.alloc.name), base[ref.alloc.name], ref.alloc.stages, 1))
        vals.append(ref.stage if cond is None else jnp.where(jnp.asarray(cond, jnp.bool_), ref.stage, SKIP))
    for ref in writes:
        refs.append((alloc_id(ctx, ref.alloc.name), base[ref.alloc.name], ref.alloc.stages, 2))
        vals.append(ref.stage)
    if len(refs) > MAX_REFS:
        raise ValueError(
            f"sanitize: {op} touches {len(refs)} allocation slots; at most {MAX_REFS} are logged."
        )
    if not (ctx.checks.race or ctx.checks.init or ctx.checks.mem):
        refs, vals = [], []
    mem = None
    if ctx.checks.mem and oob:
        mc, md, mv = jnp.int32(-1), jnp.int32(0), jnp.int32(0)
        for bad, code, key, dim, val in reversed(oob):  # the first condition that holds wins
            cid = table.add_cand(code, alloc_id(ctx, key) if key is not None else -1)
            bad = jnp.asarray(bad, jnp.bool_)
            mc, md, mv = (
                jnp.where(bad, cid, mc),
                jnp.where(bad, jnp.asarray(dim, _i32), md),
                jnp.where(bad, jnp.asarray(val, _i32), mv),
            )
        mem = (mc, md, mv)
    site = table.add(op, pipe, refs)
    return _log(core, site, when, vals, mem=mem)


def on_flag(core, kind: int, s: int, d: int, event_id, when):
    """Log SetFlag / WaitFlag<S_D>(event_id) (the raw id: synccheck checks its range)."""
    op = "SetFlag" if kind == K_SET else "WaitFlag"
    site = current_table()._add(op, PIPES[s if kind == K_SET else d], kind, s, d)
    return _log(core, site, when, aux=event_id)


def on_barrier(core, pipe: str, when):
    """PipeBarrier: ALL joins every pipe's clock (each pipe waits for every earlier instruction)."""
    kind = K_BARRIER_ALL if pipe == "ALL" else K_NOP
    site = current_table()._add("PipeBarrier", pipe if pipe in PIPE_INDEX else "S", kind)
    return _log(core, site, when)


def at_tile(core, coords: dict):
    """Record the kernel's current tile coordinates (up to 4, by name) for findings to report."""
    if len(coords) > N_COORDS:
        raise ValueError(f"at_tile takes at most {N_COORDS} coordinates, got {list(coords)}.")
    if not core.san:
        return core
    site = current_table()._add("tile", "S", K_TILE, names=tuple(coords))
    return _log(core, site, True, list(coords.values()))


def gm_oob(core, win):
    """memcheck conditions of a GM window with traced starts: (bad, code, key, dim, start)."""
    spec = core.ctx.gm_spec(win.name)
    traced = [d for d, s in enumerate(win.starts) if not _static_int(s)]
    if not traced or not core.san or not core.ctx.checks.mem:
        return ()
    st = jnp.stack([jnp.asarray(win.starts[d], _i32) for d in traced])
    hi = np.asarray([spec.padded[d] - win.sizes[d] for d in traced], np.int32)
    bad = (st < 0) | (st > hi)
    j = jnp.argmax(bad)
    return ((jnp.any(bad), GM_OOB, ("gm", win.name), jnp.asarray(traced, _i32)[j], st[j]),)


def window_oob(core, alloc, starts, sizes, limits, op: str, align=None):
    """memcheck of a window ``starts`` + ``sizes`` inside ``limits`` (per dim) of an allocation.

    Static starts raise :class:`WindowError` now; traced ones become in-program conditions.
    ``align`` optionally gives per dim a multiple the start must be (fractal boundaries)."""
    out = []
    for d, (s, n, lim) in enumerate(zip(starts, sizes, limits)):
        a = None if align is None else align[d]
        if _static_int(s):
            if not 0 <= int(s) <= lim - n:
                raise WindowError(
                    f"memcheck: {op} window of {alloc.name!r} {alloc.shape} starts at {int(s)} "
                    f"on dim {d} with size {n}, past the allocation's {lim}; keep "
                    f"start + size <= {lim}."
                )
            if a and int(s) % a:
                raise WindowError(
                    f"memcheck: {op} window of {alloc.name!r} starts at {int(s)} on dim {d}, "
                    f"off the {a}-element fractal boundary; round it to a multiple of {a}."
                )
        elif core.san and core.ctx.checks.mem:
            st = jnp.asarray(s, _i32)
            out.append(((st < 0) | (st > lim - n), BUF_OOB, alloc.name, d, st))
            if a:
                out.append((st % a != 0, MISALIGNED, alloc.name, d, st))
    return tuple(out)


def extent_oob(core, alloc, values: dict, limits: dict, op: str):
    """memcheck of instruction extents (Mmad m/n/k, Fixpipe m/n, ...) against the tile's."""
    out = []
    for d, (name, v) in enumerate(values.items()):
        lim = limits[name]
        if v is None:
            continue
        if _static_int(v):
            if not 0 <= int(v) <= lim:
                raise WindowError(
                    f"memcheck: {op} {name}={int(v)} is outside 0..{lim}, the extent of "
                    f"{alloc.name!r} {alloc.shape}; clip it to the tile."
                )
        elif core.san and core.ctx.checks.mem:
            x = jnp.asarray(v, _i32)
            out.append(((x < 0) | (x > lim), EXTENT, alloc.name, d, x))
    return tuple(out)


# the analysis and the findings (findings.py) are part of this module's interface
from npu_jax.core.findings import (  # noqa: E402  (findings.py imports the names above)
    Finding,
    MutationResult,
    all_findings,
    analyze,
    findings_of,
    raise_or_warn,
    run_analysis,
    sweep_waits,
)

__all__ = [
    "CHECK_NAMES",
    "Checks",
    "Finding",
    "MutationResult",
    "SiteTable",
    "all_findings",
    "analyze",
    "default_checks",
    "findings_of",
    "get_default_checks",
    "mutate",
    "raise_or_warn",
    "run_analysis",
    "set_default_checks",
    "sweep_waits",
]

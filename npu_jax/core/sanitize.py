"""Sanitizers inside the jitted program: racecheck, memcheck, initcheck, synccheck.

Named after the vendor's own sanitizer. Data is computed in program order, so a missing
``WaitFlag`` changes nothing the emulator computes -- it is a silent race on hardware. These checks
look for it, in the same XLA program as the kernel, and record the first finding of each check in
the core's state; :func:`~npu_jax.core.run.launch` turns the findings into a
:class:`~npu_jax.errors.SanitizerError` (or a warning) after the run, naming the instruction, its
source line, the pipe, the allocation and the tile.

* **racecheck** -- a vector clock per pipe (``vc[p, q]``: how many instructions of pipe q are known
  to have finished before pipe p's next one). ``SetFlag<S_D>`` snapshots ``vc[S]`` into the flag;
  ``WaitFlag<S_D>`` joins it into ``vc[D]``; ``PipeBarrier<ALL>`` joins every pipe. Queues are
  flags, so they carry clocks too. Every read and write of an allocation stage is checked for
  happens-before against the last write (RAW, WAW) and the reads since (WAR) from other pipes.
* **memcheck** -- windows of GM tensors and allocations (starts, stages, Mmad/Fixpipe extents,
  fractal alignment) out of range. Static indices raise :class:`~npu_jax.errors.WindowError` at
  trace time; traced ones are checked in the program (XLA would otherwise clamp them silently).
* **initcheck** -- a read of an allocation stage nothing has written (per stage; the NaN poison of
  fresh allocations shows element-level misuse in the values).
* **synccheck** -- a ``WaitFlag`` with no pending ``SetFlag`` (a hang on hardware), a flag set
  twice, flags left set at the end of the kernel, event ids outside the chip's range.

Granularity: race and init state is kept per allocation *stage* (a ping-pong slot), the unit the
vendor's flags protect. GM outputs are checked across cores (two cores writing one element) by
:func:`~npu_jax.core.run.merge_outputs`, which names both writing instructions.

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

import collections
import contextlib
import dataclasses
import functools
import os
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from npu_jax.core.timing import PIPE_INDEX, PIPES
from npu_jax.errors import SanitizerError, SanitizerWarning, WindowError

CHECK_NAMES = ("racecheck", "memcheck", "initcheck", "synccheck")
RACE, MEM, INIT, SYNC = range(4)
ACTIONS = ("raise", "warn")

# finding codes: code -> (check index, short name)
RAW, WAR, WAW, GM_OOB, BUF_OOB, STAGE_OOB, MISALIGNED, EXTENT, UNINIT, HANG, TWICE, LEFT, EVENT_ID = \
    range(1, 14)
KINDS = {RAW: (RACE, "RAW"), WAR: (RACE, "WAR"), WAW: (RACE, "WAW"), GM_OOB: (MEM, "gm-out-of-range"),
         BUF_OOB: (MEM, "window-out-of-range"), STAGE_OOB: (MEM, "stage-out-of-range"),
         MISALIGNED: (MEM, "misaligned"), EXTENT: (MEM, "extent-out-of-range"),
         UNINIT: (INIT, "uninitialised-read"), HANG: (SYNC, "wait-without-set"),
         TWICE: (SYNC, "set-twice"), LEFT: (SYNC, "left-set"), EVENT_ID: (SYNC, "event-id-out-of-range")}
# columns of one finding record
(F_CODE, F_INSTR, F_SITE, F_PIPE, F_ALLOC, F_STAGE, F_OPIPE, F_OSITE, F_TAG, F_T0, F_T1, F_T2, F_T3,
 F_X0, F_X1) = range(15)
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
            raise ValueError(f"checks: capacity (log rows per core) must be an int >= 16, got {self.capacity!r}.")
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
                raise TypeError(f"checks must be None, 'all', 'none', a check name or a tuple of "
                                f"names from {CHECK_NAMES}; got {value!r}.") from None
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
_SKIP_DIRS = (os.path.dirname(os.path.abspath(__file__)) + os.sep,
              os.path.dirname(os.path.abspath(jax.__file__)) + os.sep,
              os.path.dirname(os.path.abspath(contextlib.__file__)) + os.sep + "contextlib")


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
                t[i, 4 + 4 * j: 8 + 4 * j] = ref
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


@dataclasses.dataclass
class MutationResult:
    """Outcome of :func:`sweep_waits`: how many single-WaitFlag mutants the checks caught."""

    name: str
    mutants: int
    caught: int
    by_race: int
    escaped: list  # source lines of WaitFlags whose removal no check reported

    @property
    def figure(self) -> str:
        pct = 100.0 * self.caught / max(1, self.mutants)
        return (f"{self.name}: {self.caught}/{self.mutants} WaitFlag mutants caught ({pct:.0f}%), "
                f"{self.by_race} of them by racecheck")


def sweep_waits(run, name: str = "kernel") -> MutationResult:
    """Remove each WaitFlag of a kernel in turn and count the mutants a check reports.

    ``run()`` runs the kernel and returns its Report (or a SequenceReport, or a tuple whose last
    item is one; every launch inside is swept, relayout and element-wise kernels included). It is
    traced once under ``jax.jit`` with the mutant index as an argument: one compile for all
    mutants. The unmutated run (index -1) must report nothing.
    """
    counts = []

    def one(k):
        with mutate(k) as m:
            out = run()
        counts.append(len(m.sites))
        sites.extend(m.sites)
        return out[-1] if isinstance(out, tuple) else out

    sites: list[str] = []
    f = jax.jit(one)
    base = f(jnp.int32(-1))
    found = all_findings(base)
    if found:
        raise SanitizerError(f"{name}: the unmutated kernel already reports findings:\n"
                             + "\n".join(x.message() for x in found))
    n = counts[0]
    caught = by_race = 0
    escaped = []
    for k in range(n):
        found = all_findings(f(jnp.int32(k)))
        checks = {x.check for x in found}
        if checks & {"racecheck", "synccheck"}:
            caught += 1
            by_race += "racecheck" in checks
        else:
            escaped.append(sites[k])
    return MutationResult(name, n, caught, by_race, escaped)


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
        block = jnp.stack([jnp.asarray(r, _i32) for r in pending[i:i + SLACK]])
        log = lax.dynamic_update_slice(log, block, (n, jnp.int32(0)), allow_negative_indices=False)
        n = n + block.shape[0]
    return {**san, "log": log, "n": n}


def check_ref_static(ref, op: str) -> None:
    """Static stage / offset of a Ref out of range: raise at trace time (memcheck, static part)."""
    a = ref.alloc
    if _static_int(ref.stage) and not 0 <= int(ref.stage) < a.stages:
        raise WindowError(f"memcheck: {op} uses stage {int(ref.stage)} of allocation {a.name!r} in {a.buffer}, "
                          f"which has {a.stages} stage(s) (0..{a.stages - 1}); index it as "
                          f"alloc[i % {a.stages}].")
    if ref.offset is not None:
        for d, (o, s) in enumerate(zip(ref.offset, a.shape)):
            if _static_int(o) and not 0 <= int(o) < s:
                raise WindowError(f"memcheck: {op}: offset {tuple(ref.offset)} of {a.name!r} {a.shape} is "
                                  f"out of range on dim {d}; offsets must lie inside the allocation.")


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
        raise ValueError(f"sanitize: {op} touches {len(refs)} allocation slots; at most {MAX_REFS} are logged.")
    if not (ctx.checks.race or ctx.checks.init or ctx.checks.mem):
        refs, vals = [], []
    mem = None
    if ctx.checks.mem and oob:
        mc, md, mv = jnp.int32(-1), jnp.int32(0), jnp.int32(0)
        for bad, code, key, dim, val in reversed(oob):  # the first condition that holds wins
            cid = table.add_cand(code, alloc_id(ctx, key) if key is not None else -1)
            bad = jnp.asarray(bad, jnp.bool_)
            mc, md, mv = (jnp.where(bad, cid, mc), jnp.where(bad, jnp.asarray(dim, _i32), md),
                          jnp.where(bad, jnp.asarray(val, _i32), mv))
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
    if not core.san:
        return core
    if len(coords) > N_COORDS:
        raise ValueError(f"at_tile takes at most {N_COORDS} coordinates, got {list(coords)}.")
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
                raise WindowError(f"memcheck: {op} window of {alloc.name!r} {alloc.shape} starts at {int(s)} "
                                  f"on dim {d} with size {n}, past the allocation's {lim}; keep "
                                  f"start + size <= {lim}.")
            if a and int(s) % a:
                raise WindowError(f"memcheck: {op} window of {alloc.name!r} starts at {int(s)} on dim {d}, "
                                  f"off the {a}-element fractal boundary; round it to a multiple of {a}.")
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
                raise WindowError(f"memcheck: {op} {name}={int(v)} is outside 0..{lim}, the extent of "
                                  f"{alloc.name!r} {alloc.shape}; clip it to the tile.")
        elif core.san and core.ctx.checks.mem:
            x = jnp.asarray(v, _i32)
            out.append(((x < 0) | (x > lim), EXTENT, alloc.name, d, x))
    return tuple(out)


# ---- the analysis: replay the log with vector clocks ---------------------------------------------
def _first(find, check: int, bads, fields, instr, site, tile):
    """Record the first of ``bads`` (k,) for ``check`` if the check has no finding yet; ``fields``
    is (k, 8): code, pipe, alloc, stage, other pipe, other site, x0, x1 per candidate."""
    j = jnp.argmax(bads)
    f = fields[j]
    row = jnp.concatenate([f[:1], jnp.stack([instr, site]), f[1:6], tile, f[6:8]])
    new = jnp.any(bads) & (find[check, F_CODE] == 0)
    return jnp.where((jnp.arange(4) == check)[:, None] & new, row[None, :], find)


def _cols(*cols):
    """(k, 8) int32 from columns that are scalars or (k,) vectors."""
    k = max(np.shape(c)[0] if np.ndim(c) else 1 for c in cols)
    return jnp.stack([jnp.broadcast_to(jnp.asarray(c, _i32), (k,)) for c in cols], axis=1)


def analyze(log, count, flag_set, sites, cands, *, n_stages: int, n_events: int, checks: tuple):
    """Replay one core's log: vector clocks through flags and barriers, per-stage access epochs,
    written flags, flag states. Returns (4, NF) int32: the first finding of each check.

    Vector clocks: ``vc[p, q]`` = how many instructions of pipe q are known to have finished before
    pipe p's next one. SetFlag<S_D> snapshots ``vc[S]`` into the flag, WaitFlag<S_D> joins it into
    ``vc[D]``, PipeBarrier<ALL> joins all. An access by pipe q at epoch ``vc[q, q]`` is ordered after
    an earlier access by pipe p at epoch e iff ``vc[q, p] >= e``. Kernel-independent (the site and
    cand tables are arguments), and vectorised over the (up to 4) allocation slots of an instruction.
    ``checks`` is (race, mem, init, sync) as bools.
    """
    checks = _On(*checks)
    P, E, S = len(PIPES), n_events, max(n_stages, 1)
    pipes = jnp.arange(P, dtype=_i32)
    stages = jnp.arange(S, dtype=_i32)
    n = jnp.minimum(count, log.shape[0] - SLACK)

    def body(carry):
        i, instr, vc, fvc, w, r, init, fset, tile, find = carry
        row = log[i]
        site = row[L_SITE]
        t = sites[site]
        q, s, d = t[1], t[2], t[3]
        kind = jnp.where(row[L_WHEN] != 0, t[0], K_NOP)  # a predicated-off call does nothing
        refs = t[4:].reshape(MAX_REFS, 4)
        aid, base, nst, mode = refs[:, 0], refs[:, 1], refs[:, 2], refs[:, 3]
        st = row[L_ST:L_ST + MAX_REFS]
        is_instr = kind == K_INSTR
        valid = is_instr & (mode > 0) & (st != SKIP)
        oob = valid & ((st < 0) | (st >= nst))
        acc = valid & ~oob
        idx = base + jnp.clip(st, 0, jnp.maximum(nst - 1, 0))  # (4,) flat stage of each slot
        rd, wr = acc & (mode == 1), acc & (mode == 2)
        if checks.mem:
            mc = row[L_MCID]
            cand = cands[jnp.maximum(mc, 0)]
            bads = jnp.concatenate([(is_instr & (mc >= 0))[None], oob])
            fields = jnp.concatenate([
                _cols(cand[0], q, cand[1], 0, -1, -1, row[L_MDIM], row[L_MVAL]),
                _cols(STAGE_OOB, q, aid, st, -1, -1, st, nst)])
            find = _first(find, MEM, bads, fields, instr, site, tile)
        if checks.init:
            find = _first(find, INIT, rd & ~init[idx], _cols(UNINIT, q, aid, st, -1, -1, 0, 0),
                          instr, site, tile)
        if checks.race:
            vc = vc + ((pipes == q)[:, None] & (pipes == q)[None, :] & is_instr).astype(_i32)
            ep, mine = vc[q, q], vc[q]
            wrec = w[idx]  # (4, 3): last writer's pipe, epoch, site
            unordered = (wrec[:, 1] > 0) & (wrec[:, 0] != q) & (mine[wrec[:, 0]] < wrec[:, 1])
            rrec = r[idx]  # (4, P, 2): readers since that write
            pend = (rrec[:, :, 0] > mine[None, :]) & (pipes != q)[None, :]
            other = jnp.argmax(pend, axis=1).astype(_i32)
            osite = jnp.take_along_axis(rrec[:, :, 1], other[:, None], axis=1)[:, 0]
            bads = jnp.concatenate([rd & unordered, wr & unordered, wr & jnp.any(pend, axis=1)])
            fields = jnp.concatenate([_cols(RAW, q, aid, st, wrec[:, 0], wrec[:, 2], 0, 0),
                                      _cols(WAW, q, aid, st, wrec[:, 0], wrec[:, 2], 0, 0),
                                      _cols(WAR, q, aid, st, other, osite, 0, 0)])
            find = _first(find, RACE, bads, fields, instr, site, tile)
            read_hit = jnp.any((stages[:, None] == idx[None, :]) & rd[None, :], axis=1)  # (S,)
            write_hit = jnp.any((stages[:, None] == idx[None, :]) & wr[None, :], axis=1)
            r = jnp.where(read_hit[:, None, None] & (pipes == q)[None, :, None],
                          jnp.stack([ep, site])[None, None, :], r)
            w = jnp.where(write_hit[:, None], jnp.stack([q, ep, site])[None, :], w)
            r = jnp.where(write_hit[:, None, None], 0, r)
        if checks.init:
            init = init | jnp.any((stages[:, None] == idx[None, :]) & wr[None, :], axis=1)
        # flags
        raw_e = row[L_AUX]
        e = jnp.clip(raw_e, 0, E - 1)
        is_set, is_wait = kind == K_SET, kind == K_WAIT
        hitf = (pipes == s)[:, None, None] & (pipes == d)[None, :, None] & (jnp.arange(E) == e)[None, None, :]
        pending = fset[s, d, e]
        if checks.sync:
            fx = s * 16 + d
            bads = jnp.stack([(is_set | is_wait) & ((raw_e < 0) | (raw_e >= E)), is_set & pending,
                              is_wait & ~pending])
            fields = _cols(jnp.asarray([EVENT_ID, TWICE, HANG]), jnp.stack([jnp.where(is_set, s, d), s, d]),
                           -1, 0, -1, -1, jnp.stack([raw_e, e, e]), fx)
            find = _first(find, SYNC, bads, fields, instr, site, tile)
        fset = jnp.where(hitf & is_set, True, jnp.where(hitf & is_wait, False, fset))
        if checks.race:
            fvc = jnp.where((hitf & is_set)[..., None], vc[s][None, None, None, :], fvc)
            joined = jnp.maximum(vc[d], fvc[s, d, e])
            vc = jnp.where((pipes == d)[:, None] & is_wait, joined[None, :], vc)
            vc = jnp.where(kind == K_BARRIER_ALL, jnp.max(vc, axis=0)[None, :], vc)
        is_tile = kind == K_TILE
        tile = jnp.where(is_tile, jnp.concatenate([site[None] + 1, st]), tile)
        return (i + 1, instr + ((kind != K_TILE) & (kind != K_NOP)).astype(_i32), vc, fvc, w, r, init, fset,
                tile, find)

    carry = (jnp.int32(0), jnp.int32(0), jnp.zeros((P, P), _i32), jnp.zeros((P, P, E, P), _i32),
             jnp.zeros((S, 3), _i32), jnp.zeros((S, P, 2), _i32), jnp.zeros((S,), jnp.bool_),
             jnp.zeros((P, P, E), jnp.bool_), jnp.zeros((1 + N_COORDS,), _i32), jnp.zeros((4, NF), _i32))
    out = lax.while_loop(lambda c: c[0] < n, body, carry)
    instr, tile, find = out[1], out[8], out[9]
    if checks.sync:  # flags still set at the end: a SetFlag never waited (from the real final state)
        flat = flag_set.reshape(-1)
        k = jnp.argmax(flat).astype(_i32)
        fs, fd, fe = k // (P * E), (k // E) % P, k % E
        find = _first(find, SYNC, jnp.any(flat)[None], _cols(LEFT, fs, -1, 0, -1, -1, fe, fs * 16 + fd),
                      instr, jnp.int32(-1), tile)
    return find


_On = collections.namedtuple("_On", "race mem init sync")


@functools.partial(jax.jit, static_argnames=("n_stages", "n_events", "checks"))
def analyze_cores(logs, counts, flags, sites, cands, *, n_stages: int, n_events: int, checks: tuple):
    """:func:`analyze` over a leading core axis, compiled once per shape (the tables are arguments)."""
    return jax.vmap(lambda lg, n, fs: analyze(lg, n, fs, sites, cands, n_stages=n_stages,
                                              n_events=n_events, checks=checks))(logs, counts, flags)


def run_analysis(ctx, logs, counts, flags, table: SiteTable):
    """(n_cores, 4, NF) findings from the cores' logs (leading core axis on every argument)."""
    sites, cands = table.arrays()
    _, S = stage_base(ctx.allocs)
    ch = ctx.checks
    return analyze_cores(logs, counts, flags, sites, cands, n_stages=S, n_events=ctx.hw.num_event_ids,
                         checks=(ch.race, ch.mem, ch.init, ch.sync))


# ---- after the run: findings as messages ------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Finding:
    """One decoded finding: which check, on which core, at which instruction, and what to fix."""

    check: str
    kind: str
    kernel: str
    core: int
    instr: int
    op: str
    pipe: str
    where: str
    alloc: str
    stage: int
    other_op: str
    other_pipe: str
    other_where: str
    tile: dict
    detail: str
    fix: str

    def message(self) -> str:
        tile = ", ".join(f"{k}={v}" for k, v in self.tile.items())
        loc = f"core {self.core}, instruction #{self.instr}" + (f", tile ({tile})" if tile else "")
        return (f"{self.check} [{self.kind}] in {self.kernel} ({loc}): {self.op} on pipe {self.pipe} at "
                f"{self.where}: {self.detail} Fix: {self.fix}")

    def __str__(self) -> str:
        return self.message()


def _alloc_name(ctx, aid: int) -> tuple[str, object]:
    if ctx is None or aid < 0:
        return ("-" if aid < 0 else f"allocation #{aid}"), None
    if aid < len(ctx.allocs):
        a = ctx.allocs[aid]
        return f"{a.buffer} allocation {a.name!r} {a.shape} {a.dtype}", a
    g = ctx.gm[aid - len(ctx.allocs)]
    return f"GM tensor {g.name!r} (stored {g.padded})", g


def _event(row) -> tuple[str, int]:
    sd, e = int(row[F_X1]), int(row[F_X0])
    s, d = sd // 16, sd % 16
    name = f"{PIPES[s]}_{PIPES[d]}" if 0 <= s < len(PIPES) and 0 <= d < len(PIPES) else "?"
    return name, e


def decode(row, table: SiteTable, core: int) -> Finding:
    """A Finding from one record (``find[check]`` of one core)."""
    row = [int(v) for v in np.asarray(row)]
    code = row[F_CODE]
    check, kind = KINDS[code]
    ctx = table.ctx if table is not None else None
    op, pipe, where = table.site(row[F_SITE]) if table is not None else ("?", "?", "?")
    alloc, obj = _alloc_name(ctx, row[F_ALLOC])
    stage = row[F_STAGE]
    opipe = PIPES[row[F_OPIPE]] if 0 <= row[F_OPIPE] < len(PIPES) else "-"
    oop, _, owhere = table.site(row[F_OSITE]) if (table is not None and row[F_OSITE] >= 0) else ("-", "-", "-")
    tile = {}
    if table is not None and row[F_TAG] > 0:
        tile = dict(zip(table.tag_names(row[F_TAG] - 1), row[F_T0:F_T0 + N_COORDS]))
    if row[F_SITE] < 0:
        op, pipe, where = "end of kernel", "-", "the kernel's last instruction"
    x0, x1 = row[F_X0], row[F_X1]
    st = f"{alloc} stage {stage}"
    if code == RAW:
        detail = (f"reads {st}, last written by {oop} on pipe {opipe} at {owhere}, and nothing orders "
                  f"that write before this read (no SetFlag/WaitFlag chain from {opipe} to {pipe}).")
        fix = (f"after the write, set_flag('{opipe}_{pipe}', id); before this read, "
               f"wait_flag('{opipe}_{pipe}', id) (or EnQue/DeQue through a Queue).")
    elif code == WAR:
        detail = (f"overwrites {st} while {oop} on pipe {opipe} at {owhere} may still be reading it "
                  f"(no flag orders that read before this write).")
        fix = (f"after the read, set_flag('{opipe}_{pipe}', id) (the 'slot free' flag; FreeTensor); before "
               f"this write, wait_flag('{opipe}_{pipe}', id) (AllocTensor), with a prologue set for the "
               f"first use of each slot.")
    elif code == WAW:
        detail = (f"writes {st}, last written by {oop} on pipe {opipe} at {owhere}, with no flag "
                  f"ordering the two writes: the final contents depend on timing.")
        fix = f"order them: set_flag('{opipe}_{pipe}', id) after the first, wait_flag before the second."
    elif code == GM_OOB:
        size = padded = "?"
        if obj is not None:
            padded = obj.padded[x0] if 0 <= x0 < len(obj.padded) else "?"
        detail = (f"its window of {alloc} starts at {x1} on dim {x0} and leaves the stored extent "
                  f"{padded} (the DMA would clamp or touch memory outside the tensor){size and ''}.")
        fix = "correct the tile index arithmetic, or predicate the instruction off (when=) for tiles past the edge."
    elif code == BUF_OOB:
        detail = f"its window of {alloc} starts at {x1} on dim {x0} and runs past the allocation."
        fix = "keep start + size inside the allocation (size the allocation for the largest window)."
    elif code == STAGE_OOB:
        detail = f"uses stage {x0} of {alloc}, which has {x1} stage(s)."
        fix = f"index stages modulo {x1} (alloc[i % {x1}])."
    elif code == MISALIGNED:
        detail = f"its window of {alloc} starts at {x1} on dim {x0}, off a fractal boundary."
        fix = "start LoadData/Load3D windows on whole fractals (multiples of C0 / 16)."
    elif code == EXTENT:
        detail = f"extent #{x0} = {x1} is outside its tile in {alloc}."
        fix = "clip m, n, k (or the element count) to the tile's shape."
    elif code == UNINIT:
        detail = f"reads {st}, which no instruction has written (its contents are the NaN poison)."
        fix = "fill the stage first (DataCopy/LoadData/Mmad), or read the stage that was filled."
    else:
        ev, e = _event(row)
        if code == HANG:
            detail = (f"WaitFlag<{ev}>({e}) has no pending SetFlag<{ev}>({e}): on hardware pipe "
                      f"{ev.split('_')[-1]} would wait forever.")
            fix = (f"set_flag('{ev}', {e}) before it (for a ping-pong slot: in the prologue), or drop the wait "
                   f"(a missing set is often the sign of a wait whose set was predicated off).")
        elif code == TWICE:
            detail = (f"SetFlag<{ev}>({e}) while the flag is still set: it was never waited since the "
                      f"previous set (undefined on hardware; the second set is lost).")
            fix = f"wait_flag('{ev}', {e}) on the consumer between the two sets (the missing WaitFlag)."
        elif code == LEFT:
            detail = f"flag {ev}({e}) is still set at the end of the kernel: a SetFlag nobody waited."
            fix = (f"wait_flag('{ev}', {e}) in the epilogue (drain the prologue's 'slot free' flags), "
                   f"or remove the set.")
        else:
            detail = f"event id {e} of {ev} is outside the chip's 0..{ctx.hw.num_event_ids - 1 if ctx else '?'}."
            fix = "use event ids below hw.num_event_ids (ping-pong ids: base + i % stages)."
    return Finding(CHECK_NAMES[check], kind, table.name if table is not None else "kernel", core, row[F_INSTR],
                   op, pipe, where, alloc, stage, oop, opipe, owhere, tile, detail, fix)


def findings_of(report) -> list[Finding]:
    """Decode a Report's findings: per check, the first core that found something. Runs the
    analysis on the logged events first, unless it ran inside the kernel's program (``inline``)."""
    table = report.sanitizer
    if report.san_findings is not None:
        f = np.asarray(report.san_findings)
    elif report.san_log is not None:
        f = np.asarray(run_analysis(table.ctx, report.san_log, report.san_logged, report.san_flags, table))
    else:
        return []
    out = []
    for c in range(4):
        cores = np.nonzero(f[:, c, F_CODE])[0]
        if cores.size:
            out.append(decode(f[cores[0], c], table, int(cores[0])))
    return out


def overlap_message(overlap_at, table: SiteTable, kernel: str, count: int) -> str:
    """The message for output elements written by two cores, naming both instructions."""
    base = (f"racecheck [multi-core overlap] in {kernel}: {count} output elements were written by more "
            f"than one core; the kernel's split over block_idx overlaps.")
    if overlap_at is None or table is None or table.ctx is None:
        return base
    gid, flat, ca, sa, cb, sb = (int(v) for v in np.asarray(overlap_at))
    if gid < 0:
        return base
    g = [s for s in table.ctx.gm if s.output][gid]
    idx = tuple(int(i) for i in np.unravel_index(flat, g.shape))
    oa, pa, wa = table.site(sa)
    ob, pb, wb = table.site(sb)
    return (f"{base} First: {g.name}{list(idx)} written by core {ca} ({oa} on {pa} at {wa}) and core {cb} "
            f"({ob} on {pb} at {wb}). Fix: give each core disjoint output tiles (check the block_idx "
            f"arithmetic and the when= predicates of the edge tiles).")


def all_findings(report) -> list[Finding]:
    """Findings of a Report, of the related runs in its ``extras``, and of every part of a report
    of several launches (anything with ``.reports``, e.g. a SequenceReport), or of a list of them."""
    if isinstance(report, (list, tuple)):
        return [f for r in report for f in all_findings(r)]
    if not hasattr(report, "findings"):
        return [f for r in getattr(report, "reports", ()) for f in all_findings(r)]
    out = list(report.findings())
    for v in getattr(report, "extras", {}).values():
        if hasattr(v, "findings") or hasattr(v, "reports"):
            out += all_findings(v)
    return out


def raise_or_warn(report) -> None:
    """What launch does after a concrete run: findings -> SanitizerError or SanitizerWarning."""
    found = report.findings()
    table = report.sanitizer
    ctx = table.ctx if table is not None else None
    logged = getattr(report, "san_logged", None)
    if logged is not None and ctx is not None and int(np.max(np.asarray(logged))) > ctx.checks.capacity:
        warnings.warn(f"{report.name}: the kernel made {int(np.max(np.asarray(logged)))} instruction calls but "
                      f"the sanitizers' log holds {ctx.checks.capacity}; only the first were checked. Pass "
                      f"checks=Checks(..., capacity=N) with a larger N.", SanitizerWarning, stacklevel=3)
    ov = report.overlapping_writes
    msgs = [f.message() for f in found]
    if ov is not None and int(np.asarray(ov)):
        msgs.insert(0, overlap_message(report.overlap_at, report.sanitizer, report.name, int(np.asarray(ov))))
    if not msgs:
        return
    text = f"{len(msgs)} sanitizer finding(s) in {report.name}:\n  " + "\n  ".join(msgs)
    action = ctx.checks.action if ctx is not None else "raise"
    if action == "warn":
        warnings.warn(text, SanitizerWarning, stacklevel=3)
    else:
        raise SanitizerError(text)

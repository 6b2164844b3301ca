"""Where each traced instruction is: the site table of a kernel, and the sanitizers' trace-time state.

Every instruction, flag op, barrier and tile mark traced inside a launch registers a *site* in the
launch's :class:`SiteTable` (its op, pipe, source line and what it touches); the event log in the
core's state carries only site ids and traced values. The only global state is :data:`TRACE`: the
stack of tables being filled (one per launch being traced) and the flag transforms installed by the
mutation test (``mutation.py``); both are pushed and popped by context managers.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from collections.abc import Callable
from typing import NamedTuple

import jax
import numpy as np

from npu_jax.core.checks.columns import MAX_REFS, REF_W, SITE_W, Kind, Site
from npu_jax.core.pipes import PIPE_INDEX

_CORE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SKIP_DIRS = (
    _CORE_DIR + os.sep,
    os.path.join(os.path.dirname(_CORE_DIR), "asc") + os.sep,  # npu_jax.asc: the user's kernel line
    os.path.dirname(os.path.abspath(jax.__file__)) + os.sep,
    os.path.dirname(os.path.abspath(contextlib.__file__)) + os.sep + "contextlib",
)


def _short(path: str) -> str:
    parts = os.path.normpath(path).split(os.sep)
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in ("npu_jax", "fusion", "precision", "tests", "benchmarks", "notebooks", "examples"):
            return "/".join(parts[i:])
    return "/".join(parts[-2:])


def caller(depth: int = 2) -> str:
    """'file:line (function)' of the first frames outside npu_jax/core, npu_jax/asc and jax: the kernel's line
    (and the line that called a shared helper such as ``output_step``)."""
    out = []
    f = sys._getframe(1)
    while f is not None and len(out) < depth:
        short = _user_file(f.f_code.co_filename)
        if short is not None:
            out.append(f"{short}:{f.f_lineno} ({f.f_code.co_name})")
        f = f.f_back
    return " <- ".join(out) or "?"


@functools.lru_cache(maxsize=4096)
def _user_file(filename: str) -> str | None:
    """A code object's file as :func:`caller` names it, or None where it is skipped (once a file)."""
    fn = os.path.abspath(filename)
    return None if fn.startswith(_SKIP_DIRS) else _short(fn)


class SiteTable:
    """The instructions of one traced kernel, in trace order, with what each touches.

    Every traced instruction (and flag, barrier, tile mark) registers a *site*: its op, pipe, source
    line, kind, flag pipes, and the allocation slots it reads and writes (``refs``: alloc id, first
    stage in the flat stage table, stage count, READ / WRITE; see ``columns.Ref``). Log rows carry
    only the site id and the traced values; the analysis reads the rest from this table (as
    constants), and the Report keeps it (static metadata) to turn findings back into lines a kernel
    author can open. ``cands`` are memcheck conditions: (code, alloc id).
    """

    def __init__(self, name: str = "kernel", ctx=None):
        self.name = name
        self.ctx = ctx
        self.sites: list[tuple[str, str, str]] = []  # (op, pipe, where)
        self.meta: list[tuple] = []  # (kind, pipe index, src, dst, refs, tag names)
        self.cands: list[tuple[int, int]] = []

    def add(self, op: str, pipe: str, kind: Kind = Kind.INSTR, s=0, d=0, refs=(), names=()) -> int:
        """Register one site; returns its id."""
        self.sites.append((op, pipe, caller()))
        self.meta.append((int(kind), PIPE_INDEX.get(pipe, 0), s, d, tuple(refs), tuple(names)))
        return len(self.sites) - 1

    def add_cand(self, code: int, alloc: int) -> int:
        self.cands.append((int(code), alloc))
        return len(self.cands) - 1

    def next_id(self) -> int:
        """The id the next site gets."""
        return len(self.sites)

    def site(self, i: int) -> tuple[str, str, str]:
        return self.sites[i] if 0 <= i < len(self.sites) else ("?", "?", "?")

    def tag_names(self, i: int) -> tuple[str, ...]:
        return self.meta[i][5] if 0 <= i < len(self.meta) else ()

    def arrays(self):
        """(site table (n, SITE_W), cand table (m, 2)) as numpy, padded to powers of two so that
        the analysis program is reused across kernels of similar size."""
        n = 1 << max(6, (len(self.meta) - 1).bit_length())
        t = np.zeros((n, SITE_W), np.int32)
        for i, (kind, p, s, d, refs, _) in enumerate(self.meta):
            t[i, : Site.REFS] = (kind, p, s, d)
            for j, ref in enumerate(refs):
                t[i, Site.REFS + REF_W * j : Site.REFS + REF_W * (j + 1)] = ref
        m = 1 << max(4, (len(self.cands) - 1).bit_length())
        c = np.zeros((m, 2), np.int32)
        c[: len(self.cands)] = self.cands or np.zeros((0, 2), np.int32)
        return t, c

    def __repr__(self) -> str:
        return f"SiteTable({self.name!r}, {len(self.sites)} sites)"


assert SITE_W == Site.REFS + REF_W * MAX_REFS


class FlagOp(NamedTuple):
    """A flag op as the flag hook sees it (``sanitize.on_flag``): ``SetFlag`` / ``WaitFlag``
    <S_D>(event_id), or ``PipeBarrier``<pipe>; ``when`` is its predicate (a bool array)."""

    name: str  # "SetFlag", "WaitFlag" or "PipeBarrier"
    src: int = 0  # pipe indices of a flag
    dst: int = 0
    event_id: object = 0  # the raw id (static or traced): synccheck checks its range
    when: object = True
    pipe: str = ""  # a barrier's pipe: "ALL" or one pipe


class TraceState(threading.local):
    """The sanitizers' trace-time state, all of it: the site tables of the launches being traced
    (innermost last) and the flag transforms in force (the mutation test's, innermost last). Each
    thread has its own, as JAX's trace state is per thread: a program traced in another thread
    (``core.run``'s outputs-only programs, compiled in the background) never sees this one's."""

    def __init__(self):
        self.tables: list[SiteTable] = []
        self.flag_transforms: list[Callable[[FlagOp], FlagOp]] = []


TRACE = TraceState()
_FALLBACK = SiteTable("(no launch)")


def current_table() -> SiteTable:
    """The table sites register into: the innermost launch being traced (or a catch-all)."""
    return TRACE.tables[-1] if TRACE.tables else _FALLBACK


@contextlib.contextmanager
def tracing(table: SiteTable):
    """Register the sites of instructions traced inside the block into ``table``."""
    TRACE.tables.append(table)
    try:
        yield table
    finally:
        TRACE.tables.pop()


@contextlib.contextmanager
def flag_transform(fn: Callable[[FlagOp], FlagOp]):
    """Inside the block, every flag op traced passes through ``fn`` first (see ``mutation.py``)."""
    TRACE.flag_transforms.append(fn)
    try:
        yield fn
    finally:
        TRACE.flag_transforms.pop()


@functools.lru_cache(maxsize=256)
def stage_base(allocs: tuple) -> tuple[dict, int]:
    """(alloc name -> index of its stage 0 in the flat stage table, number of stages)."""
    base, s = {}, 0
    for a in allocs:
        base[a.name] = s
        s += a.stages
    return base, s


def alloc_id(ctx, key) -> int:
    """Findings name allocations by index: allocations first, then GM tensors."""
    if isinstance(key, tuple):  # ("gm", name)
        return len(ctx.allocs) + [g.name for g in ctx.gm].index(key[1])
    return [a.name for a in ctx.allocs].index(key)

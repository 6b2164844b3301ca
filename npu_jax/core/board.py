"""The Board: a launch's timing without XLA -- the Core's instruction protocol on numpy clocks.

A :class:`BoardCore` has the instruction methods of :class:`~npu_jax.core.state.Core` (``data_copy``,
``load2d``, ``load3d``, ``mmad``, ``fixpipe``, ``l0c_to_ub``, ``vector``, ``vector_lanes``, ``scalar``,
``set_value``, the flags and barriers) and runs every core of a launch at once: each clock, flag and
counter is a numpy array over the cores, an operand's address may be an array over the cores (one
block's offset each), and an instruction is charged in plain Python, nothing traced or compiled. It
moves no data. What it computes is what :func:`~npu_jax.core.isa.execute.issue` charges: the same
declarations (``isa/table.py``: pipe, counters) and cost rules (``hw/costs.py``, evaluated on numpy),
with each rule's operands (bytes, bursts, L2 hits, bank conflicts, repeats) taken from the instruction's
operands as its semantics take them; in order on each pipe, SetFlag / WaitFlag / PipeBarrier as
``sync.py`` keeps them; the L2's read record (``l2.py``: whole tensors, recency) kept per element and
shared by the cores, core after core within an instruction (``board_gm.py``). :func:`report_arrays`
gives the clocks as the emulator's :class:`~npu_jax.report.report.Report` holds them (``asc/onboard.py``
builds the Report), so every figure of it (cycles, busy per pipe, bytes, the bottleneck) is computed by
the same code as a run's. Kernels written on ``core/`` run here as they are where they loop with
:func:`fori_loop` (``kernels/elementwise.py``, ``pool.py``, the relayout of ``conv.py``).

Where an operation needs data (GetValue, a print of a tensor, a collective across cores) the Board
raises :class:`BoardUnsupported`, and its caller runs the emulator instead. The tests hold the Board to
the emulator's timing-only run figure for figure (``tests/test_board.py``); no figure is fitted.
"""

from __future__ import annotations

import functools
import math
import os

import jax.numpy as jnp
import numpy as np
from jax import lax

from npu_jax.core import wide
from npu_jax.core.board_gm import GmRecords, _int
from npu_jax.core.buffers import Ref
from npu_jax.core.isa import table, vecops
from npu_jax.core.isa.data import View
from npu_jax.core.isa.decl import hw_numbers
from npu_jax.core.isa.lanes import Lanes
from npu_jax.core.isa.vector import BINARY, REDUCE, lane_address, sources, ub_address
from npu_jax.core.pipes import COUNTER_INDEX, COUNTERS, PIPE_INDEX, PIPES
from npu_jax.core.state import Context, GmWindow
from npu_jax.core.sync import parse_event
from npu_jax.errors import NpuError
from npu_jax.hw import costs
from npu_jax.hw.formats import itemsize


class BoardUnsupported(NpuError):
    """An operation the Board does not price (it needs data, or a collective): run the emulator."""


class BoardCore:
    """Every core of one launch, timing only (see the module's docstring). ``ctx`` is the launch's
    :class:`~npu_jax.core.state.Context`; ``active``: cores moving data at once where fewer than
    launched (blocks in waves)."""

    on_board = True

    def __init__(self, ctx: Context, active: int | None = None, extents: dict | None = None):
        n = ctx.n_cores
        P, E = len(PIPES), ctx.hw.num_event_ids
        self.ctx, self.n, self.h = ctx, n, hw_numbers(ctx.hw)
        self.free = np.zeros((n, P), np.int64)
        self.busy = np.zeros((n, P), np.int64)
        self.n_instr = np.zeros((n, P), np.int64)
        self.flag_time = np.zeros((n, P, P, E), np.int64)
        self.counters = np.zeros((n, len(COUNTERS)), np.int64)
        self.block = np.arange(n, dtype=np.int64)
        self._all = np.ones(n, bool)
        self._costs: dict = {}  # (cost rule, its operands) -> cycles: loops repeat their operands
        self.active = active
        self.pred = None  # (n,) bool: the cores whose path this is (asc's branches on the block index)
        self.mem = GmRecords(ctx, extents)  # the GM windows' extents, the L2's record, who wrote

    # ---- what the Core is asked for besides instructions --------------------------------------
    @property
    def hw(self):
        return self.ctx.hw

    @property
    def active_cores(self):
        return self.n if self.active is None else self.active

    def replace(self, **kw) -> BoardCore:
        for k, v in kw.items():
            if k not in ("active", "pred"):
                raise BoardUnsupported(f"the Board does not change a core's {k!r}.")
            setattr(self, k, None if v is None else np.asarray(v))
        return self

    def __getattr__(self, name):  # the data a Core holds (gm, buf, san, ...): none here
        raise BoardUnsupported(
            f"the timing Board holds no {name!r} (no data): a kernel that reads it is priced by the emulator."
        )

    def gm_window(self, name: str, starts, sizes, limit=None) -> GmWindow:
        spec = self.ctx.gm_spec(name)
        if len(starts) != len(spec.shape) or len(sizes) != len(spec.shape):
            raise ValueError(
                f"window of {name!r} needs {len(spec.shape)} starts and sizes, got {len(starts)} and {len(sizes)}."
            )
        return GmWindow(
            name, tuple(starts), tuple(int(s) for s in sizes), None if limit is None else tuple(limit)
        )

    def at_tile(self, **coords) -> BoardCore:
        return self

    # ---- the clocks: issue's charge and count ----------------------------------------------------
    def _when(self, when) -> np.ndarray:
        if when is True:
            w = self._all
        elif isinstance(when, np.ndarray) and when.dtype == bool and when.shape == (self.n,):
            w = when
        else:
            w = np.broadcast_to(np.asarray(when, bool), (self.n,))
        return w & self.pred if self.pred is not None else w

    def charge(self, pipe: str, cycles, w: np.ndarray) -> BoardCore:
        """``execute.charge``: ``cycles`` on ``pipe``, in order, where ``w``."""
        p = PIPE_INDEX[pipe]
        c = cycles if isinstance(cycles, int) else np.asarray(cycles).astype(np.int64)
        if w is not self._all:
            c = np.where(w, c, 0)
        self.free[:, p] += c
        self.busy[:, p] += c
        self.n_instr[:, p] += w
        return self

    def _issue(self, instr, w, counts, **cost) -> BoardCore:
        for path, amount in counts:
            a = amount if isinstance(amount, int) else np.asarray(amount).astype(np.int64)
            self.counters[:, COUNTER_INDEX[path]] += a if w is self._all else np.where(w, a, 0)
        key = tuple((k, _key(v)) for k, v in cost.items())
        if any(k is None for _, k in key):
            cycles = instr.cost(self.h, **cost)
        else:  # the same operands again (a loop's next iteration): the rule's answer again
            key = (instr.cost, key)
            cycles = self._costs.get(key)
            if cycles is None:
                cycles = self._costs[key] = instr.cost(self.h, **cost)
        return self.charge(instr.pipe, cycles, w)

    # ---- the instructions ------------------------------------------------------------------------
    def data_copy(
        self, *, dst, src, layout=None, kernel=None, block_n=None, outside="zero", atomic=None, when=True
    ) -> BoardCore:
        w = self._when(when)
        if isinstance(src, GmWindow) and isinstance(dst, Ref):
            if dst.buffer not in ("L1", "UB"):
                raise ValueError(f"DataCopy from GM goes to L1 or UB, not {dst.buffer}.")
            src = self.mem.window(src)
            valid = self.mem.valid(src)
            nbytes, bursts = self.mem.bursts(src, valid)
            hit = self.mem.read(src, valid, w, nbytes)
            rate = costs.gm_rate(self.h, self.active_cores)
            counts = ((f"GM->{dst.buffer}", nbytes), ("HBM->L2", nbytes - hit))
            return self._issue(
                table.DATA_COPY_IN, w, counts, nbytes=nbytes, bursts=bursts, rate=rate, hit_bytes=hit
            )
        if isinstance(src, Ref) and isinstance(dst, GmWindow):
            if src.buffer != "UB":
                raise ValueError(f"DataCopy to GM comes from UB (MTE3), not {src.buffer}.")
            dst = self.mem.window(dst)
            valid = self.mem.valid(dst)
            nbytes, bursts = self.mem.bursts(dst, valid)
            self.mem.enter(nbytes, w)
            self.mem.mark(dst, valid, w, atomic)
            counts = (("UB->GM", nbytes), ("L2->HBM", self.mem.write_back(dst.name, nbytes)))
            rate = costs.write_rate(self.h, self.active_cores)
            return self._issue(table.DATA_COPY_OUT, w, counts, nbytes=nbytes, bursts=bursts, rate=rate)
        raise ValueError(
            f"DataCopy supports GM->L1, GM->UB and UB->GM; got {type(src).__name__} -> {type(dst).__name__}."
        )

    def load2d(
        self, *, dst, src, start=(0, 0), valid=None, when=True, transpose=False, shape=None
    ) -> BoardCore:
        rows, cols = dst.alloc.shape if shape is None else shape
        isz = itemsize(src.alloc.dtype)
        if valid is None:
            nbytes = rows * cols * isz
        else:
            whole = costs.load_l0a_bytes if dst.buffer == "L0A" else costs.load_l0b_bytes
            nbytes = whole(self.h, _int(valid[0]), _int(valid[1]), isz)
        instr = table.LOAD2D_L0B if dst.buffer == "L0B" else table.LOAD2D_L0A
        return self._issue(instr, self._when(when), ((f"L1->{dst.buffer}", nbytes),), nbytes=nbytes)

    def load3d(self, *, dst, src, geom, m_valid=None, k_valid=None, when=True, **_) -> BoardCore:
        m_ext, k_ext = dst.alloc.shape
        rows = np.minimum(_int(m_ext if m_valid is None else m_valid), m_ext)
        cols = k_ext if k_valid is None else np.minimum(_int(k_valid), k_ext)
        nbytes = costs.load_l0a_bytes(self.h, rows, cols, itemsize(src.alloc.dtype))
        return self._issue(table.LOAD3D, self._when(when), (("L1->L0A", nbytes),), nbytes=nbytes)

    def mmad(self, *, dst, a, b, m, n, k, init=False, when=True) -> BoardCore:
        m_, n_, k_ = _int(m), _int(n), _int(k)
        isz = itemsize(a.alloc.dtype)
        counts = (
            ("flops", 2 * m_ * n_ * k_),
            ("flops_issued", costs.mmad_flops_issued(self.h, m_, n_, k_, isz)),
        )
        return self._issue(table.MMAD, self._when(when), counts, m=m_, n=n_, k=k_, itemsize=isz)

    def fixpipe(self, *, dst, src, m, n, when=True, **_) -> BoardCore:
        if self.hw.coupled:
            raise ValueError(f"{self.hw.name} has no Fixpipe (coupled data path): move L0C with l0c_to_ub.")
        w, m_, n_ = self._when(when), _int(m), _int(n)
        if isinstance(dst, GmWindow):
            dst = self.mem.window(dst)
            valid = self.mem.valid(dst, m_, n_)
            nbytes, bursts = self.mem.bursts(dst, valid)
            self.mem.enter(nbytes, w)
            self.mem.mark(dst, valid, w)
            counts = (("L0C->GM", nbytes), ("L2->HBM", self.mem.write_back(dst.name, nbytes)))
            rate = costs.write_rate(self.h, self.active_cores)
            return self._issue(
                table.FIXPIPE_GM, w, counts, m=m_, n=n_, out_bytes=nbytes, bursts=bursts, rate=rate
            )
        counts = (("L0C->L1", m_ * n_ * itemsize(dst.alloc.dtype)),)
        return self._issue(table.FIXPIPE_L1, w, counts, m=m_, n=n_)

    def l0c_to_ub(self, *, dst, src, m, n, when=True, **_) -> BoardCore:
        m_, n_ = _int(m), _int(n)
        counts = (("L0C->UB", m_ * n_ * itemsize(dst.alloc.dtype)),)
        return self._issue(table.L0C_TO_UB, self._when(when), counts, m=m_, n=n_)

    def vector(self, op: str, dst, *srcs, count_elems=None, when=True, **_) -> BoardCore:
        if op not in table.VECTOR:
            raise ValueError(f"unknown vector op {op!r}.")
        if len(srcs) != sources(op):
            raise ValueError(f"{op} takes {sources(op)} source(s), got {len(srcs)}.")
        shape = dst.shape if isinstance(dst, View) else dst.alloc.shape
        width = max([itemsize(dst.alloc.dtype)] + [itemsize(s.alloc.dtype) for s in srcs])
        if op in REDUCE:
            n_el = math.prod(_shape(srcs[0])) if count_elems is None else _int(count_elems)
        else:
            n_el = math.prod(shape) if count_elems is None else _int(count_elems)
        nbytes = n_el * width
        conflict = False
        if op in BINARY and self.hw.ub_bank_groups:
            addrs = [ub_address(s, np) for s in srcs]
            if all(a is not None for a in addrs) and all(_shape(s) == tuple(shape) for s in srcs):
                conflict = costs.ub_read_conflict(self.h, addrs[0], addrs[1])
        cost = dict(nbytes=nbytes, conflict=conflict, cpr=vecops.cycles_per_repeat(op, width))
        return self._issue(table.VECTOR[op], self._when(when), (("vector_bytes", nbytes),), **cost)

    def vector_lanes(self, op: str, dst, *srcs, args: tuple = (), when=True, **_) -> BoardCore:
        if op not in table.VECTOR_LANES:
            raise ValueError(f"unknown lane-form vector op {op!r}.")
        for r in (dst,) + srcs:
            if not isinstance(r, Lanes):
                raise TypeError(f"{op}: a lane-form operand is a lanes.Lanes, got {type(r).__name__}.")
        o, shaped = vecops.OPS.get(op), vecops.SHAPED.get(op)
        repeats = dst.pattern.shape[0]
        if shaped is not None and shaped.repeats == "src" and srcs:
            repeats = srcs[0].pattern.shape[0]
        width = max(itemsize(r.elem) for r in (dst,) + srcs)
        nbytes = dst.pattern.elements() * width
        conflict = False
        if o is not None and o.n_src == 2 and self.hw.ub_bank_groups:
            a0, a1 = (lane_address(s, np) for s in srcs)
            conflict = costs.ub_read_conflict(self.h, a0, a1)
        cost = dict(repeats=repeats, cpr=vecops.cycles_per_repeat(op, width), conflict=conflict)
        return self._issue(table.VECTOR_LANES[op], self._when(when), (("vector_bytes", nbytes),), **cost)

    def get_value(self, src, when=True):
        raise BoardUnsupported(
            "GetValue reads data: a kernel that reads a value into a scalar runs on the emulator."
        )

    def set_value(self, dst, value, when=True) -> BoardCore:
        return self._issue(table.SET_VALUE, self._when(when), (), cycles=self.hw.assumed.scalar_ub_cycles)

    def scalar(self, cycles, when=True) -> BoardCore:
        return self._issue(table.SCALAR, self._when(when), (), cycles=cycles)

    # ---- flags (sync.py) ---------------------------------------------------------------------------
    def _event(self, event_id) -> np.ndarray:
        n = self.hw.num_event_ids
        if isinstance(event_id, bool) or (isinstance(event_id, int) and not 0 <= event_id < n):
            raise ValueError(f"event id must be in 0..{n - 1} on {self.hw.name}, got {event_id!r}.")
        if isinstance(event_id, (int, np.integer)):
            return np.int64(event_id)
        return np.clip(_int(event_id), 0, n - 1)

    def set_flag(self, event: str, event_id=0, when=True) -> BoardCore:
        s, d = _parse_event(event)
        e, w = self._event(event_id), self._when(when)
        if e.ndim == 0 and w.all():
            self.flag_time[:, s, d, e] = self.free[:, s]
            return self
        e, cores = np.broadcast_to(e, (self.n,)), np.flatnonzero(w)
        self.flag_time[cores, s, d, e[cores]] = self.free[cores, s]
        return self

    def wait_flag(self, event: str, event_id=0, when=True) -> BoardCore:
        s, d = _parse_event(event)
        e, w = self._event(event_id), self._when(when)
        if e.ndim == 0 and w.all():
            np.maximum(self.free[:, d], self.flag_time[:, s, d, e], out=self.free[:, d])
            return self
        e, cores = np.broadcast_to(e, (self.n,)), np.flatnonzero(w)
        self.free[cores, d] = np.maximum(self.free[cores, d], self.flag_time[cores, s, d, e[cores]])
        return self

    def pipe_barrier(self, pipe: str = "ALL", when=True) -> BoardCore:
        if not isinstance(pipe, str) or (pipe.upper() != "ALL" and pipe.upper() not in PIPE_INDEX):
            raise ValueError(f"pipe must be 'ALL' or one of {PIPES}, got {pipe!r}.")
        if pipe.upper() == "ALL":
            w = self._when(when)
            self.free[w] = self.free[w].max(axis=1, keepdims=True)
        return self


@functools.cache
def _parse_event(event: str) -> tuple[int, int]:
    return parse_event(event)


def _key(v):
    """A cost rule's operand as a hashable key (arrays by their bytes), or None where it has none."""
    if isinstance(v, (bool, int, float, np.generic)):
        return v
    if isinstance(v, np.ndarray):
        return (v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, tuple):
        ks = tuple(_key(x) for x in v)
        return None if any(k is None for k in ks) else ks
    return None


# Whether every compiled launch of a kernel that runs on the Board also runs there and raises where a
# figure differs (the tests' hold on the Board; NPU_JAX_BOARD_CHECK=1 turns it on for a whole run), and
# how many launches it held.
BOARD_CHECK = [os.environ.get("NPU_JAX_BOARD_CHECK", "") not in ("", "0"), 0]


def hold(report, board, name: str, overlapping: bool = False) -> None:
    """Raise where the Board's report ``board`` of a launch differs from the emulator's ``report``:
    clocks, busy cycles, instruction counts, counters, the unwritten output elements and (a timing-only
    run's, which needs no bits to count them) the elements two cores wrote."""
    BOARD_CHECK[1] += 1
    fields = ("pipe_free", "busy", "n_instr", "counters", "unwritten") + ("overlapping_writes",) * overlapping
    for f in fields:
        if not np.array_equal(np.asarray(getattr(report, f)), np.asarray(getattr(board, f))):
            raise AssertionError(
                f"the Board's {f} differs from the emulator's for {name}: {report.cycles} against "
                f"{board.cycles} cycles"
            )


def xp(core):
    """The array module of a kernel's own index arithmetic: numpy on the Board (every core at once),
    ``jax.numpy`` in a traced run."""
    return np if getattr(core, "on_board", False) else jnp


def fori_loop(lower: int, upper: int, body, core):
    """``lax.fori_loop(lower, upper, body, core)``; on the Board a Python loop (the index a Python int)."""
    if getattr(core, "on_board", False):
        for i in range(lower, upper):
            core = body(i, core)
        return core
    return lax.fori_loop(lower, upper, body, core)


def _shape(r) -> tuple:
    return tuple(r.shape) if isinstance(r, View) else tuple(r.alloc.shape)


def _wide(x: np.ndarray) -> np.ndarray:
    """int64 -> the emulator's wide integers (``core/wide.py``: hi, lo limbs of 30 bits)."""
    return np.stack([x >> wide.BITS, x & wide.MASK], axis=-1).astype(np.int32)


def report_arrays(core: BoardCore) -> dict:
    """The Report's arrays of the Board's launch (wide integers, as ``Report.from_cores`` takes them)."""
    return dict(
        pipe_free=_wide(core.free),
        busy=_wide(core.busy),
        n_instr=core.n_instr.astype(np.int32),
        counters=_wide(core.counters),
    )


__all__ = ["BoardCore", "BoardUnsupported", "fori_loop", "report_arrays"]

"""The timing Board's GM side (``board.py``): a window's valid extents and bursts, the L2's per-element
read record shared by the cores (``core/l2.py``'s rules: whole tensors kept, streamed, resident, or
by recency), and which output elements some core wrote -- each as the emulator's semantics compute it,
over numpy arrays of the cores."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from npu_jax.core import l2
from npu_jax.core.isa.data import CLASH, UNWRITTEN, gm_bursts, valid_extents, window_valid
from npu_jax.core.state import Context, GmWindow
from npu_jax.hw.formats import itemsize


def _int(x) -> np.ndarray:
    """An operand (Python int, numpy or concrete jax array; a block-index value) as int64 numpy."""
    if hasattr(x, "traced") and hasattr(x, "concrete"):  # asc's BlockValue
        x = x.traced if x.traced is not None else x.concrete
    return np.asarray(x).astype(np.int64)


class GmRecords:
    """A launch's GM as the Board sees it: no data; ``extents``: each tensor's logical extent (a
    launch's ``extents``, else its spec's shape)."""

    def __init__(self, ctx: Context, extents: dict | None = None):
        self.ctx, self.n = ctx, ctx.n_cores
        dtypes = {l2.TRACK: np.uint8, l2.RECENT: np.int32}
        self.record = {
            name: np.zeros(ctx.gm_spec(name).padded, dtypes[m]) for name, m in ctx.l2_modes if m in dtypes
        }
        self.clock = [0, 0]  # the L2's clock under recency: [32-B units entered, bytes over them]
        self.modes = dict(ctx.l2_modes)
        self.recency = l2.RECENT in self.modes.values()  # (the emulator's clock exists: l2.enter)
        extents = extents or {}
        self.gm_shape = {g.name: tuple(int(e) for e in extents.get(g.name, g.shape)) for g in ctx.gm}
        # each output element's writer, as ``isa.data.write_gm`` records it (UNWRITTEN, a core, CLASH), where a
        # run records them: with data (then a race needs the bits: the outputs' program counts those), or
        # timing-only with the writes marked or racecheck on (no bits: a second core's write is a race)
        self.marked = ctx.move_data or ctx.mark_writes or ctx.checks.race
        self.written = (
            {g.name: np.full(g.padded, UNWRITTEN, np.int32) for g in ctx.gm if g.output}
            if self.marked
            else None
        )
        self.kept = l2.kept(ctx.hw, ctx.gm)

    on_board = True  # (isa.data's extents and bursts then compute in numpy)

    def window(self, win: GmWindow) -> GmWindow:
        """``win`` with its starts and limits as numpy integers over the cores (block-index values too)."""
        parts = win.starts + (win.limit or ())
        if all(v is None or isinstance(v, (int, np.integer, np.ndarray)) for v in parts):
            return win  # (the usual case: nothing to convert)
        limit = None if win.limit is None else tuple(None if v is None else _int(v) for v in win.limit)
        return dataclasses.replace(win, starts=tuple(_int(s) for s in win.starts), limit=limit)

    def valid(self, win: GmWindow, m=None, n=None) -> list[np.ndarray]:
        """``isa.data.valid_extents`` (with an (m, n) tile's limits: ``window_valid``) over the cores."""
        ext = valid_extents(self, win) if m is None else window_valid(self, win, m, n)
        return [np.broadcast_to(e, (self.n,)) for e in ext]

    def bursts(self, win: GmWindow, valid):
        """``isa.data.gm_bursts`` over the cores: (bytes, bursts)."""
        return gm_bursts(self, win, valid)

    def read(self, win: GmWindow, valid, w, nbytes) -> np.ndarray:
        """``l2.read`` over the cores, core after core: the bytes of each core's read already in L2."""
        mode = self.modes.get(win.name, l2.STREAM)
        if mode == l2.RESIDENT:
            return nbytes
        if mode == l2.STREAM:
            return 0 * nbytes
        rec = self.record[win.name]
        isz = itemsize(self.ctx.gm_spec(win.name).dtype)
        sizes = np.asarray(win.sizes)
        # lax.dynamic_slice's start: clamped so that the window lies in the stored tensor
        at = np.clip(
            np.stack([np.broadcast_to(_int(s), (self.n,)) for s in win.starts]),
            0,
            (np.asarray(rec.shape) - sizes)[:, None],
        )
        ext = np.stack(valid)
        hits = np.zeros(self.n, np.int64)
        cap = self.ctx.hw.l2_bytes >> l2.UNIT
        cores = np.flatnonzero(w)
        full = (ext >= sizes[:, None]).all(axis=0)
        if mode == l2.TRACK and len(cores) and full[cores].all() and (at[:, cores] == at[:, cores[:1]]).all():
            # every core reads the same whole window: core i of them finds it read i times before (saturated)
            sl = tuple(slice(a, a + size) for a, size in zip(at[:, cores[0]].tolist(), win.sizes))
            r = rec[sl]
            hits[cores] = r.size
            hits[cores[0]] = np.count_nonzero(r)
            np.minimum(r + len(cores), 2, out=r, casting="unsafe")
            return hits * isz
        if mode == l2.TRACK and len(cores) > 1 and full[cores].all() and _disjoint(at[:, cores], sizes):
            # windows that share no element: every core's update at once
            idx = np.ix_(*(np.arange(size) for size in win.sizes))
            where = tuple(a[(slice(None),) + (None,) * len(win.sizes)] + i for a, i in zip(at[:, cores], idx))
            r = np.minimum(rec[where] + 1, 2).astype(rec.dtype)
            rec[where] = r
            hits[cores] = np.count_nonzero((r == 2).reshape(len(cores), -1), axis=1)
            return hits * isz
        for b in cores:
            sl = tuple(slice(a, a + size) for a, size in zip(at[:, b].tolist(), win.sizes))
            if full[b]:
                m = True
            else:
                m = np.ones(win.sizes, bool)
                for d, e in enumerate(ext[:, b].tolist()):
                    m[(slice(None),) * d + (slice(e, None),)] = False
            if mode == l2.RECENT:
                old = rec[sl]
                hit = m & (old > 0) & (self.clock[0] - (old - 1) < cap)
                hits[b] = np.count_nonzero(hit)
                self._advance((np.count_nonzero(np.broadcast_to(m, old.shape)) - hits[b]) * isz)
                rec[sl] = np.where(m, self.clock[0] + 1, old)
            else:
                r = rec[sl]
                np.minimum(r + m, 2, out=r, casting="unsafe")
                hits[b] = np.count_nonzero((r == 2) & m)
        return hits * isz

    def mark(self, win: GmWindow, valid, w, atomic=None) -> None:
        """``isa.data.write_gm``'s record of who wrote: the window's valid part, where ``w``, core after
        core; without data a second core's write is a race (CLASH), an atomic one never."""
        if self.written is None:
            return
        rec = self.written[win.name]
        sizes = np.asarray(win.sizes)
        at = np.clip(
            np.stack([np.broadcast_to(_int(s), (self.n,)) for s in win.starts]),
            0,
            (np.asarray(rec.shape) - sizes)[:, None],
        )
        ext = np.stack(valid)
        races = not self.ctx.move_data and atomic is None
        for b in np.flatnonzero(w):
            sl = tuple(
                slice(a, a + min(int(e), size))
                for a, e, size in zip(at[:, b].tolist(), ext[:, b].tolist(), win.sizes)
            )
            old = rec[sl]
            if races:
                rec[sl] = np.where(((old >= 0) & (old != b)) | (old == CLASH), CLASH, b)
            else:
                rec[sl] = np.where(old == CLASH, CLASH, b)

    def unwritten(self) -> int:
        """Output elements inside their logical extents that no core wrote (``run.merge_outputs``'s
        count: every element where no data moves)."""
        total = 0
        for g in self.ctx.gm:
            if g.output:
                inside = tuple(slice(0, min(e, s)) for e, s in zip(self.gm_shape[g.name], g.shape))
                n = math.prod(sl.stop for sl in inside)
                total += (
                    n
                    if self.written is None
                    else int(np.count_nonzero(self.written[g.name][inside] == UNWRITTEN))
                )
        return total

    def overlapping(self) -> int:
        """Output elements two cores wrote (``run.merge_outputs``'s count) where the run has no data;
        with data a race needs the bits, and the outputs' program counts it (0 here)."""
        if self.written is None or self.ctx.move_data:
            return 0
        return sum(
            int(np.count_nonzero(self.written[g.name][tuple(slice(0, s) for s in g.shape)] == CLASH))
            for g in self.ctx.gm
            if g.output
        )

    def _advance(self, nbytes: int) -> None:
        total = self.clock[1] + int(nbytes)
        self.clock = [self.clock[0] + (total >> l2.UNIT), total & ((1 << l2.UNIT) - 1)]

    def enter(self, nbytes, w) -> None:
        """``l2.enter``: a write's bytes on the L2's clock (recency; every core's at once)."""
        if self.recency:
            self._advance(int(np.where(w, np.broadcast_to(nbytes, (self.n,)), 0).sum()))

    def write_back(self, name: str, nbytes):
        return nbytes if name not in self.kept else 0 * nbytes


def _disjoint(at: np.ndarray, sizes: np.ndarray) -> bool:
    """Whether windows of ``sizes`` at starts ``at`` (dims x windows) share no element pairwise."""
    apart = (np.abs(at[:, :, None] - at[:, None, :]) >= sizes[:, None, None]).any(axis=0)
    return bool((apart | np.eye(at.shape[1], dtype=bool)).all())

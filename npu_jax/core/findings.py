"""What the sanitizers found: the replay of the event log, the findings, the mutation sweep.

:func:`analyze` replays one core's log (written by the hooks in ``sanitize.py``) with vector clocks
and keeps the first finding of each check; :func:`decode` turns a finding record into a
:class:`Finding` whose message names the instruction, its source line, the pipe, the allocation,
the tile and the fix; :func:`raise_or_warn` is what ``launch`` and ``Report.check`` call;
:func:`sweep_waits` is the mutation test (each WaitFlag removed in turn).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from npu_jax.core.sanitize import (
    BUF_OOB,
    CHECK_NAMES,
    EVENT_ID,
    EXTENT,
    F_ALLOC,
    F_CODE,
    F_INSTR,
    F_OPIPE,
    F_OSITE,
    F_SITE,
    F_STAGE,
    F_T0,
    F_TAG,
    F_X0,
    F_X1,
    GM_OOB,
    HANG,
    INIT,
    K_BARRIER_ALL,
    K_INSTR,
    K_NOP,
    K_SET,
    K_TILE,
    K_WAIT,
    KINDS,
    L_AUX,
    L_MCID,
    L_MDIM,
    L_MVAL,
    L_SITE,
    L_ST,
    L_WHEN,
    LEFT,
    MAX_REFS,
    MEM,
    MISALIGNED,
    N_COORDS,
    NF,
    RACE,
    RAW,
    SKIP,
    SLACK,
    STAGE_OOB,
    SYNC,
    TWICE,
    UNINIT,
    WAR,
    WAW,
    SiteTable,
    mutate,
    stage_base,
)
from npu_jax.core.timing import PIPES
from npu_jax.errors import SanitizerError, SanitizerWarning

_i32 = jnp.int32


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
        return (
            f"{self.name}: {self.caught}/{self.mutants} WaitFlag mutants caught ({pct:.0f}%), "
            f"{self.by_race} of them by racecheck"
        )


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
        raise SanitizerError(
            f"{name}: the unmutated kernel already reports findings:\n"
            + "\n".join(x.message() for x in found)
        )
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
        st = row[L_ST : L_ST + MAX_REFS]
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
            fields = jnp.concatenate(
                [
                    _cols(cand[0], q, cand[1], 0, -1, -1, row[L_MDIM], row[L_MVAL]),
                    _cols(STAGE_OOB, q, aid, st, -1, -1, st, nst),
                ]
            )
            find = _first(find, MEM, bads, fields, instr, site, tile)
        if checks.init:
            find = _first(
                find, INIT, rd & ~init[idx], _cols(UNINIT, q, aid, st, -1, -1, 0, 0), instr, site, tile
            )
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
            fields = jnp.concatenate(
                [
                    _cols(RAW, q, aid, st, wrec[:, 0], wrec[:, 2], 0, 0),
                    _cols(WAW, q, aid, st, wrec[:, 0], wrec[:, 2], 0, 0),
                    _cols(WAR, q, aid, st, other, osite, 0, 0),
                ]
            )
            find = _first(find, RACE, bads, fields, instr, site, tile)
            read_hit = jnp.any((stages[:, None] == idx[None, :]) & rd[None, :], axis=1)  # (S,)
            write_hit = jnp.any((stages[:, None] == idx[None, :]) & wr[None, :], axis=1)
            r = jnp.where(
                read_hit[:, None, None] & (pipes == q)[None, :, None], jnp.stack([ep, site])[None, None, :], r
            )
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
            bads = jnp.stack(
                [(is_set | is_wait) & ((raw_e < 0) | (raw_e >= E)), is_set & pending, is_wait & ~pending]
            )
            fields = _cols(
                jnp.asarray([EVENT_ID, TWICE, HANG]),
                jnp.stack([jnp.where(is_set, s, d), s, d]),
                -1,
                0,
                -1,
                -1,
                jnp.stack([raw_e, e, e]),
                fx,
            )
            find = _first(find, SYNC, bads, fields, instr, site, tile)
        fset = jnp.where(hitf & is_set, True, jnp.where(hitf & is_wait, False, fset))
        if checks.race:
            fvc = jnp.where((hitf & is_set)[..., None], vc[s][None, None, None, :], fvc)
            joined = jnp.maximum(vc[d], fvc[s, d, e])
            vc = jnp.where((pipes == d)[:, None] & is_wait, joined[None, :], vc)
            vc = jnp.where(kind == K_BARRIER_ALL, jnp.max(vc, axis=0)[None, :], vc)
        is_tile = kind == K_TILE
        tile = jnp.where(is_tile, jnp.concatenate([site[None] + 1, st]), tile)
        return (
            i + 1,
            instr + ((kind != K_TILE) & (kind != K_NOP)).astype(_i32),
            vc,
            fvc,
            w,
            r,
            init,
            fset,
            tile,
            find,
        )

    carry = (
        jnp.int32(0),
        jnp.int32(0),
        jnp.zeros((P, P), _i32),
        jnp.zeros((P, P, E, P), _i32),
        jnp.zeros((S, 3), _i32),
        jnp.zeros((S, P, 2), _i32),
        jnp.zeros((S,), jnp.bool_),
        jnp.zeros((P, P, E), jnp.bool_),
        jnp.zeros((1 + N_COORDS,), _i32),
        jnp.zeros((4, NF), _i32),
    )
    out = lax.while_loop(lambda c: c[0] < n, body, carry)
    instr, tile, find = out[1], out[8], out[9]
    if checks.sync:  # flags still set at the end: a SetFlag never waited (from the real final state)
        flat = flag_set.reshape(-1)
        k = jnp.argmax(flat).astype(_i32)
        fs, fd, fe = k // (P * E), (k // E) % P, k % E
        find = _first(
            find,
            SYNC,
            jnp.any(flat)[None],
            _cols(LEFT, fs, -1, 0, -1, -1, fe, fs * 16 + fd),
            instr,
            jnp.int32(-1),
            tile,
        )
    return find


_On = collections.namedtuple("_On", "race mem init sync")


@functools.partial(jax.jit, static_argnames=("n_stages", "n_events", "checks"))
def analyze_cores(logs, counts, flags, sites, cands, *, n_stages: int, n_events: int, checks: tuple):
    """:func:`analyze` over a leading core axis, compiled once per shape (the tables are arguments)."""
    return jax.vmap(
        lambda lg, n, fs: analyze(
            lg, n, fs, sites, cands, n_stages=n_stages, n_events=n_events, checks=checks
        )
    )(logs, counts, flags)


def run_analysis(ctx, logs, counts, flags, table: SiteTable):
    """(n_cores, 4, NF) findings from the cores' logs (leading core axis on every argument)."""
    sites, cands = table.arrays()
    _, S = stage_base(ctx.allocs)
    ch = ctx.checks
    return analyze_cores(
        logs,
        counts,
        flags,
        jnp.asarray(sites),
        jnp.asarray(cands),
        n_stages=S,
        n_events=ctx.hw.num_event_ids,
        checks=(ch.race, ch.mem, ch.init, ch.sync),
    )


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
        return (
            f"{self.check} [{self.kind}] in {self.kernel} ({loc}): {self.op} on pipe {self.pipe} at "
            f"{self.where}: {self.detail} Fix: {self.fix}"
        )

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
    oop, _, owhere = (
        table.site(row[F_OSITE]) if (table is not None and row[F_OSITE] >= 0) else ("-", "-", "-")
    )
    tile = {}
    if table is not None and row[F_TAG] > 0:
        tile = dict(zip(table.tag_names(row[F_TAG] - 1), row[F_T0 : F_T0 + N_COORDS]))
    if row[F_SITE] < 0:
        op, pipe, where = "end of kernel", "-", "the kernel's last instruction"
    x0, x1 = row[F_X0], row[F_X1]
    st = f"{alloc} stage {stage}"
    if code == RAW:
        detail = (
            f"reads {st}, last written by {oop} on pipe {opipe} at {owhere}, and nothing orders "
            f"that write before this read (no SetFlag/WaitFlag chain from {opipe} to {pipe})."
        )
        fix = (
            f"after the write, set_flag('{opipe}_{pipe}', id); before this read, "
            f"wait_flag('{opipe}_{pipe}', id) (or EnQue/DeQue through a Queue)."
        )
    elif code == WAR:
        detail = (
            f"overwrites {st} while {oop} on pipe {opipe} at {owhere} may still be reading it "
            f"(no flag orders that read before this write)."
        )
        fix = (
            f"after the read, set_flag('{opipe}_{pipe}', id) (the 'slot free' flag; FreeTensor); before "
            f"this write, wait_flag('{opipe}_{pipe}', id) (AllocTensor), with a prologue set for the "
            f"first use of each slot."
        )
    elif code == WAW:
        detail = (
            f"writes {st}, last written by {oop} on pipe {opipe} at {owhere}, with no flag "
            f"ordering the two writes: the final contents depend on timing."
        )
        fix = f"order them: set_flag('{opipe}_{pipe}', id) after the first, wait_flag before the second."
    elif code == GM_OOB:
        size = padded = "?"
        if obj is not None:
            padded = obj.padded[x0] if 0 <= x0 < len(obj.padded) else "?"
        detail = (
            f"its window of {alloc} starts at {x1} on dim {x0} and leaves the stored extent "
            f"{padded} (the DMA would clamp or touch memory outside the tensor){size and ''}."
        )
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
            detail = (
                f"WaitFlag<{ev}>({e}) has no pending SetFlag<{ev}>({e}): on hardware pipe "
                f"{ev.split('_')[-1]} would wait forever."
            )
            fix = (
                f"set_flag('{ev}', {e}) before it (for a ping-pong slot: in the prologue), or drop the wait "
                f"(a missing set is often the sign of a wait whose set was predicated off)."
            )
        elif code == TWICE:
            detail = (
                f"SetFlag<{ev}>({e}) while the flag is still set: it was never waited since the "
                f"previous set (undefined on hardware; the second set is lost)."
            )
            fix = f"wait_flag('{ev}', {e}) on the consumer between the two sets (the missing WaitFlag)."
        elif code == LEFT:
            detail = f"flag {ev}({e}) is still set at the end of the kernel: a SetFlag nobody waited."
            fix = (
                f"wait_flag('{ev}', {e}) in the epilogue (drain the prologue's 'slot free' flags), "
                f"or remove the set."
            )
        else:
            detail = (
                f"event id {e} of {ev} is outside the chip's 0..{ctx.hw.num_event_ids - 1 if ctx else '?'}."
            )
            fix = "use event ids below hw.num_event_ids (ping-pong ids: base + i % stages)."
    return Finding(
        CHECK_NAMES[check],
        kind,
        table.name if table is not None else "kernel",
        core,
        row[F_INSTR],
        op,
        pipe,
        where,
        alloc,
        stage,
        oop,
        opipe,
        owhere,
        tile,
        detail,
        fix,
    )


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
    base = (
        f"racecheck [multi-core overlap] in {kernel}: {count} output elements were written by more "
        f"than one core; the kernel's split over block_idx overlaps."
    )
    if overlap_at is None or table is None or table.ctx is None:
        return base
    gid, flat, ca, sa, cb, sb = (int(v) for v in np.asarray(overlap_at))
    if gid < 0:
        return base
    g = [s for s in table.ctx.gm if s.output][gid]
    idx = tuple(int(i) for i in np.unravel_index(flat, g.shape))
    oa, pa, wa = table.site(sa)
    ob, pb, wb = table.site(sb)
    return (
        f"{base} First: {g.name}{list(idx)} written by core {ca} ({oa} on {pa} at {wa}) and core {cb} "
        f"({ob} on {pb} at {wb}). Fix: give each core disjoint output tiles (check the block_idx "
        f"arithmetic and the when= predicates of the edge tiles)."
    )


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
        warnings.warn(
            f"{report.name}: the kernel made {int(np.max(np.asarray(logged)))} instruction calls but "
            f"the sanitizers' log holds {ctx.checks.capacity}; only the first were checked. Pass "
            f"checks=Checks(..., capacity=N) with a larger N.",
            SanitizerWarning,
            stacklevel=3,
        )
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

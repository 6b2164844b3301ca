"""What the sanitizers found, as messages: a finding record decoded into a :class:`Finding` that
names the instruction, its source line, the pipe, the allocation, the tile and the fix;
:func:`findings_of` (a Report's findings, running the replay first when it did not run inline),
:func:`summary_lines` (per check: how many, where the first is) and :func:`raise_or_warn`, which
``launch`` and ``Report.check`` call.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from npu_jax.core.checks.columns import CHECK_NAMES, KEEP, KINDS, N_COORDS, Code, F
from npu_jax.core.checks.ranges import granule_shift
from npu_jax.core.checks.replay import run_analysis
from npu_jax.core.checks.sites import SiteTable
from npu_jax.core.checks.synccheck import flag_name
from npu_jax.core.pipes import PIPES
from npu_jax.errors import SanitizerError, SanitizerWarning


@dataclasses.dataclass(frozen=True)
class Finding:
    """One decoded finding: which check, on which core, at which instruction, and what to fix.

    ``count``: the instruction calls that found it (over the cores); ``more``: occurrences of the
    same check at findings past the first ``KEEP`` kept (the same on every finding of the check)."""

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
    count: int = 1
    more: int = 0

    def message(self) -> str:
        tile = ", ".join(f"{k}={v}" for k, v in self.tile.items())
        if self.core < 0:  # found in the kernel's trace (npu_jax.asc): the same on every block
            loc = "every block, at trace time"
        else:
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
    return flag_name(int(row[F.X1]), PIPES), int(row[F.X0])


def decode(row, table: SiteTable, core: int) -> Finding:
    """A Finding from one record (``find[check]`` of one core)."""
    row = [int(v) for v in np.asarray(row)]
    code = row[F.CODE]
    check, kind = KINDS[code]
    ctx = table.ctx if table is not None else None
    op, pipe, where = table.site(row[F.SITE]) if table is not None else ("?", "?", "?")
    alloc, obj = _alloc_name(ctx, row[F.ALLOC])
    stage = row[F.STAGE]
    opipe = PIPES[row[F.OPIPE]] if 0 <= row[F.OPIPE] < len(PIPES) else "-"
    oop, _, owhere = (
        table.site(row[F.OSITE]) if (table is not None and row[F.OSITE] >= 0) else ("-", "-", "-")
    )
    tile = {}
    if table is not None and row[F.TAG] > 0:
        tile = dict(zip(table.tag_names(row[F.TAG] - 1), row[F.T0 : F.T0 + N_COORDS]))
    if row[F.SITE] < 0:
        op, pipe, where = "end of kernel", "-", "the kernel's last instruction"
    x0, x1 = row[F.X0], row[F.X1]
    st = f"{alloc} stage {stage}"
    if code == Code.RAW:
        detail = (
            f"reads {st}, last written by {oop} on pipe {opipe} at {owhere}, and nothing orders "
            f"that write before this read (no SetFlag/WaitFlag chain from {opipe} to {pipe})."
        )
        fix = (
            f"after the write, set_flag('{opipe}_{pipe}', id); before this read, "
            f"wait_flag('{opipe}_{pipe}', id) (or EnQue/DeQue through a Queue)."
        )
    elif code == Code.WAR:
        detail = (
            f"overwrites {st} while {oop} on pipe {opipe} at {owhere} may still be reading it "
            f"(no flag orders that read before this write)."
        )
        fix = (
            f"after the read, set_flag('{opipe}_{pipe}', id) (the 'slot free' flag; FreeTensor); before "
            f"this write, wait_flag('{opipe}_{pipe}', id) (AllocTensor), with a prologue set for the "
            f"first use of each slot."
        )
    elif code == Code.WAW:
        detail = (
            f"writes {st}, last written by {oop} on pipe {opipe} at {owhere}, with no flag "
            f"ordering the two writes: the final contents depend on timing."
        )
        fix = f"order them: set_flag('{opipe}_{pipe}', id) after the first, wait_flag before the second."
    elif code == Code.GM_OOB:
        size = padded = "?"
        if obj is not None:
            padded = obj.padded[x0] if 0 <= x0 < len(obj.padded) else "?"
        detail = (
            f"its window of {alloc} starts at {x1} on dim {x0} and leaves the stored extent "
            f"{padded} (the DMA would clamp or touch memory outside the tensor){size and ''}."
        )
        fix = "correct the tile index arithmetic, or predicate the instruction off (when=) for tiles past the edge."
    elif code == Code.BUF_OOB:
        detail = f"its window of {alloc} starts at {x1} on dim {x0} and runs past the allocation."
        fix = "keep start + size inside the allocation (size the allocation for the largest window)."
    elif code == Code.STAGE_OOB:
        detail = f"uses stage {x0} of {alloc}, which has {x1} stage(s)."
        fix = f"index stages modulo {x1} (alloc[i % {x1}])."
    elif code == Code.MISALIGNED:
        detail = f"its window of {alloc} starts at {x1} on dim {x0}, off a fractal boundary."
        fix = "start LoadData/Load3D windows on whole fractals (multiples of C0 / 16)."
    elif code == Code.EXTENT:
        detail = f"extent #{x0} = {x1} is outside its tile in {alloc}."
        fix = "clip m, n, k (or the element count) to the tile's shape."
    elif code == Code.UNINIT:
        detail = (
            f"reads {st}, and the first byte it reads that no instruction wrote is {_unwritten(obj, x0, x1)}."
        )
        fix = (
            "fill what is read first (DataCopy/LoadData/Mmad/a vector op; a DataCopy moves whole 32-B blocks, "
            "so a count that is not a multiple of 32 B is rounded down), or read only what was filled."
        )
    else:
        ev, e = _event(row)
        if code == Code.HANG:
            detail = (
                f"WaitFlag<{ev}>({e}) has no pending SetFlag<{ev}>({e}): on hardware pipe "
                f"{ev.split('_')[-1]} would wait forever."
            )
            fix = (
                f"set_flag('{ev}', {e}) before it (for a ping-pong slot: in the prologue), or drop the wait "
                f"(a missing set is often the sign of a wait whose set was predicated off)."
            )
        elif code == Code.TWICE:
            detail = (
                f"SetFlag<{ev}>({e}) while the flag is still set: it was never waited since the "
                f"previous set (undefined on hardware; the second set is lost)."
            )
            fix = f"wait_flag('{ev}', {e}) on the consumer between the two sets (the missing WaitFlag)."
        elif code == Code.LEFT:
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
        row[F.INSTR],
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
        max(row[F.COUNT], 1),
    )


def _unwritten(alloc, byte: int, elem: int) -> str:
    """The first byte an uninitialised read found unwritten, its element, and the granule tracked."""
    if alloc is None or not hasattr(alloc, "stage_bytes"):
        return f"byte {byte} (element {elem})"
    at = f"element {elem}"
    if alloc.dtype != "uint8" and len(alloc.shape) > 1 and 0 <= elem < int(np.prod(alloc.shape)):
        at += f" {tuple(int(i) for i in np.unravel_index(elem, alloc.shape))}"
    g = 1 << granule_shift(alloc)
    return f"byte {byte} ({at}; what is written is tracked in {g}-B blocks): its contents are the NaN poison"


def findings_of(report) -> list[Finding]:
    """Decode a Report's findings: per check, the distinct findings (code and instruction) of every
    core, the first ``KEEP`` in core order (a finding on several cores is named at the first, its
    ``count`` summed). Runs the analysis on the logged events first, unless it ran inside the kernel's
    program (``inline``)."""
    table = report.sanitizer
    if report.san_findings is not None:
        f = np.asarray(report.san_findings)
    elif report.san_log is not None:
        f = np.asarray(run_analysis(table.ctx, report.san_log, report.san_logged, report.san_flags, table))
    else:
        return []
    out = []
    for c in range(4):
        kept: dict[tuple, Finding] = {}
        more = int(f[:, c, KEEP, F.COUNT].sum())
        for core in range(f.shape[0]):
            for row in f[core, c, :KEEP]:
                if not row[F.CODE]:
                    continue
                key = (int(row[F.CODE]), int(row[F.SITE])) + (
                    (int(row[F.X0]), int(row[F.X1])) if row[F.CODE] == Code.LEFT else ()
                )
                if key in kept:
                    old = kept[key]
                    kept[key] = dataclasses.replace(old, count=old.count + max(int(row[F.COUNT]), 1))
                elif len(kept) < KEEP:
                    kept[key] = decode(row, table, core)
                else:
                    more += max(int(row[F.COUNT]), 1)
        out += [dataclasses.replace(x, more=more) for x in kept.values()]
    return out


def summary_lines(found: list[Finding]) -> list[str]:
    """Per check, in the order of ``found``: how many findings, where the first is, and how many more
    than were kept; e.g. ``memcheck: 2 findings (first at k.py:12 (kernel))``."""
    groups: dict[str, list[Finding]] = {}
    for f in found:
        groups.setdefault(f.check, []).append(f)
    out = []
    for check, fs in groups.items():
        occ = sum(f.count for f in fs) + fs[0].more
        distinct = f", {len(fs)} distinct" if occ > len(fs) else ""
        line = f"{check}: {occ} finding{'s' * (occ != 1)}{distinct} (first at {fs[0].where})"
        if fs[0].more:
            line += f" ... and {fs[0].more} more (kept the first {KEEP})"
        out.append(line)
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
    msgs = []
    heads = dict(zip(dict.fromkeys(f.check for f in found), summary_lines(found)))
    for f in found:
        if f.check in heads:  # each check's summary, before its findings
            msgs.append(heads.pop(f.check))
        msgs.append("  " + f.message() + (f" [{f.count} times]" if f.count > 1 else ""))
    n = len(found)
    if ov is not None and int(np.asarray(ov)):
        msgs.insert(0, overlap_message(report.overlap_at, report.sanitizer, report.name, int(np.asarray(ov))))
        n += 1
    if not msgs:
        return
    text = f"{n} sanitizer finding(s) in {report.name}:\n  " + "\n  ".join(msgs)
    action = ctx.checks.action if ctx is not None else "raise"
    if action == "warn":
        warnings.warn(text, SanitizerWarning, stacklevel=3)
    else:
        raise SanitizerError(text)

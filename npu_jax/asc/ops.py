"""The vendor's instructions as functions: each checks the vendor's rules at the call and issues
the existing instruction of ``npu_jax.core`` on the kernel's core (no second instruction set).

Local operands become views of one stage of an allocation (``core.isa.View``); GM operands
windows of the argument's flat memory. What the vendor's hardware does silently (a DataCopy
whose bytes are not a multiple of 32 B is rounded down) is done here too, and said (a warning);
what its sanitizer reports (an access past a tensor, a UB address off 32 B, a GlobalTensor
never given memory) is a finding at the user's line.
"""

from __future__ import annotations

import builtins
import math
import warnings

import jax.numpy as jnp

from npu_jax.asc import runtime
from npu_jax.asc.blockidx import BlockValue
from npu_jax.asc.operands import Form, issue_lanes, scalar_of
from npu_jax.asc.runtime import AscError
from npu_jax.asc.tensors import GlobalTensor, LocalTensor, check_live
from npu_jax.asc.types import (
    DataCopyExtParams,
    DataCopyPadExtParams,
    DataCopyParams,
)
from npu_jax.core.isa.data import View
from npu_jax.hw.costs import round_up

_i32 = jnp.int32


class AscWarning(UserWarning):
    """What the vendor's hardware does silently and the emulator does too, said aloud."""


def not_supported(name: str):
    raise NotImplementedError(
        f"asc.{name} is not supported by the emulator yet; see docs/kernels.md for what is."
    )


# ---- blocks ---------------------------------------------------------------------------------------
def get_block_idx():
    """``GetBlockIdx()``: this core's index in [0, num_blocks): a value offsets are computed from, and one a
    kernel may branch on (``if asc.get_block_idx() >= n: return``): see ``blockidx.py``."""
    run = runtime.current()
    if run.planning:
        return BlockValue(None, run.block)
    return run.block if run.eager else BlockValue(run.core.block, None)


def get_block_num() -> int:
    """``GetBlockNum()``: the launch's number of blocks."""
    return runtime.current().n_blocks


# ---- operands -------------------------------------------------------------------------------------
def _static(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _count(count, call: str) -> int:
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise AscError(
            f"{call} at {runtime.where()}: count is a Python int of elements >= 0, got {count!r} (a traced "
            f"count is not supported; predicate the call or size the tile statically)."
        )
    return count


def _local(t: LocalTensor, count: int, call: str, role: str, pipe: str = "V"):
    """A View of ``count`` elements of ``t``, after the vendor's checks; None in the plan pass."""
    run = runtime.current()
    if not isinstance(t, LocalTensor):
        raise TypeError(f"{call}: the {role} must be an asc LocalTensor, got {type(t).__name__}.")
    check_live(t, call, role)
    hook = runtime.current().on_operand
    if hook is not None:
        hook(t, pipe)
    isz = t.dtype.itemsize
    blk = _block(run)
    if t.buffer == "UB" and _static(t.offset) and (t.offset * isz) % blk:
        run.finding(
            "memcheck",
            "misaligned",
            call,
            pipe,
            f"the {role}'s UB address is {t.offset * isz} B past its buffer's start, not a multiple of {blk} B "
            f"(UB operands of DataCopy and vector instructions start on {blk}-B boundaries).",
            f"offset the view by a multiple of {blk // isz} elements of {t.dtype}.",
            alloc=t.position.name,
        )
    if count > t.length:
        run.finding(
            "memcheck",
            "illegal write" if role == "destination" else "illegal read",
            call,
            pipe,
            f"{count} elements ({count * isz} B) of the {role} run {(count - t.length) * isz} B past the "
            f"end of its {t.length}-element {t.position.name} tensor.",
            "keep count within the tensor (size the buffer for the largest tile).",
            alloc=t.position.name,
        )
        count = t.length
    if run.planning or count == 0:
        return None
    alloc = run.allocs[t.request.index]
    return View(alloc, t.slot, (t.offset,), shape=(count,), dtype=view_type(alloc, t))


def view_type(alloc, t: LocalTensor):
    """The type a view of ``t`` reads its allocation as: None (the allocation's own), or ``t``'s on a
    byte allocation (a buffer used as several types)."""
    return None if alloc.dtype == t.dtype.fmt else t.dtype.fmt


def gm_window(
    g: GlobalTensor, count: int, call: str, pipe: str, write: bool, rows: int = 1, pitch: int | None = None
):
    """The GM window of ``count`` elements at ``g`` (None: nothing to move), after the checks; with
    ``rows`` > 1, ``rows`` runs of ``count`` elements ``pitch`` apart (a matrix of rows ``pitch`` long:
    the plan records the pitch, and the launch stores the argument as rows of it)."""
    run = runtime.current()
    if not isinstance(g, GlobalTensor):
        raise TypeError(f"{call}: expected an asc GlobalTensor, got {type(g).__name__}.")
    if g.addr is None:
        run.finding(
            "initcheck",
            "uninitialised GM",
            call,
            pipe,
            f"the GlobalTensor made at {g.where} was never given memory (SetGlobalBuffer): its address is "
            f"undefined, so the copy {'writes to' if write else 'reads from'} nowhere the kernel owns.",
            "call x_gm.set_global_buffer(x + offset, length) before the first copy.",
            alloc="GM",
        )
        return None
    a = g.addr
    use = run.gm_use.setdefault(a.name, runtime.GmUse())
    use.written = use.written or write
    if rows > 1 or pitch is not None:
        if use.pitch is None:
            use.pitch, use.where = pitch, runtime.where()
        elif use.pitch != pitch:
            raise NotImplementedError(
                f"asc: GM argument {a.name!r} is read as rows of {pitch} at {runtime.where()} and of {use.pitch} at "
                f"{use.where}; one pitch per argument is supported (see docs/kernels.md)."
            )
    span = count if rows == 1 else (rows - 1) * pitch + count
    if _static(a.offset) and (a.offset < 0 or a.offset + span > a.size):
        run.finding(
            "memcheck",
            "illegal write" if write else "illegal read",
            call,
            pipe,
            f"{span} elements at offset {a.offset} of GM argument {a.name!r} ({a.size} elements) leave it.",
            "keep offset + count within the argument.",
            alloc=f"GM {a.name}",
        )
        if rows > 1 or a.offset < 0:
            return None
        count = builtins.max(0, builtins.min(count, a.size - a.offset))
    if run.planning or count == 0:
        return None
    spec = run.core.ctx.gm_spec(a.name)
    off = a.offset if run.board else jnp.asarray(a.offset, _i32)
    if len(spec.shape) == 1:
        return run.core.gm_window(a.name, (off,), (builtins.min(count, a.size),))
    p = spec.shape[1]
    if count > p:
        if rows > 1 or count % p or (_static(a.offset) and a.offset % p):
            raise NotImplementedError(
                f"asc: a copy of {count} elements at {runtime.where()} crosses the rows of {p} that GM argument "
                f"{a.name!r} is stored in; copy row by row (see docs/kernels.md)."
            )
        return run.core.gm_window(a.name, (off // p, off % p), (count // p, p))
    return run.core.gm_window(a.name, (off // p, off % p), (rows, count))


def _dma_count(count: int, dtype, call: str) -> int:
    """The vendor's rule: a DataCopy moves whole 32-B blocks; other counts are rounded DOWN, silently."""
    nbytes, blk = count * dtype.itemsize, _block(runtime.current())
    if nbytes % blk:
        kept = (nbytes // blk) * blk // dtype.itemsize
        if not runtime.current().planning:  # said once per launch: by the plan pass, which every launch runs
            return kept
        warnings.warn(
            f"data_copy at {runtime.where()}: {count} elements of {dtype} = {nbytes} B is not a multiple of "
            f"{blk} B; the vendor's DataCopy silently rounds it down to {kept} elements ({kept * dtype.itemsize} "
            f"B), and so does the emulator. Use data_copy_pad for unaligned moves.",
            AscWarning,
            stacklevel=3,
        )
        return kept
    return count


def _block(run) -> int:
    """The 32-B block of UB the vendor's DataCopy and vector operands are counted and aligned in."""
    return run.hw.alignment("UB")


issue = runtime.issue


# ---- DataCopy -------------------------------------------------------------------------------------
def data_copy(dst, src, params) -> None:
    """``DataCopy(dst, src, count | DataCopyParams | Nd2NzParams)``: GM -> UB / L1 (MTE2), UB -> GM
    (MTE3), UB -> UB (V). ``count`` elements; ``count * sizeof(T)`` should be a multiple of 32 B."""
    rows, pitch = 1, None
    if isinstance(params, DataCopyParams):  # block_count blocks of block_len 32-B units
        local = dst if isinstance(dst, LocalTensor) else src
        per = _block(runtime.current()) // local.dtype.itemsize
        gm_stride = params.src_stride if isinstance(src, GlobalTensor) else params.dst_stride
        ub_stride = params.dst_stride if isinstance(src, GlobalTensor) else params.src_stride
        if ub_stride or not isinstance(dst, GlobalTensor) and not isinstance(src, GlobalTensor):
            raise NotImplementedError(
                "asc.data_copy with a strided local side (DataCopyParams stride on UB / L1) is not supported yet; "
                "see docs/kernels.md."
            )
        if gm_stride or local.request.shape is not None:  # rows of a matrix in GM
            rows, pitch = params.block_count, (params.block_len + gm_stride) * per
            params = params.block_len * per
        else:
            params = params.block_count * params.block_len * per
    count = _count(params, "data_copy")
    if isinstance(src, GlobalTensor) and isinstance(dst, LocalTensor):
        count = _dma_count(count, dst.dtype, "data_copy")
        _same_dtype(src.dtype, dst.dtype, "data_copy")
        view = _local(dst, count * rows, "DataCopy", "destination", "MTE2")
        count = count if view is None or rows > 1 else view.shape[0]
        win = gm_window(src, count, "DataCopy", "MTE2", write=False, rows=rows, pitch=pitch)
        if view is not None and win is not None:
            ref = _tile(view, win)
            issue(lambda c: c.data_copy(dst=ref, src=win))
    elif isinstance(src, LocalTensor) and isinstance(dst, GlobalTensor):
        count = _dma_count(count, src.dtype, "data_copy")
        _same_dtype(src.dtype, dst.dtype, "data_copy")
        view = _local(src, count * rows, "DataCopy", "source", "MTE3")
        count = count if view is None or rows > 1 else view.shape[0]
        win = gm_window(dst, count, "DataCopy", "MTE3", write=True, rows=rows, pitch=pitch)
        atomic = _atomic_use(dst)
        if view is not None and win is not None:
            ref = _tile(view, win)
            issue(lambda c: c.data_copy(dst=win, src=ref, atomic=atomic))
    elif isinstance(src, LocalTensor) and isinstance(dst, LocalTensor):
        if len(src.request.shape or (0,)) > 1 or len(dst.request.shape or (0,)) > 1:
            return _vec("VCopy", dst, (src,), count, "data_copy")
        issue_lanes("VCopy", "data_copy", dst, (src,), Form(count=count), [(1, 8), (1, 8)])
    else:
        raise TypeError(
            f"data_copy(dst, src, count): GM <-> local or local -> local; got {type(src).__name__} -> "
            f"{type(dst).__name__}."
        )


def _atomic_use(g: GlobalTensor):
    """The atomic mode in force (SetAtomicAdd ...) for a copy into ``g``, recorded on its GM argument (one
    mode an argument: the launch merges its cores' copies by it)."""
    run = runtime.current()
    mode = run.atomic
    if mode is None or g.addr is None:
        return None
    use = run.gm_use.setdefault(g.addr.name, runtime.GmUse())
    if use.atomic not in (None, mode):
        raise AscError(
            f"data_copy at {runtime.where()}: GM argument {g.addr.name!r} is written with atomic {use.atomic} and "
            f"with atomic {mode}; one atomic mode an argument."
        )
    use.atomic = mode
    return mode


def _lead1(shape) -> tuple:
    """``shape`` without its leading 1s: a (1, N) row and an (N,) run of GM are the same tile."""
    shape = tuple(shape)
    while len(shape) > 1 and shape[0] == 1:
        shape = shape[1:]
    return shape


def _tile(view: View, win):
    """The local operand of a GM copy: the view shaped as the window, or, for a local tensor that is a
    2-D tile (an L0C result moved to UB), the whole tile."""
    if len(view.alloc.shape) > 2:  # an NC1HWC0 tile in L1 (the source of a Load3D), filled whole, in order
        if math.prod(win.sizes) != math.prod(view.alloc.shape) or not (
            _static(view.offset[0]) and view.offset[0] == 0
        ):
            raise NotImplementedError(
                f"asc: a copy into a {view.alloc.shape} tile fills all of it ({math.prod(view.alloc.shape)} "
                f"elements), got {math.prod(win.sizes)} at {runtime.where()}; see docs/kernels.md."
            )
        return view.alloc.at(view.stage)
    if len(view.alloc.shape) == 2:
        if _lead1(win.sizes) != _lead1(view.alloc.shape) or not (
            _static(view.offset[0]) and view.offset[0] == 0
        ):
            raise NotImplementedError(
                f"asc: a copy of a {view.alloc.shape} tile moves all of it ({view.alloc.shape}), got a window of "
                f"{tuple(win.sizes)} at {runtime.where()}; see docs/kernels.md."
            )
        return view.alloc.at(view.stage)
    return View(view.alloc, view.stage, view.offset, shape=(math.prod(win.sizes),), dtype=view.dtype)


def data_copy_pad(dst, src, params: DataCopyExtParams, pad: DataCopyPadExtParams | None = None) -> None:
    """``DataCopyPad``: one block of ``block_len`` bytes (any length), padded to 32 B in UB. Only the
    one-block form (``block_count == 1``) is emulated."""
    run = runtime.current()
    if not isinstance(params, DataCopyExtParams):
        raise TypeError(
            "data_copy_pad(dst, src, asc.DataCopyExtParams(...)[, asc.DataCopyPadExtParams(...)])."
        )
    if run.hw.coupled:
        raise AscError(
            f"data_copy_pad at {runtime.where()}: DataCopyPad is not on {run.hw.name} (910 / 310P)."
        )
    if params.block_count != 1:
        raise NotImplementedError(
            "asc.data_copy_pad with block_count != 1 is not supported yet; see docs/kernels.md."
        )
    local = dst if isinstance(dst, LocalTensor) else src
    isz = local.dtype.itemsize
    if params.block_len % isz:
        raise AscError(
            f"data_copy_pad: block_len {params.block_len} B is not a whole number of {local.dtype}."
        )
    count = params.block_len // isz
    if isinstance(src, GlobalTensor):
        view = _local(dst, count, "DataCopyPad", "destination", "MTE2")
        win = gm_window(src, count, "DataCopyPad", "MTE2", write=False)
        if view is not None and win is not None:
            ref = _tile(view, win)
            issue(lambda c: c.data_copy(dst=ref, src=win))
            padded = round_up(count * isz, _block(run)) // isz
            if pad is not None and pad.is_pad and padded > count:
                s = scalar_of(pad.padding_value, dst.dtype.fmt)
                issue_lanes(
                    "VDup", "data_copy_pad", dst[count:], (), Form(count=padded - count), [(1, 8)], scalar=s
                )
    else:
        view = _local(src, count, "DataCopyPad", "source", "MTE3")
        win = gm_window(dst, count, "DataCopyPad", "MTE3", write=True)
        if view is not None and win is not None:
            ref = _tile(view, win)
            issue(lambda c: c.data_copy(dst=win, src=ref))


def _same_dtype(a, b, call):
    if a is not None and b is not None and a != b:
        raise AscError(
            f"{call} at {runtime.where()}: DataCopy does not convert ({a} -> {b}); cast on the vector unit."
        )


# ---- vector ---------------------------------------------------------------------------------------
def _vec(op: str, dst, srcs, count, call, **kw):
    count = _count(count, call)
    views = [_local(dst, count, call, "destination")] + [_local(s, count, call, "source") for s in srcs]
    for t in (dst, *srcs):
        if t.buffer != "UB":
            raise AscError(
                f"{call} at {runtime.where()}: vector instructions work on UB; a tensor is in {t.buffer}."
            )
    if dst.dtype.fmt not in ("fp16", "bf16", "fp32") and op not in ("VCast", "VCopy"):
        raise AscError(  # the vector unit computes in float: an integer tensor is written by a Cast
            f"asc.{call} at {runtime.where()} into {dst.dtype} data: the vector unit's arithmetic is float; "
            f"compute in half / float and asc.cast to {dst.dtype} last (as AscendQuant does)."
        )
    if any(v is None for v in views):
        return
    n = builtins.min(v.shape[0] for v in views)
    views = [_flat_or_tile(v, n, call) for v in views]
    issue(lambda c: c.vector(op, views[0], *views[1:], **kw))


def _flat_or_tile(v: View, n: int, call: str):
    """``n`` elements of a stage: a flat view, or, on a 2-D tile (an L0C result moved to UB), all of it."""
    if len(v.alloc.shape) == 1:
        return View(v.alloc, v.stage, v.offset, shape=(n,), dtype=v.dtype)
    if n != math.prod(v.alloc.shape) or not (_static(v.offset[0]) and v.offset[0] == 0):
        raise NotImplementedError(
            f"asc: {call} at {runtime.where()} works on {n} elements of a {v.alloc.shape} tile (an L0C result in "
            f"UB); vector calls on such a tile take all of it (see docs/kernels.md)."
        )
    return v.alloc.at(v.stage)


def legacy_vector(op: str, dst, srcs, count: int, call: str, **kw) -> None:
    """The count form on a 2-D tile in UB (an L0C result moved there on the 910 / 310P): the whole
    tile, through the core's tile form of the vector instruction."""
    _vec(op, dst, srcs, count, call, **kw)


# ---- flags ----------------------------------------------------------------------------------------
def set_flag(event: str, event_id=0) -> None:
    """``SetFlag<HardEvent::SRC_DST>(id)``: fires once SRC's earlier work is done."""
    issue(lambda c: c.set_flag(event, event_id))


def wait_flag(event: str, event_id=0) -> None:
    """``WaitFlag<HardEvent::SRC_DST>(id)``: DST waits for the matching set."""
    issue(lambda c: c.wait_flag(event, event_id))


def pipe_barrier(pipe: str = "ALL") -> None:
    """``PipeBarrier<PIPE_X>()``: ``asc.PIPE_ALL`` makes every pipe wait for the latest."""
    issue(lambda c: c.pipe_barrier(pipe))

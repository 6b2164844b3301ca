"""The vector unit's operands and forms: what every vector call shares.

``parse`` reads a call's form (the count form, or mask + repeat + the repeat params; pyasc's
keywords too), ``patterns`` turns it into each operand's walk (``core/isa/lanes.py``), ``operand``
checks a tensor against the vendor's rules (a start off 32 B, lanes past the tensor: findings at the
call) and makes it a lane operand of the core, ``issue_lanes`` issues the instruction. The mask the
calls with ``is_set_mask=False`` use (SetVectorMask, SetMaskCount / SetMaskNorm, ResetMask) is kept
here, in the kernel's run.
"""

from __future__ import annotations

import builtins
import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from npu_jax.asc import runtime
from npu_jax.asc.runtime import AscError
from npu_jax.asc.tensors import LocalTensor, check_live
from npu_jax.asc.types import MaskMode
from npu_jax.core.buffers import DTYPES
from npu_jax.core.isa import lanes as L
from npu_jax.core.isa import vecops

FLOATS = vecops.FLOATS


# ---- the mask state ---------------------------------------------------------------------------------
def set_mask_count() -> None:
    """``SetMaskCount()``: a mask counts elements over all repeats (the counter mode)."""
    runtime.current().mask_mode = MaskMode.COUNTER


def set_mask_norm() -> None:
    """``SetMaskNorm()``: a mask selects lanes of each repeat (the normal mode, the default)."""
    runtime.current().mask_mode = MaskMode.NORMAL


def set_vector_mask(*args, dtype=None, mode: MaskMode | None = None) -> None:
    """``SetVectorMask<T, mode>(len)`` or ``SetVectorMask<T, mode>(mask_high, mask_low)``: the mask the
    calls with ``is_set_mask=False`` use. ``mode`` (``asc.MaskMode``) NORMAL or COUNTER (pyasc's
    keyword; None keeps the current mode)."""
    run = runtime.current()
    if mode is not None:
        if not isinstance(mode, MaskMode):
            raise TypeError(f"set_vector_mask: mode is an asc.MaskMode, got {mode!r}.")
        run.mask_mode = mode
    if len(args) == 1:
        run.vector_mask = static_int(args[0], "set_vector_mask", "length", lo=0)
    elif len(args) == 2:
        hi, lo = (static_int(a, "set_vector_mask", n, lo=0) for a, n in zip(args, ("mask_high", "mask_low")))
        run.vector_mask = [lo, hi]
    else:
        raise TypeError("set_vector_mask(length) or set_vector_mask(mask_high, mask_low).")


def reset_mask() -> None:
    """``ResetMask()``: every lane on again (the mask the ``is_set_mask=False`` calls use)."""
    runtime.current().vector_mask = None


# ---- arguments ----------------------------------------------------------------------------------------
def static_int(v, call: str, name: str, lo: int = 0, hi: int | None = None) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        kind = "a traced value" if isinstance(v, jax.core.Tracer) else repr(v)
        raise AscError(
            f"asc.{call} at {runtime.where()}: {name} is a Python int (the emulator needs it at trace time), got "
            f"{kind}."
        )
    v = int(v)
    if v < lo or (hi is not None and v > hi):
        rng = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise AscError(f"asc.{call} at {runtime.where()}: {name} must be in {rng}, got {v}.")
    return v


@dataclasses.dataclass
class Form:
    """One call's form: ``count`` elements, or ``mask`` / ``repeats`` / ``params``."""

    count: int | None = None
    mask: object = None
    repeats: int = 0
    params: object = None


def parse(call: str, args, kwargs, params_cls, *, set_mask: bool = True) -> Form:
    """The count form ``(count)`` or the mask + repeat form ``(mask, repeat_times, params[,
    is_set_mask])``, positional or by pyasc's keywords; anything else names the forms."""
    args, kwargs = list(args), dict(kwargs)
    names = ["mask", "repeat_times", "repeat_params"] + (["is_set_mask"] if set_mask else [])
    if "repeat_time" in kwargs:
        kwargs["repeat_times"] = kwargs.pop("repeat_time")
    is_set = kwargs.pop("is_set_mask", True)
    if "count" in kwargs or (len(args) == 1 and not any(n in kwargs for n in names[:3])):
        if len(args) + ("count" in kwargs) != 1 or kwargs.keys() - {"count"}:
            raise TypeError(_forms_msg(call, params_cls))
        count = kwargs.pop("count") if "count" in kwargs else args[0]
        return Form(count=static_int(count, call, "count"))
    vals = dict(zip(names, args))
    for k in list(kwargs):
        if k in names and k not in vals:
            vals[k] = kwargs.pop(k)
    if kwargs or not {"mask", "repeat_times", "repeat_params"} <= vals.keys() or len(args) > len(names):
        raise TypeError(_forms_msg(call, params_cls))
    is_set = vals.get("is_set_mask", is_set)
    params = vals["repeat_params"]
    if not isinstance(params, params_cls):
        raise TypeError(
            f"asc.{call} at {runtime.where()}: repeat_params is an asc.{params_cls.__name__}, got "
            f"{type(params).__name__}."
        )
    repeats = static_int(vals["repeat_times"], call, "repeat_times", 0, L.MAX_REPEATS)
    mask = vals["mask"] if is_set else runtime.current().vector_mask
    return Form(mask=mask_arg(call, mask), repeats=repeats, params=params)


def mask_arg(call: str, mask):
    if mask is None:
        return None
    if isinstance(mask, (list, tuple)):
        if not 1 <= len(mask) <= 2:
            raise AscError(
                f"asc.{call} at {runtime.where()}: a bit mask is a list of one or two 64-bit words, got {mask!r}."
            )
        return [static_int(w, call, "mask word", 0, (1 << 64) - 1) for w in mask]
    return static_int(mask, call, "mask", 0)


def _forms_msg(call: str, params_cls) -> str:
    return (
        f"asc.{call} at {runtime.where()}: takes (..., count) or (..., mask, repeat_times, "
        f"asc.{params_cls.__name__}(...)[, is_set_mask]) after its tensors (pyasc's keywords: count=, mask=, "
        f"repeat_times=, repeat_params=, is_set_mask=)."
    )


def scalar_of(scalar, fmt: str):
    """The vendor's scalar argument is a ``T``: a Python number, or a value read with
    ``get_value`` (traced), converted to the tensor's type first as the C++ call converts it."""
    dt = DTYPES[fmt]
    if isinstance(scalar, (jax.Array, np.ndarray, np.generic)) and not isinstance(scalar, bool):
        return jnp.asarray(scalar).astype(dt)
    if isinstance(scalar, bool) or not isinstance(scalar, (int, float)):
        raise TypeError(
            f"a scalar argument is a number (or a get_value result), got {type(scalar).__name__}."
        )
    if fmt in FLOATS:
        return float(np.asarray(float(scalar), dtype=dt))
    return int(np.asarray(int(scalar)).astype(dt))


# ---- operands -----------------------------------------------------------------------------------------
def check_ub(t, call: str, role: str, pipe: str = "V") -> None:
    """A vector operand: a live UB LocalTensor (and the operand hook told: pyasc's insert_sync)."""
    if not isinstance(t, LocalTensor):
        raise TypeError(f"asc.{call}: the {role} must be an asc LocalTensor, got {type(t).__name__}.")
    check_live(t, call, role)
    hook = runtime.current().on_operand
    if hook is not None:
        hook(t, pipe)
    if t.buffer != "UB":
        raise AscError(
            f"asc.{call} at {runtime.where()}: vector instructions work on UB; the {role} is in {t.buffer}."
        )


def operand(t: LocalTensor, pattern: L.Pattern, call: str, role: str, pipe: str = "V"):
    """``t`` walked by ``pattern``, as a lane operand of the core (None in the plan pass): the
    vendor's checks first (a start off 32 B, lanes past the tensor: findings at the call; such lanes
    do not run)."""
    check_ub(t, call, role, pipe)
    run = runtime.current()
    isz = t.dtype.itemsize
    blk = run.hw.alignment("UB")
    if isinstance(t.offset, int) and (t.offset * isz) % blk:
        run.finding(
            "memcheck",
            "misaligned",
            call,
            pipe,
            f"the {role}'s UB address is {t.offset * isz} B past its buffer's start, not a multiple of {blk} B "
            f"(UB operands of vector instructions start on {blk}-B boundaries).",
            f"offset the view by a multiple of {blk // isz} elements of {t.dtype}.",
            alloc=t.position.name,
        )
    if pattern.extent > t.length:
        over = pattern.on & (pattern.idx >= t.length)
        run.finding(
            "memcheck",
            "illegal write" if role == "destination" else "illegal read",
            call,
            pipe,
            f"{int(over.sum())} lane(s) of the {role} reach element {pattern.extent - 1} of its {t.length}-element "
            f"{t.position.name} tensor ({(pattern.extent - t.length) * isz} B past its end).",
            "keep count (or repeats, strides and mask) within the tensor.",
            alloc=t.position.name,
        )
        pattern = L.Pattern(pattern.idx, pattern.on & ~over)
    if run.planning:
        return None
    alloc = run.allocs[t.request.index]
    dtype = None if alloc.dtype == t.dtype.fmt else t.dtype.fmt
    return L.Lanes(alloc, t.slot, (t.offset,), pattern=pattern, dtype=dtype)


def patterns(form: Form, tensors, strides, call: str):
    """Each tensor's walk under ``form``: ``strides`` per tensor ``(blk, rep)`` (the repeat form's)."""
    fmts = [t.dtype.fmt for t in tensors]
    lanes = L.lanes_per_repeat(*fmts)
    if form.count is not None:
        p = L.count_pattern(form.count, lanes)
        return [p] * len(tensors), form.count == 0
    run = runtime.current()
    counter = run.mask_mode == MaskMode.COUNTER
    mask = lanes if form.mask is None else form.mask
    if counter:
        if isinstance(mask, list):
            raise AscError(
                f"asc.{call} at {runtime.where()}: the counter mode takes a count as its mask, not bits."
            )
        repeats = builtins.max(1, math.ceil(mask / lanes))
    else:
        repeats = form.repeats
        if isinstance(mask, int) and not 0 <= mask <= lanes:
            raise AscError(
                f"asc.{call} at {runtime.where()}: mask {mask} in the normal mode counts lanes of a repeat: "
                f"[1, {lanes}] for {fmts[0]} (256 B of the widest operand)."
            )
    on = L.mask_lanes(mask, lanes, builtins.max(repeats, 1), counter=counter)
    out = []
    for f, (blk, rep) in zip(fmts, strides):
        blk = static_int(blk, call, "a block stride", 0)
        rep = static_int(rep, call, "a repeat stride", 0)
        out.append(L.repeat_pattern(f, lanes, builtins.max(repeats, 1), blk, rep, on))
    return out, repeats == 0 or not on.any()


def issue_lanes(op: str, call: str, dst, srcs, form: Form, strides, scalar=None, mode: str = "nearest_even"):
    """Check and issue one lane-form instruction ``op`` on ``dst`` and ``srcs`` under ``form``."""
    tensors = (dst, *srcs)
    pats, empty = patterns(form, tensors, strides, call)
    roles = ["destination"] + [f"source {i}" if len(srcs) > 1 else "source" for i in range(len(srcs))]
    operands = [operand(t, p, call, r) for t, p, r in zip(tensors, pats, roles)]
    if runtime.current().planning or empty:
        return
    runtime.issue(lambda c: c.vector_lanes(op, operands[0], *operands[1:], scalar=scalar, mode=mode))

"""pyasc's local tensors: ``LocalTensor(dtype, pos, addr, tile_size)`` (a static tensor at a byte
address) and ``LocalTensorAuto(dtype, shape)`` (UB the compiler allocates), with ``insert_sync``.

**Allocation.** A ``LocalTensorAuto`` is a static UB tensor (VECCALC) of its shape's elements. pyasc's
compiler reuses a buffer once its tensor is dead; the emulator's rule is the loop's: the tensor made
at one line of the kernel (one call site, counted two frames deep) is the same buffer each time that
line runs, so a loop body's tensors are allocated once, whatever the trip count.

**insert_sync.** The flags the vendor's compiler inserts between pipes, by one rule: before an
instruction on pipe P touches a ``LocalTensorAuto`` buffer that pipe Q touched last (Q != P), a
``SetFlag<Q_P>`` / ``WaitFlag<Q_P>`` pair (one event id per pair of pipes, reserved on first use).
Each touch orders after the previous one, so every write is ordered before the next read and every
read before the next write (RAW, WAR and WAW), and the timeline shows the waits. It needs the asc
calls to report their operands (``KernelRun.on_operand``, called with the tensor and its pipe).
"""

from __future__ import annotations

import math
import numbers

from npu_jax.asc import pipe, runtime, tensors
from npu_jax.asc.pyasc import state as pstate
from npu_jax.asc.runtime import AscError
from npu_jax.asc.tensors import LocalTensor
from npu_jax.asc.types import Hardware, TPosition, dtype_of


class LocalTensorAuto:
    """``asc.LocalTensorAuto(dtype, shape)``: a UB tensor of ``shape`` (an int or a tuple of ints)
    allocated for the kernel; pyasc turns on ``insert_sync`` for a kernel that uses one. Returns an
    ``asc.LocalTensor``; ``LocalTensorAuto`` also works as a parameter annotation."""

    def __new__(cls, dtype, shape) -> LocalTensor:
        return auto_tensor(dtype, shape, "asc.LocalTensorAuto")


def auto_tensor(dtype, shape, call: str, site: str | None = None) -> LocalTensor:
    """A LocalTensorAuto of ``shape`` made at ``site`` (default: the caller's line): the same buffer
    each time the site runs."""
    dims = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    if not dims or not all(isinstance(d, numbers.Integral) and d > 0 for d in dims):
        raise AscError(
            f"{call} at {runtime.where()}: the shape is an int or a tuple of ints > 0 (Python values: every "
            f"dimension is static on the emulator), got {shape!r}."
        )
    dtype = dtype_of(dtype)
    count = math.prod(int(d) for d in dims)
    st = pstate.state()
    site = runtime.where() if site is None else site
    key = (site, dtype, count)
    t = st.auto.get(key)
    if t is None:
        t = pipe.LocalMemAllocator(Hardware.UB).alloc(TPosition.VECCALC, dtype, count)
        st.auto[key] = t
        st.auto_reqs.add(t.request.index)
    return t


def on_operand(t: LocalTensor, pipe_name: str) -> None:
    """The insert_sync rule, before an instruction on ``pipe_name`` touches ``t`` (run pass only)."""
    run = runtime.current()
    st = pstate.state(run)
    if run.planning or not st.insert_sync or not isinstance(t, LocalTensor):
        return
    idx = t.request.index
    if idx not in st.auto_reqs:
        return
    last = st.last_pipe.get(idx)
    if last is not None and last != pipe_name:
        event = f"{last}_{pipe_name}"
        eid = st.event_ids.get(event)
        if eid is None:  # one id per pair of pipes, taken like a queue's (after those handed out so far)
            eid = st.event_ids[event] = run.events.get(event, 0)
            run.events[event] = eid + 1
            if eid >= run.hw.num_event_ids:
                raise AscError(
                    f"insert_sync at {runtime.where()}: no event id of {event} is left for the flags between "
                    f"pipes ({run.hw.num_event_ids} on {run.hw.name}, all taken by queues)."
                )
        run.core = run.core.set_flag(event, eid)
        run.core = run.core.wait_flag(event, eid)
    st.last_pipe[idx] = pipe_name


def static_local_tensor(dtype=None, pos=TPosition.VECIN, addr=0, tile_size=0) -> LocalTensor:
    """pyasc's ``LocalTensor(dtype, pos, addr, tile_size)``: ``tile_size`` elements of ``dtype`` at byte
    ``addr`` of the position's buffer (``asc.local_tensor(pos, dtype, addr, tile_size)``)."""
    if dtype is None or not tile_size:
        raise NotImplementedError(
            "asc.LocalTensor(dtype, pos, addr, tile_size) takes all four (an empty LocalTensor(dtype) is not "
            "supported); see docs/kernels.md."
        )
    return pipe.local_tensor(pos, dtype_of(dtype), addr, tile_size)


tensors.register_constructor(static_local_tensor)

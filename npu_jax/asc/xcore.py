"""What crosses cores: the AIC <-> AIV flags, SyncAll, the system counter, and atomic copies out.

* ``cross_core_set_flag(flag_id, mode_id, pipe)`` / ``cross_core_wait_flag(flag_id, mode_id, pipe)``
  (``CrossCoreSetFlag<modeId, pipe>`` / ``CrossCoreWaitFlag``, the 910B family): the hand-over between a
  mix kernel's Cube side and its vector side. A mix kernel runs on one emulated core with every pipe
  (docs/kernels.md), so a cross-core flag is the flag between the two pipes named, the setter's and
  the waiter's (learned from the kernel's plan: the wait names its pipe, the set its own); its id is one
  of that pipe pair's event ids (``flag_id`` modulo the chip's event ids).
* ``sync_all()``: every block waits for the latest pipe of every block (``SyncAll``): time only. GM a
  block writes is its own until the launch ends (the blocks' writes are merged then): data one block
  writes and another reads after a sync_all needs two launches here.
* ``get_system_cycle()``: the Scalar pipe's time in the 910B's 50 MHz system counter ticks (the vendor's
  GetSystemCycle page: time = cycles / 50 us), traced.
* ``set_atomic_add()`` ... ``set_atomic_none()``: later copies UB -> GM (and Fixpipe L0C -> GM) add into
  GM instead of overwriting it; the launch then sums what every block added.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from npu_jax.asc import ops, runtime
from npu_jax.asc.runtime import AscError
from npu_jax.core import wide
from npu_jax.core.pipes import PIPE_INDEX, PIPES
from npu_jax.core.run import CORE_AXIS

SYSTEM_COUNTER_HZ = 50e6  # the 910B's system counter (asc-devkit GetSystemCycle.md: "按照50MHz的频率")


def _pipe(p, call: str) -> str:
    name = getattr(p, "name", p)
    name = str(name).upper().removeprefix("PIPE_")
    if name not in PIPE_INDEX:
        raise AscError(
            f"asc.{call} at {runtime.where()}: pipe is one of asc.PIPE_{{{', '.join(PIPES)}}}, got {p!r}."
        )
    return name


def _check_chip(call: str):
    run = runtime.current()
    if run.hw.coupled:
        raise AscError(
            f"asc.{call} at {runtime.where()}: CrossCoreSetFlag / CrossCoreWaitFlag are the 910B family's (its AIC and "
            f"AIV are separate cores); {run.hw.name} has none."
        )
    return run


def _flag_id(flag_id, call):
    if isinstance(flag_id, bool) or not isinstance(flag_id, int) or not 0 <= flag_id <= 15:
        raise AscError(
            f"asc.{call} at {runtime.where()}: flag_id is a Python int in [0, 15], got {flag_id!r}."
        )
    return flag_id


def cross_core_set_flag(flag_id: int, mode_id: int = 2, pipe="PIPE_S") -> None:
    """``CrossCoreSetFlag<modeId, pipe>(flagId)``: fires once ``pipe``'s earlier work is done."""
    run = _check_chip("cross_core_set_flag")
    f, src = _flag_id(flag_id, "cross_core_set_flag"), _pipe(pipe, "cross_core_set_flag")
    ends = run.xflags.setdefault(f, {})
    if run.planning:
        ends["set"] = src
        return
    dst = ends.get("wait")
    if dst is None:
        run.finding(
            "synccheck",
            "cross-core flag never waited",
            "CrossCoreSetFlag",
            src,
            f"cross-core flag {f} is set from {src} but the kernel never waits on it (CrossCoreWaitFlag).",
            "wait on it where the other side reads what this side wrote, or remove the set.",
        )
        return
    if dst != src:
        ops.set_flag(f"{src}_{dst}", f % run.hw.num_event_ids)


def cross_core_wait_flag(flag_id: int, mode_id: int = 0, pipe="PIPE_S") -> None:
    """``CrossCoreWaitFlag<modeId, pipe>(flagId)``: ``pipe`` waits until the matching set has fired."""
    run = _check_chip("cross_core_wait_flag")
    f, dst = _flag_id(flag_id, "cross_core_wait_flag"), _pipe(pipe, "cross_core_wait_flag")
    ends = run.xflags.setdefault(f, {})
    if run.planning:
        ends["wait"] = dst
        return
    src = ends.get("set")
    if src is None:
        raise AscError(
            f"asc.cross_core_wait_flag at {runtime.where()}: cross-core flag {f} is waited on but never set "
            f"(CrossCoreSetFlag): on the chip this wait hangs."
        )
    if dst != src:
        ops.wait_flag(f"{src}_{dst}", f % run.hw.num_event_ids)


def sync_all(gm_workspace=None, ub_workspace=None, used_cores: int = 0, is_aiv_only: bool = True) -> None:
    """``SyncAll()`` (hard) or ``SyncAll(gmWorkspace, ubWorkspace, usedCores)`` (soft): every block waits
    for the latest pipe of every block. Time only (see the module: GM written by another block is not
    seen within a launch)."""
    run = runtime.current()
    if run.planning:
        return
    if run.eager:
        raise AscError(
            f"asc.sync_all at {runtime.where()}: a barrier across blocks needs the blocks traced together: jit=True."
        )
    if run.n_blocks > (run.hw.num_vector_cores if is_aiv_only else run.hw.num_cores):
        raise AscError(
            f"asc.sync_all at {runtime.where()}: {run.n_blocks} blocks run in waves on {run.hw.name}; a barrier across them "
            f"would wait forever (the vendor: numBlocks must not exceed the physical cores)."
        )

    def barrier(core):
        every = jax.lax.all_gather(core.pipe_free, CORE_AXIS)  # (cores, P, 2)
        latest = wide.max_over(wide.max_over(every, 0), 0)
        return core.replace(pipe_free=jnp.broadcast_to(latest, core.pipe_free.shape))

    run.core = barrier(run.core.pipe_barrier("ALL"))


def get_system_cycle():
    """``GetSystemCycle()``: the system counter now, as seen by the Scalar pipe: its time in ticks of the
    910B's 50 MHz counter (traced int32). Put a ``pipe_barrier(PIPE_ALL)`` before it to time other pipes."""
    run = runtime.current()
    if run.planning:
        return 0
    run.core = run.core.scalar(1)
    hi, lo = run.core.pipe_free[PIPE_INDEX["S"]][0], run.core.pipe_free[PIPE_INDEX["S"]][1]
    t = hi.astype(jnp.float32) * float(wide.BASE) + lo.astype(jnp.float32)  # within a tick below 2^24 ticks
    return jnp.floor(t * (SYSTEM_COUNTER_HZ / (run.hw.clock_ghz * 1e9))).astype(jnp.int32)


# ---- atomic copies out ---------------------------------------------------------------------------
def _atomic(kind):
    def f(dtype=None) -> None:
        runtime.current().atomic = kind

    return f


set_atomic_add = _atomic("add")
set_atomic_add.__name__ = "set_atomic_add"
set_atomic_add.__doc__ = (
    "``SetAtomicAdd<T>()``: later copies to GM (UB -> GM, Fixpipe L0C -> GM) add into GM's content."
)
set_atomic_max = _atomic("max")
set_atomic_max.__name__ = "set_atomic_max"
set_atomic_max.__doc__ = (
    "``SetAtomicMax<T>()``: later copies to GM keep the larger of theirs and GM's (910B)."
)
set_atomic_min = _atomic("min")
set_atomic_min.__name__ = "set_atomic_min"
set_atomic_min.__doc__ = "``SetAtomicMin<T>()``: later copies to GM keep the smaller (910B)."
set_atomic_none = _atomic(None)
set_atomic_none.__name__ = "set_atomic_none"
set_atomic_none.__doc__ = "``SetAtomicNone()`` / ``DisableDmaAtomic()``: copies to GM overwrite again."
disable_dma_atomic = set_atomic_none

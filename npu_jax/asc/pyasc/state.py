"""What a pyasc launch knows while its kernel runs: one :class:`PassState` per pass of the launch.

A launch calls the kernel function once per pass (the plan pass, the traced run, or once per block
with ``jit=False``), each inside its own :class:`~npu_jax.asc.runtime.KernelRun`; the state of the
pyasc layer (the kernel type, the Matmul workspace, the ``LocalTensorAuto`` buffers and the flags
``insert_sync`` has set) belongs to that run and dies with it.
"""

from __future__ import annotations

import dataclasses
import weakref

from npu_jax.asc import runtime

AIV, AIC, MIX = "aiv", "aic", "mix"  # the sides a kernel type runs on (pyasc's KernelType, reduced)


@dataclasses.dataclass
class MatmulNeeds:
    """What the Matmuls of a kernel need from the launch (learnt by the pre-plan pass)."""

    used: bool = False  # an asc.adv.Matmul was made: pyasc infers a MIX (or, cube-only, AIC) kernel
    ws_elems: int = 0  # elements of the GM workspace one block's get_tensor_c into UB needs
    ws_dtype: object = None  # their DType (C's)


@dataclasses.dataclass
class PassState:
    """The pyasc layer's state in one pass of a launch."""

    side: str = AIV  # AIV, AIC or MIX: what ascend_is_aic() / ascend_is_aiv() answer
    insert_sync: bool = True  # flags between pipes on LocalTensorAuto buffers (pyasc's insert_sync)
    workspace: object = None  # the hidden GM workspace argument of the Matmuls (a GlobalAddress)
    ws_elems: int = 0  # its elements per block
    needs: MatmulNeeds = dataclasses.field(default_factory=MatmulNeeds)
    auto: dict = dataclasses.field(default_factory=dict)  # call site -> LocalTensorAuto's LocalTensor
    auto_reqs: set = dataclasses.field(default_factory=set)  # their buffer requests' indices
    last_pipe: dict = dataclasses.field(
        default_factory=dict
    )  # request index -> the pipe that touched it last
    event_ids: dict = dataclasses.field(default_factory=dict)  # event -> the id insert_sync reserved for it


_STATES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def state(run: runtime.KernelRun | None = None) -> PassState:
    """The pyasc state of ``run`` (default: the current run), made on first use."""
    run = runtime.current() if run is None else run
    st = _STATES.get(run)
    if st is None:
        st = _STATES[run] = PassState()
    return st


def attach(run: runtime.KernelRun, st: PassState) -> PassState:
    """Make ``st`` the state of ``run`` (a launch's entry does, before the kernel's body runs)."""
    _STATES[run] = st
    return st

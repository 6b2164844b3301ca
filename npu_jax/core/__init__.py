"""The machine: state pytree, buffers, the instruction set (isa/), pipes, flags and queues. The launch
over cores (``npu_jax.core.run.launch``) sits above :mod:`npu_jax.report`, whose Report it builds, and is
imported from its module."""

from npu_jax.core.buffers import Alloc, Plan, Ref
from npu_jax.core.isa import OPS, Load3DGeometry
from npu_jax.core.pipes import LANES, PIPES
from npu_jax.core.policy import Policy
from npu_jax.core.state import Context, Core, GmSpec, GmWindow, init_core
from npu_jax.core.sync import Queue

__all__ = [
    "Alloc",
    "Context",
    "Core",
    "GmSpec",
    "GmWindow",
    "LANES",
    "Load3DGeometry",
    "OPS",
    "PIPES",
    "Plan",
    "Policy",
    "Queue",
    "Ref",
    "init_core",
]

"""The machine: state pytree, buffers, instructions, pipes and timing, flags and queues."""

from npu_jax.core.buffers import Alloc, Plan, Ref
from npu_jax.core.instructions import Load3DGeometry
from npu_jax.core.policy import Policy
from npu_jax.core.run import launch
from npu_jax.core.state import Context, Core, GmSpec, GmWindow, init_core
from npu_jax.core.sync import Queue
from npu_jax.core.timing import LANES, PIPES

__all__ = [
    "Alloc",
    "Context",
    "Core",
    "GmSpec",
    "GmWindow",
    "LANES",
    "Load3DGeometry",
    "PIPES",
    "Plan",
    "Policy",
    "Queue",
    "Ref",
    "init_core",
    "launch",
]

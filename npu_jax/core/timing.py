"""Deprecated name of :mod:`npu_jax.core.pipes` (the pipe and counter tables).

The cost formulas that lived here are the rules of ``npu_jax/hw/costs.py``; the op names (``OPS``)
come from the instruction declarations in :mod:`npu_jax.core.isa`. This module only re-exports the
tables for the modules that still import them from here (sanitize, findings, sync, the CLIs, fusion);
import :mod:`npu_jax.core.pipes` instead.
"""

from npu_jax.core.pipes import COUNTER_INDEX, COUNTERS, LANES, PATHS, PIPE_INDEX, PIPES, RATIO_NAMES

__all__ = ["COUNTERS", "COUNTER_INDEX", "LANES", "PATHS", "PIPES", "PIPE_INDEX", "RATIO_NAMES"]

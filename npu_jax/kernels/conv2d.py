"""Compatibility names for the Conv2D pieces now split by layer (removed once importers move)."""

from npu_jax.api.conv import conv2d, conv2d_bounded, run_plan
from npu_jax.kernels.conv import build_kernel, relayout_kernel
from npu_jax.mapping.conv import SPECS, STRATEGIES, ConvPlan, ConvTiling, StrategySpec, make_plan

__all__ = [
    "SPECS",
    "STRATEGIES",
    "ConvPlan",
    "ConvTiling",
    "StrategySpec",
    "build_kernel",
    "conv2d",
    "conv2d_bounded",
    "make_plan",
    "relayout_kernel",
    "run_plan",
]

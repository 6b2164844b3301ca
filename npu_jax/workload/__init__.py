"""Layer descriptions: what a kernel computes, before any mapping onto the core."""

from npu_jax.workload.conv import ConvGeometry, canonicalize
from npu_jax.workload.resnet50 import RESNET50_REFERENCE, ConvLayer, resnet50_convs

__all__ = ["RESNET50_REFERENCE", "ConvGeometry", "ConvLayer", "canonicalize", "resnet50_convs"]

"""Compatibility names (removed once importers move): see workload/resnet50.py."""

from npu_jax.workload.resnet50 import RESNET50_REFERENCE, ConvLayer, resnet50_convs

__all__ = ["RESNET50_REFERENCE", "ConvLayer", "resnet50_convs"]

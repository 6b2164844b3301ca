"""Epilogue fusion: Conv2D + bias / activation / residual / cast, fused on chip or run unfused.

``conv_relu`` is the headline use; ``conv2d_fused`` takes any short chain; ``analyze`` runs both
versions of a layer and says what fusion saved and why; ``reference_table`` does it for the
ResNet-50 reference layers.
"""

from fusion.analysis import FusionAnalysis, analyze, format_table, reference_table
from fusion.api import conv2d_fused, conv2d_fused_bounded, conv_relu
from npu_jax.mapping.epilogue import Step

__all__ = [
    "FusionAnalysis",
    "Step",
    "analyze",
    "conv2d_fused",
    "conv2d_fused_bounded",
    "conv_relu",
    "format_table",
    "reference_table",
]

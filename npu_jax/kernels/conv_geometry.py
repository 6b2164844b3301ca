"""Compatibility names (removed once importers move): see workload/conv.py, api/validate.py."""

from npu_jax.api.validate import check_common
from npu_jax.mapping.hints import tiling_hint
from npu_jax.workload.conv import ConvGeometry, canonicalize

__all__ = ["ConvGeometry", "canonicalize", "check_common", "tiling_hint"]

"""Deprecated name of :mod:`npu_jax.core.isa` (the instruction set, declared once).

Kept so that modules still importing from here (``kernels/conv2d.py``: ``Load3DGeometry``) work;
import :mod:`npu_jax.core.isa` instead.
"""

from npu_jax.core.isa import (
    Load3DGeometry,
    charge,
    count,
    data_copy,
    fixpipe,
    img2col_tile,
    issue,
    l0c_to_ub,
    load2d,
    load3d,
    mmad,
    scalar,
    vector,
)

__all__ = [
    "Load3DGeometry",
    "charge",
    "count",
    "data_copy",
    "fixpipe",
    "img2col_tile",
    "issue",
    "l0c_to_ub",
    "load2d",
    "load3d",
    "mmad",
    "scalar",
    "vector",
]

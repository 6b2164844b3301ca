"""The Cube side of ``asc``: DataCopy GM -> L1 (ND -> NZ), LoadData, Load3D, Mmad, Fixpipe.

Placeholder: these calls are not supported yet; each raises NotImplementedError naming docs/kernels.md.
"""

from __future__ import annotations

from npu_jax.asc.types import Nd2NzParams


def is_cube_copy(dst, src, params) -> bool:
    return isinstance(params, Nd2NzParams)


def data_copy(dst, src, params):
    raise NotImplementedError("asc.data_copy with Nd2NzParams is not supported yet; see docs/kernels.md.")

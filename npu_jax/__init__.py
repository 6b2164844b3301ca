"""npu-jax: a JAX functional emulator of an Ascend DaVinci-style AI Core.

Public surface::

    hw = npu_jax.presets.ascend910b()          # ascend910(), ascend310p(), tiny()
    y, report = npu_jax.conv2d(x, w, stride=1, padding=0, dilation=1, strategy="img2col", hw=hw)
    c, report = npu_jax.matmul(a, b, hw=hw)    # GEMM on the emulated Cube
    report.cycles, report.pct_peak, report.bytes, report.pipe_busy, report.summary()
    y, report = npu_jax.conv2d(x, w, hw=hw, checks="all")   # racecheck memcheck initcheck synccheck
    with npu_jax.default_checks("none"): ...   # the process default (NPU_JAX_CHECKS; tests: "all")
    npu_jax.cost, npu_jax.search               # the cost model and the tile search (imported on first use)
"""

import importlib

from npu_jax import errors
from npu_jax.api.conv import conv2d, conv2d_bounded
from npu_jax.api.gemm import matmul
from npu_jax.core.policy import OperandCastWarning, Policy
from npu_jax.core.sanitize import Checks, default_checks, set_default_checks
from npu_jax.hw import Assumed, HardwareConfig, presets
from npu_jax.mapping.conv import STRATEGIES, ConvTiling
from npu_jax.mapping.gemm import MatmulTiling
from npu_jax.report.report import Report

__version__ = "0.1.0"

# Subpackages reached as attributes of ``npu_jax`` and imported on first use (PEP 562), so that
# ``import npu_jax`` stays as quick as its eager imports allow.
_LAZY_SUBMODULES = ("cost", "search")


def __getattr__(name: str):
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"npu_jax.{name}")
    raise AttributeError(f"module 'npu_jax' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY_SUBMODULES})


__all__ = [
    "Assumed",
    "Checks",
    "ConvTiling",
    "HardwareConfig",
    "MatmulTiling",
    "OperandCastWarning",
    "Policy",
    "Report",
    "STRATEGIES",
    "conv2d",
    "conv2d_bounded",
    "cost",
    "default_checks",
    "errors",
    "matmul",
    "presets",
    "search",
    "set_default_checks",
]

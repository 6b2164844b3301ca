"""npu-jax: a JAX functional emulator of an Ascend DaVinci-style AI Core.

Public surface::

    hw = npu_jax.presets.ascend910b()          # ascend910(), ascend310p(), tiny()
    y, report = npu_jax.conv2d(x, w, stride=1, padding=0, dilation=1, strategy="img2col", hw=hw)
    c, report = npu_jax.matmul(a, b, hw=hw)    # GEMM on the emulated Cube
    report.cycles, report.pct_peak, report.bytes, report.pipe_busy, report.summary()
    y, report = npu_jax.pool2d(x, "max", 3, stride=2, padding=1, hw=hw)   # ONNX Max/AveragePool
    y, report = npu_jax.conv2d(x, w, hw=hw, checks="all")   # racecheck memcheck initcheck synccheck
    with npu_jax.default_checks("none"): ...   # the process default (NPU_JAX_CHECKS; tests: "all")
    npu_jax.cost, npu_jax.search               # the cost model and the tile search
    npu_jax.set_max_bytes(16 << 30)            # what one call may allocate (NPU_JAX_MAX_BYTES; 4 GiB)
    npu_jax.set_program_cache_size(64)         # compiled programs kept (NPU_JAX_PROGRAM_CACHE; LRU)
    npu_jax.set_program_cache_bytes(1 << 30)   # ... and the memory they hold (NPU_JAX_PROGRAM_CACHE_MB)
    npu_jax.enable_persistent_cache()          # ... and on disk, across processes (NPU_JAX_CACHE_DIR)
    df = npu_jax.sweep({"hw": [...], "network": [...], "batch": [...]}, out="rows.parquet")   # any Executor

``import npu_jax`` imports only the hardware description (no JAX): every other public name, and every
subpackage reached as an attribute, is imported on first use (PEP 562), so that the ``npu-jax``
command (``npu_jax.cli``, under this package) answers ``--help`` without loading JAX.
"""

import importlib

from npu_jax import errors
from npu_jax.hw import Assumed, HardwareConfig, presets

__version__ = "0.2.0"

# Public names imported on first use: name -> the module that defines it.
_LAZY_NAMES = {
    "conv2d": "npu_jax.api.conv",
    "conv2d_bounded": "npu_jax.api.conv",
    "matmul": "npu_jax.api.gemm",
    "pool2d": "npu_jax.api.pool",
    "global_avg_pool": "npu_jax.api.pool",
    "Policy": "npu_jax.core.policy",
    "OperandCastWarning": "npu_jax.core.policy",
    "requantize": "npu_jax.core.quant",
    "Checks": "npu_jax.core.sanitize",
    "default_checks": "npu_jax.core.sanitize",
    "set_default_checks": "npu_jax.core.sanitize",
    "STRATEGIES": "npu_jax.mapping.conv",
    "ConvTiling": "npu_jax.mapping.conv",
    "MatmulTiling": "npu_jax.mapping.gemm",
    "Report": "npu_jax.report.report",
    "set_max_bytes": "npu_jax.api.validate",
    "set_program_cache_size": "npu_jax.core.programs",
    "set_program_cache_bytes": "npu_jax.core.programs",
    "program_cache_info": "npu_jax.core.programs",
    "clear_program_cache": "npu_jax.core.programs",
    "enable_persistent_cache": "npu_jax.core.programs",
    "sweep": "npu_jax.sweeps",
}
# Subpackages reached as attributes of ``npu_jax`` (``npu_jax.search.tile_search``), imported on first use.
_LAZY_SUBMODULES = (
    "api",
    "asc",
    "core",
    "cost",
    "kernels",
    "mapping",
    "model",
    "report",
    "search",
    "studies",
    "sweeps",
    "workload",
)


def __getattr__(name: str):
    if name in _LAZY_NAMES:
        value = getattr(importlib.import_module(_LAZY_NAMES[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"npu_jax.{name}")
    raise AttributeError(f"module 'npu_jax' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY_NAMES, *_LAZY_SUBMODULES})


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
    "asc",
    "clear_program_cache",
    "conv2d",
    "conv2d_bounded",
    "cost",
    "default_checks",
    "enable_persistent_cache",
    "errors",
    "global_avg_pool",
    "matmul",
    "model",
    "pool2d",
    "presets",
    "program_cache_info",
    "report",
    "requantize",
    "search",
    "set_default_checks",
    "set_max_bytes",
    "set_program_cache_bytes",
    "set_program_cache_size",
    "studies",
    "sweep",
    "sweeps",
    "workload",
]

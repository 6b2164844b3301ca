"""pyasc's programs on the emulator: the names of the vendor's Python front end (``asc.jit``,
``asc.LocalTensorAuto``, ``asc.adv.Matmul``, ...) that ``npu_jax.asc`` does not already have, so that a
pyasc program runs with only its imports changed::

    from npu_jax import asc                      # was: import asc
    import npu_jax.asc.runtime.config as config  # was: import asc.runtime.config as config
    import npu_jax.asc.lib.runtime as rt         # was: import asc.lib.runtime as rt
    import npu_jax.asc.lib.host as host          # was: import asc.lib.host as host

Our own implementation of pyasc's interface (its names, signatures and semantics); no pyasc code.
:data:`EXPORTS` lists what ``npu_jax.asc`` takes from here.
"""

from npu_jax.asc.pyasc import adv
from npu_jax.asc.pyasc.auto import LocalTensorAuto
from npu_jax.asc.pyasc.jit import CodegenOptions, CompileOptions, JitFunction, LaunchOptions, jit
from npu_jax.asc.pyasc.lang import (
    DEFAULT_C0_SIZE,
    ONE_BLK_SIZE,
    TOTAL_L0C_SIZE,
    TOTAL_L1_SIZE,
    Array,
    ConstExpr,
    CubeFormat,
    DataFormat,
    LayoutMode,
    PipeID,
    Property,
    ShapeInfo,
    array,
    ascend_is_aic,
    ascend_is_aiv,
    ceildiv,
    get_shape_size,
    property,
    range,
    static_range,
)

__all__ = [
    "Array",
    "CodegenOptions",
    "CompileOptions",
    "ConstExpr",
    "CubeFormat",
    "DEFAULT_C0_SIZE",
    "DataFormat",
    "JitFunction",
    "LaunchOptions",
    "LayoutMode",
    "LocalTensorAuto",
    "ONE_BLK_SIZE",
    "PipeID",
    "Property",
    "ShapeInfo",
    "TOTAL_L0C_SIZE",
    "TOTAL_L1_SIZE",
    "adv",
    "array",
    "ascend_is_aic",
    "ascend_is_aiv",
    "ceildiv",
    "get_shape_size",
    "jit",
    "property",
    "range",
    "static_range",
]
EXPORTS = tuple(__all__)  # what npu_jax.asc takes from here

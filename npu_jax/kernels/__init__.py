"""Programs written on the core instruction set."""

from npu_jax.kernels.conv2d import STRATEGIES, ConvTiling, conv2d, conv2d_bounded
from npu_jax.kernels.gemm import MatmulTiling, matmul

__all__ = ["ConvTiling", "MatmulTiling", "STRATEGIES", "conv2d", "conv2d_bounded", "matmul"]

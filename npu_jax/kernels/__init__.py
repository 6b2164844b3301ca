"""Programs written on the core instruction set."""

from npu_jax.kernels.gemm import MatmulTiling, matmul

__all__ = ["MatmulTiling", "matmul"]

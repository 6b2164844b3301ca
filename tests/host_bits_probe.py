"""Run a small set of emulated kernels and print their output bits and cycles as one JSON line.

``tests/test_host_bits.py`` runs this script in subprocesses under different XLA:CPU settings
(instruction-set limits, YNNPACK off) and requires the same line from each. By hand:

    XLA_FLAGS=--xla_cpu_max_isa=AVX python tests/host_bits_probe.py 1234
"""

from __future__ import annotations

import hashlib
import json
import sys

import numpy as np

import fusion
import npu_jax
from npu_jax.core.policy import Policy


def _bits(a) -> str:
    a = np.ascontiguousarray(np.asarray(a))
    return f"{a.dtype}{a.shape}:" + hashlib.sha256(a.tobytes()).hexdigest()[:16]


def run(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    hw = npu_jax.presets.tiny()
    x = rng.standard_normal((1, 16, 6, 7)).astype(np.float32)
    w = (rng.standard_normal((16, 16, 3, 3)) * 0.1).astype(np.float32)
    a = rng.standard_normal((40, 48)).astype(np.float32)
    b = rng.standard_normal((48, 24)).astype(np.float32)
    bias = rng.standard_normal(16).astype(np.float32)
    res = rng.standard_normal((1, 16, 6, 7)).astype(np.float32)
    out = {}

    def rec(name, y, rep):
        out[name] = [_bits(y), int(rep.cycles)]

    rec("conv_img2col_fp16", *npu_jax.conv2d(x, w, padding=1, hw=hw, policy=Policy(output="fp32")))
    rec(
        "conv_output_tiled_fp32",
        *npu_jax.conv2d(
            x, w, padding=1, strategy="output_tiled", hw=hw, policy=Policy(operand="fp32", output="fp32")
        ),
    )
    step = Policy(operand="bf16", accumulate="fp16_step", output="fp32")
    rec("matmul_bf16_fp16_step", *npu_jax.matmul(a, b, hw=hw, policy=step))
    rec(
        "fused_vector_epilogue",
        *fusion.conv2d_fused(
            x,
            w,
            ("bias", ("leaky_relu", 0.1), "residual"),
            bias=bias,
            residual=res,
            padding=1,
            hw=npu_jax.presets.tiny(coupled=True),
            policy=Policy(operand="fp32", output="fp32"),
        ),
    )
    return out


if __name__ == "__main__":
    print("HOST_BITS " + json.dumps(run(int(sys.argv[1])), sort_keys=True))

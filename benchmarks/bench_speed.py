"""Interactive speed: the emulated data path against XLA's own conv and dot, and the first
and repeated call.

Prints, in one run (every ratio from runs side by side in this process, best of 5 after compile):

(a) for the ResNet-50 reference layers at batch 1 and 8 on the 910B preset: wall time of the emulated
    img2col ``conv2d`` and of the fused ConvReLU (``fusion.conv_relu``), each under ``jax.jit`` with
    the chooser's tiling, against ``lax.conv_general_dilated`` on the same fp16 values in fp32 at
    ``Precision.HIGHEST`` (jitted); at batch 1 also the conv with ``data_path="instructions"`` (the
    data moved through every instruction, as before the values path). Targets:
    emulated / lax.conv <= 1.5 at batch 8 and <= 2 at batch 1 on conv2_x-conv5_x.
(b) the GEMM 2048^3 (fp16 operands) against ``jnp.dot`` in fp32 at HIGHEST. Target <= 1.5.
(c) in a fresh process each: the first ``npu_jax.conv2d`` on conv2_x (910B, every sanitizer on, then
    none) after import, the second identical call with new data, and their ratio (target: first < 10 s quiet on
    2 cores, second < 0.5 s, second / first < 5%).

Run:  python benchmarks/bench_speed.py            (about 5 minutes on a 2-core laptop CPU)
      python benchmarks/bench_speed.py --quick    (conv2_x and conv5_x at batch 1 and 8, a 1024^3 GEMM)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from bench_conv import xla_conv  # noqa: E402  (benchmarks/ is on sys.path when run as a script)
from jax import lax

import fusion
import npu_jax
from npu_jax.hw import presets
from npu_jax.search.choose import choose_tiling
from npu_jax.workload.resnet50 import RESNET50_REFERENCE

HIGHEST = lax.Precision.HIGHEST
REPEAT = 5

FIRST_CALL = """
import time, numpy as np
t0 = time.perf_counter()
import npu_jax
from npu_jax.hw import presets
rng = np.random.default_rng(0)
x = rng.standard_normal((1, 64, 56, 56)).astype(np.float16)
w = rng.standard_normal((64, 64, 3, 3)).astype(np.float16)
hw, pol = presets.ascend910b(), npu_jax.Policy()
t1 = time.perf_counter()
y, rep = npu_jax.conv2d(x, w, 1, 1, hw=hw, policy=pol, checks=CHECKS)
y.block_until_ready()
t2 = time.perf_counter()
y, rep = npu_jax.conv2d(x * np.float16(0.5), w, 1, 1, hw=hw, policy=pol, checks=CHECKS)
y.block_until_ready()
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2)
"""


def best(fn, *args) -> float:
    jax.block_until_ready(fn(*args))
    out = float("inf")
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        out = min(out, time.perf_counter() - t0)
    return out


def batched(layer, n: int):
    return dataclasses.replace(layer, n=n)


def part_a(layers, batches, hw) -> None:
    print(
        f"\n(a) wall time after compile (best of {REPEAT}), {hw.name}, img2col, chooser's tiling; "
        "ratio to lax.conv_general_dilated (fp32, HIGHEST)"
    )
    print(f"  {'layer':<26}{'batch':>6}{'lax.conv ms':>12}{'conv2d':>9}{'ConvReLU':>10}{'instructions':>14}")
    rng = np.random.default_rng(0)
    pol = npu_jax.Policy()
    for n in batches:
        for base in layers:
            layer = batched(base, n)
            g = layer.geometry()
            tiling = choose_tiling(g, "img2col", hw)
            x = jnp.asarray(rng.standard_normal(layer.x_shape).astype(np.float16))
            w = jnp.asarray(rng.standard_normal(layer.w_shape).astype(np.float16))
            args = dict(hw=hw, tiling=tiling, policy=pol)
            conv = jax.jit(lambda x, w, a=args, L=layer: npu_jax.conv2d(x, w, L.stride, L.padding, **a)[0])
            relu = jax.jit(
                lambda x, w, a=args, L=layer: fusion.conv_relu(x, w, stride=L.stride, padding=L.padding, **a)[
                    0
                ]
            )
            ref = xla_conv(layer)
            y = conv(x, w)
            y_ref = ref(x, w)
            scale = float(jnp.max(jnp.abs(y_ref)))
            err = float(jnp.max(jnp.abs(y.astype(jnp.float32) - y_ref)))
            assert err <= float(np.spacing(np.float16(scale))), f"{layer.name}: max error {err} (|y| {scale})"
            t_ref = best(ref, x, w)
            t_conv = best(conv, x, w)
            t_relu = best(relu, x, w)
            instr = ""
            if n == 1:
                slow = jax.jit(
                    lambda x, w, a=args, L=layer: npu_jax.conv2d(
                        x, w, L.stride, L.padding, data_path="instructions", **a
                    )[0]
                )
                instr = f"{best(slow, x, w) / t_ref:>13.2f}x"
            print(
                f"  {layer.name:<26}{n:>6}{t_ref * 1e3:>12.2f}{t_conv / t_ref:>8.2f}x{t_relu / t_ref:>9.2f}x{instr}",
                flush=True,
            )
    print("  targets: <= 2x at batch 1, <= 1.5x at batch 8 on conv2_x-conv5_x")


def part_b(size: int) -> None:
    rng = np.random.default_rng(1)
    a = jnp.asarray(rng.standard_normal((size, size)).astype(np.float16))
    b = jnp.asarray(rng.standard_normal((size, size)).astype(np.float16))
    hw, pol = presets.ascend910b(), npu_jax.Policy()
    emu = jax.jit(lambda a, b: npu_jax.matmul(a, b, hw=hw, policy=pol)[0])
    ref = jax.jit(lambda a, b: jnp.dot(a.astype(jnp.float32), b.astype(jnp.float32), precision=HIGHEST))
    t_ref, t_emu = best(ref, a, b), best(emu, a, b)
    print(
        f"\n(b) GEMM {size}^3 fp16 ({hw.name}): matmul {t_emu * 1e3:.1f} ms, jnp.dot (fp32, HIGHEST) "
        f"{t_ref * 1e3:.1f} ms: {t_emu / t_ref:.2f}x   (target <= 1.5x)"
    )


def part_c() -> None:
    env = dict(os.environ, NPU_JAX_CHECKS="none")
    for checks in ("all", "none"):
        out = subprocess.run(
            [sys.executable, "-c", FIRST_CALL.replace("CHECKS", repr(checks))],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout.split()
        imp, first, second = (float(v) for v in out[-3:])
        print(
            f"\n(c) fresh process, conv2_x 910B, checks={checks!r}: import {imp:.1f} s, first conv2d {first:.2f} s, "
            f"second (new data) {second:.3f} s = {100 * second / first:.2f}% of the first"
            "   (targets: < 10 s, < 0.5 s, < 5%)"
        )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="conv2_x and conv5_x, a 1024^3 GEMM")
    args = p.parse_args(argv)
    hw = presets.ascend910b()
    print(
        f"jax {jax.__version__} on {jax.default_backend()} ({platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs), load {os.getloadavg()[0]:.1f}"
    )
    layers = [RESNET50_REFERENCE[1], RESNET50_REFERENCE[4]] if args.quick else RESNET50_REFERENCE
    part_a(layers, (1, 8), hw)
    part_b(1024 if args.quick else 2048)
    part_c()
    print(f"  load at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

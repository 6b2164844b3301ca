"""int8 error against its budget: minmax / percentile / entropy x per-tensor / per-channel weights.

A conv-like matmul (im2col of a 3x3 conv: K = 9 x 64 = 576, M = 1024 output pixels, N = 64 output
channels) with fixed seeds: ReLU'd Laplace activations (a long tail), He-init weights whose channels
differ in scale (x0.2 to x2). Activations are calibrated per tensor by the method; weights per tensor or per
output channel by the same method. Printed per row: the fraction of activations clipped, the
componentwise error max |y_q - y| / (|x| @ |w|), the relative L2 error, and the probabilistic and
deterministic bounds of precision.int8_bounds (as max bound / S). The int8 products are the
emulator's: ``npu_jax.matmul`` with int8 operands, its exact int32 sums scaled by s_x * s_w.

Then the speed: the same layer as a 3x3 conv (64 -> 64 channels, 32 x 32, batch 1, and batch 8) on
the emulator, int8 (requantised to int8 by per-channel scales) against fp16, per chip.

    python benchmarks/int8_calibration.py
"""

import numpy as np

import npu_jax
import precision


def workload(seed: int = 0):
    rng = np.random.default_rng(seed)
    M, K, N = 1024, 576, 64
    x = np.maximum(rng.laplace(size=(M, K)), 0)  # ReLU of a heavy-tailed pre-activation
    w = rng.standard_normal((K, N)) * np.sqrt(2 / K) * rng.uniform(0.2, 2.0, N)
    return x.astype(np.float32), w.astype(np.float32)


def main():
    x, w = workload()
    y = x.astype(np.float64) @ w.astype(np.float64)
    print("| method | weights | x clipped | componentwise | rel L2 | prob. bound | det. bound |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for method in ("minmax", "percentile", "entropy"):
        cx = precision.calibrate(x, method)
        xq = cx.quantize(x)
        for gran, axis in (("per-tensor", None), ("per-channel", 1)):
            wq = precision.calibrate(w, method, axis=axis).quantize(w)
            b = precision.int8_bounds(x, w, xq, wq)
            acc, _ = npu_jax.matmul(xq.q, wq.q, policy=INT32, checks="none")  # the emulated Cube
            s_w = np.asarray(wq.scale, np.float64).reshape(1, -1)
            y_q = np.asarray(acc, np.float64) * (np.float64(xq.scale) * s_w)
            m = precision.compare(y_q, y, abs_ref=b.abs_ref)
            clipped = float(np.mean(np.abs(x) > cx.high))
            print(
                f"| {method} | {gran} | {clipped:.3%} | {m.componentwise:.2e} | {m.rel_l2:.2e} | "
                f"{b.relative('probabilistic'):.2e} | {b.relative('deterministic'):.2e} |"
            )


def speed():
    rng = np.random.default_rng(1)
    print()
    print("| chip | batch | fp16 cycles | int8 cycles | int8 speed-up | fp16 % peak | int8 % peak |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in ("ascend910b", "ascend310p"):
        hw = getattr(npu_jax.presets, name)()
        for n in (1, 8):
            x = rng.integers(-128, 128, (n, 64, 32, 32)).astype(np.int8)
            w = rng.integers(-128, 128, (64, 64, 3, 3)).astype(np.int8)
            scale = rng.uniform(1e-4, 1e-3, 64).astype(np.float32)
            run = dict(padding=1, hw=hw, timing_only=True, checks="none")
            _, r16 = npu_jax.conv2d(
                x.astype(np.float16), w.astype(np.float16), policy=npu_jax.Policy(), **run
            )
            _, r8 = npu_jax.conv2d(
                x, w, policy=npu_jax.Policy(operand="int8", output="int8"), scale=scale, **run
            )
            print(
                f"| {name} | {n} | {int(r16.cycles):,} | {int(r8.cycles):,} | {r16.cycles / r8.cycles:.2f}x | "
                f"{r16.pct_peak:.1f} | {r8.pct_peak:.1f} |"
            )


INT32 = npu_jax.Policy(operand="int8", output="int32")

if __name__ == "__main__":
    main()
    speed()

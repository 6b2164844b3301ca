"""int8 error against its budget: minmax / percentile / entropy x per-tensor / per-channel weights.

A conv-like matmul (im2col of a 3x3 conv: K = 9 x 64 = 576, M = 1024 output pixels, N = 64 output
channels) with fixed seeds: ReLU'd Laplace activations (a long tail), He-init weights whose channels
differ in scale (x0.2 to x2). Activations are calibrated per tensor by the method; weights per tensor or per
output channel by the same method. Printed per row: the fraction of activations clipped, the
componentwise error max |y_q - y| / (|x| @ |w|), the relative L2 error, and the probabilistic and
deterministic bounds of precision.int8_bounds (as max bound / S).

    python benchmarks/int8_calibration.py
"""

import numpy as np

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
            y_q = np.asarray(xq.dequantize(), np.float64) @ np.asarray(wq.dequantize(), np.float64)
            m = precision.compare(y_q, y, abs_ref=b.abs_ref)
            clipped = float(np.mean(np.abs(x) > cx.high))
            print(
                f"| {method} | {gran} | {clipped:.3%} | {m.componentwise:.2e} | {m.rel_l2:.2e} | "
                f"{b.relative('probabilistic'):.2e} | {b.relative('deterministic'):.2e} |"
            )


if __name__ == "__main__":
    main()

"""The precision lab on a real network: ResNet-18's every layer, emulated, against onnxruntime fp32.

Runs ``npu_jax.model.zoo.resnet18`` (random weights, ``--image`` x ``--image`` input, batch 1) through
the emulator under each policy and compares every layer's output with onnxruntime's (fp32, CPU) on the
same input (``precision.network.network_errors``); prints each policy's per-layer table against the
budget of the error analysis, a summary line per policy, and writes the error-vs-depth plot.

    python benchmarks/model_precision.py --image 64 --plot docs/model_precision.png
    python benchmarks/model_precision.py --image 64 --input-exp 13 --policies mixed fp16 --scale

``--input-exp E`` multiplies the input by 2^E (a network fed in the wrong units: its activations leave
fp16's range); ``--scale`` adds, per policy, a run under the calibrated network-wide power-of-two scale
(``precision.network.calibrated_scale`` / ``scaled_model``: biases, BN shifts and Clip bounds scaled
with the input, every output divided back exactly).
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

import npu_jax
from npu_jax.model import zoo
from precision.network import network_errors, plot_network_errors, reference_tensors
from precision.strategies import POLICIES


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--network", default="resnet18", choices=zoo.NETWORKS)
    ap.add_argument("--image", type=int, default=64)
    ap.add_argument("--preset", default="910b")
    ap.add_argument("--policies", nargs="+", default=["mixed", "fp16", "fp32"], choices=sorted(POLICIES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--input-exp", type=int, default=0, help="multiply the input by 2^E")
    ap.add_argument("--scale", action="store_true", help="also run each policy under calibrated scaling")
    ap.add_argument("--plot", default=None)
    args = ap.parse_args()
    npu_jax.enable_persistent_cache()
    hw = npu_jax.presets.get(args.preset)
    proto = zoo.build(args.network, image=args.image, seed=args.seed)
    x = (
        np.random.default_rng(args.seed + 1)
        .standard_normal((1, 3, args.image, args.image))
        .astype(np.float32)
    ) * np.float32(2.0**args.input_exp)
    ref = reference_tensors(proto, x)
    results = []
    print(
        f"input x 2^{args.input_exp}; largest reference magnitude {max(np.abs(v).max() for v in ref.values()):.4g}"
    )
    runs = [(name, None) for name in args.policies]
    runs += [(name, "auto") for name in args.policies] if args.scale else []
    for name, scale in runs:
        t0 = time.perf_counter()
        res = network_errors(
            proto, x, hw=hw, policy=POLICIES[name], label=name, reference=ref, checks="none", scale=scale
        )
        if scale:
            res = dataclasses.replace(res, label=f"{name}, scaled 2^{int(np.log2(res.scale))}")
        results.append(res)
        print(res.table())
        print(f"  ({time.perf_counter() - t0:.0f} s)\n", flush=True)
    print(
        f"{'policy':<24}{'layers ok':>10}{'final rel_l2':>14}{'final budget':>14}{'worst/budget':>14}{'cycles':>12}"
    )
    for r in results:
        print(
            f"{r.label:<24}{sum(x.ok for x in r.rows):>5}/{len(r.rows):<4}{r.final.metrics.rel_l2:>14.3e}"
            f"{r.final.bound:>14.3e}{r.worst.metrics.rel_l2 / r.worst.bound:>14.3f}{r.cycles:>12,}"
        )
    if args.plot:
        plot_network_errors(results, args.plot)
        print(f"plot written to {args.plot}")


if __name__ == "__main__":
    main()

"""The four Conv2D strategies on ResNet-50's 3x3 reference layers at a batch, with the chooser's tilings.

Prints % of the chip's peak per (layer, strategy) from the closed-form model (``cost.predict``, equal to
the emulator's timing-only run, tested), with the counters that explain the differences: GM bytes,
bytes from HBM, the tiling's buffering and whether the weights stay in L1.

    python benchmarks/strategies_batch.py --preset 910b --batch 8
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import npu_jax
from npu_jax.cost.conv import predict
from npu_jax.mapping.conv import STRATEGIES, make_plan
from npu_jax.search.choose import choose_tiling
from npu_jax.workload.resnet50 import RESNET50_REFERENCE


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="910b")
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args()
    hw = npu_jax.presets.get(args.preset)
    peak = hw.peak_flops_per_cycle("fp16") * hw.num_cores
    print(f"{'layer':<24}{'strategy':<14}{'% peak':>7}{'cycles':>9}{'GM bytes':>12}  tiling")
    for layer in RESNET50_REFERENCE[1:]:
        g = dataclasses.replace(layer, n=args.batch).geometry()
        for s in STRATEGIES:
            t0 = time.perf_counter()
            t = choose_tiling(g, s, hw)
            q = predict(make_plan(g, s, t, hw))
            print(
                f"{layer.name:<24}{s:<14}{100 * g.flops / (q.cycles * peak):>7.1f}{q.cycles:>9,}"
                f"{q.gm_bytes:>12,}  ho={t.ho} wo={t.wo} n={t.n} cin1={t.cin1} k_l0={t.k_l0} "
                f"stages={t.l1_stages} resident={t.weights_resident} split={t.cout_split} "
                f"({time.perf_counter() - t0:.1f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()

"""The four Conv2D strategies on ResNet-50's 3x3 reference layers at a batch, with the chooser's tilings.

Prints % of the chip's peak per (layer, strategy) from the closed-form model (``cost.predict``, equal to
the emulator's timing-only run, tested), with the chooser's tiling. ``--emulate`` also runs each kernel
on the emulator (timing-only) and prints the counters that explain the differences, read from its
report: GM -> L1 bytes, the bytes that came from HBM and those L2 served, MTE2 cycles per GM byte (the
burst count's mark: long contiguous bursts pay fewer gaps), mac_ratio and the bottleneck pipe.

    python benchmarks/strategies_batch.py --preset 910b --batch 8 [--emulate]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

import npu_jax
from npu_jax.cost.conv import predict
from npu_jax.mapping.conv import STRATEGIES, make_plan
from npu_jax.search.choose import choose_tiling
from npu_jax.workload.resnet50 import RESNET50_REFERENCE


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="910b")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--emulate", action="store_true", help="also run the emulator: its counters")
    args = ap.parse_args()
    hw = npu_jax.presets.get(args.preset)
    peak = hw.peak_flops_per_cycle("fp16") * hw.num_cores
    rng = np.random.default_rng(0)
    head = f"{'layer':<24}{'strategy':<14}{'% peak':>7}{'cycles':>9}{'GM bytes':>12}"
    if args.emulate:
        head += f"{'GM->L1':>12}{'HBM':>12}{'L2 hits':>12}{'MTE2/B':>7}{'mac':>6}  neck"
    print(head + "  tiling")
    for layer in RESNET50_REFERENCE[1:]:
        g = dataclasses.replace(layer, n=args.batch).geometry()
        for s in STRATEGIES:
            t0 = time.perf_counter()
            t = choose_tiling(g, s, hw)
            q = predict(make_plan(g, s, t, hw))
            line = f"{layer.name:<24}{s:<14}{100 * g.flops / (q.cycles * peak):>7.1f}{q.cycles:>9,}{q.gm_bytes:>12,}"
            if args.emulate:
                x = rng.standard_normal((g.n, g.c, g.h, g.w)).astype(np.float16)
                w = rng.standard_normal((g.k, g.c, g.kh, g.kw)).astype(np.float16)
                _, rep = npu_jax.conv2d(
                    x, w, layer.stride, layer.padding, strategy=s, hw=hw, tiling=t,
                    policy=npu_jax.Policy(), timing_only=True,
                )  # fmt: skip
                if (rep.cycles, rep.gm_bytes) != (q.cycles, q.gm_bytes):
                    raise SystemExit(f"model != emulator on {layer.name} {s}: {q} vs {rep.cycles}")
                per_b = rep.pipe_busy["MTE2"] / rep.bytes["GM->L1"]
                line += (
                    f"{rep.bytes['GM->L1']:>12,}{rep.hbm_bytes:>12,}{rep.l2_hit_bytes:>12,}{per_b:>7.4f}"
                    f"{rep.ratios['mac_ratio']:>6.2f}  {rep.bottleneck:<5}"
                )
            print(
                f"{line}  ho={t.ho} wo={t.wo} n={t.n} cin1={t.cin1} k_l0={t.k_l0} stages={t.l1_stages} "
                f"resident={t.weights_resident} split={t.cout_split} ({time.perf_counter() - t0:.1f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()

"""The L2 co-design question: ResNet-50's 53 convs (img2col, the chooser's tilings) against L2 size.

For each batch and each L2 size (MiB; 0 = no L2, every GM byte from HBM), the network's total cycles
from the closed-form model (equal to the emulator, tested), each layer with the chooser's tiling at that
size, and the smallest L2 at the minimum.

    python benchmarks/l2_codesign.py --preset 910b --batch 1 8 --l2 0,4,8,16,32,64,96,192
"""

from __future__ import annotations

import argparse
import collections
import time

import npu_jax
from npu_jax.search.codesign import l2_sweep, smallest_sufficient
from npu_jax.workload.resnet50 import resnet50_convs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="910b")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--l2", default="0,4,8,16,32,64,96,192", help="L2 sizes in MiB")
    args = ap.parse_args()
    hw = npu_jax.presets.get(args.preset)
    sizes = [float(s) for s in args.l2.split(",")]
    for b in args.batch:
        t0 = time.process_time()
        counts = collections.Counter(layer.geometry() for layer in resnet50_convs(b))
        layers = list(counts)
        sz, totals, _ = l2_sweep(layers, hw, sizes, counts=[counts[g] for g in layers])
        best = smallest_sufficient(sz, totals)
        print(f"== {hw.name}, batch {b}: {len(layers)} distinct convs ({sum(counts.values())} in all)")
        print(f"{'L2 MiB':>8} {'total cycles':>14} {'vs the largest':>15}")
        for m, tot in zip(sz, totals):
            print(f"{m:>8g} {int(tot):>14,} {tot / totals[-1]:>14.3f}x")
        print(
            f"smallest L2 at the minimum: {best:g} MiB (the preset's: {hw.l2_bytes / 2**20:g} MiB); "
            f"{time.process_time() - t0:.0f} CPU-s",
            flush=True,
        )


if __name__ == "__main__":
    main()

"""Whole-network timing-only estimate of ResNet-50's 53 conv layers (fp16, img2col) on a preset.

Each distinct layer's tiling is the chooser's at ``min(batch, --choose-batch)`` images (the chooser
costs every candidate with the closed-form model, which grows with the batch); the cycles are then
the closed-form model's at the full batch (``cost.predict``, equal to the emulator's timing-only run,
tested), each conv a kernel with its launch. Not counted: the ReLU (and folded BatchNorm) fused into
the conv's epilogue, the NC1HWC0 relayout kernels (a network keeps its activations in NC1HWC0, so
only the input would need one), pooling, the residual adds and the FC layer.

    python benchmarks/resnet50_network.py --preset 910b --batch 1 8 32 64
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import npu_jax
from npu_jax.cost.conv import predict
from npu_jax.mapping.conv import make_plan
from npu_jax.search.choose import choose_tiling
from npu_jax.workload.resnet50 import resnet50_convs


def network(hw, batch: int, choose_batch: int):
    layers = resnet50_convs(batch)
    cycles, flops, launches = 0, 0, 0
    for layer in layers:
        g = layer.geometry()
        small = dataclasses.replace(layer, n=min(batch, choose_batch)).geometry()
        t = choose_tiling(small, "img2col", hw)
        q = predict(make_plan(g, "img2col", t, hw))
        cycles += q.cycles
        flops += g.flops
        launches += 1
    return cycles, flops, launches


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", nargs="+", default=["310p", "910", "910b"])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32, 64])
    ap.add_argument("--choose-batch", type=int, default=8)
    args = ap.parse_args()
    print(f"{'preset':<12}{'batch':>6}{'cycles':>14}{'ms':>9}{'img/s':>10}{'% peak':>8}{'launch %':>9}")
    for name in args.preset:
        hw = npu_jax.presets.get(name)
        peak = hw.peak_flops_per_cycle("fp16") * hw.num_cores
        for b in args.batch:
            t0 = time.perf_counter()
            cyc, flops, n = network(hw, b, args.choose_batch)
            sec = cyc / (hw.clock_ghz * 1e9)
            print(
                f"{hw.name:<12}{b:>6}{cyc:>14,}{sec * 1e3:>9.3f}{b / sec:>10,.0f}{100 * flops / (cyc * peak):>8.1f}"
                f"{100 * n * hw.launch_cycles / cyc:>9.1f}   ({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()

"""Time the emulated Conv2D against plain XLA, its compile time against the tile count, and the
closed-form cost model on the whole of ResNet-50.

Prints, in one run:

(a) for each ResNet-50 reference layer on the 910B preset: wall time after compile (best of 3) of the
    emulated ``img2col`` conv (``conv2d`` under ``jax.jit``, full run with data, the chooser's tiling)
    and of ``lax.conv_general_dilated`` on the same fp16 inputs cast to fp32 at precision=HIGHEST
    (jitted), and their ratio. Target: emulated / lax.conv <= 2.
(b) trace + lower + compile time of one emulated conv at 1x and 4x the tile count: the same layer with
    the chooser's tiling and with its output tile halved in height and width (fresh function objects,
    so nothing is cached). Target: 4x / 1x <= 1.3, because tile loops are ``lax.fori_loop``s and the
    compile must not grow with the number of tiles.
(c) the timing-only estimate of all 53 conv layers of ResNet-50 with the closed-form cost model
    (``npu_jax.cost.conv.predict`` of ``make_plan(layer.geometry(), "img2col", choose_tiling(...))``):
    the time of the tiling choice and of the prediction loop (after a warm-up), and the network's total
    estimated cycles and milliseconds.

Run:  python benchmarks/bench_conv.py          (a few minutes on a laptop CPU)
      python benchmarks/bench_conv.py --quick  (two layers in (a), a smaller layer in (b), the first
                                                stage of ResNet-50 in (c): about a minute)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np
from _timing import best_of  # noqa: E402  (benchmarks/ is on sys.path when run as a script)
from jax import lax

from npu_jax.api.conv import conv2d
from npu_jax.cost.conv import predict
from npu_jax.hw import presets
from npu_jax.mapping.conv import make_plan
from npu_jax.search.choose import choose_tiling
from npu_jax.workload.resnet50 import RESNET50_REFERENCE, resnet50_convs

HIGHEST = lax.Precision.HIGHEST
STRATEGY = "img2col"


def emulated(layer, hw, tiling):
    """A fresh jitted emulated conv of ``layer``: (y NCHW, report)."""
    return jax.jit(
        lambda x, w: conv2d(x, w, layer.stride, layer.padding, strategy=STRATEGY, hw=hw, tiling=tiling)
    )


def xla_conv(layer):
    g = layer.geometry()
    pt, pb, pl, pr = g.pads

    def f(x, w):
        return lax.conv_general_dilated(
            x.astype(jnp.float32),
            w.astype(jnp.float32),
            g.stride,
            ((pt, pb), (pl, pr)),
            rhs_dilation=g.dilation,
            dimension_numbers=("NCHW", "OIHW", "NCHW"),
            precision=HIGHEST,
        )

    return jax.jit(f)


def compile_seconds(layer, hw, tiling) -> tuple[float, float]:
    """(trace + lower, compile) seconds of a fresh jitted emulated conv."""
    f = emulated(layer, hw, tiling)  # fresh: no cache hit
    x = jax.ShapeDtypeStruct(layer.x_shape, jnp.float16)
    w = jax.ShapeDtypeStruct(layer.w_shape, jnp.float16)
    t0 = time.perf_counter()
    lowered = f.lower(x, w)
    t1 = time.perf_counter()
    lowered.compile()
    return t1 - t0, time.perf_counter() - t1


def four_times_the_tiles(layer, hw, tiling):
    """The chooser's tiling with the output tile halved in height and width (4x the tiles), if legal."""
    g = layer.geometry()
    small = dataclasses.replace(tiling, ho=max(1, tiling.ho // 2), wo=max(1, tiling.wo // 2))
    p1, p4 = make_plan(g, STRATEGY, tiling, hw), make_plan(g, STRATEGY, small, hw)
    return small, p1.n_tiles, p4.n_tiles


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help="two layers in (a), conv4_x in (b), ResNet-50's first stage in (c)",
    )
    args = p.parse_args(argv)
    hw = presets.ascend910b()
    print(
        f"jax {jax.__version__} on {jax.default_backend()} ({platform.processor() or platform.machine()},"
        f" {os.cpu_count()} CPUs); preset {hw.name}, strategy {STRATEGY}"
    )

    # ---- (a) run time ------------------------------------------------------------------------
    layers = RESNET50_REFERENCE[3:] if args.quick else RESNET50_REFERENCE
    rng = np.random.default_rng(0)
    print(
        "\n(a) wall time after compile (best of 3): emulated conv2d (jit, full run) vs "
        "lax.conv_general_dilated (fp32, HIGHEST, jit)"
    )
    print(
        f"  {'layer':<24}{'compile s':>10}{'emulated s':>11}{'lax.conv s':>11}{'ratio':>8}"
        f"{'cycles':>10}{'% peak':>8}  tiling"
    )
    emulated_cycles = {}
    for layer in layers:
        x = jnp.asarray(rng.standard_normal(layer.x_shape).astype(np.float16))
        w = jnp.asarray(rng.standard_normal(layer.w_shape).astype(np.float16))
        tiling = choose_tiling(layer.geometry(), STRATEGY, hw)
        f, ref = emulated(layer, hw, tiling), xla_conv(layer)
        t0 = time.perf_counter()
        jax.block_until_ready(f(x, w))
        first = time.perf_counter() - t0
        jax.block_until_ready(ref(x, w))
        t_emu, (y, report) = best_of(f, x, w)
        t_ref, y_ref = best_of(ref, x, w)
        err = float(jnp.max(jnp.abs(y.astype(jnp.float32) - y_ref)))
        scale = float(jnp.max(jnp.abs(y_ref)))
        assert err <= float(np.spacing(np.float16(scale))), f"{layer.name}: max error {err} (|y| {scale})"
        emulated_cycles[layer.name] = report.cycles
        t = tiling
        print(
            f"  {layer.name:<24}{first:>10.2f}{t_emu:>11.4f}{t_ref:>11.4f}{t_emu / t_ref:>7.2f}x"
            f"{report.cycles:>10,}{report.pct_peak:>8.1f}  ho={t.ho} wo={t.wo} n={t.n} cin1={t.cin1} "
            f"k_l0={t.k_l0} res={int(t.weights_resident)} cs={t.cout_split}"
        )
    print(
        "  target: emulated / lax.conv <= 2 (compile s: the first call, compile included; the "
        "outputs agree within one fp16 ulp)"
    )

    # ---- (b) compile time vs tile count ------------------------------------------------------
    layer = RESNET50_REFERENCE[3] if args.quick else RESNET50_REFERENCE[1]
    t1x = choose_tiling(layer.geometry(), STRATEGY, hw)
    t4x, n1, n4 = four_times_the_tiles(layer, hw, t1x)
    compile_seconds(RESNET50_REFERENCE[4], hw, choose_tiling(RESNET50_REFERENCE[4].geometry(), STRATEGY, hw))
    times = {}
    for _ in range(3):  # interleaved, best of 3 each: compile times are noisy
        for key, tiling in (("1x", t1x), ("4x", t4x)):
            lo, co = compile_seconds(layer, hw, tiling)
            if key not in times or lo + co < sum(times[key]):
                times[key] = (lo, co)
    print(f"\n(b) trace+lower and compile time of {layer.name}, {STRATEGY} (best of 3)")
    print(f"  {'tiling':<12}{'ho x wo':>9}{'tiles':>7}{'lower s':>9}{'compile s':>11}{'total s':>9}")
    for key, tiling, n in (("1x", t1x, n1), ("4x", t4x, n4)):
        lo, co = times[key]
        print(f"  {key:<12}{f'{tiling.ho}x{tiling.wo}':>9}{n:>7}{lo:>9.3f}{co:>11.3f}{lo + co:>9.3f}")
    ratio = sum(times["4x"]) / sum(times["1x"])
    print(f"  {n4 / n1:.0f}x tiles / 1x tiles: {ratio:.2f}   (target <= 1.3)")

    # ---- (c) the closed-form cost model on ResNet-50 -------------------------------------------
    convs = resnet50_convs()
    if args.quick:
        convs = convs[:11]  # conv1 and the conv2_x stage
    choose_tiling.cache_clear()
    t0 = time.perf_counter()
    tilings = [choose_tiling(c.geometry(), STRATEGY, hw) for c in convs]
    t_choose = time.perf_counter() - t0
    unique = len({c.geometry() for c in convs})
    plans = [make_plan(c.geometry(), STRATEGY, t, hw) for c, t in zip(convs, tilings)]
    preds = [predict(p) for p in plans]  # warm-up
    t_pred = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        preds = [predict(make_plan(c.geometry(), STRATEGY, t, hw)) for c, t in zip(convs, tilings)]
        t_pred = min(t_pred, time.perf_counter() - t0)
    cycles = [q.cycles for q in preds]
    total = sum(cycles)
    flops = sum(c.geometry().flops for c in convs)
    ms = total / (hw.clock_ghz * 1e6)
    pct = 100.0 * flops / (total * hw.peak_flops_per_cycle("fp16") * hw.num_cores)
    print(
        f"\n(c) closed-form cost model, {len(convs)} conv layers of ResNet-50 (batch 1, 224x224), "
        f"{STRATEGY}, chooser's tiling each"
    )
    print(f"  tiling choice   {t_choose:8.3f} s  ({unique} distinct layers; the chooser caches by layer)")
    print(
        f"  prediction loop {t_pred * 1e3:8.3f} ms (make_plan + predict for {len(convs)} layers, best "
        f"of 3 after a warm-up: {t_pred / len(convs) * 1e3:.3f} ms per layer)"
    )
    print(
        f"  total estimate  {total:,} cycles = {ms:.3f} ms at {hw.clock_ghz} GHz "
        f"({flops:,} FLOP, {pct:.1f}% of peak; the NC1HWC0 relayout kernels not included)"
    )
    heavy = sorted(zip(cycles, convs), key=lambda z: -z[0])[:5]
    print("  heaviest layers: " + ", ".join(f"{c.name} {cy:,}" for cy, c in heavy))
    for cy, c in zip(cycles, convs):
        if c.geometry() == RESNET50_REFERENCE[1].geometry() and RESNET50_REFERENCE[1].name in emulated_cycles:
            print(
                f"  model vs emulator on conv2_x: {cy:,} vs {emulated_cycles[RESNET50_REFERENCE[1].name]:,} "
                f"cycles"
            )
            break
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The differentiable tile search on every ResNet-50 conv layer, against its baselines.

Prints, per layer: the search's pick (exact model cycles), the exhaustive optimum of the same space,
random search with the search's number of evaluations, and the Conv2D chooser; then the wall
time of the whole network's search after compile, and (unless --no-verify) the emulator's
cycles for each layer's finalists.

    python benchmarks/bench_search.py                 # all 53 layers: about 10 minutes on 2 CPUs
    python benchmarks/bench_search.py --quick         # the five reference layers
    python benchmarks/bench_search.py --no-exhaustive --no-verify   # just the search's wall time
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import npu_jax
from npu_jax.search import baselines, optimise
from npu_jax.search.optimise import tile_search
from npu_jax.workloads import RESNET50_REFERENCE, resnet50_convs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the five reference layers only")
    ap.add_argument("--preset", default="ascend910b")
    ap.add_argument("--starts", type=int, default=16)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-exhaustive", action="store_true")
    ap.add_argument("--no-chooser", action="store_true")
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--finalists", type=int, default=2)
    args = ap.parse_args(argv)
    hw = npu_jax.presets.get(args.preset)
    layers = RESNET50_REFERENCE if args.quick else resnet50_convs()
    geos = [lay.geometry() for lay in layers]
    kw = dict(starts=args.starts, steps=args.steps, seed=args.seed)

    # compile: one layer through every jitted piece (the layer is data, so this serves all)
    t0 = time.perf_counter()
    optimise.search_model(geos[0], hw, **kw)
    optimise.search_model(geos[-1], hw, **kw)
    compile_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    found = [optimise.search_model(g, hw, **kw) for g in geos]
    search_s = time.perf_counter() - t0
    print(f"search of all {len(geos)} layers on {hw.name}: {search_s:.2f} s wall after compile "
          f"({compile_s:.1f} s of warm-up compiles); starts={args.starts} steps={args.steps}", flush=True)

    distinct = list(dict.fromkeys(geos))
    ex, rnd, ch = {}, {}, {}
    if not args.no_exhaustive:
        t0 = time.perf_counter()
        for g in distinct:
            ex[g] = baselines.exhaustive(g, hw)
        ex_s = time.perf_counter() - t0
        print(f"exhaustive over {len(distinct)} distinct layers: {ex_s:.1f} s, "
              f"{sum(e.evals for e in ex.values()):,} evaluations", flush=True)
    if not args.no_chooser:
        t0 = time.perf_counter()
        for g in distinct:
            ch[g] = baselines.chooser(g, hw)
        print(f"chooser over {len(distinct)} distinct layers: {time.perf_counter() - t0:.1f} s", flush=True)

    print()
    hdr = (f"{'layer':22s} {'search':>8s} {'evals':>6s} {'exhaust.':>8s} {'space':>7s} {'ratio':>6s} "
           f"{'%evals':>6s} {'random':>8s} {'chooser':>8s}")
    print(hdr)
    print("-" * len(hdr))
    ratios, fracs, vs_rnd, vs_ch = [], [], [], []
    tot = dict(search=0, ex=0, rnd=0, ch=0)
    for lay, g, (_rows, cyc, _hist, nr, ne) in zip(layers, geos, found, strict=True):
        c = int(cyc[0])
        evals = nr + ne
        if g not in rnd and ex:
            rnd[g] = baselines.random_search(g, hw, evals=evals, seed=args.seed)
        e = ex.get(g)
        r = rnd.get(g)
        k = ch.get(g)
        tot["search"] += c
        line = f"{lay.name:22s} {c:8,d} {evals:6d}"
        if e is not None:
            ratios.append(c / e.cycles)
            fracs.append(evals / e.evals)
            vs_rnd.append(r.cycles / c)
            tot["ex"] += e.cycles
            tot["rnd"] += r.cycles
            line += f" {e.cycles:8,d} {e.evals:7d} {c / e.cycles:6.3f} {100 * evals / e.evals:5.2f}% {r.cycles:8,d}"
        if k is not None:
            vs_ch.append(k.cycles / c)
            tot["ch"] += k.cycles
            line += f" {k.cycles:8,d}"
        print(line)
    print()
    print(f"total cycles: search {tot['search']:,}" + (f", exhaustive {tot['ex']:,}, random {tot['rnd']:,}"
                                                       if ex else "") + (f", chooser {tot['ch']:,}" if ch else ""))
    if ratios:
        r = np.asarray(ratios)
        print(f"search / exhaustive: max {r.max():.3f}, mean {r.mean():.4f}, within 1.02x on {np.sum(r <= 1.02)}"
              f"/{len(r)} layers, optimal on {np.sum(r <= 1.0)}; evaluations {100 * max(fracs):.2f}% of "
              f"exhaustive's at most ({100 * np.median(fracs):.2f}% median)")
        v = np.asarray(vs_rnd)
        print(f"random (same evaluations) / search: min {v.min():.3f}, mean {v.mean():.3f}; search better on "
              f"{np.sum(v > 1)}/{len(v)}, tied on {np.sum(v == 1)}")
    if vs_ch:
        v = np.asarray(vs_ch)
        print(f"chooser / search: min {v.min():.3f}, mean {v.mean():.3f}, search better on {np.sum(v > 1)}/{len(v)}")

    if not args.no_verify:
        t0 = time.perf_counter()
        seen = {}
        for lay in layers:
            g = lay.geometry()
            if g not in seen:
                seen[g] = tile_search(lay.x_shape, lay.w_shape, lay.stride, lay.padding, 1, hw=hw,
                                      finalists=args.finalists, **kw)
        fins = [f for r in seen.values() for f in r.finalists]
        same = sum(f[1] == f[2] for f in fins)
        worst = max(abs(f[1] - f[2]) / f[2] for f in fins)
        print(f"emulator: {len(fins)} finalists of {len(seen)} distinct layers run timing-only in "
              f"{time.perf_counter() - t0:.1f} s (compiles included); model == emulator on {same}/{len(fins)} "
              f"(worst difference {100 * worst:.3f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

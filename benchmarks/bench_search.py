"""The tile search on every ResNet-50 conv layer, against its baselines, and the L1 co-design question.

Prints, per layer: the space's size, the exhaustive optimum of the space, the search's pick (exact
model cycles), their ratio, the evaluations the search spent (% of the space), random search with as
many evaluations, and the Conv2D chooser; then whole-network figures, the wall time of the whole
network's search after compile, the emulator's verdict on each layer's finalists, and (``--l1``)
the network's total cycles for each L1 size.

    python benchmarks/bench_search.py                         # 910B, 53 layers: ~10 min on 2 CPUs
    python benchmarks/bench_search.py --fused                 # Conv + bias + ReLU (fusion.conv_relu)
    python benchmarks/bench_search.py --preset ascend910 --fused --no-l1
    python benchmarks/bench_search.py --layers conv1,conv5_2b --no-verify --no-l1   # a subset
    python benchmarks/bench_search.py --seeds 0-9             # robustness: distinct layers x seeds
"""

from __future__ import annotations

import argparse
import collections
import time

import numpy as np

import npu_jax
from npu_jax.search import baselines, codesign, optimise, space
from npu_jax.search.optimise import tile_search
from npu_jax.workload.resnet50 import resnet50_convs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="ascend910b")
    ap.add_argument("--fused", action="store_true", help="search the Conv + bias + ReLU kernel")
    ap.add_argument(
        "--layers", default=None, help="comma-separated layer names (prefixes) to run, e.g. conv1,conv4_2"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-exhaustive", action="store_true")
    ap.add_argument("--no-chooser", action="store_true")
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--finalists", type=int, default=2)
    ap.add_argument("--l1", default="128,256,384,512,768,1024", help="L1 sizes (KiB) for the co-design sweep")
    ap.add_argument("--no-l1", action="store_true")
    ap.add_argument("--plot", default=None, help="save the L1 plot here (PNG)")
    ap.add_argument(
        "--seeds",
        default=None,
        type=_seed_range,
        help="A-B: only the robustness table: every distinct layer "
        "searched with each seed, against its exhaustive optimum",
    )
    args = ap.parse_args(argv)
    hw = npu_jax.presets.get(args.preset)
    fused = args.fused
    layers = list(resnet50_convs())
    if args.layers:
        want = args.layers.split(",")
        layers = [lay for lay in layers if any(lay.name.startswith(w) for w in want)]
    geos = [lay.geometry() for lay in layers]
    kw = dict(seed=args.seed, fused=fused)
    if args.seeds:
        return _seeds(geos, layers, hw, fused, args.seeds)
    print(
        f"{hw.name}, {'Conv + bias + ReLU (fused)' if fused else 'Conv2D'}, {len(geos)} layers; "
        f"budget {100 * optimise.BUDGET:g}% of each space",
        flush=True,
    )

    # first pass: compiles every jitted piece (the layer is data, shapes are bucketed)
    t0 = time.perf_counter()
    for g in geos:
        optimise.search_model(g, hw, **kw)
    compile_s = time.perf_counter() - t0
    space.build.cache_clear()  # the timed pass enumerates every space again
    t0 = time.perf_counter()
    found = [optimise.search_model(g, hw, **kw) for g in geos]
    search_s = time.perf_counter() - t0
    print(
        f"search of all {len(geos)} layers: {search_s:.2f} s wall after compile (spaces enumerated "
        f"included; the first pass, compiles included, took {compile_s:.1f} s)",
        flush=True,
    )

    distinct = list(dict.fromkeys(geos))
    ex, ch = {}, {}
    if not args.no_exhaustive:
        t0 = time.perf_counter()
        for g in distinct:
            ex[g] = baselines.exhaustive(g, hw, fused)
        print(
            f"exhaustive over {len(distinct)} distinct layers: {time.perf_counter() - t0:.1f} s, "
            f"{sum(e.evals for e in ex.values()):,} evaluations",
            flush=True,
        )
    if not args.no_chooser:
        t0 = time.perf_counter()
        for g in distinct:
            ch[g] = baselines.chooser(g, hw, fused)
        print(f"chooser over {len(distinct)} distinct layers: {time.perf_counter() - t0:.1f} s", flush=True)

    print()
    print("| layer | space | exhaustive | search | ratio | evaluations (% of space) | random | chooser |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    ratios, fracs, vs_rnd, vs_ch = [], [], [], []
    tot = collections.Counter()
    for lay, g, m in zip(layers, geos, found, strict=True):
        c = int(m.cycles[0])
        tot["search"] += c
        e, k = ex.get(g), ch.get(g)
        fracs.append(m.evals / m.space_size)
        cells = [
            lay.name,
            f"{m.space_size:,}",
            "-",
            f"{c:,}",
            "-",
            f"{m.evals} ({100 * fracs[-1]:.2f}%)",
            "-",
            "-",
        ]
        if e is not None:
            r = baselines.random_search(g, hw, evals=m.evals, seed=args.seed, fused=fused)
            ratios.append(c / e.cycles)
            vs_rnd.append(r.cycles / c)
            tot["ex"] += e.cycles
            tot["rnd"] += r.cycles
            cells[2], cells[4], cells[6] = f"{e.cycles:,}", f"{c / e.cycles:.3f}", f"{r.cycles:,}"
        if k is not None:
            vs_ch.append(k.cycles / c)
            tot["ch"] += k.cycles
            cells[7] = f"{k.cycles:,}"
        print("| " + " | ".join(cells) + " |")
    print()
    print(
        f"whole network: search {tot['search']:,} cycles"
        + (f", exhaustive {tot['ex']:,}, random {tot['rnd']:,}" if ex else "")
        + (f", chooser {tot['ch']:,}" if ch else "")
    )
    f = np.asarray(fracs)
    print(f"evaluations: {100 * f.max():.2f}% of the space at most, {100 * np.median(f):.2f}% median")
    if ratios:
        r = np.asarray(ratios)
        print(
            f"search / exhaustive: within 1.02x on {np.sum(r <= 1.02)}/{len(r)} layers (optimal on "
            f"{np.sum(r <= 1.0)}), worst {r.max():.3f}, mean {r.mean():.4f}"
        )
        v = np.asarray(vs_rnd)
        print(
            f"random (same evaluations) / search: search better on {np.sum(v > 1)}/{len(v)}, tied on "
            f"{np.sum(v == 1)}, worse on {np.sum(v < 1)}; min {v.min():.3f}, mean {v.mean():.3f}"
        )
    if vs_ch:
        v = np.asarray(vs_ch)
        print(
            f"chooser / search: search better on {np.sum(v > 1)}/{len(v)}, tied on {np.sum(v == 1)}; "
            f"min {v.min():.3f}, mean {v.mean():.3f}"
        )

    if not args.no_verify:
        t0 = time.perf_counter()
        seen = {}
        for lay in layers:
            g = lay.geometry()
            if g not in seen:
                seen[g] = tile_search(
                    lay.x_shape,
                    lay.w_shape,
                    lay.stride,
                    lay.padding,
                    1,
                    hw=hw,
                    finalists=args.finalists,
                    **kw,
                )
        fins = [fi for r in seen.values() for fi in r.finalists]
        same = sum(fi[1] == fi[2] for fi in fins)
        print(
            f"emulator: {len(fins)} finalists of {len(seen)} distinct layers run timing-only in "
            f"{time.perf_counter() - t0:.1f} s (compiles included); model == emulator on {same}/{len(fins)}"
        )

    if not args.no_l1:
        sizes = [int(s) for s in args.l1.split(",")]
        counts = collections.Counter(geos)
        dl = list(counts)
        t0 = time.perf_counter()
        szs, totals, _ = codesign.l1_sweep(dl, hw, sizes, counts=[counts[g] for g in dl], seed=args.seed)
        print(
            f"L1 co-design ({len(dl)} distinct layers x {len(sizes)} sizes searched, {time.perf_counter() - t0:.1f} s):"
        )
        for s_, t_ in zip(szs, totals):
            print(f"  L1 {s_:5d} KiB: {int(t_):,} cycles")
        print(
            f"smallest L1 at the minimum: {codesign.smallest_sufficient(szs, totals)} KiB; within 1% of it: "
            f"{codesign.smallest_sufficient(szs, totals, 0.01)} KiB"
        )
        if args.plot:
            codesign.plot_l1(szs, totals, path=args.plot)
            print(f"plot: {args.plot}")
    return 0


def _seed_range(text: str) -> tuple[int, int]:
    try:
        lo, hi = (int(v) for v in text.split("-"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be A-B with integers A <= B, e.g. 0-9; got {text!r}"
        ) from None
    if not 0 <= lo <= hi:
        raise argparse.ArgumentTypeError(f"must be A-B with integers 0 <= A <= B, e.g. 0-9; got {text!r}")
    return lo, hi


def _seeds(geos, layers, hw, fused: bool, seeds: tuple[int, int]) -> int:
    """Each distinct layer searched with every seed in ``seeds`` (first, last), against its exhaustive optimum."""
    lo, hi = seeds
    names = {}
    for lay, g in zip(layers, geos):
        names.setdefault(g, lay.name)
    t0 = time.perf_counter()
    best = {g: baselines.exhaustive(g, hw, fused).cycles for g in names}
    print(f"exhaustive over {len(names)} distinct layers: {time.perf_counter() - t0:.1f} s", flush=True)
    ratios, misses = [], []
    for seed in range(lo, hi + 1):
        for g, name in names.items():
            m = optimise.search_model(g, hw, fused=fused, seed=seed)
            ratios.append(int(m.cycles[0]) / best[g])
            if ratios[-1] > 1.02:
                misses.append(f"{name} seed {seed}: {ratios[-1]:.3f}x")
    r = np.asarray(ratios)
    print(
        f"seeds {lo}-{hi}: within 1.02x on {np.sum(r <= 1.02)}/{len(r)} layer-seeds, mean {r.mean():.4f}, "
        f"worst {r.max():.3f}"
    )
    for line in misses:
        print("  miss:", line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The same sweep on 1 and on N local worker processes: wall time and the speed-up, side by side.

Each run starts its own pool (workers spawn and import JAX: counted), writes nothing to disk, and the
rows of the two runs are checked equal.

    python benchmarks/sweep_scaling.py --workers 2
    python benchmarks/sweep_scaling.py --workers 2 --networks small_cnn resnet18 --batches 1 8
"""

from __future__ import annotations

import argparse
import time

import npu_jax


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--presets", nargs="+", default=["tiny", "910b", "310p"])
    ap.add_argument("--networks", nargs="+", default=["small_cnn"])
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 2, 4, 8])
    args = ap.parse_args()
    grid = {"hw": args.presets, "network": args.networks, "batch": args.batches, "policy": ["fp16", "int8"]}
    n = len(npu_jax.sweeps.points(grid))
    times, frames = {}, {}
    for w in (1, args.workers):
        t0 = time.perf_counter()
        frames[w] = npu_jax.sweep(grid, workers=w, progress=False)
        times[w] = time.perf_counter() - t0
        print(f"{w} worker(s): {n} points in {times[w]:.1f} s ({times[w] / n:.2f} s a point)", flush=True)
    a, b = (frames[w].drop(columns="seconds") for w in (1, args.workers))
    assert a.equals(b), "the rows differ between the runs"
    bad = int((a["error"] != "").sum())
    print(
        f"speed-up with {args.workers} workers: {times[1] / times[args.workers]:.2f}x (rows identical; {bad} failed)"
    )


if __name__ == "__main__":
    main()

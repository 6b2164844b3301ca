"""How long the default tiling chooser takes to pick one layer's tiling, the first time.

For each ResNet-50 reference layer at each batch and strategy (910B, fp16): the legal grid
(``candidate_tilings``) and its ranking (``predict_many``), each timed in CPU seconds
(``time.process_time``), nothing kept between them (the in-memory and on-disk caches are not used).
The pick is printed with its cycles, so two versions of the chooser can be compared row by row: run
it on each (``PYTHONPATH=<checkout> python benchmarks/chooser.py``) and diff the outputs.

    python benchmarks/chooser.py [--batch 1 8] [--strategies img2col output_tiled] [--layers 4]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from npu_jax import presets
from npu_jax.cost.conv import predict_many
from npu_jax.mapping.conv import STRATEGIES
from npu_jax.search.choose import candidate_tilings
from npu_jax.workload.resnet50 import RESNET50_REFERENCE


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    ap.add_argument(
        "--layers", type=int, default=len(RESNET50_REFERENCE), help="the first N reference layers"
    )
    args = ap.parse_args(argv)
    hw = presets.ascend910b()
    print(
        f"{'layer':<24} {'batch':>5} {'strategy':<13} {'tilings':>7} {'grid s':>7} {'rank s':>7}  pick (cycles)"
    )
    total = 0.0
    for layer in RESNET50_REFERENCE[: args.layers]:
        for n in args.batch:
            g = dataclasses.replace(layer, n=n).geometry()
            for s in args.strategies:
                t0 = time.process_time()
                cands = candidate_tilings(g, s, hw)
                t1 = time.process_time()
                cyc, gm = predict_many(g, s, cands, hw)
                t2 = time.process_time()
                best = min(range(len(cands)), key=lambda i: (cyc[i], gm[i]))
                total += t2 - t0
                t = cands[best]
                pick = f"ho={t.ho} wo={t.wo} n={t.n} cin1={t.cin1} k_l0={t.k_l0} split={t.cout_split}"
                print(
                    f"{layer.name[:24]:<24} {n:>5} {s:<13} {len(cands):>7} {t1 - t0:>7.2f} {t2 - t1:>7.2f}"
                    f"  {pick} res={int(t.weights_resident)} stages={t.l1_stages} ({cyc[best]:,})",
                    flush=True,
                )
    print(f"total {total:.1f} CPU-s")


if __name__ == "__main__":
    main()

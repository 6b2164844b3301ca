"""Fingerprint of the tile search: the chosen tiling, model cycles and evaluation counts of 138 searches.

The 23 distinct ResNet-50 conv layers x seeds 0-2, on the 910B (plain) and the 910 (fused Conv + bias +
ReLU), ``verify=False``. A change that must leave the search's results alone (a refactor of the cost
model) is checked against the recorded file:

    python benchmarks/search_fingerprint.py --write benchmarks/search_fingerprint_base.txt
    python benchmarks/search_fingerprint.py --check benchmarks/search_fingerprint_base.txt

About 5 minutes on one core (2026-12-01). Exit status 1 when a line differs.
"""

from __future__ import annotations

import argparse
import sys

import npu_jax
from npu_jax.search import tile_search
from npu_jax.workload.resnet50 import resnet50_convs


def lines():
    distinct, seen = [], set()
    for layer in resnet50_convs():
        g = layer.geometry()
        if g not in seen:
            seen.add(g)
            distinct.append(layer)
    yield f"{len(distinct)} distinct layers"
    n = 0
    for preset, fused in (("ascend910b", False), ("ascend910", True)):
        hw = npu_jax.presets.get(preset)
        for seed in (0, 1, 2):
            for la in distinct:
                r = tile_search(
                    la.x_shape,
                    la.w_shape,
                    la.stride,
                    la.padding,
                    1,
                    hw=hw,
                    fused=fused,
                    seed=seed,
                    verify=False,
                )
                t = r.tiling
                fields = (t.ho, t.wo, t.n, t.cin1, t.k_l0, int(t.weights_resident), t.l1_stages, t.cout_split)
                yield (
                    f"{preset} {int(fused)} {seed} {la.name} {fields} {r.model_cycles} {r.relaxed_evals} "
                    f"{r.exact_evals} {r.budget} {r.space_size}"
                )
                n += 1
    yield f"searches {n}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", metavar="FILE", help="record the fingerprint")
    group.add_argument("--check", metavar="FILE", help="compare with a recorded fingerprint")
    args = ap.parse_args(argv)
    got = []
    for line in lines():
        print(line, flush=True)
        got.append(line)
    if args.write:
        with open(args.write, "w") as f:
            f.write("\n".join(got) + "\n")
        return 0
    with open(args.check) as f:
        want = f.read().splitlines()
    bad = [(i, a, b) for i, (a, b) in enumerate(zip(want, got)) if a != b]
    if len(want) != len(got):
        bad.append((min(len(want), len(got)), f"{len(want)} lines", f"{len(got)} lines"))
    for i, a, b in bad:
        print(f"line {i + 1}: recorded {a!r} now {b!r}")
    print(
        f"{len(got)} lines checked against {args.check}: "
        + ("identical" if not bad else f"{len(bad)} differ")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

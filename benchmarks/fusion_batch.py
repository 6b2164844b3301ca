"""The Conv + bias + ReLU fusion table at a batch: unfused (conv kernel, then a vector kernel on the
vector cores) vs fused (the epilogue in the conv's Fixpipe / UB), timing-only, chooser's tilings,
launch cost and the shared L2 included.

    python benchmarks/fusion_batch.py --preset 910b 910 --batch 1 8
"""

from __future__ import annotations

import argparse
import dataclasses

import npu_jax
from fusion.analysis import format_table
from fusion.study import reference_rows
from npu_jax.workload.resnet50 import RESNET50_REFERENCE


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", nargs="+", default=["910b", "910"])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    args = ap.parse_args()
    for b in args.batch:
        layers = tuple(dataclasses.replace(lay, n=b) for lay in RESNET50_REFERENCE[1:])
        rows = reference_rows([npu_jax.presets.get(p) for p in args.preset], layers=layers)
        print(f"== batch {b}")
        print(format_table(rows), flush=True)


if __name__ == "__main__":
    main()

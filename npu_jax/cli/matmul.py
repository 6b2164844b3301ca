"""``npu-jax matmul --m M --n N --k K``: one GEMM on random fp16 data, checked against float64."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

import numpy as np

from npu_jax.api.gemm import matmul
from npu_jax.cli.data import random_operands
from npu_jax.cli.types import add_preset_argument, output_path, positive_int
from npu_jax.mapping.gemm import default_tiling
from npu_jax.report.reading import trace_note

NAME = "matmul"
HELP = "run one GEMM (M, K) @ (K, N) on random fp16 data"


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``matmul`` to the ``npu-jax`` subparsers."""
    m = subparsers.add_parser(NAME, help=HELP)
    for dim in ("m", "n", "k"):
        m.add_argument(f"--{dim}", type=positive_int, required=True, metavar=dim.upper())
    add_preset_argument(m, "ascend910b")
    m.add_argument("--trace", type=output_path, metavar="PATH", help="write a Chrome trace (JSON)")
    m.add_argument("--cores", type=positive_int, metavar="N", help="cores to spread blocks over")
    m.add_argument("--json", action="store_true", help="print report.as_dict() (plus max_abs_err) as JSON")
    return m


def run(args) -> int:
    """Run the GEMM with the default tiling (on ``--cores`` cores if given) and print its report."""
    hw = args.preset
    if args.cores is not None and args.cores > hw.num_cores:
        args.parser.error(
            f"argument --cores: must be at most {hw.num_cores} (the cores of preset "
            f"{hw.name}), got {args.cores}"
        )
    a, b = random_operands(args.m, args.n, args.k)
    tiling = default_tiling(args.m, args.n, args.k, hw)
    if args.cores is not None:
        tiling = dataclasses.replace(tiling, cores=args.cores)
    c, report = matmul(a, b, hw=hw, tiling=tiling, trace=args.trace is not None)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = float(np.max(np.abs(np.asarray(c, np.float64) - ref)))
    if args.trace is not None:
        report.to_chrome_trace(args.trace)
    if args.json:
        print(json.dumps({**report.as_dict(), "max_abs_err": err}, indent=2))
    else:
        print(report.summary())
        print(f"  tiling        {tiling}")
        print(
            f"  max abs error vs float64 of the fp16 inputs: {err:.4g} "
            f"(largest |C| {float(np.max(np.abs(ref))):.4g}; output is fp16)"
        )
        if args.trace is not None:
            print(f"  Chrome trace written to {args.trace}")
    if args.trace is not None and trace_note(report):
        print(trace_note(report), file=sys.stderr)
    return 0


__all__ = ["HELP", "NAME", "register", "run"]

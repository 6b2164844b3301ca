"""``npu-jax matmul --m M --n N --k K``: one GEMM on random fp16 data, checked against float64."""

from __future__ import annotations

import argparse
import dataclasses
import sys

import numpy as np

from npu_jax.api.gemm import matmul
from npu_jax.cli.data import random_operands
from npu_jax.cli.output import add_output_argument, add_results_arguments, print_written, write_results
from npu_jax.cli.types import add_preset_argument, positive_int
from npu_jax.mapping.gemm import default_tiling
from npu_jax.report.reading import trace_note


def register(parser: argparse.ArgumentParser) -> None:
    """The flags of ``npu-jax matmul``."""
    parser.description = (
        "Run one GEMM C = A @ B with A (M, K) and B (K, N) standard normal in fp16, fp32 accumulation, "
        "with the default tiling; print its report and its error against float64."
    )
    for dim, what in (("m", "rows of A and C"), ("n", "columns of B and C"), ("k", "the reduced dimension")):
        parser.add_argument(f"--{dim}", type=positive_int, required=True, metavar=dim.upper(), help=what)
    add_preset_argument(parser, "ascend910b")
    parser.add_argument("--cores", type=positive_int, metavar="N", help="cores to spread blocks over")
    add_output_argument(parser, "--trace", "write a Chrome trace (JSON) to PATH")
    add_results_arguments(parser, "report.as_dict() plus max_abs_err")


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
    args.progress.compiling("matmul", f"{args.m}x{args.k} @ {args.k}x{args.n}", hw.name)
    c, report = matmul(a, b, hw=hw, tiling=tiling, trace=args.trace is not None)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = float(np.max(np.abs(np.asarray(c, np.float64) - ref)))
    if args.trace is not None:
        report.to_chrome_trace(args.trace)
    if not write_results(args, {**report.as_dict(), "max_abs_err": err}):
        print(report.summary())
        print(f"  tiling        {tiling}")
        print(
            f"  max abs error vs float64 of the fp16 inputs: {err:.4g} "
            f"(largest |C| {float(np.max(np.abs(ref))):.4g}; output is fp16)"
        )
        if args.trace is not None:
            print(f"  Chrome trace written to {args.trace}")
        print_written(args)
    if args.trace is not None and trace_note(report):
        print(trace_note(report), file=sys.stderr)
    return 0


__all__ = ["register", "run"]

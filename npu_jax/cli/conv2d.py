"""``npu-jax conv2d``: one Conv2D layer (default ResNet-50's conv2_x) with one strategy, or all four.

One strategy runs on random fp16 data and is checked against ``lax.conv_general_dilated``;
``--strategy all`` prints the strategies table of the layer and its reading.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

import numpy as np

from npu_jax.api.conv import conv2d
from npu_jax.cli.base import UsageError
from npu_jax.cli.data import conv_reference
from npu_jax.cli.types import add_preset_argument, int_or_pair, output_path, padding, positive_int
from npu_jax.errors import NpuError
from npu_jax.mapping.conv import STRATEGIES
from npu_jax.report.reading import strategies_reading, trace_note
from npu_jax.search.choose import choose_tiling
from npu_jax.studies import StrategyRow, conv_strategies, format_rows
from npu_jax.workload.conv import canonicalize
from npu_jax.workload.resnet50 import ConvLayer

NAME = "conv2d"
HELP = "run one Conv2D layer (NCHW x OIHW) on random fp16 data"


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``conv2d`` to the ``npu-jax`` subparsers."""
    c = subparsers.add_parser(
        NAME,
        help=HELP,
        description="Run one Conv2D layer on random fp16 data. Defaults: ResNet-50's "
        "conv2_x (1x64x56x56, 64 3x3 filters, pad 1), img2col, ascend910b.",
    )
    for dim, default, what in (
        ("n", 1, "batch"),
        ("c", 64, "input channels"),
        ("h", 56, "input height"),
        ("w", 56, "input width"),
        ("k", 64, "output channels (filters)"),
        ("kh", 3, "kernel height"),
        ("kw", 3, "kernel width"),
    ):
        c.add_argument(
            f"--{dim}",
            type=positive_int,
            default=default,
            metavar=dim.upper(),
            help=f"{what} (default {default})",
        )
    c.add_argument(
        "--stride", type=int_or_pair(1), default=1, metavar="S", help="stride: S or SH,SW (default 1)"
    )
    c.add_argument(
        "--padding",
        type=padding,
        default=1,
        metavar="P",
        help="padding: P, PH,PW, SAME or VALID (default 1)",
    )
    c.add_argument(
        "--dilation", type=int_or_pair(1), default=1, metavar="D", help="dilation: D or DH,DW (default 1)"
    )
    c.add_argument(
        "--strategy",
        choices=(*STRATEGIES, "all"),
        default="img2col",
        help="kernel strategy, or 'all' for a table of the four (default img2col)",
    )
    add_preset_argument(c, "ascend910b")
    c.add_argument("--trace", type=output_path, metavar="PATH", help="write a Chrome trace (JSON)")
    c.add_argument("--plot", type=output_path, metavar="PATH", help="write a timeline plot (PNG)")
    c.add_argument(
        "--timing-only",
        action="store_true",
        help="same cycles and bytes, no data work (faster; no numerical check)",
    )
    c.add_argument(
        "--json",
        action="store_true",
        help="print report.as_dict() (plus strategy, tiling, max_abs_err) as JSON",
    )
    return c


def run(args) -> int:
    """Run the layer; the library's errors (bad geometry, a tiling that does not fit) exit 2."""
    for flag in ("trace", "plot"):
        if args.strategy == "all" and getattr(args, flag) is not None:
            args.parser.error(f"argument --{flag}: needs one --strategy, not 'all'")
    x_shape, w_shape = (args.n, args.c, args.h, args.w), (args.k, args.c, args.kh, args.kw)
    try:
        g = canonicalize(x_shape, w_shape, args.stride, args.padding, args.dilation)
        if args.strategy == "all":
            return _run_all(args, x_shape, w_shape, g)
        return _run_one(args, x_shape, w_shape, g)
    except (ValueError, TypeError, NpuError) as e:  # the library's message names the parameter
        raise UsageError(f"npu-jax conv2d: error: {e}") from None


def _run_all(args, x_shape, w_shape, g) -> int:
    """``--strategy all``: the strategies table (and its reading) for one layer."""
    hw = args.preset
    name = f"{args.h}x{args.w}x{args.c} {args.kh}x{args.kw}->{args.k}"
    if g.dilation == (1, 1):
        layer = ConvLayer(name, *x_shape, args.k, args.kh, args.kw, args.stride, args.padding)
        rows = conv_strategies(hw, (layer,), STRATEGIES, timing_only=args.timing_only)
    else:  # ConvLayer (and so the study) has no dilation: the same runs, made here
        rng = np.random.default_rng(0)
        x = rng.standard_normal(x_shape).astype(np.float32)
        w = rng.standard_normal(w_shape).astype(np.float32)
        rows = []
        for s in STRATEGIES:
            t = choose_tiling(g, s, hw)
            _, rep = conv2d(
                x,
                w,
                args.stride,
                args.padding,
                args.dilation,
                strategy=s,
                hw=hw,
                tiling=t,
                timing_only=args.timing_only,
            )
            rel = rep.extras.get("relayout")
            rows.append(
                StrategyRow(
                    name,
                    s,
                    rep.cycles,
                    rep.pct_peak,
                    rep.gm_bytes,
                    rep.ratios["mac_ratio"],
                    rep.ratios["mte2_ratio"],
                    rep.bottleneck,
                    rel.cycles if rel is not None else 0,
                    t,
                )
            )
    if args.json:
        print(
            json.dumps(
                {
                    "layer": g.describe(),
                    "hw": hw.name,
                    "timing_only": args.timing_only,
                    "rows": [dataclasses.asdict(r) for r in rows],
                },
                indent=2,
            )
        )
        return 0
    print(
        f"conv2d {g.describe()} on {hw.name}, all strategies "
        f"({'timing-only' if args.timing_only else 'full'} runs, each with the chooser's tiling)"
    )
    print(format_rows(rows))
    for r in rows:
        print(f"  {r.strategy:<13} {r.tiling}")
    print()
    print(strategies_reading(rows))
    return 0


def _run_one(args, x_shape, w_shape, g) -> int:
    hw = args.preset
    rng = np.random.default_rng(0)
    # fp16 data, so the reference sees exactly the operands the Cube multiplies
    x = rng.standard_normal(x_shape).astype(np.float16)
    w = rng.standard_normal(w_shape).astype(np.float16)
    tiling = choose_tiling(g, args.strategy, hw)
    keep = args.trace is not None or args.plot is not None
    y, report = conv2d(
        x,
        w,
        args.stride,
        args.padding,
        args.dilation,
        strategy=args.strategy,
        hw=hw,
        tiling=tiling,
        trace=keep,
        timing_only=args.timing_only,
    )
    rel = report.extras.get("relayout")
    err = scale = None
    if not args.timing_only:
        ref = conv_reference(x, w, g)
        err = float(np.max(np.abs(np.asarray(y, np.float64) - ref)))
        scale = float(np.max(np.abs(ref)))
    if args.trace is not None:
        report.to_chrome_trace(args.trace)
    if args.plot is not None:
        report.plot_timeline(args.plot)
    if args.json:
        print(
            json.dumps(
                {
                    **report.as_dict(),
                    "strategy": args.strategy,
                    "tiling": dataclasses.asdict(tiling),
                    "timing_only": args.timing_only,
                    "relayout_cycles": rel.cycles if rel is not None else 0,
                    "max_abs_err": err,
                },
                indent=2,
            )
        )
    else:
        print(report.summary())
        print(f"  tiling        {tiling}")
        if rel is not None:
            print(
                f"  relayout      NCHW -> NC1HWC0 kernel: {rel.cycles:,} cycles on {rel.n_cores} "
                f"cores, {rel.gm_bytes:,} GM bytes (a kernel of its own, not in the cycles above)"
            )
        if err is None:
            print(
                "  timing-only run: the same cycles and bytes as a full run; no data moved, so no "
                "numerical check"
            )
        else:
            print(
                f"  max abs error vs lax.conv_general_dilated (fp32, HIGHEST) of the fp16 inputs: "
                f"{err:.4g} (largest |y| {scale:.4g}; output is fp16)"
            )
        if args.trace is not None:
            print(f"  Chrome trace written to {args.trace}")
        if args.plot is not None:
            print(f"  timeline of core 0 written to {args.plot}")
    if keep and trace_note(report):
        print(trace_note(report), file=sys.stderr)
    return 0


__all__ = ["HELP", "NAME", "register", "run"]

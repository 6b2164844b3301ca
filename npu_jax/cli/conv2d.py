"""``npu-jax conv2d``: one Conv2D layer (default ResNet-50's conv2_x), or a file of them, with one strategy or all.

One layer and one strategy runs on random fp16 data and is checked against ``lax.conv_general_dilated``;
``--strategy all`` or ``--layers FILE`` print the strategies table (one row per layer and strategy)
and, with all four strategies, its reading.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import numpy as np

from npu_jax.api.conv import conv2d
from npu_jax.cli.data import conv_reference
from npu_jax.cli.layers import LayerSpec, add_layer_arguments, layers_from_args
from npu_jax.cli.output import add_output_argument, add_results_arguments, print_written, write_results
from npu_jax.cli.types import add_preset_argument
from npu_jax.mapping.conv import STRATEGIES
from npu_jax.report.reading import strategies_reading, trace_note
from npu_jax.search.choose import choose_tiling
from npu_jax.studies import StrategyRow, conv_strategies, format_rows


def register(parser: argparse.ArgumentParser) -> None:
    """The flags of ``npu-jax conv2d``."""
    parser.description = (
        "Run one Conv2D layer on random fp16 data, or each layer of a CSV / YAML file. Defaults: ResNet-50's "
        "conv2_x (1x64x56x56, 64 3x3 filters, pad 1), img2col, ascend910b."
    )
    add_layer_arguments(parser)
    parser.add_argument(
        "--strategy",
        choices=(*STRATEGIES, "all"),
        default="img2col",
        help="kernel strategy, or 'all' for a table of the four (default img2col)",
    )
    add_preset_argument(parser, "ascend910b")
    parser.add_argument(
        "--timing-only",
        action="store_true",
        help="same cycles and bytes, no data work (faster; no numerical check)",
    )
    add_output_argument(parser, "--trace", "write a Chrome trace (JSON) of the one run to PATH")
    add_output_argument(parser, "--plot", "write a timeline plot (PNG) of the one run to PATH")
    add_results_arguments(
        parser, "the results (one run: report.as_dict() plus strategy, tiling, max_abs_err)"
    )


def run(args) -> int:
    """Run the layer(s); the library's errors (bad geometry, a tiling that does not fit) exit 2."""
    specs = layers_from_args(args)
    table = args.strategy == "all" or args.layers is not None
    for flag in ("trace", "plot"):
        if table and getattr(args, flag) is not None:
            args.parser.error(f"argument --{flag}: needs one layer and one --strategy")
    geometries = [s.geometry() for s in specs]  # bad geometry: one line, exit 2, before any work
    if table:
        return _run_table(args, specs, geometries)
    return _run_one(args, specs[0], geometries[0])


def _dilated_rows(spec: LayerSpec, strategies, hw, timing_only: bool, progress) -> list[StrategyRow]:
    """:func:`npu_jax.studies.conv_strategies` for a dilated layer (a ConvLayer has no dilation)."""
    lay, g = spec.layer, spec.geometry()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(lay.x_shape).astype(np.float32)
    w = rng.standard_normal(lay.w_shape).astype(np.float32)
    rows = []
    for s in strategies:
        t = choose_tiling(g, s, hw)
        _, rep = conv2d(
            x, w, lay.stride, lay.padding, spec.dilation, strategy=s, hw=hw, tiling=t, timing_only=timing_only
        )
        rel = rep.extras.get("relayout")
        rows.append(
            StrategyRow(
                lay.name,
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
        progress(rows[-1])
    return rows


def _run_table(args, specs, geometries) -> int:
    """``--strategy all`` or ``--layers``: one row per layer and strategy (and the reading with all four)."""
    hw = args.preset
    strategies = STRATEGIES if args.strategy == "all" else (args.strategy,)
    progress, bar = args.progress.callback(
        len(specs) * len(strategies),
        "conv2d runs (each new shape compiles)",
        lambda r: f"{r.layer} {r.strategy}",
    )
    rows = []
    for spec in specs:
        if spec.dilation in (1, (1, 1)):
            rows += conv_strategies(
                hw, (spec.layer,), strategies, timing_only=args.timing_only, progress=progress
            )
        else:
            rows += _dilated_rows(spec, strategies, hw, args.timing_only, progress)
    bar.close()
    data = {
        "layers": [g.describe() for g in geometries],
        "hw": hw.name,
        "timing_only": args.timing_only,
        "rows": [dataclasses.asdict(r) for r in rows],
    }
    if len(specs) == 1:
        data["layer"] = geometries[0].describe()
    if write_results(args, data, data["rows"]):
        return 0
    what = geometries[0].describe() if len(specs) == 1 else f"{len(specs)} layers of {args.layers.path}"
    print(
        f"conv2d {what} on {hw.name}, {'all strategies' if args.strategy == 'all' else args.strategy} "
        f"({'timing-only' if args.timing_only else 'full'} runs, each with the chooser's tiling)"
    )
    print(format_rows(rows))
    for r in rows:
        print(f"  {r.layer + '  ' if len(specs) > 1 else ''}{r.strategy:<13} {r.tiling}")
    if args.strategy == "all":
        print()
        print(strategies_reading(rows))
    print_written(args)
    return 0


def _run_one(args, spec: LayerSpec, g) -> int:
    hw, lay = args.preset, spec.layer
    rng = np.random.default_rng(0)
    # fp16 data, so the reference sees exactly the operands the Cube multiplies
    x = rng.standard_normal(lay.x_shape).astype(np.float16)
    w = rng.standard_normal(lay.w_shape).astype(np.float16)
    tiling = choose_tiling(g, args.strategy, hw)
    keep = args.trace is not None or args.plot is not None
    args.progress.compiling(f"conv2d[{args.strategy}]", lay.x_shape, hw.name)
    y, report = conv2d(
        x,
        w,
        lay.stride,
        lay.padding,
        spec.dilation,
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
    data = {
        **report.as_dict(),
        "strategy": args.strategy,
        "tiling": dataclasses.asdict(tiling),
        "timing_only": args.timing_only,
        "relayout_cycles": rel.cycles if rel is not None else 0,
        "max_abs_err": err,
    }
    if not write_results(args, data):
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
        print_written(args)
    if keep and trace_note(report):
        print(trace_note(report), file=sys.stderr)
    return 0


__all__ = ["register", "run"]

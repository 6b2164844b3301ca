"""``npu-jax fuse``: one Conv2D layer with an epilogue, unfused vs fused; the reference table; the demo section.

``npu-jax fuse`` (quick default: conv2_x's 64 channels on a 16x16 crop, 64 3x3 filters, pad 1,
``bias,relu``, ascend910b) runs the unfused baseline (Conv, then a vector kernel through GM) and
the fused kernel (the chain in the Conv's Fixpipe on 910B, in UB on 910), timing-only with the
chooser's tiling each, and prints what fusion saved and why. ``--fused`` / ``--unfused`` run one
version with data and check it against ``lax.conv_general_dilated``; ``--reference`` prints the
fusion table of the ResNet-50 reference layers; ``--trace`` / ``--plot`` write the fused run's
Chrome trace and a side-by-side timeline of the two versions.

A subcommand of ``npu-jax`` (the protocol of :mod:`npu_jax.cli.base`: ``register``, ``run``), listed by
name in :mod:`npu_jax.cli.registry` with its help and its demo section (``demo_section``);
``npu_jax`` never imports this package itself. The studies it runs are in :mod:`fusion.study`, the
prose that reads them in :mod:`fusion.reading`.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys

import jax
import numpy as np

import fusion
from fusion.args import epilogue_steps, preset_list, reference_layer
from fusion.reading import fusion_reading, reference_text, steps_text
from fusion.study import (
    plot_side_by_side,
    reference_layers,
    reference_output,
    reference_rows,
    traced_analysis,
)
from npu_jax.cli.data import demo_fusion_layers, demo_layers_text
from npu_jax.cli.layers import COLUMNS_HELP, layer_file
from npu_jax.cli.output import add_output_argument, add_results_arguments, print_written, write_results
from npu_jax.cli.progress import Progress
from npu_jax.cli.types import add_hw_ini_argument, int_or_pair, padding, positive_int
from npu_jax.core.policy import Policy
from npu_jax.hw import presets
from npu_jax.mapping.conv import STRATEGIES
from npu_jax.mapping.epilogue import split
from npu_jax.report.reading import trace_note
from npu_jax.workload.conv import canonicalize

# The quick default layer: ResNet-50 conv2_x's channels and filters on a 16x16 crop.
_DEFAULT_LAYER = dict(n=1, c=64, h=16, w=16, k=64, kh=3, kw=3, stride=1, padding=1)
_DIMS = (
    ("n", "batch"),
    ("c", "input channels"),
    ("h", "input height"),
    ("w", "input width"),
    ("k", "output channels (filters)"),
    ("kh", "kernel height"),
    ("kw", "kernel width"),
)


def register(p: argparse.ArgumentParser) -> None:
    """The flags of ``npu-jax fuse``."""
    p.description = (
        "Run one Conv2D layer followed by an element-wise epilogue, unfused (the Conv writes "
        "to GM, a vector kernel reads it back) and fused (the chain on the Conv's way out "
        "of L0C: Fixpipe on 910B, UB on 910). Default layer: ResNet-50 conv2_x's 64 channels "
        "on a 16x16 crop (1x64x16x16, 64 3x3 filters, pad 1), bias,relu, ascend910b."
    )
    p.add_argument(
        "--layer",
        type=reference_layer,
        metavar="NAME",
        help="start from a ResNet-50 reference layer (conv1, conv2_x, ..., conv5_x); the "
        "flags below override its fields",
    )
    for dim, what in _DIMS:
        p.add_argument(
            f"--{dim}",
            type=positive_int,
            metavar=dim.upper(),
            help=f"{what} (default {_DEFAULT_LAYER[dim]})",
        )
    p.add_argument("--stride", type=int_or_pair(1), metavar="S", help="stride: S or SH,SW (default 1)")
    p.add_argument(
        "--padding", type=padding, metavar="P", help="padding: P, PH,PW, SAME or VALID (default 1)"
    )
    p.add_argument(
        "--dilation", type=int_or_pair(1), default=1, metavar="D", help="dilation: D or DH,DW (default 1)"
    )
    p.add_argument(
        "--epilogue",
        type=epilogue_steps,
        default=epilogue_steps("bias,relu"),
        metavar="STEPS",
        help="comma list of steps in order: bias, relu, leaky_relu:SLOPE, clipped_relu:CEIL, "
        "residual, cast:FMT (last; fp16, bf16, fp32). Default bias,relu",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--both",
        dest="mode",
        action="store_const",
        const="both",
        help="compare unfused and fused (timing-only runs; the default)",
    )
    mode.add_argument(
        "--fused",
        dest="mode",
        action="store_const",
        const="fused",
        help="run the fused kernel alone, with data, checked against lax.conv",
    )
    mode.add_argument(
        "--unfused",
        dest="mode",
        action="store_const",
        const="unfused",
        help="run the unfused baseline alone (Conv, then a vector kernel), with data",
    )
    mode.add_argument(
        "--reference",
        dest="mode",
        action="store_const",
        const="reference",
        help="the fusion table of the ResNet-50 reference layers on the preset(s) (half-size layers on tiny)",
    )
    p.add_argument(
        "--layers",
        type=layer_file,
        metavar="FILE",
        help="the fusion table (as --reference) of the layers of a CSV or YAML file: " + COLUMNS_HELP,
    )
    p.add_argument(
        "--strategy", choices=STRATEGIES, default="img2col", help="Conv2D kernel (default img2col)"
    )
    p.add_argument(
        "--preset",
        type=preset_list,
        metavar="NAME[,NAME]",
        help="hardware preset(s), comma-separated: ascend910b, ascend910, ascend310p, tiny, "
        "tiny-coupled (default ascend910b; with --reference ascend910b,ascend910)",
    )
    add_hw_ini_argument(p)
    p.add_argument(
        "--timing-only",
        action="store_true",
        help="with --fused/--unfused: same cycles and bytes, no data work (no numerical check)",
    )
    add_output_argument(
        p, "--trace", "write a Chrome trace (JSON) of the fused run (of the one run with --unfused)"
    )
    add_output_argument(
        p,
        "--plot",
        "write a timeline PNG: unfused and fused side by side (the one run with --fused/--unfused)",
    )
    add_results_arguments(p, "the results (one record per run; CSV: one row per run)")
    p.set_defaults(mode="both")


# ---- the layer ---------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Layer:
    name: str
    x_shape: tuple
    w_shape: tuple
    stride: object
    padding: object
    dilation: object


def _resolve_layer(args) -> _Layer:
    base = dict(_DEFAULT_LAYER)
    name = "conv2_x crop 16x16x64"
    if args.layer is not None:
        lay = args.layer
        base = dict(
            n=lay.n,
            c=lay.c,
            h=lay.h,
            w=lay.w,
            k=lay.k,
            kh=lay.kh,
            kw=lay.kw,
            stride=lay.stride,
            padding=lay.padding,
        )
        name = lay.name
    given = {
        f: getattr(args, f)
        for f in (*(d for d, _ in _DIMS), "stride", "padding")
        if getattr(args, f) is not None
    }
    v = {**base, **given}
    if given or args.dilation != 1:
        name = f"{v['h']}x{v['w']}x{v['c']} {v['kh']}x{v['kw']}->{v['k']}"
    return _Layer(
        name,
        (v["n"], v["c"], v["h"], v["w"]),
        (v["k"], v["c"], v["kh"], v["kw"]),
        v["stride"],
        v["padding"],
        args.dilation,
    )


def _check_flags(args, hws) -> None:
    err = args.parser.error
    if args.layers is not None:
        if args.mode not in ("both", "reference"):
            err(
                f"argument --layers: not with --{args.mode} (it prints the fusion table of the file's layers)"
            )
        args.mode = "reference"
        for spec in args.layers.layers:
            if spec.dilation not in (1, (1, 1)):
                err(f"argument --layers: layer {spec.name!r} is dilated; the fusion table takes dilation 1")
    if args.mode == "reference":
        what = f"--{'layers' if args.layers is not None else 'reference'} (it runs its own layers)"
        for f in ("layer", *(d for d, _ in _DIMS), "stride", "padding", "trace", "plot"):
            if getattr(args, f) is not None:
                err(f"argument --{f}: not with {what}")
        if args.dilation != 1:
            err(f"argument --dilation: not with {what}")
    for f in ("trace", "plot"):
        if getattr(args, f) is not None and len(hws) > 1:
            err(f"argument --{f}: needs one --preset, got {len(hws)}")
    if args.timing_only and args.mode in ("both", "reference"):
        err(f"argument --timing-only: only with --fused or --unfused (--{args.mode} runs are timing-only)")


def run(args) -> int:
    """Run ``npu-jax fuse`` with parsed ``args``; returns the exit code."""
    hws = args.preset
    if hws is None:
        hws = (
            (presets.ascend910b(), presets.ascend910())
            if args.mode == "reference"
            else (presets.ascend910b(),)
        )
    hws = hws if isinstance(hws, tuple) else (hws,)  # --hw-ini over the default preset: one config
    _check_flags(args, hws)
    # the library's errors (they name the parameter) are one line and exit 2 in npu_jax.cli.main
    if args.mode == "reference":
        return _run_reference(args, hws)
    layer = _resolve_layer(args)
    if args.mode == "both":
        return _run_both(args, layer, hws)
    return _run_one(args, layer, hws)


# ---- --both: the analysis ------------------------------------------------------------------------------
def _operands(x_shape, w_shape, g, steps, seed: int = 0):
    """Random fp16 x, w (the reference then sees exactly what the Cube multiplies), bias, residual."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(np.float16)
    w = rng.standard_normal(w_shape).astype(np.float16)
    ops = {s.op for s in steps}
    bias = rng.standard_normal(g.k).astype(np.float32) if "bias" in ops else None
    res = rng.standard_normal((g.n, g.k, g.ho, g.wo)).astype(np.float16) if "residual" in ops else None
    return x, w, bias, res


def _analysis_dict(a) -> dict:
    return {
        **a.row(),
        "pipe_busy": {lane: list(v) for lane, v in a.pipe_delta.items()},
        "why": a.why,
        "fused_where": a.fused.part("conv").name,
        "unfused_tiling": dataclasses.asdict(a.unfused_tiling),
        "fused_tiling": dataclasses.asdict(a.fused_tiling),
        "unfused": a.unfused.as_dict(),
        "fused": a.fused.as_dict(),
    }


def _trace_note(rep) -> str | None:
    """The first of a fused or unfused run's kernels whose trace dropped events says so."""
    return next((trace_note(r) for r in rep.reports if trace_note(r)), None)


def _run_both(args, layer: _Layer, hws) -> int:
    g = canonicalize(layer.x_shape, layer.w_shape, layer.stride, layer.padding, layer.dilation)
    keep = args.trace is not None or args.plot is not None
    analyses = []
    analyze = traced_analysis if keep else fusion.analyze
    for hw in hws:
        args.progress.compiling(f"conv2d[{args.strategy}] unfused and fused", layer.x_shape, hw.name)
        a = analyze(
            layer.x_shape,
            layer.w_shape,
            args.epilogue,
            stride=layer.stride,
            padding=layer.padding,
            dilation=layer.dilation,
            hw=hw,
            strategy=args.strategy,
            name=layer.name,
        )
        analyses.append(a)
    a = analyses[0]
    if args.trace is not None:
        a.fused.to_chrome_trace(args.trace)
    if args.plot is not None:
        plot_side_by_side(
            a.unfused,
            a.fused,
            args.plot,
            title=f"{layer.name}: conv -> {a.steps} on {a.hw.name}, unfused vs fused",
        )
    data = {
        "layer": g.describe(),
        "name": layer.name,
        "epilogue": [str(s) for s in args.epilogue],
        "strategy": args.strategy,
        "mode": "both",
        "timing_only": True,
        "runs": [_analysis_dict(a) for a in analyses],
    }
    if not write_results(args, data, [a.row() for a in analyses]):
        print(
            f"npu-jax fuse: conv2d {g.describe()}, then {a.steps}; {args.strategy}: unfused vs fused "
            f"(timing-only runs, each with the chooser's tiling)"
        )
        for a in analyses:
            print()
            print(a.summary())
            print(
                f"  fused as     {a.fused.part('conv').name}"
                + (" + a vector kernel for the rest" if len(a.fused.parts) > 1 else "")
            )
            print(f"  tiling       unfused {a.unfused_tiling}")
            print(f"               fused   {a.fused_tiling}")
        if args.trace is not None:
            print(
                f"  Chrome trace of the fused run written to {args.trace} (open it in https://ui.perfetto.dev)"
            )
        if args.plot is not None:
            print(f"  timelines of core 0, unfused and fused side by side, written to {args.plot}")
        print_written(args)
    if keep:
        for rep in (a.unfused, a.fused):
            if _trace_note(rep):
                print(_trace_note(rep), file=sys.stderr)
    return 0


# ---- --fused / --unfused: one run, with data -------------------------------------------------------------
def _run_one(args, layer: _Layer, hws) -> int:
    fused = args.mode == "fused"
    g = canonicalize(layer.x_shape, layer.w_shape, layer.stride, layer.padding, layer.dilation)
    x, w, bias, res = _operands(layer.x_shape, layer.w_shape, g, args.epilogue)
    keep = args.trace is not None or args.plot is not None
    runs = []
    for hw in hws:
        args.progress.compiling(f"conv2d[{args.strategy}] {args.mode}", layer.x_shape, hw.name)
        go = functools.partial(
            fusion.conv2d_fused,
            epilogue=args.epilogue,
            stride=layer.stride,
            padding=layer.padding,
            dilation=layer.dilation,
            fused=fused,
            strategy=args.strategy,
            hw=hw,
            trace=keep,
            timing_only=args.timing_only,
        )
        if not split(args.epilogue, hw, Policy(), fused)[1]:
            # one kernel: one XLA program, about twice as quick as running it op by op; the
            # sanitizers' findings travel in the report and are raised below. (With a separate vector
            # kernel conv2d_fused checks that kernel's report itself, which needs concrete values.)
            go = jax.jit(go)
        y, rep = go(x, w, bias=bias, residual=res)
        rep.check()
        err = scale = None
        if not args.timing_only:
            ref = reference_output(x, w, g, args.epilogue, bias, res)
            err = float(np.max(np.abs(np.asarray(y, np.float64) - ref)))
            scale = float(np.max(np.abs(ref)))
        runs.append((hw, y, rep, err, scale))
    rep = runs[0][2]
    if args.trace is not None:
        rep.to_chrome_trace(args.trace)
    if args.plot is not None:
        rep.plot_timeline(args.plot)
    records = [
        {**r.as_dict(), "max_abs_err": e, "max_abs_ref": s, "y_dtype": str(y.dtype)} for _, y, r, e, s in runs
    ]
    data = {
        "layer": g.describe(),
        "name": layer.name,
        "epilogue": [str(s) for s in args.epilogue],
        "strategy": args.strategy,
        "mode": args.mode,
        "timing_only": args.timing_only,
        "runs": records,
    }
    if not write_results(args, data, records):
        for i, (_, y, r, err, scale) in enumerate(runs):
            if i:
                print()
            print(r.summary())
            if err is None:
                print(
                    "  timing-only run: the same cycles and bytes as a full run; no data moved, so no "
                    "numerical check"
                )
            else:
                print(
                    f"  max abs error vs {reference_text(args.epilogue)} (float64 of lax.conv_general_dilated, "
                    f"fp32 HIGHEST, on the fp16 inputs): {err:.4g} (largest |y| {scale:.4g}; "
                    f"output is {y.dtype})"
                )
        if args.trace is not None:
            print(f"  Chrome trace written to {args.trace}")
        if args.plot is not None:
            print(f"  timeline of core 0 written to {args.plot}")
        print_written(args)
    if keep and _trace_note(rep):
        print(_trace_note(rep), file=sys.stderr)
    return 0


# ---- --reference and the demo section ------------------------------------------------------------------
def _rows(
    progress: Progress, hws, epilogue=("bias", "relu"), strategy: str = "img2col", layers=None, model=False
) -> list:
    """:func:`fusion.study.reference_rows`, with a progress bar (each emulated analysis is seconds of
    compiling; ``model``: the closed-form models', milliseconds)."""
    total = sum(len(reference_layers(hw) if layers is None else layers) for hw in hws)
    callback, bar = progress.callback(total, "fusion analyses", lambda a: f"{a.layer.split()[0]} {a.hw.name}")
    rows = reference_rows(hws, epilogue, strategy, layers=layers, progress=callback, model=model)
    bar.close()
    return rows


def _run_reference(args, hws) -> int:
    layers = None if args.layers is None else [spec.layer for spec in args.layers.layers]
    rows = _rows(args.progress, hws, args.epilogue, args.strategy, layers)
    steps = steps_text(args.epilogue)
    records = [{**a.row(), "why": a.why} for a in rows]
    data = {
        "epilogue": [str(s) for s in args.epilogue],
        "strategy": args.strategy,
        "mode": "reference",
        "rows": records,
    }
    if write_results(args, data, records):
        return 0
    print(
        f"== Conv -> {steps} fusion on "
        f"{'the layers of ' + args.layers.path if layers else 'the ResNet-50 reference layers'} "
        f"({', '.join(h.name for h in hws)}; "
        f"{args.strategy}): timing-only runs, unfused and fused, each with the chooser's tiling =="
    )
    print(fusion.format_table(rows))
    print()
    print(fusion_reading(rows))
    print_written(args)
    return 0


def demo_section(opts) -> str:
    """The demo's fusion table: Conv -> bias -> ReLU, unfused vs fused, on the demo's preset, from the
    closed-form models (equal to the timing-only runs, tested; ``--emulate`` runs those)."""
    hw = opts.hw
    rows = _rows(opts.progress, (hw,), layers=demo_fusion_layers(hw), model=not opts.emulate)
    what = (
        demo_layers_text(hw)
        if hw.name.startswith("tiny")
        else "ResNet-50 conv2_x and conv5_x (every reference layer: npu-jax fuse --reference)"
    )
    where = "UB: L0C -> UB -> vector -> GM" if hw.coupled else "Fixpipe: L0C -> bias -> ReLU -> GM"
    return "\n".join(
        [
            f"== Conv + bias + ReLU fusion ({where}) on {what}: "
            f"{'timing-only runs' if opts.emulate else 'the closed-form models, equal to the timing-only runs'}"
            f", unfused and fused, each with the chooser's tiling ==",
            fusion.format_table(rows),
            "",
            fusion_reading(rows),
        ]
    )


__all__ = ["demo_section", "register", "run"]

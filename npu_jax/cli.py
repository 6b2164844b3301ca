"""The ``npu-jax`` command: ``demo``, ``info``, ``matmul``, ``conv2d``; ``precision`` and ``fuse`` come
from their own packages (``precision/cli.py``, ``fusion/cli.py``).

``npu-jax demo`` runs the default workloads (a 1024^3 fp16 GEMM, then the four Conv2D strategies on
the ResNet-50 reference layers, on the 910B preset) and says what their numbers mean; ``npu-jax
info`` lists the presets and the table of assumed figures; ``npu-jax matmul --m M --n N --k K``
runs one GEMM on random data; ``npu-jax conv2d`` runs one Conv2D layer (default ResNet-50's
conv2_x) with one strategy, or all four side by side. Bad input is one line on stderr naming the
parameter, and exit code 2.

The demo is a list of sections, each ``section(opts: DemoOptions) -> str``; a later capability
(Conv2D strategies, fusion, precision) adds itself by appending to :data:`DEMO_SECTIONS`.

Example:
    >>> from npu_jax.cli import main
    >>> main(["info", "--preset", "tiny"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Callable

import numpy as np

from npu_jax.core.timing import RATIO_NAMES
from npu_jax.hw import presets
from npu_jax.hw.config import Assumed, HardwareConfig

KiB = 1024

# What each pipe's name means, for the demo's reading of the bottleneck.
_PIPE_MEANING = {
    "MTE2": "DMA from global memory into L1/UB (GM bandwidth)",
    "MTE1": "L1 -> L0A/L0B operand loads",
    "M": "the Cube itself (matrix multiply)",
    "FIX": "Fixpipe, L0C -> GM with conversion",
    "V": "the Vector unit",
    "MTE3": "DMA from UB back to global memory",
    "S": "the Scalar unit",
}


class _UsageError(Exception):
    """Bad command-line input; the message is one line that names the parameter."""


class _Parser(argparse.ArgumentParser):
    """argparse, but an error is one line on stderr and exit code 2 (no usage block)."""

    def error(self, message: str):
        raise _UsageError(f"{self.prog}: error: {message}")


# ---- argument types: each error names what is wrong; argparse prefixes the parameter ----------
def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return v


def _preset(text: str) -> HardwareConfig:
    try:
        return presets.get(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).rstrip(".")) from None


def _int_or_pair(minimum: int):
    """``"2"`` -> 2 and ``"2,1"`` -> (2, 1), each value at least ``minimum``."""

    def parse(text: str):
        parts = text.split(",")
        try:
            vals = tuple(int(p) for p in parts)
        except ValueError:
            vals = ()
        if len(vals) not in (1, 2) or min(vals) < minimum:
            raise argparse.ArgumentTypeError(
                f"must be an integer >= {minimum} or a pair H,W of them, got {text!r}"
            )
        return vals[0] if len(vals) == 1 else vals

    return parse


def _padding(text: str):
    """An int, a pair ``H,W`` (>= 0), ``SAME`` or ``VALID`` (any case)."""
    if text.upper() in ("SAME", "VALID"):
        return text.upper()
    try:
        return _int_or_pair(0)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"must be an integer >= 0, a pair H,W of them, SAME or VALID, got {text!r}"
        ) from None


def _output_path(text: str) -> str:
    folder = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"folder {folder!r} does not exist (for {text!r})")
    return text


# ---- demo ----------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class DemoOptions:
    """What every demo section receives."""

    hw: HardwareConfig
    trace: str | None = None  # Chrome trace path (the GEMM section writes it)
    plot: str | None = None  # timeline PNG path (the GEMM section writes it)


def _random_operands(m: int, n: int, k: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    return a, b


def _trace_note(report) -> str:
    dropped = report.trace_dropped
    if not dropped:
        return ""
    return (
        f"note: the trace kept the first {np.shape(report.trace['pipe'])[1]} events per core; "
        f"{dropped:,} later events were dropped from the trace file and the plot."
    )


def _reading(report) -> str:
    """Two or three sentences saying what the report's numbers mean."""
    busy = report.pipe_busy
    neck = report.bottleneck
    ratio = report.ratios[RATIO_NAMES[neck]]
    core_cycles = report.core_cycles
    lines = [
        f"Reading: the kernel turned {report.pct_peak:.1f}% of the chip's peak "
        f"({report.pct_peak_launched:.1f}% of its {report.n_cores} launched cores') into useful FLOPs "
        f"(mac_ratio {report.ratios['mac_ratio']:.2f}).",
        f"The bottleneck is {neck} -- {_PIPE_MEANING[neck]} -- busy {ratio:.0%} of the run "
        f"({busy[neck]:,} cycles over all cores); the Cube was busy {busy['M']:,}.",
        f"The kernel is {report.roofline}.",
    ]
    if report.n_cores > 1 and core_cycles.min() < 0.9 * core_cycles.max():
        lines.append(
            f"Cores finish between {int(core_cycles.min()):,} and {int(core_cycles.max()):,} "
            f"cycles: the output blocks do not divide evenly over the cores."
        )
    return "\n".join(lines)


def _demo_gemm(opts: DemoOptions) -> str:
    """The default workload: a 1024 x 1024 x 1024 fp16 GEMM on the Cube."""
    import npu_jax

    a, b = _random_operands(1024, 1024, 1024)
    keep = opts.trace is not None or opts.plot is not None
    _, report = npu_jax.matmul(a, b, hw=opts.hw, trace=keep)
    parts = [
        "== GEMM 1024 x 1024 x 1024, fp16 in, fp32 accumulate ==",
        report.summary(),
        "",
        _reading(report),
    ]
    if opts.trace is not None:
        parts.append(
            f"Chrome trace written to {report.to_chrome_trace(opts.trace)} "
            f"(open it in https://ui.perfetto.dev)."
        )
    if opts.plot is not None:
        report.plot_timeline(opts.plot)
        parts.append(f"Timeline of core 0 written to {opts.plot}.")
    if keep and _trace_note(report):
        parts.append(_trace_note(report))
    return "\n".join(parts)


def _demo_conv_layers(hw: HardwareConfig) -> tuple:
    """The ResNet-50 reference layers; on the tiny test preset two of them at half height and
    width, so that ``npu-jax demo --preset tiny`` stays quick (each run's time is mostly compiling
    its kernel, whatever the layer's size)."""
    from npu_jax.workloads import RESNET50_REFERENCE

    if not hw.name.startswith("tiny"):
        return RESNET50_REFERENCE
    return tuple(
        dataclasses.replace(
            layer,
            name=f"{layer.name.split()[0]}/2 {layer.kh}x{layer.kw} {layer.h // 2}x{layer.w // 2}x{layer.c}",
            h=layer.h // 2,
            w=layer.w // 2,
        )
        for layer in RESNET50_REFERENCE
        if layer.name.startswith(("conv2_x", "conv4_x"))
    )


def _span(values, fmt: str) -> str:
    """'lo to hi' in ``fmt``, or one value when they print the same."""
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo} to {hi}"


def _strategies_reading(rows) -> str:
    """Three lines read off a strategies table: the best strategy per layer, how far it is from
    the naive ``output_tiled`` kernel, and what holds it back."""
    layers: dict[str, list] = {}
    for r in rows:
        layers.setdefault(r.layer, []).append(r)
    best = {name: max(rs, key=lambda r: r.pct_peak) for name, rs in layers.items()}
    short = lambda name: name.split()[0]  # noqa: E731
    winners = [b.strategy for b in best.values()]
    top = max(winners, key=winners.count)  # ties: the first layer's
    lines = [
        "Reading: the best strategy per layer is "
        + ", ".join(f"{short(n)} {b.strategy} ({b.pct_peak:.1f}% of peak)" for n, b in best.items())
        + f"; {top} wins {winners.count(top)} of {len(best)} layers."
    ]
    naive = {n: next((r for r in rs if r.strategy == "output_tiled"), None) for n, rs in layers.items()}
    pairs = [(best[n], naive[n]) for n in layers if naive[n] is not None]
    if pairs:
        speedups = [o.cycles / max(1, b.cycles) for b, o in pairs]
        relaid = max((b.relayout_cycles for b, _ in pairs), default=0)
        lines.append(
            f"Against output_tiled, which re-reads the input for every Cout block and the weights "
            f"for every tile, in short NCHW bursts, the best averages "
            f"{np.mean([b.pct_peak for b, _ in pairs]):.1f}% of peak vs "
            f"{np.mean([o.pct_peak for _, o in pairs]):.1f}%: {_span(speedups, '{:.2f}x')} fewer cycles "
            f"per layer"
            + (
                f" (before the NC1HWC0 relayout kernel, listed apart: up to {relaid:,} cycles)."
                if relaid
                else "."
            )
        )
    necks = [b.bottleneck for b in best.values()]
    neck = max(necks, key=necks.count)
    others = [f"{b.bottleneck} on {short(n)}" for n, b in best.items() if b.bottleneck != neck]
    lines.append(
        f"The best kernel's bottleneck is {neck} -- {_PIPE_MEANING.get(neck, neck)} -- on "
        f"{necks.count(neck)} of {len(necks)} layers"
        + (f" ({', '.join(others)})" if others else "")
        + f"; its Cube is busy {_span([b.mac_ratio for b in best.values()], '{:.0%}')} of the run "
        f"(mac_ratio)."
    )
    return "\n".join(lines)


def _demo_conv_strategies(opts: DemoOptions) -> str:
    """The four Conv2D strategies on the ResNet-50 reference layers (timing-only runs)."""
    from npu_jax.studies import conv_strategies, format_rows

    layers = _demo_conv_layers(opts.hw)
    progress = None
    if sys.stderr.isatty():  # each run is a few seconds of compiling: show that work is going on
        total = 4 * len(layers)
        done = []

        def progress(row):
            done.append(row)
            end = "\n" if len(done) == total else ""
            print(f"\r  conv2d runs: {len(done)}/{total}", end=end, file=sys.stderr, flush=True)

    rows = conv_strategies(opts.hw, layers, timing_only=True, progress=progress)
    what = (
        "two ResNet-50 reference layers at half height and width (tiny preset)"
        if opts.hw.name.startswith("tiny")
        else "the ResNet-50 reference layers"
    )
    return "\n".join(
        [
            f"== Conv2D strategies on {what}: timing-only runs, each with the chooser's tiling ==",
            format_rows(rows),
            "",
            _strategies_reading(rows),
        ]
    )


DEMO_SECTIONS: list[Callable[[DemoOptions], str]] = [_demo_gemm, _demo_conv_strategies]


def _demo_precision(opts: DemoOptions) -> str:
    """The precision lab's strategies table (``precision`` builds on npu_jax: imported lazily)."""
    from precision.cli import demo_section

    return demo_section(opts)


# after the GEMM, before the Conv2D strategies table (tests/test_cli.py reads that table's
# reading as the end of the output)
DEMO_SECTIONS.insert(1, _demo_precision)


def _demo_fusion(opts: DemoOptions) -> str:
    """Conv + bias + ReLU, unfused vs fused (``fusion`` builds on npu_jax: imported lazily)."""
    from fusion.cli import demo_section

    return demo_section(opts)


DEMO_SECTIONS.append(_demo_fusion)


def _cmd_demo(args) -> int:
    opts = DemoOptions(hw=args.preset, trace=args.trace, plot=args.plot)
    print(
        f"npu-jax demo on {opts.hw.name}: {opts.hw.num_cores} cores at {opts.hw.clock_ghz} GHz, "
        f"peak {opts.hw.peak_tflops('fp16'):.2f} TFLOPS fp16\n",
        flush=True,
    )
    for i, section in enumerate(DEMO_SECTIONS):
        if i:
            print()
        print(section(opts), flush=True)
    return 0


# ---- info ----------------------------------------------------------------------------------------
def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    fmt = lambda row: "  ".join(  # noqa: E731
        str(x).ljust(w) if i == 0 else str(x).rjust(w) for i, (x, w) in enumerate(zip(row, widths))
    )
    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


def _preset_row(hw: HardwareConfig) -> list[str]:
    chip = hw.chip_gm_bytes_per_cycle
    return [
        hw.name,
        str(hw.num_cores),
        f"{hw.clock_ghz:g}",
        f"{hw.peak_tflops('fp16'):.2f}",
        *(f"{hw.buffer_bytes(b) // KiB}" for b in ("L1", "L0A", "L0B", "L0C", "UB")),
        f"{hw.gm_bytes_per_cycle:g}",
        f"{chip:g}" if chip is not None else "-",
        "coupled" if hw.coupled else "separated",
        hw.overflow_mode,
    ]


def _cmd_info(args) -> int:
    chosen = [args.preset] if args.preset is not None else [f() for f in presets.PRESETS.values()]
    header = [
        "preset",
        "cores",
        "GHz",
        "TFLOPS fp16",
        "L1 KiB",
        "L0A KiB",
        "L0B KiB",
        "L0C KiB",
        "UB KiB",
        "GM B/cyc/core",
        "GM B/cyc chip",
        "data path",
        "overflow",
    ]
    print("Presets (figures per core unless marked; sources cited in npu_jax/hw/presets.py)")
    print(_table(header, [_preset_row(hw) for hw in chosen]))
    print()
    assumed = chosen[0].assumed if len(chosen) == 1 else Assumed()
    rows = [
        [
            f.name,
            f"{getattr(assumed, f.name):g}",
            "B/cycle" if f.name.endswith("bytes_per_cycle") else "cycles",
            "assumed, not published",
        ]
        for f in dataclasses.fields(Assumed)
    ]
    print("Assumed figures (HardwareConfig.assumed: the model's guesses; change them to ask 'what if')")
    print(_table(["name", "value", "unit", "status"], rows))
    # A rate that a preset publishes overrides the assumed one; say where the guess is still used.
    for name in ("l1_to_l0b_bytes_per_cycle", "ub_to_gm_bytes_per_cycle"):
        guessed = [hw.name for hw in chosen if getattr(hw, name) is None]
        print(
            f"  {name}: assumed value used by {', '.join(guessed) or 'none of these'}; "
            f"the others publish their own."
        )
    return 0


# ---- matmul --------------------------------------------------------------------------------------
def _cmd_matmul(args) -> int:
    import npu_jax
    from npu_jax.kernels.gemm import default_tiling

    hw = args.preset
    if args.cores is not None and args.cores > hw.num_cores:
        args.parser.error(
            f"argument --cores: must be at most {hw.num_cores} (the cores of preset "
            f"{hw.name}), got {args.cores}"
        )
    a, b = _random_operands(args.m, args.n, args.k)
    tiling = default_tiling(args.m, args.n, args.k, hw)
    if args.cores is not None:
        tiling = dataclasses.replace(tiling, cores=args.cores)
    c, report = npu_jax.matmul(a, b, hw=hw, tiling=tiling, trace=args.trace is not None)
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
    if args.trace is not None and _trace_note(report):
        print(_trace_note(report), file=sys.stderr)
    return 0


# ---- conv2d --------------------------------------------------------------------------------------
def _conv_reference(x, w, g):
    """``lax.conv_general_dilated`` in fp32 at HIGHEST precision on the given (fp16-rounded) inputs."""
    from jax import lax

    pt, pb, pl, pr = g.pads
    return np.asarray(
        lax.conv_general_dilated(
            x.astype(np.float32),
            w.astype(np.float32),
            window_strides=g.stride,
            padding=((pt, pb), (pl, pr)),
            rhs_dilation=g.dilation,
            dimension_numbers=("NCHW", "OIHW", "NCHW"),
            precision=lax.Precision.HIGHEST,
        ),
        np.float64,
    )


def _conv_all(args, x_shape, w_shape, g) -> int:
    """``--strategy all``: the strategies table (and its reading) for one layer."""
    from npu_jax.kernels.conv2d import STRATEGIES, conv2d
    from npu_jax.kernels.conv_choose import choose_tiling
    from npu_jax.studies import StrategyRow, conv_strategies, format_rows
    from npu_jax.workloads import ConvLayer

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
    print(_strategies_reading(rows))
    return 0


def _cmd_conv2d(args) -> int:
    from npu_jax.errors import NpuError
    from npu_jax.kernels.conv_geometry import canonicalize

    for flag in ("trace", "plot"):
        if args.strategy == "all" and getattr(args, flag) is not None:
            args.parser.error(f"argument --{flag}: needs one --strategy, not 'all'")
    x_shape, w_shape = (args.n, args.c, args.h, args.w), (args.k, args.c, args.kh, args.kw)
    try:
        g = canonicalize(x_shape, w_shape, args.stride, args.padding, args.dilation)
        if args.strategy == "all":
            return _conv_all(args, x_shape, w_shape, g)
        return _conv_one(args, x_shape, w_shape, g)
    except (ValueError, TypeError, NpuError) as e:  # the library's message names the parameter
        raise _UsageError(f"npu-jax conv2d: error: {e}") from None


def _conv_one(args, x_shape, w_shape, g) -> int:
    from npu_jax.kernels.conv2d import conv2d
    from npu_jax.kernels.conv_choose import choose_tiling

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
        ref = _conv_reference(x, w, g)
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
    if keep and _trace_note(report):
        print(_trace_note(report), file=sys.stderr)
    return 0


# ---- entry point ---------------------------------------------------------------------------------
def _parser() -> _Parser:
    p = _Parser(
        prog="npu-jax",
        description="Emulate an Ascend-style AI Core in JAX: the numbers a "
        "kernel computes and the cycles and bytes it costs.",
    )
    sub = p.add_subparsers(
        dest="command", required=True, metavar="{demo,info,matmul,conv2d,precision,fuse,search}"
    )

    def preset_arg(sp, default):
        sp.add_argument(
            "--preset",
            type=_preset,
            default=default,
            metavar="NAME",
            help=f"hardware preset: one of {sorted(presets.PRESETS)}"
            + (" (default ascend910b)" if default else " (default: all)"),
        )

    d = sub.add_parser("demo", help="run the default workload and explain its report")
    preset_arg(d, "ascend910b")
    d.add_argument("--trace", type=_output_path, metavar="PATH", help="write a Chrome trace (JSON)")
    d.add_argument("--plot", type=_output_path, metavar="PATH", help="write a timeline plot (PNG)")
    d.set_defaults(func=_cmd_demo)

    i = sub.add_parser("info", help="list the presets and the assumed figures")
    preset_arg(i, None)
    i.set_defaults(func=_cmd_info)

    m = sub.add_parser("matmul", help="run one GEMM (M, K) @ (K, N) on random fp16 data")
    for dim in ("m", "n", "k"):
        m.add_argument(f"--{dim}", type=_positive_int, required=True, metavar=dim.upper())
    preset_arg(m, "ascend910b")
    m.add_argument("--trace", type=_output_path, metavar="PATH", help="write a Chrome trace (JSON)")
    m.add_argument("--cores", type=_positive_int, metavar="N", help="cores to spread blocks over")
    m.add_argument("--json", action="store_true", help="print report.as_dict() (plus max_abs_err) as JSON")
    m.set_defaults(func=_cmd_matmul, parser=m)

    from npu_jax.kernels.conv2d import STRATEGIES

    c = sub.add_parser(
        "conv2d",
        help="run one Conv2D layer (NCHW x OIHW) on random fp16 data",
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
            type=_positive_int,
            default=default,
            metavar=dim.upper(),
            help=f"{what} (default {default})",
        )
    c.add_argument(
        "--stride", type=_int_or_pair(1), default=1, metavar="S", help="stride: S or SH,SW (default 1)"
    )
    c.add_argument(
        "--padding",
        type=_padding,
        default=1,
        metavar="P",
        help="padding: P, PH,PW, SAME or VALID (default 1)",
    )
    c.add_argument(
        "--dilation", type=_int_or_pair(1), default=1, metavar="D", help="dilation: D or DH,DW (default 1)"
    )
    c.add_argument(
        "--strategy",
        choices=(*STRATEGIES, "all"),
        default="img2col",
        help="kernel strategy, or 'all' for a table of the four (default img2col)",
    )
    preset_arg(c, "ascend910b")
    c.add_argument("--trace", type=_output_path, metavar="PATH", help="write a Chrome trace (JSON)")
    c.add_argument("--plot", type=_output_path, metavar="PATH", help="write a timeline plot (PNG)")
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
    c.set_defaults(func=_cmd_conv2d, parser=c)

    from precision.cli import add_parser as add_precision  # the precision lab builds on npu_jax

    add_precision(sub, _preset, _output_path, _positive_int)

    from fusion.cli import add_parser as add_fusion  # fusion builds on npu_jax

    add_fusion(sub)

    from npu_jax.search.cli import add_parser as add_search  # tile search: jax/optax heavy, lazy

    add_search(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the ``npu-jax`` command with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    from npu_jax.errors import NpuError

    try:
        try:
            args = _parser().parse_args(argv)
        except SystemExit as e:  # --help
            return e.code if isinstance(e.code, int) else 0
        return args.func(args)
    except (_UsageError, NpuError) as e:
        msg = str(e) if isinstance(e, _UsageError) else f"npu-jax: error: {e}"
        print(" ".join(msg.split()), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""``npu-jax demo``: the default workloads, and what their numbers mean.

The demo is a list of sections, each ``section(opts: DemoOptions) -> str``, named in
:data:`npu_jax.cli.registry.DEMO_SECTIONS`: the 1024^3 fp16 GEMM and the four Conv2D strategies on
the ResNet-50 reference layers come from here; ``precision`` and ``fusion`` add theirs there.
"""

from __future__ import annotations

import argparse
import dataclasses

from npu_jax.api.gemm import matmul
from npu_jax.cli import registry
from npu_jax.cli.data import demo_layers, demo_layers_text, random_operands
from npu_jax.cli.output import add_output_argument
from npu_jax.cli.progress import Progress
from npu_jax.cli.types import add_preset_argument
from npu_jax.hw.config import HardwareConfig
from npu_jax.report.reading import bottleneck_reading, strategies_reading, trace_note
from npu_jax.studies import conv_strategies, format_rows


@dataclasses.dataclass(frozen=True, kw_only=True)
class DemoOptions:
    """What every demo section receives."""

    hw: HardwareConfig
    trace: str | None = None  # Chrome trace path (the GEMM section writes it)
    plot: str | None = None  # timeline PNG path (the GEMM section writes it)
    progress: Progress = dataclasses.field(default_factory=lambda: Progress("demo"))  # on stderr
    emulate: bool = False  # the Conv2D and fusion tables from emulator runs instead of the closed-form models


def gemm_section(opts: DemoOptions) -> str:
    """The default workload: a 1024 x 1024 x 1024 fp16 GEMM on the Cube."""
    a, b = random_operands(1024, 1024, 1024)
    keep = opts.trace is not None or opts.plot is not None
    opts.progress.compiling("matmul", "1024x1024 @ 1024x1024", opts.hw.name)
    _, report = matmul(a, b, hw=opts.hw, trace=keep)
    parts = [
        "== GEMM 1024 x 1024 x 1024, fp16 in, fp32 accumulate ==",
        report.summary(),
        "",
        bottleneck_reading(report),
    ]
    if opts.trace is not None:
        parts.append(
            f"Chrome trace written to {report.to_chrome_trace(opts.trace)} "
            f"(open it in https://ui.perfetto.dev)."
        )
    if opts.plot is not None:
        report.plot_timeline(opts.plot)
        parts.append(f"Timeline of core 0 written to {opts.plot}.")
    if keep and trace_note(report):
        parts.append(trace_note(report))
    return "\n".join(parts)


def conv_strategies_section(opts: DemoOptions) -> str:
    """The four Conv2D strategies on the ResNet-50 reference layers: the closed-form model's rows
    (the emulator's timing-only runs exactly, tested; no conv kernel compiles), or with
    ``--emulate`` the timing-only runs themselves."""
    layers = demo_layers(opts.hw)
    progress, bar = opts.progress.callback(
        4 * len(layers), "Conv2D strategies", lambda r: f"{r.layer.split()[0]} {r.strategy}"
    )
    rows = conv_strategies(opts.hw, layers, timing_only=True, progress=progress, model=not opts.emulate)
    bar.close()
    how = (
        "timing-only emulator runs"
        if opts.emulate
        else "the closed-form model, equal to the emulator's timing-only runs (--emulate runs them)"
    )
    return "\n".join(
        [
            f"== Conv2D strategies on {demo_layers_text(opts.hw)}: {how}, each with the chooser's tiling ==",
            format_rows(rows),
            "",
            strategies_reading(rows),
        ]
    )


def register(parser: argparse.ArgumentParser) -> None:
    """The flags of ``npu-jax demo``."""
    parser.description = (
        "Run the default workloads (a 1024^3 fp16 GEMM, the precision strategies, the four Conv2D "
        "strategies on the ResNet-50 reference layers, Conv + bias + ReLU fusion) and say what their "
        "numbers mean. About 25-30 s on the 910B preset the first time on a 2-core laptop, 10 s "
        "once its compiled programs and tilings are cached (~/.cache/npu-jax)."
    )
    add_preset_argument(parser, "ascend910b")
    add_output_argument(parser, "--trace", "write a Chrome trace (JSON) of the GEMM to PATH")
    add_output_argument(parser, "--plot", "write a timeline plot (PNG) of the GEMM to PATH")
    parser.add_argument(
        "--emulate",
        action="store_true",
        help="run the Conv2D strategies and the fusion analyses on the emulator (timing-only) instead of "
        "reading the closed-form models, which equal it (slower: each kernel compiles)",
    )


def run(args) -> int:
    """Print every section of :data:`npu_jax.cli.registry.DEMO_SECTIONS`, in order."""
    opts = DemoOptions(
        hw=args.preset, trace=args.trace, plot=args.plot, progress=args.progress, emulate=args.emulate
    )
    print(
        f"npu-jax demo on {opts.hw.name}: {opts.hw.num_cores} cores at {opts.hw.clock_ghz} GHz, "
        f"peak {opts.hw.peak_tflops('fp16'):.2f} TFLOPS fp16\n",
        flush=True,
    )
    for i, entry in enumerate(registry.DEMO_SECTIONS):
        if i:
            print()
        print(registry.section(entry)(opts), flush=True)
    return 0


__all__ = ["DemoOptions", "conv_strategies_section", "gemm_section", "register", "run"]

"""The ``npu-jax`` command: ``demo``, ``info`` and ``matmul``.

``npu-jax demo`` runs the default workload (a 1024^3 fp16 GEMM on the 910B preset) and says what
its numbers mean; ``npu-jax info`` lists the presets and the table of assumed figures; ``npu-jax
matmul --m M --n N --k K`` runs one GEMM on random data. Bad input is one line on stderr naming
the parameter, and exit code 2.

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
    return (f"note: the trace kept the first {np.shape(report.trace['pipe'])[1]} events per core; "
            f"{dropped:,} later events were dropped from the trace file and the plot.")


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
        lines.append(f"Cores finish between {int(core_cycles.min()):,} and {int(core_cycles.max()):,} "
                     f"cycles: the output blocks do not divide evenly over the cores.")
    return "\n".join(lines)


def _demo_gemm(opts: DemoOptions) -> str:
    """The default workload: a 1024 x 1024 x 1024 fp16 GEMM on the Cube."""
    import npu_jax

    a, b = _random_operands(1024, 1024, 1024)
    keep = opts.trace is not None or opts.plot is not None
    _, report = npu_jax.matmul(a, b, hw=opts.hw, trace=keep)
    parts = ["== GEMM 1024 x 1024 x 1024, fp16 in, fp32 accumulate ==", report.summary(), "",
             _reading(report)]
    if opts.trace is not None:
        parts.append(f"Chrome trace written to {report.to_chrome_trace(opts.trace)} "
                     f"(open it in https://ui.perfetto.dev).")
    if opts.plot is not None:
        report.plot_timeline(opts.plot)
        parts.append(f"Timeline of core 0 written to {opts.plot}.")
    if keep and _trace_note(report):
        parts.append(_trace_note(report))
    return "\n".join(parts)


DEMO_SECTIONS: list[Callable[[DemoOptions], str]] = [_demo_gemm]


def _cmd_demo(args) -> int:
    opts = DemoOptions(hw=args.preset, trace=args.trace, plot=args.plot)
    print(f"npu-jax demo on {opts.hw.name}: {opts.hw.num_cores} cores at {opts.hw.clock_ghz} GHz, "
          f"peak {opts.hw.peak_tflops('fp16'):.2f} TFLOPS fp16\n", flush=True)
    for i, section in enumerate(DEMO_SECTIONS):
        if i:
            print()
        print(section(opts), flush=True)
    return 0


# ---- info ----------------------------------------------------------------------------------------
def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    fmt = lambda row: "  ".join(  # noqa: E731
        str(x).ljust(w) if i == 0 else str(x).rjust(w) for i, (x, w) in enumerate(zip(row, widths)))
    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


def _preset_row(hw: HardwareConfig) -> list[str]:
    chip = hw.chip_gm_bytes_per_cycle
    return [hw.name, str(hw.num_cores), f"{hw.clock_ghz:g}", f"{hw.peak_tflops('fp16'):.2f}",
            *(f"{hw.buffer_bytes(b) // KiB}" for b in ("L1", "L0A", "L0B", "L0C", "UB")),
            f"{hw.gm_bytes_per_cycle:g}", f"{chip:g}" if chip is not None else "-",
            "coupled" if hw.coupled else "separated", hw.overflow_mode]


def _cmd_info(args) -> int:
    chosen = [args.preset] if args.preset is not None else [f() for f in presets.PRESETS.values()]
    header = ["preset", "cores", "GHz", "TFLOPS fp16", "L1 KiB", "L0A KiB", "L0B KiB", "L0C KiB",
              "UB KiB", "GM B/cyc/core", "GM B/cyc chip", "data path", "overflow"]
    print("Presets (figures per core unless marked; sources cited in npu_jax/hw/presets.py)")
    print(_table(header, [_preset_row(hw) for hw in chosen]))
    print()
    assumed = chosen[0].assumed if len(chosen) == 1 else Assumed()
    rows = [[f.name, f"{getattr(assumed, f.name):g}",
             "B/cycle" if f.name.endswith("bytes_per_cycle") else "cycles", "assumed, not published"]
            for f in dataclasses.fields(Assumed)]
    print("Assumed figures (HardwareConfig.assumed: the model's guesses; change them to ask 'what if')")
    print(_table(["name", "value", "unit", "status"], rows))
    # A rate that a preset publishes overrides the assumed one; say where the guess is still used.
    for name in ("l1_to_l0b_bytes_per_cycle", "ub_to_gm_bytes_per_cycle"):
        guessed = [hw.name for hw in chosen if getattr(hw, name) is None]
        print(f"  {name}: assumed value used by {', '.join(guessed) or 'none of these'}; "
              f"the others publish their own.")
    return 0


# ---- matmul --------------------------------------------------------------------------------------
def _cmd_matmul(args) -> int:
    import npu_jax
    from npu_jax.kernels.gemm import default_tiling

    hw = args.preset
    if args.cores is not None and args.cores > hw.num_cores:
        args.parser.error(f"argument --cores: must be at most {hw.num_cores} (the cores of preset "
                          f"{hw.name}), got {args.cores}")
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
        print(f"  max abs error vs float64 of the fp16 inputs: {err:.4g} "
              f"(largest |C| {float(np.max(np.abs(ref))):.4g}; output is fp16)")
        if args.trace is not None:
            print(f"  Chrome trace written to {args.trace}")
    if args.trace is not None and _trace_note(report):
        print(_trace_note(report), file=sys.stderr)
    return 0


# ---- entry point ---------------------------------------------------------------------------------
def _parser() -> _Parser:
    p = _Parser(prog="npu-jax", description="Emulate an Ascend-style AI Core in JAX: the numbers a "
                "kernel computes and the cycles and bytes it costs.")
    sub = p.add_subparsers(dest="command", required=True, metavar="{demo,info,matmul}")

    def preset_arg(sp, default):
        sp.add_argument("--preset", type=_preset, default=default, metavar="NAME",
                        help=f"hardware preset: one of {sorted(presets.PRESETS)}"
                             + (" (default ascend910b)" if default else " (default: all)"))

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

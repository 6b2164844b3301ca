"""``npu-jax precision``: the strategies table, the format table, and the baselines update.

``npu-jax precision`` (quick default: stacks of 2, 4 and 8 layers, C=16 on 8x8, tiny preset)
prints error vs depth and emulated speed for every strategy in the three scenarios, with the
reading. ``--depths 4,8,16,32 --channels 64 --size 16`` is the docs' run. ``--update-baselines``
rewrites the golden baselines under ``tests/baselines`` (or ``--baselines-dir``) on purpose.

The command's logic lives here; ``npu_jax/cli.py`` only wires it in (``add_parser``, ``run``,
``demo_section``), importing this module lazily.
"""

from __future__ import annotations

import argparse
import sys


def _depths(text: str) -> tuple[int, ...]:
    try:
        ds = tuple(int(t) for t in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated positive integers, got {text!r}") from None
    if not ds or min(ds) < 1:
        raise argparse.ArgumentTypeError(f"must be comma-separated positive integers, got {text!r}")
    return tuple(sorted(set(ds)))


def _choices(allowed):
    def parse(text: str) -> tuple[str, ...]:
        items = tuple(t.strip() for t in text.split(",") if t.strip())
        bad = [t for t in items if t not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"unknown {bad or text!r}; choose from {', '.join(allowed)}")
        return items

    return parse


def add_parser(sub, preset_type, output_path_type, positive_int):
    """Add the ``precision`` subcommand to ``sub`` (the argparse subparsers of ``npu-jax``)."""
    from precision.experiments import SCENARIOS
    from precision.strategies import STRATEGIES

    p = sub.add_parser(
        "precision",
        help="precision lab: strategies vs depth, formats, baselines",
        description="FP16 against FP32 inside the emulated core: error vs depth and emulated "
        "speed of each precision strategy on ResNet-like 3x3 conv stacks.",
    )
    p.add_argument(
        "--depths",
        type=_depths,
        default=(2, 4, 8),
        metavar="D1,D2,...",
        help="depths to report; the stacks have the largest (default 2,4,8)",
    )
    p.add_argument("--channels", type=positive_int, default=16, metavar="C", help="channels (default 16)")
    p.add_argument(
        "--size", type=positive_int, default=8, metavar="HW", help="activation height = width (default 8)"
    )
    p.add_argument(
        "--strategies",
        type=_choices(STRATEGIES),
        default=STRATEGIES,
        metavar="S1,S2",
        help=f"subset of {', '.join(STRATEGIES)}",
    )
    p.add_argument(
        "--scenarios",
        type=_choices(SCENARIOS),
        default=SCENARIOS,
        metavar="S1,S2",
        help=f"subset of {', '.join(SCENARIOS)}",
    )
    p.add_argument(
        "--conv-strategy",
        default="img2col",
        choices=("output_tiled", "input_tiled", "relayout", "img2col"),
        help="Conv2D kernel",
    )
    p.add_argument(
        "--preset", type=preset_type, default="tiny", metavar="NAME", help="hardware preset (default tiny)"
    )
    p.add_argument(
        "--plot", type=output_path_type, metavar="PATH", help="write the error-vs-depth plot (PNG)"
    )
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--formats", action="store_true", help="print the format table and exit")
    p.add_argument(
        "--update-baselines",
        action="store_true",
        help="re-measure and rewrite the golden baselines (deliberately), then exit",
    )
    p.add_argument("--baselines-dir", metavar="DIR", help="where baselines live (default tests/baselines)")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    """Run ``npu-jax precision`` with parsed ``args``; returns the exit code."""
    from precision import baselines, formats
    from precision.experiments import run_experiments

    if args.formats:
        print(formats.describe())
        return 0
    if args.update_baselines:
        for path in baselines.update_baselines(directory=args.baselines_dir):
            print(f"wrote {path}")
        return 0
    progress = None
    if sys.stderr.isatty():

        def progress(sc, st):
            print(f"\r  ran {sc} / {st}        ", end="", file=sys.stderr, flush=True)

    res = run_experiments(
        args.depths,
        args.strategies,
        args.scenarios,
        channels=args.channels,
        size=args.size,
        hw=args.preset,
        conv_strategy=args.conv_strategy,
        progress=progress,
    )
    if progress:
        print(file=sys.stderr)
    if args.json:
        print(res.to_json())
    else:
        print(f"== Precision strategies: {res.setup} ==")
        print(res.table())
        print()
        print("Reading:\n" + res.reading())
        print(f"(cycles: the emulated convs plus the strategies' extra vector passes; {res.seconds:.0f} s)")
    if args.plot:
        print(f"plot written to {res.plot(args.plot)}")
    return 0


def demo_section(opts) -> str:
    """The demo's precision table: every strategy on 8-layer stacks (tiny preset, quick)."""
    import npu_jax
    from precision.experiments import run_experiments

    res = run_experiments((2, 4, 8), channels=16, size=8, hw=npu_jax.presets.tiny())
    return "\n".join(
        [
            f"== Precision strategies (tiny preset, quick): {res.setup} ==",
            res.table(),
            "",
            "Reading:",
            res.reading(),
        ]
    )


__all__ = ["add_parser", "demo_section", "run"]

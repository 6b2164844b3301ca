"""``npu-jax precision``: the strategies table, the format table, and the baselines update.

``npu-jax precision`` (quick default: stacks of 2, 4 and 8 layers, C=16 on 8x8, tiny preset)
prints error vs depth and emulated speed for every strategy in the three scenarios, with the
reading. ``--depths 4,8,16,32 --channels 64 --size 16`` is the docs' run. ``--update-baselines``
rewrites the golden baselines under ``tests/baselines`` (or ``--baselines-dir``) on purpose.

A subcommand of ``npu-jax`` (the protocol of :mod:`npu_jax.cli.base`: ``register``, ``run``), listed by
name in :mod:`npu_jax.cli.registry` with its help and its demo section (``demo_section``);
``npu_jax`` never imports this package itself.
"""

from __future__ import annotations

import argparse
import json

from npu_jax.cli.output import add_output_argument, add_results_arguments, print_written, write_results
from npu_jax.cli.progress import Progress
from npu_jax.cli.types import add_preset_argument, choice_list, folder, positive_int
from npu_jax.hw import presets
from precision import baselines, formats
from precision.experiments import SCENARIOS, run_experiments
from precision.strategies import STRATEGIES


def _depths(text: str) -> tuple[int, ...]:
    try:
        ds = tuple(int(t) for t in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated positive integers, got {text!r}") from None
    if not ds or min(ds) < 1:
        raise argparse.ArgumentTypeError(f"must be comma-separated positive integers, got {text!r}")
    return tuple(sorted(set(ds)))


def register(p: argparse.ArgumentParser) -> None:
    """The flags of ``npu-jax precision``."""
    p.description = (
        "FP16 against FP32 inside the emulated core: error vs depth and emulated "
        "speed of each precision strategy on ResNet-like 3x3 conv stacks."
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
        type=choice_list(STRATEGIES),
        default=STRATEGIES,
        metavar="S1,S2",
        help=f"subset of {', '.join(STRATEGIES)}",
    )
    p.add_argument(
        "--scenarios",
        type=choice_list(SCENARIOS),
        default=SCENARIOS,
        metavar="S1,S2",
        help=f"subset of {', '.join(SCENARIOS)}",
    )
    p.add_argument(
        "--conv-strategy",
        default="img2col",
        choices=("output_tiled", "input_tiled", "relayout", "img2col"),
        help="Conv2D kernel (default img2col)",
    )
    add_preset_argument(p, "tiny")
    add_output_argument(p, "--plot", "write the error-vs-depth plot (PNG) to PATH")
    add_results_arguments(p, "the rows (JSON: with the setup, depths and fp16-weight floors)")
    p.add_argument("--formats", action="store_true", help="print the format table and exit")
    p.add_argument(
        "--update-baselines",
        action="store_true",
        help="re-measure and rewrite the golden baselines (deliberately), then exit",
    )
    p.add_argument(
        "--baselines-dir", type=folder, metavar="DIR", help="where baselines live (default tests/baselines)"
    )


def run(args) -> int:
    """Run ``npu-jax precision`` with parsed ``args``; returns the exit code."""
    if args.formats:
        print(formats.describe())
        return 0
    if args.update_baselines:
        args.progress.line("re-measuring the golden baselines (each kernel compiles for a few seconds) ...")
        for path in baselines.update_baselines(directory=args.baselines_dir):
            print(f"wrote {path}")
        return 0
    res = _experiments(
        args.progress,
        args.depths,
        args.strategies,
        args.scenarios,
        channels=args.channels,
        size=args.size,
        hw=args.preset,
        conv_strategy=args.conv_strategy,
    )
    if args.plot:
        res.plot(args.plot)
    if not write_results(args, json.loads(res.to_json()), res.rows()):
        print(f"== Precision strategies: {res.setup} ==")
        print(res.table())
        print()
        print("Reading:\n" + res.reading())
        print(f"(cycles: the emulated convs plus the strategies' extra vector passes; {res.seconds:.0f} s)")
        if args.plot:
            print(f"plot written to {args.plot}")
        print_written(args)
    return 0


def _experiments(progress: Progress, depths=(2, 4, 8), strategies=STRATEGIES, scenarios=SCENARIOS, **kw):
    """:func:`precision.experiments.run_experiments` with a progress bar (one step per stack run)."""
    total = len(scenarios) * len(dict.fromkeys(("fp32", *strategies)))
    callback, bar = progress.callback(
        total, "precision stacks (each new shape compiles)", lambda sc, st: f"{sc} {st}"
    )
    res = run_experiments(depths, strategies, scenarios, progress=callback, **kw)
    bar.close()
    return res


def demo_section(opts) -> str:
    """The demo's precision table: every strategy on 8-layer stacks (tiny preset, quick)."""
    res = _experiments(opts.progress, (2, 4, 8), channels=16, size=8, hw=presets.tiny())
    return "\n".join(
        [
            f"== Precision strategies (tiny preset, quick): {res.setup} ==",
            res.table(),
            "",
            "Reading:",
            res.reading(),
        ]
    )


__all__ = ["demo_section", "register", "run"]

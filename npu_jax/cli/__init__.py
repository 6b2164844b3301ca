"""The ``npu-jax`` command: ``demo``, ``info``, ``matmul``, ``conv2d``, ``precision``, ``fuse``, ``search``.

``npu-jax demo`` runs the default workloads (a 1024^3 fp16 GEMM, the precision strategies, the four
Conv2D strategies on the ResNet-50 reference layers, Conv + bias + ReLU fusion, on the 910B preset)
and says what their numbers mean; ``npu-jax info`` lists the presets and the table of assumed
figures; ``npu-jax matmul --m M --n N --k K`` runs one GEMM on random data; ``npu-jax conv2d`` runs
one Conv2D layer (default ResNet-50's conv2_x) with one strategy, or all four side by side; ``npu-jax
search`` runs the tile search. Bad input is one line on stderr naming the parameter, and exit code 2.

One module per subcommand, each following :class:`npu_jax.cli.base.Command` (``NAME``, ``HELP``,
``register(subparsers)``, ``run(args)``); :mod:`npu_jax.cli.registry` lists them (``precision`` and
``fuse`` come from their own packages, imported by name when the parser is built) and the demo's
sections. The argument types are in :mod:`npu_jax.cli.types`; the prose that explains a report is in
:mod:`npu_jax.report.reading`.

Example:
    >>> from npu_jax.cli import main
    >>> main(["info", "--preset", "tiny"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import sys

from npu_jax.cli import registry
from npu_jax.cli.base import Parser, UsageError, build_parser
from npu_jax.errors import NpuError


def parser() -> Parser:
    """The ``npu-jax`` argument parser, with every subcommand of the registry."""
    return build_parser(registry.commands())


def main(argv: list[str] | None = None) -> int:
    """Run the ``npu-jax`` command with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    try:
        try:
            args = parser().parse_args(argv)
        except SystemExit as e:  # --help
            return e.code if isinstance(e.code, int) else 0
        return args.func(args)
    except (UsageError, NpuError) as e:
        msg = str(e) if isinstance(e, UsageError) else f"npu-jax: error: {e}"
        print(" ".join(msg.split()), file=sys.stderr)
        return 2


__all__ = ["main", "parser"]

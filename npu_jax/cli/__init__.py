"""The ``npu-jax`` command: ``demo``, ``info``, ``matmul``, ``conv2d``, ``precision``, ``fuse``, ``search``.

``npu-jax demo`` runs the default workloads (a 1024^3 fp16 GEMM, the precision strategies, the four
Conv2D strategies on the ResNet-50 reference layers, Conv + bias + ReLU fusion, on the 910B preset)
and says what their numbers mean; ``npu-jax info`` lists the presets and the table of assumed
figures; ``npu-jax matmul --m M --n N --k K`` runs one GEMM on random data; ``npu-jax conv2d`` runs
one Conv2D layer (default ResNet-50's conv2_x), or a list of them from a CSV / YAML file, with one
strategy or all four; ``npu-jax search`` runs the tile search.

How every command behaves:

* ``npu-jax --help`` and ``--version`` import no JAX (each subcommand's module is imported by name
  when it is parsed: :mod:`npu_jax.cli.base`); each subcommand's ``--help`` lists every flag with text.
* Errors are one line on stderr, ``npu-jax COMMAND: error: ...`` naming the parameter, and exit code 2:
  bad flags, and the package's own errors, ValueError, TypeError, OSError and MemoryError from the work.
* Output files (``--trace``, ``--plot``, ``--json PATH``, ``--csv PATH``) are checked before any work,
  and a file that exists is overwritten only with ``--force`` (:mod:`npu_jax.cli.output`).
* Progress (a heartbeat while JAX loads, a line before each first compile, tqdm bars over loops) goes
  to stderr, results to stdout (:mod:`npu_jax.cli.progress`).
* ``--hw-ini PATH`` reads a CANN platform .ini over the preset, wherever a command takes ``--preset``.

One module per subcommand, each following :class:`npu_jax.cli.base.Command` (``register(parser)``,
``run(args)``); :mod:`npu_jax.cli.registry` lists them with their names and help (``precision`` and
``fuse`` come from their own packages) and the demo's sections. The argument types are in
:mod:`npu_jax.cli.types`; the prose that explains a report is in :mod:`npu_jax.report.reading`.

Example:
    >>> from npu_jax.cli import main
    >>> main(["info", "--preset", "tiny"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys

import npu_jax
from npu_jax.cli import registry
from npu_jax.cli.base import Parser, UsageError, build_parser
from npu_jax.cli.output import check_outputs
from npu_jax.cli.progress import Progress
from npu_jax.cli.types import resolve_hardware
from npu_jax.errors import NpuError

# What a command may raise that is the user's input or environment, not a bug: one line, exit 2.
USER_ERRORS = (NpuError, ValueError, TypeError, OSError, MemoryError)


def version() -> str:
    """The installed distribution's version (the package's own when it runs from a source tree)."""
    try:
        return importlib.metadata.version("npu-jax")
    except importlib.metadata.PackageNotFoundError:
        return npu_jax.__version__


def parser() -> Parser:
    """The ``npu-jax`` argument parser, with every subcommand of the registry."""
    return build_parser(registry.COMMANDS, version())


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _error_line(command: str, e: BaseException) -> str:
    prog = " ".join(filter(None, ("npu-jax", command)))
    if isinstance(e, UsageError):  # argparse's form: the parser's prog and the flag already in it
        return _one_line(e)
    if isinstance(e, KeyboardInterrupt):
        return f"{prog}: interrupted"
    if isinstance(e, MemoryError):
        return f"{prog}: error: out of memory ({_one_line(e) or 'the work is too large for this machine'}); try a smaller layer, fewer cores or no --trace"
    return f"{prog}: error: {_one_line(e)}"


def _command_word(argv: list[str]) -> str:
    return next((a for a in argv if not a.startswith("-")), "")


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the interpreter's final flush does not fail
    except (OSError, ValueError, AttributeError):  # stdout is not a file (captured)
        pass


def main(argv: list[str] | None = None) -> int:
    """Run the ``npu-jax`` command with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = _command_word(argv)
    asks_help = any(a in ("-h", "--help", "--version") for a in argv)
    # the heartbeat covers loading JAX (seconds); once it is loaded, the commands show their own progress
    progress = Progress(command).start(heartbeat=bool(command) and not asks_help and "jax" not in sys.modules)
    try:
        try:
            args = parser().parse_args(argv)
        except SystemExit as e:  # --help, --version
            return e.code if isinstance(e.code, int) else 0
        args.progress = progress
        if "jax" in sys.modules:  # the command loads JAX: keep its compiled programs on disk
            importlib.import_module("npu_jax.core.programs").enable_persistent_cache()
        check_outputs(args)
        resolve_hardware(args)
        return args.func(args)
    except BrokenPipeError:  # the reader of stdout went away (| head): not an error of the command
        _silence_stdout()
        return 0
    except (UsageError, KeyboardInterrupt, *USER_ERRORS) as e:
        progress.stop()  # close any progress bar first: the error is a line of its own
        print(_error_line(command, e), file=sys.stderr)
        return 130 if isinstance(e, KeyboardInterrupt) else 2
    finally:
        progress.stop()


__all__ = ["USER_ERRORS", "main", "parser", "version"]

"""The protocol every ``npu-jax`` subcommand follows, the parser, and the usage error.

A subcommand is a row of :data:`npu_jax.cli.registry.COMMANDS` (its name, its one-line help, and the
module that implements it) and a module with::

    def register(parser: argparse.ArgumentParser) -> None: ...   # add its flags (and a description)
    def run(args) -> int: ...                                     # do the work; returns the exit code

and, if it adds a section to ``npu-jax demo``, a function named in
:data:`npu_jax.cli.registry.DEMO_SECTIONS`. :func:`build_parser` gives each subcommand a
:class:`CommandParser` that imports the module by name (:mod:`importlib`) the first time the
subcommand is parsed or its help is shown: ``npu-jax --help`` and ``npu-jax --version`` import no
subcommand module, hence no JAX. Once loaded, ``args.func`` is the module's ``run`` and ``args.parser``
its parser (so ``run`` can report a bad combination of flags with ``args.parser.error``, one line
naming the flag).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from types import ModuleType
from typing import NamedTuple, Protocol


class UsageError(Exception):
    """Bad command-line input; the message is one line that names the parameter."""


class Parser(argparse.ArgumentParser):
    """argparse, but an error is one line on stderr and exit code 2 (no usage block)."""

    def error(self, message: str):
        raise UsageError(f"{self.prog}: error: {message}")


class Command(Protocol):
    """What a subcommand module provides (a module satisfies it structurally)."""

    def register(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


class Entry(NamedTuple):
    """One subcommand: the word on the command line, its one-line help, the module that implements it."""

    name: str
    help: str
    module: str


class CommandParser(Parser):
    """The parser of one subcommand; its flags are added by the subcommand's module, imported on first use."""

    def __init__(self, *args, module: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.module_name = module
        self._module: ModuleType | None = None

    def load(self) -> ModuleType:
        """Import the subcommand's module (once) and let it add its flags; returns the module."""
        if self._module is None:
            module = importlib.import_module(self.module_name)
            module.register(self)
            if self.get_default("output_dests"):  # the command writes files (npu_jax.cli.output)
                self.add_argument(
                    "--force", action="store_true", help="overwrite output files that exist (default: refuse)"
                )
            self.set_defaults(func=module.run, parser=self)
            self._module = module
        return self._module

    def parse_known_args(self, args=None, namespace=None):
        self.load()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self.load()
        return super().format_help()

    def format_usage(self) -> str:
        self.load()
        return super().format_usage()


def build_parser(commands: Sequence[Entry], version: str) -> Parser:
    """The ``npu-jax`` parser with one (lazily loaded) subcommand per entry of ``commands``, in order."""
    p = Parser(
        prog="npu-jax",
        description="Emulate an Ascend-style AI Core in JAX: the numbers a kernel computes and the cycles "
        "and bytes it costs. 'npu-jax COMMAND --help' lists a command's flags. Errors are one line on "
        "stderr with exit code 2; an existing output file is overwritten only with --force.",
    )
    p.add_argument("--version", action="version", version=f"npu-jax {version}", help="print the version")
    sub = p.add_subparsers(
        dest="command",
        required=True,
        metavar="{" + ",".join(c.name for c in commands) + "}",
        parser_class=CommandParser,
    )
    for c in commands:
        sub.add_parser(
            c.name, help=c.help, description=c.help[:1].upper() + c.help[1:] + ".", module=c.module
        )
    return p


__all__ = ["Command", "CommandParser", "Entry", "Parser", "UsageError", "build_parser"]

"""The protocol every ``npu-jax`` subcommand follows, the parser, and the usage error.

A subcommand is a module with::

    NAME = "info"                                  # the word on the command line
    HELP = "list the presets and the assumed figures"
    def register(subparsers) -> argparse.ArgumentParser: ...   # add its parser and flags
    def run(args) -> int: ...                       # do the work; returns the exit code

and, if it adds a section to ``npu-jax demo``, a function named in
:data:`npu_jax.cli.registry.DEMO_SECTIONS`. :func:`build_parser` calls ``register`` of each module and
wires ``run`` in: ``args.func`` is the module's ``run`` and ``args.parser`` its parser (so ``run`` can
report a bad combination of flags with ``args.parser.error``, one line naming the flag).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from types import ModuleType
from typing import Protocol


class UsageError(Exception):
    """Bad command-line input; the message is one line that names the parameter."""


class Parser(argparse.ArgumentParser):
    """argparse, but an error is one line on stderr and exit code 2 (no usage block)."""

    def error(self, message: str):
        raise UsageError(f"{self.prog}: error: {message}")


class Command(Protocol):
    """What a subcommand module provides (a module satisfies it structurally)."""

    NAME: str
    HELP: str

    def register(self, subparsers) -> argparse.ArgumentParser: ...

    def run(self, args: argparse.Namespace) -> int: ...


def build_parser(commands: Sequence[ModuleType]) -> Parser:
    """The ``npu-jax`` parser with one subcommand per module of ``commands``, in that order."""
    p = Parser(
        prog="npu-jax",
        description="Emulate an Ascend-style AI Core in JAX: the numbers a "
        "kernel computes and the cycles and bytes it costs.",
    )
    sub = p.add_subparsers(
        dest="command", required=True, metavar="{" + ",".join(c.NAME for c in commands) + "}"
    )
    for command in commands:
        sp = command.register(sub)
        sp.set_defaults(func=command.run, parser=sp)
    return p


__all__ = ["Command", "Parser", "UsageError", "build_parser"]

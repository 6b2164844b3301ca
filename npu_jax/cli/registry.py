"""The command registry: which modules make the ``npu-jax`` subcommands and the demo's sections.

This is the one place where ``npu_jax`` reaches up to the packages built on it (``fusion``,
``precision``): it names their modules as strings and imports them with :mod:`importlib` when the
parser is built or the demo runs, never when ``npu_jax`` or ``npu_jax.cli`` is imported. Everything
else in ``npu_jax`` imports only downwards.

A new subcommand is a module that follows :class:`npu_jax.cli.base.Command`, added to
:data:`COMMANDS`; a new demo section is a ``section(opts: DemoOptions) -> str`` function, added to
:data:`DEMO_SECTIONS` as ``"module:function"`` (or as the function itself).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType

# the subcommands, in the order ``npu-jax --help`` lists them
COMMANDS: tuple[str, ...] = (
    "npu_jax.cli.demo",
    "npu_jax.cli.info",
    "npu_jax.cli.matmul",
    "npu_jax.cli.conv2d",
    "precision.cli",
    "fusion.cli",
    "npu_jax.cli.search",
)

# the demo's sections, in the order printed: the GEMM, the precision table, the Conv2D strategies
# table (tests/test_cli.py reads its reading as the end of its section), the fusion table
DEMO_SECTIONS: list[str | Callable] = [
    "npu_jax.cli.demo:gemm_section",
    "precision.cli:demo_section",
    "npu_jax.cli.demo:conv_strategies_section",
    "fusion.cli:demo_section",
]


def commands() -> list[ModuleType]:
    """The modules of :data:`COMMANDS`, imported."""
    return [importlib.import_module(name) for name in COMMANDS]


def section(entry: str | Callable) -> Callable:
    """One entry of :data:`DEMO_SECTIONS` as a function (``"module:function"`` is imported)."""
    if callable(entry):
        return entry
    module, _, name = entry.partition(":")
    return getattr(importlib.import_module(module), name)


__all__ = ["COMMANDS", "DEMO_SECTIONS", "commands", "section"]

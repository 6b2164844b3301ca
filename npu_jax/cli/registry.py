"""The command registry: the ``npu-jax`` subcommands (name, one-line help, module) and the demo's sections.

This is the one place where ``npu_jax`` reaches up to the packages built on it (``fusion``,
``precision``): it names their modules as strings, imported with :mod:`importlib` only when that
subcommand is parsed (:class:`npu_jax.cli.base.CommandParser`) or the demo runs, never when
``npu_jax`` or ``npu_jax.cli`` is imported. So ``npu-jax --help`` imports no subcommand module and no
JAX. Everything else in ``npu_jax`` imports only downwards.

A new subcommand is a module that follows :class:`npu_jax.cli.base.Command` (``register(parser)``,
``run(args)``), added to :data:`COMMANDS` with its name and help; a new demo section is a
``section(opts: DemoOptions) -> str`` function, added to :data:`DEMO_SECTIONS` as
``"module:function"`` (or as the function itself).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType

from npu_jax.cli.base import Entry

# the subcommands, in the order ``npu-jax --help`` lists them
COMMANDS: tuple[Entry, ...] = (
    Entry("demo", "run the default workload and explain its report", "npu_jax.cli.demo"),
    Entry("info", "list the presets and the assumed figures", "npu_jax.cli.info"),
    Entry("matmul", "run one GEMM (M, K) @ (K, N) on random fp16 data", "npu_jax.cli.matmul"),
    Entry("conv2d", "run Conv2D layers (NCHW x OIHW) on random fp16 data", "npu_jax.cli.conv2d"),
    Entry("precision", "precision lab: strategies vs depth, formats, baselines", "precision.cli"),
    Entry("fuse", "Conv2D + epilogue (bias, ReLU, ...): unfused vs fused, what fusion saves", "fusion.cli"),
    Entry("search", "find a Conv2D tiling by gradient descent on the cost model", "npu_jax.cli.search"),
    Entry(
        "model", "an ONNX network layer by layer: time, fusion, numbers vs onnxruntime", "npu_jax.cli.model"
    ),
    Entry(
        "sweep", "a grid of network estimates (hw x network x batch x policy), resumable", "npu_jax.cli.sweep"
    ),
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
    """The modules of :data:`COMMANDS`, imported (each follows :class:`npu_jax.cli.base.Command`)."""
    return [importlib.import_module(c.module) for c in COMMANDS]


def section(entry: str | Callable) -> Callable:
    """One entry of :data:`DEMO_SECTIONS` as a function (``"module:function"`` is imported)."""
    if callable(entry):
        return entry
    module, _, name = entry.partition(":")
    return getattr(importlib.import_module(module), name)


__all__ = ["COMMANDS", "DEMO_SECTIONS", "commands", "section"]

"""Argument types of the ``npu-jax`` commands: text in, a value or one ``ArgumentTypeError`` out.

Each error says what was expected and quotes the value; argparse puts the parameter in front
(``npu-jax conv2d: error: argument --stride: must be an integer >= 1 or a pair H,W of them, got '0'``).
The subcommands of ``fusion`` and ``precision`` use them too.

Example:
    >>> from npu_jax.cli.types import int_or_pair, padding
    >>> int_or_pair(1)("2,1"), padding("same")
    ((2, 1), 'SAME')
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence

from npu_jax.hw import presets
from npu_jax.hw.config import HardwareConfig


def positive_int(text: str) -> int:
    """``"3"`` -> 3; zero, negatives and non-integers are refused."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return v


def fraction(text: str) -> float:
    """``"0.01"`` -> 0.01: a number in (0, 1]."""
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1], e.g. 0.01; got {text!r}")
    return v


def preset(text: str) -> HardwareConfig:
    """A preset name (``910b``, ``ascend910``, ``tiny``, ...) -> its :class:`HardwareConfig`."""
    try:
        return presets.get(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).rstrip(".")) from None


def int_or_pair(minimum: int) -> Callable[[str], int | tuple[int, int]]:
    """A type for ``"2"`` -> 2 and ``"2,1"`` -> (2, 1), each value at least ``minimum``."""

    def parse(text: str):
        parts = text.split(",")
        try:
            vals = tuple(int(p) for p in parts)
        except ValueError:
            vals = ()
        if len(vals) not in (1, 2) or min(vals) < minimum:
            raise argparse.ArgumentTypeError(
                f"must be an integer >= {minimum} or a pair H,W of them, got {text!r}"
            )
        return vals[0] if len(vals) == 1 else vals

    return parse


def padding(text: str):
    """An int, a pair ``H,W`` (>= 0), ``SAME`` or ``VALID`` (any case)."""
    if text.upper() in ("SAME", "VALID"):
        return text.upper()
    try:
        return int_or_pair(0)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"must be an integer >= 0, a pair H,W of them, SAME or VALID, got {text!r}"
        ) from None


def output_path(text: str) -> str:
    """A file to write: its folder must exist."""
    folder = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"folder {folder!r} does not exist (for {text!r})")
    return text


def choice_list(allowed: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
    """A type for a comma list of names, each one of ``allowed``: ``"a,b"`` -> ("a", "b")."""

    def parse(text: str) -> tuple[str, ...]:
        items = tuple(t.strip() for t in text.split(",") if t.strip())
        bad = [t for t in items if t not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"unknown {bad or text!r}; choose from {', '.join(allowed)}")
        return items

    return parse


def add_preset_argument(parser: argparse.ArgumentParser, default: str | None) -> None:
    """``--preset NAME`` (one of :data:`npu_jax.hw.presets.PRESETS`); ``default=None`` means all."""
    parser.add_argument(
        "--preset",
        type=preset,
        default=default,
        metavar="NAME",
        help=f"hardware preset: one of {sorted(presets.PRESETS)}"
        + (f" (default {default})" if default else " (default: all)"),
    )


__all__ = [
    "add_preset_argument",
    "choice_list",
    "fraction",
    "int_or_pair",
    "output_path",
    "padding",
    "positive_int",
    "preset",
]

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
import math
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


def int_in(lo: int, hi: int) -> Callable[[str], int]:
    """A type for an integer in [lo, hi] (``--seed``: [0, 2**63 - 1]; ``--finalists``: [0, 64])."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            v = None
        if v is None or not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"must be an integer in [{lo}, {hi}], got {text!r}")
        return v

    return parse


def folder(text: str) -> str:
    """A folder to read and write in (it may not exist yet; a file of that name is refused)."""
    if not text or os.path.isfile(text) or (os.path.exists(text) and not os.path.isdir(text)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a folder; give a folder path")
    return text


def fraction(text: str) -> float:
    """``"0.01"`` -> 0.01: a number in (0, 1]."""
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1], e.g. 0.01; got {text!r}")
    return v


def power_of_two_or_auto(text: str) -> float | str:
    """``auto`` or a positive power of two: ``0.125``, ``2^-3`` or ``2**-3``."""
    if text == "auto":
        return text
    base, sep, exp = text.replace("**", "^").partition("^")
    try:
        v = 2.0 ** int(exp) if sep and base.strip() == "2" else float(text)
    except (ValueError, OverflowError):
        v = 0.0
    if not (0 < v < float("inf")) or math.frexp(v)[0] != 0.5:
        raise argparse.ArgumentTypeError(
            f"must be 'auto' or a positive power of two such as 2^-3, got {text!r}"
        )
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
    """A file to write, checked before any work: not a folder, its folder exists and is writable, and
    an existing file is writable (whether it may be overwritten is ``--force``'s business:
    :func:`npu_jax.cli.output.check_outputs`)."""
    if not text:
        raise argparse.ArgumentTypeError("must be a file path, got ''")
    folder = os.path.dirname(os.path.abspath(text))
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a folder; give a file path in it")
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"folder {folder!r} does not exist (for {text!r})")
    if not os.access(folder, os.W_OK | os.X_OK) or (os.path.exists(text) and not os.access(text, os.W_OK)):
        raise argparse.ArgumentTypeError(f"cannot write {text!r} (no permission); choose another path")
    # os.access answers yes to root on any folder (/proc, a read-only mount): try the file itself
    try:
        if os.path.exists(text):
            open(text, "r+b").close()  # opened for writing, not truncated
        else:
            open(text, "xb").close()
            os.remove(text)
    except OSError as e:
        raise argparse.ArgumentTypeError(
            f"cannot write {text!r} ({e.strerror}); choose another path"
        ) from None
    return text


def output_or_stdout(text: str) -> str:
    """``-`` (standard output) or a file to write (:func:`output_path`)."""
    return text if text == "-" else output_path(text)


def input_file(text: str) -> str:
    """A file to read: it must exist and be a file."""
    if not os.path.isfile(text):
        what = "is a folder" if os.path.isdir(text) else "does not exist"
        raise argparse.ArgumentTypeError(f"file {text!r} {what}")
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


def add_preset_argument(parser: argparse.ArgumentParser, default: str | None, what: str = "all") -> None:
    """``--preset NAME`` (one of :data:`npu_jax.hw.presets.PRESETS`; ``default=None`` means ``what``) and
    ``--hw-ini PATH`` (:func:`add_hw_ini_argument`)."""
    parser.add_argument(
        "--preset",
        type=preset,
        default=default,
        metavar="NAME",
        help=f"hardware preset: one of {sorted(presets.PRESETS)}"
        + (f" (default {default})" if default else f" (default: {what})"),
    )
    add_hw_ini_argument(parser)


def add_hw_ini_argument(parser: argparse.ArgumentParser) -> None:
    """``--hw-ini PATH``: a CANN platform-config ``.ini`` read over the preset(s)
    (:meth:`HardwareConfig.from_ini`); :func:`resolve_hardware` applies it after parsing."""
    parser.add_argument(
        "--hw-ini",
        type=input_file,
        metavar="PATH",
        help="a CANN platform .ini ([SoCInfo], [AICoreSpec], ...) whose figures replace the preset's "
        "(default preset ascend910b)",
    )


def resolve_hardware(args: argparse.Namespace) -> None:
    """Read ``--hw-ini`` over ``args.preset`` (a config, a tuple of them, or None for the ini over the
    910B), in place; a bad file is one usage error naming ``--hw-ini``."""
    path = getattr(args, "hw_ini", None)
    if path is None:
        return
    try:
        if isinstance(args.preset, tuple):
            args.preset = tuple(HardwareConfig.from_ini(path, base=hw) for hw in args.preset)
        else:
            args.preset = HardwareConfig.from_ini(path, base=args.preset)
    except (OSError, ValueError, TypeError) as e:
        args.parser.error(f"argument --hw-ini: {' '.join(str(e).split())}")


__all__ = [
    "add_hw_ini_argument",
    "add_preset_argument",
    "choice_list",
    "fraction",
    "input_file",
    "int_or_pair",
    "output_or_stdout",
    "output_path",
    "padding",
    "positive_int",
    "preset",
    "resolve_hardware",
]

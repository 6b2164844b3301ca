"""``npu-jax info``: the presets side by side, and the table of assumed figures."""

from __future__ import annotations

import argparse
import dataclasses

from npu_jax.cli.types import add_preset_argument
from npu_jax.hw import presets
from npu_jax.hw.config import Assumed, HardwareConfig

NAME = "info"
HELP = "list the presets and the assumed figures"

KiB = 1024


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    fmt = lambda row: "  ".join(  # noqa: E731
        str(x).ljust(w) if i == 0 else str(x).rjust(w) for i, (x, w) in enumerate(zip(row, widths))
    )
    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


def _preset_row(hw: HardwareConfig) -> list[str]:
    chip = hw.chip_gm_bytes_per_cycle
    return [
        hw.name,
        str(hw.num_cores),
        f"{hw.clock_ghz:g}",
        f"{hw.peak_tflops('fp16'):.2f}",
        *(f"{hw.buffer_bytes(b) // KiB}" for b in ("L1", "L0A", "L0B", "L0C", "UB")),
        f"{hw.gm_bytes_per_cycle:g}",
        f"{chip:g}" if chip is not None else "-",
        "coupled" if hw.coupled else "separated",
        hw.overflow_mode,
    ]


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``info`` to the ``npu-jax`` subparsers."""
    i = subparsers.add_parser(NAME, help=HELP)
    add_preset_argument(i, None)
    return i


def run(args) -> int:
    """Print the presets (or the one asked for) and the assumed figures."""
    chosen = [args.preset] if args.preset is not None else [f() for f in presets.PRESETS.values()]
    header = [
        "preset",
        "cores",
        "GHz",
        "TFLOPS fp16",
        "L1 KiB",
        "L0A KiB",
        "L0B KiB",
        "L0C KiB",
        "UB KiB",
        "GM B/cyc/core",
        "GM B/cyc chip",
        "data path",
        "overflow",
    ]
    print("Presets (figures per core unless marked; sources cited in npu_jax/hw/presets.py)")
    print(_table(header, [_preset_row(hw) for hw in chosen]))
    print()
    assumed = chosen[0].assumed if len(chosen) == 1 else Assumed()
    rows = [
        [
            f.name,
            f"{getattr(assumed, f.name):g}",
            "B/cycle" if f.name.endswith("bytes_per_cycle") else "cycles",
            "assumed, not published",
        ]
        for f in dataclasses.fields(Assumed)
    ]
    print("Assumed figures (HardwareConfig.assumed: the model's guesses; change them to ask 'what if')")
    print(_table(["name", "value", "unit", "status"], rows))
    # A rate that a preset publishes overrides the assumed one; say where the guess is still used.
    for name in ("l1_to_l0b_bytes_per_cycle", "ub_to_gm_bytes_per_cycle"):
        guessed = [hw.name for hw in chosen if getattr(hw, name) is None]
        print(
            f"  {name}: assumed value used by {', '.join(guessed) or 'none of these'}; "
            f"the others publish their own."
        )
    return 0


__all__ = ["HELP", "NAME", "register", "run"]

"""``npu-jax info``: the presets side by side, and the table of assumed figures (no JAX needed)."""

from __future__ import annotations

import argparse
import dataclasses

from npu_jax.cli.output import add_results_arguments, print_written, table, write_results
from npu_jax.cli.types import add_preset_argument
from npu_jax.hw import presets
from npu_jax.hw.config import Assumed, HardwareConfig

KiB = 1024

PRESET_COLUMNS = (
    "preset",
    "cores",
    "GHz",
    "TFLOPS fp16",
    "TOPS int8",
    "L1 KiB",
    "L0A KiB",
    "L0B KiB",
    "L0C KiB",
    "UB KiB",
    "GM B/cyc/core",
    "GM B/cyc chip",
    "data path",
    "overflow",
)


def _preset_row(hw: HardwareConfig) -> list:
    return [
        hw.name,
        hw.num_cores,
        hw.clock_ghz,
        round(hw.peak_tflops("fp16"), 2),
        round(hw.peak_tflops("int8"), 2),
        *(hw.buffer_bytes(b) // KiB for b in ("L1", "L0A", "L0B", "L0C", "UB")),
        hw.gm_bytes_per_cycle,
        hw.chip_gm_bytes_per_cycle,
        "coupled" if hw.coupled else "separated",
        hw.overflow_mode,
    ]


_UNITS = {"launch_us": "us", "hbm_sustained": "x nominal"}


def _own(assumed: Assumed) -> list[str]:
    """The Assumed figures a preset sets to other than the defaults (calibrated: its docstring says)."""
    default = Assumed()
    return [
        f.name for f in dataclasses.fields(Assumed) if getattr(assumed, f.name) != getattr(default, f.name)
    ]


def register(parser: argparse.ArgumentParser) -> None:
    """The flags of ``npu-jax info``."""
    add_preset_argument(parser, None, what="every preset")
    add_results_arguments(parser, "the presets' rows and the assumed figures")


def run(args) -> int:
    """Print the presets (or the one asked for) and the assumed figures."""
    chosen = [args.preset] if args.preset is not None else [f() for f in presets.PRESETS.values()]
    preset_rows = [_preset_row(hw) for hw in chosen]
    assumed = chosen[0].assumed if len(chosen) == 1 else Assumed()
    own = _own(assumed)
    assumed_rows = [
        [
            f.name,
            getattr(assumed, f.name),
            _UNITS.get(f.name, "B/cycle" if f.name.endswith("bytes_per_cycle") else "cycles"),
            "calibrated for this preset (its docstring)" if f.name in own else "assumed, not published",
        ]
        for f in dataclasses.fields(Assumed)
    ]
    records = [dict(zip(PRESET_COLUMNS, r, strict=True)) for r in preset_rows]
    data = {"presets": records, "assumed": {r[0]: r[1] for r in assumed_rows}}
    if write_results(args, data, records):
        return 0
    print("Presets (figures per core unless marked; sources cited in npu_jax/hw/presets.py)")
    print(table(PRESET_COLUMNS, preset_rows))
    print()
    print("Assumed figures (HardwareConfig.assumed: the model's guesses; change them to ask 'what if')")
    print(table(["name", "value", "unit", "status"], assumed_rows))
    # A rate that a preset publishes overrides the assumed one; say where the guess is still used.
    for name in ("l1_to_l0b_bytes_per_cycle", "ub_to_gm_bytes_per_cycle"):
        guessed = [hw.name for hw in chosen if getattr(hw, name) is None]
        print(
            f"  {name}: assumed value used by {', '.join(guessed) or 'none of these'}; "
            f"the others publish their own."
        )
    if len(chosen) > 1:  # the table shows the defaults; name the presets that set their own
        for hw in chosen:
            if _own(hw.assumed):
                print(
                    f"  {hw.name} sets its own {', '.join(_own(hw.assumed))} (npu-jax info --preset {hw.name})."
                )
    print_written(args)
    return 0


__all__ = ["register", "run"]

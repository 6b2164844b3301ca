"""The vendor's own measured kernels, ported onto ``npu_jax.asc``, against their published profiles.

The vendor publishes msprof profiles of its best-practice kernels on an Atlas A2 part (the
``ascend910b1`` preset: 24 AIC / 48 AIV at 1.85 GHz): per case the Task Duration and the busy time
of each pipe (averaged over the cores). Each case here runs timing-only at the published size on
the port in ``examples/asc/`` and prints the published figure, the emulated one and their ratio.

    python benchmarks/vendor_kernels.py [--cases add:1,add:6] [--json PATH]

Kernels: data_copy (GM -> UB block granularity, scenarios 1-3; the calibration figure),
add_high_performance (cases 1-6). Emulated per-pipe times are a pipe's busy cycles summed over the launched cores, divided by the
cores and the clock (msprof's ``aiv_*_time`` is the same average). Published figures:
``shared/reference/ascend-measured.md``, from the READMEs of asc-devkit's
``examples/01_simd_cpp_api/05_best_practices``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples", "asc"))

import vendor_add  # noqa: E402
import vendor_data_copy  # noqa: E402

import npu_jax  # noqa: E402

# (kernel, case) -> published Task Duration and per-pipe times (us), by msprof's names. data_copy case 3
# is the one figure a constant was calibrated from (Assumed.hbm_sustained of the 910B1): it checks the
# calibration; every other row validates.
PUBLISHED = {
    ("data_copy", 1): dict(task_us=564.84, aiv_mte2=548.161),
    ("data_copy", 2): dict(task_us=233.54, aiv_mte2=220.772),
    ("data_copy", 3): dict(task_us=215.82, aiv_mte2=202.657),
    ("add_high_performance", 1): dict(task_us=6909.6, aiv_vec=761.65, aiv_mte2=6208.762, aiv_mte3=2613.205),
    ("add_high_performance", 2): dict(task_us=306.58, aiv_vec=15.885, aiv_mte2=215.485, aiv_mte3=54.33),
    ("add_high_performance", 3): dict(task_us=268.5, aiv_vec=12.845, aiv_mte2=184.369, aiv_mte3=57.354),
    ("add_high_performance", 4): dict(task_us=264.02, aiv_vec=12.846, aiv_mte2=250.528, aiv_mte3=84.988),
    ("add_high_performance", 5): dict(task_us=187.68, aiv_vec=12.846, aiv_mte2=175.997, aiv_mte3=160.291),
    ("add_high_performance", 6): dict(task_us=184.52, aiv_vec=6.954, aiv_mte2=171.611, aiv_mte3=121.442),
}
# msprof pipe name -> the report's lane
LANES = {"aiv_vec": "VECTOR", "aiv_mte2": "MTE2", "aiv_mte3": "MTE3"}  # the AIC's come with the matmul ports
RUNNERS = {"add_high_performance": vendor_add.run_case, "data_copy": vendor_data_copy.run_case}
SHORT = {"add": "add_high_performance"}


def emulate(kernel: str, case: int, hw) -> dict:
    """One case run timing-only: its Task Duration and per-pipe times (us), cores, bottleneck."""
    t0 = time.perf_counter()
    _, rep = RUNNERS[kernel](case, hw, checks="none")  # timing: the sanitizers' analysis off
    wall = time.perf_counter() - t0
    clock_mhz = hw.clock_ghz * 1e3
    cores = rep.n_cores
    pipes = {name: rep.pipe_busy[lane] / cores / clock_mhz for name, lane in LANES.items()}
    return dict(task_us=rep.time_us, cores=cores, bottleneck=rep.bottleneck, wall_s=wall, **pipes)


def parse_cases(text: str | None) -> list[tuple[str, int]]:
    if not text:
        return list(PUBLISHED)
    out = []
    for part in text.split(","):
        name, _, case = part.partition(":")
        kernel = SHORT.get(name, name)
        if (kernel, int(case or -1)) not in PUBLISHED:
            raise SystemExit(f"--cases: {part!r} is not one of {[f'{k}:{c}' for k, c in PUBLISHED]}.")
        out.append((kernel, int(case)))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", help="comma-separated kernel:case (e.g. add:1,add:6); default every case")
    ap.add_argument("--json", metavar="PATH", help="write the rows as JSON")
    args = ap.parse_args(argv)
    hw = npu_jax.presets.ascend910b1()
    rows = []
    print(f"{'kernel':<22}{'case':>5}  {'figure':<9}{'published':>11}{'emulated':>11}{'ratio':>7}")
    for kernel, case in parse_cases(args.cases):
        pub = PUBLISHED[kernel, case]
        emu = emulate(kernel, case, hw)
        row = {"kernel": kernel, "case": case, "published_us": pub["task_us"], "emulated_us": emu["task_us"]}
        row["ratio"] = emu["task_us"] / pub["task_us"]
        for name, value in pub.items():
            if name != "task_us":
                row[f"{name}_published_us"], row[f"{name}_emulated_us"] = value, emu[name]
        row.update(cores=emu["cores"], bottleneck=emu["bottleneck"], wall_s=round(emu["wall_s"], 1))
        rows.append(row)
        for name, value in pub.items():
            e = emu[name]
            label = "task" if name == "task_us" else name
            print(f"{kernel:<22}{case:>5}  {label:<9}{value:>11.1f}{e:>11.1f}{e / value:>7.2f}")
        print(
            f"{'':<27}bottleneck {emu['bottleneck']}, {emu['cores']} cores, {emu['wall_s']:.0f} s to emulate"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"preset": hw.name, "cases": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

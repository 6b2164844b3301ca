"""A network under the layer schedule and the "l2" schedule, and what each part of the l2 schedule gives.

    python benchmarks/network_schedule.py resnet50 --preset 310p --batch 64 [--int8] [--stacks]
        [--hbm-sustained F] [--schedules layer l2]

Prints images/s under: the layer schedule; the l2 schedule the model chooses; the same stacks run
over the whole batch (no slicing: the working sets do not fit, each kernel keeps what its own rule
keeps); every layer alone at the slice sizes the l2 schedule chose (slicing without stacking); and
the cycles the stacks' weights save by staying in L2 across slices (each sliced layer's first-slice
kernels against its later slices'). Every figure is an estimate of the same model (timing only);
``Model.run(schedule=...)`` gives the same cycles (tests/test_model_schedule.py). ``--hbm-sustained``
replaces the preset's ``Assumed.hbm_sustained`` (a what-if of the chip's DRAM rate: docs/fidelity.md);
``--schedules`` prints only those rows (the parts of the l2 schedule need "l2").
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import npu_jax
from npu_jax.model import zoo
from npu_jax.model.schedule import divisors


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("network", choices=zoo.NETWORKS)
    ap.add_argument("--preset", default="310p")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--int8", action="store_true", help="price the convs and GEMMs as int8")
    ap.add_argument("--stacks", action="store_true", help="print the chosen stacks")
    ap.add_argument("--hbm-sustained", type=float, help="the fraction of the nominal DRAM rate sustained")
    ap.add_argument("--schedules", nargs="+", choices=("layer", "l2"), default=("layer", "l2"))
    args = ap.parse_args()
    hw = npu_jax.presets.get(args.preset)
    if args.hbm_sustained is not None:
        hw = hw.replace(assumed=dataclasses.replace(hw.assumed, hbm_sustained=args.hbm_sustained))
    policy = npu_jax.Policy(operand="int8", output="int8") if args.int8 else None
    m = npu_jax.model.load(zoo.build(args.network))
    b = args.batch

    def row(label, schedule):
        t0 = time.perf_counter()
        rep = m.estimate(batch=b, hw=hw, policy=policy, schedule=schedule)
        wait = sum(la.wait_cycles for la in rep.layers)
        dram = sum(k.hbm_bytes for la in rep.layers for k in la.kernels)
        print(
            f"| {label} | {rep.cycles:,} | {rep.images_per_second:,.0f} | {rep.launches} | "
            f"{100 * rep.launch_cycles / rep.cycles:.1f}% | {100 * wait / rep.cycles:.1f}% | {dram / 1e6:,.0f} | "
            f"{time.perf_counter() - t0:.0f} s |",
            flush=True,
        )
        return rep

    what = f", hbm_sustained {hw.assumed.hbm_sustained}" if args.hbm_sustained is not None else ""
    print(f"{args.network} on {hw.name}, batch {b}, {'int8' if args.int8 else 'fp16'}{what}")
    print("| schedule | cycles | img/s | kernels | launches | DRAM waits | kernels' DRAM MB | estimated in |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    if "layer" in args.schedules:
        row("layer", "layer")
    if "l2" not in args.schedules:
        return
    l2 = row("l2 (the model's choice)", "l2")
    stacks = l2.schedule.stacks
    row("l2's stacks, not sliced", m.make_schedule(b, [(len(s.layers), b) for s in stacks], hw, policy))
    alone = [(1, s.images) for s in stacks for _ in s.layers]
    row("l2's slices, no stacks", m.make_schedule(b, alone, hw, policy))
    saved = 0
    for st in stacks:
        for name in st.layers:
            la = l2.layer(name)
            per = len(la.kernels) // st.slices
            first = sum(k.cycles for k in la.kernels[:per])
            later = sum(k.cycles for k in la.kernels[per : 2 * per]) if st.slices > 1 else first
            saved += (st.slices - 1) * (first - later)
    print(
        f"weights kept across slices save {saved:,} cycles ({100 * saved / l2.cycles:.1f}% of the l2 schedule's); "
        f"slice sizes a stack may take: the divisors of {b}: {divisors(b)}"
    )
    if args.stacks:
        print(l2.schedule.table())


if __name__ == "__main__":
    main()

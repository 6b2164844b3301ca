"""Whole-network timing-only estimate of a zoo network (ONNX, through ``npu_jax.model``): per-layer table,
totals, images/s, the fusion saving, and how long the estimate took on this host.

    python benchmarks/model_network.py resnet50 --preset 910b --batch 1 8 [--unfused] [--trace out.json] [--plot out.png]
    python benchmarks/model_network.py resnet50 --preset 310p --batch 64 --schedule layer l2 [--int8] [--stacks]
"""

from __future__ import annotations

import argparse
import time

import npu_jax
from npu_jax.hw.config import L2_POLICIES
from npu_jax.model import fusion_saving, zoo
from npu_jax.model.breakdown import breakdown
from npu_jax.model.kernels import Setting
from npu_jax.model.schedule import SCHEDULES


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("network", choices=zoo.NETWORKS)
    ap.add_argument("--preset", default="910b")
    ap.add_argument("--batch", type=int, nargs="+", default=[1])
    ap.add_argument("--image", type=int, default=None)
    ap.add_argument("--unfused", action="store_true", help="also estimate unfused and table the saving")
    ap.add_argument("--layers", action="store_true", help="print the per-layer table")
    ap.add_argument(
        "--breakdown",
        action="store_true",
        help="cycles by kind of layer and bottleneck, conv GM bytes by role",
    )
    ap.add_argument("--trace", default=None, help="Chrome trace of the last batch (fused)")
    ap.add_argument("--plot", default=None, help="per-layer time plot of the last batch (fused)")
    ap.add_argument("--l2-policy", choices=L2_POLICIES, help="the L2's rule for re-reads (the preset's)")
    ap.add_argument(
        "--schedule", choices=SCHEDULES, nargs="+", default=["layer"], help="network schedules to estimate"
    )
    ap.add_argument(
        "--int8", action="store_true", help="price the convs and GEMMs as int8 (int8 activations)"
    )
    ap.add_argument("--stacks", action="store_true", help="print the l2 schedule's stacks")
    args = ap.parse_args()
    policy = npu_jax.Policy(operand="int8", output="int8") if args.int8 else None
    hw = npu_jax.presets.get(args.preset)
    if args.l2_policy:
        hw = hw.replace(l2_policy=args.l2_policy)
    kwargs = {"image": args.image} if args.image else {}
    m = npu_jax.model.load(zoo.build(args.network, **kwargs))
    for b in args.batch:
        for sched in args.schedule:
            t0, c0 = time.perf_counter(), time.process_time()
            rep = m.estimate(batch=b, hw=hw, schedule=sched, policy=policy)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            if args.layers:
                print(rep.summary())
            if args.stacks and sched == "l2":
                print(rep.schedule.table())
            if args.breakdown:
                print(breakdown(m, rep, Setting(hw, policy or npu_jax.Policy())).table())
            wait = sum(la.wait_cycles for la in rep.layers)
            print(
                f"{args.network} {hw.name} batch {b} {rep.operand} schedule {sched}: {rep.cycles:,} cycles = "
                f"{rep.time_us / 1e3:.3f} ms, {rep.images_per_second:,.0f} img/s, {rep.pct_peak:.1f}% of peak, "
                f"{len(rep.layers)} layers, {rep.launches} kernels (launches "
                f"{100 * rep.launch_cycles / rep.cycles:.1f}% of the time, DRAM waits {100 * wait / rep.cycles:.1f}%), "
                f"{rep.flops / 1e9:.2f} GFLOP, DRAM {sum(k.hbm_bytes for la in rep.layers for k in la.kernels) / 1e6:,.0f} MB "
                f"in kernels; estimated in {wall:.1f} s wall, {cpu:.1f} s CPU",
                flush=True,
            )
        if args.unfused:
            t0 = time.process_time()
            un = m.estimate(batch=b, hw=hw, fused=False)
            print(fusion_saving(un, rep).table())
            print(f"(unfused estimate: {time.process_time() - t0:.1f} s CPU)", flush=True)
    if args.trace:
        rep.to_chrome_trace(args.trace)
    if args.plot:
        rep.plot(args.plot)


if __name__ == "__main__":
    main()

"""``npu-jax search``: the differentiable tile search on one layer, or on all of ResNet-50.

    npu-jax search                       # ResNet-50's conv2_x 3x3 layer on the 910B
    npu-jax search --c 256 --k 64 --kh 1 --kw 1 --padding 0 --exhaustive
    npu-jax search --resnet50 --no-verify --json
    npu-jax search --fused                 # the Conv + bias + ReLU kernel (fusion.conv_relu)

Prints the tiling found, the model's and the emulator's cycles, the evaluations spent and (with
``--exhaustive``) the exhaustive optimum of the same space. Bad input: one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys

from npu_jax.cli.types import fraction, int_or_pair, padding, positive_int, preset
from npu_jax.search import baselines
from npu_jax.search.optimise import tile_search
from npu_jax.workload.conv import canonicalize
from npu_jax.workload.resnet50 import resnet50_convs

NAME = "search"
HELP = "find a Conv2D tiling by gradient descent on the cost model"

DEFAULTS = (
    ("n", 1, "batch"),
    ("c", 64, "input channels"),
    ("h", 56, "input height"),
    ("w", 56, "input width"),
    ("k", 64, "output channels"),
    ("kh", 3, "kernel height"),
    ("kw", 3, "kernel width"),
)


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``search`` to the ``npu-jax`` subparsers."""
    s = subparsers.add_parser(
        NAME,
        help=HELP,
        description="Differentiable tile-size search (img2col kernel): optax over "
        "the relaxed cost model, the winner checked on the emulator.",
    )
    for dim, default, what in DEFAULTS:
        s.add_argument(
            f"--{dim}",
            type=positive_int,
            default=default,
            metavar=dim.upper(),
            help=f"{what} (default {default})",
        )
    s.add_argument("--stride", type=int_or_pair(1), default=1, metavar="S", help="S or SH,SW (default 1)")
    s.add_argument(
        "--padding", type=padding, default=1, metavar="P", help="P, PH,PW, SAME or VALID (default 1)"
    )
    s.add_argument("--dilation", type=int_or_pair(1), default=1, metavar="D", help="D or DH,DW (default 1)")
    s.add_argument("--resnet50", action="store_true", help="search every ResNet-50 conv layer instead")
    s.add_argument(
        "--preset",
        type=preset,
        default="ascend910b",
        metavar="NAME",
        help="hardware preset (default ascend910b)",
    )
    s.add_argument("--fused", action="store_true", help="search the fused Conv + bias + ReLU kernel")
    s.add_argument(
        "--budget",
        type=fraction,
        default=0.01,
        metavar="F",
        help="evaluations as a fraction of the layer's space (default 0.01)",
    )
    s.add_argument(
        "--starts",
        type=positive_int,
        default=None,
        help="starts descended at once (default: one per loop order x split)",
    )
    s.add_argument(
        "--steps", type=positive_int, default=16, help="optax steps per start, at most (default 16)"
    )
    s.add_argument("--seed", type=int, default=0, help="PRNG seed of the starts (default 0)")
    s.add_argument("--finalists", type=int, default=2, help="candidates run on the emulator (default 2)")
    s.add_argument("--no-verify", action="store_true", help="skip the emulator runs")
    s.add_argument("--exhaustive", action="store_true", help="also cost the whole space (the optimum)")
    s.add_argument("--json", action="store_true", help="print the results as JSON")
    return s


def run(args) -> int:
    """Run ``npu-jax search`` with parsed ``args``; returns the exit code."""
    hw = args.preset
    if args.resnet50:
        jobs = [(lay.name, lay.x_shape, lay.w_shape, lay.stride, lay.padding, 1) for lay in resnet50_convs()]
    else:
        jobs = [
            (
                "layer",
                (args.n, args.c, args.h, args.w),
                (args.k, args.c, args.kh, args.kw),
                args.stride,
                args.padding,
                args.dilation,
            )
        ]
    for _name, xs, ws, st, pad, dil in jobs:  # bad geometry: one line, exit 2, before any work
        try:
            canonicalize(xs, ws, st, pad, dil)
        except (ValueError, TypeError) as e:
            print(f"npu-jax search: error: {' '.join(str(e).split())}", file=sys.stderr)
            return 2
    out = []
    for name, xs, ws, st, pad, dil in jobs:
        r = tile_search(
            xs,
            ws,
            st,
            pad,
            dil,
            hw=hw,
            fused=args.fused,
            starts=args.starts,
            steps=args.steps,
            seed=args.seed,
            finalists=max(args.finalists, 0),
            verify=not args.no_verify,
            budget=args.budget,
        )
        row = dict(
            layer=name,
            geometry=r.geometry.describe(),
            fused=args.fused,
            tiling=_tiling_dict(r.tiling),
            model_cycles=r.model_cycles,
            emulated_cycles=r.emulated_cycles,
            space=r.space_size,
            evals=r.evals,
            relaxed_evals=r.relaxed_evals,
            exact_evals=r.exact_evals,
            search_s=round(r.seconds, 3),
            verify_s=round(r.verify_seconds, 3),
        )
        if args.exhaustive:
            ex = baselines.exhaustive(r.geometry, hw, args.fused)
            row.update(
                exhaustive_cycles=ex.cycles,
                exhaustive_evals=ex.evals,
                ratio=round(r.model_cycles / ex.cycles, 4),
            )
        out.append(row)
        if not args.json:
            print(_line(row), flush=True)
    if args.json:
        print(json.dumps(out if args.resnet50 else out[0], indent=1))
    elif args.resnet50:
        tot = sum(r["model_cycles"] for r in out)
        print(
            f"ResNet-50 ({len(out)} conv layers) on {hw.name}: {tot:,} cycles in total "
            f"({sum(r['search_s'] for r in out):.1f} s of search)"
        )
    return 0


def _tiling_dict(t) -> dict:
    return dict(
        ho=t.ho,
        wo=t.wo,
        n=t.n,
        cin1=t.cin1,
        k_l0=t.k_l0,
        weights_resident=t.weights_resident,
        stages=t.l1_stages,
        cout_split=t.cout_split,
    )


def _line(r: dict) -> str:
    t = r["tiling"]
    emu = "-" if r["emulated_cycles"] is None else f"{r['emulated_cycles']:,}"
    s = (
        f"{r['layer']}: ho={t['ho']} wo={t['wo']} n={t['n']} cin1={t['cin1']} k_l0={t['k_l0']} "
        f"{'weights-stay' if t['weights_resident'] else 'input-stays'} stages={t['stages']} "
        f"cout_split={t['cout_split']} | model {r['model_cycles']:,} emulated {emu} cycles | "
        f"{r['evals']} evals ({100 * r['evals'] / r['space']:.2f}% of {r['space']:,}), {r['search_s']:.2f} s"
    )
    if "exhaustive_cycles" in r:
        s += f" | exhaustive {r['exhaustive_cycles']:,} ({r['exhaustive_evals']} evals), ratio {r['ratio']:.3f}"
    return s


__all__ = ["DEFAULTS", "HELP", "NAME", "register", "run"]

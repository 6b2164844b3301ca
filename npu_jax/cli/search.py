"""``npu-jax search``: the differentiable tile search on one layer, a file of layers, or all of ResNet-50.

    npu-jax search                       # ResNet-50's conv2_x 3x3 layer on the 910B
    npu-jax search --c 256 --k 64 --kh 1 --kw 1 --padding 0 --exhaustive
    npu-jax search --resnet50 --no-verify --json
    npu-jax search --layers my_layers.csv --csv results.csv
    npu-jax search --fused                 # the Conv + bias + ReLU kernel (fusion.conv_relu)

Prints two tables, one row per layer: the tiling found, then the model's and the emulator's cycles,
the evaluations spent and (with ``--exhaustive``) the exhaustive optimum of the same space.
"""

from __future__ import annotations

import argparse

from npu_jax.cli.layers import LayerSpec, add_layer_arguments, layers_from_args
from npu_jax.cli.output import add_results_arguments, print_written, table, write_results
from npu_jax.cli.types import add_preset_argument, fraction, int_in, positive_int
from npu_jax.search import baselines
from npu_jax.search.optimise import tile_search
from npu_jax.workload.resnet50 import resnet50_convs


def register(parser: argparse.ArgumentParser) -> None:
    """The flags of ``npu-jax search``."""
    parser.description = (
        "Differentiable tile-size search (img2col kernel): optax over the relaxed cost model, the winner "
        "checked on the emulator. One layer (the shape flags), --layers FILE, or --resnet50."
    )
    add_layer_arguments(parser)
    parser.add_argument("--resnet50", action="store_true", help="search every ResNet-50 conv layer instead")
    add_preset_argument(parser, "ascend910b")
    parser.add_argument("--fused", action="store_true", help="search the fused Conv + bias + ReLU kernel")
    parser.add_argument(
        "--budget",
        type=fraction,
        default=0.01,
        metavar="F",
        help="evaluations as a fraction of the layer's space (default 0.01)",
    )
    parser.add_argument(
        "--starts",
        type=positive_int,
        default=None,
        metavar="N",
        help="starts descended at once (default: one per loop order x split)",
    )
    parser.add_argument(
        "--steps",
        type=positive_int,
        default=16,
        metavar="N",
        help="optax steps per start, at most (default 16)",
    )
    parser.add_argument(
        "--seed",
        type=int_in(0, 2**63 - 1),
        default=0,
        metavar="N",
        help="PRNG seed of the starts (default 0)",
    )
    parser.add_argument(
        "--finalists",
        type=int_in(0, 64),
        default=2,
        metavar="N",
        help="candidates run on the emulator (default 2)",
    )
    parser.add_argument("--no-verify", action="store_true", help="skip the emulator runs")
    parser.add_argument("--exhaustive", action="store_true", help="also cost the whole space (the optimum)")
    add_results_arguments(parser, "one record per layer")


def _jobs(args) -> tuple[LayerSpec, ...]:
    if args.resnet50:
        layers_from_args(args, instead="--resnet50")  # refuses shape flags given with it
        if args.layers is not None:
            args.parser.error("argument --layers: not with --resnet50")
        return tuple(LayerSpec(lay) for lay in resnet50_convs())
    return layers_from_args(args)


def run(args) -> int:
    """Run ``npu-jax search`` with parsed ``args``; returns the exit code."""
    hw = args.preset
    jobs = _jobs(args)
    for job in jobs:  # bad geometry: one line, exit 2, before any work
        job.geometry()
    out = []
    bar = args.progress.bar(len(jobs), "tile search (the first layer compiles the cost model)")
    for job in jobs:
        lay = job.layer
        bar.set_postfix_str(lay.name, refresh=True)
        r = tile_search(
            lay.x_shape,
            lay.w_shape,
            lay.stride,
            lay.padding,
            job.dilation,
            hw=hw,
            fused=args.fused,
            starts=args.starts,
            steps=args.steps,
            seed=args.seed,
            finalists=args.finalists,
            verify=not args.no_verify,
            budget=args.budget,
        )
        row = dict(
            layer=lay.name,
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
        bar.update(1)
    bar.close()
    one = len(jobs) == 1 and not args.resnet50 and args.layers is None
    if write_results(args, out[0] if one else out, out):
        return 0
    what = out[0]["geometry"] if one else f"{len(out)} layers"
    print(f"tile search on {what}, {hw.name}{', fused Conv + bias + ReLU' if args.fused else ''}")
    print()
    print(format_tilings(out))
    print()
    print(format_cycles(out))
    if len(out) > 1:
        print(
            f"total: {sum(r['model_cycles'] for r in out):,} model cycles over {len(out)} layers "
            f"({sum(r['search_s'] for r in out):.1f} s of search)"
        )
    print_written(args)
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


def format_tilings(rows: list[dict]) -> str:
    """The tilings found, one row per layer."""
    cols = ["layer", "ho", "wo", "n", "cin1", "k_l0", "resident", "stages", "cout_split"]
    return table(
        cols,
        [
            [
                r["layer"],
                *(r["tiling"][k] for k in ("ho", "wo", "n", "cin1", "k_l0")),
                "weights" if r["tiling"]["weights_resident"] else "input",
                r["tiling"]["stages"],
                r["tiling"]["cout_split"],
            ]
            for r in rows
        ],
    )


def format_cycles(rows: list[dict]) -> str:
    """What each search cost and found: model and emulated cycles, evaluations (and the optimum)."""
    cols = ["layer", "model cycles", "emulated", "evals", "% of space", "space", "search s"]
    ex = "exhaustive_cycles" in rows[0]
    if ex:
        cols += ["exhaustive", "exh. evals", "ratio"]
    return table(
        cols,
        [
            [
                r["layer"],
                r["model_cycles"],
                r["emulated_cycles"],
                r["evals"],
                f"{100 * r['evals'] / r['space']:.2f}",
                r["space"],
                f"{r['search_s']:.2f}",
                *((r["exhaustive_cycles"], r["exhaustive_evals"], f"{r['ratio']:.3f}") if ex else ()),
            ]
            for r in rows
        ],
    )


__all__ = ["format_cycles", "format_tilings", "register", "run"]

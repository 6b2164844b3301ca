"""``npu-jax model PATH.onnx``: a whole ONNX network on the emulated chip, layer by layer.

Timing only by default (every layer priced by the closed-form models, each distinct layer once);
``--numbers`` runs it with data through the emulator's kernels and compares every layer with
onnxruntime (the precision lab's :func:`precision.network.network_errors`). ``PATH`` may also name a
network of :mod:`npu_jax.model.zoo` (``resnet18``, ``resnet50``, ``mobilenet_v2``, ``small_cnn``),
built with random weights, no download.

The reference is onnxruntime's CPU run (:func:`npu_jax.model.calibrate.reference_session`): a float
network with its default graph optimisations; a quantised one (``--policy int8``) with graph
optimisations off, the graph as written -- onnxruntime's fused u8s8 kernels saturate on a CPU without
VNNI, so they are no reference there.
"""

from __future__ import annotations

import argparse
import importlib
import os

import numpy as np

from npu_jax.cli.output import add_output_argument, add_results_arguments, print_written, write_results
from npu_jax.cli.types import add_preset_argument, positive_int, power_of_two_or_auto
from npu_jax.mapping.conv import STRATEGIES

ZOO = ("resnet18", "resnet50", "mobilenet_v2", "small_cnn")
POLICY_NAMES = ("mixed", "fp16", "fp32", "int8")  # precision.strategies.POLICIES, and int8


def _model_source(text: str) -> str:
    if text in ZOO or os.path.isfile(text):
        return text
    what = "is a folder" if os.path.isdir(text) else "does not exist"
    raise argparse.ArgumentTypeError(f"{text!r} {what}; give an .onnx file or one of {', '.join(ZOO)}")


def register(parser: argparse.ArgumentParser) -> None:
    """The flags of ``npu-jax model``."""
    parser.description = (
        "Price an ONNX network on the emulated chip, layer by layer: BatchNormalization folded, "
        "element-wise ops and residual adds fused into the conv epilogues, pooling and the classifier as "
        "their own kernels, every kernel paying its launch. PATH is an .onnx file or one of "
        f"{', '.join(ZOO)} (torchvision's architectures, random weights)."
    )
    parser.add_argument(
        "path", type=_model_source, metavar="PATH", help="an .onnx file or a zoo network name"
    )
    add_preset_argument(parser, "ascend910b")
    parser.add_argument(
        "--batch", type=positive_int, default=1, metavar="N", help="images per run (default 1)"
    )
    parser.add_argument(
        "--image",
        type=positive_int,
        metavar="S",
        help="input height and width of a zoo network (default 224; small_cnn 32)",
    )
    parser.add_argument(
        "--strategy", choices=STRATEGIES, default="img2col", help="Conv2D strategy (default img2col)"
    )
    parser.add_argument(
        "--search", action="store_true", help="tilings by the tile search instead of the chooser"
    )
    parser.add_argument("--unfused", action="store_true", help="run every epilogue as its own vector kernel")
    parser.add_argument(
        "--schedule",
        choices=("layer", "l2"),
        default="layer",
        help="layer: each layer over the whole batch (default); l2: stacks of layers run slice by slice "
        "with their intermediates and weights kept in L2, as the vendor's compiler schedules a network "
        "(the timing-only estimate)",
    )
    parser.add_argument(
        "--fusion", action="store_true", help="also table what fusion saves (unfused vs fused)"
    )
    parser.add_argument(
        "--numbers",
        action="store_true",
        help="run with random data through the emulator and compare every layer with onnxruntime (fp32)",
    )
    parser.add_argument(
        "--policy",
        choices=POLICY_NAMES,
        default="mixed",
        help="precision policy of --numbers (default mixed); int8: quantise the network with "
        "onnxruntime's quantize_static (QDQ, per-channel int8 weights) and time it (with --numbers or "
        "--calibrate, also run it against onnxruntime's int8 network, evaluated as written: graph "
        "optimisations off)",
    )
    parser.add_argument(
        "--calibrate",
        metavar="DIR",
        help="with --policy int8: calibrate (and run) on the .npy input batches in DIR (default: "
        "four random batches)",
    )
    parser.add_argument(
        "--scale",
        type=power_of_two_or_auto,
        default=None,
        metavar="auto|2^E",
        help="--numbers under a network-wide power-of-two scale (auto: calibrated from the reference)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the zoo's weights and of the input")
    add_output_argument(parser, "--trace", "write the whole network's Chrome trace (JSON) to PATH")
    add_output_argument(parser, "--plot", "write a per-layer time plot (PNG) to PATH")
    add_results_arguments(parser, "the network report")


def _load(args):
    """(the ONNX ModelProto, the loaded npu_jax.model.Model)."""
    model_mod = importlib.import_module("npu_jax.model")  # says how to install onnx if it is missing
    if args.path in ZOO:
        zoo = importlib.import_module("npu_jax.model.zoo")
        kwargs = {"seed": args.seed} | ({"image": args.image} if args.image else {})
        proto = zoo.build(args.path, **kwargs)
        return proto, model_mod.load(proto)
    if args.image is not None:
        args.parser.error("argument --image: only for a zoo network (an .onnx file fixes its own input size)")
    m = model_mod.load(args.path)  # a file that is not a model is refused here, by name
    return importlib.import_module("onnx").load(args.path), m


def _input(m, batch: int, seed: int) -> np.ndarray:
    (name,) = m.graph.inputs
    shape = m.graph.shape(name, batch)
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _int8(args, hw, proto, m, fused):
    """--policy int8: (the quantised network's report, the results, the comparison's text or None)."""
    cal = importlib.import_module("npu_jax.model.calibrate")  # needs onnxruntime
    batches = None if args.calibrate is None else cal.load_batches(args.calibrate)
    if m.quantised:  # already quantised: run it as it is, against onnxruntime's int8 network alone
        qproto, qm, proto = proto, m, None
    else:
        where = "random data" if batches is None else f"{len(batches)} batches from {args.calibrate}"
        args.progress.line(
            f"quantising {m.name} with onnxruntime's quantize_static (calibrated on {where}) ..."
        )
        qproto = cal.quantise(proto, batches, seed=args.seed)
        qm = importlib.import_module("npu_jax.model").load(qproto)
    kw = dict(hw=hw, strategy=args.strategy, fused=fused)
    data: dict = {}
    text = None
    if args.numbers or batches is not None:
        x = _input(qm, args.batch, args.seed) if batches is None else batches[0]
        args.progress.line(f"running int8 {m.name} with data at batch {x.shape[0]} on {hw.name} ...")
        outputs, report = qm.run(x, keep=True, **kw)
        numbers = cal.compare(qm, qproto, proto, x, report, outputs)
        data["numbers"] = numbers
        text = cal.table(numbers)
    else:
        args.progress.line(f"pricing int8 {m.name} at batch {args.batch} on {hw.name} ...")
        report = qm.estimate(batch=args.batch, search=args.search, **kw)
    if proto is None:
        return report, data, text or f"int8 {report.images_per_second:,.1f} images/s"
    fp16 = m.estimate(batch=report.batch, search=args.search, **kw)
    data["fp16_images_per_second"] = fp16.images_per_second
    speed = f"int8 {report.images_per_second:,.1f} images/s against fp16 {fp16.images_per_second:,.1f} (the float network)"
    text = speed if text is None else text + "\n" + speed
    return report, data, text


def run(args) -> int:
    """Estimate (or run with ``--numbers``) the network and print its report."""
    hw = args.preset
    proto, m = _load(args)
    fused = not args.unfused
    data: dict = {}
    if args.scale is not None and not args.numbers:
        args.parser.error("argument --scale: only with --numbers")
    if args.calibrate is not None and args.policy != "int8":
        args.parser.error("argument --calibrate: only with --policy int8")
    if args.schedule != "layer" and (args.numbers or args.policy == "int8"):
        args.parser.error(
            "argument --schedule: only for the timing-only estimate (not with --numbers or --policy int8)"
        )
    if args.numbers and m.quantised and args.policy != "int8":
        args.parser.error("argument --numbers: the model is quantised; run it with --policy int8 --numbers")
    if args.policy == "int8":
        if args.scale is not None:
            args.parser.error("argument --scale: not with --policy int8 (the quantisation sets the scales)")
        report, data, errs = _int8(args, hw, proto, m, fused)
    elif args.numbers:
        network = importlib.import_module("precision.network")
        policy = importlib.import_module("precision.strategies").POLICIES[args.policy]
        args.progress.line(
            f"running {m.name} with data at batch {args.batch} on {hw.name} ({args.policy}): every distinct "
            f"layer compiles once, then onnxruntime runs it for the reference ..."
        )
        x = _input(m, args.batch, args.seed)
        errs = network.network_errors(
            proto, x, hw=hw, policy=policy, strategy=args.strategy, fused=fused, scale=args.scale
        )
        report = errs.report
        data["numbers"] = errs.as_dict()
    else:
        args.progress.line(f"pricing {m.name} at batch {args.batch} on {hw.name} ...")
        report = m.estimate(
            batch=args.batch,
            hw=hw,
            strategy=args.strategy,
            search=args.search,
            fused=fused,
            schedule=args.schedule,
        )
    data["report"] = report.as_dict()
    saving = None
    if args.fusion:
        saving = m.fusion_saving(batch=args.batch, hw=hw, strategy=args.strategy, search=args.search)
        data["fusion"] = saving.as_dict()
    if args.trace is not None:
        report.to_chrome_trace(args.trace)
    if args.plot is not None:
        report.plot(args.plot)
    rows = [la.as_dict() for la in report.layers]
    if not write_results(args, data, rows):
        print(report.summary())
        if saving is not None:
            print()
            print(saving.table())
        if args.policy == "int8":
            print()
            print(errs)
        elif args.numbers:
            print()
            print(errs.table())
        for flag, what in (("trace", "Chrome trace"), ("plot", "plot")):
            if getattr(args, flag) is not None:
                print(f"  {what} written to {getattr(args, flag)}")
        print_written(args)
    return 0


__all__ = ["register", "run"]

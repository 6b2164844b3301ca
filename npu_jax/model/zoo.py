"""Real network architectures as ONNX graphs, with random weights and no download.

torchvision's ResNet-18, ResNet-50 and MobileNetV2, layer for layer (the same convolutions, strides,
paddings, groups, residual adds and classifier), written with ``onnx.helper`` in the form an exporter
emits at opset 17: ``Conv`` (no bias) -> ``BatchNormalization`` -> ``Relu`` (``Clip(0, 6)`` for
ReLU6), ``Add`` for the residuals, ``MaxPool``, ``GlobalAveragePool``, ``Flatten`` and ``Gemm``
(``transB=1``). The BatchNormalization nodes are kept (``torch.onnx.export`` folds them into the
convs in eval mode; a graph exported with ``training=TrainingMode.PRESERVE``, or by other tools, keeps
them), so that the importer's folding is exercised. The architectures are checked against
torchvision's published parameter counts (``tests/test_model_zoo.py``), which pins every layer's
shape without torch installed.

Weights are random (``seed``): convolutions He-normal (``sqrt(2 / fan_in)``), BatchNorm scale
U(0.8, 1.2) (U(0.2, 0.4) on the last BN of a residual branch, as trained ResNets have small ones, so
the residual stream does not grow through the depth), shift and running mean N(0, 0.05), running
variance U(0.8, 1.2); the classifier N(0, 0.01). So activations stay O(1) through the depth, as in a
trained network, and fp16 neither overflows nor underflows for the wrong reasons.

    model = zoo.resnet50()                 # onnx.ModelProto; batch dimension symbolic ("N")
    onnx.save(model, "resnet50.onnx")      # or: python -m npu_jax.model.zoo resnet50 resnet50.onnx
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # what onnxruntime >= 1.14 reads; opset 17 needs IR 8
NETWORKS = ("resnet18", "resnet50", "mobilenet_v2", "small_cnn")


@dataclasses.dataclass
class _Builder:
    """Accumulates nodes and initializers; every ``add_*`` returns the name of its output tensor."""

    seed: int
    nodes: list = dataclasses.field(default_factory=list)
    inits: list = dataclasses.field(default_factory=list)

    def __post_init__(self):
        self.rng = np.random.default_rng(self.seed)

    def _init(self, name: str, arr: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(arr, np.float32), name))
        return name

    def conv(self, x: str, name: str, cin: int, cout: int, k: int, stride=1, pad=0, groups=1) -> str:
        fan_in = (cin // groups) * k * k
        w = self.rng.standard_normal((cout, cin // groups, k, k)) * np.sqrt(2.0 / fan_in)
        self._init(f"{name}.weight", w)
        out = f"{name}.out"
        self.nodes.append(
            helper.make_node(
                "Conv",
                [x, f"{name}.weight"],
                [out],
                name=name,
                kernel_shape=[k, k],
                strides=[stride, stride],
                pads=[pad, pad, pad, pad],
                dilations=[1, 1],
                group=groups,
            )
        )
        return out

    def bn(self, x: str, name: str, c: int, small: bool = False) -> str:
        lo, hi = (0.2, 0.4) if small else (0.8, 1.2)
        r = self.rng
        names = [f"{name}.{p}" for p in ("weight", "bias", "running_mean", "running_var")]
        for n_, arr in zip(
            names,
            (
                r.uniform(lo, hi, c),
                0.05 * r.standard_normal(c),
                0.05 * r.standard_normal(c),
                r.uniform(0.8, 1.2, c),
            ),
        ):
            self._init(n_, arr)
        out = f"{name}.out"
        self.nodes.append(
            helper.make_node("BatchNormalization", [x, *names], [out], name=name, epsilon=1e-5, momentum=0.9)
        )
        return out

    def relu(self, x: str, name: str) -> str:
        self.nodes.append(helper.make_node("Relu", [x], [f"{name}.out"], name=name))
        return f"{name}.out"

    def relu6(self, x: str, name: str) -> str:
        lo, hi = self._init(f"{name}.min", np.float32(0.0)), self._init(f"{name}.max", np.float32(6.0))
        self.nodes.append(helper.make_node("Clip", [x, lo, hi], [f"{name}.out"], name=name))
        return f"{name}.out"

    def add(self, a: str, b: str, name: str) -> str:
        self.nodes.append(helper.make_node("Add", [a, b], [f"{name}.out"], name=name))
        return f"{name}.out"

    def maxpool(self, x: str, name: str, k: int, stride: int, pad: int) -> str:
        self.nodes.append(
            helper.make_node(
                "MaxPool",
                [x],
                [f"{name}.out"],
                name=name,
                kernel_shape=[k, k],
                strides=[stride, stride],
                pads=[pad] * 4,
                ceil_mode=0,
            )
        )
        return f"{name}.out"

    def head(self, x: str, cin: int, num_classes: int) -> str:
        """GlobalAveragePool -> Flatten -> Gemm, as torchvision's ``avgpool``/``flatten``/``fc`` export."""
        self.nodes.append(helper.make_node("GlobalAveragePool", [x], ["avgpool.out"], name="avgpool"))
        self.nodes.append(
            helper.make_node("Flatten", ["avgpool.out"], ["flatten.out"], name="flatten", axis=1)
        )
        self._init("fc.weight", 0.01 * self.rng.standard_normal((num_classes, cin)))
        self._init("fc.bias", 0.01 * self.rng.standard_normal(num_classes))
        self.nodes.append(
            helper.make_node("Gemm", ["flatten.out", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1)
        )
        return "logits"

    def model(self, name: str, out: str, cin: int, image: int, batch, num_classes: int) -> onnx.ModelProto:
        x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, cin, image, image])
        y = helper.make_tensor_value_info(out, TensorProto.FLOAT, [batch, num_classes])
        graph = helper.make_graph(self.nodes, name, [x], [y], initializer=self.inits)
        m = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="npu_jax.model.zoo"
        )
        m.ir_version = IR_VERSION
        onnx.checker.check_model(m)
        return m


def _check_args(fn: str, seed, image, num_classes, batch, min_image: int) -> None:
    for pname, v, lo in (("seed", seed, 0), ("image", image, min_image), ("num_classes", num_classes, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ValueError(f"{fn}: {pname} must be an int >= {lo}, got {v!r}.")
    if isinstance(batch, bool) or not (
        isinstance(batch, str) and batch or isinstance(batch, int) and batch >= 1
    ):
        raise ValueError(f"{fn}: batch must be an int >= 1 or a symbolic name such as 'N', got {batch!r}.")


# ---- ResNet -----------------------------------------------------------------------------------------
def _basic(b: _Builder, x: str, name: str, cin: int, planes: int, stride: int) -> tuple[str, int]:
    y = b.relu(
        b.bn(b.conv(x, f"{name}.conv1", cin, planes, 3, stride, 1), f"{name}.bn1", planes), f"{name}.relu1"
    )
    y = b.bn(b.conv(y, f"{name}.conv2", planes, planes, 3, 1, 1), f"{name}.bn2", planes, small=True)
    if stride != 1 or cin != planes:
        x = b.bn(b.conv(x, f"{name}.downsample.0", cin, planes, 1, stride), f"{name}.downsample.1", planes)
    return b.relu(b.add(y, x, f"{name}.add"), f"{name}.relu"), planes


def _bottleneck(b: _Builder, x: str, name: str, cin: int, planes: int, stride: int) -> tuple[str, int]:
    """torchvision's Bottleneck (ResNet v1.5: the stride on the 3x3)."""
    out = planes * 4
    y = b.relu(b.bn(b.conv(x, f"{name}.conv1", cin, planes, 1), f"{name}.bn1", planes), f"{name}.relu1")
    y = b.relu(
        b.bn(b.conv(y, f"{name}.conv2", planes, planes, 3, stride, 1), f"{name}.bn2", planes), f"{name}.relu2"
    )
    y = b.bn(b.conv(y, f"{name}.conv3", planes, out, 1), f"{name}.bn3", out, small=True)
    if stride != 1 or cin != out:
        x = b.bn(b.conv(x, f"{name}.downsample.0", cin, out, 1, stride), f"{name}.downsample.1", out)
    return b.relu(b.add(y, x, f"{name}.add"), f"{name}.relu"), out


def _resnet(name: str, block, blocks, seed, image, num_classes, batch) -> onnx.ModelProto:
    _check_args(name, seed, image, num_classes, batch, 32)
    b = _Builder(seed)
    x = b.relu(b.bn(b.conv("input", "conv1", 3, 64, 7, 2, 3), "bn1", 64), "relu")
    x, c = b.maxpool(x, "maxpool", 3, 2, 1), 64
    for i, (planes, n) in enumerate(zip((64, 128, 256, 512), blocks)):
        for j in range(n):
            x, c = block(b, x, f"layer{i + 1}.{j}", c, planes, 2 if (j == 0 and i > 0) else 1)
    return b.model(name, b.head(x, c, num_classes), 3, image, batch, num_classes)


def resnet18(seed: int = 0, image: int = 224, num_classes: int = 1000, batch="N") -> onnx.ModelProto:
    """torchvision's ResNet-18 (11,689,512 parameters at 1000 classes) with random weights."""
    return _resnet("resnet18", _basic, (2, 2, 2, 2), seed, image, num_classes, batch)


def resnet50(seed: int = 0, image: int = 224, num_classes: int = 1000, batch="N") -> onnx.ModelProto:
    """torchvision's ResNet-50 (25,557,032 parameters at 1000 classes) with random weights."""
    return _resnet("resnet50", _bottleneck, (3, 4, 6, 3), seed, image, num_classes, batch)


# ---- MobileNetV2 --------------------------------------------------------------------------------------
_MBV2 = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


def mobilenet_v2(seed: int = 0, image: int = 224, num_classes: int = 1000, batch="N") -> onnx.ModelProto:
    """torchvision's MobileNetV2 at width 1.0 (3,504,872 parameters at 1000 classes), random weights.

    Inverted residuals (1x1 expand, 3x3 depthwise with ``group`` = channels, 1x1 project, residual add
    when stride 1 and channels match), ReLU6 as ``Clip(0, 6)``; dropout is gone in inference."""
    _check_args("mobilenet_v2", seed, image, num_classes, batch, 32)
    b = _Builder(seed)
    x = b.relu6(b.bn(b.conv("input", "features.0.0", 3, 32, 3, 2, 1), "features.0.1", 32), "features.0.2")
    c, idx = 32, 1
    for t, cout, n, s in _MBV2:
        for j in range(n):
            name, stride, hidden = f"features.{idx}", s if j == 0 else 1, c * t
            y, k = x, 0
            if t != 1:
                y = b.relu6(
                    b.bn(b.conv(y, f"{name}.conv.0.0", c, hidden, 1), f"{name}.conv.0.1", hidden),
                    f"{name}.conv.0.2",
                )
                k = 1
            y = b.conv(y, f"{name}.conv.{k}.0", hidden, hidden, 3, stride, 1, groups=hidden)
            y = b.relu6(b.bn(y, f"{name}.conv.{k}.1", hidden), f"{name}.conv.{k}.2")
            y = b.bn(
                b.conv(y, f"{name}.conv.{k + 1}", hidden, cout, 1),
                f"{name}.conv.{k + 2}",
                cout,
                small=stride == 1 and c == cout,
            )
            x = b.add(y, x, f"{name}.add") if stride == 1 and c == cout else y
            c, idx = cout, idx + 1
    x = b.relu6(
        b.bn(b.conv(x, f"features.{idx}.0", c, 1280, 1), f"features.{idx}.1", 1280), f"features.{idx}.2"
    )
    return b.model("mobilenet_v2", b.head(x, 1280, num_classes), 3, image, batch, num_classes)


# ---- a small network for tests and notebooks -----------------------------------------------------------
def small_cnn(seed: int = 0, image: int = 32, num_classes: int = 10, batch="N") -> onnx.ModelProto:
    """Every kind of layer the big networks have, small enough to run with data in seconds: a 3x3 stem
    with BN and ReLU, a max pool, a basic residual block, a strided block with a 1x1 downsample, an
    inverted residual with a depthwise 3x3 and ReLU6, global average pooling and a classifier."""
    _check_args("small_cnn", seed, image, num_classes, batch, 8)
    b = _Builder(seed)
    x = b.relu(b.bn(b.conv("input", "stem.conv", 3, 16, 3, 1, 1), "stem.bn", 16), "stem.relu")
    x = b.maxpool(x, "pool", 3, 2, 1)
    x, c = _basic(b, x, "block1", 16, 16, 1)
    x, c = _basic(b, x, "block2", c, 32, 2)
    y = b.relu6(b.bn(b.conv(x, "irb.expand", c, 64, 1), "irb.expand_bn", 64), "irb.expand_relu")
    y = b.relu6(b.bn(b.conv(y, "irb.dw", 64, 64, 3, 1, 1, groups=64), "irb.dw_bn", 64), "irb.dw_relu")
    y = b.bn(b.conv(y, "irb.project", 64, c, 1), "irb.project_bn", c, small=True)
    x = b.add(y, x, "irb.add")
    return b.model("small_cnn", b.head(x, c, num_classes), 3, image, batch, num_classes)


def build(name: str, **kwargs) -> onnx.ModelProto:
    """One of :data:`NETWORKS` by name."""
    if name not in NETWORKS:
        raise ValueError(f"unknown network {name!r}; choose one of {', '.join(NETWORKS)}.")
    return globals()[name](**kwargs)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="Write one of npu_jax.model.zoo's networks as an .onnx file.")
    ap.add_argument("network", choices=NETWORKS)
    ap.add_argument("path")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--image", type=int, default=None, help="input height and width (default 224; small_cnn 32)"
    )
    args = ap.parse_args(argv)
    kwargs = {"seed": args.seed} | ({"image": args.image} if args.image else {})
    onnx.save(build(args.network, **kwargs), args.path)
    print(f"wrote {args.path}")


if __name__ == "__main__":
    main()


__all__ = ["NETWORKS", "build", "mobilenet_v2", "resnet18", "resnet50", "small_cnn"]

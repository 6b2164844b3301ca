"""Real networks in: an ONNX model lowered to emulator work, priced layer by layer or run with data.

    m = npu_jax.model.load("resnet50.onnx")        # a path or an onnx.ModelProto
    rep = m.estimate(batch=8, hw=hw)               # timing only (closed-form convs, cached per layer)
    outputs, rep = m.run(x, hw=hw, policy=None)    # with data; x an array or a dict by input name
    rep.layers, rep.cycles, rep.images_per_second, rep.summary(), rep.to_chrome_trace(p), rep.plot(p)
    m.plan.table()                                 # every fusion decision and why
    m.fusion_saving(batch=8, hw=hw).table()        # unfused vs fused, per layer and in total

A quantised model (QDQ or the operator form, e.g. from onnxruntime's ``quantize_static``) loads into
int8 layers (``npu_jax.model.quant``); ``npu_jax.model.calibrate`` quantises a float one with onnxruntime.
``npu_jax.model.zoo`` builds torchvision's ResNet-18/50 and MobileNetV2 (random weights) as ONNX graphs.
See docs/model.md. Needs the ``onnx`` package (``pip install "npu-jax[onnx]"``).
"""

try:
    import onnx  # noqa: F401
except ImportError as e:  # an optional dependency: say how to get it
    raise ImportError(
        'npu_jax.model reads ONNX models with the onnx package, which is not installed: pip install "npu-jax[onnx]"'
    ) from e

from npu_jax.model import zoo
from npu_jax.model.network import Model, load
from npu_jax.model.plan import Decision, Layer, NetworkPlan
from npu_jax.model.report import FusionSaving, KernelCost, LayerReport, NetworkReport, fusion_saving

__all__ = [
    "Decision",
    "FusionSaving",
    "KernelCost",
    "Layer",
    "LayerReport",
    "Model",
    "NetworkPlan",
    "NetworkReport",
    "fusion_saving",
    "load",
    "zoo",
]

"""A float ONNX network quantised by onnxruntime (``quantize_static``), and a quantised network's int8
tensors held against onnxruntime's: what ``npu-jax model NET --policy int8`` runs.

Needs onnxruntime (``pip install onnxruntime``); :mod:`npu_jax.model` itself does not import this
module.

    qmodel = calibrate.quantise(float_model, batches=None, seed=0)   # QDQ, per-channel int8 weights
    m = npu_jax.model.load(qmodel)
    outputs, rep = m.run(x, hw=hw, keep=True)
    calibrate.compare(m, qmodel, float_model, x, rep, outputs)       # int8 tensors, logits
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
from onnxruntime.quantization.shape_inference import quant_pre_process

from npu_jax.errors import InputError


class _Batches(CalibrationDataReader):
    def __init__(self, name: str, batches):
        self._it = iter([{name: np.asarray(b, np.float32)} for b in batches])

    def get_next(self):
        return next(self._it, None)


def random_batches(model: onnx.ModelProto, count: int = 4, batch: int = 2, seed: int = 0) -> list:
    """``count`` batches of standard-normal inputs of the model's single input shape."""
    (vi,) = [i for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    shape = [batch] + [d.dim_value for d in vi.type.tensor_type.shape.dim[1:]]
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(count)]


def load_batches(folder: str) -> list:
    """Every ``.npy`` file in ``folder`` (sorted by name), each one batch of the model's input."""
    if not os.path.isdir(folder):
        raise InputError(f"calibration: {folder!r} is not a folder of .npy files.")
    files = sorted(f for f in os.listdir(folder) if f.endswith(".npy"))
    if not files:
        raise InputError(f"calibration: {folder!r} holds no .npy file; save each input batch with np.save.")
    return [np.load(os.path.join(folder, f)).astype(np.float32) for f in files]


def quantise(
    model: onnx.ModelProto,
    batches=None,
    *,
    seed: int = 0,
    fmt: str = "QDQ",
    per_channel: bool = True,
    activations: str = "QUInt8",
) -> onnx.ModelProto:
    """``model`` quantised by onnxruntime's ``quantize_static`` (after its ``quant_pre_process``,
    which folds BatchNormalization into the convs), calibrated on ``batches`` (a list of input
    arrays; None: four random batches from ``seed``). ``fmt``: ``QDQ`` or ``QOperator``; weights int8
    symmetric, per channel unless ``per_channel=False``; activations ``QUInt8`` or ``QInt8``."""
    if fmt not in ("QDQ", "QOperator"):
        raise InputError(f"quantise: fmt must be 'QDQ' or 'QOperator', got {fmt!r}.")
    if activations not in ("QUInt8", "QInt8"):
        raise InputError(f"quantise: activations must be 'QUInt8' or 'QInt8', got {activations!r}.")
    batches = random_batches(model, seed=seed) if batches is None else list(batches)
    (name,) = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    with tempfile.TemporaryDirectory() as tmp:
        src, pre, dst = (os.path.join(tmp, f) for f in ("float.onnx", "pre.onnx", "int8.onnx"))
        onnx.save(model, src)
        quant_pre_process(src, pre, skip_symbolic_shape=True)
        quantize_static(
            pre,
            dst,
            _Batches(name, batches),
            quant_format=getattr(QuantFormat, fmt),
            per_channel=per_channel,
            activation_type=getattr(QuantType, activations),
            weight_type=QuantType.QInt8,
        )
        return onnx.load(dst)


def ort_tensors(model: onnx.ModelProto, feeds: dict, names=()) -> dict:
    """onnxruntime's value of the graph outputs and of every tensor in ``names`` (made outputs)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    m.graph.output.extend([onnx.ValueInfoProto(name=t) for t in names if t not in have])
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def compare(m, qmodel: onnx.ModelProto, float_model: onnx.ModelProto, x, rep, outputs) -> dict:
    """The emulator's run (``m.run(x, keep=True)`` -> ``outputs, rep``) against onnxruntime: per int8
    tensor the largest difference in quantisation steps and the share of equal values; per graph
    output the largest difference from onnxruntime's int8 network and from the float one (``float_model``
    None: the int8 network alone)."""
    (name,) = m.graph.inputs
    feeds = {name: np.asarray(x, np.float32)}
    known = {t for n in qmodel.graph.node for t in n.output}
    names = [t for t in rep.tensors if t in known and t in m.graph.quant]
    ref = ort_tensors(qmodel, feeds, names)
    ref_float = None if float_model is None else ort_tensors(float_model, feeds)
    tensors = {}
    for t in names:
        d = np.abs(rep.tensors[t].astype(np.int32) - ref[t].astype(np.int32))
        tensors[t] = {"max_steps": int(d.max()), "equal": float(np.mean(d == 0))}
    logits = {}
    for t, v in outputs.items():
        v = np.asarray(v, np.float32)
        logits[t] = {"max_abs_vs_int8": float(np.abs(v - ref[t]).max())}
        if ref_float is not None:
            logits[t]["max_abs_vs_float"] = float(np.abs(v - ref_float[t]).max())
            logits[t]["int8_vs_float"] = float(np.abs(ref[t] - ref_float[t]).max())
    return {"tensors": tensors, "outputs": logits}


def table(c: dict) -> str:
    """:func:`compare`'s result as text."""
    w = max([len("tensor")] + [len(t) for t in c["tensors"]])
    lines = [f"{'tensor'.ljust(w)}  max steps  equal"]
    lines += [f"{t.ljust(w)}  {v['max_steps']:9d}  {100 * v['equal']:5.1f}%" for t, v in c["tensors"].items()]
    for t, v in c["outputs"].items():
        line = f"output {t}: max |emulator - onnxruntime int8| {v['max_abs_vs_int8']:.4g}"
        if "max_abs_vs_float" in v:
            line += f", |emulator - float| {v['max_abs_vs_float']:.4g} (onnxruntime int8 vs float {v['int8_vs_float']:.4g})"
        lines.append(line)
    return "\n".join(lines)


__all__ = ["compare", "load_batches", "ort_tensors", "quantise", "random_batches", "table"]

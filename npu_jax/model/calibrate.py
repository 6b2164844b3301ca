"""A float ONNX network quantised by onnxruntime (``quantize_static``), and a quantised network's int8
tensors held against onnxruntime's: what ``npu-jax model NET --policy int8`` runs.

Needs onnxruntime (``pip install onnxruntime``); :mod:`npu_jax.model` itself does not import this
module.

    qmodel = calibrate.quantise(float_model, batches=None, seed=0)   # QDQ, per-channel int8 weights
    m = npu_jax.model.load(qmodel)
    outputs, rep = m.run(x, hw=hw, keep=True)
    calibrate.compare(m, qmodel, float_model, x, rep, outputs)       # int8 tensors, logits

Every comparison of the emulator with onnxruntime (here, in :func:`precision.network.reference_tensors`
and in the tests) builds its session with :func:`reference_session`: a quantised graph runs with graph
optimisations off, as written (see there why).
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
from npu_jax.model.quant import QUANT_OPS


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


# a graph with one of these nodes is quantised (Cast alone is not: float graphs cast too)
_QUANT_NODES = frozenset(QUANT_OPS) - {"Cast"}

REFERENCE_INT8 = "onnxruntime CPU, graph optimisations off: the quantised graph as written"
"""What an int8 network is compared with (:func:`reference_session`), as :func:`table` prints it."""


def reference_session(model: onnx.ModelProto, *, optimised: bool | None = None) -> ort.InferenceSession:
    """The onnxruntime CPU session every comparison of the emulator with onnxruntime runs: the CLI's
    ``--numbers`` (int8: :func:`compare`; float: :func:`precision.network.reference_tensors`) and the
    tests.

    A **quantised** graph (a QuantizeLinear, DequantizeLinear, QLinear*, ConvInteger / MatMulInteger
    or com.microsoft QGemm / QLinearAdd / QLinearGlobalAveragePool node) runs with graph optimisations
    **off** (``ORT_DISABLE_ALL``): every node as its operator defines it, the graph's own semantics.
    With them on, onnxruntime fuses each DequantizeLinear -> Conv -> QuantizeLinear into its own u8s8
    kernel, which is not a reference on every CPU: without VNNI (AVX-512 VNNI or AVX-VNNI) it sums
    pairs of uint8 x int8 products in int16 (``vpmaddubsw``), which saturates; there the fused network
    agreed with its own QDQ graph on only 74-86% of one conv's int8 codes, while the emulator (exact
    int32 sums) agreed with the graph as written on all of them. The operator form's own
    ``QLinearConv``, ``QLinearMatMul`` and ``QGemm`` are such kernels too (a small_cnn's first
    QLinearConv came out 116 steps from its definition on a CPU without VNNI), so they run as their
    definition (:func:`as_defined`), as do ``ConvInteger`` and ``MatMulInteger``.

    A **float** graph keeps onnxruntime's default optimisations (ORT_ENABLE_ALL): no fp32 kernel
    saturates, and its values stay those the precision lab's documented errors (docs/model.md) were
    measured against. ``optimised`` overrides the choice (True: the default optimisations; False: off).
    """
    if optimised is None:
        optimised = not any(n.op_type in _QUANT_NODES for n in model.graph.node)
    so = ort.SessionOptions()
    if not optimised:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        model = as_defined(model)
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


_AS_DEFINED = {
    "QLinearConv": "Conv",
    "QLinearMatMul": "MatMul",
    "QGemm": "Gemm",
    "ConvInteger": "Conv",
    "MatMulInteger": "MatMul",
}


def as_defined(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every ``QLinearConv``, ``QLinearMatMul``, com.microsoft ``QGemm``,
    ``ConvInteger`` and ``MatMulInteger`` written as its operator's definition, onnxruntime's float ops
    on the dequantised values: ``DequantizeLinear`` of the integer inputs (weights per channel, the
    int32 bias at scale ``x_scale * w_scale``), the float op, then ``QuantizeLinear`` to the output (a
    QGemm without ``y_scale`` stays float) or, for the integer ops, a cast to int32 (MatMulInteger in
    float64, exact; ConvInteger in float32, onnxruntime having no float64 Conv: exact while every
    partial sum stays below 2**24). Values and tensor names are the graph's; only onnxruntime's integer
    kernels, which saturate on a CPU without VNNI, are left out. Unchanged if there are none."""
    if not any(n.op_type in _AS_DEFINED for n in model.graph.node):
        return model
    if not any(o.domain in ("", "ai.onnx") and o.version >= 13 for o in model.opset_import):
        raise InputError("as_defined: the graph's ONNX opset is below 13 (per-channel DequantizeLinear).")
    dims = {t.name: list(t.dims) for t in model.graph.initializer}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    make = onnx.helper.make_node
    nodes, inits = [], []
    for n in model.graph.node:
        if n.op_type not in _AS_DEFINED:
            nodes.append(n)
            continue
        ins = list(n.input) + [""] * 9
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        tag = f"{n.name or n.output[0]}/as_defined"
        op = _AS_DEFINED[n.op_type]
        w_axis = 0 if op == "Conv" else len(dims.get(ins[3 if n.op_type.startswith("Q") else 1], [0, 0])) - 1
        op_attrs = attrs if op == "Conv" else {}
        bias = y_s = y_z = ""
        if n.op_type == "QGemm":
            (a, a_s, a_z, w, w_s, w_z, bias, y_s, y_z) = ins[:9]
            w_axis = 0 if attrs.get("transB", 0) else 1
            op_attrs = {k: v for k, v in attrs.items() if k in ("alpha", "transA", "transB")}
        elif n.op_type.startswith("QLinear"):
            (a, a_s, a_z, w, w_s, w_z, y_s, y_z) = ins[:8]
            bias = ins[8] if op == "Conv" else ""
        else:  # ConvInteger / MatMulInteger: zero points only; the scales are ones
            a, w, a_z, w_z = ins[:4]
            a_s, w_s = f"{tag}/one", f"{tag}/ones"
            inits += [
                onnx.numpy_helper.from_array(np.ones((), np.float32), a_s),
                onnx.numpy_helper.from_array(np.ones(dims.get(w_z, []), np.float32), w_s),
            ]

        def dq(t, scale, zp, tag=tag, **kw):
            nodes.append(make("DequantizeLinear", [t, scale] + ([zp] if zp else []), [f"{tag}/{t}"], **kw))
            return f"{tag}/{t}"

        float_ins = [dq(a, a_s, a_z), dq(w, w_s, w_z, axis=w_axis)]
        if bias:
            nodes.append(make("Mul", [a_s, w_s], [f"{tag}/bias_scale"]))
            float_ins.append(dq(bias, f"{tag}/bias_scale", "", axis=0))
        y = n.output[0]
        if n.op_type in ("ConvInteger", "MatMulInteger"):
            if op == "MatMul":
                for i, t in enumerate(float_ins):
                    nodes.append(make("Cast", [t], [f"{t}/f64"], to=onnx.TensorProto.DOUBLE))
                    float_ins[i] = f"{t}/f64"
            nodes.append(make(op, float_ins, [f"{tag}/y"], **op_attrs))
            nodes.append(make("Cast", [f"{tag}/y"], [y], to=onnx.TensorProto.INT32))
        elif y_s:
            nodes.append(make(op, float_ins, [f"{tag}/y"], **op_attrs))
            nodes.append(make("QuantizeLinear", [f"{tag}/y", y_s] + ([y_z] if y_z else []), [y]))
        else:
            nodes.append(make(op, float_ins, [y], **op_attrs))
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    out.graph.initializer.extend(inits)
    return out


def ort_tensors(model: onnx.ModelProto, feeds: dict, names=()) -> dict:
    """onnxruntime's value (:func:`reference_session`) of the graph outputs and of every tensor in
    ``names`` (made outputs)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    m.graph.output.extend([onnx.ValueInfoProto(name=t) for t in names if t not in have])
    sess = reference_session(m)
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def compare(m, qmodel: onnx.ModelProto, float_model: onnx.ModelProto, x, rep, outputs) -> dict:
    """The emulator's run (``m.run(x, keep=True)`` -> ``outputs, rep``) against onnxruntime: per int8
    tensor the largest difference in quantisation steps and the share of equal values; per graph
    output the largest difference from onnxruntime's int8 network and from the float one (``float_model``
    None: the int8 network alone). The int8 network is the graph as written (graph optimisations off,
    :func:`reference_session`; ``reference`` in the result says so)."""
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
    return {"reference": REFERENCE_INT8, "tensors": tensors, "outputs": logits}


def table(c: dict) -> str:
    """:func:`compare`'s result as text."""
    w = max([len("tensor")] + [len(t) for t in c["tensors"]])
    lines = [
        f"int8 tensors against {c.get('reference', REFERENCE_INT8)}",
        f"{'tensor'.ljust(w)}  max steps  equal",
    ]
    lines += [f"{t.ljust(w)}  {v['max_steps']:9d}  {100 * v['equal']:5.1f}%" for t, v in c["tensors"].items()]
    for t, v in c["outputs"].items():
        line = f"output {t}: max |emulator - onnxruntime int8| {v['max_abs_vs_int8']:.4g}"
        if "max_abs_vs_float" in v:
            line += f", |emulator - float| {v['max_abs_vs_float']:.4g} (onnxruntime int8 vs float {v['int8_vs_float']:.4g})"
        lines.append(line)
    return "\n".join(lines)


__all__ = [
    "REFERENCE_INT8",
    "compare",
    "load_batches",
    "ort_tensors",
    "quantise",
    "random_batches",
    "reference_session",
    "table",
]

"""An ONNX model as a small typed graph: nodes with their attributes, constants as numpy arrays, and
every activation's shape from ``onnx.shape_inference`` with the batch dimension kept apart.

Only the operators the emulator lowers are accepted (:data:`SUPPORTED`); anything else is refused at
load with its op type and node name. Every activation tensor must have a static shape except its
first (batch) dimension, which may be symbolic: :meth:`Graph.shape` fills it in for a given batch.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper, shape_inference

from npu_jax.errors import InputError, InputTypeError
from npu_jax.model.qspec import QParams

# op type -> how it is lowered (docs/model.md)
SUPPORTED = {
    "Conv": "Cube kernel (conv2d), with the fused epilogue the planner gives it",
    "BatchNormalization": "folded into the preceding Conv's weights and bias",
    "Relu": "conv epilogue, or a vector kernel",
    "LeakyRelu": "conv epilogue, or a vector kernel",
    "Clip": "conv epilogue (min 0: clipped ReLU), or a vector kernel",
    "Add": "conv epilogue (residual or bias), or a vector kernel",
    "Mul": "folded into the preceding Conv's or Gemm's weights (a constant per output channel)",
    "MaxPool": "vector kernel (npu_jax.pool2d)",
    "AveragePool": "vector kernel (npu_jax.pool2d)",
    "GlobalAveragePool": "vector kernel (npu_jax.pool2d over the whole plane)",
    "Gemm": "Cube kernel (matmul), the bias in a vector kernel",
    "MatMul": "Cube kernel (matmul)",
    "Flatten": "view (no kernel)",
    "Reshape": "view (no kernel)",
    "Identity": "view (no kernel)",
    "Dropout": "view (inference: identity)",
    "Constant": "folded into a constant at load",
    # quantised networks (npu_jax.model.quant): lowered to int8 layers before planning
    "QuantizeLinear": "int8 layer's output (after a Conv / Gemm), or a float -> int8 conversion",
    "DequantizeLinear": "int8 layer's input or weights, or an int8 -> float conversion",
    "QLinearConv": "int8 Cube kernel (conv2d, int32 accumulation, requantised)",
    "QLinearMatMul": "int8 Cube kernel (matmul, int32 accumulation, requantised)",
    "ConvInteger": "int8 Cube kernel (conv2d, int32 out)",
    "MatMulInteger": "int8 Cube kernel (matmul, int32 out)",
    "Cast": "after ConvInteger / MatMulInteger only (Cast -> Mul: the dequantisation)",
    "QLinearAdd": "com.microsoft: dequantise, vector add, quantise",
    "QLinearGlobalAveragePool": "com.microsoft: dequantise, pooling kernel, quantise",
    "QGemm": "com.microsoft: int8 Cube kernel (matmul)",
}
VIEWS = ("Flatten", "Reshape", "Identity", "Dropout")
# the operator form's quantised ops from onnxruntime's contrib domain
MS_OPS = ("QLinearAdd", "QLinearGlobalAveragePool", "QGemm")


@dataclasses.dataclass(frozen=True)
class Node:
    """One ONNX node: ``name`` (made unique when the file leaves it empty), ``op`` (its op type),
    input and output tensor names, and its attributes as Python values."""

    name: str
    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict

    def attr(self, key: str, default=None):
        return self.attrs.get(key, default)


@dataclasses.dataclass(frozen=True, eq=False)
class Graph:
    """The model, typed: nodes in graph order, constants, and the activations' shapes.

    Attributes:
        name: the graph's name.
        nodes: every node but ``Constant`` (folded into ``params``), in graph order.
        params: constant tensors (initializers and Constant nodes) by name, as numpy arrays.
        inputs: the graph's data inputs by name, their shapes with ``None`` as the batch dimension.
        outputs: the graph's output tensor names.
        shapes: every activation tensor's shape, ``None`` as the batch dimension.
        batch: the model's own batch when its inputs fix it, else ``None`` (symbolic).
        quant: every int8 activation's :class:`~npu_jax.model.qspec.QParams` by tensor name (a
            quantised model, after :func:`npu_jax.model.quant.lower`; empty for a float one).
    """

    name: str
    nodes: tuple[Node, ...]
    params: dict
    inputs: dict
    outputs: tuple[str, ...]
    shapes: dict
    batch: int | None
    quant: dict = dataclasses.field(default_factory=dict)

    def shape(self, tensor: str, batch: int) -> tuple[int, ...]:
        """The shape of activation ``tensor`` at ``batch`` images."""
        return (batch,) + tuple(self.shapes[tensor][1:])

    def producer(self) -> dict:
        """Tensor name -> the node that writes it."""
        return {t: n for n in self.nodes for t in n.outputs}

    def consumers(self) -> dict:
        """Tensor name -> the nodes that read it, in graph order."""
        out: dict = {}
        for n in self.nodes:
            for t in dict.fromkeys(n.inputs):
                if t:
                    out.setdefault(t, []).append(n)
        return out


def read(model) -> onnx.ModelProto:
    """An ``onnx.ModelProto`` from a path or a ModelProto (anything else is refused)."""
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (str, os.PathLike)):
        if not os.path.exists(model):
            raise InputError(f"npu_jax.model.load: no such file {os.fspath(model)!r}.")
        if os.path.isdir(model):
            raise InputError(f"npu_jax.model.load: {os.fspath(model)!r} is a folder; give an .onnx file.")
        try:
            return onnx.load(os.fspath(model))
        except OSError as e:
            raise InputError(
                f"npu_jax.model.load: cannot read {os.fspath(model)!r}: {e.strerror or e}."
            ) from None
        except Exception as e:  # protobuf's DecodeError and kin: the file is not an ONNX model
            raise InputError(
                f"npu_jax.model.load: {os.fspath(model)!r} is not an ONNX model ({type(e).__name__}: "
                f"{' '.join(str(e).split())[:120]}); give a file saved by onnx.save or an exporter."
            ) from None
    raise InputTypeError(
        f"npu_jax.model.load takes a path to an .onnx file or an onnx.ModelProto, got {type(model).__name__}."
    )


def build(model: onnx.ModelProto) -> Graph:
    """The :class:`Graph` of an ONNX model: supported ops only, shapes inferred, batch found."""
    g = model.graph
    params = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    nodes, seen = [], set()
    for i, n in enumerate(g.node):
        name = n.name or f"{n.op_type}_{i}"
        if name in seen:
            name = f"{name}_{i}"
        seen.add(name)
        if n.domain not in ("", "ai.onnx") and not (n.domain == "com.microsoft" and n.op_type in MS_OPS):
            raise InputError(
                f"node {name!r}: op {n.domain}.{n.op_type} is from a custom domain; npu_jax.model "
                f"lowers the standard ONNX ops {sorted(SUPPORTED)}."
            )
        if n.op_type not in SUPPORTED:
            raise InputError(
                f"node {name!r}: op type {n.op_type!r} is not supported by npu_jax.model; it lowers "
                f"{sorted(SUPPORTED)}. Replace or remove the node (e.g. export with constant folding)."
            )
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        if n.op_type == "Constant":
            if "value" not in attrs:
                raise InputError(f"node {name!r}: only Constant nodes with a 'value' tensor are supported.")
            params[n.output[0]] = numpy_helper.to_array(attrs["value"])
            continue
        attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
        nodes.append(Node(name, n.op_type, tuple(n.input), tuple(n.output), attrs))
    inferred = _contrib_shapes(model, params)
    dims = {vi.name: _dims(vi) for vi in (*inferred.value_info, *inferred.input, *inferred.output)}
    inputs = [vi.name for vi in g.input if vi.name not in params]
    if not inputs:
        raise InputError("npu_jax.model.load: the graph has no data input (every input is an initializer).")
    batch = _batch(inputs, dims)
    shapes, consts = {}, set(params)
    for n in nodes:  # a quantised model's DequantizeLinear of a constant: a constant, not an activation
        if n.op == "DequantizeLinear" and all(i in consts for i in n.inputs if i):
            consts.update(n.outputs)
    for name in inputs + [t for n in nodes for t in n.outputs if t not in consts]:
        shapes[name] = _static_shape(name, dims.get(name), batch, nodes)
    return Graph(
        name=g.name or "model",
        nodes=tuple(nodes),
        params=params,
        inputs={t: shapes[t] for t in inputs},
        outputs=tuple(vi.name for vi in g.output),
        shapes=shapes,
        batch=None if batch is None or isinstance(batch, str) else batch,
        # an integer input (ConvInteger's, a QLinearConv's): held in the int8 domain like every int8 tensor
        quant={
            vi.name: QParams(
                1.0,
                -128 if elem == TensorProto.UINT8 else 0,
                "uint8" if elem == TensorProto.UINT8 else "int8",
            )
            for vi in g.input
            if vi.name in inputs
            and (elem := vi.type.tensor_type.elem_type) in (TensorProto.UINT8, TensorProto.INT8)
        },
    )


def _dims(vi) -> list | None:
    """A value_info's dims: ints, symbolic names (str), or None where unknown; None when no shape."""
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    return [
        d.dim_value if d.HasField("dim_value") else (d.dim_param or None) if d.HasField("dim_param") else None
        for d in t.shape.dim
    ]


def _batch(inputs, dims):
    """The batch dimension shared by the inputs: an int, a symbolic name, or None (unknown)."""
    firsts = set()
    for name in inputs:
        d = dims.get(name)
        if not d:
            raise InputError(
                f"graph input {name!r} has no shape; give it a static shape (batch may be symbolic)."
            )
        firsts.add(d[0])
    if len(firsts) > 1:
        raise InputError(f"the graph inputs disagree on the batch dimension: {sorted(map(str, firsts))}.")
    return firsts.pop()


def _static_shape(name: str, d, batch, nodes) -> tuple:
    writer = next((n.name for n in nodes if name in n.outputs), None)
    where = f"tensor {name!r}" + (f" (output of node {writer!r})" if writer else " (graph input)")
    if d is None:
        raise InputError(
            f"{where}: ONNX shape inference could not infer its shape; npu_jax.model needs static "
            f"shapes except the batch dimension (run onnx.shape_inference / onnxsim on the model)."
        )
    if not d:
        raise InputError(f"{where} is a scalar; npu_jax.model lowers tensors with a batch dimension.")
    rest = d[1:]
    if not all(isinstance(v, int) and v > 0 for v in rest):
        raise InputError(
            f"{where} has shape {d}: only the first (batch) dimension may be dynamic; fix the others "
            f"(export with static image sizes)."
        )
    if isinstance(batch, int) and isinstance(d[0], int) and d[0] != batch:
        raise InputError(f"{where} has batch {d[0]} but the inputs have batch {batch}.")
    if isinstance(batch, str) and isinstance(d[0], int):
        raise InputError(f"{where} fixes the batch to {d[0]} but the inputs' batch is symbolic ({batch!r}).")
    return (None,) + tuple(rest)


def _contrib_shapes(model: onnx.ModelProto, params: dict):
    """The model's inferred graph, with the outputs of onnxruntime's quantised contrib ops (which
    ``onnx.shape_inference`` does not know) given shapes and inference run again past them."""
    inferred = shape_inference.infer_shapes(model, strict_mode=False).graph
    contrib = [n for n in model.graph.node if n.domain == "com.microsoft"]
    for _ in range(len(contrib)):
        dims = {vi.name: _dims(vi) for vi in (*inferred.value_info, *inferred.input, *inferred.output)}
        dims.update({k: list(np.shape(v)) for k, v in params.items()})
        known = []
        for n in contrib:
            a, out = dims.get(n.input[0]), n.output[0]
            if a is None or dims.get(out):
                continue
            if n.op_type == "QLinearAdd":
                b = dims.get(n.input[3]) or a
                shape, zp = (a if len(a) >= len(b) else b), n.input[7] if len(n.input) > 7 else ""
            elif n.op_type == "QLinearGlobalAveragePool":
                shape, zp = list(a[:2]) + [1] * (len(a) - 2), n.input[4] if len(n.input) > 4 else ""
            else:  # QGemm: A (M, K) x B
                trans = any(x.name == "transB" and x.i for x in n.attribute)
                shape, zp = (
                    [a[0], dims[n.input[3]][0 if trans else 1]],
                    n.input[8] if len(n.input) > 8 else "",
                )
            dims[out] = shape
            elem = TensorProto.FLOAT if len(n.input) < 8 and n.op_type == "QGemm" else TensorProto.UINT8
            if zp in params and params[zp].dtype == np.int8:
                elem = TensorProto.INT8
            known.append(onnx.helper.make_tensor_value_info(out, elem, shape))
        if not known:
            break
        m = onnx.ModelProto()
        m.CopyFrom(model)
        m.graph.value_info.extend(known)
        model, inferred = m, shape_inference.infer_shapes(m, strict_mode=False).graph
    return inferred


__all__ = ["Graph", "MS_OPS", "Node", "SUPPORTED", "VIEWS", "build", "read"]

"""Quantised ONNX networks lowered to int8 layers: QDQ graphs and the operator form.

A quantised model says in ONNX what the chip does in int8. :func:`lower` rewrites it, before the
planner sees it, into four internal node kinds:

* ``QConv`` / ``QGemm``: an int8 convolution or matmul with its int32 bias and requantisation
  (:class:`QSpec`). From the QDQ form, ``DequantizeLinear(x) -> Conv(DQ(w_q), DQ(b_q)) [-> Relu /
  Clip] -> QuantizeLinear`` (``Gemm`` and ``MatMul`` alike), as ``quantize_static(QuantFormat.QDQ)``
  writes it; from the operator form ``QLinearConv``, ``QLinearMatMul``, ``QGemm`` (com.microsoft),
  ``ConvInteger`` and ``MatMulInteger`` (int32 out, or dequantised by a following ``Cast -> Mul``).
* ``Quantize`` / ``Dequantize``: a float tensor to int8 and back (a ``QuantizeLinear`` or
  ``DequantizeLinear`` of an activation no int8 layer took). ``QLinearAdd`` and
  ``QLinearGlobalAveragePool`` (com.microsoft) become ``Dequantize -> Add / GlobalAveragePool ->
  Quantize``: the vector work runs in the float policy, as onnxruntime's kernels compute in float.

Activations stay in the int8 domain: a uint8 tensor is held as int8 shifted by -128, its zero point
shifted likewise (``x_u8 - zp_u8 == x_i8 - zp_i8``), so every int8 layer takes int8 operands. Weights
must be int8 and symmetric (zero point 0): the Cube multiplies int8 by int8 and a weight zero point
would need a per-pixel correction. An activation zero point is run as the hardware runs it: the input
padded with the zero point and ``-x_zp * sum(w_q)`` per output channel folded into the int32 bias.
A ``DequantizeLinear`` of a constant no int8 layer took becomes a float constant.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from onnx import TensorProto

from npu_jax.errors import InputError
from npu_jax.model.graph import MS_OPS, VIEWS, Graph, Node
from npu_jax.model.qspec import QParams, QSpec, quantize_value

QUANT_OPS = (
    "QuantizeLinear",
    "DequantizeLinear",
    "QLinearConv",
    "QLinearMatMul",
    "ConvInteger",
    "MatMulInteger",
    "Cast",
) + MS_OPS
INTERNAL = ("QConv", "QGemm8", "Quantize", "Dequantize")


# ---- the rewrite ---------------------------------------------------------------------------------------------
def quantised(g: Graph) -> bool:
    return any(n.op in QUANT_OPS for n in g.nodes)


class _Lowering:
    def __init__(self, g: Graph):
        self.g = g
        self.params = dict(g.params)
        self.shapes = dict(g.shapes)
        self.quant: dict = dict(g.quant)  # tensor -> QParams of every int8-domain activation
        self.producer = g.producer()
        self.consumers = g.consumers()
        self.taken: set = set()  # node names an int8 layer absorbed
        self.out: list = []

    # -- constants
    def const(self, name: str, node: Node, what: str):
        v = self.params.get(name) if name else None
        if v is None:
            raise InputError(f"node {node.name!r} ({node.op}): its {what} must be a constant.")
        return v

    def scalar_params(self, node: Node, s_name: str, zp_name: str, what: str) -> tuple[float, int, str]:
        """(scale, zp in the int8 domain, stored type) of a per-tensor quantisation."""
        s = np.asarray(self.const(s_name, node, f"{what} scale"), np.float32)
        if s.size != 1:
            raise InputError(
                f"node {node.name!r} ({node.op}): the {what} is quantised per channel (scale of shape "
                f"{s.shape}); activations must be quantised per tensor."
            )
        zp = self.params.get(zp_name) if zp_name else None
        if zp_name and zp is None:
            raise InputError(f"node {node.name!r} ({node.op}): the {what} zero point must be a constant.")
        stored = "uint8" if zp is None or zp.dtype == np.uint8 else "int8" if zp.dtype == np.int8 else None
        if stored is None:
            raise InputError(
                f"node {node.name!r} ({node.op}): the {what} is {zp.dtype}; int8 layers take int8 or uint8 activations."
            )
        z = 0 if zp is None else int(np.asarray(zp).reshape(-1)[0])
        return float(s.reshape(())), z - 128 if stored == "uint8" else z, stored

    def weights(self, node: Node, q, s, zp, k_axis: int, what: str = "weights"):
        """(int8 weights, fp32 scale per output channel) of constant quantised weights."""
        q = np.asarray(q)
        if q.dtype != np.int8:
            raise InputError(
                f"node {node.name!r} ({node.op}): {what} are {q.dtype}; the Cube takes int8 weights "
                f"(quantise with weight_type=QuantType.QInt8)."
            )
        if zp is not None and np.any(np.asarray(zp) != 0):
            raise InputError(
                f"node {node.name!r} ({node.op}): {what} have a non-zero zero point; int8 layers take "
                f"symmetric weights (zero point 0)."
            )
        k = q.shape[k_axis]
        s = np.asarray(s, np.float32).reshape(-1)
        if s.size not in (1, k):
            raise InputError(
                f"node {node.name!r}: a {what} scale of {s.size} values for {k} output channels."
            )
        return q, np.broadcast_to(s, (k,)).astype(np.float32)

    def dq_const(self, t: str):
        """(q, scale, zp, axis) when ``t`` is a DequantizeLinear of a constant, else None."""
        p = self.producer.get(t)
        if p is None or p.op != "DequantizeLinear" or p.inputs[0] not in self.params:
            return None
        zp = self.params.get(p.inputs[2]) if len(p.inputs) > 2 and p.inputs[2] else None
        return self.params[p.inputs[0]], self.params[p.inputs[1]], zp, int(p.attr("axis", 1)), p

    def dq_act(self, t: str):
        """(the int8 tensor, QParams, DQ node) when ``t`` is a DequantizeLinear of an activation."""
        p = self.producer.get(t)
        if p is None or p.op != "DequantizeLinear" or p.inputs[0] in self.params:
            return None
        zp = p.inputs[2] if len(p.inputs) > 2 else ""
        s, z, stored = self.scalar_params(p, p.inputs[1], zp, "input")
        return p.inputs[0], QParams(s, z, stored), p

    def q_after(self, t: str):
        """(Q node, absorbed activation nodes, lo, hi) when ``t`` runs through ReLU / Clip nodes (each
        its tensor's only reader) into a QuantizeLinear; the clamp in the int8 domain."""
        acts = []
        while True:
            cons = self.consumers.get(t, [])
            if t in self.g.outputs or len(cons) != 1:
                return None
            n = cons[0]
            if n.op == "QuantizeLinear":
                break
            if n.op not in ("Relu", "Clip"):
                return None
            acts.append(n)
            t = n.outputs[0]
        zp = n.inputs[2] if len(n.inputs) > 2 else ""
        s, z, stored = self.scalar_params(n, n.inputs[1], zp, "output")
        lo, hi = -128, 127
        for a in acts:
            if a.op == "Relu":
                lo = max(lo, z)
                continue
            cmin = self.params.get(a.inputs[1]) if len(a.inputs) > 1 and a.inputs[1] else a.attr("min")
            cmax = self.params.get(a.inputs[2]) if len(a.inputs) > 2 and a.inputs[2] else a.attr("max")
            if cmin is not None:  # quantisation is monotone: Q(clip(y, a, b)) == clip(Q(y), Q(a), Q(b))
                lo = max(lo, quantize_value(float(np.asarray(cmin).reshape(())), s, z))
            if cmax is not None:
                hi = min(hi, quantize_value(float(np.asarray(cmax).reshape(())), s, z))
        return n, acts, QParams(s, z, stored), lo, hi

    # -- the int8 layers
    def emit(self, op: str, name: str, inputs, outputs, **attrs) -> None:
        self.out.append(Node(name, op, tuple(inputs), tuple(outputs), attrs))

    def bias_int32(self, node: Node, b_name: str, x_scale: float, w_scale: np.ndarray):
        if not b_name:
            return None
        dq = self.dq_const(b_name)
        if dq is not None:
            bq, bs, bzp, _, _ = dq
            b = (
                np.asarray(bq, np.float64) - (0 if bzp is None else np.asarray(bzp, np.float64))
            ) * np.asarray(bs, np.float64)
        else:
            b = np.asarray(self.const(b_name, node, "bias"))
            if b.dtype == np.int32:  # the operator form: already on the accumulator's scale
                return b.reshape(-1)
            b = b.astype(np.float64)
        acc_scale = np.float32(x_scale) * w_scale.astype(np.float32)
        return np.round(b.reshape(-1) / acc_scale.astype(np.float64)).astype(np.int64)

    def cube(self, node: Node, kind: str, x: str, xq: QParams, w, w_scale, bias, attrs: dict, fused) -> None:
        """Emit an int8 layer reading int8 tensor ``x``; its output as the graph has it (int8 after a
        QuantizeLinear, else float)."""
        after = self.q_after(node.outputs[0])
        if after is not None:
            qn, acts, yq, lo, hi = after
            spec = QSpec(xq.scale, xq.zp, w, w_scale, bias, "int8", yq.scale, yq.zp, lo, hi)
            out = qn.outputs[0]
            self.quant[out] = yq
            self.taken.update([qn.name] + [a.name for a in acts])
            fused = list(fused) + [f"{a.op}:{a.name}" for a in acts] + [f"QuantizeLinear:{qn.name}"]
        else:
            acc_scale = (np.float32(xq.scale) * w_scale.astype(np.float32)).astype(np.float32)
            spec = QSpec(xq.scale, xq.zp, w, w_scale, bias, "float", out_scale=acc_scale)
            out = node.outputs[0]
        self.emit(kind, node.name, [x], [out], q=spec, fused=tuple(fused), **attrs)

    def qdq_conv(self, node: Node) -> bool:
        a, wdq = self.dq_act(node.inputs[0]), self.dq_const(node.inputs[1])
        if a is None or wdq is None:
            return False
        x, xq, dqn = a
        wq, ws, wzp, axis, _ = wdq
        if np.asarray(ws).size > 1 and axis % 4 != 0:
            raise InputError(
                f"node {node.name!r}: weights quantised per input channel; int8 layers take per output channel."
            )
        if np.asarray(wq).ndim != 4:
            raise InputError(f"node {node.name!r}: an int8 Conv needs 4-D weights (2-D convolution).")
        w, w_scale = self.weights(node, wq, ws, wzp, 0)
        bias = self.bias_int32(node, node.inputs[2] if len(node.inputs) > 2 else "", xq.scale, w_scale)
        self.cube(node, "QConv", x, xq, w, w_scale, bias, _conv_attrs(node), [f"DequantizeLinear:{dqn.name}"])
        return True

    def qdq_gemm(self, node: Node) -> bool:
        a, wdq = self.dq_act(node.inputs[0]), self.dq_const(node.inputs[1])
        if a is None or wdq is None:
            return False
        x, xq, dqn = a
        wq, ws, wzp, axis, _ = wdq
        trans = node.op == "Gemm" and node.attr("transB", 0)
        _gemm_checks(node)
        if len(self.shapes[x]) != 2:
            raise InputError(f"node {node.name!r}: an int8 {node.op} is lowered for a 2-D activation.")
        wq = np.asarray(wq).T if trans else np.asarray(wq)  # (K, N)
        ws = np.asarray(ws).reshape(-1)
        if ws.size > 1 and (axis % 2) != (0 if trans else 1):
            raise InputError(
                f"node {node.name!r}: weights quantised per input channel; int8 layers take per output channel."
            )
        w, w_scale = self.weights(node, wq, ws, wzp, 1)
        bias = self.bias_int32(node, node.inputs[2] if len(node.inputs) > 2 else "", xq.scale, w_scale)
        self.cube(node, "QGemm8", x, xq, w, w_scale, bias, {}, [f"DequantizeLinear:{dqn.name}"])
        return True

    def qlinear(self, node: Node) -> None:
        """QLinearConv / QLinearMatMul / QGemm: int8 in, int8 (or float) out, parameters as inputs."""
        i = node.inputs
        s, z, _ = self.scalar_params(node, i[1], i[2], "input")
        if node.op == "QLinearConv":
            w, w_scale = self.weights(
                node,
                self.const(i[3], node, "weights"),
                self.const(i[4], node, "w scale"),
                self.params.get(i[5]),
                0,
            )
            y_s, y_zp, bias_name, kind, attrs = (
                i[6],
                i[7],
                (i[8] if len(i) > 8 else ""),
                "QConv",
                _conv_attrs(node),
            )
        else:
            wq = np.asarray(self.const(i[3], node, "weights"))
            trans = node.op == "QGemm" and node.attr("transB", 0)
            if node.op == "QGemm":
                _gemm_checks(node)
            w, w_scale = self.weights(
                node, wq.T if trans else wq, self.const(i[4], node, "w scale"), self.params.get(i[5]), 1
            )
            if node.op == "QGemm":
                bias_name, y_s, y_zp = (
                    (i[6] if len(i) > 6 else ""),
                    (i[7] if len(i) > 7 else ""),
                    (i[8] if len(i) > 8 else ""),
                )
            else:
                bias_name, y_s, y_zp = "", i[6], i[7]
            kind, attrs = "QGemm8", {}
        bias = self.bias_int32(node, bias_name, s, w_scale)
        if y_s:
            ys, yz, ystored = self.scalar_params(node, y_s, y_zp, "output")
            spec = QSpec(s, z, w, w_scale, bias, "int8", ys, yz)
            self.quant[node.outputs[0]] = QParams(ys, yz, ystored)
        else:  # QGemm without y_scale: float out
            spec = QSpec(
                s, z, w, w_scale, bias, "float", out_scale=(np.float32(s) * w_scale).astype(np.float32)
            )
        self.emit(kind, node.name, [i[0]], node.outputs, q=spec, fused=(), **attrs)

    def integer(self, node: Node) -> None:
        """ConvInteger / MatMulInteger: int32 out, or float when a ``Cast -> Mul(constant)`` follows."""
        i = node.inputs
        x_zp = self.params.get(i[2]) if len(i) > 2 and i[2] else None
        if len(i) > 2 and i[2] and x_zp is None:
            raise InputError(
                f"node {node.name!r} ({node.op}): its input zero point is computed at run time (dynamic "
                f"quantisation); int8 layers take a constant one (quantize_static)."
            )
        stored = "uint8" if x_zp is None or np.asarray(x_zp).dtype == np.uint8 else "int8"
        z = 0 if x_zp is None else int(np.asarray(x_zp).reshape(-1)[0])
        xq = QParams(1.0, z - 128 if stored == "uint8" else z, stored)
        conv = node.op == "ConvInteger"
        wq = self.const(i[1], node, "weights")
        w, w_scale = self.weights(
            node,
            wq,
            np.float32(1.0),
            self.params.get(i[3]) if len(i) > 3 and i[3] else None,
            0 if conv else 1,
        )
        spec = QSpec(xq.scale, xq.zp, w, w_scale, None, "int32")
        out, fused = node.outputs[0], []
        cons = self.consumers.get(out, [])
        if (
            out not in self.g.outputs
            and len(cons) == 1
            and cons[0].op == "Cast"
            and cons[0].attr("to") == TensorProto.FLOAT
        ):
            cast = cons[0]
            mc = self.consumers.get(cast.outputs[0], [])
            if cast.outputs[0] not in self.g.outputs and len(mc) == 1 and mc[0].op == "Mul":
                mul = mc[0]
                c = self.params.get(next((t for t in mul.inputs if t != cast.outputs[0]), ""))
                k = w.shape[0 if conv else 1]
                cs = None if c is None else _per_channel(c, k, 4 if conv else 2)
                if cs is not None:
                    spec = QSpec(xq.scale, xq.zp, w, w_scale, None, "float", out_scale=cs)
                    out = mul.outputs[0]
                    self.taken.update([cast.name, mul.name])
                    fused = [f"Cast:{cast.name}", f"Mul:{mul.name}"]
        self.emit(
            "QConv" if conv else "QGemm8",
            node.name,
            [i[0]],
            [out],
            q=spec,
            fused=tuple(fused),
            **(_conv_attrs(node) if conv else {}),
        )

    def contrib(self, node: Node) -> None:
        """QLinearAdd / QLinearGlobalAveragePool: dequantise, the float op, quantise."""
        i = node.inputs
        if node.op == "QLinearAdd":
            ins, op, ys = [(i[0], i[1], i[2]), (i[3], i[4], i[5])], "Add", (i[6], i[7] if len(i) > 7 else "")
        else:
            if node.attr("channels_last", 0):
                raise InputError(
                    f"node {node.name!r}: QLinearGlobalAveragePool with channels_last=1 is not supported."
                )
            ins, op, ys = [(i[0], i[1], i[2])], "GlobalAveragePool", (i[3], i[4])
        floats = []
        for k, (t, s_name, zp_name) in enumerate(ins):
            s, z, _ = self.scalar_params(node, s_name, zp_name, "input")
            f = f"{node.name}.dq{k}"
            self.shapes[f] = self.shapes[t]
            self.emit("Dequantize", f"{node.name}/dequantize{k}", [t], [f], scale=s, zp=z)
            floats.append(f)
        mid = f"{node.name}.float"
        self.shapes[mid] = self.shapes[node.outputs[0]]
        self.out.append(Node(f"{node.name}/{op}", op, tuple(floats), (mid,), {}))
        s, z, stored = self.scalar_params(node, ys[0], ys[1], "output")
        self.quant[node.outputs[0]] = QParams(s, z, stored)
        self.emit("Quantize", f"{node.name}/quantize", [mid], node.outputs, scale=s, zp=z)

    def lone(self, node: Node) -> None:
        """A QuantizeLinear / DequantizeLinear of an activation that no int8 layer took."""
        zp = node.inputs[2] if len(node.inputs) > 2 else ""
        what = "output" if node.op == "QuantizeLinear" else "input"
        s, z, stored = self.scalar_params(node, node.inputs[1], zp, what)
        if node.op == "QuantizeLinear":
            self.quant[node.outputs[0]] = QParams(s, z, stored)
            self.emit("Quantize", node.name, node.inputs[:1], node.outputs, scale=s, zp=z)
        else:
            self.emit("Dequantize", node.name, node.inputs[:1], node.outputs, scale=s, zp=z)

    def run(self) -> Graph:
        for node in self.g.nodes:  # the int8 layers first: they decide which Q / DQ nodes are taken
            if node.op == "Conv" and self.qdq_conv(node):
                self.taken.add(node.name)
            elif node.op in ("Gemm", "MatMul") and self.qdq_gemm(node):
                self.taken.add(node.name)
        anchors = {n.name: n for n in self.out}
        self.out = []
        for node in self.g.nodes:
            if node.name in anchors:
                self.out.append(anchors[node.name])
            elif node.name in self.taken:
                continue
            elif node.op in ("QLinearConv", "QLinearMatMul", "QGemm"):
                self.qlinear(node)
            elif node.op in ("ConvInteger", "MatMulInteger"):
                self.integer(node)
            elif node.op in ("QLinearAdd", "QLinearGlobalAveragePool"):
                self.contrib(node)
            elif node.op == "DequantizeLinear" and node.inputs[0] in self.params:
                q, s, zp, axis, _ = self.dq_const(node.outputs[0])
                self.params[node.outputs[0]] = _dequantize_const(q, s, zp, axis)
            elif node.op in ("QuantizeLinear", "DequantizeLinear"):
                self.lone(node)
            elif node.op == "Cast":
                raise InputError(
                    f"node {node.name!r}: Cast is lowered only after ConvInteger / MatMulInteger (Cast -> Mul)."
                )
            else:
                self.out.append(node)
            if node.op in VIEWS and node.inputs[0] in self.quant:
                self.quant[node.outputs[0]] = self.quant[node.inputs[0]]
        nodes = _live(self.out, self.g.outputs)
        used = {t for n in nodes for t in n.inputs}
        return dataclasses.replace(
            self.g,
            nodes=tuple(nodes),
            params={k: v for k, v in self.params.items() if k in used},
            shapes=self.shapes,
            quant=self.quant,
        )


def _per_channel(c, k: int, rank: int):
    c = np.asarray(c, np.float32)
    if c.size == 1:
        return np.full(k, float(c.reshape(())), np.float32)
    full = (1,) * (rank - c.ndim) + c.shape
    if c.ndim > rank or full[1 if rank == 4 else -1] != k or c.size != k:
        return None
    return c.reshape(k)


def _dequantize_const(q, s, zp, axis: int) -> np.ndarray:
    q = np.asarray(q)
    s = np.asarray(s, np.float32)
    z = np.zeros((), np.float32) if zp is None else np.asarray(zp).astype(np.float32)
    if s.size > 1:
        shape = [1] * q.ndim
        shape[axis % q.ndim] = -1
        s, z = s.reshape(shape), z.reshape(shape) if z.size > 1 else z
    return ((q.astype(np.float32) - z) * s).astype(np.float32)


def _conv_attrs(node: Node) -> dict:
    auto = node.attr("auto_pad", "NOTSET")
    if auto not in ("NOTSET", "VALID"):
        raise InputError(
            f"node {node.name!r}: auto_pad={auto!r} is not supported; export with explicit pads."
        )
    p = list(node.attr("pads", [0, 0, 0, 0])) if auto == "NOTSET" else [0, 0, 0, 0]
    return dict(
        stride=tuple(int(v) for v in node.attr("strides", (1, 1))),
        dilation=tuple(int(v) for v in node.attr("dilations", (1, 1))),
        pads=((int(p[0]), int(p[2])), (int(p[1]), int(p[3]))),
        groups=int(node.attr("group", 1)),
    )


def _gemm_checks(node: Node) -> None:
    if (
        node.attr("transA", 0)
        or float(node.attr("alpha", 1.0)) != 1.0
        or float(node.attr("beta", 1.0)) != 1.0
    ):
        raise InputError(f"node {node.name!r}: an int8 {node.op} needs transA=0, alpha=1 and beta=1.")


def _live(nodes, outputs) -> list:
    """The nodes whose outputs something reads (a graph output or a live node), in order."""
    need, keep = set(outputs), []
    for n in reversed(nodes):
        if any(t in need for t in n.outputs):
            keep.append(n)
            need.update(t for t in n.inputs if t)
    return keep[::-1]


def lower(g: Graph) -> Graph:
    """The graph with its quantised parts rewritten to int8 layers (a float graph is returned as is)."""
    return _Lowering(g).run() if quantised(g) else g


__all__ = ["INTERNAL", "QUANT_OPS", "QParams", "QSpec", "lower", "quantised"]

"""The fusion planner: ONNX nodes grouped into the kernels the emulator runs, by explicit rules.

A layer starts at an **anchor** (Conv, Gemm / MatMul, a pooling op, or an element-wise op no layer
took) and grows along its output while the next node passes a **rule** (:data:`RULES`). Every rule
is written once and every decision, taken or refused, is recorded with its reason
(:attr:`NetworkPlan.decisions`):

* **single consumer**: the tensor the layer has produced so far has exactly one reader and is not a
  graph output (otherwise its value must reach GM as it is);
* **fold** (BatchNormalization, Mul by a per-channel constant, Add of a per-channel constant): linear,
  so folded into the anchor's weights and bias (:mod:`npu_jax.model.fold`) while the chain holds no
  non-linear step yet;
* **activation** (Relu, LeakyRelu, Clip with min 0): an epilogue step (relu, leaky_relu,
  clipped_relu);
* **residual** (Add of a second tensor of the same shape): the epilogue's residual step, once.

A Conv's chain is its epilogue (``npu_jax.mapping.epilogue``: in the Fixpipe, the UB, or a vector
kernel after it, decided per chip when the layer runs: :func:`npu_jax.mapping.epilogue.split`); a
Gemm's runs in a vector kernel after the matmul (the GEMM kernel has no epilogue). Views (Flatten,
Reshape, Identity, Dropout) launch nothing. The plan does not depend on ``fused``: the unfused form
runs the same chain as a vector kernel after the Cube kernel.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from npu_jax.errors import InputError
from npu_jax.mapping.epilogue import Step
from npu_jax.model import fold
from npu_jax.model.graph import VIEWS, Graph, Node

POOLS = ("MaxPool", "AveragePool", "GlobalAveragePool")
ACTIVATIONS = ("Relu", "LeakyRelu", "Clip")


@dataclasses.dataclass(frozen=True)
class Decision:
    """One fusion decision: candidate ``node`` (op type ``op``) considered for ``layer``, ``fused`` or
    not, by ``rule``, and why."""

    node: str
    op: str
    layer: str
    fused: bool
    rule: str
    why: str


@dataclasses.dataclass(frozen=True, eq=False)
class Layer:
    """One emulated layer: a Cube or vector kernel (plus, when not fused, its epilogue's vector kernel).

    Attributes:
        name: the anchor node's name.
        op: ``"conv"``, ``"gemm"``, ``"pool"`` or ``"eltwise"``.
        inputs: activation tensors read: the data input first, then the residual (or an Add's second
            operand) when the chain has one.
        output: the ONNX tensor the layer writes.
        nodes: the ONNX nodes it covers, the anchor first.
        fused: ``"OpType:node"`` of each node folded or fused into the anchor.
        steps: the element-wise chain (bias, activations, residual).
        attrs: the anchor's attributes (conv: stride, pads, dilation, groups; pool: kind, kernel, ...).
        weight, bias: the folded float32 weights (conv OIHW, gemm (K, N)) and bias, or None.
    """

    name: str
    op: str
    inputs: tuple[str, ...]
    output: str
    nodes: tuple[str, ...]
    fused: tuple[str, ...]
    steps: tuple[Step, ...]
    attrs: dict
    weight: np.ndarray | None = None
    bias: np.ndarray | None = None


@dataclasses.dataclass(frozen=True)
class View:
    """A node that launches nothing: its output is its input, reshaped (Flatten, Reshape, ...)."""

    name: str
    op: str
    input: str
    output: str


@dataclasses.dataclass(frozen=True, eq=False)
class NetworkPlan:
    """Layers and views in an order that respects every data dependency, and the decisions."""

    items: tuple
    decisions: tuple[Decision, ...]

    @property
    def layers(self) -> list[Layer]:
        return [i for i in self.items if isinstance(i, Layer)]

    def refused(self) -> list[Decision]:
        return [d for d in self.decisions if not d.fused]

    def table(self) -> str:
        """The decisions as a text table (node, op, layer, fused, rule, why)."""
        rows = [("node", "op", "layer", "fused", "rule", "why")] + [
            (d.node, d.op, d.layer, "yes" if d.fused else "no", d.rule, d.why) for d in self.decisions
        ]
        w = [max(len(r[i]) for r in rows) for i in range(5)]
        return "\n".join("  ".join(c.ljust(w[i]) for i, c in enumerate(r[:5])) + "  " + r[5] for r in rows)


# ---- the chain a layer grows ------------------------------------------------------------------------------
@dataclasses.dataclass
class _Chain:
    name: str
    op: str
    inputs: list
    nodes: list
    fused: list
    steps: list
    attrs: dict
    channels: int
    rank: int
    w: np.ndarray | None = None  # float64 while folding
    b: np.ndarray | None = None
    axis: int = 0  # the weights' output-channel axis

    def linear(self) -> bool:
        return self.w is not None and all(s.op == "bias" for s in self.steps)

    def ensure_bias(self) -> None:
        if not any(s.op == "bias" for s in self.steps):
            self.steps.insert(0, Step("bias"))


def _const(g: Graph, name: str):
    return g.params.get(name) if name else None


def _fold_guard(ch: _Chain) -> str | None:
    if ch.w is None:
        return f"{ch.op} layers have no weights to fold into"
    if not ch.linear():
        return f"after {[str(s) for s in ch.steps]} the chain is no longer linear; folding would change it"
    return None


def _rule_bn(ch: _Chain, node: Node, t: str, g: Graph) -> str | None:
    params = [_const(g, n) for n in node.inputs[1:5]]
    if any(p is None for p in params):
        return "its scale, bias, mean and variance are not all constants"
    if node.attr("training_mode", 0):
        return "training_mode=1 (batch statistics) cannot be folded"
    if why := _fold_guard(ch):
        return why
    ch.w, ch.b = fold.batchnorm(ch.w, ch.b, *params, node.attr("epsilon", 1e-5), ch.axis)
    ch.ensure_bias()
    return None


def _other(node: Node, t: str) -> str | None:
    others = [i for i in node.inputs if i != t]
    return others[0] if len(others) == 1 else None


def _rule_mul(ch: _Chain, node: Node, t: str, g: Graph) -> str | None:
    c = _const(g, _other(node, t))
    if c is None:
        return "Mul of two activations has no epilogue step"
    s = fold.per_channel(c, ch.channels, ch.rank)
    if s is None:
        return f"constant of shape {np.shape(c)} is not one value per output channel"
    if why := _fold_guard(ch):
        return why
    ch.w, ch.b = fold.scale(ch.w, ch.b, s, ch.axis)
    return None


def _rule_add(ch: _Chain, node: Node, t: str, g: Graph) -> str | None:
    other = _other(node, t)
    if other is None:
        return "Add of a tensor to itself"
    c = _const(g, other)
    if c is not None:
        s = fold.per_channel(c, ch.channels, ch.rank)
        if s is None:
            return f"constant of shape {np.shape(c)} is not one value per output channel"
        if why := _fold_guard(ch):
            return why
        ch.w, ch.b = fold.shift(ch.w, ch.b, s, ch.axis)
        ch.ensure_bias()
        return None
    if g.shapes.get(other) != g.shapes[t]:
        return f"shapes differ ({g.shapes.get(other)} vs {g.shapes[t]}): a residual must match the output"
    if any(s.op == "residual" for s in ch.steps):
        return "the epilogue already has its one residual add"
    ch.steps.append(Step("residual"))
    ch.inputs.append(other)
    return None


def activation_step(node: Node, g: Graph) -> Step | str:
    """The epilogue step of Relu / LeakyRelu / Clip, or why there is none."""
    if node.op == "Relu":
        return Step("relu")
    if node.op == "LeakyRelu":
        return Step("leaky_relu", float(node.attr("alpha", 0.01)))
    lo, hi = node.attr("min"), node.attr("max")  # opset < 11
    if len(node.inputs) > 1 and node.inputs[1]:
        lo = _const(g, node.inputs[1])
        if lo is None:
            return "its min is not a constant"
    if len(node.inputs) > 2 and node.inputs[2]:
        hi = _const(g, node.inputs[2])
        if hi is None:
            return "its max is not a constant"
    lo = None if lo is None else float(np.asarray(lo).reshape(()))
    hi = None if hi is None or not np.isfinite(np.asarray(hi)).all() else float(np.asarray(hi).reshape(()))
    if lo != 0.0:
        return (
            f"Clip(min={lo}, max={hi}) is no ReLU form (the steps are relu, leaky_relu, clipped_relu(0, c))"
        )
    if hi is None:
        return Step("relu")
    if hi <= 0:
        return f"Clip(min=0, max={hi}) has an empty range"
    return Step("clipped_relu", hi)


def _rule_activation(ch: _Chain, node: Node, t: str, g: Graph) -> str | None:
    step = activation_step(node, g)
    if isinstance(step, str):
        return step
    ch.steps.append(step)
    return None


# op type -> (rule name, rule); a rule returns None when it fused the node (and applied it), else why not
RULES = {
    "BatchNormalization": ("fold", _rule_bn),
    "Mul": ("fold", _rule_mul),
    "Add": ("residual/fold", _rule_add),
    "Relu": ("activation", _rule_activation),
    "LeakyRelu": ("activation", _rule_activation),
    "Clip": ("activation", _rule_activation),
}


def _grow(ch: _Chain, t: str, g: Graph, consumers, claimed: dict, decisions: list) -> str:
    """Extend ``ch`` from tensor ``t`` while the rules allow; returns the layer's output tensor."""
    while True:
        cons = consumers.get(t, [])
        cands = [c for c in cons if c.op in RULES]
        if t in g.outputs:
            for c in cands:
                decisions.append(
                    Decision(c.name, c.op, ch.name, False, "single consumer", f"{t} is a graph output")
                )
            return t
        if len(cons) != 1:
            for c in cands:
                why = f"{t} has {len(cons)} consumers ({', '.join(n.name for n in cons)})"
                decisions.append(Decision(c.name, c.op, ch.name, False, "single consumer", why))
            return t
        node = cons[0]
        if node.op not in RULES:
            return t
        rule, fn = RULES[node.op]
        if node.name in claimed:
            why = f"already fused into layer {claimed[node.name]!r} (this output is its second operand)"
            decisions.append(Decision(node.name, node.op, ch.name, False, rule, why))
            return t
        why = fn(ch, node, t, g)
        decisions.append(Decision(node.name, node.op, ch.name, why is None, rule, why or _done(node)))
        if why is not None:
            return t
        claimed[node.name] = ch.name
        ch.nodes.append(node.name)
        ch.fused.append(f"{node.op}:{node.name}")
        t = node.outputs[0]


def _done(node: Node) -> str:
    return {
        "BatchNormalization": "folded into the weights and bias",
        "Mul": "folded into the weights and bias",
        "Relu": "epilogue step",
        "LeakyRelu": "epilogue step",
        "Clip": "epilogue step",
    }.get(node.op, "epilogue step (residual add or bias)")


# ---- anchors ------------------------------------------------------------------------------------------------
def _pads(node: Node, n_spatial: int = 2):
    auto = node.attr("auto_pad", "NOTSET")
    if auto not in ("NOTSET", "VALID"):
        raise InputError(
            f"node {node.name!r}: auto_pad={auto!r} is not supported; export with explicit pads."
        )
    p = list(node.attr("pads", [0] * 2 * n_spatial)) if auto == "NOTSET" else [0] * 2 * n_spatial
    return ((int(p[0]), int(p[2])), (int(p[1]), int(p[3])))


def _conv(node: Node, g: Graph) -> _Chain:
    w = _const(g, node.inputs[1])
    if w is None or w.ndim != 4:
        raise InputError(f"node {node.name!r}: Conv needs constant 4-D weights (2-D convolution).")
    b = _const(g, node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    if len(node.inputs) > 2 and node.inputs[2] and b is None:
        raise InputError(f"node {node.name!r}: Conv's bias must be a constant.")
    attrs = dict(
        stride=tuple(int(v) for v in node.attr("strides", (1, 1))),
        dilation=tuple(int(v) for v in node.attr("dilations", (1, 1))),
        pads=_pads(node),
        groups=int(node.attr("group", 1)),
    )
    steps = [Step("bias")] if b is not None else []
    return _Chain(node.name, "conv", [node.inputs[0]], [node.name], [], steps, attrs, w.shape[0], 4, w, b, 0)


def _gemm(node: Node, g: Graph) -> _Chain:
    b_in = _const(g, node.inputs[1])
    if b_in is None or b_in.ndim != 2 or len(g.shapes[node.inputs[0]]) != 2:
        raise InputError(
            f"node {node.name!r}: {node.op} is lowered for a 2-D activation times constant 2-D weights."
        )
    if node.attr("transA", 0):
        raise InputError(f"node {node.name!r}: Gemm with transA=1 is not supported.")
    w = (b_in.T if node.attr("transB", 0) else b_in).astype(np.float64) * float(node.attr("alpha", 1.0))
    b, steps = None, []
    if len(node.inputs) > 2 and node.inputs[2]:
        c = _const(g, node.inputs[2])
        s = None if c is None else fold.per_channel(c, w.shape[1], 2)
        if s is None:
            raise InputError(f"node {node.name!r}: Gemm's C must be a constant per output column.")
        b, steps = s * float(node.attr("beta", 1.0)), [Step("bias")]
    return _Chain(node.name, "gemm", [node.inputs[0]], [node.name], [], steps, {}, w.shape[1], 2, w, b, 1)


def _pool(node: Node, g: Graph) -> Layer:
    if node.op == "GlobalAveragePool":
        h, w = g.shapes[node.inputs[0]][2:]
        attrs = dict(kind="avg", kernel=(h, w), stride=(1, 1), pads=((0, 0), (0, 0)), ceil_mode=False)
        attrs.update(count_include_pad=False, global_pool=True)
    else:
        if any(v != 1 for v in node.attr("dilations", (1, 1))):
            raise InputError(f"node {node.name!r}: {node.op} with dilations is not supported.")
        if len(node.outputs) > 1 and node.outputs[1]:
            raise InputError(f"node {node.name!r}: MaxPool's Indices output is not supported.")
        attrs = dict(
            kind="max" if node.op == "MaxPool" else "avg",
            kernel=tuple(int(v) for v in node.attr("kernel_shape")),
            stride=tuple(int(v) for v in node.attr("strides", (1, 1))),
            pads=_pads(node),
            ceil_mode=bool(node.attr("ceil_mode", 0)),
            count_include_pad=bool(node.attr("count_include_pad", 0)),
            global_pool=False,
        )
    return Layer(node.name, "pool", (node.inputs[0],), node.outputs[0], (node.name,), (), (), attrs)


def _eltwise(node: Node, g: Graph) -> _Chain:
    """An element-wise node no layer took, as the anchor of its own vector kernel."""
    t = g.shapes[node.outputs[0]]
    ch = _Chain(node.name, "eltwise", [node.inputs[0]], [node.name], [], [], {}, t[1], len(t))
    if node.op in ACTIVATIONS:
        why = _rule_activation(ch, node, node.inputs[0], g)
    elif node.op == "Add" and all(i not in g.params for i in node.inputs):
        why = _rule_add(ch, node, node.inputs[0], g)
    else:
        why = "it is only lowered folded into a Conv or Gemm, and none could take it"
    if why is not None:
        raise InputError(
            f"node {node.name!r} ({node.op}) cannot run on the emulator: {why}. See the fusion "
            f"decisions (Model.plan.table()) for why no layer took it."
        )
    return ch


def _layer(ch: _Chain, out: str) -> Layer:
    w, b = (None, None) if ch.w is None else fold.finish(ch.w, ch.b)
    return Layer(
        ch.name,
        ch.op,
        tuple(ch.inputs),
        out,
        tuple(ch.nodes),
        tuple(ch.fused),
        tuple(ch.steps),
        ch.attrs,
        w,
        b,
    )


# the int8 layers and conversions of a quantised model (npu_jax.model.quant.lower writes these nodes)
QUANT_LAYERS = {"QConv": "qconv", "QGemm8": "qgemm", "Quantize": "quantize", "Dequantize": "dequantize"}


def _quant_layer(node: Node) -> Layer:
    """An int8 conv / matmul (its :class:`~npu_jax.model.quant.QSpec` in ``attrs["q"]``) or a
    quantise / dequantise conversion: its chain was taken when the graph was lowered."""
    attrs = {k: v for k, v in node.attrs.items() if k != "fused"}
    q = attrs.get("q")
    return Layer(
        node.name,
        QUANT_LAYERS[node.op],
        (node.inputs[0],),
        node.outputs[0],
        (node.name,),
        tuple(node.attrs.get("fused", ())),
        (),
        attrs,
        None if q is None else q.w,
    )


def plan(g: Graph) -> NetworkPlan:
    """The fusion plan of a graph: Cube anchors grow first (in graph order), then what is left."""
    consumers = g.consumers()
    claimed: dict = {}
    decisions: list = []
    items: dict = {}
    for node in g.nodes:
        if node.op in QUANT_LAYERS:
            items[node.name] = _quant_layer(node)
        elif node.op in ("Conv", "Gemm", "MatMul"):
            ch = _conv(node, g) if node.op == "Conv" else _gemm(node, g)
            items[node.name] = _layer(ch, _grow(ch, node.outputs[0], g, consumers, claimed, decisions))
    for node in g.nodes:
        if node.name in items or node.name in claimed:
            continue
        if node.op in POOLS:
            items[node.name] = _pool(node, g)
        elif node.op in VIEWS:
            items[node.name] = View(node.name, node.op, node.inputs[0], node.outputs[0])
        else:
            ch = _eltwise(node, g)
            claimed[node.name] = node.name
            items[node.name] = _layer(ch, _grow(ch, node.outputs[0], g, consumers, claimed, decisions))
    return NetworkPlan(_topological(list(items.values()), g), tuple(decisions))


def _reads(item) -> tuple[str, ...]:
    return (item.input,) if isinstance(item, View) else item.inputs


def _writes(item) -> str:
    return item.output


def _topological(items: list, g: Graph) -> tuple:
    """Items ordered so each runs after the producers of what it reads (graph order among the ready)."""
    made = {_writes(i): k for k, i in enumerate(items)}
    deps = [{made[t] for t in _reads(i) if t in made} for i in items]
    done, order = set(), []
    while len(order) < len(items):
        ready = [k for k in range(len(items)) if k not in done and deps[k] <= done]
        if not ready:
            raise InputError(
                f"the graph {g.name!r} has a cycle among {[items[k].name for k in range(len(items)) if k not in done]}."
            )
        done.add(ready[0])
        order.append(items[ready[0]])
    return tuple(order)


__all__ = ["Decision", "Layer", "NetworkPlan", "RULES", "View", "activation_step", "plan"]

"""The precision lab on a real network: every layer of an ONNX model, emulated, against onnxruntime.

``network_errors(model, x, policy=...)`` runs the model through the emulator (``npu_jax.model``, with
data, every layer's output kept) and through onnxruntime (fp32, CPU, every node's output), and compares
each emulated layer's output with the runtime's tensor of the same name (:func:`precision.compare`).
Each layer gets a budget from the error analysis, and the result says where the error grows with depth
and whether a policy keeps it inside.

The budget (:func:`network_rel_l2_bound`) extends the conv stack's (``budgets.stack_rel_l2_bound``) to
a graph. Every rounding of a tensor to the storage format perturbs it by at most ``u`` relative, in
norm; a layer passes a relative perturbation on without growth to first order (ReLU is 1-Lipschitz;
BatchNorm-folded He-initialised convs keep activation and error norms alike; a residual add of two
tensors is no worse than its worse input when they do not cancel); so the errors reaching a tensor add
up along the path with the most roundings to it. Roundings counted: the network input (1); per conv or
GEMM its weights and its output (2: bias, residual and activation are applied in fp32 before the output
conversion when fused); per pooling or vector kernel its output (1). Accumulation adds the
probabilistic bound of each layer's inner product in the accumulator's format
(:func:`~precision.budgets.gamma_tilde`, lambda = 6, over ``K`` terms in fp32, or ``K / 16`` fp16
roundings for fp16 accumulation), which is negligible in fp32 and the point in fp16.

    errs = network_errors(zoo.resnet18(image=64), x, policy=npu_jax.Policy())   # mixed: fp16 / fp32
    print(errs.table()); errs.ok                # every layer within its budget
    plot_network_errors([errs, errs_fp16], "depth.png")
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
from onnx import numpy_helper

import npu_jax
from npu_jax.core.policy import Policy
from npu_jax.errors import InputError, InputTypeError, check_int
from npu_jax.model.calibrate import reference_session
from npu_jax.model.graph import read as read_model
from npu_jax.model.plan import View
from precision.budgets import gamma_tilde
from precision.formats import get_format
from precision.metrics import Metrics, compare
from precision.strategies import pow2_scale

_OWN_ROUNDINGS = {"conv": 2, "gemm": 2, "pool": 1, "eltwise": 1}


def _proto(model) -> onnx.ModelProto:
    """The ModelProto of a path or a ModelProto: the importer's own reader (its errors name the file)."""
    return read_model(model)


def reference_tensors(model, inputs) -> dict[str, np.ndarray]:
    """onnxruntime's value (fp32, CPU) of every node output of ``model`` on ``inputs``, from the session
    every comparison with onnxruntime builds (:func:`npu_jax.model.calibrate.reference_session`: a
    float graph with onnxruntime's default optimisations).

    Args:
        model: a path or an ``onnx.ModelProto``.
        inputs: an array (a single-input model) or a dict by input name.
    """
    proto = onnx.ModelProto()
    proto.CopyFrom(_proto(model))
    names = [o for n in proto.graph.node for o in n.output if o]
    del proto.graph.output[:]
    proto.graph.output.extend(onnx.ValueInfoProto(name=nm) for nm in names)
    sess = reference_session(proto)
    feed_names = [i.name for i in sess.get_inputs()]
    if not isinstance(inputs, dict):
        if len(feed_names) != 1:
            raise InputError(f"the model has inputs {feed_names}: pass a dict by input name.")
        inputs = {feed_names[0]: inputs}
    feed = {k: np.asarray(v, np.float32) for k, v in inputs.items()}
    return dict(zip(names, sess.run(None, feed)))


def _acc_bound(K: int, policy: Policy) -> float:
    """Probabilistic bound of one length-``K`` inner product accumulated as ``policy`` does."""
    if policy.accumulate == "fp32":
        return gamma_tilde(K, get_format("fp32").u)
    # fp16 roundings every `block` products: 1 (each MAC), K0 = 16 (each fractal step); a K tile
    # (fp16_tile) is at least K0 deep, so K0 there gives a bound that holds for every tiling
    block = {"fp16_mac": 1, "fp16_step": 16, "fp16_tile": 16}.get(policy.accumulate, 16)
    return gamma_tilde(-(-K // block), get_format("fp16").u) + gamma_tilde(block, get_format("fp32").u)


def network_rel_l2_bound(roundings: int, acc: float, fmt: str) -> float:
    """First-order bound on a tensor's relative L2 error: ``roundings`` roundings to ``fmt`` along the
    worst path to it, plus the accumulation bounds ``acc`` summed along that path."""
    return roundings * get_format(fmt).u + acc


@dataclasses.dataclass(frozen=True)
class LayerError:
    """One emulated layer's output against onnxruntime's.

    Attributes:
        name, op, output: the layer (its first ONNX node), its kernel kind and its ONNX output tensor.
        depth: conv / GEMM layers on the longest path from the input to it.
        roundings: roundings to the storage format on the worst path (see the module docstring).
        bound: the first-order relative L2 bound there. metrics: :func:`precision.compare`'s.
    """

    name: str
    op: str
    output: str
    depth: int
    roundings: int
    bound: float
    metrics: Metrics

    @property
    def ok(self) -> bool:
        return bool(self.metrics.rel_l2 <= self.bound)


@dataclasses.dataclass(frozen=True)
class NetworkErrors:
    """Per-layer errors of one emulated run of a network against onnxruntime (:func:`network_errors`)."""

    network: str
    label: str
    policy: Policy
    rows: tuple[LayerError, ...]
    report: object  # the emulated run's npu_jax.model.NetworkReport
    scale: float = 1.0  # the network-wide power-of-two scale the run used (scaled_model)

    @property
    def cycles(self) -> int:
        return self.report.cycles

    @property
    def ok(self) -> bool:
        """Every layer within its budget."""
        return all(r.ok for r in self.rows)

    @property
    def final(self) -> LayerError:
        return self.rows[-1]

    @property
    def worst(self) -> LayerError:
        """The layer closest to (or furthest over) its budget."""
        return max(self.rows, key=lambda r: r.metrics.rel_l2 / r.bound)

    def table(self) -> str:
        head = f"{self.network} under {self.label}: {sum(r.ok for r in self.rows)}/{len(self.rows)} layers within budget"
        lines = [
            head,
            f"  {'layer':<28} {'op':<7} {'depth':>5} {'rel_l2':>10} {'budget':>10} {'max_abs':>10} {'cosine':>9}  ok",
        ]
        for r in self.rows:
            m = r.metrics
            lines.append(
                f"  {r.name[:28]:<28} {r.op:<7} {r.depth:>5} {m.rel_l2:>10.3e} {r.bound:>10.3e} "
                f"{m.max_abs:>10.3e} {m.cosine:>9.6f}  {'yes' if r.ok else 'NO'}"
            )
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {
            "network": self.network,
            "label": self.label,
            "scale": self.scale,
            "ok": self.ok,
            "cycles": self.cycles,
            "layers": [
                {
                    "name": r.name,
                    "op": r.op,
                    "output": r.output,
                    "depth": r.depth,
                    "roundings": r.roundings,
                    "bound": r.bound,
                    "ok": r.ok,
                    **{
                        k: getattr(r.metrics, k)
                        for k in ("rel_l2", "max_abs", "max_rel", "cosine", "ulp_max")
                    },
                }
                for r in self.rows
            ],
        }


# ---- network-wide power-of-two scaling -------------------------------------------------------------
# Ops whose output scales by s when every input does (positively homogeneous), given the constant
# inputs listed in _SCALED scaled too; any other op would change its result under scaling.
_HOMOGENEOUS = {
    "Conv", "Gemm", "MatMul", "BatchNormalization", "Relu", "LeakyRelu", "Clip", "Add", "Sub", "Mul",
    "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Flatten", "Reshape", "Identity",
    "Squeeze", "Unsqueeze", "Transpose", "Concat",
}  # fmt: skip
_BILINEAR = ("Conv", "Gemm", "MatMul", "Mul")  # linear in the activation only beside a constant
# op -> input positions that are offsets in the activations' units (scaled with them)
_SCALED = {
    "Conv": (2,),
    "Gemm": (2,),
    "BatchNormalization": (2, 3),
    "Clip": (1, 2),
    "Add": (0, 1),
    "Sub": (0, 1),
}


def scaled_model(model, scale: float) -> onnx.ModelProto:
    """``model`` with every activation multiplied by ``scale``: fed ``scale * x``, each node's output
    is ``scale`` times the original's. Biases, BatchNorm shifts and running means, Clip bounds and the
    constant operand of an Add / Sub are scaled (new initializers; shared ones are never scaled twice);
    weights, BatchNorm scales and variances are not. A power-of-two ``scale`` changes no rounding in a
    format's normal range, so it moves a network's activations into fp16's range and nothing else.

    Raises:
        InputError: a node whose op is not positively homogeneous (``Sigmoid``, ``Softmax``, ...), a
            product of two activations, Clip bounds given as attributes, or a bias or Clip bound that
            is not an initializer (an Add / Sub of two activations needs nothing scaled)."""
    s = _check_scale("scaled_model", scale)
    proto = onnx.ModelProto()
    proto.CopyFrom(_proto(model))
    inits = {i.name: i for i in proto.graph.initializer}
    made: dict[str, str] = {}
    for node in proto.graph.node:
        if node.op_type not in _HOMOGENEOUS:
            raise InputError(
                f"scaled_model: node {node.name!r} ({node.op_type}) does not scale with its input; "
                f"scaling applies to networks of {', '.join(sorted(_HOMOGENEOUS))}."
            )
        if node.op_type == "Clip" and any(a.name in ("min", "max") for a in node.attribute):
            raise InputError(f"scaled_model: Clip {node.name!r} has its bounds as attributes (opset < 11).")
        if node.op_type in _BILINEAR and sum(t in inits for t in node.input[:2]) != 1:
            raise InputError(
                f"scaled_model: {node.op_type} {node.name!r} must take exactly one constant operand "
                f"(a product of two activations scales by scale**2), got inputs {list(node.input[:2])}."
            )
        for pos in _SCALED.get(node.op_type, ()):
            name = node.input[pos] if pos < len(node.input) else ""
            if not name:
                continue  # an absent optional input
            if name not in inits:
                if node.op_type in ("Add", "Sub"):
                    continue  # an activation operand: scaled already
                raise InputError(
                    f"scaled_model: {node.op_type} {node.name!r}: input {name!r} must be an initializer to be scaled."
                )
            if name not in made:
                arr = numpy_helper.to_array(inits[name])
                new = numpy_helper.from_array((arr * arr.dtype.type(s)).astype(arr.dtype), f"{name}*{s:g}")
                proto.graph.initializer.append(new)
                made[name] = new.name
            node.input[pos] = made[name]
    return proto


def _check_scale(fn: str, scale) -> float:
    """``scale`` as a finite positive power of two (so that scaling is exact)."""
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer, np.floating)):
        raise InputTypeError(
            f"{fn}: scale must be a power of two (a float), got {type(scale).__name__} {scale!r}."
        )
    s = float(scale)
    if not (np.isfinite(s) and s > 0) or np.frexp(s)[0] != 0.5:
        raise InputError(
            f"{fn}: scale must be a positive power of two (exact scaling), got {scale!r}; e.g. 2.0**-4."
        )
    return s


def calibrated_scale(model, reference: dict, inputs: dict, fmt: str = "fp16", margin: int = 1) -> float:
    """The network-wide power-of-two scale (``precision.strategies.pow2_scale``: fmt's max / amax,
    rounded down to a power of two, over 2^``margin``) for the largest magnitude the emulated network
    stores or sums: the inputs and every tensor of ``reference`` (:func:`reference_tensors`), and for
    each average pool its running sum, up to its window's count times its input's largest magnitude
    (the vector kernel adds the window's taps in the activations' format, then divides)."""
    check_int("calibrated_scale", "margin", margin, 0, 64)
    proto = _proto(model)
    values = {**reference, **inputs}
    amax = max(float(np.max(np.abs(v), initial=0.0)) for v in values.values())
    for node in proto.graph.node:
        x = values.get(node.input[0]) if node.input else None
        if x is None or node.op_type not in ("GlobalAveragePool", "AveragePool"):
            continue
        kernel = next((list(a.ints) for a in node.attribute if a.name == "kernel_shape"), None)
        count = int(np.prod(x.shape[2:] if node.op_type == "GlobalAveragePool" else kernel))
        amax = max(amax, count * float(np.max(np.abs(x), initial=0.0)))
    return pow2_scale(amax, 1.0, margin, get_format(fmt).max)


def _policy_label(p: Policy) -> str:
    return f"{p.operand} operands, {p.accumulate} accumulation, {p.output} activations"


def network_errors(
    model,
    x,
    *,
    hw=None,
    policy: Policy | None = None,
    strategy: str = "img2col",
    fused: bool = True,
    label: str | None = None,
    reference: dict | None = None,
    checks=None,
    scale: float | str | None = None,
) -> NetworkErrors:
    """Run ``model`` on ``x`` through the emulator under ``policy`` and compare every layer's output
    with onnxruntime's (fp32, CPU).

    Args:
        model: a path or an ``onnx.ModelProto``.
        x: the input (NCHW array) or a dict by input name.
        hw, policy, strategy, fused, checks: as ``npu_jax.model.Model.run``.
        label: what to call this run in tables and plots (default: the policy in words).
        reference: :func:`reference_tensors`' result, to reuse across policies (computed if None).
        scale: None (no scaling), a power of two, or ``"auto"`` (:func:`calibrated_scale` from the
            reference, for the policy's storage format): the emulator runs :func:`scaled_model` on
            ``scale * x`` and its every output is divided by ``scale`` (exactly) before the comparison.
    """
    policy = Policy() if policy is None else policy
    if not isinstance(policy, Policy):
        raise InputTypeError(f"network_errors: policy must be a Policy or None, got {type(policy).__name__}.")
    if isinstance(scale, str) and scale != "auto":
        raise InputError(f"network_errors: scale must be None, a power of two or 'auto', got {scale!r}.")
    s = 1.0 if scale is None or scale == "auto" else _check_scale("network_errors", scale)
    proto = _proto(model)
    m = npu_jax.model.load(proto)
    feeds = x if isinstance(x, dict) else {name: x for name in m.graph.inputs}
    ref = reference_tensors(proto, feeds) if reference is None else reference
    if scale == "auto":
        s = calibrated_scale(proto, ref, feeds, policy.output)
    if s != 1.0:
        m = npu_jax.model.load(scaled_model(proto, s))
        feeds = {k: np.asarray(v, np.float32) * np.float32(s) for k, v in feeds.items()}
    _, rep = m.run(feeds, hw=hw, policy=policy, strategy=strategy, fused=fused, keep=True, checks=checks)
    fmt = policy.output
    K = _reductions(proto)
    # per tensor: (depth, roundings, accumulation bound) on its worst path; graph inputs: one rounding
    path = {name: (0, 1, 0.0) for name in m.graph.inputs}
    views = {v.output: v.input for v in m.plan.items if isinstance(v, View)}  # Flatten, Reshape: no kernel
    rows = []
    for la in rep.layers:
        for t in la.inputs:
            src = t
            while src not in path and src in views:
                src = views[src]
            if src in path:
                path[t] = path[src]
        prev = [path[t] for t in la.inputs if t in path] or [(0, 1, 0.0)]
        depth = max(p[0] for p in prev) + (la.op in ("conv", "gemm"))
        roundings = max(p[1] for p in prev) + _OWN_ROUNDINGS.get(la.op, 1)
        acc = max(p[2] for p in prev) + (_acc_bound(K[la.name], policy) if la.name in K else 0.0)
        path[la.output] = (depth, roundings, acc)
        if la.output not in ref:
            raise InputError(f"onnxruntime has no tensor {la.output!r} (layer {la.name}).")
        out = np.asarray(rep.tensors[la.output], np.float64) / s  # exact: s is a power of two
        r = ref[la.output]
        metrics = compare(out.reshape(r.shape), r.astype(np.float64), fmt=fmt)
        rows.append(
            LayerError(
                la.name,
                la.op,
                la.output,
                depth,
                roundings,
                network_rel_l2_bound(roundings, acc, fmt),
                metrics,
            )
        )
    label = label or _policy_label(policy) + (f", scaled 2^{int(np.log2(s))}" if s != 1.0 else "")
    return NetworkErrors(m.name, label, policy, tuple(rows), rep, s)


def _reductions(proto: onnx.ModelProto) -> dict[str, int]:
    """Node name -> inner-product length K of every Conv (C/group * kh * kw, from its weights) and
    Gemm / MatMul (the weights' reduced axis) whose weights are initializers."""
    dims = {i.name: tuple(i.dims) for i in proto.graph.initializer}
    out = {}
    for n in proto.graph.node:
        w = dims.get(n.input[1]) if len(n.input) > 1 else None
        if w is None:
            continue
        if n.op_type == "Conv":
            out[n.name] = int(np.prod(w[1:]))
        elif n.op_type in ("Gemm", "MatMul"):
            trans_b = any(a.name == "transB" and a.i for a in n.attribute)
            out[n.name] = int(w[1] if trans_b else w[0])
    return out


def plot_network_errors(results, path=None, ax=None):
    """Relative L2 error of every layer against its depth, one line per run, budgets dashed; a layer
    whose error is not finite (an overflow) is an x above the rest."""
    import matplotlib

    if ax is None and path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5)) if ax is None else (ax.figure, ax)
    errs = [np.array([r.metrics.rel_l2 for r in res.rows], np.float64) for res in results]
    finite = [e[np.isfinite(e)] for e in errs] + [np.array([r.bound for res in results for r in res.rows])]
    top = 2 * max((float(f.max()) for f in finite if f.size), default=1.0)  # where non-finite errors go
    for res, e in zip(results, errs):
        xs = np.arange(1, len(res.rows) + 1)
        bad = ~np.isfinite(e)
        label = res.label + (f" ({int(bad.sum())} non-finite: x)" if bad.any() else "")
        (line,) = ax.semilogy(xs, np.where(bad, np.nan, np.maximum(e, 1e-12)), marker=".", label=label)
        if bad.any():
            ax.semilogy(xs[bad], np.full(int(bad.sum()), top), "x", color=line.get_color())
        ax.semilogy(xs, [r.bound for r in res.rows], ls="--", color=line.get_color(), lw=0.8)
    ax.set_xlabel("layer (execution order)")
    ax.set_ylabel("relative L2 error vs onnxruntime fp32")
    ax.set_title(f"{results[0].network}: error through the depth (dashed: budget)" if results else "")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    return fig


__all__ = [
    "LayerError",
    "NetworkErrors",
    "network_errors",
    "network_rel_l2_bound",
    "calibrated_scale",
    "plot_network_errors",
    "reference_tensors",
    "scaled_model",
]

"""Quantised ONNX networks on the emulator: QDQ and operator-form models (onnxruntime.quantization's
quantize_static, random calibration data) lowered to int8 conv / matmul layers, every int8 tensor
against onnxruntime's within one quantisation step, the logits nearer onnxruntime's int8 network than
the float one, and the int8 pricing of quantised and float networks.

The int8 reference is the quantised graph as written: onnxruntime with graph optimisations off
(``calibrate.reference_session``). Its fused u8s8 kernels (optimisations on) saturate on a CPU without
VNNI and agree with their own graph on only 74-86% of a conv's codes there.

A test draws a fresh seed (``_seed``, printed; ``NPU_JAX_TEST_SEED`` replays one) unless it needs
a fixed one.
"""

from __future__ import annotations

import json
import os
import secrets

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
oq = pytest.importorskip("onnxruntime.quantization")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import npu_jax  # noqa: E402
from npu_jax import cli  # noqa: E402
from npu_jax.errors import InputError  # noqa: E402
from npu_jax.model import calibrate, quant, zoo  # noqa: E402
from npu_jax.model.qspec import QSpec  # noqa: E402

INT8 = npu_jax.Policy(operand="int8", output="int8")


def _seed() -> int:
    """A fresh seed (``NPU_JAX_TEST_SEED`` replays one), printed: pytest shows it for a failing test."""
    env = os.environ.get("NPU_JAX_TEST_SEED")
    seed = int(env) % (2**31) if env else secrets.randbits(31)
    print(f"seed: {seed} (replay with NPU_JAX_TEST_SEED={seed})")
    return seed


class Net:
    """A float network written with onnx.helper: every ``add_*`` returns its output tensor's name."""

    def __init__(self, rng, channels: int, image: int):
        self.rng, self.nodes, self.inits = rng, [], []
        self.c, self.image = channels, image

    def const(self, name, a):
        self.inits.append(numpy_helper.from_array(np.asarray(a, np.float32), name))
        return name

    def conv(self, x, name, cin, cout, k=3, s=1, p=1, g=1, relu=True):
        w = self.rng.standard_normal((cout, cin // g, k, k)) * np.sqrt(2 / (cin // g * k * k))
        ins = [x, self.const(name + ".w", w), self.const(name + ".b", 0.1 * self.rng.standard_normal(cout))]
        attrs = dict(kernel_shape=[k, k], strides=[s, s], pads=[p] * 4, group=g)
        self.nodes.append(helper.make_node("Conv", ins, [name + ".y"], name=name, **attrs))
        return self.op("Relu", [name + ".y"], name + ".relu") if relu else name + ".y"

    def op(self, kind, ins, name, **attrs):
        self.nodes.append(helper.make_node(kind, ins, [name + ".out"], name=name, **attrs))
        return name + ".out"

    def gemm(self, x, name, k, n):
        w = self.const(name + ".w", 0.3 * self.rng.standard_normal((n, k)))
        b = self.const(name + ".b", 0.1 * self.rng.standard_normal(n))
        return self.op("Gemm", [x, w, b], name, transB=1)

    def model(self, out, out_shape):
        x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", self.c, self.image, self.image])
        y = helper.make_tensor_value_info(out, TensorProto.FLOAT, ["N", *out_shape])
        g = helper.make_graph(self.nodes, "qnet", [x], [y], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        return m


def small_cnn(seed: int, image: int = 12):
    """Convs with padding, a stride-2 conv, a depthwise conv, a residual add, global pooling, a Gemm."""
    n = Net(np.random.default_rng(seed), 3, image)
    x = n.conv("input", "c1", 3, 16)
    y = n.conv(x, "c2", 16, 16, s=2)
    y = n.conv(y, "dw", 16, 16, g=16)
    y2 = n.conv(y, "c3", 16, 16, k=1, p=0, relu=False)
    y = n.op("Relu", [n.op("Add", [y, y2], "add")], "add.relu")
    flat = n.op("Flatten", [n.op("GlobalAveragePool", [y], "gap")], "flat")
    return n.model(n.gemm(flat, "fc", 16, 10), (10,))


def one_conv(seed: int, cin=8, cout=16, k=3, s=2, p=1, g=1, image=9):
    n = Net(np.random.default_rng(seed), cin, image)
    out = n.conv("input", "conv", cin, cout, k, s, p, g, relu=False)
    ho = (image + 2 * p - k) // s + 1
    return n.model(out, (cout, ho, ho))


class Reader(oq.CalibrationDataReader):
    def __init__(self, shape, seed: int, n: int = 4, positive: bool = False):
        rng = np.random.default_rng(seed)
        draw = (lambda: rng.uniform(0.2, 3.0, shape)) if positive else (lambda: rng.standard_normal(shape))
        self.batches = iter([{"input": draw().astype(np.float32)} for _ in range(n)])

    def get_next(self):
        return next(self.batches, None)


def quantise(model, tmp_path, seed, fmt="QDQ", act="QUInt8", per_channel=True, positive=False, **kw):
    src, dst = tmp_path / f"f{seed}.onnx", tmp_path / f"q{seed}_{fmt}_{act}.onnx"
    onnx.save(model, src)
    shape = [2] + [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:]]
    oq.quantize_static(
        str(src),
        str(dst),
        Reader(shape, seed, positive=positive),
        quant_format=getattr(oq.QuantFormat, fmt),
        per_channel=per_channel,
        activation_type=getattr(oq.QuantType, act),
        weight_type=oq.QuantType.QInt8,
        **kw,
    )
    return onnx.load(dst)


def ort_tensors(model, x, names):
    """onnxruntime's value of every tensor in ``names`` (added as graph outputs): the reference the
    CLI compares with (a quantised graph as written, graph optimisations off)."""
    return calibrate.ort_tensors(model, {"input": x}, names)


# a code within this many steps of a rounding tie may round either way in fp32 (check_int8_tensors)
TIE = 1e-3


def check_int8_tensors(m, qmodel, x, rep, outputs, exact=False):
    """Every int8 tensor the emulator kept is within one step of onnxruntime's (and most are equal);
    the float outputs within one step of their dequantisation scale.

    ``exact``: every code equals onnxruntime's except at a rounding tie. The graph's own ops run in
    fp32, as does the emulator's requantisation, so a value within fp32's rounding of a tie may round
    either way (seen: a conv whose exact value was 101.4999993 steps, 101.499985 in onnxruntime's fp32
    sum); each differing code must sit within ``TIE`` steps of a tie in onnxruntime's value before its
    QuantizeLinear (the operator form's as :func:`calibrate.as_defined` writes it)."""
    known = {t for n in qmodel.graph.node for t in n.output}
    names = [t for t in rep.tensors if t in known and t in m.graph.quant]
    assert names
    written = calibrate.as_defined(qmodel).graph.node  # the graph onnxruntime runs (QLinear* defined)
    pre = {n.output[0]: n.input[0] for n in written if n.op_type == "QuantizeLinear"}
    ref = ort_tensors(qmodel, x, names + [pre[t] for t in names if exact and t in pre])
    equal = total = 0
    for t in names:
        a, b = rep.tensors[t], ref[t]
        assert a.dtype == b.dtype, t
        d = np.abs(a.astype(np.int32) - b.astype(np.int32))
        assert d.max() <= 1, f"{t}: {d.max()} steps from onnxruntime"
        equal, total = equal + np.sum(d == 0), total + d.size
        if exact and d.any():
            assert t in pre, f"{t}: {np.sum(d != 0)} codes differ from onnxruntime"
            steps = ref[pre[t]][d != 0].astype(np.float64) / m.graph.quant[t].scale
            off = np.abs(steps - np.floor(steps) - 0.5)
            assert off.max() < TIE, f"{t}: a code differs {off.max():.2e} steps from a rounding tie"
    # the int8 layers are exact; a step of difference comes from the float vector kernels (fp16) or
    # from a rounding tie their input moved
    assert equal / total > (0.999 if exact else 0.95), f"{equal / total:.3f} of the int8 values equal"
    for v in outputs.values():
        assert np.all(np.isfinite(v))
    return ref


# ---- the lowering ------------------------------------------------------------------------------------------
def test_qdq_lowering_takes_every_conv_and_gemm(tmp_path):
    seed = _seed()
    qm = quantise(small_cnn(seed), tmp_path, seed)
    m = npu_jax.model.load(qm)
    ops = [la.op for la in m.layers]
    assert ops.count("qconv") == 4 and ops.count("qgemm") == 1 and "conv" not in ops and "gemm" not in ops
    conv = next(la for la in m.layers if la.name == "c2")
    assert conv.weight.dtype == np.int8 and conv.attrs["stride"] == (2, 2)
    assert any(f.startswith("QuantizeLinear:") for f in conv.fused)
    q = conv.attrs["q"]
    assert q.out == "int8" and q.w_scale.shape == (16,) and q.bias is not None
    assert m.quantised and not npu_jax.model.load(small_cnn(seed)).quantised
    qo = npu_jax.model.load(quantise(small_cnn(seed), tmp_path, seed, fmt="QOperator"))
    assert [la.op for la in qo.layers].count("qconv") == 4


def test_bias_folds_the_zero_point_exactly(rng):
    """``sum((x - zp) * w)`` over an input padded with zp equals the zero-padded sum of x * w plus
    QSpec.bias32 (the model's bias minus zp * sum(w) per channel): the identity the int8 layer runs."""
    k, c, zp = 5, 3, int(rng.integers(-100, 100))
    w = rng.integers(-127, 128, (k, c, 3, 3)).astype(np.int8)
    x = rng.integers(-128, 128, (1, c, 4, 4)).astype(np.int8)
    b = rng.integers(-1000, 1000, k).astype(np.int32)
    q = QSpec(0.1, zp, w, np.full(k, 0.01, np.float32), b, "int32")
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=zp)
    win = np.lib.stride_tricks.sliding_window_view(xp[0], (3, 3), axis=(1, 2))  # (c, 4, 4, 3, 3)
    want = np.einsum("chwij,kcij->khw", win - zp, w.astype(np.int64)) + b[:, None, None]
    got = np.einsum("chwij,kcij->khw", win, w.astype(np.int64))
    assert np.array_equal(got + q.bias32(0)[:, None, None], want)


# ---- single layers against onnxruntime (fast) --------------------------------------------------------------
@pytest.mark.parametrize(
    "fmt, act, positive, per_channel",
    [("QDQ", "QUInt8", True, True), ("QOperator", "QInt8", False, False)],
    ids=["qdq-uint8-zero-point-padding", "qoperator-int8-per-tensor"],
)
def test_strided_padded_conv_matches_onnxruntime(tmp_path, fmt, act, positive, per_channel):
    seed = _seed()
    qm = quantise(
        one_conv(seed), tmp_path, seed, fmt=fmt, act=act, positive=positive, per_channel=per_channel
    )
    m = npu_jax.model.load(qm)
    (la,) = [la for la in m.layers if la.op == "qconv"]
    if positive:  # inputs >= 0: uint8 zero point 0, i.e. -128 in the int8 domain: the padding holds it
        assert la.attrs["q"].x_zp == -128
    rng = np.random.default_rng(seed + 1)
    x = (rng.uniform(0.2, 3.0, (2, 8, 9, 9)) if positive else rng.standard_normal((2, 8, 9, 9))).astype(
        np.float32
    )
    out, rep = m.run(x, keep=True)
    check_int8_tensors(m, qm, x, rep, out)
    (lr,) = [r for r in rep.layers if r.op == "qconv"]
    assert lr.cycles > 0 and lr.kernels[0].report is not None


def test_int8_conv_is_exact_against_the_graph_as_written(tmp_path):
    """The reference for int8 results is the quantised graph as written: onnxruntime with graph
    optimisations off (``calibrate.reference_session`` takes that for a quantised graph, the defaults
    for a float one). Against it a strided, zero-point-padded uint8 conv is exact on the emulator:
    every int8 code and the dequantised output, the float steps in fp32. (onnxruntime's fused u8s8
    kernel, optimisations on, is no reference: without VNNI it saturates and agrees with this graph
    on only 74-86% of the codes.) A fixed seed: the graph's own conv runs in fp32, and with seed 15
    every value lies at least 3e-3 steps from a rounding tie, so no CPU's summation order moves a
    code."""
    seed = 15
    qm = quantise(one_conv(seed), tmp_path, seed, positive=True)
    levels = ort.GraphOptimizationLevel
    for model, level in ((qm, levels.ORT_DISABLE_ALL), (one_conv(seed), levels.ORT_ENABLE_ALL)):
        assert calibrate.reference_session(model).get_session_options().graph_optimization_level == level
    m = npu_jax.model.load(qm)
    x = np.random.default_rng(seed + 1).uniform(0.2, 3.0, (2, 8, 9, 9)).astype(np.float32)
    out, rep = m.run(x, keep=True, policy=npu_jax.Policy(operand="fp32", output="fp32"))
    ref = check_int8_tensors(m, qm, x, rep, out, exact=True)
    (name,) = out
    assert np.array_equal(np.asarray(out[name], np.float32), ref[name])


@pytest.mark.slow
def test_depthwise_conv_matches_onnxruntime(tmp_path):
    seed = _seed()
    qm = quantise(one_conv(seed, cin=16, cout=16, s=1, g=16, image=6), tmp_path, seed)
    m = npu_jax.model.load(qm)
    assert next(la for la in m.layers if la.op == "qconv").attrs["groups"] == 16
    x = np.random.default_rng(seed + 1).standard_normal((2, 16, 6, 6)).astype(np.float32)
    out, rep = m.run(x, keep=True)
    check_int8_tensors(m, qm, x, rep, out)


def _integer_model(seed, op):
    """ConvInteger / MatMulInteger -> Cast -> Mul(scale), as a hand-written dynamic-range graph with a
    constant input zero point (uint8 input)."""
    rng = np.random.default_rng(seed)
    if op == "ConvInteger":
        w, shape, out = rng.integers(-127, 128, (8, 4, 3, 3)), ["N", 4, 6, 6], ["N", 8, 4, 4]
        scale = rng.uniform(1e-3, 1e-2, (1, 8, 1, 1))
    else:
        w, shape, out = rng.integers(-127, 128, (12, 8)), ["N", 12], ["N", 8]
        scale = rng.uniform(1e-3, 1e-2, (8,))
    inits = [
        numpy_helper.from_array(w.astype(np.int8), "w"),
        numpy_helper.from_array(np.array(int(rng.integers(1, 255)), np.uint8), "x_zp"),
        numpy_helper.from_array(scale.astype(np.float32), "s"),
    ]
    nodes = [
        helper.make_node(op, ["input", "w", "x_zp"], ["acc"], name="int"),
        helper.make_node("Cast", ["acc"], ["accf"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Mul", ["accf", "s"], ["y"], name="deq"),
    ]
    g = helper.make_graph(
        nodes,
        "integer",
        [helper.make_tensor_value_info("input", TensorProto.UINT8, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("op", ["ConvInteger", pytest.param("MatMulInteger", marks=pytest.mark.slow)])
def test_integer_ops_with_their_dequantisation(op):
    seed = _seed()
    model = _integer_model(seed, op)
    m = npu_jax.model.load(model)
    (la,) = m.layers
    assert la.op == ("qconv" if op == "ConvInteger" else "qgemm") and la.attrs["q"].out == "float"
    rng = np.random.default_rng(seed + 1)
    x_u8 = rng.integers(0, 256, [2] + list(m.graph.inputs["input"][1:])).astype(np.uint8)
    out, _ = m.run(x_u8)
    ref = calibrate.reference_session(model).run(None, {"input": x_u8})[0]
    # the accumulator is exact; the dequantised fp16 differs from onnxruntime's fp32 by one fp16 rounding
    np.testing.assert_allclose(out["y"].astype(np.float32), ref, rtol=1e-3, atol=1e-6)


def test_reference_runs_integer_operators_as_defined():
    """onnxruntime's QLinearConv sums uint8 x int8 pairs in int16 on a CPU without VNNI and saturates
    (255 * 127 * 2 > 32767); the reference session runs it as its definition: equal to exact integer
    arithmetic in numpy, wherever the test runs."""
    rng = np.random.default_rng(0)
    x = rng.integers(200, 256, (1, 4, 5, 5)).astype(np.uint8)
    w = rng.choice([-127, 127], (3, 4, 3, 3)).astype(np.int8)
    b = rng.integers(-500, 500, 3).astype(np.int32)
    xs, xz, ws, ys, yz = 0.02, 3, np.array([0.01, 0.02, 0.015], np.float32), 40.0, 128
    inits = [
        numpy_helper.from_array(np.array(xs, np.float32), "xs"),
        numpy_helper.from_array(np.array(xz, np.uint8), "xz"),
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(ws, "ws"),
        numpy_helper.from_array(np.zeros(3, np.int8), "wz"),
        numpy_helper.from_array(np.array(ys, np.float32), "ys"),
        numpy_helper.from_array(np.array(yz, np.uint8), "yz"),
        numpy_helper.from_array(b, "b"),
    ]
    node = helper.make_node(
        "QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], pads=[1] * 4
    )
    g = helper.make_graph(
        [node],
        "qconv",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 4, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 3, 5, 5])],
        inits,
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    got = calibrate.reference_session(model).run(None, {"x": x})[0]
    xp = np.pad(x.astype(np.int64) - xz, ((0, 0), (0, 0), (1, 1), (1, 1)))
    acc = (
        sum(
            np.einsum("nchw,oc->nohw", xp[:, :, i : i + 5, j : j + 5], w[:, :, i, j].astype(np.int64))
            for i in range(3)
            for j in range(3)
        )
        + b[None, :, None, None]
    )
    scale = (np.float64(np.float32(xs)) * ws.astype(np.float64) / np.float64(np.float32(ys)))[
        None, :, None, None
    ]
    want = np.clip(np.rint(acc * scale) + yz, 0, 255)
    assert np.abs(got.astype(np.int64) - want).max() <= 1  # a tie rounded in fp32 at most
    assert np.mean(got == want) > 0.95


# ---- pricing -----------------------------------------------------------------------------------------------
def test_quantised_model_is_priced_as_int8(tmp_path):
    seed = _seed()
    qm = quantise(small_cnn(seed, image=16), tmp_path, seed)
    hw = npu_jax.presets.ascend910b()
    rep = npu_jax.model.load(qm).estimate(batch=2, hw=hw)
    q = [la for la in rep.layers if la.op == "qconv"]
    assert len(q) == 4 and all(la.operand == "int8" and la.cycles > hw.launch_cycles for la in q)
    assert rep.operand == "int8" and rep.images_per_second > 0
    assert {la.op for la in rep.layers} >= {"qconv", "qgemm", "eltwise", "pool"}  # conversions launch nothing


def test_float_network_priced_as_int8_moves_fewer_bytes():
    m = npu_jax.model.load(zoo.small_cnn(image=16))
    hw = npu_jax.presets.ascend910b()
    fp16, int8 = m.estimate(batch=2, hw=hw), m.estimate(batch=2, hw=hw, policy=INT8)
    convs = [(a, b) for a, b in zip(fp16.layers, int8.layers) if a.op == "conv"]
    assert all(b.operand == "int8" for _, b in convs)
    assert sum(b.gm_bytes for _, b in convs) < sum(a.gm_bytes for a, _ in convs)
    assert int8.cycles < fp16.cycles


def test_int8_residual_chains_fuse_on_the_coupled_chips():
    """Priced as int8, a conv with a residual add after it is one kernel on the 310P (the vendor's
    conv + dequant + vadd + ReLU: the chain on the dequantised fp16 tile in UB), and a conv kernel then
    a vector kernel unfused or on the 910B (no UB beside its Cube); the fused network is faster."""
    m = npu_jax.model.load(zoo.small_cnn(image=16))
    runs = {}
    p310, p910b = npu_jax.presets.ascend310p(), npu_jax.presets.ascend910b()
    for hw, fused in ((p310, True), (p310, False), (p910b, True)):
        rep = m.estimate(batch=2, hw=hw, policy=INT8, fused=fused)
        res = [la for la in rep.layers if "residual" in la.steps]
        assert res
        runs[hw.name, fused] = rep.cycles, {len(la.kernels) for la in res}
    assert runs["ascend310p", True][1] == {1} and runs["ascend910b", True][1] == {2}
    assert runs["ascend310p", False][1] == {2}
    assert runs["ascend310p", True][0] < runs["ascend310p", False][0]


# ---- refusals ---------------------------------------------------------------------------------------------
def test_run_of_a_float_network_with_an_int8_policy_is_refused():
    m = npu_jax.model.load(one_conv(1))
    x = np.random.default_rng(2).standard_normal((1, 8, 9, 9)).astype(np.float32)
    with pytest.raises(InputError, match="quantize_static"):
        m.run(x, policy=INT8)


def test_asymmetric_or_uint8_weights_are_refused(tmp_path):
    seed = _seed()
    qm = quantise(one_conv(seed), tmp_path, seed, per_channel=False)
    for init in qm.graph.initializer:
        if init.name.endswith("w_zero_point"):
            init.CopyFrom(numpy_helper.from_array(np.array(3, np.int8), init.name))
    with pytest.raises(InputError, match="zero point"):
        npu_jax.model.load(qm)
    qu = quantise(one_conv(seed), tmp_path, seed + 1, per_channel=False)
    for init in qu.graph.initializer:
        if init.name.endswith("w_quantized"):
            a = numpy_helper.to_array(init).astype(np.int16) + 128
            init.CopyFrom(numpy_helper.from_array(a.astype(np.uint8), init.name))
        if init.name.endswith("w_zero_point"):
            init.CopyFrom(numpy_helper.from_array(np.array(0, np.uint8), init.name))
    with pytest.raises(InputError, match="int8 weights"):
        npu_jax.model.load(qu)
    assert quant.QUANT_OPS


# ---- the whole network (compile-bound: every distinct layer compiles once) ---------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
def test_small_cnn_int8_tensors_match_onnxruntime_and_logits_follow_it(tmp_path, fmt):
    seed = _seed()
    fm = small_cnn(seed)
    qm = quantise(fm, tmp_path, seed, fmt=fmt)
    m = npu_jax.model.load(qm)
    x = np.random.default_rng(seed + 1).standard_normal((2, 3, 12, 12)).astype(np.float32)
    (name,) = m.graph.outputs
    step = m.graph.quant[next(la.inputs[0] for la in m.layers if la.output == name)].scale
    float_ort = calibrate.reference_session(fm).run(None, {"input": x})[0]
    # the float layers (the residual add, the pooling) in fp32, as onnxruntime computes its QLinearAdd
    # and pooling: every int8 tensor equals onnxruntime's, and so do the logits
    out, rep = m.run(x, keep=True, policy=npu_jax.Policy(operand="fp32", output="fp32"))
    ref = check_int8_tensors(m, qm, x, rep, out, exact=True)
    int8_ort = ref[name]
    assert np.abs(out[name] - int8_ort).max() <= 1e-6 * np.abs(int8_ort).max()
    assert np.abs(out[name] - float_ort).max() > 0.25 * step  # and they are not the float network's
    assert all(la.kernels[0].report.cycles > 0 for la in rep.layers if la.op == "qconv")
    # the default policy (fp16 vector kernels): within one step everywhere
    out, rep = m.run(x, keep=True)
    check_int8_tensors(m, qm, x, rep, out)
    ours = out[name].astype(np.float32)
    # one step of the int8 logits, plus the fp16 rounding of their dequantisation
    assert np.abs(ours - int8_ort).max() <= 1.01 * step + np.abs(int8_ort).max() * 2.0**-10


# ---- the command line --------------------------------------------------------------------------------------
def test_cli_quantises_and_times_a_float_network(tmp_path, capsys):
    out = tmp_path / "r.json"
    argv = ["model", "small_cnn", "--image", "8", "--policy", "int8", "--batch", "2", "--json", str(out)]
    assert cli.main(argv) == 0
    data = json.loads(out.read_text())
    assert data["report"]["operand"] == "int8" and data["fp16_images_per_second"] > 0
    assert {la["op"] for la in data["report"]["layers"]} >= {"qconv", "qgemm"}


@pytest.mark.slow
def test_cli_calibrates_and_runs_on_saved_batches(tmp_path):
    rng = np.random.default_rng(_seed())
    for i in range(2):
        np.save(tmp_path / f"b{i}.npy", rng.standard_normal((1, 8, 9, 9)).astype(np.float32))
    onnx.save(one_conv(int(rng.integers(1 << 30))), tmp_path / "net.onnx")
    out = tmp_path / "r.json"
    argv = [
        "model",
        str(tmp_path / "net.onnx"),
        "--policy",
        "int8",
        "--calibrate",
        str(tmp_path),
        "--json",
        str(out),
    ]
    assert cli.main(argv) == 0
    numbers = json.loads(out.read_text())["numbers"]
    assert numbers["tensors"] and all(v["max_steps"] <= 1 for v in numbers["tensors"].values())
    (o,) = numbers["outputs"].values()
    assert o["max_abs_vs_int8"] < o["max_abs_vs_float"] or o["int8_vs_float"] == 0


def test_cli_runs_a_quantised_file_as_it_is(tmp_path):
    seed = _seed()
    onnx.save(quantise(one_conv(seed), tmp_path, seed), tmp_path / "q.onnx")
    out = tmp_path / "r.json"
    argv = ["model", str(tmp_path / "q.onnx"), "--policy", "int8", "--numbers", "--json", str(out)]
    assert cli.main(argv) == 0
    numbers = json.loads(out.read_text())["numbers"]
    assert all(v["max_steps"] <= 1 for v in numbers["tensors"].values())
    assert "max_abs_vs_float" not in next(iter(numbers["outputs"].values()))
    assert cli.main(["model", str(tmp_path / "q.onnx"), "--numbers"]) == 2  # says: --policy int8


def _qdq_conv_act(seed, act):
    """A hand-written QDQ conv whose activation stays in the graph before its QuantizeLinear (int8
    activations with zero points far from the range's ends, so the clamp matters)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
    w_scale = (np.abs(w).reshape(8, -1).max(1) / 127).astype(np.float32)
    inits = [
        numpy_helper.from_array(np.round(w / w_scale[:, None, None, None]).astype(np.int8), "w_q"),
        numpy_helper.from_array(w_scale, "w_s"),
        numpy_helper.from_array(np.zeros(8, np.int8), "w_zp"),
        numpy_helper.from_array(np.float32(0.02), "x_s"),
        numpy_helper.from_array(np.int8(int(rng.integers(-20, 20))), "x_zp"),
        numpy_helper.from_array(np.float32(0.05), "y_s"),
        numpy_helper.from_array(np.int8(-30), "y_zp"),
        numpy_helper.from_array(np.float32(0.0), "lo"),
        numpy_helper.from_array(np.float32(2.0), "hi"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["input", "x_s", "x_zp"], ["xq"], name="qx"),
        helper.make_node("DequantizeLinear", ["xq", "x_s", "x_zp"], ["xd"], name="dqx"),
        helper.make_node("DequantizeLinear", ["w_q", "w_s", "w_zp"], ["wd"], name="dqw", axis=0),
        helper.make_node("Conv", ["xd", "wd"], ["y"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["y"], ["a"], name="act")
        if act == "relu"
        else helper.make_node("Clip", ["y", "lo", "hi"], ["a"], name="act"),
        helper.make_node("QuantizeLinear", ["a", "y_s", "y_zp"], ["yq"], name="qy"),
    ]
    g = helper.make_graph(
        nodes,
        "qdq_act",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 4, 6, 6])],
        [helper.make_tensor_value_info("yq", TensorProto.INT8, ["N", 8, 6, 6])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("act", [pytest.param("relu", marks=pytest.mark.slow), "clip"])
def test_activation_before_quantize_is_the_int8_clamp(act):
    seed = _seed()
    model = _qdq_conv_act(seed, act)
    m = npu_jax.model.load(model)
    (la,) = [la for la in m.layers if la.op == "qconv"]
    q = la.attrs["q"]
    assert (q.lo, q.hi) == ((-30, 127) if act == "relu" else (-30, 10))  # 2.0 / 0.05 - 30
    x = np.random.default_rng(seed + 1).uniform(-2, 2, (2, 4, 6, 6)).astype(np.float32)
    out, _ = m.run(x)
    ref = calibrate.reference_session(model).run(None, {"input": x})[0]
    d = np.abs(out["yq"].astype(np.int32) - ref.astype(np.int32))
    assert out["yq"].dtype == np.int8 and d.max() <= 1 and np.mean(d == 0) > 0.98
    assert out["yq"].min() == -30 and (act == "relu" or out["yq"].max() <= 10)


def test_qdq_matmul_with_per_column_weights_matches_onnxruntime(tmp_path):
    seed = _seed()
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.standard_normal((12, 8)).astype(np.float32), "W")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["input", "W"], ["y"], name="mm")],
        "mm",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])],
        [w],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    qm = quantise(model, tmp_path, seed)  # per-channel weights: DequantizeLinear(axis=1), per column
    m = npu_jax.model.load(qm)
    (la,) = [la for la in m.layers if la.op == "qgemm"]
    assert la.weight.shape == (12, 8) and la.attrs["q"].w_scale.shape == (8,)
    x = np.random.default_rng(seed + 1).standard_normal((4, 12)).astype(np.float32)
    out, rep = m.run(x, keep=True)
    check_int8_tensors(m, qm, x, rep, out)

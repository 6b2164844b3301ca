"""npu_jax.model: ONNX import, the fusion planner, timing-only estimates and runs with data.

Small hand-built graphs (onnx.helper) keep the data runs to a few compiles; the zoo's real networks
are planned (no compile); estimating and running them takes minutes (marked slow).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import npu_jax  # noqa: E402
from npu_jax.errors import InputError  # noqa: E402
from npu_jax.model import calibrate, fold, zoo  # noqa: E402

FP32 = npu_jax.Policy(operand="fp32", output="fp32")


# ---- graphs -------------------------------------------------------------------------------------------------
class G:
    """A tiny graph builder: ``conv``, ``bn``, ``op`` add nodes; ``model`` makes the ModelProto."""

    def __init__(self, rng, c: int, hw: int, batch="N"):
        self.rng, self.nodes, self.inits = rng, [], []
        self.x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, c, hw, hw])
        self.batch = batch

    def const(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.asarray(arr, np.float32), name))
        return name

    def conv(self, x, name, cin, cout, k=3, stride=1, pad=1, bias=False):
        w = self.const(f"{name}.w", self.rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k))
        ins = [x, w] + ([self.const(f"{name}.b", self.rng.standard_normal(cout) * 0.1)] if bias else [])
        self.nodes.append(
            helper.make_node(
                "Conv", ins, [name], name=name, kernel_shape=[k, k], strides=[stride] * 2, pads=[pad] * 4
            )
        )
        return name

    def bn(self, x, name, c):
        r = self.rng
        ps = [
            self.const(f"{name}.{p}", v)
            for p, v in (
                ("g", r.uniform(0.5, 1.5, c)),
                ("b", r.standard_normal(c) * 0.1),
                ("m", r.standard_normal(c) * 0.1),
                ("v", r.uniform(0.5, 1.5, c)),
            )
        ]
        self.nodes.append(helper.make_node("BatchNormalization", [x, *ps], [name], name=name, epsilon=1e-5))
        return name

    def op(self, kind, ins, name, **attrs):
        self.nodes.append(helper.make_node(kind, list(ins), [name], name=name, **attrs))
        return name

    def model(self, out, out_shape):
        y = helper.make_tensor_value_info(out, TensorProto.FLOAT, [self.batch, *out_shape])
        g = helper.make_graph(self.nodes, "test", [self.x], [y], initializer=self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def conv_bn_relu(rng, batch="N"):
    """The same conv geometry as resnetish's first layer: the data runs share one compiled program."""
    g = G(rng, 16, 8, batch)
    y = g.op("Relu", [g.bn(g.conv("x", "conv", 16, 16), "bn", 16)], "relu")
    return g.model(y, [16, 8, 8])


def resnetish(rng):
    """A residual block (conv+bn+relu, conv+bn, Add, Relu); a strided conv with a bias; Flatten; Gemm."""
    g = G(rng, 16, 8)
    x = "x"
    y = g.op("Relu", [g.bn(g.conv(x, "b.conv1", 16, 16), "b.bn1", 16)], "b.relu1")
    y = g.bn(g.conv(y, "b.conv2", 16, 16), "b.bn2", 16)
    x = g.op("Relu", [g.op("Add", [y, x], "b.add")], "b.relu")
    x = g.op("Relu", [g.conv(x, "down", 16, 32, 3, 2, 1, bias=True)], "down.relu")
    f = g.op("Flatten", [x], "flat", axis=1)
    w = g.const("fc.w", rng.standard_normal((10, 32 * 16)) * 0.05)
    b = g.const("fc.b", rng.standard_normal(10) * 0.1)
    return g.model(g.op("Gemm", [f, w, b], "fc", transB=1), [10])


def graph_flops(model, batch: int) -> int:
    """2 x multiply-adds of every Conv and Gemm, counted from the ONNX nodes' weights and the output
    shapes onnx's shape inference gives (independent of npu_jax.model)."""
    inferred = onnx.shape_inference.infer_shapes(model).graph
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in (*inferred.value_info, *inferred.output)
    }
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    flops = 0
    for n in model.graph.node:
        if n.op_type == "Conv":
            k, cg, kh, kw = inits[n.input[1]].shape
            _, _, ho, wo = shapes[n.output[0]]
            flops += 2 * batch * ho * wo * k * cg * kh * kw
        elif n.op_type == "Gemm":
            k_out, k_in = inits[n.input[1]].shape
            flops += 2 * batch * k_in * k_out
    return flops


def ort_run(model, x):
    return calibrate.reference_session(model).run(None, {"x": np.asarray(x, np.float32)})[0]


# ---- load ---------------------------------------------------------------------------------------------------
def test_load_refuses_unsupported_op_by_name(rng):
    g = G(rng, 4, 8)
    y = g.op("Softmax", [g.conv("x", "conv", 4, 8)], "my_softmax", axis=1)
    with pytest.raises(InputError, match=r"my_softmax.*'Softmax'"):
        npu_jax.model.load(g.model(y, [8, 8, 8]))


def test_load_refuses_dynamic_spatial_dims(rng):
    g = G(rng, 4, 8)
    g.x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, "H", "W"])
    y = g.op("Relu", [g.conv("x", "conv", 4, 8)], "relu")
    m = helper.make_model(
        helper.make_graph(
            g.nodes, "t", [g.x], [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)], g.inits
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    with pytest.raises(InputError, match="only the first .batch. dimension may be dynamic"):
        npu_jax.model.load(m)


def test_load_refuses_bad_argument(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        npu_jax.model.load(tmp_path / "missing.onnx")
    with pytest.raises(TypeError, match="path to an .onnx file or an onnx.ModelProto"):
        npu_jax.model.load(3)


def test_load_from_path_and_lazy_attribute(rng, tmp_path):
    p = tmp_path / "m.onnx"
    onnx.save(conv_bn_relu(rng), p)
    m = npu_jax.model.load(str(p))
    assert [la.name for la in m.layers] == ["conv"]
    assert m.graph.batch is None and m.graph.inputs == {"x": (None, 16, 8, 8)}


# ---- folding and the planner ----------------------------------------------------------------------------------
def test_bn_fold_matches_the_formula_in_float64(rng):
    w, gam, bet, mu = (rng.standard_normal(s) for s in ((6, 3, 3, 3), 6, 6, 6))
    var = rng.uniform(0.1, 2.0, 6)
    w2, b2 = fold.finish(*fold.batchnorm(w, None, gam, bet, mu, var, 1e-3))
    s = gam / np.sqrt(var + 1e-3)
    np.testing.assert_array_equal(w2, (w * s[:, None, None, None]).astype(np.float32))
    np.testing.assert_array_equal(b2, (-mu * s + bet).astype(np.float32))


def test_fusion_decisions_single_consumer_and_rules(rng):
    g = G(rng, 8, 8)
    a = g.conv("x", "a", 8, 8)  # two consumers: neither fuses into a
    r1 = g.op("Relu", [a], "a.relu")
    s = g.op("Add", [a, r1], "a.add")
    b = g.conv(s, "b", 8, 8)  # Mul by a per-channel constant folds; LeakyRelu fuses; Clip(0, 6) fuses
    m = g.op("Mul", [b, g.const("k", rng.uniform(0.5, 2, (8, 1, 1)))], "b.mul")
    lk = g.op("LeakyRelu", [m], "b.leaky", alpha=0.2)
    c = g.op("Clip", [lk, g.const("lo", 0.0), g.const("hi", 6.0)], "b.clip")
    model = npu_jax.model.load(g.model(c, [8, 8, 8]))
    by = {(d.node, d.layer): d for d in model.plan.decisions}
    assert not by[("a.relu", "a")].fused and "2 consumers" in by[("a.relu", "a")].why
    assert not by[("a.add", "a")].fused
    layers = {la.name: la for la in model.layers}
    assert set(layers) == {"a", "a.relu", "b"}
    assert layers["a.relu"].op == "eltwise" and [str(s) for s in layers["a.relu"].steps] == [
        "relu",
        "residual",
    ]
    assert layers["b"].fused == ("Mul:b.mul", "LeakyRelu:b.leaky", "Clip:b.clip")
    assert [str(s) for s in layers["b"].steps] == [
        "leaky_relu(0.2)",
        "clipped_relu(6)",
    ]  # no bias: b has none
    inits = {t.name: numpy_helper.to_array(t) for t in g.inits}
    want = inits["b.w"].astype(np.float64) * inits["k"].astype(np.float64).reshape(8, 1, 1, 1)
    np.testing.assert_array_equal(layers["b"].weight, want.astype(np.float32))
    # the standalone Add (a + relu(a)) became the eltwise layer's residual step
    assert layers["a.relu"].fused == ("Add:a.add",) and layers["a.relu"].inputs == ("a", "a")


def test_fold_refused_after_a_non_linear_step(rng):
    g = G(rng, 4, 8)
    r = g.op("Relu", [g.conv("x", "c", 4, 4)], "r")
    y = g.bn(r, "late_bn", 4)
    with pytest.raises(InputError, match="late_bn.*no longer linear|late_bn"):
        npu_jax.model.load(g.model(y, [4, 8, 8]))


def test_resnet50_plan_fuses_every_conv_bn_relu_and_residual():
    m = npu_jax.model.load(zoo.resnet50(image=64))
    proto = zoo.resnet50(image=64)
    convs = [n for n in proto.graph.node if n.op_type == "Conv"]
    layers = {la.name: la for la in m.layers}
    assert sum(la.op == "conv" for la in m.layers) == len(convs) == 53
    assert len(m.layers) == 53 + 2 + 1  # + max pool, global average pool; + fc
    fused = {f.split(":")[1] for la in m.layers for f in la.fused}
    for n in proto.graph.node:
        if n.op_type in ("BatchNormalization", "Add", "Relu"):
            assert n.name in fused, n.name
    for la in layers.values():
        if any(f.startswith("Add:") for f in la.fused):
            assert [str(s) for s in la.steps] == ["bias", "residual", "relu"]


def test_gemm_lowering_and_views(rng):
    g = G(rng, 4, 4)
    r = g.op("Reshape", ["x", g.const("shape", np.array([-1, 64]))], "reshape")
    g.inits[-1] = numpy_helper.from_array(np.array([-1, 64], np.int64), "shape")
    b = rng.standard_normal((64, 8))
    y = g.op(
        "Gemm", [r, g.const("fc.b", b), g.const("fc.c", rng.standard_normal(8))], "fc", alpha=0.5, beta=2.0
    )
    y = g.op("MatMul", [g.op("Relu", [y], "fc.relu"), g.const("mm.b", rng.standard_normal((8, 3)))], "mm")
    m = npu_jax.model.load(g.model(y, [3]))
    fc, mm = m.layers
    assert (fc.op, fc.fused, [str(s) for s in fc.steps]) == ("gemm", ("Relu:fc.relu",), ["bias", "relu"])
    np.testing.assert_allclose(fc.weight, (0.5 * b).astype(np.float32), rtol=1e-7)
    inits = {t.name: numpy_helper.to_array(t) for t in g.inits}
    np.testing.assert_allclose(fc.bias, 2.0 * inits["fc.c"], rtol=1e-7)
    assert mm.op == "gemm" and mm.steps == () and mm.inputs == ("fc.relu",)
    assert [i.op for i in m.plan.items] == ["Reshape", "gemm", "gemm"]


def test_clip_that_is_no_relu_is_refused_by_name(rng):
    g = G(rng, 4, 8)
    a = g.conv("x", "c", 4, 4)
    r = g.op("Relu", [a], "r")  # a has two consumers: the Clip cannot fuse and must run alone
    c = g.op("Clip", [a, g.const("lo", -1.0), g.const("hi", 1.0)], "odd_clip")
    y = g.op("Add", [r, c], "sum")
    with pytest.raises(InputError, match=r"odd_clip.*Clip\(min=-1.0"):
        npu_jax.model.load(g.model(y, [4, 8, 8]))


# ---- with data ------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_conv_bn_relu_matches_onnxruntime_fp32(rng):
    model = conv_bn_relu(rng)
    x = rng.standard_normal((2, 16, 8, 8)).astype(np.float32)
    out, rep = npu_jax.model.load(model).run(x, hw=npu_jax.presets.ascend910b(), policy=FP32)
    ref = ort_run(model, x)
    np.testing.assert_allclose(out["relu"], ref, rtol=2e-5, atol=2e-5)
    (la,) = rep.layers
    assert la.fused == ("BatchNormalization:bn", "Relu:relu") and len(la.kernels) == 1
    assert la.output == "relu" and la.inputs == ("x",)


@pytest.fixture(scope="module")
def resnetish_runs():
    rng = np.random.default_rng(7)
    model = resnetish(rng)
    m = npu_jax.model.load(model)
    x = rng.standard_normal((2, 16, 8, 8)).astype(np.float32)
    hw = npu_jax.presets.ascend910b()
    out, rep = m.run(x, hw=hw, policy=FP32, keep=True)
    return model, m, x, hw, out, rep


@pytest.mark.slow
def test_network_run_matches_onnxruntime_and_keeps_tensors(resnetish_runs):
    model, m, x, hw, out, rep = resnetish_runs
    np.testing.assert_allclose(out["fc"], ort_run(model, x), rtol=1e-4, atol=1e-4)
    assert [la.name for la in rep.layers] == ["b.conv1", "b.conv2", "down", "fc"]
    assert set(rep.tensors) == {la.output for la in rep.layers}
    res = rep.layer("b.conv2")
    assert res.inputs == ("b.relu1", "x") and res.output == "b.relu"
    # 910B: bias in the Fixpipe, the residual add and ReLU in a vector kernel after the conv
    assert [k.label for k in res.kernels] == ["conv", "eltwise"]
    assert [k.label for k in rep.layer("fc").kernels] == ["gemm", "eltwise"]


@pytest.mark.slow
def test_run_cycles_equal_estimate(resnetish_runs):
    model, m, x, hw, out, rep = resnetish_runs
    est = m.estimate(batch=2, hw=hw, policy=FP32)
    assert [la.name for la in est.layers] == [la.name for la in rep.layers]
    for a, b in zip(est.layers, rep.layers):
        assert [k.cycles for k in a.kernels] == [k.cycles for k in b.kernels], a.name
        assert a.tiling == b.tiling and a.flops == b.flops
    assert est.cycles == rep.cycles


@pytest.mark.slow
def test_estimate_totals_and_flops(resnetish_runs):
    model, m, x, hw, out, rep = resnetish_runs
    r = m.estimate(batch=2, hw=hw, policy=FP32)  # the run's kernels, priced (cached)
    assert r.flops == graph_flops(model, 2)
    assert (
        r.cycles == sum(la.cycles for la in r.layers) == sum(k.cycles for la in r.layers for k in la.kernels)
    )
    assert r.gm_bytes == sum(la.gm_bytes for la in r.layers)
    assert r.images_per_second == pytest.approx(2 / (r.cycles / (hw.clock_ghz * 1e9)))
    assert all(k.launch_cycles == hw.launch_cycles for la in r.layers for k in la.kernels)
    assert r.launch_cycles == r.launches * hw.launch_cycles


def test_fusion_saving_and_report_outputs(rng, tmp_path):
    model = conv_bn_relu(rng)
    m = npu_jax.model.load(model)
    hw = npu_jax.presets.ascend910b()
    sav = m.fusion_saving(batch=2, hw=hw)
    assert sav.unfused.launches == 2 and sav.fused.launches == 1
    assert sav.cycles_saved > 0 and sav.gm_bytes_saved > 0
    assert "total" in sav.table() and len(sav.as_dict()["layers"]) == len(m.layers)
    est = sav.fused
    text = est.summary()
    assert all(la.name in text for la in est.layers) and "images/s" in text
    path = est.to_chrome_trace(tmp_path / "net.json")
    events = json.load(open(path))["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    assert len(slices) == 2 * est.launches  # a launch slice before each kernel
    end = max(e["ts"] + e["dur"] for e in slices)
    assert end == pytest.approx(est.time_us)
    est.plot(tmp_path / "net.png")
    assert (tmp_path / "net.png").stat().st_size > 0
    d = json.loads(json.dumps(est.as_dict()))
    assert d["cycles"] == est.cycles and len(d["layers"]) == len(est.layers)


@pytest.mark.slow
def test_pooling_layers_match_onnxruntime_and_their_closed_form(rng):
    g = G(rng, 16, 8)
    x = g.op("Relu", [g.bn(g.conv("x", "conv", 16, 16), "bn", 16)], "relu")  # resnetish's first conv
    x = g.op("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    y = g.op("GlobalAveragePool", [x], "gap")
    model = g.model(y, [16, 1, 1])
    m = npu_jax.model.load(model)
    hw = npu_jax.presets.ascend910b()
    xs = rng.standard_normal((2, 16, 8, 8)).astype(np.float32)
    out, rep = m.run(xs, hw=hw, policy=FP32)
    np.testing.assert_allclose(out["gap"], ort_run(model, xs), rtol=1e-5, atol=1e-5)
    est = m.estimate(batch=2, hw=hw, policy=FP32)
    assert [la.op for la in rep.layers] == ["conv", "pool", "pool"]
    for a, b in zip(est.layers, rep.layers):
        assert [k.cycles for k in a.kernels] == [k.cycles for k in b.kernels], a.name
    for a, b in zip(est.layers[1:], rep.layers[1:]):  # the pools' closed form: bytes and bottleneck too
        assert (a.gm_bytes, a.bottleneck) == (b.gm_bytes, b.bottleneck), a.name


def test_fixed_batch_model_estimates_other_batches(rng):
    m = npu_jax.model.load(conv_bn_relu(rng, batch=1))
    assert m.graph.batch == 1
    hw = npu_jax.presets.ascend910b()
    a, b = m.estimate(batch=1, hw=hw), m.estimate(batch=4, hw=hw)
    assert b.batch == 4 and b.flops == 4 * a.flops == graph_flops(conv_bn_relu(rng), 4)
    assert b.cycles >= a.cycles and b.images_per_second > a.images_per_second


# ---- the zoo's networks (need pooling; MobileNetV2 also depthwise conv) ----------------------------------------
@pytest.mark.slow
def test_resnet50_estimate_counts_layers_and_flops():
    model = zoo.resnet50(image=64)  # 224 x 224 takes minutes of CPU in the tiling chooser (docs/model.md)
    m = npu_jax.model.load(model)
    hw = npu_jax.presets.ascend910b()
    for batch in (1, 2):
        rep = m.estimate(batch=batch, hw=hw)
        assert len(rep.layers) == 56 and sum(la.op == "conv" for la in rep.layers) == 53
        assert rep.flops == graph_flops(model, batch)


@pytest.mark.slow
def test_mobilenet_v2_estimates():
    model = zoo.mobilenet_v2(image=64)
    m = npu_jax.model.load(model)
    rep = m.estimate(batch=2, hw=npu_jax.presets.ascend910b())
    assert sum(la.op == "conv" for la in rep.layers) == 52
    assert rep.flops == graph_flops(model, 2)


@pytest.mark.slow
def test_small_cnn_matches_onnxruntime_and_its_estimate():
    """Every kind of layer (conv + BN + ReLU / ReLU6, max pool, residual blocks, a depthwise conv whose
    super-groups keep its epilogue out of the Cube kernel, global average pool, Flatten, Gemm)."""
    rng = np.random.default_rng(3)
    model = zoo.small_cnn(seed=int(rng.integers(1 << 30)), image=16)
    m = npu_jax.model.load(model)
    hw = npu_jax.presets.ascend910b()
    x = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
    out, rep = m.run(x, hw=hw, policy=FP32)
    ref = calibrate.reference_session(model).run(None, {"input": x})[0]
    np.testing.assert_allclose(out["logits"], ref, rtol=1e-4, atol=1e-4)
    est = m.estimate(batch=2, hw=hw, policy=FP32)
    assert [[k.cycles for k in la.kernels] for la in est.layers] == [
        [k.cycles for k in la.kernels] for la in rep.layers
    ]
    assert est.flops == rep.flops == graph_flops(model, 2)
    assert {la.op for la in rep.layers} == {"conv", "pool", "gemm"}

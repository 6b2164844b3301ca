"""The zoo's networks are torchvision's architectures: parameter counts and multiply-adds from the
graph, counted here independently of npu_jax (from the initializers and ONNX shape inference), equal
torchvision's published figures; onnxruntime runs them; activations stay fp16-safe through the depth."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import numpy_helper, shape_inference  # noqa: E402

from npu_jax.model import calibrate, zoo  # noqa: E402

# torchvision's model documentation (weights' meta "num_params" and "_ops" in GFLOPS, i.e. giga
# multiply-adds of the convs and the classifier at 224x224): pytorch.org/vision/stable/models.html
TORCHVISION = {
    "resnet18": (11_689_512, 1.81, 20),
    "resnet50": (25_557_032, 4.09, 53),
    "mobilenet_v2": (3_504_872, 0.30, 52),
}
BN_BUFFERS = ("running_mean", "running_var")


def _counts(model) -> tuple[int, float, int]:
    """(trainable parameters, giga multiply-adds of Conv and Gemm, number of Conv nodes)."""
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    consts = {n.input[i] for n in model.graph.node if n.op_type == "Clip" for i in (1, 2)}
    params = sum(v.size for k, v in inits.items() if not k.endswith(BN_BUFFERS) and k not in consts)
    fixed = onnx.helper.make_model(model.graph, opset_imports=model.opset_import)
    fixed.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1
    inferred = shape_inference.infer_shapes(fixed, strict_mode=True)
    shapes = {
        v.name: tuple(d.dim_value for d in v.type.tensor_type.shape.dim)
        for v in (*inferred.graph.value_info, *inferred.graph.output)
    }
    macs, convs = 0, 0
    for n in inferred.graph.node:
        if n.op_type == "Conv":
            _, cg, kh, kw = inits[n.input[1]].shape
            macs += int(np.prod(shapes[n.output[0]])) * cg * kh * kw
            convs += 1
        elif n.op_type == "Gemm":
            macs += inits[n.input[1]].size
    return params, macs / 1e9, convs


@pytest.mark.parametrize("name", sorted(TORCHVISION))
def test_architecture_matches_torchvision(name):
    params, gmacs, convs = _counts(zoo.build(name))
    want_params, want_gmacs, want_convs = TORCHVISION[name]
    assert params == want_params
    assert round(gmacs, 2) == want_gmacs
    assert convs == want_convs


def test_mobilenet_v2_depthwise_layers():
    m = zoo.mobilenet_v2()
    groups = [
        a.i for n in m.graph.node if n.op_type == "Conv" for a in n.attribute if a.name == "group" and a.i > 1
    ]
    assert len(groups) == 17  # one depthwise 3x3 per inverted residual
    inits = {i.name: i.dims for i in m.graph.initializer}
    dw = [
        n
        for n in m.graph.node
        if n.op_type == "Conv" and any(a.name == "group" and a.i > 1 for a in n.attribute)
    ]
    assert all(inits[n.input[1]][1] == 1 for n in dw)


def _run_all(model, x):
    """onnxruntime's value of every node output."""
    names = [n.output[0] for n in model.graph.node]
    del model.graph.output[:]
    model.graph.output.extend(onnx.ValueInfoProto(name=nm) for nm in names)
    sess = calibrate.reference_session(model)
    return dict(zip(names, sess.run(None, {"input": x})))


@pytest.mark.slow
@pytest.mark.parametrize("name,image", [("small_cnn", 32), ("resnet18", 64), ("mobilenet_v2", 64)])
def test_runs_in_onnxruntime_with_fp16_safe_activations(name, image, rng):
    seed = int(rng.integers(1 << 30))
    x = np.random.default_rng(seed).standard_normal((2, 3, image, image)).astype(np.float32)
    outs = _run_all(zoo.build(name, image=image, seed=seed % 1000), x)
    assert outs["logits"].shape[0] == 2
    for k, v in outs.items():
        assert np.isfinite(v).all(), k
        assert np.abs(v).max() < 1e3, (k, float(np.abs(v).max()))  # far from fp16's 65504
        if v.ndim == 4:
            assert np.sqrt(np.mean(v.astype(np.float64) ** 2)) > 1e-2, k  # not vanishing either


def test_seeds_and_fixed_batch():
    a, b = zoo.small_cnn(seed=1), zoo.small_cnn(seed=2)
    wa, wb = (numpy_helper.to_array(m.graph.initializer[0]) for m in (a, b))
    assert not np.array_equal(wa, wb)
    assert np.array_equal(wa, numpy_helper.to_array(zoo.small_cnn(seed=1).graph.initializer[0]))
    m = zoo.small_cnn(batch=4)
    assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 4


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"image": 4}, "image"),
        ({"seed": -1}, "seed"),
        ({"num_classes": 0}, "num_classes"),
        ({"batch": 0}, "batch"),
        ({"batch": True}, "batch"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        zoo.small_cnn(**kwargs)
    with pytest.raises(ValueError, match="unknown network"):
        zoo.build("vgg16")


def test_cli_writes_a_file(tmp_path):
    path = tmp_path / "net.onnx"
    zoo.main(["small_cnn", str(path), "--seed", "3"])
    onnx.checker.check_model(onnx.load(str(path)))

"""The precision lab on a network: every emulated layer against onnxruntime, with budgets; and the
``npu-jax model`` command."""

from __future__ import annotations

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import npu_jax  # noqa: E402
from npu_jax.cli import main as cli_main  # noqa: E402
from npu_jax.errors import InputError, InputTypeError  # noqa: E402
from npu_jax.model import zoo  # noqa: E402
from precision.network import (  # noqa: E402
    calibrated_scale,
    network_errors,
    plot_network_errors,
    reference_tensors,
    scaled_model,
)
from precision.strategies import POLICIES  # noqa: E402


def _net(seed: int, image: int = 8) -> onnx.ModelProto:
    """A stem conv + BN + ReLU, a residual block (its Add and ReLU fused), global pooling, Flatten and a
    classifier: a view between two kernels, a residual join, every kind of layer but max pooling."""
    b = zoo._Builder(seed)
    x = b.relu(b.bn(b.conv("input", "stem", 3, 16, 3, 1, 1), "stem_bn", 16), "stem_relu")
    x, c = zoo._basic(b, x, "block", 16, 16, 1)
    return b.model("tiny_resnet", b.head(x, c, 10), 3, image, "N", 10)


@pytest.fixture(scope="module")
def case():
    seed = int(np.random.default_rng().integers(1 << 20))
    print(f"tiny resnet seed: {seed}")
    proto = _net(seed)
    x = np.random.default_rng(seed + 1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    return proto, x, reference_tensors(proto, x)


def test_reference_tensors_are_onnxruntimes_every_node(case):
    proto, x, ref = case
    names = [n.output[0] for n in proto.graph.node]
    assert set(names) <= set(ref)
    assert ref["logits"].shape == (2, 10)


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["mixed", "fp32"])
def test_every_layer_within_its_budget(case, policy):
    proto, x, ref = case
    hw = npu_jax.presets.tiny()
    res = network_errors(proto, x, hw=hw, policy=POLICIES[policy], label=policy, reference=ref)
    assert res.ok, res.table()
    assert [r.name for r in res.rows] == [la.name for la in res.report.layers]
    assert res.report.cycles == res.cycles > 0
    # the worst path's roundings grow along the network, through the Flatten view to the classifier
    assert [r.roundings for r in res.rows] == sorted(r.roundings for r in res.rows)
    fc = res.rows[-1]
    assert fc.op == "gemm" and fc.depth == 4  # stem, block conv1, conv2, fc
    u = 2.0**-11 if policy == "mixed" else 2.0**-24
    for r in res.rows:
        assert r.metrics.rel_l2 > 0  # a real comparison: fp32 weights rounded, never bit-equal
        assert r.bound >= r.roundings * u
    if policy == "fp32":
        assert max(r.metrics.rel_l2 for r in res.rows) < 1e-5
    else:
        assert min(r.metrics.rel_l2 for r in res.rows) > 1e-5  # fp16 storage shows


@pytest.mark.slow
def test_a_wrong_answer_fails_its_budget(case):
    proto, x, ref = case
    bad = {k: v * (1 + 1e-2) for k, v in ref.items()}  # a 1% error everywhere
    res = network_errors(proto, x, hw=npu_jax.presets.tiny(), policy=POLICIES["mixed"], reference=bad)
    assert not res.ok
    assert "NO" in res.table()


@pytest.mark.slow
def test_plot_and_dict(case, tmp_path):
    proto, x, ref = case
    res = network_errors(proto, x, hw=npu_jax.presets.tiny(), policy=POLICIES["mixed"], reference=ref)
    path = tmp_path / "depth.png"
    plot_network_errors([res], path)
    assert path.stat().st_size > 1000
    d = res.as_dict()
    assert json.loads(json.dumps(d))["layers"][0]["name"] == res.rows[0].name


def test_bad_arguments(case):
    proto, x, _ = case
    with pytest.raises(InputTypeError, match="policy"):
        network_errors(proto, x, policy="fp16")
    with pytest.raises(InputTypeError, match="model"):
        network_errors(42, x)


# ---- network-wide power-of-two scaling ------------------------------------------------------------------
@pytest.mark.parametrize("k", [-5, 7])
def test_scaled_model_scales_every_tensor_exactly(case, k):
    proto, x, ref = case
    s = 2.0**k
    got = reference_tensors(scaled_model(proto, s), x * np.float32(s))
    for name, r in ref.items():  # BN shifts, biases scaled: every node's output is s times, bit for bit
        np.testing.assert_array_equal(got[name], r * np.float32(s), err_msg=name)
    assert len(proto.graph.initializer) < len(scaled_model(proto, s).graph.initializer)  # copies, not edits


def test_calibrated_scaling_brings_an_overflowing_network_back_into_budget(case, tmp_path):
    proto, x, _ = case
    big = x * np.float32(2.0**13)  # activations (or the global pool's sum) past fp16's 65504
    ref = reference_tensors(proto, big)
    s = calibrated_scale(proto, ref, {"input": big})
    assert s < 1 and np.log2(s) == int(np.log2(s))
    hw, mixed = npu_jax.presets.tiny(), POLICIES["mixed"]
    plain = network_errors(proto, big, hw=hw, policy=mixed, reference=ref)
    assert not plain.ok and not np.isfinite(plain.final.metrics.rel_l2), plain.table()
    scaled = network_errors(proto, big, hw=hw, policy=mixed, reference=ref, scale="auto")
    assert scaled.ok, scaled.table()
    assert scaled.scale == s and "scaled 2^" in scaled.label and scaled.as_dict()["scale"] == s
    fig = plot_network_errors([plain, scaled], tmp_path / "range.png")  # overflowed layers drawn as x
    assert "non-finite" in fig.axes[0].get_legend().get_texts()[0].get_text()


def test_scaling_refuses_what_it_cannot_scale(case):
    proto, x, _ = case
    for bad in (3.0, 0.0, -2.0, float("inf")):
        with pytest.raises(InputError, match="power of two"):
            scaled_model(proto, bad)
    with pytest.raises(InputTypeError, match="scale"):
        network_errors(proto, x, scale=True)
    with pytest.raises(InputError, match="scale"):
        network_errors(proto, x, scale="max")
    sig = onnx.helper.make_node("Sigmoid", ["logits"], ["p"], name="head.sigmoid")
    m = onnx.ModelProto()
    m.CopyFrom(proto)
    m.graph.node.append(sig)
    with pytest.raises(InputError, match="head.sigmoid"):
        scaled_model(m, 2.0)
    sq = onnx.helper.make_node("Mul", ["logits", "logits"], ["sq"], name="head.square")
    m.graph.node.pop()
    m.graph.node.append(sq)
    with pytest.raises(InputError, match="head.square"):
        scaled_model(m, 2.0)


# ---- npu-jax model --------------------------------------------------------------------------------------
@pytest.mark.slow
def test_cli_model_estimate_json(tmp_path, capsys):
    path = tmp_path / "net.onnx"
    onnx.save(_net(3), str(path))
    code = cli_main(["model", str(path), "--preset", "tiny", "--batch", "2", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    data = json.loads(out)
    layers = data["report"]["layers"]
    assert [la["name"] for la in layers] == ["stem", "block.conv1", "block.conv2", "avgpool", "fc"]
    assert data["report"]["cycles"] == sum(la["cycles"] for la in layers)


def test_cli_model_numbers_under_a_scale(tmp_path, capsys):
    path = tmp_path / "net.onnx"
    onnx.save(_net(5), str(path))
    argv = ["model", str(path), "--preset", "tiny", "--batch", "2", "--numbers", "--scale", "2^-2", "--json"]
    assert cli_main(argv) == 0
    numbers = json.loads(capsys.readouterr().out)["numbers"]
    assert numbers["scale"] == 0.25 and numbers["ok"] and "scaled 2^-2" in numbers["label"]


@pytest.mark.slow
def test_cli_model_text_trace_and_fusion(tmp_path, capsys):
    trace = tmp_path / "t.json"
    code = cli_main(
        ["model", "small_cnn", "--image", "16", "--preset", "tiny", "--fusion", "--trace", str(trace)]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "images/s" in out and "saved" in out
    assert json.loads(trace.read_text())["traceEvents"]


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["model", "nonexistent.onnx"], "does not exist"),
        (["model", "resnet18", "--batch", "0"], "--batch"),
        (["model", "resnet18", "--policy", "int4"], "--policy"),
        (["model", "resnet18", "--numbers", "--scale", "3"], "--scale"),
        (["model", "resnet18", "--scale", "auto"], "--scale"),
        (["model", "resnet18", "--schedule", "l2", "--numbers"], "--schedule"),
        (["model", "resnet18", "--schedule", "stacks"], "--schedule"),
    ],
)
def test_cli_model_usage_errors(argv, needle, capsys):
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_cli_model_refuses_image_for_a_file_and_a_file_that_is_no_model(tmp_path, capsys):
    path = tmp_path / "net.onnx"
    onnx.save(_net(1), str(path))
    assert cli_main(["model", str(path), "--image", "32"]) == 2
    assert "--image" in capsys.readouterr().err
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    assert cli_main(["model", str(junk)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err

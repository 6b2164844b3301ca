"""``npu-jax fuse`` and the demo's fusion section: numbers that agree with ``fusion.analyze``, files, bad input."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import types

import numpy as np
import pytest

import fusion
from fusion import cli as fcli
from fusion.reading import fusion_reading
from fusion.study import reference_output
from npu_jax import cli
from npu_jax.cli import registry
from npu_jax.cli.data import demo_layers
from npu_jax.cli.demo import DemoOptions
from npu_jax.hw import presets

# A small layer on the tiny core: each run is a couple of seconds of compiling.
_SMALL = ["--preset", "tiny", "--c", "16", "--h", "8", "--w", "8", "--k", "32"]
_X, _W = (1, 16, 8, 8), (32, 16, 3, 3)
# The command's default layer: conv2_x's channels on a 16x16 crop, pad 1, on ascend910b.
_DEFAULT_X, _DEFAULT_W = (1, 64, 16, 16), (64, 64, 3, 3)


@pytest.fixture(scope="module")
def direct():
    """``fusion.analyze`` called directly on the layer of ``_SMALL`` (conv -> bias -> relu, pad 1)."""
    return fusion.analyze(_X, _W, ("bias", "relu"), padding=1, hw=presets.tiny(), name="8x8x16 3x3->32")


def test_modeled_analysis_equals_direct(direct):
    """The closed-form models' analysis (the demo's fusion table, no compile) is the emulated one:
    every figure of the row, the reading, busy cycles per lane, GM bytes and tilings."""
    model = fusion.analyze(
        _X, _W, ("bias", "relu"), padding=1, hw=presets.tiny(), name=direct.layer, model=True
    )
    assert model.row() == direct.row() and model.why == direct.why
    assert dict(model.pipe_delta) == dict(direct.pipe_delta)
    assert (model.unfused.gm_bytes, model.fused.gm_bytes) == (direct.unfused.gm_bytes, direct.fused.gm_bytes)
    assert (model.unfused_tiling, model.fused_tiling) == (direct.unfused_tiling, direct.fused_tiling)
    assert [lab for lab, _ in model.unfused.parts] == ["conv", "eltwise"]


def _fake_analyze(direct, calls):
    def analyze(x_shape, w_shape, epilogue, **kw):
        calls.append((x_shape, w_shape, tuple(map(str, epilogue)), kw["hw"].name, kw["name"], kw))
        return direct

    return analyze


@pytest.mark.slow
def test_fuse_json_trace_and_plot_agree_with_analyze(capsys, tmp_path, direct):
    trace, plot = tmp_path / "f.json", tmp_path / "f.png"
    assert cli.main(["fuse", *_SMALL, "--json", "--trace", str(trace), "--plot", str(plot)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["mode"] == "both" and d["epilogue"] == ["bias", "relu"] and len(d["runs"]) == 1
    assert d["layer"].startswith("x(1,16,8,8) w(32,16,3,3) s(1, 1) d(1, 1) p(1, 1, 1, 1)")
    run = d["runs"][0]
    # --trace/--plot make their own traced runs: the figures must still be analyze's
    for key, value in direct.row().items():
        assert run[key] == pytest.approx(value), key
    assert run["hw"] == "tiny"
    assert run["pipe_busy"] == {p: list(v) for p, v in direct.pipe_delta.items()}
    assert run["why"] == direct.why and run["fused_where"].endswith("+bias -> relu [fixpipe]")
    assert run["fused"]["cycles"] == direct.fused.cycles and list(run["fused"]["parts"]) == ["conv"]
    assert list(run["unfused"]["parts"]) == ["conv", "eltwise"]
    assert run["fused_tiling"] == dataclasses.asdict(direct.fused_tiling)
    t = json.loads(trace.read_text())
    assert t["otherData"]["cycles"] == direct.fused.cycles  # the fused run's trace
    cats = {ev["cat"].split("/")[0] for ev in t["traceEvents"] if ev["ph"] == "X"}
    assert cats == {"conv"}
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_fuse_default_text_is_analyze_of_the_default_layer(capsys, monkeypatch, direct):
    """No flags: conv2_x's channels on a 16x16 crop, bias,relu, ascend910b (the analysis is faked
    here, to keep the suite quick; the run above is real)."""
    calls = []
    monkeypatch.setattr(fusion, "analyze", _fake_analyze(direct, calls))
    assert cli.main(["fuse"]) == 0
    ((x_shape, w_shape, steps, hw, name, kw),) = calls
    assert (x_shape, w_shape, steps, hw, name) == (
        _DEFAULT_X,
        _DEFAULT_W,
        ("bias", "relu"),
        "ascend910b",
        "conv2_x crop 16x16x64",
    )
    assert (kw["stride"], kw["padding"], kw["dilation"], kw["strategy"]) == (1, 1, 1, "img2col")
    out = capsys.readouterr().out
    assert direct.summary() in out and "[fixpipe]" in out
    assert out.startswith("npu-jax fuse: conv2d x(1,64,16,16) w(64,64,3,3) s(1, 1) d(1, 1) p(1, 1, 1, 1)")
    m = re.search(
        r"cycles\s+unfused\s+([\d,]+)\s+fused\s+([\d,]+)\s+speed-up ([\d.]+)x \((-?\d+)% less time\)", out
    )
    assert [int(m.group(i).replace(",", "")) for i in (1, 2)] == [direct.unfused.cycles, direct.fused.cycles]
    assert float(m.group(3)) == round(direct.speedup, 2) and int(m.group(4)) == round(direct.faster_pct)
    assert f"unfused {direct.unfused_tiling}" in out and f"fused   {direct.fused_tiling}" in out


@pytest.mark.slow
def test_fuse_fused_run_checks_its_numbers(capsys):
    assert cli.main(["fuse", *_SMALL, "--fused", "--epilogue", "bias,leaky_relu:0.1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    run = d["runs"][0]
    assert d["mode"] == "fused" and d["epilogue"] == ["bias", "leaky_relu(0.1)"] and run["hw"] == "tiny"
    assert list(run["parts"]) == ["conv"]  # bias and the activation both fit the Fixpipe
    assert run["parts"]["conv"]["name"].endswith("+bias -> leaky_relu(0.1) [fixpipe]")
    assert run["bytes"]["L0C->GM"] == 2 * 32 * 8 * 8 and run["bytes"]["UB->GM"] == 0  # one fp16 write
    # one rounding to fp16 on the way out: at most half an ulp of the largest output
    ulp = float(np.spacing(np.float16(run["max_abs_ref"])))
    assert 0 < run["max_abs_err"] <= ulp / 2 and run["y_dtype"] == "float16"


def test_reference_and_demo_section_read_off_the_rows(capsys, monkeypatch, direct):
    """The table and its reading come from the analyses (here the direct one, reused: no compiling)."""
    calls = []
    monkeypatch.setattr(fusion, "analyze", _fake_analyze(direct, calls))
    assert cli.main(["fuse", "--reference", "--preset", "tiny,tiny-coupled"]) == 0
    out = capsys.readouterr().out
    layers = demo_layers(presets.tiny())
    assert [(c[3], c[4]) for c in calls] == [
        (hw, lay.name) for hw in ("tiny", "tiny-coupled") for lay in layers
    ]
    assert all(c[2] == ("bias", "relu") for c in calls)
    calls.clear()
    section = fcli.demo_section(DemoOptions(hw=presets.tiny()))
    assert [(c[3], c[4]) for c in calls] == [("tiny", lay.name) for lay in layers]
    # the fake analysis stands for every row: its own figures must come back in each table and reading
    for text, n_rows in ((out, 2 * len(layers)), (section, len(layers))):
        assert fusion.format_table([direct] * n_rows) in text
        reading = text[text.index("Reading") :].splitlines()
        assert "more than 80%" in reading[0] and "35% faster" in reading[0]
        assert f"{direct.intermediate_saved_pct:.0f}% of the intermediate's GM round trip saved" in reading[1]
        assert f"{direct.gm_saved_pct:.0f}% of all GM bytes" in reading[1]
        assert f"{direct.faster_pct:.0f}% less time" in reading[1]
        assert f"speed-up {direct.speedup:.2f}x" in reading[1]
        assert direct.why in text
    assert fcli.demo_section in map(registry.section, registry.DEMO_SECTIONS)


def test_layers_file_gives_the_table_of_its_layers(capsys, monkeypatch, tmp_path, direct):
    """``--layers FILE``: the fusion table of the file's layers (the fake analysis: no compiling)."""
    calls = []
    monkeypatch.setattr(fusion, "analyze", _fake_analyze(direct, calls))
    path = tmp_path / "layers.yaml"
    path.write_text(
        "- {name: mine, c: 16, h: 8, w: 8, k: 32, kh: 3, kw: 3, padding: 1}\n- {c: 8, h: 4, w: 6, k: 16, kh: 1, kw: 1}\n"
    )
    assert cli.main(["fuse", "--layers", str(path), "--preset", "tiny", "--csv"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].startswith("layer,hw,steps,") and len(rows) == 3
    assert [(c[0], c[1], c[3], c[4], c[5]["padding"]) for c in calls] == [
        ((1, 16, 8, 8), (32, 16, 3, 3), "tiny", "mine", 1),
        ((1, 8, 4, 6), (16, 8, 1, 1), "tiny", "4x6x8 1x1->16", 0),
    ]
    for extra, param in ((["--fused"], "--layers"), (["--c", "8"], "--c"), (["--plot", "p.png"], "--plot")):
        assert cli.main(["fuse", "--layers", str(path), *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith("npu-jax fuse: error:") and param in err, err


def test_reading_counts_layers_against_the_engineers_figures():
    def row(layer, chip, coupled, saved, faster, vec, conv_fused):
        part = lambda cycles: types.SimpleNamespace(cycles=cycles)  # noqa: E731
        unfused = types.SimpleNamespace(
            cycles=1000, parts=(("conv", part(1000 - vec * 10)), ("eltwise", part(vec * 10)))
        )
        fused = types.SimpleNamespace(parts=(("conv", part(conv_fused)),))
        return types.SimpleNamespace(
            layer=layer,
            hw=types.SimpleNamespace(name=chip, coupled=coupled),
            intermediate_saved_pct=saved,
            intermediate_bytes=500_000,
            faster_pct=faster,
            gm_saved_pct=saved / 4,
            speedup=1 / (1 - faster / 100),
            unfused=unfused,
            fused=fused,
            why=f"why {layer}.",
        )

    rows = [
        row("convA 3x3", "chipB", False, 99.0, 40.0, 45, 605),
        row("convB 3x3", "chipB", False, 70.0, 20.0, 25, 750),
        row("convA 3x3", "chipC", True, 95.0, 30.0, 35, 715),
    ]
    lines = fusion_reading(rows).splitlines()
    assert len(lines) == 6
    assert lines[1].startswith(
        "- chipB (Fixpipe epilogue): 70% to 99% of the intermediate's GM round trip saved "
        "(1.00 MB over 2 layers; above 80% on 1 of 2), 18% to 25% of all GM bytes; "
        "20% to 40% less time (mean 30%"
    )
    assert "at least 35% on 1 of 2" in lines[1] and "1.25x to 1.67x" in lines[1]
    assert lines[2].startswith("- chipC (UB epilogue): 95% of") and "on 0 of 1" in lines[2]
    assert lines[3].startswith(
        "What fusion removes: the separate vector kernel, 25% to 45% of the unfused time"
    )
    assert "takes +0% to +10% against the Conv alone" in lines[3]  # 605 / 550, 750 / 750, 715 / 650
    assert lines[4] == "Largest gain, convA on chipB (40% less time): why convA 3x3."
    assert lines[5] == "Smallest, convB on chipB (20%): why convB 3x3."


@pytest.mark.parametrize(
    "extra, param",
    [
        (["--epilogue", "swish"], "--epilogue"),
        (["--epilogue", "bias,relu,bias"], "--epilogue"),
        (["--epilogue", "cast:bf16,relu"], "--epilogue"),
        (["--epilogue", "leaky_relu:x"], "--epilogue"),
        (["--epilogue", "relu,,bias"], "--epilogue"),
        (["--epilogue", "clipped_relu:-1"], "--epilogue"),
        (["--epilogue", "cast:fp8"], "--epilogue"),
        (["--preset", "910b,nope"], "--preset"),
        (["--layer", "conv9"], "--layer"),
        (["--h", "0"], "--h"),
        (["--stride", "0"], "--stride"),
        (["--padding", "middle"], "--padding"),
        (["--strategy", "winograd"], "--strategy"),
        (["--fused", "--unfused"], "--unfused"),
        (["--reference", "--h", "8"], "--reference"),
        (["--preset", "tiny,910", "--plot", "p.png"], "--plot"),
        (["--timing-only"], "--timing-only"),
        (["--trace", "/no/such/folder/t.json"], "--trace"),
        (["--kh", "30", "--padding", "0"], "kernel"),  # the library's check, passed through
    ],
)
def test_fuse_bad_input_is_one_line_and_exit_2(capsys, extra, param):
    assert cli.main(["fuse", *_SMALL, *extra]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("npu-jax fuse: error:") and param in err and "Traceback" not in err
    assert captured.out == ""


def test_reference_output_applies_the_chain():
    from npu_jax.mapping.epilogue import canonical_steps
    from npu_jax.workload.conv import canonicalize

    rng = np.random.default_rng(7)
    x, w = rng.standard_normal(_X), rng.standard_normal(_W)
    g = canonicalize(_X, _W, 1, 1, 1)
    bias, res = rng.standard_normal(32), rng.standard_normal((1, 32, 8, 8))
    conv = reference_output(x, w, g, ())
    got = reference_output(x, w, g, canonical_steps(["bias", "residual", ("leaky_relu", 0.2)]), bias, res)
    pre = conv + bias[None, :, None, None] + res
    np.testing.assert_allclose(got, np.where(pre > 0, pre, 0.2 * pre))
    clipped = reference_output(x, w, g, canonical_steps([("clipped_relu", 1.5), ("cast", "bf16")]))
    np.testing.assert_allclose(clipped, np.clip(conv, 0, 1.5))


def test_npu_jax_does_not_import_fusion():
    """Only parsing their subcommands (or running the demo) imports fusion and precision, by name."""
    code = (
        "import sys, npu_jax, npu_jax.cli, npu_jax.cli.demo, npu_jax.cli.conv2d, npu_jax.cli.search\n"
        "assert not {'fusion', 'precision'} & set(sys.modules), 'fusion or precision imported'\n"
        "p = npu_jax.cli.parser()\n"
        "assert not {'fusion', 'precision'} & set(sys.modules), 'the parser imported fusion or precision'\n"
        "p.parse_args(['fuse'])\n"
        "assert 'fusion.cli' in sys.modules and 'precision' not in sys.modules\n"
        "npu_jax.cli.parser().parse_args(['precision'])\n"
        "assert 'precision.cli' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_layer_flags_override_the_reference_layer():
    args = cli.parser().parse_args(["fuse", "--layer", "conv3_x", "--h", "14"])
    lay = fcli._resolve_layer(args)
    assert lay.x_shape == (1, 128, 14, 28) and lay.w_shape == (128, 128, 3, 3) and lay.padding == 1
    assert fcli._resolve_layer(cli.parser().parse_args(["fuse", "--layer", "conv1"])).name.startswith("conv1")
    assert lay.name == "14x28x128 3x3->128"
    default = fcli._resolve_layer(cli.parser().parse_args(["fuse"]))
    assert default.x_shape == (1, 64, 16, 16) and default.name == "conv2_x crop 16x16x64"

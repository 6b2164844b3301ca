"""The ``npu-jax`` command: subcommands in-process, bad input, and the installed console script."""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig

import pytest

from npu_jax import cli
from npu_jax.cli import registry, types
from npu_jax.cli.data import demo_layers
from npu_jax.hw import presets
from npu_jax.report.reading import strategies_reading


def test_info_lists_every_preset_and_the_assumed_table(capsys):
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    for name in presets.PRESETS:
        assert name in out
    assert "245.76" in out  # 910B peak TFLOPS fp16: 20 cores x 8192 FLOP/cycle x 1.5 GHz
    assert "491.52" in out  # and int8 TOPS: K0 = 32, twice the MACs a cycle
    assert "mte2_startup" in out and "assumed" in out


def test_info_one_preset(capsys):
    assert cli.main(["info", "--preset", "310p"]) == 0
    out = capsys.readouterr().out
    assert "ascend310p" in out and "ascend910b " not in out


def test_matmul_json(capsys):
    m, n, k = 40, 24, 72
    assert (
        cli.main(["matmul", "--m", str(m), "--n", str(n), "--k", str(k), "--preset", "tiny", "--json"]) == 0
    )
    d = json.loads(capsys.readouterr().out)
    assert d["cycles"] > 0
    assert d["flops"] == 2 * m * n * k
    assert d["hw"] == "tiny"
    # fp16 output of a K=72 dot of N(0,1) fp16 values: off by at most a few fp16 ulps of ~|C| <= 40
    assert 0 <= d["max_abs_err"] < 0.1


@pytest.mark.slow
def test_matmul_text_with_trace_and_cores(capsys, tmp_path):
    path = tmp_path / "mm.json"
    assert (
        cli.main(
            [
                "matmul",
                "--m",
                "64",
                "--n",
                "32",
                "--k",
                "48",
                "--preset",
                "tiny",
                "--cores",
                "1",
                "--trace",
                str(path),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "(1 core)" in out and "max abs error" in out
    assert json.loads(path.read_text())["traceEvents"]


@pytest.mark.slow
def test_demo_tiny(capsys, tmp_path):
    assert cli.main(["demo", "--preset", "tiny", "--trace", str(tmp_path / "d.json")]) == 0
    captured = capsys.readouterr()
    out = captured.out
    # progress on stderr, section by section (results alone on stdout)
    for what in (
        "compiling matmul for 1024x1024",
        "precision stacks",
        "Conv2D strategies",
        "fusion analyses",
    ):
        assert f"npu-jax demo: {what}" in captured.err, what
    assert "npu-jax demo:" not in out
    assert "1024x1024" in out and "% of peak" in out and "bottleneck" in out.lower()
    assert "Reading:" in out
    assert (tmp_path / "d.json").exists()
    # the second section: the strategies table on (scaled) ResNet-50 layers, after the GEMM
    gemm, conv = out.split("== Conv2D strategies", 1)
    conv = conv.split("\n== ", 1)[0]  # up to the next section (precision, fusion)
    assert "1024x1024" in gemm
    layers = demo_layers(presets.tiny())
    table = [line for line in conv.splitlines() if line.startswith(tuple(lay.name for lay in layers))]
    assert len(table) == 4 * len(layers)
    for strategy in ("output_tiled", "input_tiled", "relayout", "img2col"):
        assert sum(strategy in line.split() for line in table) == len(layers)
    reading = conv[conv.index("Reading:") :].splitlines()
    assert len(reading) == 3, reading
    assert "best strategy per layer" in reading[0] and "output_tiled" in reading[1]
    assert "bottleneck" in reading[2]


@pytest.mark.slow
def test_demo_strategy_rows_from_the_model_equal_the_emulators():
    """The demo's Conv2D table reads the closed-form model (no conv compiles); every column equals
    the emulator's timing-only run (``--emulate``), the relayout kernel's cycles included."""
    from npu_jax.studies import conv_strategies

    hw = presets.tiny()
    layers = demo_layers(hw)[-1:]
    model = conv_strategies(hw, layers, model=True)
    emulated = conv_strategies(hw, layers)
    assert [r.strategy for r in model] == ["output_tiled", "input_tiled", "relayout", "img2col"]
    assert model == emulated
    assert all(r.relayout_cycles > 0 for r in model[2:]) and model[0].relayout_cycles == 0
    args = cli.parser().parse_args(["demo", "--preset", "tiny", "--emulate"])
    assert args.emulate is True


def test_demo_conv_layers_scaled_on_tiny_only():
    from npu_jax.workload.resnet50 import RESNET50_REFERENCE

    assert demo_layers(presets.ascend910b()) == RESNET50_REFERENCE
    small = demo_layers(presets.tiny())
    assert 0 < len(small) < len(RESNET50_REFERENCE)
    by_stage = {lay.name.split()[0]: lay for lay in RESNET50_REFERENCE}
    for lay in small:
        ref = by_stage[lay.name.split()[0].removesuffix("/2")]
        assert (lay.h, lay.w) == (ref.h // 2, ref.w // 2)
        assert (lay.c, lay.k, lay.kh, lay.kw, lay.stride, lay.padding) == (
            ref.c,
            ref.k,
            ref.kh,
            ref.kw,
            ref.stride,
            ref.padding,
        )


def test_strategies_reading_is_read_off_the_rows():
    from npu_jax.studies import StrategyRow

    def row(layer, strategy, cycles, pct, neck, relayout=0):
        return StrategyRow(layer, strategy, cycles, pct, 1000, 0.25, 0.5, neck, relayout, None)

    rows = [
        row("convA 3x3", "output_tiled", 300, 10.0, "MTE2"),
        row("convA 3x3", "img2col", 100, 30.0, "CUBE", 7),
        row("convB 3x3", "output_tiled", 200, 5.0, "MTE2"),
        row("convB 3x3", "relayout", 100, 10.0, "MTE2"),
    ]
    lines = strategies_reading(rows).splitlines()
    assert len(lines) == 3
    assert "convA img2col (30.0% of peak)" in lines[0] and "convB relayout (10.0% of peak)" in lines[0]
    assert "20.0% of peak vs 7.5%" in lines[1] and "2.00x to 3.00x" in lines[1] and "7 cycles" in lines[1]
    assert lines[2].startswith("The best kernel's bottleneck is CUBE ")  # a tie: the first layer's
    assert "on 1 of 2 layers (MTE2 on convB)" in lines[2]


# ---- conv2d ---------------------------------------------------------------------------------------
_SMALL = ["--preset", "tiny", "--c", "24", "--h", "10", "--w", "12", "--k", "40"]


@pytest.mark.slow
def test_conv2d_json_small_layer(capsys, tmp_path):
    trace, plot = tmp_path / "c.json", tmp_path / "c.png"
    assert (
        cli.main(["conv2d", *_SMALL, "--stride", "2", "--json", "--trace", str(trace), "--plot", str(plot)])
        == 0
    )
    d = json.loads(capsys.readouterr().out)
    ho, wo = (10 + 2 - 3) // 2 + 1, (12 + 2 - 3) // 2 + 1  # pad 1, 3x3, stride 2
    assert d["flops"] == 2 * ho * wo * 40 * 24 * 3 * 3
    assert d["hw"] == "tiny" and d["strategy"] == "img2col" and d["cycles"] > 0
    assert d["relayout_cycles"] > 0  # img2col reads an NC1HWC0 copy made by its own kernel
    assert d["tiling"]["l1_stages"] == 2 and d["tiling"]["k_l0"] % 16 == 0
    # fp16 output of a 216-term dot of N(0,1) fp16 values (|y| < ~64): a few fp16 ulps at most
    assert 0 <= d["max_abs_err"] < 0.2
    assert json.loads(trace.read_text())["traceEvents"]
    assert plot.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_conv2d_text_dilated_same_padding(capsys):
    assert (
        cli.main(["conv2d", *_SMALL, "--strategy", "input_tiled", "--dilation", "2", "--padding", "same"])
        == 0
    )
    out = capsys.readouterr().out
    assert "conv2d[input_tiled] on tiny" in out and "d(2, 2) p(2, 2, 2, 2)" in out
    assert "y(1,40,10,12)" in out and "max abs error vs lax.conv_general_dilated" in out
    assert "relayout " not in out  # input_tiled reads NCHW directly


@pytest.mark.slow
def test_conv2d_timing_only_matches_full_run(capsys):
    argv = ["conv2d", *_SMALL, "--strategy", "output_tiled", "--json"]
    assert cli.main(argv) == 0
    full = json.loads(capsys.readouterr().out)
    assert cli.main([*argv, "--timing-only"]) == 0
    timing = json.loads(capsys.readouterr().out)
    assert timing["max_abs_err"] is None and full["max_abs_err"] is not None
    for key in ("cycles", "flops", "gm_bytes", "bytes", "bottleneck"):
        assert timing[key] == full[key], key


@pytest.mark.slow
def test_conv2d_all_strategies(capsys):
    assert cli.main(["conv2d", *_SMALL, "--strategy", "all", "--timing-only", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    rows = d["rows"]
    assert [r["strategy"] for r in rows] == ["output_tiled", "input_tiled", "relayout", "img2col"]
    assert all(r["cycles"] > 0 and 0 < r["pct_peak"] < 100 for r in rows)
    assert [r["relayout_cycles"] > 0 for r in rows] == [False, False, True, True]
    # the text form, dilated (the study's ConvLayer has no dilation: the runs are made directly)
    assert (
        cli.main(
            ["conv2d", *_SMALL, "--strategy", "all", "--timing-only", "--dilation", "2", "--padding", "2"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "d(2, 2)" in out and "all strategies (timing-only runs" in out
    table = [line for line in out.splitlines() if line.startswith("10x12x24 3x3->40 ")]
    assert [line.split()[2] for line in table] == ["output_tiled", "input_tiled", "relayout", "img2col"]
    assert out.count("ConvTiling(") == 4 and len(out[out.index("Reading:") :].splitlines()) == 3


@pytest.mark.parametrize(
    "extra, param",
    [
        (["--h", "0"], "--h"),
        (["--kw", "x"], "--kw"),
        (["--stride", "0"], "--stride"),
        (["--stride", "1,2,3"], "--stride"),
        (["--dilation", "2,0"], "--dilation"),
        (["--padding", "middle"], "--padding"),
        (["--padding", "-1"], "--padding"),
        (["--strategy", "winograd"], "--strategy"),
        (["--strategy", "all", "--plot", "p.png"], "--plot"),
        (["--kh", "30", "--padding", "0"], "kernel"),  # the library's check, passed through
        (["--padding", "300"], "padding"),
        (["--preset", "nope"], "--preset"),
    ],
)
def test_conv2d_bad_input_is_one_line_and_exit_2(capsys, extra, param):
    assert cli.main(["conv2d", *_SMALL, *extra]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("npu-jax conv2d: error:") and param in err and "Traceback" not in err
    assert captured.out == ""


@pytest.mark.parametrize(
    "argv, param",
    [
        (["info", "--preset", "nope"], "--preset"),
        (["demo", "--preset", "nope"], "--preset"),
        (["matmul", "--m", "0", "--n", "8", "--k", "8"], "--m"),
        (["matmul", "--m", "8", "--n", "-3", "--k", "8"], "--n"),
        (["matmul", "--m", "8", "--n", "8", "--k", "x"], "--k"),
        (["matmul", "--m", "8", "--n", "8"], "--k"),
        (["matmul", "--m", "8", "--n", "8", "--k", "8", "--preset", "tiny", "--cores", "3"], "--cores"),
        (["demo", "--trace", "/no/such/folder/t.json"], "--trace"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, param):
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1, err
    assert param in err and "Traceback" not in err
    assert captured.out == ""


def test_help_returns_zero(capsys):
    assert cli.main(["--help"]) == 0
    assert "demo" in capsys.readouterr().out


def _console_script() -> str:
    exe = "npu-jax.exe" if os.name == "nt" else "npu-jax"
    for folder in (os.path.dirname(sys.executable), sysconfig.get_path("scripts")):
        path = os.path.join(folder, exe)
        if os.path.exists(path):
            return path
    path = shutil.which("npu-jax")
    if path is None:
        pytest.fail("the npu-jax console script is not installed; run pip install -e '.[dev]'")
    return path


def test_installed_console_script():
    proc = subprocess.run([_console_script(), "info"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "ascend910b" in proc.stdout and "mte2_startup" in proc.stdout


# ---- the package: one module per subcommand, one protocol, imports one way -------------------------------
def test_every_command_follows_the_protocol_in_registry_order(capsys):
    names = [c.name for c in registry.COMMANDS]
    assert names == ["demo", "info", "matmul", "conv2d", "precision", "fuse", "search", "model", "sweep"]
    modules = registry.commands()
    assert [m.__name__ for m in modules] == [c.module for c in registry.COMMANDS]
    sub = cli.parser()._subparsers._group_actions[0]
    assert list(sub.choices) == names
    for c, m in zip(registry.COMMANDS, modules):
        assert isinstance(c.help, str) and c.help and callable(m.run) and callable(m.register)
        p = sub.choices[c.name]
        assert p.load() is m  # the module is imported by name and registers its flags on first use
        assert p.get_default("func") is m.run and p.get_default("parser") is p
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert [out.index(f"    {n} ") for n in names] == sorted(out.index(f"    {n} ") for n in names)
    for c in registry.COMMANDS:
        assert c.help in " ".join(out.split())


def test_demo_sections_come_from_the_registry(capsys, monkeypatch):
    assert registry.DEMO_SECTIONS == [
        "npu_jax.cli.demo:gemm_section",
        "precision.cli:demo_section",
        "npu_jax.cli.demo:conv_strategies_section",
        "fusion.cli:demo_section",
    ]
    for entry in registry.DEMO_SECTIONS:
        module, _, name = entry.partition(":")
        assert registry.section(entry) is getattr(importlib.import_module(module), name)
    seen = []

    def section(opts):
        seen.append(opts.hw.name)
        return f"== a section added as a function, {len(seen)} =="

    # an entry is a "module:function" name or the function itself
    monkeypatch.setattr(registry, "DEMO_SECTIONS", [section, section])
    assert cli.main(["demo", "--preset", "tiny"]) == 0
    out = capsys.readouterr().out
    assert seen == ["tiny", "tiny"] and out.startswith("npu-jax demo on tiny: 2 cores")
    assert out.endswith("== a section added as a function, 1 ==\n\n== a section added as a function, 2 ==\n")


_ROOT = pathlib.Path(__file__).resolve().parents[1]


def _imports(path: pathlib.Path):
    """(module, names) of every import statement in ``path``, at any depth."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((a.name, ()) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module, tuple(a.name for a in node.names)


def test_npu_jax_imports_neither_fusion_nor_precision():
    """The registry names them as strings; no module of npu_jax imports them."""
    for path in (_ROOT / "npu_jax").rglob("*.py"):
        for module, _ in _imports(path):
            assert module.split(".")[0] not in ("fusion", "precision"), (path, module)
    text = (_ROOT / "npu_jax" / "cli" / "registry.py").read_text()
    assert '"fusion.cli"' in text and '"precision.cli"' in text


def test_fusion_and_precision_use_only_public_cli_helpers():
    for package in ("fusion", "precision"):
        for path in (_ROOT / package).rglob("*.py"):
            for module, names in _imports(path):
                if module.startswith("npu_jax.cli"):
                    assert not [n for n in names if n.startswith("_")], (path, module, names)


@pytest.mark.parametrize(
    "parse, text, words",
    [
        (types.positive_int, "0", ["positive integer", "'0'"]),
        (types.positive_int, "x", ["positive integer", "'x'"]),
        (types.fraction, "1.5", ["(0, 1]", "'1.5'"]),
        (types.preset, "nope", ["nope"]),
        (types.int_or_pair(1), "1,2,3", [">= 1", "'1,2,3'"]),
        (types.int_or_pair(0), "-1", [">= 0", "'-1'"]),
        (types.padding, "middle", ["SAME or VALID", "'middle'"]),
        (types.output_path, "/no/such/folder/t.json", ["/no/such/folder", "does not exist"]),
        (types.choice_list(("a", "b")), "a,c", ["'c'", "a, b"]),
    ],
)
def test_argument_types_name_the_value(parse, text, words):
    with pytest.raises(argparse.ArgumentTypeError) as e:
        parse(text)
    for word in words:
        assert word in str(e.value)


def test_argument_types_accept_their_forms():
    assert types.positive_int("7") == 7 and types.fraction("0.25") == 0.25
    assert types.int_or_pair(1)("3") == 3 and types.int_or_pair(1)("2,1") == (2, 1)
    assert types.padding("valid") == "VALID" and types.padding("0,2") == (0, 2)
    assert types.preset("910b").name == "ascend910b"
    assert types.choice_list(("a", "b"))(" b, a ") == ("b", "a")

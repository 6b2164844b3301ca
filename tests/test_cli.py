"""The ``npu-jax`` command: subcommands in-process, bad input, and the installed console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

from npu_jax import cli
from npu_jax.hw import presets


def test_info_lists_every_preset_and_the_assumed_table(capsys):
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    for name in presets.PRESETS:
        assert name in out
    assert "245.76" in out  # 910B peak TFLOPS fp16: 20 cores x 8192 FLOP/cycle x 1.5 GHz
    assert "mte2_startup" in out and "assumed" in out


def test_info_one_preset(capsys):
    assert cli.main(["info", "--preset", "310p"]) == 0
    out = capsys.readouterr().out
    assert "ascend310p" in out and "ascend910b " not in out


def test_matmul_json(capsys):
    m, n, k = 40, 24, 72
    assert cli.main(["matmul", "--m", str(m), "--n", str(n), "--k", str(k), "--preset", "tiny",
                     "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["cycles"] > 0
    assert d["flops"] == 2 * m * n * k
    assert d["hw"] == "tiny"
    # fp16 output of a K=72 dot of N(0,1) fp16 values: off by at most a few fp16 ulps of ~|C| <= 40
    assert 0 <= d["max_abs_err"] < 0.1


def test_matmul_text_with_trace_and_cores(capsys, tmp_path):
    path = tmp_path / "mm.json"
    assert cli.main(["matmul", "--m", "64", "--n", "32", "--k", "48", "--preset", "tiny",
                     "--cores", "1", "--trace", str(path)]) == 0
    out = capsys.readouterr().out
    assert "(1 core)" in out and "max abs error" in out
    assert json.loads(path.read_text())["traceEvents"]


def test_demo_tiny(capsys, tmp_path):
    assert cli.main(["demo", "--preset", "tiny", "--trace", str(tmp_path / "d.json")]) == 0
    out = capsys.readouterr().out
    assert "1024x1024" in out and "% of peak" in out and "bottleneck" in out.lower()
    assert "Reading:" in out
    assert (tmp_path / "d.json").exists()


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

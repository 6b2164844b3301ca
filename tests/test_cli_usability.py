"""The command line as a newcomer meets it: a quick ``--help`` that loads
no JAX, ``--version``, help text on every flag, ``--hw-ini``, layer files, ``--json`` / ``--csv`` to files,
output paths checked before any work (``--force``), one-line errors, and progress on stderr within 2 s."""

from __future__ import annotations

import argparse
import csv
import importlib.metadata
import io
import json
import os
import resource
import subprocess
import sys
import threading
import time

import pytest

from npu_jax import cli
from npu_jax.cli import layers, output, registry
from npu_jax.hw import presets

_QUICK_CONV = ["--preset", "tiny", "--c", "16", "--h", "8", "--w", "8", "--k", "16", "--timing-only"]


def _python(code: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, **kw)


def _one_error_line(err: str, command: str, *words: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"npu-jax {command}: error:") and "Traceback" not in err, err
    for w in words:
        assert w in lines[0], (w, lines[0])


# ---- --help, --version, help text -----------------------------------------------------------------------
def test_help_loads_no_jax_and_takes_well_under_a_second_of_cpu():
    """``npu-jax --help`` builds the parser of every subcommand without importing one (nor JAX); its CPU
    time (not wall time, which a loaded machine stretches) stays under 1 s."""
    code = (
        "import sys\n"
        "from npu_jax.cli import main\n"
        "rc = main(['--help'])\n"
        "assert rc == 0, rc\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib', 'fusion', 'precision'))\n"
        "assert not loaded, loaded\n"
        "assert not [m for m in sys.modules if m.startswith(('npu_jax.api', 'npu_jax.core', 'npu_jax.cli.conv2d'))]\n"
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = _python(code)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 0, proc.stderr
    assert "conv2d" in proc.stdout and "--version" in proc.stdout
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu < 1.0, f"npu-jax --help used {cpu:.2f} s of CPU"
    assert proc.stderr == ""


def test_info_runs_without_jax():
    proc = _python(
        "import sys\nfrom npu_jax.cli import main\nassert main(['info']) == 0\nassert 'jax' not in sys.modules"
    )
    assert proc.returncode == 0, proc.stderr
    assert "ascend910b" in proc.stdout and proc.stderr == ""


def test_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"npu-jax {importlib.metadata.version('npu-jax')}"
    assert cli.version() == importlib.metadata.version("npu-jax")


def _all_parsers():
    top = cli.parser()
    sub = top._subparsers._group_actions[0]
    yield "npu-jax", top
    for name, p in sub.choices.items():
        p.load()
        yield f"npu-jax {name}", p


def test_every_flag_of_every_subcommand_has_help(capsys):
    missing = [
        f"{prog} {'/'.join(a.option_strings) or a.dest}"
        for prog, p in _all_parsers()
        for a in p._actions
        if not isinstance(a, argparse._SubParsersAction) and (not a.help or a.help == argparse.SUPPRESS)
    ]
    assert not missing, f"flags without help text: {missing}"
    # and each subcommand's --help prints them all
    for c in registry.COMMANDS:
        assert cli.main([c.name, "--help"]) == 0
        text = capsys.readouterr().out
        p = dict(_all_parsers())[f"npu-jax {c.name}"]
        for a in p._actions:
            shown = a.option_strings[-1] if a.option_strings else (a.metavar or a.dest)  # a positional
            assert shown in text, (c.name, a.option_strings or a.dest)


def test_preset_commands_take_hw_ini():
    for prog, p in _all_parsers():
        flags = {s for a in p._actions for s in a.option_strings}
        if "--preset" in flags:
            assert "--hw-ini" in flags, prog


# ---- --hw-ini ----------------------------------------------------------------------------------------------
def test_hw_ini_over_the_preset(tmp_path, capsys):
    ini = tmp_path / "my_chip.ini"
    ini.write_text("[SoCInfo]\nai_core_cnt = 6\n[AICoreSpec]\nl1_size = 262144\n")
    assert cli.main(["info", "--preset", "tiny", "--hw-ini", str(ini), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["presets"]
    assert row["preset"] == "tiny+my_chip.ini" and row["cores"] == 6 and row["L1 KiB"] == 256
    assert cli.main(["info", "--hw-ini", str(ini), "--json"]) == 0  # over the 910B by default
    (row,) = json.loads(capsys.readouterr().out)["presets"]
    assert row["preset"] == "ascend910b+my_chip.ini" and row["cores"] == 6
    bad = tmp_path / "bad.ini"
    bad.write_text("[AICoreSpec]\nl1_size = lots\n")
    assert cli.main(["info", "--hw-ini", str(bad)]) == 2
    _one_error_line(capsys.readouterr().err, "info", "--hw-ini", "l1_size")
    assert cli.main(["info", "--hw-ini", str(tmp_path / "none.ini")]) == 2
    _one_error_line(capsys.readouterr().err, "info", "--hw-ini", "does not exist")


# ---- output paths: checked before any work, --force ----------------------------------------------------
def test_existing_output_needs_force_and_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    conv_module = dict(_all_parsers())["npu-jax conv2d"].load()

    def no_work(*a, **k):
        raise AssertionError("the command ran before checking its output paths")

    monkeypatch.setattr(conv_module, "conv2d", no_work)
    trace = tmp_path / "t.json"
    trace.write_text("keep me")
    assert cli.main(["conv2d", *_QUICK_CONV, "--trace", str(trace)]) == 2
    _one_error_line(capsys.readouterr().err, "conv2d", "--trace", "exists", "--force")
    assert trace.read_text() == "keep me"
    for argv, words in [
        (["--trace", str(tmp_path)], ["--trace", "is a folder"]),
        (["--plot", str(tmp_path / "no" / "p.png")], ["--plot", "does not exist"]),
        (["--json", str(tmp_path)], ["--json", "is a folder"]),
        (["--json", "--csv"], ["--csv", "standard output"]),
        (["--json", str(tmp_path / "a"), "--csv", str(tmp_path / "a")], ["--csv", "--json"]),
    ]:
        assert cli.main(["conv2d", *_QUICK_CONV, *argv]) == 2
        _one_error_line(capsys.readouterr().err, "conv2d", *words)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write anywhere")
def test_unwritable_output_is_refused(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert cli.main(["info", "--json", str(locked / "x.json")]) == 2
        _one_error_line(capsys.readouterr().err, "info", "--json", "cannot write")
    finally:
        locked.chmod(0o700)


def test_json_and_csv_to_files_with_force(tmp_path, capsys):
    j, c = tmp_path / "info.json", tmp_path / "info.csv"
    j.write_text("old")
    assert cli.main(["info", "--json", str(j), "--csv", str(c)]) == 2  # j exists
    capsys.readouterr()
    assert cli.main(["info", "--json", str(j), "--csv", str(c), "--force"]) == 0
    out = capsys.readouterr().out
    assert f"JSON written to {j}" in out and f"CSV written to {c}" in out and "Presets" in out
    records = json.loads(j.read_text())["presets"]
    rows = list(csv.DictReader(io.StringIO(c.read_text())))
    assert [r["preset"] for r in rows] == [r["preset"] for r in records] == list(presets.PRESETS)
    assert [int(r["cores"]) for r in rows] == [r["cores"] for r in records]


# ---- the one table helper, CSV ---------------------------------------------------------------------------
def test_table_aligns_numbers_right_and_text_left():
    t = output.table(["name", "cycles", "ratio"], [["a", 1234567, 0.5], ["long name", 8, None]])
    head, rule, r1, r2 = t.splitlines()
    assert head.split() == ["name", "cycles", "ratio"] and set(rule.replace(" ", "")) == {"-"}
    assert r1.startswith("a ") and "1,234,567" in r1 and r2.startswith("long name")
    assert r1.index("1,234,567") + len("1,234,567") == r2.index("8") + 1  # right-aligned
    assert r2.rstrip().endswith("-")  # None


def test_csv_flattens_nested_fields():
    text = output.csv_text([{"a": 1, "b": {"c": 2, "d": [1, 2]}}, {"a": 3, "e": "x"}])
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == ["a", "b.c", "b.d", "e"]
    assert rows[0]["b.d"] == "[1, 2]" and rows[1]["e"] == "x" and rows[1]["b.c"] == ""


def test_search_prints_tables_not_one_line():
    row = dict(
        layer="conv2_x",
        geometry="g",
        tiling=dict(ho=4, wo=56, n=1, cin1=4, k_l0=64, weights_resident=True, stages=2, cout_split=1),
        model_cycles=6944,
        emulated_cycles=None,
        space=40000,
        evals=64,
        search_s=1.234,
        exhaustive_cycles=6900,
        exhaustive_evals=40000,
        ratio=1.0064,
    )
    search = dict(_all_parsers())["npu-jax search"].load()
    tilings, cycles = search.format_tilings([row]).splitlines(), search.format_cycles([row]).splitlines()
    assert len(tilings) == len(cycles) == 3  # header, rule, one row per layer
    assert tilings[0].split()[:3] == ["layer", "ho", "wo"] and "weights" in tilings[2]
    assert "model cycles" in cycles[0] and "6,944" in cycles[2] and "exhaustive" in cycles[0]


# ---- layer files ---------------------------------------------------------------------------------------------
_CSV = 'name,c,h,w,k,kh,kw,stride,padding\nfirst,16,8,8,16,3,3,1,1\n,16,8,8,32,1,1,"2,1",0\n'
_YAML = (
    "layers:\n"
    "  - {name: first, c: 16, h: 8, w: 8, k: 16, kh: 3, kw: 3, stride: 1, padding: 1}\n"
    "  - {c: 16, h: 8, w: 8, k: 32, kh: 1, kw: 1, stride: [2, 1], padding: 0}\n"
)


def test_layer_files_csv_and_yaml_read_the_same(tmp_path):
    (tmp_path / "l.csv").write_text(_CSV)
    (tmp_path / "l.yaml").write_text(_YAML)
    a, b = layers.read_layers(str(tmp_path / "l.csv")), layers.read_layers(str(tmp_path / "l.yaml"))
    assert a == b and len(a) == 2
    assert a[0].layer.x_shape == (1, 16, 8, 8) and a[0].layer.w_shape == (16, 16, 3, 3)
    assert a[1].name == "8x8x16 1x1->32" and a[1].layer.stride == (2, 1) and a[1].dilation == 1


@pytest.mark.parametrize(
    "text, ext, words",
    [
        ("c,h,w,k,kh\n16,8,8,16,3\n", "csv", ["row 1", "'kw'", "missing"]),
        ("c,h,w,k,kh,kw,groups\n16,8,8,16,3,3,2\n", "csv", ["row 1", "'groups'", "columns are"]),
        ("c,h,w,k,kh,kw\n16,8,8,16,3,3\n16,0,8,16,3,3\n", "csv", ["row 2", "'h'", "positive integer"]),
        ("c,h,w,k,kh,kw,padding\n16,4,4,16,7,7,0\n", "csv", ["row 1", "kernel"]),
        ("- {c: 16, h: 8, w: 8, k: 16, kh: 3, kw: true}\n", "yaml", ["row 1", "'kw'"]),
        ("c: 16\n", "yaml", ["list of layers"]),
        ("c,h,w,k,kh,kw\n", "csv", ["no layers"]),
        ("[1, 2", "yml", ["not valid YAML"]),
        ("c,h\n", "txt", [".csv, .yaml or .yml"]),
    ],
)
def test_bad_layer_files_name_the_row_and_column(tmp_path, capsys, text, ext, words):
    path = tmp_path / f"layers.{ext}"
    path.write_text(text)
    assert cli.main(["conv2d", "--layers", str(path), "--preset", "tiny"]) == 2
    _one_error_line(capsys.readouterr().err, "conv2d", "--layers", *words)


def test_layers_refuse_shape_flags(tmp_path, capsys):
    (tmp_path / "l.csv").write_text(_CSV)
    assert cli.main(["conv2d", "--layers", str(tmp_path / "l.csv"), "--c", "16"]) == 2
    _one_error_line(capsys.readouterr().err, "conv2d", "--c", "--layers")


@pytest.mark.slow
def test_conv2d_runs_a_layer_file(tmp_path, capsys):
    (tmp_path / "l.csv").write_text(_CSV)
    argv = ["conv2d", "--layers", str(tmp_path / "l.csv"), "--preset", "tiny", "--timing-only"]
    assert cli.main([*argv, "--csv", str(tmp_path / "out.csv")]) == 0
    out = capsys.readouterr().out
    assert "2 layers of" in out and "first" in out and "8x8x16 1x1->32" in out
    rows = list(csv.DictReader((tmp_path / "out.csv").open()))
    assert [r["layer"] for r in rows] == ["first", "8x8x16 1x1->32"]
    assert all(r["strategy"] == "img2col" and int(r["cycles"]) > 0 for r in rows)


# ---- errors and progress, in a real process --------------------------------------------------------------
def _run_timed(argv: list[str], timeout: float = 300) -> tuple[int, float, list[tuple[float, str]], str]:
    """Run ``python -m npu_jax.cli argv``; (exit code, seconds, [(seconds, stderr line)], stdout)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "npu_jax.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines: list[tuple[float, str]] = []

    def read():  # tqdm redraws with \r: every \r or \n ends a line
        buf = b""
        while chunk := proc.stderr.read1(4096):
            buf += chunk
            *done, buf = buf.replace(b"\r", b"\n").split(b"\n")
            lines.extend((time.perf_counter() - t0, d.decode()) for d in done if d.strip())
        if buf.strip():
            lines.append((time.perf_counter() - t0, buf.decode()))

    reader = threading.Thread(target=read)
    reader.start()
    out = proc.stdout.read().decode()
    rc = proc.wait(timeout)
    reader.join()
    return rc, time.perf_counter() - t0, lines, out


@pytest.mark.slow
def test_progress_on_stderr_within_two_seconds():
    """Progress appears within 2 s of starting a command that runs longer than
    5 s; before the first compile a line names the kernel and the shape."""
    rc, seconds, lines, out = _run_timed(["conv2d", *_QUICK_CONV])
    assert rc == 0, lines
    assert seconds > 2 and lines, (seconds, lines)
    assert lines[0][0] < 2.0, f"first progress after {lines[0][0]:.2f} s: {lines[0][1]!r}"
    assert any("compiling conv2d[img2col] for 1x16x8x8 on tiny" in line for _, line in lines), lines
    assert all(line.startswith("npu-jax conv2d:") and "error" not in line for _, line in lines), lines
    assert "cycles" in out  # results on stdout, progress on stderr


def test_library_error_is_one_line_exit_2_without_traceback():
    rc, _, lines, out = _run_timed(["conv2d", *_QUICK_CONV, "--kh", "30", "--padding", "0"])
    assert rc == 2 and out == ""
    errors = [line for _, line in lines if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith("npu-jax conv2d: error:") and "kernel" in errors[0]
    assert errors[0] == lines[-1][1] and not any("Traceback" in line for _, line in lines)


@pytest.mark.parametrize(
    "exc, code, words",
    [
        (MemoryError(), 2, ["error: out of memory"]),
        (OSError(28, "No space left on device"), 2, ["error:", "No space left"]),
        (KeyboardInterrupt(), 130, ["interrupted"]),
    ],
)
def test_environment_errors_are_one_line(capsys, monkeypatch, exc, code, words):
    info = dict(_all_parsers())["npu-jax info"].load()

    def fail(args):
        raise exc

    monkeypatch.setattr(info, "run", fail)  # a new parser's info command runs it
    assert cli.main(["info"]) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("npu-jax info: "), err
    for w in words:
        assert w in err


def test_closed_pipe_ends_quietly():
    proc = subprocess.run(
        f"{sys.executable} -m npu_jax.cli info | head -1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout.startswith("Presets") and proc.stderr == "", proc.stderr

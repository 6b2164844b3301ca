"""Compiled programs on disk across processes (``npu_jax.enable_persistent_cache``, JAX's own cache).

The suite runs with the cache off (tests/conftest.py); these tests turn it on in subprocesses only,
since JAX's cache settings are process-wide."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from npu_jax.core import programs
from npu_jax.errors import ConfigError


@pytest.mark.parametrize("raw", ["off", "0", "none", "false", "", "  OFF "])
def test_the_environment_turns_it_off(monkeypatch, raw):
    monkeypatch.setenv("NPU_JAX_CACHE_DIR", raw)
    assert programs.default_cache_dir() is None
    assert programs.enable_persistent_cache() is None  # nothing enabled, nothing written


def test_default_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("NPU_JAX_CACHE_DIR", str(tmp_path / "c"))
    assert programs.default_cache_dir() == str(tmp_path / "c")
    monkeypatch.delenv("NPU_JAX_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert programs.default_cache_dir() == os.path.join(str(tmp_path), "npu-jax", "xla")


def test_bad_arguments_are_refused(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ConfigError, match="not a directory"):
        programs.enable_persistent_cache(f)
    with pytest.raises(ConfigError, match="min_compile_secs"):
        programs.enable_persistent_cache(tmp_path, min_compile_secs=-1)
    with pytest.raises(ConfigError, match="min_compile_secs"):
        programs.enable_persistent_cache(tmp_path, min_compile_secs=True)


def _cli(cache, *argv):
    env = dict(os.environ, NPU_JAX_CACHE_DIR=str(cache))
    r = subprocess.run(
        [sys.executable, "-m", "npu_jax.cli", *argv], env=env, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.slow
def test_the_cli_keeps_programs_on_disk_and_a_second_run_reads_them(tmp_path):
    cache = tmp_path / "xla"
    # with a trace the kernel's own program compiles (without one its report comes from the timing Board)
    trace = str(tmp_path / "trace.json")
    argv = (
        "matmul",
        "--m",
        "48",
        "--n",
        "40",
        "--k",
        "72",
        "--preset",
        "tiny",
        "--json",
        "--trace",
        trace,
        "--force",
    )

    def listing():
        return {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in cache.iterdir()}

    first = json.loads(_cli(cache, *argv))
    written = listing()
    assert any(e.startswith("jit_run-") for e in written), sorted(written)  # the kernel's program
    second = json.loads(_cli(cache, *argv))
    assert second == first  # same figures from the loaded program
    # every program the first run wrote was loaded, not compiled and written again; a small one that
    # compiled under min_compile_secs the first time may be written now, on a loaded machine
    after = listing()
    assert {e: after.get(e) for e in written} == written

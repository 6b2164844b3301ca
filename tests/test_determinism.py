"""Determinism: the same inputs give bit-identical outputs and identical cycle counts (and every
other figure of the report) across repeated runs, eagerly (``jax.disable_jit``) and under
``jax.jit``, and with the sanitizers on or off -- the checks observe, they never change a value
or a cycle.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from conftest import assert_bits_equal

import npu_jax
from npu_jax.core import wide
from npu_jax.hw import presets

_R = np.random.default_rng(7)
A = _R.standard_normal((48, 80)).astype(np.float32)
B = _R.standard_normal((80, 40)).astype(np.float32)
X = _R.standard_normal((1, 20, 7, 9)).astype(np.float32)
W = _R.standard_normal((24, 20, 3, 3)).astype(np.float32)
GEMM_T = npu_jax.MatmulTiling(m=32, n=32, k_l1=64, k_l0=32)
CONV_T = npu_jax.ConvTiling(ho=4, wo=5, n=16, cin1=1, k_l0=32, l1_stages=2, l0_stages=2)


def gemm(checks, hw=None):
    return lambda a, b: npu_jax.matmul(a, b, hw=hw or presets.tiny(), tiling=GEMM_T, checks=checks)


def conv(checks, timing_only=False):
    return lambda x, w: npu_jax.conv2d(
        x,
        w,
        stride=(1, 2),
        padding=1,
        strategy="img2col",
        hw=presets.tiny(),
        tiling=CONV_T,
        checks=checks,
        timing_only=timing_only,
    )


def figures(rep) -> dict:
    """Every number a report holds about the run (not the sanitizers' own state)."""
    out = {
        "cycles": rep.cycles,
        "core_cycles": tuple(rep.core_cycles),
        "bytes": rep.bytes,
        "busy": rep.pipe_busy,
        "flops": rep.flops,
        "issued": rep.flops_issued,
        "pipe_free": wide.to_numpy(rep.pipe_free).tolist(),
        "n_instr": np.asarray(rep.n_instr).tolist(),
        "unwritten": int(rep.unwritten),
        "overlap": int(rep.overlapping_writes),
    }
    for k, v in rep.extras.items():
        out[k] = figures(v)
    return out


def assert_same_run(r1, r2, what):
    (y1, rep1), (y2, rep2) = r1, r2
    assert_bits_equal(y1, y2, f"{what}: y")
    f1, f2 = figures(rep1), figures(rep2)
    assert f1 == f2, f"{what}: " + ", ".join(k for k in f1 if f1[k] != f2.get(k))


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["gemm", "conv"])
def test_repeated_jit_runs_and_checks_on_off_are_bit_identical(kernel):
    make, args = (gemm, (A, B)) if kernel == "gemm" else (conv, (X, W))
    on, off = jax.jit(make("all")), jax.jit(make("none"))
    first = on(*args)
    assert first[1].check().findings() == []
    assert_same_run(first, on(*args), f"{kernel}: repeated run")
    assert_same_run(first, off(*args), f"{kernel}: checks all vs none")
    assert first[1].cycles > 0 and np.all(np.isfinite(np.asarray(first[0], np.float32)))


@pytest.mark.slow
def test_eager_equals_jit_and_checks_do_not_change_it():
    a, b = A[:32, :64], B[:64, :32]  # one output block, two K steps: disable_jit runs op by op
    eager = gemm("all")(a, b)  # eager: launch runs the analysis and raises on any finding
    with jax.disable_jit():  # fori_loops run as Python loops (checks off: op by op they cost minutes)
        nojit = gemm("none")(a, b)
    assert_same_run(eager, nojit, "gemm: eager (checks on) vs disable_jit (checks off)")
    assert_same_run(eager, jax.jit(gemm("all"))(a, b), "gemm: eager vs jit (checks on)")


@pytest.mark.slow
def test_timing_only_with_and_without_checks():
    on = jax.jit(conv("all", timing_only=True))(X, W)
    off = jax.jit(conv("none", timing_only=True))(X, W)
    data = jax.jit(conv("none"))(X, W)
    assert on[1].check().findings() == []

    # timing-only with racecheck on marks written outputs (to catch overlaps), so 'unwritten' differs
    def strip(f):
        return {
            k: strip(v) if isinstance(v, dict) and "cycles" in v else v
            for k, v in f.items()
            if k != "unwritten"
        }

    assert strip(figures(on[1])) == strip(figures(off[1])) == strip(figures(data[1]))


_OPT_LEVEL_SCRIPT = """
import hashlib, sys
import numpy as np
import npu_jax, fusion
from npu_jax.core.policy import Policy
rng = np.random.default_rng(int(sys.argv[1]))
x = rng.standard_normal((2, 20, 11, 9)).astype(np.float32)
w = rng.standard_normal((24, 20, 3, 3)).astype(np.float32)
b = rng.standard_normal((24,)).astype(np.float32)
outs = []
y, r = npu_jax.conv2d(x, w, 1, 1, strategy="img2col", hw=npu_jax.presets.tiny(),
                      policy=Policy(accumulate="fp16_mac", vector="fp16"))
outs += [np.asarray(y), np.asarray(int(r.cycles))]
y, r = fusion.conv_relu(x, w, bias=b, stride=1, padding=1, hw=npu_jax.presets.ascend910())
outs += [np.asarray(y), np.asarray(int(r.cycles))]
print(hashlib.sha256(b"".join(o.tobytes() for o in outs)).hexdigest())
"""


@pytest.mark.slow
def test_xla_optimisation_level_does_not_change_a_bit(rng):
    """conftest.py compiles the suite at XLA's backend optimisation level 0 (faster compiles). A
    kernel's outputs and cycles must be the same bits at the default level, as users run it."""
    import os
    import subprocess
    import sys

    seed = str(int(rng.integers(2**31)))
    runs = {}
    for level in ("0", "default"):
        env = dict(os.environ, NPU_JAX_TEST_XLA_OPT=level)
        flags = [f for f in env.get("XLA_FLAGS", "").split() if "xla_backend_optimization_level" not in f]
        env["XLA_FLAGS"] = " ".join(flags + (["--xla_backend_optimization_level=0"] if level == "0" else []))
        out = subprocess.run(
            [sys.executable, "-c", _OPT_LEVEL_SCRIPT, seed],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        runs[level] = out.stdout.strip().splitlines()[-1]
    assert runs["0"] == runs["default"], runs


@pytest.mark.slow
def test_releasing_compiled_programs_changes_nothing():
    """launch() drops JAX's compile caches near the process's mapping limit (run.py); a kernel
    recompiled afterwards gives the same bits and cycles."""
    import sys

    from npu_jax.core import run

    before = gemm("all")(A, B)
    if sys.platform.startswith("linux"):
        n, limit = run._mapping_count()
        assert 0 < n < limit
        assert run.release_compiled_if_near_limit(fraction=0.0)
        assert not run.release_compiled_if_near_limit(fraction=1.0)
    assert_same_run(before, gemm("all")(A, B), "after releasing compiled programs")

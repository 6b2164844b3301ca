"""The same bits on every host: emulated kernels give identical outputs and cycles whatever XLA:CPU
kernels the host gets.

XLA:CPU picks its kernels by the CPU it runs on: dots and reductions go to YNNPACK, which chooses
AVX-512 or AVX2 code from the CPU it finds, and fused elementwise code contracts ``a * b + c`` into an
FMA where the instruction set has one. The emulator promises its own order of products and sums inside
an Mmad (``npu_jax/core/isa/mac.py``), written so that none of these choices can change a bit. Here
``tests/host_bits_probe.py`` runs a few kernels (img2col and output-tiled convs, a GEMM, a fused
epilogue on the vector unit; fp16, bf16 and fp32 operands) in subprocesses under:

* ``--xla_cpu_max_isa=AVX`` (no FMA) with YNNPACK off (``--xla_cpu_experimental_ynn_fusion_type=``:
  XLA's own dot and reduction kernels instead), which changed the bits of every fp32-output kernel
  before the Mmad had its own order;
* ``--xla_cpu_max_isa=AVX2`` (FMA contraction on);
* XLA's defaults (the host's full instruction set, AVX-512 where it has it);

and requires the same output bits and cycles from each. (``SSE4_2`` cannot run fp16 at all: XLA's JIT
lacks the fp16 conversion routines it then calls.) A few tens of seconds on two cores: three
processes, each compiling four small kernels on the tiny preset.
"""

from __future__ import annotations

import json
import os
import pathlib
import platform
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import npu_jax
from npu_jax.core.policy import Policy

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROBE = ROOT / "tests" / "host_bits_probe.py"
NO_YNN = "--xla_cpu_experimental_ynn_fusion_type="
SETTINGS = {
    "AVX, YNNPACK off": f"--xla_cpu_max_isa=AVX {NO_YNN}",
    "AVX2": "--xla_cpu_max_isa=AVX2",
    "default": "",
}

x86_only = pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64"),
    reason="the instruction-set limits named here are x86's",
)


def _start(flags: str, seed: int) -> subprocess.Popen:
    env = dict(os.environ)
    env["XLA_FLAGS"] = " ".join(f for f in (env.get("XLA_FLAGS", ""), flags) if f)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("JAX_PLATFORMS", "cpu")
    return subprocess.Popen(
        [sys.executable, str(PROBE), str(seed)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(name: str, proc: subprocess.Popen) -> dict | None:
    try:
        out, err = proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    if proc.returncode and NO_YNN.strip("-=") in err and "nknown flag" in err:
        return None  # an XLA without YNNPACK: its dots are XLA's own, which the other settings check
    lines = [ln for ln in out.splitlines() if ln.startswith("HOST_BITS ")]
    assert proc.returncode == 0 and lines, f"probe under {name} failed (rc {proc.returncode}):\n{err[-3000:]}"
    return json.loads(lines[-1][len("HOST_BITS ") :])


@pytest.mark.slow
@x86_only
def test_kernels_give_the_same_bits_and_cycles_under_every_xla_cpu_setting():
    seed = int(np.random.default_rng().integers(1 << 31))
    procs = {name: _start(flags, seed) for name, flags in SETTINGS.items()}
    results = {name: _result(name, p) for name, p in procs.items()}
    got = {name: r for name, r in results.items() if r is not None}
    assert {"AVX2", "default"} <= set(got), sorted(got)
    ref_name = "default"
    ref = got[ref_name]
    assert len(ref) == 4, ref
    for name, r in got.items():
        diff = {k: (r.get(k), v) for k, v in ref.items() if r.get(k) != v}
        assert not diff, f"seed {seed}: under {name!r} these kernels differ from {ref_name!r}: {diff}"


def _split(x):
    """The hi/lo split of ``npu_jax/core/isa/mac.py``, in numpy: the top 12 significant bits, the rest."""
    hi = (x.view(np.int32) & np.int32(-(1 << 12))).view(np.float32)
    return hi, x - hi


def _model(a, b, k0: int, split: bool):
    """The promised order in numpy float32 (elementwise IEEE, no FMA): exact products, a pairwise
    tree over each K0 fractal, fractal sums added into C in k order."""
    K = a.shape[1]
    c = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for f in range(K // k0):
        terms = []
        for k in range(f * k0, (f + 1) * k0):
            x, y = a[:, k][:, None], b[k][None, :]
            if split:
                (xh, xl), (yh, yl) = _split(x), _split(y)
                terms.append((xh * yh + xh * yl) + (xl * yh + xl * yl))
            else:
                terms.append(x * y)
        while len(terms) > 1:
            terms = [terms[i] + terms[i + 1] for i in range(0, len(terms), 2)]
        c = c + terms[0]
    return c


@pytest.mark.slow
@pytest.mark.parametrize("operand", ["fp16", "bf16", "fp32"])
def test_mmad_follows_the_promised_order_bit_for_bit(operand, rng):
    """A GEMM whose K spans several Mmads of several fractals, fp32 out: every output bit is the
    documented order's (products exact, tree per fractal, fractals into L0C in k order)."""
    dt = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32}[operand]
    hw = npu_jax.presets.tiny()
    k0 = hw.k0(np.dtype(dt).itemsize)
    K = 6 * k0
    a = rng.standard_normal((40, K)).astype(dt).astype(np.float32)
    b = rng.standard_normal((K, 24)).astype(dt).astype(np.float32)
    tiling = npu_jax.MatmulTiling(m=32, n=16, k_l1=4 * k0, k_l0=2 * k0)
    c, _ = npu_jax.matmul(a, b, hw=hw, tiling=tiling, policy=Policy(operand=operand, output="fp32"))
    want = _model(a, b, k0, operand == "fp32")
    got = np.asarray(c)
    assert got.dtype == np.float32
    bad = np.flatnonzero(got.view(np.int32) != want.view(np.int32))
    assert bad.size == 0, (
        f"{bad.size} of {got.size} outputs differ, e.g. {got.flat[bad[0]]!r} vs {want.flat[bad[0]]!r}"
    )

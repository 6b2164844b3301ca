"""Dtypes at the public boundary: what a JAX user gets back, and the one-time note that says so.

The default Policy is the hardware's (fp16 operands, fp32 accumulation, fp16 output) whatever the
input's dtype: fp32 / bf16 in gives fp16 out, and an ``OperandCastWarning`` says so once per process,
only when no policy was passed. An explicit policy decides the output dtype. These tests pin both.
"""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import fusion
import npu_jax
from npu_jax import OperandCastWarning, Policy, presets
from npu_jax.core import policy as policy_mod

HW = presets.tiny()
M, K, N = 32, 48, 32
IN_DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}
OUT_DTYPES = {"fp16": jnp.float16, "bf16": jnp.bfloat16, "fp32": jnp.float32}


@pytest.fixture
def fresh_note(monkeypatch):
    """The note's once-per-process flag as in a new process."""
    monkeypatch.setattr(policy_mod, "_cast_noted", False)


def _cast_notes(fn, *args, **kwargs):
    """Run ``fn`` recording every warning; return its result and the OperandCastWarnings raised."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    return out, [w for w in rec if issubclass(w.category, OperandCastWarning)]


def _gemm_inputs(rng, dtype):
    a = rng.standard_normal((M, K)).astype(dtype)
    b = rng.standard_normal((K, N)).astype(dtype)
    return a, b


def _assert_matmul_of(c, a, b, operand: str):
    """c = a @ b computed from the operands rounded to ``operand``: products exact in fp32, the
    fp32 sum off by at most gamma_K * S, one rounding to c's format at the way out."""
    fmt = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16}[operand]
    a64 = np.asarray(a).astype(fmt).astype(np.float64)
    b64 = np.asarray(b).astype(fmt).astype(np.float64)
    ref, S = a64 @ b64, np.abs(a64) @ np.abs(b64)
    u_out = {jnp.float16: 2.0**-11, jnp.bfloat16: 2.0**-8, jnp.float32: 2.0**-24}[jnp.dtype(c.dtype).type]
    gamma_k = K * 2.0**-24 / (1 - K * 2.0**-24)
    err = np.abs(np.asarray(c, np.float64) - ref)
    assert (err <= u_out * np.abs(ref) + (1 + u_out) * gamma_k * S + 2.0**-24).all(), err.max()


@pytest.mark.parametrize("in_dtype", sorted(IN_DTYPES))
def test_default_policy_returns_fp16_whatever_the_input(rng, in_dtype, fresh_note):
    a, b = _gemm_inputs(rng, IN_DTYPES[in_dtype])
    (c, rep), notes = _cast_notes(npu_jax.matmul, a, b, hw=HW)
    assert c.dtype == jnp.float16, f"{in_dtype} in gave {c.dtype} out"
    _assert_matmul_of(c, a, b, "fp16")
    # the note comes exactly when an input was converted, and names the entry point and the dtype
    if in_dtype == "float16":
        assert notes == []
    else:
        assert len(notes) == 1
        msg = str(notes[0].message)
        assert "npu_jax.matmul" in msg and in_dtype in msg and "policy=" in msg


@pytest.mark.parametrize(
    "policy", [Policy(operand="bf16", output="bf16"), Policy(output="fp32"), Policy()], ids=repr
)
def test_explicit_policy_decides_the_output_dtype_and_no_note(rng, policy, fresh_note):
    a, b = _gemm_inputs(rng, np.float32)
    (c, _), notes = _cast_notes(npu_jax.matmul, a, b, hw=HW, policy=policy)
    assert c.dtype == OUT_DTYPES[policy.output]
    _assert_matmul_of(c, a, b, policy.operand)
    assert notes == [], "an explicit policy must not be noted"


@pytest.mark.slow
def test_the_conversion_is_at_the_boundary_so_figures_match_fp16_inputs(rng, fresh_note):
    """fp32 inputs under the default Policy run the very kernel fp16 inputs run: same bits out,
    same cycles and bytes (the note changes no figure)."""
    x = rng.standard_normal((1, 16, 6, 6)).astype(np.float32)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    (y32, rep32), notes = _cast_notes(npu_jax.conv2d, x, w, padding=1, hw=HW)
    assert len(notes) == 1 and "npu_jax.conv2d" in str(notes[0].message)
    y16, rep16 = npu_jax.conv2d(x.astype(np.float16), w.astype(np.float16), padding=1, hw=HW)
    assert y32.dtype == y16.dtype == jnp.float16
    np.testing.assert_array_equal(np.asarray(y32).view(np.uint16), np.asarray(y16).view(np.uint16))
    assert rep32.cycles == rep16.cycles and rep32.bytes == rep16.bytes
    assert rep32.pipe_busy == rep16.pipe_busy


@pytest.mark.slow
def test_conv_entry_points_note_once_per_process(rng, fresh_note):
    x = rng.standard_normal((1, 16, 6, 6)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal((32, 16, 3, 3)).astype(ml_dtypes.bfloat16)
    (y, _), first = _cast_notes(fusion.conv_relu, x, w, padding=1, hw=HW, timing_only=True)
    assert y.dtype == jnp.float16
    assert len(first) == 1 and "fusion.conv_relu" in str(first[0].message)
    # the process has been told: no entry point repeats it
    (y, _), again = _cast_notes(npu_jax.conv2d, x, w, padding=1, hw=HW, timing_only=True)
    assert y.dtype == jnp.float16 and again == []
    (_, _), gemm = _cast_notes(npu_jax.matmul, *_gemm_inputs(rng, np.float32), hw=HW)
    assert gemm == []


def test_conv2d_with_a_bf16_policy_keeps_bf16(rng, fresh_note):
    x = rng.standard_normal((1, 16, 6, 6)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal((32, 16, 3, 3)).astype(ml_dtypes.bfloat16)
    pol = Policy(operand="bf16", output="bf16")
    (y, _), notes = _cast_notes(npu_jax.conv2d, x, w, padding=1, hw=HW, policy=pol, timing_only=True)
    assert y.dtype == jnp.bfloat16 and notes == []


def test_the_note_can_be_silenced_by_its_category(rng, fresh_note):
    a, b = _gemm_inputs(rng, np.float32)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=npu_jax.OperandCastWarning)
        c, _ = npu_jax.matmul(a, b, hw=HW)
    assert c.dtype == jnp.float16
    assert not [w for w in rec if issubclass(w.category, OperandCastWarning)]
    assert issubclass(OperandCastWarning, UserWarning)


def test_a_refused_call_is_not_noted(rng, fresh_note):
    a, _ = _gemm_inputs(rng, np.float32)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="K"):
            npu_jax.matmul(a, a, hw=HW)  # (M, K) @ (M, K): K != M
    assert not [w for w in rec if issubclass(w.category, OperandCastWarning)]
    assert policy_mod._cast_noted is False, "the refused call used up the once-per-process note"

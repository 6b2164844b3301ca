"""The static allocator: capacity, alignment, whole fractals in L0, stages, poisoned fresh memory."""

from __future__ import annotations

import re

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import make_core

from npu_jax.core.buffers import Plan
from npu_jax.errors import AlignmentError, CapacityError, NpuError
from npu_jax.hw import presets


def test_capacity_error_names_buffer_bytes_and_fix():
    hw = presets.tiny()  # L1 64 KiB
    plan = Plan(hw)
    plan.alloc("L1", "a_l1", (16, 32, 16), "fp16")  # 16 KiB
    free = plan.free("L1")
    assert free == 64 * 1024 - 16 * 1024
    with pytest.raises(CapacityError) as ei:
        plan.alloc("L1", "b_l1", (64, 32, 16), "fp16", stages=2)  # 2 x 64 KiB
    msg = str(ei.value)
    assert "L1" in msg and "'b_l1'" in msg
    assert str(2 * 64 * 1024) in msg  # bytes asked
    assert str(free) in msg  # bytes free
    assert "'a_l1'" in msg  # what is already there
    assert re.search(r"lower|reduce|smaller", msg, re.I) and "stages=1" in msg  # the fix
    # errors are ValueErrors too, and npu-jax errors
    assert isinstance(ei.value, ValueError) and isinstance(ei.value, NpuError)
    # the failed request left the plan unchanged
    assert plan.free("L1") == free and [a.name for a in plan.allocs] == ["a_l1"]


def test_capacity_exactly_full_fits():
    hw = presets.tiny()
    plan = Plan(hw)
    a = plan.alloc("L0C", "c", (64, 64), "fp32", fmt="NZ")  # exactly 16 KiB
    assert a.nbytes == hw.l0c_bytes and plan.free("L0C") == 0
    with pytest.raises(CapacityError, match="L0C"):
        plan.alloc("L0C", "c2", (16, 16), "fp32", fmt="NZ")


def test_misaligned_offset():
    plan = Plan(presets.tiny())
    with pytest.raises(AlignmentError) as ei:
        plan.alloc("UB", "x", (64,), "fp16", offset=40)  # UB aligns to 32 B
    msg = str(ei.value)
    assert "UB" in msg and "'x'" in msg and "32" in msg
    assert "offset=32" in msg or "offset=64" in msg  # the nearest legal offsets
    with pytest.raises(AlignmentError, match="512"):
        plan.alloc("L0A", "a", (16, 16), "fp16", fmt="ZZ", offset=256)


def test_explicit_offset_and_overlap():
    plan = Plan(presets.tiny())
    a = plan.alloc("UB", "x", (16,), "fp16", offset=64)
    assert a.offset == 64 and plan.used()["UB"] == 64 + 32
    with pytest.raises(AlignmentError, match="overlaps"):
        plan.alloc("UB", "y", (16,), "fp16", offset=64)
    b = plan.alloc("UB", "y", (16,), "fp16")
    assert b.offset == 96


@pytest.mark.parametrize(
    "buffer, shape, dtype, fmt",
    [
        ("L0A", (17, 16), "fp16", "ZZ"),  # M not a multiple of 16
        ("L0A", (16, 24), "fp16", "ZZ"),  # K not a multiple of K0 = 16
        ("L0A", (16, 16), "fp16", "ND"),  # wrong arrangement tag
        ("L0A", (16, 4), "fp32", "ZZ"),  # fp32 K0 = 8
        ("L0B", (8, 16), "fp16", "ZN"),  # K not a multiple of 16
        ("L0B", (16, 20), "fp16", "ZN"),  # N not a multiple of 16
        ("L0B", (16, 16, 1), "fp16", "ZN"),
        ("L0C", (16, 24), "fp32", "NZ"),
        ("L0C", (16, 16), "fp16", "NZ"),  # L0C holds fp32
    ],
)
def test_l0_tiles_must_be_whole_fractals(buffer, shape, dtype, fmt):
    with pytest.raises(AlignmentError, match=buffer):
        Plan(presets.ascend910b()).alloc(buffer, "t", shape, dtype, fmt=fmt)


@pytest.mark.parametrize(
    "buffer, shape, dtype, fmt",
    [
        ("L0A", (32, 16), "fp16", "ZZ"),
        ("L0A", (16, 8), "fp32", "ZZ"),
        ("L0A", (16, 16), "bf16", "ZZ"),
        ("L0B", (16, 48), "fp16", "ZN"),
        ("L0B", (8, 16), "fp32", "ZN"),
        ("L0C", (32, 16), "fp32", "NZ"),
    ],
)
def test_l0_whole_fractals_accepted(buffer, shape, dtype, fmt):
    a = Plan(presets.ascend910b()).alloc(buffer, "t", shape, dtype, fmt=fmt)
    assert a.nbytes % 512 == 0


def test_stages_count_and_alignment():
    hw = presets.tiny()
    plan = Plan(hw)
    a = plan.alloc("UB", "a", (3,), "fp16", stages=2)  # 6 B -> one 32-B aligned slot per stage
    assert (a.stage_bytes, a.nbytes, a.offset) == (32, 64, 0)
    b = plan.alloc("L1", "b", (2, 32, 16), "fp16", stages=2)
    assert b.nbytes == 2 * 2 * 32 * 16 * 2
    c = plan.alloc("L1", "c", (16, 16), "fp32")
    assert c.offset == b.nbytes  # the second stage of b is reserved too
    assert plan.used() == {"L1": b.nbytes + 16 * 16 * 4, "L0A": 0, "L0B": 0, "L0C": 0, "UB": 64}
    assert "2 stages" in b.describe()
    # double buffering halves what fits: 2 stages x 4 KiB fills tiny's 8 KiB L0A
    plan.alloc("L0A", "a0", (64, 32), "fp16", stages=2, fmt="ZZ")
    with pytest.raises(CapacityError, match="L0A"):
        plan.alloc("L0A", "a1", (16, 16), "fp16", fmt="ZZ")


def test_bad_arguments():
    plan = Plan(presets.tiny())
    plan.alloc("UB", "x", (16,), "fp16")
    with pytest.raises(ValueError, match="already exists"):
        plan.alloc("UB", "x", (16,), "fp16")
    with pytest.raises(ValueError, match="buffer"):
        plan.alloc("L2", "y", (16,), "fp16")
    with pytest.raises(TypeError, match="dtype"):
        plan.alloc("UB", "y", (16,), "fp64")
    with pytest.raises(ValueError, match="stages"):
        plan.alloc("UB", "y", (16,), "fp16", stages=0)
    with pytest.raises(CapacityError, match="positive"):
        plan.alloc("UB", "y", (0, 16), "fp16")


def test_fresh_allocations_are_poisoned():
    hw = presets.tiny()
    plan = Plan(hw)
    plan.alloc("L1", "x", (2, 16, 16), "fp16", stages=2, fmt="NZ")
    plan.alloc("L0A", "a", (16, 16), "bf16", fmt="ZZ")
    plan.alloc("L0C", "c", (16, 16), "fp32", fmt="NZ")
    plan.alloc("UB", "u", (40,), "fp32")
    plan.alloc("UB", "i", (8,), "int32")
    core = make_core(hw, plan)
    want = {
        "x": ((2, 2, 16, 16), jnp.float16),
        "a": ((1, 16, 16), jnp.bfloat16),
        "c": ((1, 16, 16), jnp.float32),
        "u": ((1, 40), jnp.float32),
    }
    for name, (shape, dt) in want.items():
        arr = core.buf[name]
        assert arr.shape == shape and arr.dtype == dt
        assert bool(jnp.all(jnp.isnan(arr.astype(jnp.float32)))), name
    assert np.all(np.asarray(core.buf["i"]) == np.iinfo(np.int32).min)

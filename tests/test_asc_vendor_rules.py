"""The vendor's rules, enforced on npu_jax.asc kernels: each broken one is a clear error or a finding
that names the call and the user's line."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import npu_jax
from npu_jax import asc
from npu_jax.errors import CapacityError, SanitizerError

HW = npu_jax.presets.ascend910b()
WARN = npu_jax.Checks.parse("all", action="warn")
HERE = r"tests/test_asc_vendor_rules.py:\d+ \(_\w+\)"  # the kernel's own line


def _x(rng, n=256, dtype=np.float16):
    return rng.uniform(-1, 1, n).astype(dtype)


def _findings(kernel, *args, hw=HW, blocks=1):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, report = kernel[blocks](*args, hw=hw, checks=WARN)
    return report.findings()


@asc.kernel
def _buffers(x, n: int, nbytes: int):
    pipe = asc.TPipe()
    q = asc.TQue(asc.TPosition.VECIN, 1)
    pipe.init_buffer(q, n, nbytes)
    g = asc.GlobalTensor()
    g.set_global_buffer(x)
    t = q.alloc_tensor(asc.half)
    asc.data_copy(t, g, 16)
    q.free_tensor(t)


def test_init_buffer_rounds_up_to_32_bytes(rng):
    _buffers[1](_x(rng), 2, 100, hw=HW)
    (alloc,) = asc.last_run().allocs.values()
    assert alloc.stage_bytes == 128 and alloc.stages == 2 and alloc.shape == (64,)


def test_at_most_as_many_buffers_per_position_as_event_ids(rng):
    with pytest.raises(asc.AscError, match=r"at most 8 buffers per position"):
        _buffers[1](_x(rng), 9, 64, hw=HW)
    with pytest.raises(asc.AscError, match=r"at most 4 buffers per position"):
        _buffers[1](_x(rng), 5, 64, hw=npu_jax.presets.ascend910())
    _buffers[1](_x(rng), 8, 64, hw=HW)  # the limit itself is fine


def test_a_buffer_over_capacity_names_its_init_buffer_line(rng):
    with pytest.raises(CapacityError, match=rf"init_buffer at {HERE}.*UB holds"):
        _buffers[1](_x(rng), 2, HW.ub_bytes, hw=HW)


@asc.kernel
def _short_copy(x, z, count: int):
    g, o = asc.GlobalTensor(), asc.GlobalTensor()
    g.set_global_buffer(x)
    o.set_global_buffer(z)
    pipe = asc.TPipe()
    q, qo = asc.TQue(asc.TPosition.VECIN, 1), asc.TQue(asc.TPosition.VECOUT, 1)
    pipe.init_buffer(q, 1, 512)
    pipe.init_buffer(qo, 1, 512)
    t = q.alloc_tensor(asc.half)
    asc.data_copy(t, g, count)
    q.enque(t)
    t = q.deque(asc.half)
    u = qo.alloc_tensor(asc.half)
    asc.adds(u, t, 1.0, 256)
    qo.enque(u)
    q.free_tensor(t)
    u = qo.deque(asc.half)
    asc.data_copy(o, u, 256)
    qo.free_tensor(u)


def test_a_copy_off_32_bytes_warns_and_rounds_down_as_the_vendor_does(rng):
    x = rng.uniform(1, 2, 256).astype(np.float16)
    with pytest.warns(asc.AscWarning, match=rf"data_copy at {HERE}.*: 250 elements.*rounds it down to 240"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", npu_jax.errors.SanitizerWarning)
            (_, z), _ = _short_copy[1](x, np.zeros_like(x), 250, hw=HW, checks=WARN)
    np.testing.assert_array_equal(z[:240], (x[:240] + 1).astype(np.float16))
    # elements 240.. were never copied in: the add read UB as AllocTensor left it (the NaN poison)
    assert np.isnan(z[240:].astype(np.float32)).all()


@asc.kernel
def _queue_misuse(x, bug: str):
    g = asc.GlobalTensor()
    g.set_global_buffer(x)
    pipe = asc.TPipe()
    q = asc.TQue(asc.TPosition.VECIN, 1)
    pipe.init_buffer(q, 2, 64)
    if bug == "deque_empty":
        q.deque(asc.half)
    t = q.alloc_tensor(asc.half)
    asc.data_copy(t, g, 32)
    q.enque(t)
    if bug == "enque_past_depth":
        t2 = q.alloc_tensor(asc.half)
        q.enque(t2)
    if bug == "alloc_all_in_use":
        q.alloc_tensor(asc.half)
        q.alloc_tensor(asc.half)
    t = q.deque(asc.half)
    if bug != "never_freed":
        q.free_tensor(t)
    if bug == "use_after_free":
        asc.adds(t, t, 1.0, 32)


@pytest.mark.parametrize(
    "bug,message",
    [
        ("deque_empty", r"deque at {}.*TQue\(VECIN, depth=1\).* is empty"),
        ("enque_past_depth", r"enque at {}.*.*already holds 1 tensor\(s\), its depth"),
        ("alloc_all_in_use", r"alloc_tensor at {}.*all 2 buffer\(s\) .* are in use"),
        ("use_after_free", r"adds at {}.*the destination .* was freed by FreeTensor"),
    ],
)
def test_the_queue_state_machine(rng, bug, message):
    with pytest.raises(asc.AscError, match=message.format(HERE)):
        _queue_misuse[1](_x(rng), bug, hw=HW)


def test_a_tensor_never_freed_is_a_finding(rng):
    found = _findings(_queue_misuse, _x(rng), "never_freed")
    assert [(f.check, f.kind) for f in found] == [("synccheck", "tensor never freed")]
    assert "allocated" in found[0].detail and "dequeued" in found[0].detail


@asc.kernel
def _fresh_read(x, z):
    o = asc.GlobalTensor()
    o.set_global_buffer(z)
    pipe = asc.TPipe()
    q = asc.TQue(asc.TPosition.VECOUT, 1)
    pipe.init_buffer(q, 1, 64)
    t = q.alloc_tensor(asc.half)
    asc.adds(t, t, 1.0, 32)  # reads what AllocTensor gave: uninitialised
    q.enque(t)
    t = q.deque(asc.half)
    asc.data_copy(o, t, 32)
    q.free_tensor(t)


def test_alloc_tensor_content_is_uninitialised(rng):
    (f,) = _findings(_fresh_read, _x(rng, 32), np.zeros(32, np.float16))
    assert f.check == "initcheck" and f.op == "VAdds" and "_fresh_read" in f.where


@asc.kernel
def _overlapping_blocks(x, z):
    g, o = asc.GlobalTensor(), asc.GlobalTensor()
    g.set_global_buffer(x)
    o.set_global_buffer(z + asc.get_block_idx() * 16)  # 32-element writes 16 apart: neighbours overlap
    pipe = asc.TPipe()
    q, qo = asc.TQue(asc.TPosition.VECIN, 1), asc.TQue(asc.TPosition.VECOUT, 1)
    pipe.init_buffer(q, 1, 64)
    pipe.init_buffer(qo, 1, 64)
    t = q.alloc_tensor(asc.half)
    asc.data_copy(t, g, 32)
    q.enque(t)
    t = q.deque(asc.half)
    u = qo.alloc_tensor(asc.half)
    asc.adds(u, t, 0.0, 32)
    qo.enque(u)
    q.free_tensor(t)
    u = qo.deque(asc.half)
    asc.data_copy(o, u, 32)
    qo.free_tensor(u)


def test_blocks_writing_the_same_gm_element(rng):
    with pytest.raises(SanitizerError, match=r"written by more than one core.*z\[16\].*_overlapping_blocks"):
        _overlapping_blocks[2](_x(rng, 64), np.zeros(64, np.float16), hw=HW, checks="all")

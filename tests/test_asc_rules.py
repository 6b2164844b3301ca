"""The vendor's rules of Ascend C, enforced on npu_jax.asc kernels: each broken rule is an error, a warning
or a finding that names the call and the user's line (found here with inspect, never typed)."""

from __future__ import annotations

import inspect
import re
import warnings

import numpy as np
import pytest

import npu_jax
from npu_jax import asc
from npu_jax.errors import CapacityError, SanitizerError, SanitizerWarning

HW = npu_jax.presets.ascend910b()
WARN = npu_jax.Checks.parse("all", action="warn")


def _at(kernel, text: str) -> str:
    """'tests/test_asc_rules.py:LINE (name)': where the kernel's one line containing ``text`` is."""
    fn = kernel.fn if isinstance(kernel, asc.Kernel) else kernel
    lines, first = inspect.getsourcelines(fn)
    (line,) = [first + i for i, src in enumerate(lines) if text in src]
    return f"tests/test_asc_rules.py:{line} ({fn.__name__})"


def _quiet(kernel, blocks, *args, hw=HW):
    """A launch with every check on, findings kept in the report (warnings silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SanitizerWarning)
        return kernel[blocks](*args, hw=hw, checks=WARN)


def _x(rng, n=256, dtype=np.float16):
    return rng.uniform(0.5, 2, n).astype(dtype)


# ---- buffers: 32-B rounding, event ids, capacity -----------------------------------------------------
@asc.kernel
def _buffers(x, nums: tuple, nbytes: int, out_num: int = 0):
    g = asc.GlobalTensor()
    g.set_global_buffer(x)
    pipe = asc.TPipe()
    queues = [asc.TQue(asc.TPosition.VECIN, 1) for _ in nums]
    for q, n in zip(queues, nums):
        pipe.init_buffer(q, n, nbytes)  # the queue's buffers
    if out_num:
        qo = asc.TQue(asc.TPosition.VECOUT, 1)
        pipe.init_buffer(qo, out_num, 64)
    tmp = asc.TBuf(asc.TPosition.VECCALC)
    pipe.init_buffer(tmp, 100)  # a TBuf of 100 B
    tmp.get(asc.half)
    for q in queues:
        t = q.alloc_tensor(asc.half)
        asc.data_copy(t, g, 16)
        q.free_tensor(t)


def test_init_buffer_rounds_each_buffer_up_to_32_bytes(rng):
    _buffers[1](_x(rng), (2, 1), 100, hw=HW, checks="all")
    a, b, tbuf = asc.last_run().allocs.values()
    assert (a.stages, a.stage_bytes, a.nbytes) == (2, 128, 256)  # two buffers of 100 B occupy 2 x 128 B
    assert b.offset - a.offset == 256 and b.stage_bytes == 128  # the next buffer starts after them
    assert tbuf.stage_bytes == 128 and tbuf.offset - b.offset == 128
    assert all(al.offset % 32 == 0 for al in (a, b, tbuf))


@pytest.mark.parametrize("preset,limit", [("ascend910b", 8), ("ascend910", 4)])
def test_at_most_num_event_ids_buffers_per_position(rng, preset, limit):
    hw = getattr(npu_jax.presets, preset)()
    assert hw.num_event_ids == limit
    _buffers[1](_x(rng), (limit,), 64, limit, hw=hw)  # the limit itself, on VECIN and on VECOUT
    line = _at(_buffers, "pipe.init_buffer(q, n, nbytes)")
    with pytest.raises(
        asc.AscError, match=rf"init_buffer at {re.escape(line)}.* at most {limit} buffers per"
    ):
        _buffers[1](_x(rng), (limit + 1,), 64, hw=hw)
    with pytest.raises(asc.AscError, match=rf"need {limit + 1} event ids of MTE2_V"):  # counted over queues
        _buffers[1](_x(rng), (limit - 1, 2), 64, hw=hw)


def test_a_buffer_over_capacity_names_its_init_buffer_line(rng):
    line = re.escape(_at(_buffers, "pipe.init_buffer(q, n, nbytes)"))
    with pytest.raises(CapacityError, match=rf"init_buffer at {line}.*UB holds {HW.ub_bytes} B"):
        _buffers[1](_x(rng), (1,), HW.ub_bytes + 32, hw=HW)
    # two buffers that fit alone but not together: the second init_buffer is named
    with pytest.raises(CapacityError, match=rf"init_buffer at {line}"):
        _buffers[1](_x(rng), (1, 1), HW.ub_bytes // 2 + 32, hw=HW)


# ---- alignment and DataCopy counts -------------------------------------------------------------------
@asc.kernel
def _aligned(x, z, copy_off: int, add_off: int):
    g, o = asc.GlobalTensor(), asc.GlobalTensor()
    g.set_global_buffer(x)
    o.set_global_buffer(z)
    ub = asc.LocalMemAllocator(asc.Hardware.UB)
    a = ub.alloc(asc.TPosition.VECIN, asc.half, 256)
    c = ub.alloc(asc.TPosition.VECOUT, asc.half, 256)
    asc.data_copy(a[copy_off:], g, 240)  # into a view `copy_off` halves past the buffer's start
    asc.set_flag(asc.HardEvent.MTE2_V, 0)
    asc.wait_flag(asc.HardEvent.MTE2_V, 0)
    asc.adds(c, a[add_off:], 1.0, 128)
    asc.set_flag(asc.HardEvent.V_MTE3, 0)
    asc.wait_flag(asc.HardEvent.V_MTE3, 0)
    asc.data_copy(o, c, 128)


def test_ub_operands_start_on_32_bytes(rng):
    x = _x(rng)
    (_, z), report = _quiet(_aligned, 1, x, np.zeros(128, np.float16), 16, 16)  # 32 B in: aligned
    assert report.findings() == []
    np.testing.assert_array_equal(z, (x[:128] + np.float16(1)).astype(np.float16))
    # 10 B in (5 halves): off the 32-B boundary, in the copy and in the vector call; each line is a finding
    # (the copy's first), so with the copy aligned the vector call's is seen alone
    for offs, call, op in (((5, 5), "asc.data_copy(a[copy_off:]", "DataCopy"), ((0, 5), "asc.adds(", "adds")):
        _, report = _quiet(_aligned, 1, x, np.zeros(128, np.float16), *offs)
        f, *rest = report.findings()
        assert len(rest) == (offs == (5, 5)) and all(g.op == "adds" for g in rest), [
            g.message() for g in rest
        ]
        assert (f.check, f.kind, f.op) == ("memcheck", "misaligned", op), f.message()
        assert f.where.startswith(_at(_aligned, call)) and "10 B" in f.detail, f.message()


@asc.kernel
def _short(x, z, count_in: int, count_out: int):
    g, o = asc.GlobalTensor(), asc.GlobalTensor()
    g.set_global_buffer(x)
    o.set_global_buffer(z)
    ub = asc.LocalMemAllocator(asc.Hardware.UB)
    a = ub.alloc(asc.TPosition.VECIN, asc.half, 256)
    c = ub.alloc(asc.TPosition.VECOUT, asc.half, 256)
    asc.duplicate(a, -7.0, 256)  # what a short copy-in leaves
    asc.set_flag(asc.HardEvent.V_MTE2, 0)
    asc.wait_flag(asc.HardEvent.V_MTE2, 0)
    asc.data_copy(a, g, count_in)  # copy in
    asc.set_flag(asc.HardEvent.MTE2_V, 0)
    asc.wait_flag(asc.HardEvent.MTE2_V, 0)
    asc.adds(c, a, 1.0, 256)
    asc.set_flag(asc.HardEvent.V_MTE3, 0)
    asc.wait_flag(asc.HardEvent.V_MTE3, 0)
    asc.data_copy(o, c, count_out)  # copy out


@pytest.mark.parametrize("direction", ["in", "out"])
def test_a_copy_not_a_multiple_of_32_bytes_warns_and_rounds_down(rng, direction):
    x = _x(rng)
    sentinel = np.full(256, 1000, np.float16)
    counts = (250, 256) if direction == "in" else (256, 250)
    call = "asc.data_copy(a, g, count_in)" if direction == "in" else "asc.data_copy(o, c, count_out)"
    msg = rf"data_copy at {re.escape(_at(_short, call))}.*: 250 elements of asc.half = 500 B .* down to 240"
    with pytest.warns(asc.AscWarning, match=msg) as caught:
        (_, z), report = _short[1](x, sentinel, *counts, hw=HW, checks="all")
    assert sum(issubclass(w.category, asc.AscWarning) for w in caught) == 1  # once per launch
    np.testing.assert_array_equal(z[:240], (x[:240] + np.float16(1)).astype(np.float16))
    if direction == "in":  # 240 halves came in; the rest of the tensor kept Duplicate's -7
        np.testing.assert_array_equal(z[240:], np.full(16, -6, np.float16))
    else:  # 240 halves went out; GM beyond kept its contents
        np.testing.assert_array_equal(z[240:], sentinel[240:])
    assert report.bytes["GM->UB" if direction == "in" else "UB->GM"] == 480


# ---- the launch ----------------------------------------------------------------------------------------
def test_num_blocks_is_an_int_in_1_to_65535(rng):
    x = _x(rng)
    for bad in (0, 65536, -1, True, 2.0, "8"):
        with pytest.raises(asc.AscError, match=r"num_blocks must be an int in \[1, 65535\]"):
            _buffers[bad](x, (1,), 64, hw=HW)
    _buffers[1](x, (1,), 64, hw=HW)


# ---- the queue state machine -------------------------------------------------------------------------
@asc.kernel
def _queue(x, bug: str):
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
        asc.data_copy(t2, g, 32)
        q.enque(t2)
    if bug == "alloc_all_in_use":
        q.alloc_tensor(asc.half)
        q.alloc_tensor(asc.half)
    t = q.deque(asc.half)
    asc.adds(t, t, 1.0, 32)
    if bug != "never_freed":
        q.free_tensor(t)
    if bug == "use_after_free":
        asc.muls(t, t, 2.0, 32)
    if bug == "double_free":
        q.free_tensor(t)


QUEUE_BUGS = {
    "deque_empty": ("q.deque(asc.half)\n", r"deque at {}.*: TQue\(VECIN, depth=1\) made at .* is empty"),
    "enque_past_depth": ("q.enque(t2)", r"enque at {}.*: .* already holds 1 tensor\(s\), its depth"),
    "alloc_all_in_use": ("q.alloc_tensor(asc.half)\n        q.alloc", r"alloc_tensor at {}.*: all 2 buffer"),
    "use_after_free": (
        "asc.muls(t, t, 2.0, 32)",
        r"muls at {}.*: the destination .* was freed by FreeTensor",
    ),
    "double_free": ("q.free_tensor(t)\n", r"free_tensor at {}.*: the tensor .* is FREE"),
}


def _at_nth(kernel, text: str, n: int = -1) -> str:
    """Like _at, for a line that repeats: the n-th of those equal to ``text`` (stripped)."""
    fn = kernel.fn
    lines, first = inspect.getsourcelines(fn)
    hits = [first + i for i, src in enumerate(lines) if src.strip() == text.strip()]
    return f"tests/test_asc_rules.py:{hits[n]} ({fn.__name__})"


@pytest.mark.parametrize("bug", sorted(QUEUE_BUGS))
def test_the_queue_state_machine_names_the_call_and_line(rng, bug):
    text, message = QUEUE_BUGS[bug]
    first_line = text.split("\n")[0]
    where = _at_nth(_queue, first_line, 0 if bug == "deque_empty" else -1)
    with pytest.raises(asc.AscError, match=message.format(re.escape(where))):
        _queue[1](_x(rng), bug, hw=HW)


def test_the_unbroken_queue_kernel_runs_clean(rng):
    x = _x(rng)
    (_,), report = _quiet(_queue, 1, x, "")
    assert report.findings() == []


def test_a_tensor_never_freed_is_a_synccheck_finding_at_its_alloc(rng):
    (_,), report = _quiet(_queue, 1, _x(rng), "never_freed")
    (f,) = report.findings()
    assert (f.check, f.kind, f.op) == ("synccheck", "tensor never freed", "FreeTensor")
    assert f.where.startswith(_at(_queue, "t = q.alloc_tensor(asc.half)")), f.where
    assert "TQue(VECIN, depth=1)" in f.detail and "1 dequeued" in f.detail


# ---- AllocTensor content; blocks writing the same GM ----------------------------------------------------
@asc.kernel
def _fresh(x, z):
    g, o = asc.GlobalTensor(), asc.GlobalTensor()
    g.set_global_buffer(x)
    o.set_global_buffer(z)
    pipe = asc.TPipe()
    qi, qo = asc.TQue(asc.TPosition.VECIN, 1), asc.TQue(asc.TPosition.VECOUT, 1)
    pipe.init_buffer(qi, 1, 64)
    pipe.init_buffer(qo, 1, 64)
    t = qi.alloc_tensor(asc.half)
    asc.data_copy(t, g, 32)
    qi.enque(t)
    t = qi.deque(asc.half)
    u = qo.alloc_tensor(asc.half)
    asc.add(u, t, u, 32)  # reads u as AllocTensor gave it: uninitialised
    qo.enque(u)
    qi.free_tensor(t)
    u = qo.deque(asc.half)
    asc.data_copy(o, u, 32)
    qo.free_tensor(u)


def test_alloc_tensor_content_is_uninitialised(rng):
    (_, z), report = _quiet(_fresh, 1, _x(rng, 32), np.zeros(32, np.float16))
    (f,) = report.findings()
    assert (f.check, f.op) == ("initcheck", "VAdd") and f.where.startswith(
        _at(_fresh, "asc.add(u, t, u, 32)")
    )
    assert np.isnan(z.astype(np.float32)).all()  # the emulator poisons a fresh buffer (NaN), so it shows


@asc.kernel
def _overlap(x, z, stride: int):
    g, o = asc.GlobalTensor(), asc.GlobalTensor()
    g.set_global_buffer(x + asc.get_block_idx() * 32, 32)
    o.set_global_buffer(z + asc.get_block_idx() * stride, 32)
    ub = asc.LocalMemAllocator(asc.Hardware.UB)
    a = ub.alloc(asc.TPosition.VECIN, asc.half, 32)
    asc.data_copy(a, g, 32)
    asc.set_flag(asc.HardEvent.MTE2_MTE3, 0)
    asc.wait_flag(asc.HardEvent.MTE2_MTE3, 0)
    asc.data_copy(o, a, 32)  # block b writes z[b * stride : b * stride + 32]


def test_blocks_writing_the_same_gm_element_are_a_multicore_race(rng):
    x = _x(rng, 64)
    (_, z), report = _quiet(_overlap, 2, x, np.zeros(64, np.float16), 32)  # disjoint: fine
    assert int(report.overlapping_writes) == 0 and report.findings() == []
    np.testing.assert_array_equal(z, x)
    (_, z), report = _quiet(_overlap, 2, x, np.zeros(64, np.float16), 16)  # z[16:32] written by both
    assert int(report.overlapping_writes) == 16
    line = re.escape(_at(_overlap, "asc.data_copy(o, a, 32)"))
    with pytest.raises(SanitizerError, match=rf"(?s)written by more than one core.*z\[16\].*{line}"):
        _overlap[2](x, np.zeros(64, np.float16), 16, hw=HW, checks="all")


@asc.kernel
def _wrapped(x, z):
    """Four blocks, two tiles: blocks 2 and 3 redo blocks 0 and 1 (the index wraps around)."""
    tile = asc.get_block_idx() % 2
    g, o = asc.GlobalTensor(), asc.GlobalTensor()
    g.set_global_buffer(x + tile * 32, 32)
    o.set_global_buffer(z + tile * 32, 32)
    ub = asc.LocalMemAllocator(asc.Hardware.UB)
    a = ub.alloc(asc.TPosition.VECIN, asc.half, 32)
    asc.data_copy(a, g, 32)
    asc.set_flag(asc.HardEvent.MTE2_MTE3, 0)
    asc.wait_flag(asc.HardEvent.MTE2_MTE3, 0)
    asc.data_copy(o, a, 32)


def test_blocks_writing_the_same_bits_to_an_element_are_not_a_race(rng):
    """Two cores writing the same value give the same result in either order (pyasc's matmul test
    launches twice the blocks it has tiles and wraps block_idx around): not a finding."""
    x = _x(rng, 64)
    (_, z), report = _quiet(_wrapped, 4, x, np.zeros(64, np.float16))
    assert int(report.overlapping_writes) == 0 and report.findings() == []
    np.testing.assert_array_equal(z, x)

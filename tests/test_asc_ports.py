"""The vendor's vector samples on npu_jax.asc, with the vendor's constants and golden rules; double
buffering shown from the timeline; every vector call against numpy; the debug mode (jit=False)."""

from __future__ import annotations

import os
import sys

import jax
import numpy as np
import pytest

import npu_jax
from npu_jax import asc
from npu_jax.report.events import instr_events

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "asc"))
import add_custom as ac  # noqa: E402
import add_tpipe_tque as att  # noqa: E402
import leaky_relu_custom as lrc  # noqa: E402

HW = npu_jax.presets.ascend910b()


def test_add_custom_fp16_is_bit_exact(rng):
    x = rng.uniform(-100, 100, (8, 2048)).astype(np.float16)
    y = rng.uniform(-100, 100, (8, 2048)).astype(np.float16)
    (_, _, z), _ = ac.add_custom[8](x, y, np.zeros_like(x), hw=HW)
    np.testing.assert_array_equal(z, (x + y).astype(np.float16))  # one fp16 rounding of the exact sum


def test_add_tpipe_tque_fp32(rng):
    x = rng.uniform(-10, 10, att.TOTAL_LENGTH).astype(np.float32)
    y = rng.uniform(-10, 10, att.TOTAL_LENGTH).astype(np.float32)
    (_, _, z), report = att.add_tpipe_tque[att.BLOCKS](x, y, np.zeros_like(x), hw=HW)
    np.testing.assert_array_equal(z, x + y)
    assert report.bytes["GM->UB"] == 2 * x.nbytes and report.bytes["UB->GM"] == x.nbytes


def test_leaky_relu_custom_at_the_vendors_size(rng):
    x = rng.uniform(-10, 10, lrc.SHAPE).astype(np.float32)
    (_, y), report = lrc.leaky_relu_custom[lrc.BLOCKS](x, np.zeros_like(x), x.size, hw=HW)
    np.testing.assert_array_equal(y, lrc.reference(x))
    assert report.n_cores == lrc.BLOCKS


def _overlap(report, a: str, b: str) -> int:
    """Cycles during which lane ``a`` and lane ``b`` both work on core 0, from the trace."""
    ev = instr_events(report.trace, 0)
    spans = {lane: [(e["start"], e["end"]) for e in ev if e["lane"] == lane] for lane in (a, b)}
    return sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in spans[a] for s2, e2 in spans[b])


def test_double_buffering_is_faster_because_mte2_runs_under_v(rng):
    x = rng.uniform(-1, 1, (8, 2048)).astype(np.float16)
    z = np.zeros_like(x)
    # the same 128-element tile either way: 16 tiles per block, in 2 buffers or in 1
    _, double = ac.add_custom[8](x, x, z, 2048, 8, 2, hw=HW, trace=True)
    _, single = ac.add_custom[8](x, x, z, 2048, 16, 1, hw=HW, trace=True)
    assert double.pipe_busy == single.pipe_busy  # the same work...
    assert double.core_end < single.core_end  # ...done sooner
    assert _overlap(double, "MTE2", "VECTOR") > 0  # because a copy-in runs while V computes
    assert _overlap(single, "MTE2", "VECTOR") == 0  # which one buffer forbids


OPS = {
    "add": (asc.add, 2, np.add),
    "sub": (asc.sub, 2, np.subtract),
    "mul": (asc.mul, 2, np.multiply),
    "div": (asc.div, 2, np.divide),
    "max": (asc.max, 2, np.maximum),
    "min": (asc.min, 2, np.minimum),
    "adds": (asc.adds, "s", np.add),
    "muls": (asc.muls, "s", np.multiply),
    "maxs": (asc.maxs, "s", np.maximum),
    "mins": (asc.mins, "s", np.minimum),
    "abs": (asc.abs, 1, np.abs),
    "exp": (asc.exp, 1, np.exp),
    "ln": (asc.ln, 1, np.log),
    "sqrt": (asc.sqrt, 1, np.sqrt),
    "relu": (asc.relu, 1, lambda a: np.maximum(a, 0)),
    "leaky_relu": (asc.leaky_relu, "a", lambda a, s: np.where(a >= 0, a, a * s)),
}
N = 256


NAMES = sorted(OPS)


@asc.kernel
def _every_op(x, xs, y, z, fmt: str, scalar: float):
    """Every call of OPS once, on the same operands: one kernel (one compile) for them all."""
    dt = asc.half if fmt == "fp16" else asc.float32
    ub = asc.LocalMemAllocator(asc.Hardware.UB)
    a, a_signed, b = (ub.alloc(asc.TPosition.VECIN, dt, N) for _ in range(3))
    c = ub.alloc(asc.TPosition.VECOUT, dt, N * len(NAMES))
    xg, xsg, yg, zg = (asc.GlobalTensor() for _ in range(4))
    for g, arg in ((xg, x), (xsg, xs), (yg, y), (zg, z)):
        g.set_global_buffer(arg)
    asc.data_copy(a, xg, N)
    asc.data_copy(a_signed, xsg, N)
    asc.data_copy(b, yg, N)
    asc.set_flag(asc.HardEvent.MTE2_V, 0)
    asc.wait_flag(asc.HardEvent.MTE2_V, 0)
    for i, name in enumerate(NAMES):
        fn, arity, _ = OPS[name]
        src = a if name in POSITIVE else a_signed
        out = c[i * N :]
        if arity == 2:
            fn(out, src, b, N)
        elif arity == 1:
            fn(out, src, N)
        else:
            fn(out, src, scalar, N)
    asc.set_flag(asc.HardEvent.V_MTE3, 0)
    asc.wait_flag(asc.HardEvent.V_MTE3, 0)
    asc.data_copy(zg, c, N * len(NAMES))


POSITIVE = ("exp", "ln", "sqrt", "div")  # on positive data (ln and sqrt defined; exp in range)


@pytest.mark.parametrize("fmt", ["fp16", "fp32"])
def test_each_vector_call_is_numpy_rounded_once(rng, fmt):
    dt = np.float16 if fmt == "fp16" else np.float32
    x = rng.uniform(0.5, 4, N).astype(dt)
    xs = (x * rng.choice([-1, 1], N)).astype(dt)
    y = rng.uniform(0.5, 4, N).astype(dt)
    s = float(np.float16(rng.uniform(-2, 2)))
    (_, _, _, z), _ = _every_op[1](x, xs, y, np.zeros((len(NAMES), N), dt), fmt, s, hw=HW)
    for i, name in enumerate(NAMES):
        _, arity, ref = OPS[name]
        x64 = (x if name in POSITIVE else xs).astype(np.float64)
        want = ref(x64, y.astype(np.float64)) if arity == 2 else ref(x64) if arity == 1 else ref(x64, s)
        if name in POSITIVE:  # computed in fp32 (to fp32's accuracy), rounded once to the destination
            np.testing.assert_allclose(z[i].astype(np.float64), want, rtol=2 * np.finfo(dt).eps, err_msg=name)
        else:  # exact in fp32, then one rounding to the destination
            np.testing.assert_array_equal(z[i], want.astype(np.float32).astype(dt), err_msg=name)


@asc.kernel
def _cast_reduce(x, z, s, mode: asc.RoundMode):
    ub = asc.LocalMemAllocator(asc.Hardware.UB)
    a = ub.alloc(asc.TPosition.VECIN, asc.float32, N)
    h = ub.alloc(asc.TPosition.VECOUT, asc.half, N)
    r = ub.alloc(asc.TPosition.VECOUT, asc.float32, 16)
    w = ub.alloc(asc.TPosition.VECCALC, asc.float32, N)
    xg, zg, sg = asc.GlobalTensor(), asc.GlobalTensor(), asc.GlobalTensor()
    xg.set_global_buffer(x)
    zg.set_global_buffer(z)
    sg.set_global_buffer(s)
    asc.data_copy(a, xg, N)
    asc.set_flag(asc.HardEvent.MTE2_V, 0)
    asc.wait_flag(asc.HardEvent.MTE2_V, 0)
    asc.cast(h, a, mode, N)
    asc.duplicate(r, 7.0, 16)
    asc.reduce_sum(r, a, w, N)
    asc.reduce_max(r[8:], a, w, N)
    asc.set_flag(asc.HardEvent.V_MTE3, 0)
    asc.wait_flag(asc.HardEvent.V_MTE3, 0)
    asc.data_copy(zg, h, N)
    asc.data_copy(sg, r, 16)


@pytest.mark.parametrize(
    "mode,rounding", [(asc.RoundMode.CAST_RINT, "nearest_even"), (asc.RoundMode.CAST_TRUNC, "toward_zero")]
)
def test_cast_duplicate_and_reductions(rng, mode, rounding):
    x = (rng.standard_normal(N) * 1000).astype(np.float32)
    (_, z, s), _ = _cast_reduce[1](x, np.zeros(N, np.float16), np.zeros(16, np.float32), mode, hw=HW)
    want = np.asarray(precision_round(x, rounding)).astype(np.float16)
    np.testing.assert_array_equal(z, want)
    np.testing.assert_allclose(s[0], x.astype(np.float64).sum(), rtol=1e-5)
    assert s[8] == x.max() and np.all(s[1:8] == 7.0) and np.all(s[9:] == 7.0)


def precision_round(x, mode):
    import precision

    return precision.round_to(x, "fp16", mode=mode)


@asc.kernel
def _debug(x, z):
    g, o = asc.GlobalTensor(), asc.GlobalTensor()
    g.set_global_buffer(x + asc.get_block_idx() * 32, 32)
    o.set_global_buffer(z + asc.get_block_idx() * 32, 32)
    pipe = asc.TPipe()
    q, qo = asc.TQue(asc.TPosition.VECIN, 2), asc.TQue(asc.TPosition.VECOUT, 2)
    pipe.init_buffer(q, 2, 64)
    pipe.init_buffer(qo, 2, 64)

    @asc.loop(2)
    def _(i):
        t = q.alloc_tensor(asc.half)
        asc.data_copy(t, g[i * 16 :], 16)
        q.enque(t)
        t = q.deque(asc.half)
        asc.printf("tile %d\n", i)
        asc.dump_tensor(t, 5, 4)
        u = qo.alloc_tensor(asc.half)
        asc.adds(u, t, 0.0, 16)
        qo.enque(u)
        q.free_tensor(t)
        u = qo.deque(asc.half)
        asc.data_copy(o[i * 16 :], u, 16)
        qo.free_tensor(u)


def test_jit_false_runs_call_by_call_with_the_same_result(rng, capsys):
    x = rng.uniform(-1, 1, 64).astype(np.float16)
    (_, z1), r1 = _debug[2](x, np.zeros_like(x), hw=HW)
    jax.effects_barrier()
    jitted = capsys.readouterr().out
    (_, z2), r2 = _debug[2](x, np.zeros_like(x), hw=HW, jit=False)
    eager = capsys.readouterr().out
    np.testing.assert_array_equal(z1, x)
    np.testing.assert_array_equal(z2, x)
    assert r1.cycles == r2.cycles and r1.pipe_busy == r2.pipe_busy
    for out in (jitted, eager):
        assert "[block 1] tile 1" in out and "DumpTensor desc=5" in out
    assert eager.index("[block 0] tile 0") < eager.index("[block 0] tile 1") < eager.index("[block 1] tile 0")
    assert asc.last_run().core is not None  # the state the kernel left, for a debugger

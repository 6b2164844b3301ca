"""The vector side of npu_jax.asc against the vendor's samples and numpy: the ports run with the vendor's
constants (add_tpipe_tque, LeakyReluCustom, AddCustom, the msSanitizer sample and its four injected bugs),
double buffering shown from the timeline, the debug mode (jit=False, printf, DumpTensor), blocks in waves,
and every vector call against numpy on fresh random data, in fp16 and fp32."""

from __future__ import annotations

import functools
import inspect
import json
import os
import re
import secrets
import sys
import warnings

import jax
import numpy as np
import pytest

import npu_jax
from npu_jax import asc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "asc"))
import add_custom as ac  # noqa: E402
import add_tpipe_tque as att  # noqa: E402
import leaky_relu_custom as lrc  # noqa: E402
import ms_sanitizer as mss  # noqa: E402

HW = npu_jax.presets.ascend910b()
WARN = npu_jax.Checks.parse("all", action="warn")


# ---- the vendor's samples ----------------------------------------------------------------------------
def test_add_custom_fp16_bit_exact_at_the_vendors_constants(rng):
    x = rng.uniform(-60, 60, (8, 2048)).astype(np.float16)
    y = rng.uniform(-60, 60, (8, 2048)).astype(np.float16)
    (x2, y2, z), report = ac.add_custom[ac.USE_CORE_NUM](x, y, np.zeros_like(x), 2048, 8, 2, hw=HW)
    # the sum of two halves is exact in fp32: numpy's fp16 add is that sum rounded once, as Add's
    np.testing.assert_array_equal(z.view(np.uint16), (x + y).view(np.uint16))
    np.testing.assert_array_equal(x2, x)  # inputs untouched
    assert report.bytes["GM->UB"] == 2 * x.nbytes and report.bytes["UB->GM"] == z.nbytes


def test_add_tpipe_tque_one_tile_per_block(rng):
    n = att.TOTAL_LENGTH
    assert n == 8 * 2048 and att.BLOCKS == 8
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    (_, _, z), report = att.add_tpipe_tque[att.BLOCKS](x, y, np.zeros_like(x), hw=HW, trace=True)
    np.testing.assert_array_equal(z, x + y)  # one fp32 add per element: numpy's, bit for bit
    assert report.n_cores == 8
    # depth-1 queues, no loop: each block copies x and y in once, adds once, copies z out once
    ops = [(e["lane"], e["op"]) for e in npu_jax.report.events.instr_events(report.trace, 3)]
    assert [lane for lane, _ in ops].count("MTE2") == 2
    assert [lane for lane, _ in ops].count("VECTOR") == 1 and [lane for lane, _ in ops].count("MTE3") == 1


def test_leaky_relu_custom_at_the_vendors_size(rng):
    assert lrc.SHAPE == (8, 200, 1024) and (lrc.BLOCKS, lrc.TILE_NUM, lrc.BUFFER_NUM) == (8, 16, 2)
    x = rng.uniform(-5, 5, lrc.SHAPE).astype(np.float32)
    slope = float(rng.uniform(0.005, 0.2))
    (x2, y), report = lrc.leaky_relu_custom[lrc.BLOCKS](
        x, np.zeros_like(x), x.size, lrc.TILE_NUM, slope, hw=HW
    )
    np.testing.assert_array_equal(x2, x)
    # the vendor's check (verify_result: fp32 within 1e-4 relative) against the plain formula...
    want = np.where(x >= 0, x.astype(np.float64), x.astype(np.float64) * slope)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-30)
    # ...and bit for bit against the four fp32 ops it is written as (Maxs, Mins, Muls, Add)
    x32, s32 = x.astype(np.float32), np.float32(slope)
    staged = np.maximum(x32, np.float32(0)) + np.minimum(x32, np.float32(0)) * s32
    np.testing.assert_array_equal(y, staged)
    assert report.bytes["GM->UB"] == x.nbytes and report.bytes["UB->GM"] == y.nbytes


# ---- the msSanitizer sample: four injected bugs ------------------------------------------------------
def _line_of_call(text: str) -> int:
    """The source line of the kernel's call that contains ``text`` (found with inspect, not typed)."""
    lines, first = inspect.getsourcelines(mss.sanitizer_add.fn)
    (hit,) = [first + i for i, line in enumerate(lines) if text in line]
    return hit


# mutation -> (check, the call it names)
MUTATIONS = {
    "double_copy": ("memcheck", "asc.data_copy(x_ub, x_gm"),  # twice the block: past the UB tensor
    "misaligned": ("memcheck", "asc.add(z_ub, src"),  # x_ub[5:]: 20 B off 32 B, used by Add
    "no_sync": ("racecheck", "asc.add(z_ub, src"),  # V reads x_ub, y_ub before MTE2 has written them
    "no_global_buffer": ("initcheck", "asc.data_copy(x_ub, x_gm"),  # x_gm has no memory
}


def _sanitize(rng, mutation):
    x = rng.uniform(-1, 1, (8, mss.BLOCK_LENGTH)).astype(np.float32)
    y = rng.uniform(-1, 1, (8, mss.BLOCK_LENGTH)).astype(np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs, report = mss.sanitizer_add[8](x, y, np.zeros_like(x), mutation, hw=HW, checks=WARN)
    return x, y, outs, report, caught


def test_the_sanitizer_sample_unmutated_is_clean_and_exact(rng):
    x, y, outs, report, caught = _sanitize(rng, "")
    assert report.findings() == [] and not caught
    np.testing.assert_array_equal(outs[2], x + y)


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_each_injected_bug_is_one_finding_of_its_check_at_its_line(rng, mutation):
    check, call = MUTATIONS[mutation]
    _, _, _, report, caught = _sanitize(rng, mutation)
    found = report.findings()
    assert len(found) == 1, [f.message() for f in found]
    (f,) = found
    assert f.check == check
    assert f"examples/asc/ms_sanitizer.py:{_line_of_call(call)} (sanitizer_add)" in f.where, f.where
    assert any(issubclass(w.category, npu_jax.errors.SanitizerWarning) for w in caught)
    if mutation == "no_sync":  # the replay's race (on a core, not at trace time): V reads what MTE2 writes
        assert f.kind == "RAW" and "MTE2" in f.message() and f.pipe == "V" and f.core >= 0


# ---- double buffering --------------------------------------------------------------------------------
def _spans(trace_json: dict, lane: str, pid: int = 0) -> list[tuple[float, float]]:
    """(start, end) of each instruction on one pipe of one core, read from the Chrome trace (flags aside)."""
    names = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in trace_json["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    return sorted(
        (e["args"]["start_cycle"], e["args"]["end_cycle"])
        for e in trace_json["traceEvents"]
        if e["ph"] == "X"
        and e["pid"] == pid
        and "seq" in e["args"]
        and names.get((e["pid"], e["tid"])) == lane
    )


def test_double_buffering_beats_single_and_the_trace_shows_mte2_under_v(rng, tmp_path):
    x = rng.uniform(-1, 1, (8, 2048)).astype(np.float16)
    y = rng.uniform(-1, 1, (8, 2048)).astype(np.float16)
    z = np.zeros_like(x)
    # the same 128-element tile and 16 iterations: BUFFER_NUM 2 x TILE_NUM 8, or 1 x 16
    (_, _, z2), double = ac.add_custom[8](x, y, z, 2048, 8, 2, hw=HW, trace=True)
    (_, _, z1), single = ac.add_custom[8](x, y, z, 2048, 16, 1, hw=HW, trace=True)
    np.testing.assert_array_equal(z1, z2)
    # the same work (the Vector pipe's beats aside: the two UB layouts put x and y at different
    # distances in the bank groups, so their Adds may collide differently: costs.ub_read_conflict)
    busy = {p: c for p, c in double.pipe_busy.items() if p != "VECTOR"}
    assert busy == {p: c for p, c in single.pipe_busy.items() if p != "VECTOR"}
    assert double.bytes == single.bytes
    assert double.cycles < single.cycles  # done sooner

    def overlap(report, name):
        tj = json.loads(open(report.to_chrome_trace(tmp_path / f"{name}.json")).read())
        mte2, vec = _spans(tj, "MTE2"), _spans(tj, "VECTOR")
        assert len(vec) == 16 and len(mte2) >= 32  # one Add per tile; x and y copied in per tile
        return [(m, v) for m in mte2 for v in vec if min(m[1], v[1]) > max(m[0], v[0])]

    # why: with two buffers a copy-in of the next tile runs while V adds this one...
    both = overlap(double, "double")
    assert len(both) >= 8, both
    # ...with one buffer, MTE2 waits for V to free it (V_MTE2) and V for MTE2 (MTE2_V): never both at once
    assert overlap(single, "single") == []


# ---- debug mode, printing, waves ---------------------------------------------------------------------
@asc.kernel
def _small(x, z, tiles: int):
    n = 64
    base = asc.get_block_idx() * n * tiles
    g, o = asc.GlobalTensor(), asc.GlobalTensor()
    g.set_global_buffer(x + base, n * tiles)
    o.set_global_buffer(z + base, n * tiles)
    pipe = asc.TPipe()
    qi, qo = asc.TQue(asc.TPosition.VECIN, 2), asc.TQue(asc.TPosition.VECOUT, 2)
    pipe.init_buffer(qi, 2, n * 4)
    pipe.init_buffer(qo, 2, n * 4)

    @asc.loop(tiles)
    def _(i):
        t = qi.alloc_tensor(asc.float32)
        asc.data_copy(t, g[i * n :], n)
        qi.enque(t)
        t = qi.deque(asc.float32)
        u = qo.alloc_tensor(asc.float32)
        asc.muls(u, t, 3.0, n)
        asc.adds(u, u, -1.0, n)
        asc.printf("tile %d of block %d\n", i, asc.get_block_idx())
        asc.dump_tensor(u, 7, 4)
        qo.enque(u)
        qi.free_tensor(t)
        u = qo.deque(asc.float32)
        asc.data_copy(o[i * n :], u, n)
        qo.free_tensor(u)


def test_jit_false_gives_the_same_outputs_and_cycles_and_both_print(rng, capsys):
    x = rng.uniform(-4, 4, 2 * 2 * 64).astype(np.float32)
    want = x * np.float32(3) + np.float32(-1)
    (_, zj), rj = _small[2](x, np.zeros_like(x), 2, hw=HW)
    jax.effects_barrier()
    jitted = capsys.readouterr().out
    (_, ze), re_ = _small[2](x, np.zeros_like(x), 2, hw=HW, jit=False)
    eager = capsys.readouterr().out
    np.testing.assert_array_equal(zj, want)
    np.testing.assert_array_equal(ze, zj)
    assert re_.cycles == rj.cycles and re_.pipe_busy == rj.pipe_busy and re_.bytes == rj.bytes
    for out in (jitted, eager):
        for b in range(2):
            for i in range(2):
                assert f"[block {b}] tile {i} of block {b}" in out, out
        assert out.count("DumpTensor desc=7") == 4, out
    # eager prints the dumped values themselves, in order: block 0's tile 0 first (found by its tag, not
    # by line number: under load the host's print order around it is not the test's to fix)
    first = next(line for line in eager.splitlines() if "DumpTensor desc=7" in line)
    printed = np.array(re.findall(r"-?\d+\.\d*(?:e[-+]?\d+)?", first.split(":", 1)[1]), np.float32)
    np.testing.assert_allclose(printed, want[:4], rtol=1e-6, err_msg=eager)


_RAN: list = []


@asc.kernel
def _scaled(x, z, scale: float):
    _RAN.append(scale)  # the kernel's Python ran: its plan pass, or its trace
    n = x.size
    g, o = asc.GlobalTensor(), asc.GlobalTensor()
    g.set_global_buffer(x, n)
    o.set_global_buffer(z, n)
    pipe = asc.TPipe()
    qi, qo = asc.TQue(asc.TPosition.VECIN, 1), asc.TQue(asc.TPosition.VECOUT, 1)
    pipe.init_buffer(qi, 1, n * 4)
    pipe.init_buffer(qo, 1, n * 4)
    t = qi.alloc_tensor(asc.float32)
    asc.data_copy(t, g, n)
    qi.enque(t)
    t, u = qi.deque(asc.float32), qo.alloc_tensor(asc.float32)
    asc.muls(u, t, scale, n)
    qo.enque(u)
    qi.free_tensor(t)
    u = qo.deque(asc.float32)
    asc.data_copy(o, u, n)
    qo.free_tensor(u)


def test_a_repeat_call_runs_none_of_the_kernels_python(rng):
    """The plan pass is kept with the compiled program: a repeat call (same function, statics, GM
    shapes, blocks, chip) runs no Python of the kernel's; a new static or shape plans it again."""
    _RAN.clear()
    x = rng.uniform(-4, 4, 64).astype(np.float32)
    (_, z), first = _scaled[1](x, np.zeros_like(x), 2.0, hw=HW)
    ran = len(_RAN)
    assert ran >= 2  # planned, then traced
    y = rng.uniform(-4, 4, 64).astype(np.float32)
    (_, z2), again = _scaled[1](y, np.zeros_like(y), 2.0, hw=HW)
    np.testing.assert_array_equal(z2, y * np.float32(2))
    assert len(_RAN) == ran and again.cycles == first.cycles
    (_, z3), _ = _scaled[1](y, np.zeros_like(y), 3.0, hw=HW)
    np.testing.assert_array_equal(z3, y * np.float32(3))
    assert _RAN[ran:] and set(_RAN[ran:]) == {3.0}
    ran = len(_RAN)
    w = rng.uniform(-4, 4, 128).astype(np.float32)
    (_, z4), _ = _scaled[1](w, np.zeros_like(w), 3.0, hw=HW)
    np.testing.assert_array_equal(z4, w * np.float32(3))
    assert len(_RAN) > ran  # a new GM shape: planned again


def test_more_blocks_than_cores_run_in_waves(rng):
    hw = npu_jax.presets.tiny()
    cores = hw.num_vector_cores
    x = rng.uniform(-4, 4, 2 * cores * 4 * 64).astype(np.float32)
    (_, z2), two = _small[2 * cores](x, np.zeros_like(x), 4, hw=hw)
    np.testing.assert_array_equal(z2, x * np.float32(3) + np.float32(-1))
    (_, _), one = _small[cores](x[: x.size // 2], np.zeros(x.size // 2, np.float32), 4, hw=hw)
    # a second wave starts on each core when its first block ends: twice the cores' time, after the same
    # launch (report.cycles = the launch, then the cores' time, here above the HBM time)
    assert 1.8 * one.core_end <= two.core_end <= 2.2 * one.core_end, (one.core_end, two.core_end)
    assert two.cycles - two.launch_cycles == two.core_end and one.cycles - one.launch_cycles == one.core_end


# ---- every vector call against numpy -----------------------------------------------------------------
N = 256
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum}
BINARY["min"] = np.minimum
SCALAR = {"adds": np.add, "muls": np.multiply, "maxs": np.maximum, "mins": np.minimum}
UNARY = {"abs": np.abs, "exp": np.exp, "ln": np.log, "sqrt": np.sqrt, "relu": lambda a: np.maximum(a, 0)}
OTHER = ("leaky_relu", "duplicate", "reduce_sum", "reduce_max")
ELEMENTWISE = [*BINARY, *SCALAR, *UNARY, "leaky_relu", "duplicate"]
# every RoundMode by its vendor name (CAST_NONE and CAST_RINT both), CAST_ODD aside (refused)
CASTS = [f"cast_{n}" for n in asc.RoundMode.__members__ if n != "CAST_ODD"]
MODES = [asc.RoundMode[c[len("cast_") :]] for c in CASTS]
# the transcendental calls and Div are computed in fp32 and rounded once to the destination
TRANSCENDENTAL = ("exp", "ln", "sqrt", "div")


@asc.kernel
def _every_call(pos, sgn, other, cast_src, z, zc, zr, fmt: str, scalar: float):
    dt = asc.half if fmt == "fp16" else asc.float32
    to = asc.float32 if fmt == "fp16" else asc.half  # fp16 -> fp32, fp32 -> fp16
    ub = asc.LocalMemAllocator(asc.Hardware.UB)
    a, s, b, c = (ub.alloc(asc.TPosition.VECIN, dt, N) for _ in range(4))
    out = ub.alloc(asc.TPosition.VECOUT, dt, N * len(ELEMENTWISE))
    outc = ub.alloc(asc.TPosition.VECOUT, to, N * len(CASTS))
    outr = ub.alloc(asc.TPosition.VECOUT, dt, 32)
    work = ub.alloc(asc.TPosition.VECCALC, dt, N)
    gms = [asc.GlobalTensor() for _ in range(7)]
    for g, arg in zip(gms, (pos, sgn, other, cast_src, z, zc, zr)):
        g.set_global_buffer(arg)
    for t, g in zip((a, s, b, c), gms):
        asc.data_copy(t, g, N)
    asc.set_flag(asc.HardEvent.MTE2_V, 0)
    asc.wait_flag(asc.HardEvent.MTE2_V, 0)
    for i, name in enumerate(ELEMENTWISE):
        d = out[i * N :]
        src = a if name in TRANSCENDENTAL else s
        if name in BINARY:
            getattr(asc, name)(d, src, b, N)
        elif name in SCALAR:
            getattr(asc, name)(d, src, scalar, N)
        elif name in UNARY:
            getattr(asc, name)(d, src, N)
        elif name == "leaky_relu":
            asc.leaky_relu(d, src, scalar, N)
        else:
            asc.duplicate(d, scalar, N)
    for i, mode in enumerate(MODES):
        asc.cast(outc[i * N :], c, mode, N)
    asc.duplicate(outr, 0.0, 32)
    asc.reduce_sum(outr, a, work, N)
    asc.reduce_max(outr[16:], s, work, N)
    asc.set_flag(asc.HardEvent.V_MTE3, 0)
    asc.wait_flag(asc.HardEvent.V_MTE3, 0)
    asc.data_copy(gms[4], out, N * len(ELEMENTWISE))
    asc.data_copy(gms[5], outc, N * len(CASTS))
    asc.data_copy(gms[6], outr, 32)


def _ties_and_random(rng, fmt):
    """Cast sources: random values plus exact midpoints between neighbours of the destination."""
    if fmt == "fp32":  # fp32 -> fp16: midpoints of fp16 neighbours, of both signs and parities
        h = rng.uniform(-300, 300, N // 4).astype(np.float16)
        mid = (h.astype(np.float64) + np.nextafter(h, np.float16(np.inf)).astype(np.float64)) / 2
        rest = rng.uniform(-300, 300, N - mid.size)
        return np.concatenate([mid, rest]).astype(np.float32)
    return rng.uniform(-300, 300, N).astype(np.float16)  # fp16 -> fp32: exact in every mode


@functools.cache
def _run_every_call(fmt: str):
    """One launch per dtype (one compile) for every call; fresh random data, seed printed."""
    seed = secrets.randbits(32)
    print(f"_run_every_call({fmt!r}) seed {seed}")
    rng = np.random.default_rng(seed)
    dt = np.float16 if fmt == "fp16" else np.float32
    pos = rng.uniform(0.25, 4, N).astype(dt)
    sgn = (rng.uniform(0.25, 4, N) * rng.choice([-1, 1], N)).astype(dt)
    other = (rng.uniform(0.25, 4, N) * rng.choice([-1, 1], N)).astype(dt)
    cast_src = _ties_and_random(rng, fmt)
    scalar = float(rng.uniform(-0.9, -0.1))  # not a short binary fraction: the scalar's own rounding shows
    to = np.float32 if fmt == "fp16" else np.float16
    z = np.zeros((len(ELEMENTWISE), N), dt)
    zc = np.zeros((len(CASTS), N), to)
    zr = np.zeros(32, dt)
    outs, _ = _every_call[1](pos, sgn, other, cast_src, z, zc, zr, fmt, scalar, hw=HW)
    return pos, sgn, other, cast_src, scalar, outs[4], outs[5], outs[6]


def _round_directed(x: np.ndarray, to, mode: str) -> np.ndarray:
    """x (float64) rounded to ``to`` in ``mode``, written independently of the emulator: nearest-even from
    numpy, the directed modes by stepping the nearest one toward the side the mode asks for."""
    near = x.astype(to)
    up = np.where(near.astype(np.float64) < x, np.nextafter(near, to(np.inf)), near)
    down = np.where(near.astype(np.float64) > x, np.nextafter(near, to(-np.inf)), near)
    if mode in ("CAST_NONE", "CAST_RINT"):
        return near
    if mode == "CAST_FLOOR":
        return down
    if mode == "CAST_CEIL":
        return up
    if mode == "CAST_TRUNC":
        return np.where(x >= 0, down, up)
    assert mode == "CAST_ROUND"  # nearest, ties away from zero
    tie = (up.astype(np.float64) - x) == (x - down.astype(np.float64))
    return np.where(tie & (up != down), np.where(x >= 0, up, down), near)


@pytest.mark.parametrize("fmt", ["fp16", "fp32"])
@pytest.mark.parametrize("name", ELEMENTWISE + CASTS + ["reduce_sum", "reduce_max"])
def test_each_vector_call_against_numpy(name, fmt):
    pos, sgn, other, cast_src, scalar, z, zc, zr = _run_every_call(fmt)
    dt = pos.dtype.type
    # the vendor's scalar argument is of the tensor's type T (Adds(dst, src, T scalar, n))
    s = np.float64(dt(scalar))
    src = (pos if name in TRANSCENDENTAL else sgn).astype(np.float64)
    b = other.astype(np.float64)
    if name in CASTS:
        to = zc.dtype.type
        want = _round_directed(cast_src.astype(np.float64), to, name[len("cast_") :])
        got = zc[CASTS.index(name)]
        bits = np.uint16 if to is np.float16 else np.uint32
        np.testing.assert_array_equal(got.view(bits), want.view(bits), err_msg=name)
        return
    if name == "reduce_sum":
        exact = pos.astype(np.float64).sum()
        # pairwise in the vector unit: fp32's or fp16's accumulated rounding, nowhere near a wrong sum
        np.testing.assert_allclose(float(zr[0]), exact, rtol=1e-6 if fmt == "fp32" else 4e-3)
        assert np.all(zr[1:16] == 0)
        return
    if name == "reduce_max":
        assert zr[16] == sgn.max() and np.all(zr[17:] == 0)
        return
    got = z[ELEMENTWISE.index(name)]
    if name in BINARY:
        exact = BINARY[name](src, b)
    elif name in SCALAR:
        exact = SCALAR[name](src, s)
    elif name in UNARY:
        exact = UNARY[name](src)
    elif name == "leaky_relu":
        exact = np.where(src >= 0, src, src * s)
    else:
        exact = np.full(N, s)
    if name in ("exp", "ln"):  # to fp32's accuracy (a couple of ulp), then one rounding to the destination
        np.testing.assert_allclose(got.astype(np.float64), exact, rtol=np.finfo(dt).eps)
    elif name in ("div", "sqrt") and fmt == "fp16":  # fp32 result, rounded once more to fp16
        np.testing.assert_allclose(got.astype(np.float64), exact, rtol=np.finfo(dt).eps / 2)
    else:  # IEEE: the exact result rounded once to the destination
        np.testing.assert_array_equal(got, exact.astype(dt), err_msg=name)


@asc.kernel
def _cast_to(x, z, dst: str, mode: asc.RoundMode):
    ub = asc.LocalMemAllocator(asc.Hardware.UB)
    a = ub.alloc(asc.TPosition.VECIN, asc.float32, N)
    c = ub.alloc(asc.TPosition.VECOUT, asc.int32 if dst == "int32" else asc.half, N)
    xg, zg = asc.GlobalTensor(), asc.GlobalTensor()
    xg.set_global_buffer(x)
    zg.set_global_buffer(z)
    asc.data_copy(a, xg, N)
    asc.set_flag(asc.HardEvent.MTE2_V, 0)
    asc.wait_flag(asc.HardEvent.MTE2_V, 0)
    asc.cast(c, a, mode, N)
    asc.set_flag(asc.HardEvent.V_MTE3, 0)
    asc.wait_flag(asc.HardEvent.V_MTE3, 0)
    asc.data_copy(zg, c, N)


def test_cast_odd_rounds_to_odd(rng):
    x = rng.uniform(-9, 9, N).astype(np.float32)
    x[:2] = [1.0, np.float32(np.float16(3.5))]  # exact in half: kept as they are
    outs, _ = _cast_to[1](x, np.zeros(N, np.float16), "fp16", asc.RoundMode.CAST_ODD, hw=HW)
    # independently: toward zero in float64, then the last bit set where that was inexact
    t = np.float16(np.sign(x) * np.abs(x)).astype(np.float64)  # nearest, then step toward zero if past
    t = np.where(
        np.abs(t) > np.abs(x), np.nextafter(t.astype(np.float16), np.float16(0)).astype(np.float64), t
    )
    bits = t.astype(np.float16).view(np.uint16) | (t != x).astype(np.uint16)
    np.testing.assert_array_equal(np.asarray(outs[1]).view(np.uint16), bits)


@pytest.mark.parametrize(
    "mode, rule",
    [
        (asc.RoundMode.CAST_RINT, np.rint),
        (asc.RoundMode.CAST_TRUNC, np.trunc),
        (asc.RoundMode.CAST_FLOOR, np.floor),
        (asc.RoundMode.CAST_CEIL, np.ceil),
    ],
)
def test_cast_to_int32_rounds_by_its_mode(rng, mode, rule):
    x = rng.uniform(-9, 9, N).astype(np.float32)
    x[:4] = [2.5, -2.5, 3.5, -0.5]  # ties
    outs, _ = _cast_to[1](x, np.zeros(N, np.int32), "int32", mode, hw=HW)
    np.testing.assert_array_equal(np.asarray(outs[1]), rule(x).astype(np.int32))

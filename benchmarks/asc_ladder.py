"""A user's kernel at a network's sizes: first call, repeat call and jnp's time for the same work.

Six ``npu_jax.asc`` kernels, each written as a user writes one (TPipe, queues, a TBuf of temporaries,
double buffered, split over the vector cores), at 64 K, 1 M and 4 M elements on the 910B preset:

* ``add``: z = x + y, fp16 (the vendor's AddCustom);
* ``gelu``: the tanh GELU, fp32, 9 vector ops a tile through a TBuf of temporaries;
* ``reduce_sum``: each block's sum of its part, fp32, tiles accumulated then reduced;
* ``cast_add``: bf16 x, y cast to fp32, added, cast back (round to nearest even);
* ``softmax``: a row softmax over 1024 columns, fp32 (``asc.softmax``);
* ``matmul``: C = A @ B + bias on the Cube (the high-level ``asc.Matmul``), fp16, K 256, C of the size.

Each (kernel, size, checks) is measured in a fresh Python process (so the first call is the kernel's
own trace and compile, not the import), with JAX's persistent compilation cache off: the first call,
the second (the whole program again, while the outputs' own program compiles in the background:
``npu_jax.core.run``'s values apart), when that program is ready (seconds from the second call's
start), the best of 3 repeat calls on new data after it (values checked against numpy), and the best
of 5 calls of the same work as one jitted jnp function on the same host; the ratio is repeat / jnp.

    python benchmarks/asc_ladder.py [--sizes 65536,1048576,4194304] [--kernels add,gelu,...]
        [--checks none,all]
    python benchmarks/asc_ladder.py --sizes 1048576 --compare   # beside: every call the whole program
    python benchmarks/asc_ladder.py --profile add:1048576 --checks none   # where a repeat call goes
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

BLOCKS = 32  # vector cores used (the 910B has 40; 32 divides every size)
SIZES = (1 << 16, 1 << 20, 1 << 22)
KERNELS = ("add", "gelu", "reduce_sum", "cast_add", "softmax", "matmul")


# ---- the kernels ---------------------------------------------------------------------------------
def _kernels():
    from npu_jax import asc

    def vector_kernel(body, n_in: int, n_tmp: int, dt_in, dt_tmp=None):
        """A double-buffered elementwise kernel: ``n_in`` inputs of ``dt_in``, one output, ``n_tmp``
        temporaries of ``dt_tmp`` in a TBuf; ``body(out, ins, tmps, tile)`` computes one tile."""

        def impl(gm, n, tile, used, buffer_num):
            if used and asc.get_block_idx() >= used:  # the blocks a tiling leaves idle
                return
            per = n // (used or asc.get_block_num())
            tiles = per // tile
            base = asc.get_block_idx() * per
            g = [asc.GlobalTensor() for _ in gm]
            for t, a in zip(g, gm):
                t.set_global_buffer(a + base, per)
            pipe = asc.TPipe()
            qin = [asc.TQue(asc.TPosition.VECIN, buffer_num) for _ in range(n_in)]
            qout = asc.TQue(asc.TPosition.VECOUT, buffer_num)
            for q in qin:
                pipe.init_buffer(q, buffer_num, tile * dt_in.sizeof())
            pipe.init_buffer(qout, buffer_num, tile * dt_in.sizeof())
            tmp = asc.TBuf(asc.TPosition.VECCALC)
            if n_tmp:
                pipe.init_buffer(tmp, n_tmp * tile * (dt_tmp or dt_in).sizeof())

            @asc.loop(tiles)
            def _(i):
                for q, src in zip(qin, g[:n_in]):
                    t = q.alloc_tensor(dt_in)
                    asc.data_copy(t, src[i * tile :], tile)
                    q.enque(t)
                ins = [q.deque(dt_in) for q in qin]
                out = qout.alloc_tensor(dt_in)
                tt = tmp.get(dt_tmp or dt_in) if n_tmp else None
                tmps = [tt[j * tile :] for j in range(n_tmp)] if n_tmp else []
                body(out, ins, tmps, tile)
                qout.enque(out)
                for q, t in zip(qin, ins):
                    q.free_tensor(t)
                out = qout.deque(dt_in)
                asc.data_copy(g[n_in][i * tile :], out, tile)
                qout.free_tensor(out)

        # ``used``: the blocks that work (0: every block launched); ``buffer_num``: the queues' depth
        if n_in == 1:
            return asc.kernel(
                lambda x, z, n, tile, used=0, buffer_num=2: impl((x, z), n, tile, used, buffer_num)
            )
        return asc.kernel(
            lambda x, y, z, n, tile, used=0, buffer_num=2: impl((x, y, z), n, tile, used, buffer_num)
        )

    def add(out, ins, tmps, tile):
        asc.add(out, ins[0], ins[1], tile)

    c = float(np.sqrt(2 / np.pi))

    def gelu(out, ins, t, tile):
        x = ins[0]
        asc.mul(t[0], x, x, tile)  # x^2
        asc.mul(t[0], t[0], x, tile)  # x^3
        asc.muls(t[0], t[0], 0.044715, tile)
        asc.add(t[0], t[0], x, tile)  # x + 0.044715 x^3
        asc.muls(t[0], t[0], -2 * c, tile)  # -2u
        asc.exp(t[0], t[0], tile)  # exp(-2u)
        asc.adds(t[0], t[0], 1.0, tile)
        asc.reciprocal(t[0], t[0], tile)  # (1 + tanh u) / 2 = 1 / (1 + exp(-2u))
        asc.mul(out, x, t[0], tile)

    def cast_add(out, ins, t, tile):
        asc.cast(t[0], ins[0], asc.RoundMode.CAST_NONE, tile)
        asc.cast(t[1], ins[1], asc.RoundMode.CAST_NONE, tile)
        asc.add(t[0], t[0], t[1], tile)
        asc.cast(out, t[0], asc.RoundMode.CAST_RINT, tile)

    @asc.kernel
    def reduce_sum(x, y, n: int, tile: int):
        per = n // asc.get_block_num()
        tiles = per // tile
        xg, yg = asc.GlobalTensor(), asc.GlobalTensor()
        xg.set_global_buffer(x + asc.get_block_idx() * per, per)
        yg.set_global_buffer(y + asc.get_block_idx() * 8, 8)
        pipe = asc.TPipe()
        qin = asc.TQue(asc.TPosition.VECIN, 2)
        pipe.init_buffer(qin, 2, tile * 4)
        acc_b, work_b = asc.TBuf(asc.TPosition.VECCALC), asc.TBuf(asc.TPosition.VECCALC)
        pipe.init_buffer(acc_b, tile * 4)
        pipe.init_buffer(work_b, tile * 4)
        acc, work = acc_b.get(asc.float32), work_b.get(asc.float32)
        asc.duplicate(acc, 0.0, tile)

        @asc.loop(tiles)
        def _(i):
            t = qin.alloc_tensor(asc.float32)
            asc.data_copy(t, xg[i * tile :], tile)
            qin.enque(t)
            t = qin.deque(asc.float32)
            asc.add(acc, acc, t, tile)
            qin.free_tensor(t)

        asc.reduce_sum(work, acc, work, tile)
        asc.set_flag(asc.HardEvent.V_MTE3, 0)
        asc.wait_flag(asc.HardEvent.V_MTE3, 0)
        asc.data_copy(yg, work, 8)

    @asc.kernel(core="cube")
    def matmul(a, b, bias, c, tiling: asc.TCubeTiling):
        t = tiling
        blk = asc.get_block_idx()
        ag, bg, biasg, cg = (asc.GlobalTensor() for _ in range(4))
        ag.set_global_buffer(a + blk * t.single_core_m * t.k)
        bg.set_global_buffer(b)
        biasg.set_global_buffer(bias)
        cg.set_global_buffer(c + blk * t.single_core_m * t.n)
        mm = asc.Matmul(asc.TPipe(), t, c_dtype=asc.float32)
        mm.set_tensor_a(ag)
        mm.set_tensor_b(bg)
        mm.set_bias(biasg)
        mm.iterate_all(cg)
        mm.end()

    import softmax as sm  # examples/asc/softmax.py

    return {
        "add": vector_kernel(add, 2, 0, asc.half),
        "gelu": vector_kernel(gelu, 1, 1, asc.float32),
        "cast_add": vector_kernel(cast_add, 2, 2, asc.bfloat16, asc.float32),
        "reduce_sum": reduce_sum,
        "softmax": sm.softmax_rows,
        "matmul": matmul,
    }


# ---- one measurement (in the child process) --------------------------------------------------------
def _case(name: str, n: int, rng):
    """(launch(inputs) -> (outputs, report), new inputs(), check(inputs, outputs), jnp function of inputs)."""
    import jax
    import jax.numpy as jnp

    import npu_jax
    from npu_jax import asc

    hw = npu_jax.presets.ascend910b()
    k = _kernels()[name]
    tile = min(4096, n // BLOCKS)
    if name == "add":
        new = lambda: [rng.uniform(-8, 8, n).astype(np.float16) for _ in range(2)]  # noqa: E731
        run = lambda ins, ck: k[BLOCKS](*ins, np.zeros(n, np.float16), n, tile, hw=hw, checks=ck)  # noqa: E731
        ref = lambda ins: ins[0] + ins[1]  # noqa: E731
        jf = lambda x, y: x + y  # noqa: E731
        tol = 0
    elif name == "gelu":
        tile = min(2048, tile)
        new = lambda: [rng.uniform(-4, 4, n).astype(np.float32)]  # noqa: E731
        run = lambda ins, ck: k[BLOCKS](*ins, np.zeros(n, np.float32), n, tile, hw=hw, checks=ck)  # noqa: E731
        ref = lambda ins: jax.nn.gelu(ins[0].astype(np.float64), approximate=True)  # noqa: E731
        jf = lambda x: jax.nn.gelu(x, approximate=True)  # noqa: E731
        tol = 1e-5
    elif name == "cast_add":
        tile = min(2048, tile)
        new = lambda: [rng.uniform(-8, 8, n).astype(jnp.bfloat16) for _ in range(2)]  # noqa: E731
        run = lambda ins, ck: k[BLOCKS](*ins, np.zeros(n, jnp.bfloat16), n, tile, hw=hw, checks=ck)  # noqa: E731
        ref = lambda ins: (ins[0].astype(np.float32) + ins[1].astype(np.float32)).astype(jnp.bfloat16)  # noqa: E731
        jf = lambda x, y: (x.astype(jnp.float32) + y.astype(jnp.float32)).astype(jnp.bfloat16)  # noqa: E731
        tol = 0
    elif name == "reduce_sum":
        new = lambda: [rng.uniform(-1, 1, n).astype(np.float32)]  # noqa: E731
        run = lambda ins, ck: k[BLOCKS](*ins, np.zeros(8 * BLOCKS, np.float32), n, tile, hw=hw, checks=ck)  # noqa: E731

        def ref(ins):
            return ins[0].astype(np.float64).reshape(BLOCKS, -1).sum(1)

        jf = lambda x: jnp.sum(x.reshape(BLOCKS, -1), axis=1)  # noqa: E731
        tol = 1e-3
    elif name == "softmax":
        cols, rows = 1024, n // 1024
        tile_rows = max(1, min(8, rows // BLOCKS))
        new = lambda: [rng.uniform(-4, 4, (rows, cols)).astype(np.float32)]  # noqa: E731

        def run(ins, ck):
            return k[BLOCKS](
                *ins, np.zeros((rows, cols), np.float32), rows, cols, tile_rows, hw=hw, checks=ck
            )

        ref = lambda ins: jax.nn.softmax(ins[0].astype(np.float64), axis=-1)  # noqa: E731
        jf = lambda x: jax.nn.softmax(x, axis=-1)  # noqa: E731
        tol = 1e-6
    elif name == "matmul":
        side = int(np.sqrt(n))
        K, blocks = 256, 16
        sm = side // blocks
        t = asc.TCubeTiling(side, side, K, sm, side, K, sm, min(side, 128), 64)
        new = lambda: [  # noqa: E731
            rng.integers(-4, 5, (side, K)).astype(np.float16),
            rng.integers(-4, 5, (K, side)).astype(np.float16),
            rng.integers(-50, 51, side).astype(np.float32),
        ]

        def run(ins, ck):
            return k[blocks](*ins, np.zeros((side, side), np.float32), t, hw=hw, checks=ck)

        ref = lambda ins: ins[0].astype(np.float64) @ ins[1].astype(np.float64) + ins[2]  # noqa: E731
        jf = lambda a, b, bias: jnp.dot(a, b, preferred_element_type=jnp.float32) + bias  # noqa: E731
        tol = 0
    else:
        raise ValueError(f"unknown kernel {name!r}; one of {KERNELS}")

    def check(ins, outs):
        want = np.asarray(ref(ins), np.float64)
        got = np.asarray(outs[-1], np.float64)
        got = got.reshape(BLOCKS, 8)[:, 0] if name == "reduce_sum" else got.reshape(want.shape)
        assert np.allclose(got, want, rtol=tol, atol=tol), (name, np.abs(got - want).max())

    return run, new, check, jax.jit(jf)


def measure_here(name: str, n: int, checks: str) -> dict:
    import jax

    from npu_jax.core import programs

    rng = np.random.default_rng(0)
    run, new, check, jf = _case(name, n, rng)
    ins = new()
    t0 = time.perf_counter()
    outs, rep = run(ins, checks)
    first = time.perf_counter() - t0
    check(ins, outs)
    # the second call runs the whole program again and starts compiling the outputs' own program in
    # the background (npu_jax.core.run, values_apart); the repeat calls are timed once it is ready
    ins = new()
    t0 = time.perf_counter()
    outs, _ = run(ins, checks)
    second = time.perf_counter() - t0
    check(ins, outs)
    programs.wait_compiled()
    ready = time.perf_counter() - t0
    reps = []
    for _ in range(3):
        ins = new()
        t0 = time.perf_counter()
        outs, _ = run(ins, checks)
        reps.append(time.perf_counter() - t0)
        check(ins, outs)
    jax.block_until_ready(jf(*ins))
    jt = []
    for _ in range(5):
        ins = new()
        t0 = time.perf_counter()
        jax.block_until_ready(jf(*ins))
        jt.append(time.perf_counter() - t0)
    return {
        "first": first,
        "second": second,
        "ready": ready,
        "repeat": min(reps),
        "jnp": min(jt),
        "cycles": int(rep.cycles),
    }


def profile_here(name: str, n: int, checks: str, top: int = 15) -> None:
    """Where a repeat call's time goes: XLA's own profile (``jax.profiler``) of two repeat calls, the
    ops by their total time per call (the loop over the cores is a ``while``; a fusion's name says
    what it fuses)."""
    import collections
    import glob
    import gzip
    import tempfile

    import jax

    from npu_jax.core import programs

    rng = np.random.default_rng(0)
    run, new, _, _ = _case(name, n, rng)
    for _ in range(2):  # the second call starts the outputs' own program compiling (values apart)
        run(new(), checks)
    programs.wait_compiled()
    run(new(), checks)  # a repeat call: what is profiled below
    with tempfile.TemporaryDirectory() as d:
        jax.profiler.start_trace(d, create_perfetto_trace=True)
        for _ in range(2):
            run(new(), checks)
        jax.profiler.stop_trace()
        path = sorted(glob.glob(os.path.join(d, "**", "*.trace.json.gz"), recursive=True))[-1]
        events = json.load(gzip.open(path))
    events = events["traceEvents"] if isinstance(events, dict) else events
    total, count = collections.Counter(), collections.Counter()
    for e in events:
        if e.get("ph") == "X" and not e["name"].startswith(("$", "ThunkExecutor", "Pjit", "Common")):
            total[e["name"]] += e.get("dur", 0)
            count[e["name"]] += 1
    print(f"{name} at {n:,} elements, checks={checks}: XLA ops by time per repeat call")
    for op, us in total.most_common(top):
        print(f"  {us / 2e3:8.2f} ms  {count[op] // 2:6d} x  {op}")


def measure(name: str, n: int, checks: str, whole: bool = False) -> dict:
    """One case in a fresh process; ``whole``: every call runs the whole program (the outputs never
    computed apart: ``npu_jax.core.run.VALUES_APART_BYTES`` past any size)."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    code = (
        f"import sys, json; sys.path[:0] = [{here!r}, {os.path.join(root, 'examples', 'asc')!r}]; "
        + ("from npu_jax.core import run; run.VALUES_APART_BYTES = 1 << 62; " if whole else "")
        + f"import asc_ladder; print(json.dumps(asc_ladder.measure_here({name!r}, {n}, {checks!r})))"
    )
    env = {**os.environ, "NPU_JAX_CACHE_DIR": "off"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if out.returncode:
        raise RuntimeError(f"{name} at {n}, checks={checks}:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="elements, comma-separated")
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--checks", default="none,all", help="sanitizer settings, comma-separated")
    ap.add_argument("--profile", metavar="KERNEL:SIZE", help="print XLA's profile of one case's repeat call")
    ap.add_argument(
        "--compare",
        action="store_true",
        help="each case also with every call the whole program, side by side",
    )
    a = ap.parse_args(argv)
    if a.profile:
        name, size = a.profile.split(":")
        sys.path.insert(
            0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "asc")
        )
        for ck in a.checks.split(","):
            profile_here(name, int(size), ck)
        return
    sizes = [int(s) for s in a.sizes.split(",")]
    print(
        f"{'kernel':<11} {'elements':>9} {'checks':<6} {'first s':>8} {'second ms':>10} {'ready s':>8} "
        f"{'repeat ms':>10} {'jnp ms':>8} {'ratio':>8}"
    )
    for name in a.kernels.split(","):
        for n in sizes:
            for ck in a.checks.split(","):
                r = measure(name, n, ck)
                if a.compare:
                    w = measure(name, n, ck, whole=True)
                    print(
                        f"{name:<11} {n:>9,} {ck:<6} {w['first']:>8.2f} {w['second'] * 1e3:>10.1f} {'whole':>8} "
                        f"{w['repeat'] * 1e3:>10.1f} {w['jnp'] * 1e3:>8.2f} {w['repeat'] / w['jnp']:>7.0f}x",
                        flush=True,
                    )
                print(
                    f"{name:<11} {n:>9,} {ck:<6} {r['first']:>8.2f} {r['second'] * 1e3:>10.1f} {r['ready']:>8.2f} "
                    f"{r['repeat'] * 1e3:>10.1f} "
                    f"{r['jnp'] * 1e3:>8.2f} {r['repeat'] / r['jnp']:>7.0f}x",
                    flush=True,
                )


if __name__ == "__main__":
    main()

"""Time the emulated GEMM against plain XLA, and its compile time against the tile count.

Prints, in one run:

(a) wall time after compile (best of 3) of a 2048^3 fp16 GEMM emulated by ``npu_jax.matmul``
    under ``jax.jit`` on the 910B preset (default tiling, and the same tiling on one core), of
    ``jnp.dot`` on the same inputs cast to fp32 at precision=HIGHEST, and of a bare
    ``lax.fori_loop`` of 128x64 @ 64x256 fp32 tile dots (the L0 tile the emulator's Mmad works on,
    same FLOP count): the floor an L0-tile-sized emulation can reach on this CPU. Target: emulated /
    jnp.dot <= 2.
(b) trace + lower + compile time of the emulated GEMM at 1x and 4x the tile count with the same
    MatmulTiling (fresh function objects, so nothing is cached). Target: 4x / 1x <= 1.3, because tile
    loops are ``lax.fori_loop``s and compile time must not grow with the number of tiles.
(c) the emulated 2048^3 GEMM's cycles, % of peak and bottleneck on the 910B preset.

Run:  python benchmarks/bench_gemm.py          (about a minute on a laptop CPU)
      python benchmarks/bench_gemm.py --quick  (smaller sizes, a few seconds)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np
from _timing import best_of  # noqa: E402  (benchmarks/ is on sys.path when run as a script)
from jax import lax

import npu_jax
from npu_jax.mapping.gemm import default_tiling

HIGHEST = lax.Precision.HIGHEST
TILE = (128, 64, 256)  # (m, k, n) of one Mmad at the 910B default tiling


def emulated(hw, tiling):
    return jax.jit(lambda a, b: npu_jax.matmul(a, b, hw=hw, tiling=tiling))


def xla_dot(a, b):
    return jnp.dot(a.astype(jnp.float32), b.astype(jnp.float32), precision=HIGHEST)


def tile_loop(a, b):
    """A plain tiled GEMM: one fori_loop step per 128x64 @ 64x256 fp32 dot, accumulated per block."""
    (M, K), N = a.shape, b.shape[1]
    tm, tk, tn = TILE
    a, b = a.astype(jnp.float32), b.astype(jnp.float32)
    nbn, nk = N // tn, K // tk

    def block(i, c):
        bm, bn = i // nbn, i % nbn

        def kstep(kk, acc):
            at = lax.dynamic_slice(a, (bm * tm, kk * tk), (tm, tk))
            bt = lax.dynamic_slice(b, (kk * tk, bn * tn), (tk, tn))
            return acc + jnp.dot(at, bt, precision=HIGHEST)

        acc = lax.fori_loop(0, nk, kstep, jnp.zeros((tm, tn), jnp.float32))
        return lax.dynamic_update_slice(c, acc, (bm * tm, bn * tn))

    return lax.fori_loop(0, (M // tm) * nbn, block, jnp.zeros((M, N), jnp.float32))


def compile_seconds(hw, tiling, M, N, K) -> tuple[float, float]:
    """(trace + lower, compile) seconds of a fresh jitted emulated GEMM."""
    f = jax.jit(lambda a, b: npu_jax.matmul(a, b, hw=hw, tiling=tiling))  # fresh: no cache hit
    a = jax.ShapeDtypeStruct((M, K), jnp.float16)
    b = jax.ShapeDtypeStruct((K, N), jnp.float16)
    t0 = time.perf_counter()
    lowered = f.lower(a, b)
    t1 = time.perf_counter()
    lowered.compile()
    return t1 - t0, time.perf_counter() - t1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller sizes (512^3; 256 vs 512 compile)")
    args = p.parse_args(argv)
    n = 512 if args.quick else 2048
    small = (256, 256, 256) if args.quick else (512, 512, 512)
    big = (2 * small[0], 2 * small[1], small[2])

    hw = npu_jax.presets.ascend910b()
    print(
        f"jax {jax.__version__} on {jax.default_backend()} ({platform.processor() or platform.machine()},"
        f" {os.cpu_count()} CPUs); preset {hw.name}"
    )

    # ---- (a) run time ------------------------------------------------------------------------
    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal((n, n)).astype(np.float16))
    b = jnp.asarray(rng.standard_normal((n, n)).astype(np.float16))
    tiling = default_tiling(n, n, n, hw)
    rows, report = [], None
    for label, fn in [
        (f"emulated matmul, {hw.name} default tiling", emulated(hw, tiling)),
        ("emulated matmul, same tiling, cores=1", emulated(hw, dataclasses.replace(tiling, cores=1))),
        ("jnp.dot fp32 HIGHEST", jax.jit(xla_dot)),
        ("bare fori_loop of 128x64 @ 64x256 dots", jax.jit(tile_loop)),
    ]:
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn(a, b))
        first = time.perf_counter() - t0
        best, out = best_of(fn, a, b)
        if report is None:
            report = out[1]
        rows.append((label, first, best))
    ref = rows[2][2]
    print(f"\n(a) GEMM {n}x{n}x{n} fp16, wall time after compile (best of 3); tiling {tiling}")
    print(f"  {'':44}{'1st call s':>11}{'best s':>9}{'/ jnp.dot':>11}")
    for label, first, best in rows:
        print(f"  {label:<44}{first:>11.3f}{best:>9.3f}{best / ref:>10.2f}x")
    print("  target: emulated / jnp.dot <= 2")

    # ---- (b) compile time vs tile count ------------------------------------------------------
    ctile = default_tiling(*small, hw)
    compile_seconds(hw, ctile, 64, 64, 64)  # warm-up: one-off backend and lowering-rule costs
    times = {}
    for _ in range(3):  # interleaved, best of 3 each: compile times are noisy
        for shape in (small, big):
            lo, co = compile_seconds(hw, ctile, *shape)
            if shape not in times or lo + co < sum(times[shape]):
                times[shape] = (lo, co)
    print(f"\n(b) trace+lower and compile time, same tiling {ctile}")
    print(f"  {'GEMM':<18}{'blocks':>7}{'lower s':>9}{'compile s':>11}{'total s':>9}")
    for (M, N, K), (lo, co) in times.items():
        blocks = -(-M // ctile.m) * -(-N // ctile.n)
        print(f"  {f'{M}x{N}x{K}':<18}{blocks:>7}{lo:>9.3f}{co:>11.3f}{lo + co:>9.3f}")
    ratio = sum(times[big]) / sum(times[small])
    print(f"  4x tiles / 1x tiles: {ratio:.2f}   (target <= 1.3)")

    # ---- (c) what the emulated machine did ---------------------------------------------------
    print(f"\n(c) emulated GEMM {n}x{n}x{n} on {hw.name} ({report.n_cores} cores)")
    print(
        f"  cycles {report.cycles:,} ({report.time_us:,.1f} us at {hw.clock_ghz} GHz), "
        f"{report.pct_peak:.1f}% of peak, bottleneck {report.bottleneck}, {report.roofline}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A tiling sweep of a user's kernel, timing only: 100 base-block configs of the Matmul + bias kernel
(or 108 configs of the tiled GELU).

The kernel is ``benchmarks/asc_ladder.py``'s (the high-level ``asc.Matmul``, C = A @ B + bias, fp16 in,
fp32 out, 8 blocks on the 910B preset: 128 rows of C each) at 1024 x 1024 x 256. The space is every base block
``baseM`` in (16, 32, 64, 128) x ``baseN`` in (16, 32, 64, 128, 256) x ``baseK`` in (16, 32, 64, 128,
256): 100 ``TCubeTiling`` values, searched exactly by ``npu_jax.search.kernel_search`` (each priced
timing-only; those the chip refuses kept with their reason). Prints the wall time, the time a config,
the pick and its verified run.

With ``--autotune`` the same 100 tilings are the configs of ``@asc.autotune`` on the same kernel: its
first call prices every config, runs the fastest on the data and keeps it; the pick's cycles are then
checked against the compiled program's own (``board=False``).

With ``--kernel gelu`` the kernel is the ladder's tanh GELU (fp32, 9 vector ops a tile through a TBuf)
on 1 M elements launched on 32 blocks, under ``@asc.autotune`` over the blocks that work (``used`` in
1, 2, 4, 8, 16, 32), the tile (256 to 8,192 elements) and the queues' depth (``buffer_num`` 1, 2, 3): 108
configs, the pick run on the data, checked against the reference and against its compiled program's
cycles (``board=False``).

Every config is priced on the timing Board (``npu_jax/core/board.py``: numpy clocks, nothing
compiled); the pick's verifying run compiles its one program.

    python benchmarks/kernel_sweep.py [--side 1024] [--k 256] [--autotune] [--kernel gelu]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path[:0] = [
    os.path.dirname(os.path.abspath(__file__)),
    os.path.join(os.path.dirname(__file__), "..", "examples", "asc"),
]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--side", type=int, default=1024, help="M = N")
    ap.add_argument("--k", type=int, default=256, help="K")
    ap.add_argument("--autotune", action="store_true", help="the configs of @asc.autotune instead")
    ap.add_argument("--kernel", choices=("matmul", "gelu"), default="matmul")
    a = ap.parse_args(argv)
    if a.kernel == "gelu":
        return gelu_sweep()

    import asc_ladder

    import npu_jax
    from npu_jax import asc

    kern = asc_ladder._kernels()["matmul"]
    side, k, blocks = a.side, a.k, 8
    sm = side // blocks
    space = {
        "tiling": [
            asc.TCubeTiling(side, side, k, sm, side, k, bm, bn, bk)
            for bm in (16, 32, 64, 128)
            for bn in (16, 32, 64, 128, 256)
            for bk in (16, 32, 64, 128, 256)
        ]
    }
    rng = np.random.default_rng(0)
    args = (
        rng.integers(-4, 5, (side, k)).astype(np.float16),
        rng.integers(-4, 5, (k, side)).astype(np.float16),
        rng.integers(-50, 51, side).astype(np.float32),
        np.zeros((side, side), np.float32),
    )
    hw = npu_jax.presets.ascend910b()
    want = args[0].astype(np.float64) @ args[1].astype(np.float64) + args[2]
    if a.autotune:
        tuned = asc.autotune(configs=[{"tiling": t} for t in space["tiling"]])(kern)
        t0 = time.perf_counter()
        outs, rep = tuned[blocks](*args, hw=hw)
        wall = time.perf_counter() - t0
        timings = tuned.timings()
        refused = sum(not isinstance(c, int) for _, c in timings)
        t = tuned.best_config()["tiling"]
        _, emu = asc.launch(kern, blocks, *args, t, hw=hw, board=False)
        print(
            f"autotune: {len(timings)} configs ({refused} refused) priced and the pick run in {wall:.1f} s: "
            f"{wall / len(timings):.2f} s a config"
        )
        print(
            f"pick: base {t.base_m} x {t.base_n} x {t.base_k}, {int(rep.cycles):,} cycles (the compiled "
            f"program's: {int(emu.cycles):,})"
        )
        assert int(rep.cycles) == int(emu.cycles), "the Board's cycles against the emulator's"
        assert np.array_equal(np.asarray(outs[3], np.float64), want), "the pick's output"
        return
    t0 = time.perf_counter()
    r = npu_jax.search.kernel_search(kern, blocks, *args, space=space, hw=hw)
    wall = time.perf_counter() - t0
    t = r.best["tiling"]
    refused = sum(not isinstance(c, int) for _, c in r.priced)
    print(
        f"{len(r.priced)} configs priced ({refused} refused) in {wall:.1f} s: {wall / len(r.priced):.2f} s a config"
    )
    print(
        f"pick: base {t.base_m} x {t.base_n} x {t.base_k}, {r.cycles:,} cycles (its full run: {int(r.report.cycles):,})"
    )
    assert np.array_equal(np.asarray(r.outputs[3], np.float64), want), "the pick's output"


def gelu_sweep(n: int = 1 << 20, blocks: int = 32) -> None:
    """``--kernel gelu``: 108 configs of the ladder's GELU under ``@asc.autotune``, the pick verified."""
    import asc_ladder
    import jax

    import npu_jax
    from npu_jax import asc

    kern = asc_ladder._kernels()["gelu"]
    configs = [
        {"tile": t, "used": u, "buffer_num": b}
        for u in (1, 2, 4, 8, 16, 32)
        for t in (256, 512, 1024, 2048, 4096, 8192)
        for b in (1, 2, 3)
    ]
    tuned = asc.autotune(configs=configs, key=["n"])(kern)
    x = np.random.default_rng(0).uniform(-4, 4, n).astype(np.float32)
    hw = npu_jax.presets.ascend910b()
    t0 = time.perf_counter()
    (_, z), rep = tuned[blocks](x, np.zeros(n, np.float32), n, hw=hw)
    wall = time.perf_counter() - t0
    timings = tuned.timings(n)
    refused = sum(not isinstance(c, int) for _, c in timings)
    best = tuned.best_config(n)
    tuned_args = (best["tile"], best["used"], best["buffer_num"])
    _, emu = asc.launch(kern, blocks, x, np.zeros(n, np.float32), n, *tuned_args, hw=hw, board=False)
    print(
        f"autotune: {len(timings)} configs ({refused} refused) priced and the pick run in {wall:.1f} s: "
        f"{wall / len(timings):.2f} s a config"
    )
    print(
        f"pick: {asc.tune.label(best)}, {int(rep.cycles):,} cycles (the compiled program's: {int(emu.cycles):,})"
    )
    assert int(rep.cycles) == int(emu.cycles), "the Board's cycles against the emulator's"
    want = np.asarray(jax.nn.gelu(x.astype(np.float64), approximate=True))
    assert np.max(np.abs(np.asarray(z, np.float64) - want)) < 1e-5, "the pick's output"


if __name__ == "__main__":
    main()

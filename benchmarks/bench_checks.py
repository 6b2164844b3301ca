"""What the sanitizers cost: each kernel with checks off and on, side by side.

For a GEMM and a Conv2D (img2col, with its relayout kernel) on a preset, prints per ``checks``
setting ("none", each check alone, "all", and "all" with the analysis inline in the kernel's
program):

* compile: trace + lower + XLA compile of the jitted kernel, in CPU seconds of this process
  (steadier than wall time on a shared machine),
* run: best-of-3 wall time of the compiled kernel,
* analysis: the log analysis that turns the run's events into findings (a separate program,
  compiled once per shape and reused: its first compile is shown apart),

and the ratio to "none". The analysis compile is paid once per process and log shape; the
kernel's compile is paid per kernel.

Run:  python benchmarks/bench_checks.py            (910B preset, ResNet-like layer; a few minutes)
      python benchmarks/bench_checks.py --quick    (tiny preset, small shapes; about a minute)
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np
from _timing import best_of  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

import npu_jax
from npu_jax.core import sanitize
from npu_jax.hw import presets

SETTINGS = ["none", "synccheck", "racecheck", "memcheck", "initcheck", "all", "all (inline)"]


def _checks(name: str):
    if name == "all (inline)":
        return sanitize.Checks(frozenset(sanitize.CHECK_NAMES), inline=True)
    return sanitize.Checks.parse(name)


def measure(make, args, name: str) -> dict:
    fn = jax.jit(make(_checks(name)))
    c0 = time.process_time()
    compiled = fn.lower(*args).compile()
    compile_s = time.process_time() - c0
    run_s, out = best_of(compiled, *args)
    rep = out[1]
    t0 = time.perf_counter()
    found = sanitize.all_findings(rep)  # first call may compile the analysis
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    sanitize.all_findings(rep)
    again = time.perf_counter() - t0
    assert not found, [f.message() for f in found]
    return {
        "compile": compile_s,
        "run": run_s,
        "analysis": again,
        "analysis_first": first,
        "cycles": rep.cycles,
        "y": np.asarray(out[0]),
    }


def table(title: str, make, args) -> None:
    print(f"\n== {title} ==")
    print(
        f"{'checks':<14}{'compile s':>10}{'x none':>8}{'run ms':>10}{'x none':>8}{'analysis ms':>13}"
        f"{'(1st)':>9}  cycles"
    )
    base = None
    for name in SETTINGS:
        m = measure(make, args, name)
        if base is None:
            base = m
        assert m["cycles"] == base["cycles"] and np.array_equal(m["y"], base["y"], equal_nan=True), name
        print(
            f"{name:<14}{m['compile']:>10.2f}{m['compile'] / base['compile']:>8.2f}{m['run'] * 1e3:>10.1f}"
            f"{m['run'] / base['run']:>8.2f}{m['analysis'] * 1e3:>13.1f}{m['analysis_first'] * 1e3:>9.0f}"
            f"  {m['cycles']:,}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny preset and small shapes")
    opts = ap.parse_args()
    rng = np.random.default_rng(0)
    if opts.quick:
        hw, (M, K, N) = presets.tiny(), (96, 128, 64)
        xs, ws, pad = (1, 32, 12, 12), (32, 32, 3, 3), 1
    else:
        hw, (M, K, N) = presets.ascend910b(), (1024, 1024, 1024)
        xs, ws, pad = (1, 64, 56, 56), (64, 64, 3, 3), 1
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    print(f"npu-jax sanitizers' cost on {hw.name}, jax {jax.__version__}, {jax.devices()[0].platform}")
    table(f"matmul {M}x{K}x{N}", lambda ch: lambda a, b: npu_jax.matmul(a, b, hw=hw, checks=ch), (a, b))
    table(
        f"conv2d img2col x{xs} w{ws} pad {pad}",
        lambda ch: lambda x, w: npu_jax.conv2d(x, w, padding=pad, strategy="img2col", hw=hw, checks=ch),
        (x, w),
    )


if __name__ == "__main__":
    main()

"""A long session stays bounded in memory: many calls of different shapes in one process.

Runs ``--calls`` emulated kernels (GEMMs and Conv2Ds on the tiny preset, every call a new shape, so
every call compiles new programs) and prints the process's resident memory (RSS) every ``--every``
calls, then its start, peak and end. The compiled programs are bounded by count
(``npu_jax.set_program_cache_size``, 64 by default) and by the memory they hold
(``npu_jax.set_program_cache_bytes``, 1 GiB by default; ``--cache-mb``, ``--cache-mb none`` lifts it
for comparison). Then repeats the last call: its program is kept, so it must not compile.

The check (exit 1 if broken): the peak RSS over the run stays under ``--limit-mb`` (3,000 MB: a
12 GB Colab session keeps > 9 GB for its data). Without the byte bound each distinct small call added
~23 MB that only a purge of the count bound gave back (a sawtooth to ~2.4 GB at 64 programs); with it
RSS rises to about the start plus the bound and falls at each purge (``npu_jax/core/programs.py``).

    python benchmarks/session_memory.py                 # 1,000 calls (~45 min on a 2-core box)
    python benchmarks/session_memory.py --calls 200     # the slope, in ~9 min
    python benchmarks/session_memory.py --cache-mb none # count bound only, for comparison
"""

from __future__ import annotations

import argparse
import itertools
import resource
import sys
import time

import jax
import numpy as np

import npu_jax
from npu_jax.core import programs


def rss_mb() -> float:
    """Current resident set size in MB (Linux /proc; else the peak from getrusage)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * resource.getpagesize() / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def shapes():
    """An endless stream of distinct small kernels: (kind, shape) pairs, GEMMs and Conv2Ds in turn.

    Each kind counts its own calls ``j`` in mixed radix whose last digit is unbounded, so no shape
    comes twice: GEMMs (m, k, n) of 16..112 x 16..144 x 16.. (n grows by 16 every 63 GEMMs), Conv2Ds
    (n, 16, h, w) 3x3 to k of 4..12 x 4..10 pixels, 16..64 kernels (n grows by 1 every 252)."""
    for i in itertools.count():
        j = i // 2
        if i % 2 == 0:
            yield "matmul", (16 * (1 + j % 7), 16 * (1 + (j // 7) % 9), 16 * (1 + j // 63))
        else:
            yield "conv2d", (1 + j // 252, 16, 4 + j % 9, 4 + (j // 9) % 7, 16 * (1 + (j // 63) % 4))


def run_one(kind, shape, hw, rng):
    if kind == "matmul":
        m, k, n = shape
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((k, n)).astype(np.float16)
        return npu_jax.matmul(a, b, hw=hw, checks="none")
    n, c, h, w, k = shape
    x = rng.standard_normal((n, c, h, w)).astype(np.float16)
    wt = rng.standard_normal((k, c, 3, 3)).astype(np.float16)
    t = npu_jax.ConvTiling(ho=2, wo=4, n=16, cin1=1, k_l0=16)  # fixed: the chooser is not what is measured
    return npu_jax.conv2d(x, wt, padding=1, hw=hw, tiling=t, policy=npu_jax.Policy(), checks="none")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--every", type=int, default=25)
    ap.add_argument("--cache", type=int, default=64, help="compiled programs kept (LRU)")
    ap.add_argument(
        "--cache-mb",
        default=None,
        help="MB compiled programs may hold (default: the package's; 'none': no bound)",
    )
    ap.add_argument("--limit-mb", type=float, default=3000.0, help="peak RSS allowed")
    args = ap.parse_args()
    npu_jax.set_program_cache_size(args.cache)
    if args.cache_mb is not None:
        npu_jax.set_program_cache_bytes(
            None if args.cache_mb == "none" else int(float(args.cache_mb) * 2**20)
        )
    bound = programs.program_cache_info()["max_bytes"]
    hw, rng = npu_jax.presets.tiny(), np.random.default_rng()
    events: list[str] = []
    jax.monitoring.register_event_duration_secs_listener(lambda name, *a, **k: events.append(name))

    bound_txt = "none" if bound is None else f"{bound / 2**20:.0f} MB"
    print(
        f"{args.calls} calls of distinct shapes, program cache {args.cache} programs / {bound_txt}; RSS in MB"
    )
    print(f"{'calls':>6}{'RSS':>9}{'peak':>9}{'kept':>6}{'held':>8}{'evicted':>9}{'purges':>8}{'s':>8}")
    stream = shapes()
    start = rss_mb()
    peak = start
    t0 = time.perf_counter()
    for i in range(1, args.calls + 1):
        kind, shape = next(stream)
        jax.block_until_ready(run_one(kind, shape, hw, rng))
        now = rss_mb()
        peak = max(peak, now)
        if i % args.every == 0 or i == args.calls:
            c = programs.program_cache_info()
            t = time.perf_counter() - t0
            print(
                f"{i:>6}{now:>9.1f}{peak:>9.1f}{c['size']:>6}{c['bytes'] / 2**20:>8.0f}{c['evictions']:>9}"
                f"{c['purges']:>8}{t:>8.1f}",
                flush=True,
            )
    end = rss_mb()

    # an identical call to the most recent one: kept, so no trace and no compile
    events.clear()
    jax.block_until_ready(run_one(kind, shape, hw, rng))
    again = sum(e.endswith("backend_compile_duration") for e in events)
    print(f"repeat of the last call: {again} compiles (must be 0)")
    print(
        f"RSS over {args.calls} calls: start {start:.0f} MB, peak {peak:.0f} MB, end {end:.0f} MB "
        f"(limit {args.limit_mb:.0f} MB); {time.perf_counter() - t0:.0f} s"
    )
    ok = peak <= args.limit_mb and again == 0
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Timing helper shared by the benchmark scripts (run them as ``python benchmarks/<script>.py``)."""

import time

import jax


def best_of(fn, *args, repeat: int = 3) -> tuple[float, object]:
    """(best wall seconds of ``repeat`` calls, last result); ``fn`` is already compiled."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t0)
    return best, out

"""What the persistent compilation cache saves: the first ``npu_jax.conv2d`` call of a fresh process.

Each row is a new Python process that imports npu_jax and calls ``conv2d`` once on ResNet-50's conv2_x
(1x64x56x56, 3x3, 910B, fp16, img2col, checks on): with the cache off, with an empty cache directory
(it compiles and writes), and again with the directory the previous process filled (it loads). The
tiling is given (the chooser's time is the same in all three and is printed apart), so the rows differ
only in compiling.

    python benchmarks/persistent_cache.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

CHILD = r"""
import time
import numpy as np
import npu_jax
from npu_jax.search.choose import choose_tiling
from npu_jax.workload.conv import canonicalize

npu_jax.enable_persistent_cache()
hw = npu_jax.presets.ascend910b()
rng = np.random.default_rng(0)
x = rng.standard_normal((1, 64, 56, 56)).astype(np.float16)
w = rng.standard_normal((64, 64, 3, 3)).astype(np.float16)
t0 = time.perf_counter()
tiling = choose_tiling(canonicalize(x.shape, w.shape, 1, 1, 1), "img2col", hw)
t1 = time.perf_counter()
y, rep = npu_jax.conv2d(x, w, padding=1, hw=hw, tiling=tiling, checks="all")
y = np.asarray(y)
t2 = time.perf_counter()
y2, _ = npu_jax.conv2d(x + 1, w, padding=1, hw=hw, tiling=tiling, checks="all")
np.asarray(y2)
print(f"{t1 - t0:.2f} {t2 - t1:.2f} {time.perf_counter() - t2:.3f} {rep.cycles}")
"""


def _child(cache: str) -> list[str]:
    env = dict(os.environ, NPU_JAX_CACHE_DIR=cache)
    r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    return r.stdout.split()


def main() -> None:
    print(f"{'process':<34}{'chooser s':>10}{'first call s':>14}{'second call s':>15}{'cycles':>9}")
    with tempfile.TemporaryDirectory() as d:
        for label, cache in (
            ("cache off", "off"),
            ("cache on, empty (compiles, writes)", d),
            ("cache on, filled (loads)", d),
        ):
            choose, first, second, cycles = _child(cache)
            print(f"{label:<34}{choose:>10}{first:>14}{second:>15}{cycles:>9}", flush=True)


if __name__ == "__main__":
    main()

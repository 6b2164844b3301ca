"""What the persistent cache saves in a fresh process: compiled programs and the chooser's picks.

Each row is a new Python process that imports npu_jax: with the cache off, with an empty cache directory
(it chooses, compiles and writes), and again with the directory the previous process filled (it reads the
tiling picks and loads the programs). First table: one ``npu_jax.conv2d`` call on ResNet-50's conv2_x
(1x64x56x56, 3x3, 910B, fp16, img2col, checks on), the chooser timed apart. Second table: a whole
network's timing-only estimate (``npu_jax.model``, ResNet-18 at 64 x 64, batch 1, 910B; needs onnx).

    python benchmarks/persistent_cache.py [--no-network]
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


NETWORK = r"""
import time
import npu_jax
from npu_jax.model import zoo

npu_jax.enable_persistent_cache()
m = npu_jax.model.load(zoo.resnet18(image=64))
t0 = time.perf_counter()
rep = m.estimate(batch=1, hw=npu_jax.presets.ascend910b())
print(f"{time.perf_counter() - t0:.1f} {rep.cycles}")
"""

ROWS = (
    ("cache off", "off"),
    ("cache on, empty (writes)", None),
    ("cache on, filled (reads)", None),
)


def _child(code: str, cache: str) -> list[str]:
    env = dict(os.environ, NPU_JAX_CACHE_DIR=cache)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return r.stdout.split()


def main() -> None:
    network = "--no-network" not in sys.argv[1:]
    print(f"{'conv2d, one call':<34}{'chooser s':>10}{'first call s':>14}{'second call s':>15}{'cycles':>9}")
    with tempfile.TemporaryDirectory() as d:
        for label, cache in ROWS:
            choose, first, second, cycles = _child(CHILD, cache or d)
            print(f"{label:<34}{choose:>10}{first:>14}{second:>15}{cycles:>9}", flush=True)
    if not network:
        return
    print(f"\n{'resnet18 64x64 estimate':<34}{'estimate s':>10}{'cycles':>14}")
    with tempfile.TemporaryDirectory() as d:
        for label, cache in ROWS:
            secs, cycles = _child(NETWORK, cache or d)
            print(f"{label:<34}{secs:>10}{int(cycles):>14,}", flush=True)


if __name__ == "__main__":
    main()

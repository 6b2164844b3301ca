"""How fast an ``npu_jax.asc`` kernel is to run: first call, repeat with new data, compile vs loop count.

Each measurement runs in a fresh Python process (so "first call" is the kernel's own trace and
compile, not the import), with the sanitizers off (the process default; ``--checks all`` turns them
on) and JAX's persistent compilation cache off:

* first call: AddCustom ([8, 2048] fp16, 8 blocks, 16 tiles of 128 per block) on the 910B preset;
* repeat: the same call with new data (nothing compiles: the launch's program is kept);
* 16x the tiles: the same kernel over [8, 32768] (256 tiles per block): its ``asc.loop`` is one
  ``fori_loop``, so its first call should cost about what the 16-tile one does.

    python benchmarks/asc_speed.py [--checks all] [--rounds 3]

Prints the median of ``--rounds`` fresh processes per figure and the ratios the targets are stated in.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, os, sys, time
sys.path.insert(0, os.path.join({root!r}, "examples", "asc"))
import numpy as np
import npu_jax
from add_custom import add_custom
rng = np.random.default_rng(0)
cols = {cols}
x = rng.uniform(1, 100, (8, cols)).astype(np.float16)
y = rng.uniform(1, 100, (8, cols)).astype(np.float16)
z = np.zeros((8, cols), np.float16)
hw = npu_jax.presets.ascend910b()
t0 = time.perf_counter()
(_, _, z1), rep = add_custom[8](x, y, z, cols, cols // 256, 2, hw=hw, checks={checks!r})
first = time.perf_counter() - t0
assert np.array_equal(z1, (x + y).astype(np.float16))
x2 = rng.uniform(1, 100, (8, cols)).astype(np.float16)
reps = []
for _ in range(5):
    t0 = time.perf_counter()
    (_, _, z2), _ = add_custom[8](x2, y, z, cols, cols // 256, 2, hw=hw, checks={checks!r})
    reps.append(time.perf_counter() - t0)
assert np.array_equal(z2, (x2 + y).astype(np.float16))
print(json.dumps({{"first": first, "repeat": min(reps), "cycles": rep.cycles}}))
"""


def measure(cols: int, checks: str) -> dict:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "NPU_JAX_CACHE_DIR": "off"}
    code = CHILD.format(root=root, cols=cols, checks=checks)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checks", default="none", help="sanitizers of the measured calls (none, all, ...)")
    ap.add_argument("--rounds", type=int, default=3, help="fresh processes per figure (median)")
    a = ap.parse_args(argv)
    runs = {c: [] for c in (2048, 32768)}
    for _ in range(a.rounds):  # interleaved: a load change hits both sizes alike
        for c in runs:
            runs[c].append(measure(c, a.checks))
    med = {c: {k: statistics.median(r[k] for r in rs) for k in ("first", "repeat")} for c, rs in runs.items()}
    small, big = med[2048], med[32768]
    print(f"AddCustom on ascend910b, checks={a.checks}, median of {a.rounds} fresh processes")
    print(f"  first call, 16 tiles/block      {small['first']:7.2f} s   (target <= 5 s)")
    print(f"  repeat with new data            {small['repeat'] * 1e3:7.1f} ms  (target <= 100 ms)")
    print(f"  first call, 256 tiles/block     {big['first']:7.2f} s")
    print(f"  16x the tiles / 16 tiles        {big['first'] / small['first']:7.2f} x  (target <= 1.3 x)")
    print(f"  emulated cycles: {runs[2048][0]['cycles']:,} and {runs[32768][0]['cycles']:,}")


if __name__ == "__main__":
    main()

"""Where the emulated data path spends its time: the whole of ``conv_values`` against its two parts.

For the ResNet-50 3x3 reference layers on the 910B preset (img2col, the chooser's tiling), prints the
wall time after compile (medians of 9 rounds, the five programs interleaved in each) of
``lax.conv_general_dilated`` at HIGHEST on the same fp16 values in fp32, of ``kernels.values.conv_values``
(the data ``npu_jax.conv2d`` returns), of ``values.im2col`` alone and of ``values.accumulators`` alone
on its im2col matrix (the Mmads' arithmetic in the order ``isa/mac.py`` promises), each jitted, and
the accumulation's ratio to lax.conv: what the data path would cost with no im2col at all.

Then, on one conv3_x-sized block (K = 1152, 1568 x 128 outputs, fp16 values in fp32), the promised
order (``isa.mac.accumulate``: the pairwise tree of each fractal, then the adds into L0C) against a
sequential order (each product added into the running sum in turn, 16 to a scan step) and a
``jnp.dot`` at HIGHEST: what another order, or none, would cost.

Run:  python benchmarks/values_parts.py             (batch 8; about a minute on a 2-core laptop CPU)
      python benchmarks/values_parts.py --batch 1
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from bench_conv import xla_conv  # noqa: E402  (benchmarks/ is on sys.path when run as a script)
from jax import lax

import npu_jax
from npu_jax.core.formats import oihw_to_kn
from npu_jax.core.isa.mac import accumulate
from npu_jax.hw import presets
from npu_jax.kernels import values
from npu_jax.mapping.conv import make_plan
from npu_jax.search.choose import choose_tiling
from npu_jax.workload.resnet50 import RESNET50_REFERENCE

ROUNDS = 9


def medians(runs: dict) -> dict:
    """Median milliseconds of each ``name: (jitted fn, args)``, after compile, interleaved per round."""
    for fn, args in runs.values():
        jax.block_until_ready(fn(*args))
    times = {k: [] for k in runs}
    for _ in range(ROUNDS):
        for k, (fn, args) in runs.items():
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times[k].append(time.perf_counter() - t0)
    return {k: 1e3 * float(np.median(v)) for k, v in times.items()}


def _sequential(at, b):
    """c + a @ b with each product added into the running sum in turn (k ascending), 16 a scan step."""
    k, rows = at.shape

    def step(c, ab):
        a16, b16 = ab
        for j in range(16):
            c = c + a16[j][:, None] * b16[j][None, :]
        return c, None

    xs = (at.reshape(k // 16, 16, rows), b.reshape(k // 16, 16, b.shape[1]))
    return lax.scan(step, jnp.zeros((rows, b.shape[1]), jnp.float32), xs)[0]


def orders() -> str:
    k, rows, cols = 1152, 1568, 128
    rng = np.random.default_rng(1)
    at = jnp.asarray(rng.standard_normal((k, rows)).astype(np.float16)).astype(jnp.float32)
    b = jnp.asarray(rng.standard_normal((k, cols)).astype(np.float16)).astype(jnp.float32)
    zeros = jnp.zeros((rows, cols), jnp.float32)
    ms = medians(
        {
            "promised (tree)": (
                jax.jit(lambda a, b: accumulate(zeros, a, b, "fp32", 16, False, kmajor=True)),
                (at, b),
            ),
            "sequential": (jax.jit(_sequential), (at, b)),
            "jnp.dot": (jax.jit(lambda a, b: jnp.dot(a.T, b, precision=lax.Precision.HIGHEST)), (at, b)),
        }
    )
    mac = k * rows * cols
    return "\n".join(f"  {name:<18}{t:>8.2f} ms {mac / t / 1e6:>7.1f} GMAC/s" for name, t in ms.items())


def row(layer, hw, pol) -> str:
    g = layer.geometry()
    p = make_plan(g, "img2col", choose_tiling(g, "img2col", hw), hw)
    rng = np.random.default_rng(0)
    x = jax.numpy.asarray(rng.standard_normal(layer.x_shape).astype(np.float16))
    w = jax.numpy.asarray(rng.standard_normal(layer.w_shape).astype(np.float16))
    at = jax.jit(lambda x: values.im2col(x, p))(x)
    bk = oihw_to_kn(w, p.c0, g.kh, g.kw)
    runs = {
        "lax.conv": (xla_conv(layer), (x, w)),
        "conv_values": (jax.jit(lambda x, w: values.conv_values(p, pol, x, w)), (x, w)),
        "im2col": (jax.jit(lambda x: values.im2col(x, p)), (x,)),
        "accumulation": (
            jax.jit(lambda a, b: values.accumulators(a, b, (p.k_total,), pol.accumulate, p.c0, False)),
            (at, bk),
        ),
    }
    ms = medians(runs)
    ref = ms["lax.conv"]
    return (
        f"  {layer.name:<24}{ref:>10.1f}{ms['conv_values']:>10.1f} ({ms['conv_values'] / ref:.2f}x)"
        f"{ms['im2col']:>9.1f}{ms['accumulation']:>10.1f} ({ms['accumulation'] / ref:.2f}x)"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=8, help="images per layer (default 8)")
    args = ap.parse_args(argv)
    hw, pol = presets.ascend910b(), npu_jax.Policy()
    print(f"jax {jax.__version__}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; batch {args.batch}")
    print(f"  {'layer':<24}{'lax.conv':>10}{'conv_values (x)':>18}{'im2col':>9}{'accumulation (x)':>19}   ms")
    for base in RESNET50_REFERENCE[1:]:
        print(row(dataclasses.replace(base, n=args.batch), hw, pol), flush=True)
    print("one block, K 1152, 1568 x 128 outputs: the promised order, a sequential one, a dot")
    print(orders())
    print(f"  load at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The samples for today's networks (examples/asc/softmax.py, layer_norm.py, attention.py) at sizes a
network runs them, on the emulated chips: cycles, the bottleneck and each pipe's ratio, and the error
against numpy in float64.

    python benchmarks/asc_samples.py [--json PATH]

Cycle figures are the emulator's (they do not depend on the host). docs/kernels.md quotes them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

import npu_jax

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "asc")
)
import attention as att  # noqa: E402
import layer_norm as ln  # noqa: E402
import softmax as sm  # noqa: E402


def _row(name, hw, rep, err):
    r = {k: round(float(v), 3) for k, v in rep.ratios.items() if float(v) > 0.005}
    return {
        "sample": name,
        "chip": hw.name,
        "cycles": int(rep.cycles),
        "us": round(float(rep.time_us), 2),
        "bottleneck": rep.bottleneck,
        "ratios": r,
        "max_abs_error": float(err),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    for hw, cores in ((npu_jax.presets.ascend910b(), 40), (npu_jax.presets.ascend310p(), 8)):
        x = rng.uniform(-8, 8, (cores * 64, 1024)).astype(np.float16)
        (_, y), rep = sm.softmax_rows[cores](x, np.zeros_like(x), *x.shape, 8, hw=hw)
        rows.append(_row("softmax fp16 [R, 1024]", hw, rep, np.abs(y - sm.reference(x)).max()))
        x = rng.normal(0, 2, (cores * 32, 1024)).astype(np.float16)
        g, b = (rng.uniform(0.5, 1.5, 1024).astype(np.float16) for _ in range(2))
        for rms in (False, True):
            (*_, y), rep = ln.norm_rows[cores](x, g, b, np.zeros_like(x), *x.shape, 8, rms, hw=hw)
            name = f"{'rms_norm' if rms else 'layer_norm'} fp16 [R, 1024]"
            rows.append(_row(name, hw, rep, np.abs(y - ln.reference(x, g, b, rms)).max()))
    hw = npu_jax.presets.ascend910b()
    seq, d, br, bc = 1024, 64, 64, 128
    q, k, v = (rng.normal(0, 1, (seq, d)).astype(np.float16) for _ in range(3))
    outs, rep = att.attention[seq // br](q, k, v, *att.workspaces(seq, d, br, bc), seq, d, br, bc, hw=hw)
    rows.append(
        _row(f"attention fp16 S={seq} D={d}", hw, rep, np.abs(outs[3] - att.reference(q, k, v)).max())
    )
    for r in rows:
        ratios = "  ".join(f"{k} {v:.2f}" for k, v in r["ratios"].items())
        print(
            f"{r['sample']:34s} {r['chip']:11s} {r['cycles']:>9,} cycles {r['us']:>8.2f} us  "
            f"bottleneck {r['bottleneck']:7s} {ratios}  max|err| {r['max_abs_error']:.2e}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

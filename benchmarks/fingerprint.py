"""Behaviour fingerprint of the emulator: every figure a broad, fixed set of public calls reports.

A change meant to keep behaviour (a redesign of the machine model) must leave it equal; a change
meant to move figures must explain each one it moves. This script runs a fixed list of cases through the public API only (``npu_jax.conv2d``, ``npu_jax.matmul``, ``fusion.conv_relu``,
``fusion.conv2d_fused``, ``ConvTiling``, ``MatmulTiling``, ``Policy``, the presets), each on
fixed-seed random data, and records per case:

* the report's ``cycles``, per-core cycles (``core_cycles``), ``n_cores``, ``pipe_busy``, ``bytes``,
  ``gm_bytes``, ``flops``, ``mmad_flops``, ``flops_issued`` and the instructions issued per pipe;
* for reports with parts (fusion's ``SequenceReport``) the same per part, and for a conv's
  ``extras`` (the NC1HWC0 relayout kernel) the same per extra;
* the output's shape, dtype and the sha256 of its bytes (timing-only runs included: their zeros).

Cases (81): ``conv2d`` for the four strategies on tiny, tiny(coupled=True), ascend910b, ascend910
and two small odd layers (batch 2 with stride 2 and padding; dilation 2), and on tiny and 910 a third
(a 3x2 kernel with stride (1, 2) and asymmetric padding), with the chooser's tiling (so the chooser
and the cost model it runs are fingerprinted too), and one explicit ConvTiling per
strategy on tiny(coupled=True) and 910B; one ResNet-50 layer per strategy with ``timing_only=True``
on 910B; ``conv_relu`` with bias fused and unfused, and a bias + residual + ReLU chain fused and
unfused, on 910B and 910, and a leaky-ReLU + cast chain on tiny; ``matmul`` on three shapes (two not
multiples of 16) on tiny, 910B and 910, and with an explicit MatmulTiling; and precision policies
(fp32 and bf16 operands, fp16 accumulation per K tile / per K0 step / per MAC, stochastic rounding).

Run:
    python benchmarks/fingerprint.py --write benchmarks/fingerprint_base.json   # record
    python benchmarks/fingerprint.py --check benchmarks/fingerprint_base.json   # compare: prints
        every differing field (case.field: base -> now) and exits 1 on any difference
    add ``--only SUBSTRING`` (repeatable) to run only the cases whose name contains it.

Sanitizers are off (``npu_jax.default_checks("none")``: they observe, they change no figure) and
XLA's backend optimisation level is 0, as in the test suite (floating-point results do not depend on
it: two cases re-run at level 2 gave the same hashes). Time, measured when the base file was written:
81 cases, 6 min 21 s of CPU, 16 min 40 s wall pinned to one core of a 2-core machine shared with
four other jobs (load average 10); nearly all of it XLA compiles (3-6 s of CPU per case). Re-running
a sample of 17 cases gave identical figures.

The base file was first recorded on main at commit a21d61a ("hw/costs.py: every instruction's cost
rule written once ..."), whose behaviour is that of the code before the instruction-table redesign;
its cycles and bytes were re-recorded after the chip model (L2, HBM, launch), and its 55 output hashes
after the Mmad's fixed accumulation order (core/isa/mac.py), which changed bits and no cycle: the
re-recording on main 55943cc (grouped conv and pooling merged) differs from the file before in those
hashes only. Since then: the fused residual read in fp16 (one case,
``fusion/bias-residual-relu/910/fused``: its bytes, tiling, cycles 2865 -> 2861 and output hash), and
the L2 write rule (a kept output's writes stay in L2): every case's ``L2->HBM`` bytes, and those of
its relayout extra, went to 0 (each case's output fits beside its inputs), and nothing else moved (no
case is HBM-bound). Then the 910B's vector start-up (22 cycles, calibrated) and UB bank conflicts: the
three 910B fusion cases with a vector kernel (``fusion/conv_relu/910b/unfused``,
``fusion/bias-residual-relu/910b/{fused,unfused}``) moved in their element-wise part only: Vector busy
2160 -> 5520 (+14 cycles for each of 240 instructions), 2160 -> 5560 and 2700 -> 6940 (+40: the
residual add's input and residual tiles collide in the bank groups on 40 beats), cycles +42 to +82;
no conv, matmul, byte or hash moved. The latest re-recording ran 81 cases in 190 s on the 2-core machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import zlib

if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = " ".join(
        filter(None, [os.environ.get("XLA_FLAGS"), "--xla_backend_optimization_level=0"])
    )

import jax  # noqa: E402
import numpy as np  # noqa: E402

import fusion  # noqa: E402
import npu_jax  # noqa: E402
from npu_jax import ConvTiling, MatmulTiling, Policy, presets  # noqa: E402
from npu_jax.core.pipes import LANES  # noqa: E402

PRESETS = {
    "tiny": presets.tiny,
    "tiny-coupled": lambda: presets.tiny(coupled=True),
    "910b": presets.ascend910b,
    "910": presets.ascend910,
}
STRATEGIES = ("output_tiled", "input_tiled", "relayout", "img2col")

# Small odd layers: (x shape NCHW, w shape OIHW, conv keyword arguments).
LAYERS = {
    "b2s2p1": ((2, 20, 9, 11), (24, 20, 3, 3), dict(stride=2, padding=1)),
    "d2p2": ((1, 16, 10, 10), (32, 16, 3, 3), dict(dilation=2, padding=2)),
    "k3x2s12": ((1, 8, 7, 9), (20, 8, 3, 2), dict(stride=(1, 2), padding=((1, 0), (0, 1)))),
}
# ResNet-50 conv3_x 3x3 on 28x28x128, for the timing-only runs.
RESNET_LAYER = ((1, 128, 28, 28), (128, 128, 3, 3), dict(padding=1))


def _conv_tiling(strategy: str) -> ConvTiling:
    """One explicit tiling per strategy (layer b2s2p1, C1 = 2): two cores split along Cout; weights kept in
    L1 where the strategy allows; img2col deep and double-buffered."""
    if strategy == "img2col":
        return ConvTiling(ho=2, wo=3, n=16, cin1=2, k_l0=32, l1_stages=2, l0_stages=2, cores=2, cout_split=2)
    if strategy == "output_tiled":
        return ConvTiling(ho=3, wo=2, n=16, cin1=1, k_l0=16, cores=2, cout_split=2)
    return ConvTiling(ho=3, wo=2, n=16, cin1=2, k_l0=16, weights_resident=True, cores=2, cout_split=2)


def _rng(name: str) -> np.random.Generator:
    """Data keyed by the case's name, so adding a case changes no other case's inputs."""
    return np.random.default_rng(zlib.crc32(name.encode()))


def _data(name: str, *shapes) -> list[np.ndarray]:
    rng = _rng(name)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


# ---- the cases ---------------------------------------------------------------------------------------
def cases() -> dict:
    """name -> a function of no argument returning (output, report)."""
    out = {}

    def conv(name, layer, strategy, preset, tiling=None, policy=None, timing_only=False):
        xs, ws, kw = layer

        def run():
            x, w = _data(name, xs, ws)
            return npu_jax.conv2d(
                x,
                w,
                strategy=strategy,
                hw=PRESETS[preset](),
                tiling=tiling,
                policy=policy,
                timing_only=timing_only,
                **kw,
            )

        out[name] = run

    grid = {"b2s2p1": tuple(PRESETS), "d2p2": tuple(PRESETS), "k3x2s12": ("tiny", "910")}
    for lname, layer in LAYERS.items():
        for preset in grid[lname]:
            for s in STRATEGIES:
                conv(f"conv/{lname}/{preset}/{s}", layer, s, preset)
    for preset in ("tiny-coupled", "910b"):
        for s in STRATEGIES:
            conv(f"conv/b2s2p1/{preset}/{s}/tiling", LAYERS["b2s2p1"], s, preset, tiling=_conv_tiling(s))
    for s in STRATEGIES:
        conv(f"conv/resnet50-conv3x3-28/910b/{s}/timing_only", RESNET_LAYER, s, "910b", timing_only=True)

    # precision policies
    fp32 = Policy(operand="fp32", output="fp32")
    for s in ("output_tiled", "img2col"):
        conv(f"conv/d2p2/tiny/{s}/fp32", LAYERS["d2p2"], s, "tiny", policy=fp32)
    conv(
        "conv/b2s2p1/tiny/relayout/bf16", LAYERS["b2s2p1"], "relayout", "tiny", policy=Policy(operand="bf16")
    )
    for acc in ("fp16_tile", "fp16_step"):
        conv(
            f"conv/d2p2/tiny/img2col/acc-{acc}",
            LAYERS["d2p2"],
            "img2col",
            "tiny",
            policy=Policy(accumulate=acc),
        )
    conv(
        "conv/k3x2s12/tiny-coupled/input_tiled/stochastic",
        LAYERS["k3x2s12"],
        "input_tiled",
        "tiny-coupled",
        policy=Policy(rounding="stochastic", seed=7, subnormals=False),
    )

    # fusion
    def fused(name, preset, epilogue, fused_, strategy="img2col"):
        xs, ws, kw = LAYERS["b2s2p1"]

        def run():
            x, w = _data(name, xs, ws)
            rng = _rng(name + "/epilogue")
            bias = rng.standard_normal(ws[0]).astype(np.float32)
            if epilogue == "conv_relu":
                return fusion.conv_relu(
                    x, w, bias, fused=fused_, hw=PRESETS[preset](), strategy=strategy, **kw
                )
            steps = [s if isinstance(s, str) else tuple(s) for s in epilogue]
            residual = None
            if "residual" in steps:
                y_shape = (xs[0], ws[0], (xs[2] + 2 - 3) // 2 + 1, (xs[3] + 2 - 3) // 2 + 1)
                residual = rng.standard_normal(y_shape).astype(np.float32)
            return fusion.conv2d_fused(
                x,
                w,
                steps,
                bias=bias if "bias" in steps else None,
                residual=residual,
                fused=fused_,
                strategy=strategy,
                hw=PRESETS[preset](),
                **kw,
            )

        out[name] = run

    for preset in ("910b", "910"):
        for f in (True, False):
            kind = "fused" if f else "unfused"
            fused(f"fusion/conv_relu/{preset}/{kind}", preset, "conv_relu", f)
            fused(f"fusion/bias-residual-relu/{preset}/{kind}", preset, ("bias", "residual", "relu"), f)
    for f in (True, False):
        kind = "fused" if f else "unfused"
        steps = ("bias", ("leaky_relu", 0.125), ("cast", "fp32"))
        fused(f"fusion/bias-leaky-cast/tiny/{kind}/output_tiled", "tiny", steps, f, strategy="output_tiled")

    # GEMM
    def mm(name, shape, preset, tiling=None, policy=None):
        m, k, n = shape

        def run():
            a, b = _data(name, (m, k), (k, n))
            return npu_jax.matmul(a, b, hw=PRESETS[preset](), tiling=tiling, policy=policy)

        out[name] = run

    shapes = {"64x48x80": (64, 48, 80), "37x70x23": (37, 70, 23), "130x33x200": (130, 33, 200)}
    for sname, shape in shapes.items():
        for preset in ("tiny", "910b", "910"):
            mm(f"matmul/{sname}/{preset}", shape, preset)
    mm(
        "matmul/130x33x200/tiny/tiling",
        shapes["130x33x200"],
        "tiny",
        tiling=MatmulTiling(m=32, n=64, k_l1=32, k_l0=16),
    )
    mm("matmul/37x70x23/tiny/fp32", shapes["37x70x23"], "tiny", policy=Policy(operand="fp32", output="fp32"))
    mm(
        "matmul/130x33x200/910b/acc-fp16_mac",
        shapes["130x33x200"],
        "910b",
        policy=Policy(accumulate="fp16_mac"),
    )
    mm(
        "matmul/64x48x80/910/stochastic",
        shapes["64x48x80"],
        "910",
        policy=Policy(rounding="stochastic", seed=3),
    )
    return out


# ---- what is recorded ----------------------------------------------------------------------------------
def _ints(d) -> dict:
    return {k: int(v) for k, v in d.items()}


def report_figures(rep) -> dict:
    """Every public figure of a Report or SequenceReport (those a refactor must keep)."""
    parts = getattr(rep, "parts", None)
    if parts is not None:  # a sequence of kernels: its totals and each part's figures
        return {
            "cycles": int(rep.cycles),
            "pipe_busy": _ints(rep.pipe_busy),
            "bytes": _ints(rep.bytes),
            "flops": int(rep.flops),
            "offsets": [int(o) for o in rep.offsets],
            "parts": {label: report_figures(r) for label, r in parts},
        }
    fig = {
        "cycles": int(rep.cycles),
        "core_cycles": [int(c) for c in np.asarray(rep.core_cycles)],
        "n_cores": int(rep.n_cores),
        "pipe_busy": _ints(rep.pipe_busy),
        "bytes": _ints(rep.bytes),
        "gm_bytes": int(rep.gm_bytes),
        "flops": int(rep.flops),
        "mmad_flops": int(rep.mmad_flops),
        "flops_issued": int(rep.flops_issued),
        # instructions per pipe, summed over cores: the program's shape
        "n_instr": [int(v) for v in np.asarray(rep.n_instr).sum(axis=0)],
    }
    extras = {k: report_figures(v) for k, v in sorted(rep.extras.items()) if hasattr(v, "cycles")}
    if extras:
        fig["extras"] = extras
    return fig


def output_figures(y) -> dict:
    a = np.asarray(y)
    return {"shape": list(a.shape), "dtype": str(a.dtype), "sha256": hashlib.sha256(a.tobytes()).hexdigest()}


def run_cases(only: list[str] | None) -> dict:
    todo = {k: f for k, f in cases().items() if not only or any(s in k for s in only)}
    results, t0 = {}, time.perf_counter()
    with npu_jax.default_checks("none"):
        for i, (name, fn) in enumerate(todo.items(), 1):
            t = time.perf_counter()
            y, rep = fn()
            results[name] = {"output": output_figures(y), "report": report_figures(rep)}
            print(
                f"[{i:>3}/{len(todo)}] {name:<58} {results[name]['report']['cycles']:>10,} cycles "
                f"{time.perf_counter() - t:6.1f} s",
                flush=True,
            )
    print(f"{len(todo)} cases in {time.perf_counter() - t0:.0f} s", flush=True)
    return results


def _flatten(d, prefix=""):
    if isinstance(d, dict):
        for k, v in d.items():
            yield from _flatten(v, f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix, d


def _lane_field(field: str) -> str:
    """A base file's ``...pipe_busy.M`` as ``...pipe_busy.CUBE``: files recorded before the profiler lanes key
    pipe_busy by the programming model's pipe names, reports now by the profiler's lane names."""
    head, _, key = field.rpartition(".")
    return f"{head}.{LANES.get(key, key)}" if head.endswith("pipe_busy") else field


def compare(base: dict, now: dict) -> list[str]:
    """Every field that differs, as ``case.field: base -> now`` (a missing case or field included)."""
    diffs = []
    for name in sorted(set(base) | set(now)):
        if name not in now:
            diffs.append(f"{name}: not run")
            continue
        if name not in base:
            diffs.append(f"{name}: not in the base file")
            continue
        b = {_lane_field(f): v for f, v in _flatten(base[name])}
        n = dict(_flatten(now[name]))
        for field in sorted(set(b) | set(n)):
            if b.get(field, "<absent>") != n.get(field, "<absent>"):
                diffs.append(f"{name}.{field}: {b.get(field, '<absent>')} -> {n.get(field, '<absent>')}")
    return diffs


def write(path: str, results: dict) -> None:
    """One case per line (sorted), so that a diff of the file names the cases that changed."""
    lines = [f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(results.items())]
    with open(path, "w") as f:
        f.write(f'{{"jax": {json.dumps(jax.__version__)}, "cases": {{\n' + ",\n".join(lines) + "\n}}\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="FILE", help="run every case and record the figures in FILE")
    mode.add_argument(
        "--check", metavar="FILE", help="run every case and compare with FILE (exit 1 if any differ)"
    )
    ap.add_argument("--only", action="append", metavar="SUBSTRING", help="run only cases whose name has it")
    args = ap.parse_args(argv)
    results = run_cases(args.only)
    if args.write:
        write(args.write, results)
        print(f"wrote {len(results)} cases to {args.write}")
        return 0
    with open(args.check) as f:
        base = json.load(f)["cases"]
    if args.only:
        base = {k: v for k, v in base.items() if k in results}
    diffs = compare(base, results)
    for d in diffs:
        print(d)
    print(
        f"{len(results)} cases checked against {args.check}: "
        + (f"{len(diffs)} fields differ" if diffs else "identical")
    )
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())

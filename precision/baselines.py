"""Golden baselines: precision regressions as a one-line assertion.

A baseline is a small JSON file under ``tests/baselines/`` holding the metrics of one registered
workload (a :class:`Case`: fixed inputs, a kernel, a policy) as this code computed them when the
file was written. ``assert_precision(result, baseline="conv3x3_fp16_mixed")`` compares a fresh
measurement with it, metric by metric, and fails with a table of the drift when any moved more
than its tolerance -- which is what happens when a kernel's rounding changes (a policy switched,
an accumulation reordered, a conversion mode altered).

Baselines change only on purpose: ``npu-jax precision --update-baselines`` (or pytest with
``--precision-update-baselines``) rewrites them from the current code.

The workloads are fixed (seeded) by design: a baseline is a record of one computation. Tests
that need fresh data use the budgets (:mod:`precision.budgets`) instead.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
import re
from collections.abc import Callable

import jax
import numpy as np

import npu_jax
from npu_jax.core.policy import Policy
from npu_jax.errors import InputError, InputTypeError, check_bool, check_number
from precision.formats import get_format
from precision.metrics import COUNT_METRICS, ERROR_METRICS, SCORE_METRICS, Metrics, compare
from precision.strategies import StackSpec, conv, conv3x3_ref, reference, run_strategy

DEFAULT_DIR = pathlib.Path(__file__).resolve().parents[1] / "tests" / "baselines"
# tolerances: relative for error magnitudes (max-type metrics hang on one element: looser),
# absolute for scores and balance, exact for counts
RTOL = {
    "rel_l2": 0.05,
    "ulp_mean": 0.05,
    "max_abs": 0.15,
    "max_rel": 0.15,
    "ulp_max": 0.15,
    "componentwise": 0.15,
}
ATOL = {"balance": 0.03, "cosine": 1e-5, "vendor_ratio": 0.01, "ulp_above_1": 0.02}


@dataclasses.dataclass(frozen=True)
class Case:
    """A registered baseline workload: ``run(policy)`` -> (out, ref, abs_ref or None)."""

    name: str
    description: str
    policy: Policy
    run: Callable


def _layer_inputs(seed: int = 2024, c: int = 16, size: int = 8):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, c, size, size)).astype(np.float32)
    w = (rng.standard_normal((c, c, 3, 3)) * math.sqrt(2.0 / (9 * c))).astype(np.float32)
    return x, w


def _conv3x3_case(policy: Policy):

    x, w = _layer_inputs()
    y, _ = conv(x, w, hw=npu_jax.presets.tiny(), policy=policy)
    dt = get_format(policy.operand).np_dtype
    xr, wr = x.astype(dt).astype(np.float64), w.astype(dt).astype(np.float64)
    return np.asarray(y), conv3x3_ref(xr, wr), conv3x3_ref(np.abs(xr), np.abs(wr))


def _stack_case(strategy: str):
    def run(policy: Policy):  # the strategy fixes the policies; ``policy`` is ignored

        spec = StackSpec(depth=4, channels=16, height=8, width=8, seed=7)
        r = run_strategy(strategy, spec, hw=npu_jax.presets.tiny())
        return r.outputs[-1], reference(spec.inputs(0), spec.weights())[-1], None

    return run


CASES = {
    c.name: c
    for c in (
        Case(
            "conv3x3_fp16_mixed",
            "3x3 conv 16->16 on 8x8, img2col, tiny: fp16 in, fp32 accumulate, fp16 out",
            Policy(),
            _conv3x3_case,
        ),
        Case(
            "conv3x3_fp16_pure",
            "the same layer with an fp16 running sum (fp16_mac)",
            Policy(accumulate="fp16_mac"),
            _conv3x3_case,
        ),
        Case(
            "conv3x3_fp32",
            "the same layer in fp32 throughout",
            Policy(operand="fp32", output="fp32"),
            _conv3x3_case,
        ),
        Case(
            "stack4_mixed",
            "4-layer ReLU stack (well scaled), mixed precision, vs float64",
            Policy(),
            _stack_case("mixed"),
        ),
    )
}


def measure(name: str, policy: Policy | None = None) -> Metrics:
    """Run the registered case ``name`` (optionally under another ``policy``) and measure it."""
    case = _case(name)
    out, ref, s = case.run(case.policy if policy is None else policy)
    return compare(out, ref, abs_ref=s)


def _case(name: str) -> Case:
    try:
        return CASES[name]
    except KeyError:
        raise KeyError(f"no baseline case {name!r}; registered: {sorted(CASES)}.") from None


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _path(name: str, directory=None) -> pathlib.Path:
    """``<directory>/<name>.json``; the name is a plain file stem, so the path stays inside the
    directory (no separators, no ``..``, no absolute path)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name:
        raise InputError(
            f"baseline name must be a plain name of letters, digits, '_', '.' or '-' (a file stem inside "
            f"the baselines directory), got {name!r}."
        )
    if directory is not None and not isinstance(directory, (str, os.PathLike)):
        raise InputTypeError(
            f"directory must be a path or None, got {type(directory).__name__} {directory!r}."
        )
    root = pathlib.Path(DEFAULT_DIR if directory is None else directory)
    if root.exists() and not root.is_dir():
        raise InputError(
            f"directory {str(root)!r} is not a directory; give the folder that holds the baselines."
        )
    p = root / f"{name}.json"
    if p.resolve().parent != root.resolve():
        raise InputError(f"baseline {name!r} would resolve outside {str(root)!r}; use a plain name.")
    return p


def write(name: str, metrics: Metrics, directory=None, description: str = "") -> pathlib.Path:
    """Write ``metrics`` as baseline ``name``."""

    p = _path(name, directory)
    p.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "name": name,
        "description": description or (CASES[name].description if name in CASES else ""),
        "jax": jax.__version__,
        "metrics": metrics.as_dict(),
    }
    p.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return p


def load(name: str, directory=None) -> dict:
    p = _path(name, directory)
    if not p.exists():
        raise FileNotFoundError(
            f"precision baseline {name!r} not found at {p}; create it deliberately with "
            f"`npu-jax precision --update-baselines` (or pytest --precision-update-baselines)."
        )
    if not p.is_file():
        raise InputError(f"precision baseline {name!r}: {p} is not a file.")
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (
        UnicodeDecodeError,
        ValueError,
        RecursionError,
    ) as e:  # ValueError: JSONDecodeError, 5000-digit ints
        raise InputError(
            f"precision baseline {name!r}: {p} is not a JSON baseline ({type(e).__name__}: {e}); rewrite it "
            f"with `npu-jax precision --update-baselines`."
        ) from None
    metrics = doc.get("metrics") if isinstance(doc, dict) else None
    if not isinstance(metrics, dict):
        raise InputError(
            f"precision baseline {name!r}: {p} has no 'metrics' table (keys: "
            f"{sorted(doc) if isinstance(doc, dict) else type(doc).__name__}); rewrite it with "
            f"`npu-jax precision --update-baselines`."
        )
    known = set(ERROR_METRICS + SCORE_METRICS + COUNT_METRICS + ("ulp_above_1",))
    for k, v in metrics.items():
        if k in known and v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise InputError(f"precision baseline {name!r}: {p}: metric {k!r} must be a number, got {v!r}.")
        if k in known and isinstance(v, int) and not -(2**63) <= v < 2**63:
            raise InputError(
                f"precision baseline {name!r}: {p}: metric {k!r} is an integer of {v.bit_length()} bits, past "
                f"any count; rewrite it with `npu-jax precision --update-baselines`."
            )
    if not known & set(metrics):
        raise InputError(
            f"precision baseline {name!r}: {p}: 'metrics' holds none of the known metrics "
            f"{sorted(known)}; got keys {sorted(metrics)}."
        )
    return metrics


def update_baselines(names=None, directory=None) -> list[pathlib.Path]:
    """Re-measure the registered cases (all, or ``names``) and rewrite their files."""
    return [write(n, measure(n), directory) for n in (sorted(CASES) if names is None else names)]


def drift(metrics: Metrics, base: dict, rtol: float | None = None) -> list[tuple]:
    """(metric, baseline, now, allowed, ok) for every metric the baseline records."""
    rows = []
    now = metrics.as_dict()
    for k in ERROR_METRICS + SCORE_METRICS + COUNT_METRICS + ("ulp_above_1",):
        b, v = base.get(k), now.get(k)
        if b is None and v is None:
            continue
        if b is None or v is None:
            rows.append((k, b, v, "present", False))
            continue
        if not (math.isfinite(b) and math.isfinite(v)):
            # a tolerance around inf or NaN would pass anything: non-finite values match only themselves
            allowed, ok = "exact", v == b or (math.isnan(v) and math.isnan(b))
        elif k in COUNT_METRICS:
            allowed, ok = 0, v == b
        elif k in ATOL:
            allowed = ATOL[k]
            ok = abs(v - b) <= allowed
        else:
            r = RTOL.get(k, 0.05) if rtol is None else rtol
            allowed = r * abs(b) + 1e-30
            ok = (math.isnan(v) and math.isnan(b)) or abs(v - b) <= allowed
        rows.append((k, b, v, allowed, bool(ok)))
    return rows


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def assert_precision(
    result, baseline: str, *, directory=None, rtol: float | None = None, update: bool = False
) -> Metrics:
    """Assert that ``result`` matches the golden baseline ``baseline`` within tolerance.

    Args:
        result: a :class:`~precision.metrics.Metrics`, or ``(out, ref)`` / ``(out, ref, abs_ref)``.
        baseline: the baseline's name (a file ``<directory>/<baseline>.json``).
        directory: where baselines live (default ``tests/baselines``).
        rtol: one relative tolerance for every error metric (default: per metric, ``RTOL``).
        update: write ``result`` as the new baseline instead of comparing (the deliberate update).

    Returns the measured metrics. Raises AssertionError with the drift of each metric.
    """
    if isinstance(result, Metrics):
        m = result
    elif isinstance(result, (tuple, list)) and len(result) in (2, 3):
        m = compare(*result[:2], abs_ref=result[2] if len(result) > 2 else None)
    else:
        raise InputTypeError(
            f"assert_precision: result must be a Metrics or (out, ref) / (out, ref, abs_ref), got "
            f"{type(result).__name__}."
        )
    _path(baseline, directory)  # the name checked before any work
    if rtol is not None:
        rtol = check_number("assert_precision", "rtol", rtol, 0.0)
    update = check_bool("assert_precision", "update", update)
    if update:
        write(baseline, m, directory)
        return m
    rows = drift(m, load(baseline, directory), rtol)
    if not all(r[-1] for r in rows):
        bad = [r[0] for r in rows if not r[-1]]
        lines = [
            f"precision drift against baseline {baseline!r} on {bad} "
            f"(if the change is intended: npu-jax precision --update-baselines):",
            f"  {'metric':<13} {'baseline':>11} {'now':>11} {'drift':>10} {'allowed':>10}  verdict",
        ]
        for k, b, v, allowed, ok in rows:
            try:
                d = (
                    f"{(v - b) / abs(b):+.1%}"
                    if b not in (0, None) and k not in COUNT_METRICS
                    else _fmt(v - b)
                )
            except TypeError:
                d = "-"
            lines.append(
                f"  {k:<13} {_fmt(b):>11} {_fmt(v):>11} {d:>10} {_fmt(allowed):>10}  "
                f"{'ok' if ok else 'DRIFT'}"
            )
        raise AssertionError("\n".join(lines))
    return m


__all__ = [
    "CASES",
    "DEFAULT_DIR",
    "Case",
    "assert_precision",
    "drift",
    "load",
    "measure",
    "update_baselines",
    "write",
]

"""Precision lab: formats and rounding, metrics, error budgets, strategies, experiments, baselines.

Everything is measured on the emulator's own arithmetic (``npu_jax``'s Policy decides operand,
accumulator, output and vector formats inside the machine)::

    import precision
    r = precision.round_to(x, "fp16", mode="stochastic", key=jax.random.key(0))
    m = precision.compare(out, ref, abs_ref=conv_of_abs)     # relative L2, ULPs, cosine, ...
    precision.assert_within_budget(m, precision.layer_budget("conv", precision.layer_bounds(576)))
    precision.assert_precision(m, baseline="conv3x3_fp16_mixed")      # golden-baseline regression
    res = precision.run_experiments(depths=(4, 8, 16, 32))            # strategies vs depth
    cal = precision.calibrate(activations, "entropy")                # int8 range, scale, zero point
    xq = precision.quantize(x, scale=cal.scale, zero_point=cal.zero_point)   # ONNX QuantizeLinear
"""

import importlib

from npu_jax.core.policy import Policy
from precision import baselines, formats, strategies
from precision.baselines import assert_precision
from precision.budgets import (
    BUDGETS,
    Budget,
    Int8Bounds,
    LayerBounds,
    assert_within_budget,
    budget_for,
    gamma,
    gamma_K,
    gamma_tilde,
    int8_bounds,
    int8_budget,
    layer_bounds,
    layer_budget,
    prob_bound,
)
from precision.calibration import Calibration, calibrate
from precision.experiments import SCENARIOS, run_experiments
from precision.formats import FORMATS, FloatFormat, get_format
from precision.metrics import Metrics, compare
from precision.quantization import QuantizedTensor, dequantize, quantize
from precision.rounding import MODES, round_to
from precision.strategies import STRATEGIES, StackSpec, run_strategy

__all__ = [
    "BUDGETS",
    "FORMATS",
    "MODES",
    "SCENARIOS",
    "STRATEGIES",
    "Budget",
    "Calibration",
    "FloatFormat",
    "Int8Bounds",
    "LayerBounds",
    "Metrics",
    "Policy",
    "QuantizedTensor",
    "StackSpec",
    "assert_precision",
    "assert_within_budget",
    "baselines",
    "budget_for",
    "calibrate",
    "compare",
    "dequantize",
    "formats",
    "gamma",
    "gamma_K",
    "gamma_tilde",
    "get_format",
    "int8_bounds",
    "int8_budget",
    "layer_bounds",
    "layer_budget",
    "network",
    "prob_bound",
    "quantize",
    "round_to",
    "run_experiments",
    "run_strategy",
    "strategies",
]


def __getattr__(name: str):
    if name == "network":  # the network study reads ONNX models: loaded on first use
        return importlib.import_module("precision.network")
    raise AttributeError(f"module 'precision' has no attribute {name!r}")

"""Closed-form cost models of the kernels, held to the emulator by the tests."""

from npu_jax.cost import pool, relayout
from npu_jax.cost.conv import Prediction, cycles, lower_bound, predict

__all__ = ["Prediction", "cycles", "lower_bound", "pool", "predict", "relayout"]

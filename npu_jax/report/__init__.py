"""Reports: counters -> ratios, % of peak, bottleneck; text summary, Chrome trace, timeline plot.

``lanes_used`` (the profiler lanes a report's timeline draws, for plots side by side) is loaded on first
use: the plotting module needs matplotlib."""

import importlib

from npu_jax.report.report import Report

__all__ = ["Report", "lanes_used"]


def __getattr__(name: str):
    if name == "lanes_used":
        return importlib.import_module("npu_jax.report.plot").lanes_used
    raise AttributeError(f"module 'npu_jax.report' has no attribute {name!r}")

"""Reports: counters -> ratios, % of peak, bottleneck; text summary, Chrome trace, timeline plot."""

from npu_jax.report.report import Report

__all__ = ["Report"]

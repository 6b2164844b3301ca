"""Reports: counters -> ratios, % of peak, bottleneck; text summary, Chrome trace, timeline plot."""

# the machine first: npu_jax.core's launch imports Report from here, so reaching this package first
# (``npu_jax.Report`` in a fresh process) would otherwise find report.py half imported
import npu_jax.core  # noqa: F401, I001
from npu_jax.report.report import Report

__all__ = ["Report"]

"""What a report's numbers mean, in words: the prose that the demo and the CLI print beside a report.

``bottleneck_reading(report)`` says how much of the peak a kernel reached and which pipe held it back;
``strategies_reading(rows)`` reads a Conv2D strategies table (:func:`npu_jax.studies.conv_strategies`);
``trace_note(report)`` says when a trace dropped events. Every number comes from the report or rows.

Example:
    >>> from npu_jax.report.reading import span
    >>> span([1.0, 2.5], "{:.1f}x")
    '1.0x to 2.5x'
"""

from __future__ import annotations

import numpy as np

from npu_jax.core.pipes import RATIO_NAMES

# What each lane's name means, for the reading of the bottleneck.
PIPE_MEANING = {
    "MTE2": "DMA from global memory into L1/UB (GM bandwidth)",
    "MTE1": "L1 -> L0A/L0B operand loads",
    "CUBE": "the Cube itself (matrix multiply)",
    "FIXP": "Fixpipe, L0C -> GM with conversion",
    "VECTOR": "the Vector unit",
    "MTE3": "DMA from UB back to global memory",
    "SCALAR": "the Scalar unit",
    "HBM": "the chip's HBM, shared by every core (reads that missed L2, and writes)",
}


def span(values, fmt: str) -> str:
    """'lo to hi' in ``fmt``, or one value when they print the same."""
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo} to {hi}"


def trace_note(report) -> str:
    """A line saying how many events the trace dropped, or ``""`` when it kept them all."""
    dropped = report.trace_dropped
    if not dropped:
        return ""
    return (
        f"note: the trace kept the first {np.shape(report.trace['pipe'])[1]} events per core; "
        f"{dropped:,} later events were dropped from the trace file and the plot."
    )


def bottleneck_reading(report) -> str:
    """Two or three sentences saying what the report's numbers mean."""
    busy = report.pipe_busy
    neck = report.bottleneck
    core_cycles = report.core_cycles
    if neck == "HBM":
        why = (
            f"The bottleneck is HBM -- {PIPE_MEANING[neck]}: {report.hbm_bytes:,} B need "
            f"{report.hbm_cycles:,} cycles, longer than any core runs ({report.core_end:,})."
        )
    else:
        ratio = report.ratios[RATIO_NAMES[neck]]
        why = (
            f"The bottleneck is {neck} -- {PIPE_MEANING[neck]} -- busy {ratio:.0%} of the run "
            f"({busy[neck]:,} cycles over all cores); the Cube was busy {busy['CUBE']:,}."
        )
    lines = [
        f"Reading: the kernel turned {report.pct_peak:.1f}% of the chip's peak "
        f"({report.pct_peak_launched:.1f}% of its {report.n_cores} launched cores') into useful FLOPs "
        f"(mac_ratio {report.ratios['mac_ratio']:.2f}).",
        why,
        f"The kernel is {report.roofline}.",
    ]
    if report.n_cores > 1 and core_cycles.min() < 0.9 * core_cycles.max():
        lines.append(
            f"Cores finish between {int(core_cycles.min()):,} and {int(core_cycles.max()):,} "
            f"cycles: the output blocks do not divide evenly over the cores."
        )
    return "\n".join(lines)


def strategies_reading(rows) -> str:
    """Three lines read off a strategies table: the best strategy per layer, how far it is from
    the naive ``output_tiled`` kernel, and what holds it back."""
    layers: dict[str, list] = {}
    for r in rows:
        layers.setdefault(r.layer, []).append(r)
    best = {name: max(rs, key=lambda r: r.pct_peak) for name, rs in layers.items()}
    short = lambda name: name.split()[0]  # noqa: E731
    winners = [b.strategy for b in best.values()]
    top = max(winners, key=winners.count)  # ties: the first layer's
    lines = [
        "Reading: the best strategy per layer is "
        + ", ".join(f"{short(n)} {b.strategy} ({b.pct_peak:.1f}% of peak)" for n, b in best.items())
        + f"; {top} wins {winners.count(top)} of {len(best)} layers."
    ]
    naive = {n: next((r for r in rs if r.strategy == "output_tiled"), None) for n, rs in layers.items()}
    pairs = [(best[n], naive[n]) for n in layers if naive[n] is not None]
    if pairs:
        speedups = [o.cycles / max(1, b.cycles) for b, o in pairs]
        relaid = max((b.relayout_cycles for b, _ in pairs), default=0)
        lines.append(
            f"Against output_tiled, which re-reads its input window for every tap and Cout block and "
            f"its weights for every tile, in short NCHW bursts, the best averages "
            f"{np.mean([b.pct_peak for b, _ in pairs]):.1f}% of peak vs "
            f"{np.mean([o.pct_peak for _, o in pairs]):.1f}%: {span(speedups, '{:.2f}x')} fewer cycles "
            f"per layer"
            + (
                f" (before the NC1HWC0 relayout kernel, listed apart: up to {relaid:,} cycles)."
                if relaid
                else "."
            )
        )
    necks = [b.bottleneck for b in best.values()]
    neck = max(necks, key=necks.count)
    others = [f"{b.bottleneck} on {short(n)}" for n, b in best.items() if b.bottleneck != neck]
    lines.append(
        f"The best kernel's bottleneck is {neck} -- {PIPE_MEANING.get(neck, neck)} -- on "
        f"{necks.count(neck)} of {len(necks)} layers"
        + (f" ({', '.join(others)})" if others else "")
        + f"; its Cube is busy {span([b.mac_ratio for b in best.values()], '{:.0%}')} of the run "
        f"(mac_ratio)."
    )
    return "\n".join(lines)


__all__ = ["PIPE_MEANING", "bottleneck_reading", "span", "strategies_reading", "trace_note"]

"""Timeline (Gantt) plot of one core's pipes with matplotlib."""

from __future__ import annotations

_LANE_ORDER = ["MTE2", "MTE1", "CUBE", "FIXP", "VECTOR", "MTE3", "SCALAR"]
_COLORS = {
    "MTE2": "#4c72b0",
    "MTE1": "#55a868",
    "CUBE": "#c44e52",
    "FIXP": "#8172b2",
    "VECTOR": "#ccb974",
    "MTE3": "#64b5cd",
    "SCALAR": "#999999",
}


def plot_timeline(
    report, path=None, core: int = 0, ax=None, max_cycles: int | None = None, title: str | None = None
):
    """Draw one bar per instruction on its pipe's lane; returns the matplotlib Axes."""
    import matplotlib

    if ax is None and path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    events = report.events(core)
    if ax is None:
        fig, ax = plt.subplots(figsize=(11, 3.2))
    lanes = [lane for lane in _LANE_ORDER if any(e["lane"] == lane for e in events)]
    for y, lane in enumerate(lanes):
        spans = [
            (e["start"], e["end"] - e["start"])
            for e in events
            if e["lane"] == lane and e["end"] > e["start"] and (max_cycles is None or e["start"] < max_cycles)
        ]
        ax.broken_barh(spans, (y - 0.4, 0.8), facecolors=_COLORS[lane], edgecolor="none")
    ax.set_yticks(range(len(lanes)), lanes)
    ax.invert_yaxis()
    ax.set_xlabel("cycle")
    end = max((e["end"] for e in events), default=1)
    ax.set_xlim(report.offset if max_cycles is None else 0, end if max_cycles is None else max_cycles)
    ax.set_title(
        title
        or f"{report.name} on {report.hw.name}, core {core}: "
        f"{report.cycles:,} cycles, {report.pct_peak:.1f}% of peak"
    )
    if path is not None:
        ax.figure.tight_layout()
        ax.figure.savefig(path, dpi=110)
    return ax

"""Timeline (Gantt) plot of one core's lanes with matplotlib.

Lanes are drawn top to bottom in :data:`~npu_jax.core.pipes.LANE_ORDER`, the order of the Chrome
trace. Consecutive instructions on a lane alternate between two shades of the lane's colour, so
back-to-back instructions (no gap between them) still show where one ends and the next begins.
"""

from __future__ import annotations

from npu_jax.core.pipes import LANE_ORDER

# (shade of even instructions, shade of odd ones) per lane
_COLORS = {
    "MTE2": ("#4c72b0", "#8ba6d6"),
    "MTE1": ("#55a868", "#93cc9f"),
    "CUBE": ("#c44e52", "#e08d90"),
    "FIXP": ("#8172b2", "#b3a8d8"),
    "VECTOR": ("#b59f3b", "#ddc978"),
    "MTE3": ("#3f93ad", "#8ccbe0"),
    "SCALAR": ("#777777", "#b5b5b5"),
}


def lanes_used(*reports, core: int = 0) -> list[str]:
    """The lanes (in lane order) on which any of ``reports`` ran an instruction on ``core``."""
    used = {e["lane"] for r in reports for e in r.events(core) if e["end"] > e["start"]}
    return [lane for lane in LANE_ORDER if lane in used]


def plot_timeline(
    report,
    path=None,
    core: int = 0,
    ax=None,
    max_cycles: int | None = None,
    title: str | None = None,
    lanes=None,
):
    """Draw one bar per instruction on its lane; returns the matplotlib Axes. ``lanes`` (a list of
    lane names) fixes the rows, e.g. to share them between panels; default: the lanes used."""
    import matplotlib

    if ax is None and path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    events = report.events(core)
    if ax is None:
        fig, ax = plt.subplots(figsize=(11, 3.2))
    lanes = lanes_used(report, core=core) if lanes is None else list(lanes)
    unknown = [lane for lane in lanes if lane not in _COLORS]
    if unknown:
        raise ValueError(f"lanes must be names from {LANE_ORDER}, got {unknown}.")
    for y, lane in enumerate(lanes):
        spans = [
            (e["start"], e["end"] - e["start"])
            for e in events
            if e["lane"] == lane and e["end"] > e["start"] and (max_cycles is None or e["start"] < max_cycles)
        ]
        shades = [_COLORS[lane][i % 2] for i in range(len(spans))]
        ax.broken_barh(spans, (y - 0.4, 0.8), facecolors=shades, edgecolor="none")
    ax.set_yticks(range(len(lanes)), lanes)
    ax.set_ylim(len(lanes) - 0.5, -0.5)  # first lane on top
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


__all__ = ["lanes_used", "plot_timeline"]

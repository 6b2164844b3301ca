"""Fusion studies: the reference table's rows, traced analyses, the side-by-side timeline, the float
reference of a fused chain. The ``npu-jax fuse`` command, the demo and the notebooks use them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import fusion
from npu_jax.cli.data import conv_reference, demo_layers
from npu_jax.report.plot import lanes_used


def traced_analysis(
    x_shape,
    w_shape,
    epilogue=("relu",),
    *,
    stride=1,
    padding=0,
    dilation=1,
    hw=None,
    strategy: str = "img2col",
    name: str | None = None,
):
    """:func:`fusion.analyze` with both runs' instruction traces kept (for --trace / --plot)."""
    return fusion.analyze(
        x_shape,
        w_shape,
        epilogue,
        stride=stride,
        padding=padding,
        dilation=dilation,
        hw=hw,
        strategy=strategy,
        name=name,
        trace=True,
    )


def plot_side_by_side(unfused, fused, path=None, core: int = 0, title: str | None = None):
    """Timelines of core ``core`` of the two versions on shared axes: one cycle axis (so the shorter
    bar is the saving) and the same lanes in the same rows."""
    # Imported here, as npu_jax.report.plot does: the backend (Agg when writing a file) must be chosen
    # before pyplot is first imported, and importing pyplot costs every other user of fusion ~0.5 s.
    import matplotlib

    if path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    end = max(unfused.cycles, fused.cycles)
    lanes = lanes_used(unfused, fused, core=core)
    fig, axes = plt.subplots(1, 2, figsize=(16, 3.6), sharex=True, sharey=True)
    for ax, (what, rep) in zip(axes, (("unfused", unfused), ("fused", fused))):
        rep.plot_timeline(
            ax=ax,
            core=core,
            max_cycles=end,
            title=f"{what}: {rep.cycles:,} cycles, {rep.gm_bytes:,} GM bytes (core {core})",
            lanes=lanes,
        )
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return fig


def reference_output(x, w, g, steps, bias=None, residual=None):
    """The chain applied in float64 to ``lax.conv_general_dilated`` (fp32, HIGHEST) of the inputs."""
    y = conv_reference(x, w, g)
    for s in steps:
        if s.op == "bias":
            y = y + np.asarray(bias, np.float64)[None, :, None, None]
        elif s.op == "residual":
            y = y + np.asarray(residual, np.float64)
        elif s.op == "relu":
            y = np.maximum(y, 0.0)
        elif s.op == "leaky_relu":
            y = np.where(y >= 0, y, s.arg * y)
        elif s.op == "clipped_relu":
            y = np.clip(y, 0.0, s.arg)
    return y


def reference_layers(hw) -> tuple:
    """The ResNet-50 reference layers; on the tiny presets the demo's half-size pair (quick)."""
    return demo_layers(hw)


def reference_rows(
    hws,
    epilogue=("bias", "relu"),
    strategy: str = "img2col",
    layers=None,
    progress: Callable | None = None,
    model: bool = False,
) -> list:
    """``fusion.analyze`` on every (chip, reference layer): the rows of the fusion table.
    ``progress(row)``, if given, is called after each analysis; ``model``: as ``analyze``'s."""
    plan = [(hw, lay) for hw in hws for lay in (layers if layers is not None else reference_layers(hw))]
    rows = []
    for hw, lay in plan:
        rows.append(
            fusion.analyze(
                lay.x_shape,
                lay.w_shape,
                epilogue,
                stride=lay.stride,
                padding=lay.padding,
                hw=hw,
                strategy=strategy,
                name=lay.name,
                model=model,
            )
        )
        if progress:
            progress(rows[-1])
    return rows


__all__ = ["plot_side_by_side", "reference_layers", "reference_output", "reference_rows", "traced_analysis"]

"""Pictures of a sweep's rows: a Pareto front and a heat map (matplotlib, imported when drawn)."""

from __future__ import annotations

import pandas as pd


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    """The rows whose point did not fail."""
    return df[df["error"].fillna("") == ""] if "error" in df else df


def pareto(df: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """The rows no other row beats: none has ``x`` as low (on-chip bytes, error) and ``y`` as high
    (throughput) with one of them strictly better. Failed rows (``error`` set) are left out. Sorted by x."""
    for col in (x, y):
        if col not in df:
            raise KeyError(f"no column {col!r} in the sweep's rows; columns are {list(df.columns)}.")
    ok = _ok(df).dropna(subset=[x, y]).sort_values([x, y], ascending=[True, False])
    keep, best = [], float("-inf")
    for i, v in zip(ok.index, ok[y]):
        if v > best:  # the lowest x for every new high of y
            keep.append(i)
            best = v
    return ok.loc[keep]


def plot(
    df: pd.DataFrame, x: str, y: str, *, value: str | None = None, hue: str | None = None, path=None, ax=None
):
    """``value=None``: every row as a point (``y`` against ``x``, coloured by ``hue``) with the Pareto
    front (:func:`pareto`: low x, high y) drawn through it. ``value=COLUMN``: a heat map of that column
    over the grid of ``x`` by ``y`` (the mean where other keys vary). Saves to ``path`` if given;
    returns the matplotlib Axes."""
    import matplotlib

    if path is not None and ax is None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    ok = _ok(df)
    if value is None:
        groups = ok.groupby(hue, sort=True) if hue is not None else [(None, ok)]
        for name, part in groups:
            ax.scatter(part[x], part[y], s=18, label=None if hue is None else f"{hue}={name}")
        front = pareto(ok, x, y)
        ax.step(front[x], front[y], where="post", color="k", lw=1, label="Pareto front")
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        ax.legend(fontsize=8)
    else:
        for col in (x, y, value):
            if col not in ok:
                raise KeyError(f"no column {col!r} in the sweep's rows; columns are {list(ok.columns)}.")
        grid = ok.pivot_table(index=y, columns=x, values=value, aggfunc="mean")
        im = ax.imshow(grid.to_numpy(), origin="lower", aspect="auto", cmap="viridis")
        ax.set_xticks(range(grid.shape[1]), [str(c) for c in grid.columns], rotation=45, fontsize=8)
        ax.set_yticks(range(grid.shape[0]), [str(r) for r in grid.index], fontsize=8)
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        ax.figure.colorbar(im, ax=ax, label=value)
    ax.figure.tight_layout()
    if path is not None:
        ax.figure.savefig(path, dpi=120)
    return ax


__all__ = ["pareto", "plot"]

"""Tiling bounds: one concrete tiling that fixes the buffers of a batch of (traced) tilings.

Under ``ConvPlan.tiling_bound`` a tiling's size fields and stage counts may be traced (``jax.vmap``
over stacked tilings, one compiled timing-only program), each at most the bound's; the fields that
fix the kernel's structure are the bound's for the whole batch. This module holds the rules that
do not need the plan's class: which field is which, the bound of a batch, the checks on a batch.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from npu_jax.core import l2
from npu_jax.errors import TilingError
from npu_jax.hw.config import FRACTAL_ROWS

# traced, at most the bound's: sizes, ping-pong stages, Cout groups, resident weights (True: may be)
BOUNDED_FIELDS = ("ho", "wo", "n", "cin1", "k_l0", "l1_stages", "l0_stages", "cout_split", "weights_resident")
STRUCTURE_FIELDS = ("cores",)  # the bound's, for the whole batch


def rows(tilings) -> list:
    """A list of tilings from a list, or from one stacked tiling (fields with a leading axis)."""
    if dataclasses.is_dataclass(tilings) and not isinstance(tilings, type):
        k = int(np.size(tilings.ho))
        return [jax.tree.map(lambda a, i=i: np.asarray(a).reshape(-1)[i], tilings) for i in range(k)]
    return list(tilings)


def bound_of(cls, tilings):
    """The smallest ``cls`` tiling bound covering ``tilings`` (see ``ConvTiling.bound``)."""
    ts = rows(tilings)
    if not ts or not all(isinstance(t, cls) for t in ts):
        raise TypeError(
            f"{cls.__name__}.bound takes {cls.__name__}s (a list or one stacked), got {tilings!r}."
        )
    out = {f: max(int(getattr(t, f)) for t in ts) for f in BOUNDED_FIELDS}
    out["weights_resident"] = bool(out["weights_resident"])
    for f in STRUCTURE_FIELDS:
        seen = sorted({None if getattr(t, f) is None else int(getattr(t, f)) for t in ts}, key=str)
        if len(seen) > 1:
            raise TilingError(
                f"{cls.__name__}.bound: the batch mixes {f}={seen}; one program runs one structure, "
                f"split the batch by {f}."
            )
        out[f] = seen[0]
    return cls(**out)


def check_within(bound, tilings) -> None:
    """Raise TilingError unless every concrete tiling of ``tilings`` (scalar fields) fits ``bound``:
    sizes and stages at most the bound's, structure equal to it."""
    for i, t in enumerate(tilings):
        for f in BOUNDED_FIELDS:
            if int(getattr(t, f)) > getattr(bound, f):
                raise TilingError(
                    f"tiling {i} has {f}={int(getattr(t, f))}, above the tiling_bound's {f}="
                    f"{getattr(bound, f)}; raise the bound (ConvTiling.bound(tilings) covers a batch)."
                )
        for f in STRUCTURE_FIELDS:
            v = getattr(t, f)
            if (None if v is None else int(v)) != getattr(bound, f):
                raise TilingError(
                    f"tiling {i} has {f}={v!r}, the tiling_bound {f}={getattr(bound, f)!r}: one program "
                    f"runs one structure; split the batch by {f}."
                )


def check_l2(p, gm) -> None:
    """Refuse a bound whose Cout blocks ``n`` change which GM tensors the L2 keeps: the K-major
    weights (``wkn``) take ceil(K / n) * n columns, and one program keeps one set. ``p``: a
    ``ConvPlan`` under a tiling bound; ``gm``: its launch's GmSpecs."""
    want = l2.kept(p.hw, gm)
    for n in range(FRACTAL_ROWS, p.T.n + 1, FRACTAL_ROWS):
        shape = (-(-p.B.k // n), p.k_total_cap, n)
        alt = tuple(dataclasses.replace(s, shape=shape) if s.name == "wkn" else s for s in gm)
        if l2.kept(p.hw, alt) != want:
            raise TilingError(
                f"tiling_bound: with n={n} the L2 keeps {l2.kept(p.hw, alt)}, with the bound's n={p.T.n} "
                f"it keeps {want}; split the batch by n (one program keeps one set)."
            )


__all__ = ["BOUNDED_FIELDS", "STRUCTURE_FIELDS", "bound_of", "check_l2", "check_within", "rows"]
